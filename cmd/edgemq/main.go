// Command edgemq is the EdgeMQ binary: the daemon (edgemq serve, which serves RocketMQ
// clients over TCP), the embedded broker's demo, a load generator (bench), and admin and
// client verbs that work on a data dir in-process (offline: the dir must not be held by
// another process) or, with -server, on a running server over TCP.
//
// Run `edgemq help` for the commands and `edgemq help <command>` for each one's flags.
//
// Exit codes: 0 success, 1 failure (the error is printed as "edgemq <command>: <error>"),
// 2 a usage error, 130 interrupted (Ctrl-C; 143 for SIGTERM). The first interrupt stops a
// command cleanly (demo and consume print their summary and keep their offsets); a second
// one exits at once. serve runs until SIGTERM or SIGINT: having then stopped cleanly, it
// exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// version is set at link time with -ldflags "-X main.version=…" (see the Makefile).
var version = "dev"

// A command is one verb of the binary: edgemq <name> [flags] [arguments].
type command struct {
	name    string
	args    string // the arguments besides the flags, for the usage line
	summary string // one line for `edgemq help`
	doc     string // what `edgemq help <name>` says after the summary; may be empty
	// verbs are the actions of a command that has them (topic list, offset show): its first
	// argument, with the flags before it, after it, or both.
	verbs []verb
	// setup declares the command's flags and returns what runs it.
	setup func(fs *flag.FlagSet) runFunc
	// daemon: the command runs until a signal asks it to stop (serve). Having stopped
	// cleanly it exits 0, not 128 + the signal's number.
	daemon bool
}

// A verb is one action of a command with verbs.
type verb struct {
	name, summary string
}

// runFunc runs a command with the arguments left after the flags (for a command with verbs,
// the verb alone), printing its data on out and progress on errOut. ctx ends at the first
// interrupt: a command that runs long (demo, consume, send from stdin, verify) then stops
// what it is doing and shuts down cleanly.
type runFunc func(ctx context.Context, args []string, out, errOut io.Writer) error

var commands []command

