// Command edgemq is the EdgeMQ binary: the embedded broker's demo, and admin and client verbs
// that work on a data dir in-process (offline: the dir must not be held by another process).
//
// Run `edgemq help` for the commands and `edgemq help <command>` for each one's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
)

// version is set at link time with -ldflags "-X main.version=…" (see the Makefile).
var version = "dev"

// command is one verb of the binary.
type command struct {
	name    string
	args    string // the arguments after the flags, for the usage line
	summary string
	// setup declares the command's flags; run executes it with the remaining arguments.
	setup func(fs *flag.FlagSet) func(args []string, out io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"demo", "", "produce and consume telemetry on an embedded broker; report throughput, latency and lag", demoCommand},
		{"verify", "", "recover a data dir, read every record and queue entry, report damage", verifyCommand},
		{"topic", "list | create | update | delete", "list or change topics", topicCommand},
		{"send", "[body ...]", "send messages (the arguments, or stdin lines)", sendCommand},
		{"consume", "", "pull messages of a topic for a group and print them", consumeCommand},
		{"offset", "show | reset", "show or reset a group's consume offsets", offsetCommand},
		{"stats", "", "show queues, their offsets, and a group's lag", statsCommand},
		{"version", "", "print the version, Go version and platform", nil},
		{"help", "[command]", "print help", nil},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// run executes the command line args and returns the process exit code: 0 on success, 1 on
// failure, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "edgemq %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c := find(args[1]); c != nil && c.setup != nil {
				fs := newFlagSet(c, stdout)
				c.setup(fs)
				fs.Usage()
				return 0
			}
			fmt.Fprintf(stderr, "edgemq: no help for %q\n", args[1])
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
	fs := newFlagSet(c, stderr)
	exec := c.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := exec(fs.Args(), stdout); err != nil {
		fmt.Fprintf(stderr, "edgemq %s: %v\n", name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func find(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func newFlagSet(c *command, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: edgemq %s [flags] %s\n\n%s.\n\nFlags:\n", c.name, c.args, capitalize(c.summary))
		fs.PrintDefaults()
	}
	return fs
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: edgemq <command> [flags] [arguments]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	sort.Strings(names)
	for _, n := range names {
		c := find(n)
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command but version and help opens a data dir in-process (-data, default ./data, or
data_dir in the -config file). A data dir is held by one process at a time: a second one
fails at once, naming the holder's pid.

Settings come from a TOML file (-config FILE; configs/edgemq.toml documents every key) and
from flags named as the keys, -section.key: -store.flush async. Flags override the file,
which overrides the defaults.
Run 'edgemq help <command>' for a command's flags.
`)
}

// commonFlags adds -config and a flag for every config key (-data for data_dir), and
// returns a loader of the resulting config: defaults, then the file, then the flags.
func commonFlags(fs *flag.FlagSet) func() (*config, error) {
	cfgPath := fs.String("config", "", "config `file` in TOML (configs/edgemq.toml documents every key)")
	applyFlags := configFlags(fs)
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