func init() {
	commands = []command{
		{name: "serve", summary: "run the broker as a daemon: serve RocketMQ clients over TCP until SIGTERM",
			doc: serveDoc, setup: serveCommand, daemon: true},
		{name: "demo", summary: "produce and consume telemetry on an embedded broker; report throughput, latency and lag",
			doc: demoDoc, setup: demoCommand},
		{name: "verify", summary: "recover a data dir, read every record and queue entry, report damage",
			doc: verifyDoc, setup: verifyCommand},
		{name: "topic", summary: "list or change topics", doc: topicDoc + serverDoc, verbs: topicVerbs, setup: topicCommand},
		{name: "send", args: "[body ...]", summary: "send messages (the arguments, or stdin lines)", doc: sendDoc + serverDoc, setup: sendCommand},
		{name: "consume", summary: "pull messages of a topic for a group and print them", doc: consumeDoc + serverDoc, setup: consumeCommand},
		{name: "offset", summary: "show or reset consumer groups' offsets", doc: offsetDoc + serverDoc, verbs: offsetVerbs, setup: offsetCommand},
		{name: "stats", summary: "show queues, their offsets, the commitlog, and a group's lag", doc: statsDoc + serverDoc, setup: statsCommand},
		{name: "bench", summary: "load a broker with producers and consumers; report throughput and latency percentiles",
			doc: benchDoc, setup: benchCommand},
		{name: "version", summary: "print the version, Go version and platform", setup: versionCommand},
		{name: "help", args: "[command]", summary: "print help: the commands, or one command's verbs and flags"},
	}
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain runs the command line as the process does: an interrupt (SIGINT, SIGTERM) cancels
// the command's context, and a second one exits the process at once.
func runMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interruptContext(stderr)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

// interrupted is the cause of a context canceled by a signal.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted (" + i.sig.String() + ")" }

// exitCode is the shell's code of a process killed by the signal: 128 + its number.
func (i interrupted) exitCode() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

// interruptContext returns a context that the first SIGINT or SIGTERM cancels, with an
// interrupted cause, and a stop function that stops listening. After the first signal a
// second one exits the process at once. The goroutine it starts exits on stop.
func interruptContext(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var first interrupted
		select {
		case s := <-sigs:
			first = interrupted{s}
			if lg := signalLogger.Load(); lg != nil {
				lg.Info("stopping cleanly; signal again to quit at once", "signal", signalName(s))
			} else {
				fmt.Fprintf(stderr, "\nedgemq: %v: stopping cleanly; interrupt again to quit at once\n", s)
			}
			cancel(first)
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			if lg := signalLogger.Load(); lg != nil {
				lg.Warn("quitting now, without a clean stop: the next start recovers the store", "signal", signalName(s))
			} else {
				fmt.Fprintf(stderr, "edgemq: %v again: quitting now\n", s)
			}
			os.Exit(first.exitCode())
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		<-exited
		cancel(nil)
	}
}

// signalLogger, when set, is where the interrupt handler reports the signals instead of
// printing to stderr: serve sets it to its logger, so that its stderr stays one log line per
// event.
var signalLogger atomic.Pointer[slog.Logger]

// signalName is a signal's name as kill(1) and systemd write it: SIGTERM.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// stopping is called by a long-running command (demo, consume) that an interrupt stopped, as
// it begins to shut down. Tests make it block, to interrupt the shutdown a second time.
var stopping = func() {}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// usageError returns an error of the command line, which exits 2.
func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// run executes the command line args and returns the process exit code: 0 on success, 1 on
// failure, 2 on a usage error, 128 + the signal's number when ctx was canceled by one.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-version", "--version":
		name = "version"
	case "help", "-h", "-help", "--help":
		if len(args) > 2 {
			fmt.Fprintln(stderr, "edgemq help: want one command, or none")
			return 2
		}
		if len(args) == 2 && args[1] != "help" {
			if c := find(args[1]); c != nil && c.setup != nil {
				commandUsage(stdout, c)
				return 0
			}
			fmt.Fprintf(stderr, "edgemq help: unknown command %q; run 'edgemq help' for the list\n", args[1])
			return 2
		}
		usage(stdout)
		return 0
	}
	c := find(name)
	if c == nil || c.setup == nil {
		fmt.Fprintf(stderr, "edgemq: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports parse errors itself: one line, not every flag
	fs.Usage = func() {}
	exec := c.setup(fs)
	rest, err := parseArgs(fs, c, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, c)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "edgemq %s: %v\nRun 'edgemq help %s' for its verbs and flags.\n", c.name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), c.name)
		return 2
	}
	err = safely(func() error { return exec(ctx, rest, stdout, stderr) })
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) && !(c.daemon && err == nil) {
		// The command stopped early, on purpose: its own report says what it did.
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "edgemq %s: %v\n", c.name, err)
		}
		return sig.exitCode()
	}
	if err != nil {
		if errors.As(err, new(loggedError)) {
			return 1
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "edgemq %s: %s\nRun 'edgemq help %s' for its verbs and flags.\n", c.name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), c.name)
			return 2
		}
		fmt.Fprintf(stderr, "edgemq %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// safely calls f, turning a panic in it into an error: a user sees one line, not a stack
// trace. (A panic in another goroutine still crashes the process.)
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v (a bug: please report it, with 'edgemq version')", r)
		}
	}()
	return f()
}

// parseArgs parses the flags of c and returns the arguments left. Flags may come before,
// between or after the arguments, until "--", after which all are arguments. For a command
// with verbs the first argument is the verb (`topic list -data d` is `topic -data d list`),
// and it returns the verb alone.
func parseArgs(fs *flag.FlagSet, c *command, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			rest = append(rest, left...)
			break
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
	if len(c.verbs) == 0 {
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, usageError("want a verb: %s", verbList(c))
	}
	v := rest[0]
	if !slices.ContainsFunc(c.verbs, func(x verb) bool { return x.name == v }) {
		return nil, usageError("unknown verb %q: want %s", v, verbList(c))
	}
	if len(rest) > 1 {
		return nil, usageError("%s %s takes no arguments besides its flags, got %q", c.name, v, rest[1:])
	}
	return rest[:1], nil
}

func verbList(c *command) string {
	names := make([]string, len(c.verbs))
	for i, v := range c.verbs {
		names[i] = v.name
	}
	return strings.Join(names, ", ")
}

func find(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// commandUsage writes `edgemq help <command>`: usage line, summary and doc, verbs, the
// command's own flags, then the config flags, which every command that opens a data dir has.
func commandUsage(w io.Writer, c *command) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	line := "edgemq " + c.name
	if len(c.verbs) > 0 {
		line += " <verb>"
	}
	line += " [flags]"
	if c.args != "" {
		line += " " + c.args
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n", line, capitalize(c.summary))
	if c.doc != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.doc))
	}
	if len(c.verbs) > 0 {
		fmt.Fprint(w, "\nVerbs (the flags may come before or after the verb):\n")
		for _, v := range c.verbs {
			fmt.Fprintf(w, "  %-8s %s\n", v.name, v.summary)
		}
	}
	own := flag.NewFlagSet(c.name, flag.ContinueOnError)
	cfg := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		dst := own
		if _, ok := f.Value.(*settingFlag); ok || f.Name == "config" {
			dst = cfg
		}
		dst.Var(f.Value, f.Name, f.Usage)
	})
	for _, part := range []struct {
		title string
		fs    *flag.FlagSet
	}{
		{"Flags:", own},
		{"Config flags (-config FILE, and every key of the config file as -section.key; flags\n" +
			"override the file, which overrides the defaults; configs/edgemq.toml documents each key):", cfg},
	} {
		n := 0
		part.fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", part.title)
		part.fs.SetOutput(w)
		part.fs.PrintDefaults()
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: edgemq <command> [flags] [arguments]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
		if len(c.verbs) > 0 {
			fmt.Fprintf(w, "  %-8s   verbs: %s\n", "", verbList(&c))
		}
	}
	fmt.Fprint(w, `
Every command but version and help works on a data dir in-process (-data, default ./data,
or data_dir in the -config file). A data dir is held by one process at a time: a second one
fails at once, naming the holder's pid. topic, send, consume, offset, stats and bench also
work against a running server (edgemq serve, or Apache RocketMQ) with -server ip:port, the
name server's address, or $EDGEMQ_SERVER; their output is the same either way.
Only serve, demo, send -create and topic create make a new data dir; the other commands say
so when there is none, and stats, topic list, offset show and verify never write to it.

Settings come from a TOML file (-config FILE; configs/edgemq.toml documents every key) and
from flags named as the keys, -section.key: -store.flush async. Flags override the file,
which overrides the defaults. Flags may come before or after a verb or argument (edgemq
topic list -all), up to "--", after which every word is an argument.
Commands that print data print JSON with -json.

Exit codes: 0 success; 1 failure, printed as "edgemq <command>: <error>"; 2 a usage error;
130 interrupted. The first Ctrl-C stops a command cleanly (demo and consume print their
summary, offsets are saved); a second one quits at once. serve runs until SIGTERM or
SIGINT and, having stopped cleanly, exits 0.

Run 'edgemq help <command>' for a command's verbs and flags.
`)
}

// versionCommand prints the version.
func versionCommand(fs *flag.FlagSet) runFunc {
	jsonOut := jsonFlag(fs)
	return func(_ context.Context, args []string, out, _ io.Writer) error {
		if len(args) > 0 {
			return usageError("version takes no arguments")
		}
		if *jsonOut {
			return writeJSON(out, struct {
				Version string `json:"version"`
				Go      string `json:"go"`
				OS      string `json:"os"`
				Arch    string `json:"arch"`
			}{version, runtime.Version(), runtime.GOOS, runtime.GOARCH})
		}
		_, err := fmt.Fprintf(out, "edgemq %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
}

// commonFlags adds -config and a flag for every config key (-data for data_dir) but those
// of one command's own sections, and returns a loader of the resulting config: defaults,
// then the file, then the flags.
func commonFlags(fs *flag.FlagSet) func() (*config, error) {
	return commandFlags(fs, "")
}

// commandFlags is commonFlags for command, with the flags of its own sections too.
func commandFlags(fs *flag.FlagSet, command string) func() (*config, error) {
	cfgPath := fs.String("config", "", "config `file` in TOML (configs/edgemq.toml documents every key)")
	applyFlags := configFlags(fs, command)
	return func() (*config, error) {
		c := newConfig()
		if *cfgPath != "" {
			if err := loadConfig(c, *cfgPath); err != nil {
				return nil, err
			}
		}
		applyFlags(c)
		return c, nil
	}
}
