package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/edge/uplink"
	"github.com/edgemq/edgemq/store"
)

// config is everything the config file (configs/edgemq.toml documents every key) or the
// command line can set. A zero field of store and broker takes the options' default when
// the broker opens: so a data dir keeps the segment size it was created with unless a
// config names one.
type config struct {
	dataDir       string
	logLevel      slog.Level
	logFormat     logFormat
	logTimestamps logTimestamps
	store         store.Options
	broker        edge.Options
	server        server.Options
	uplink        uplink.Options
	security      security // TLS and ACL files, read into server when serve starts
	// shutdownTimeout is how long serve waits for the server to stop.
	shutdownTimeout time.Duration
	// httpListen is the address of serve's HTTP listener, or "off".
	httpListen string
}

// newConfig returns the config of no file and no flags.
func newConfig() *config {
	return &config{dataDir: defaultDataDir, shutdownTimeout: defaultShutdownTimeout, httpListen: defaultHTTPListen}
}

// options returns the broker options the config describes, logging to stderr.
func (c *config) options() *edge.Options {
	lg, _ := c.newLogger(os.Stderr)
	return c.optionsLogging(lg)
}

// optionsLogging returns the broker options the config describes, logging to lg.
func (c *config) optionsLogging(lg *slog.Logger) *edge.Options {
	o := c.broker
	so := c.store
	so.Logger = lg
	o.Store = &so
	o.Logger = lg
	return &o
}

// lookup returns the setting of key in section ("" for the top level), or nil.
func lookup(section, key string) setting {
	for _, s := range settings {
		if d := s.describe(); d.section == section && d.key == key {
			return s
		}
	}
	return nil
}

func isSection(name string) bool {
	for _, s := range sections {
		if s.name == name && name != "" {
			return true
		}
	}
	return false
}

// loadConfig applies the TOML config file at path to c. On error c may be half applied.
func loadConfig(c *config, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return parseConfig(c, b, path)
}

// parseConfig applies a TOML config file to c; name is the file's name in errors. Every
// problem is reported, one a line: "name:line: store.flush = "fsync": want sync or async".
// Unknown sections and keys are errors.
func parseConfig(c *config, data []byte, name string) error {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return fileError(name, err)
	}
	p := fileParser{md: &md, top: top, c: c, tables: make(map[string]map[string]toml.Primitive)}
	var errs []error
	seen := make(map[string]bool)
	for _, k := range md.Keys() { // in the order of the file
		if seen[k.String()] { // the keys of an array of tables come once per table
			continue
		}
		seen[k.String()] = true
		if err := p.key(k); err != nil {
			errs = append(errs, fileError(name, err))
		}
	}
	return errors.Join(errs...)
}

// fileError prefixes err with name:line when it carries a line.
func fileError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Position.Line > 0 {
		return fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// fileParser walks the keys of a decoded file. Errors about a key come from an
// unmarshalFunc that the TOML decoder calls on the key's value: it returns them as a
// toml.ParseError at the key's line.
type fileParser struct {
	md     *toml.MetaData
	top    map[string]toml.Primitive
	c      *config
	tables map[string]map[string]toml.Primitive // the sections seen; nil for an unknown one
}

// unmarshalFunc is a toml.Unmarshaler.
type unmarshalFunc func(v any) error

func (f unmarshalFunc) UnmarshalTOML(v any) error { return f(v) }

// fail reports err at the line of the key whose value is v.
func (p *fileParser) fail(v toml.Primitive, err error) error {
	return p.md.PrimitiveDecode(v, unmarshalFunc(func(any) error { return err }))
}

// key checks one key of the file (k is its path from the top) and applies it.
func (p *fileParser) key(k toml.Key) error {
	if len(k) == 1 && (lookup("", k[0]) != nil || !isSection(k[0]) && !strings.HasSuffix(p.md.Type(k...), "Hash")) {
		return p.setting("", k[0], p.top[k[0]])
	}
	sec, err := p.table(k)
	if sec == nil || len(k) != 2 {
		// An unknown section, reported once; the section itself; or a key inside a key's
		// value or in a subtable, whose parent was reported.
		return err
	}
	return p.setting(k[0], k[1], sec[k[1]])
}

// table returns the keys of the section k[0], first seen at the key k. For an unknown
// section, or one that is not a table, it returns nil and an error the first time, nil
// after that.
func (p *fileParser) table(k toml.Key) (map[string]toml.Primitive, error) {
	name := k[0]
	if sec, ok := p.tables[name]; ok {
		return sec, nil
	}
	p.tables[name] = nil
	v := p.top[name]
	var sec map[string]toml.Primitive
	if !isSection(name) {
		// [stor] has a line of its own; a table only implied by [stor.sub] or stor.x = 1
		// does not: report it at its first key.
		at := v
		if len(k) > 1 && p.md.PrimitiveDecode(v, &sec) == nil {
			at = sec[k[1]]
		}
		return nil, p.fail(at, errors.New(unknownSection(name)))
	}
	err := p.md.PrimitiveDecode(v, unmarshalFunc(func(x any) error {
		if _, ok := x.(map[string]any); !ok {
			return fmt.Errorf("%s = %s: want the table [%s]", name, tomlValue(x), name)
		}
		return nil
	}))
	if err == nil {
		err = p.md.PrimitiveDecode(v, &sec)
	}
	if err != nil {
		return nil, err
	}
	p.tables[name] = sec
	return sec, nil
}

// setting checks the value v of key in section against the table, and applies it.
func (p *fileParser) setting(section, key string, v toml.Primitive) error {
	s := lookup(section, key)
	if s == nil {
		return p.fail(v, errors.New(unknownKey(section, key)))
	}
	return p.md.PrimitiveDecode(v, unmarshalFunc(func(x any) error {
		apply, err := s.fromTOML(x)
		if err != nil {
			return fmt.Errorf("%s = %s: %w", s.describe().name(), tomlValue(x), err)
		}
		apply(p.c)
		return nil
	}))
}

// unknownKey says that section has no key, naming the one meant if it can tell.
func unknownKey(section, key string) string {
	name := key
	if section != "" {
		name = section + "." + key
	}
	var keys []string
	for _, s := range settings {
		d := s.describe()
		if d.key == key {
			if d.section == "" {
				return fmt.Sprintf("unknown key %s: %s is a top-level key (above all sections)", name, key)
			}
			return fmt.Sprintf("unknown key %s: %s belongs in [%s]", name, key, d.section)
		}
		if d.section == section {
			keys = append(keys, d.key)
		}
	}
	if near := nearest(key, keys); near != "" {
		return fmt.Sprintf("unknown key %s: did you mean %s?", name, near)
	}
	if section == "" {
		return fmt.Sprintf("unknown key %s: the top-level keys are %s, and the sections %s", name, list(keys), list(sectionNames()))
	}
	return fmt.Sprintf("unknown key %s: [%s] has %s", name, section, list(keys))
}

// unknownSection says that there is no section name, naming the one meant if it can tell.
func unknownSection(name string) string {
	if near := nearest(name, sectionNames()); near != "" {
		return fmt.Sprintf("unknown section [%s]: did you mean %s?", name, near)
	}
	return fmt.Sprintf("unknown section [%s]: the sections are %s", name, list(sectionNames()))
}

func sectionNames() []string {
	var names []string
	for _, s := range sections {
		if s.name != "" {
			names = append(names, "["+s.name+"]")
		}
	}
	return names
}

// list joins words as "a, b and c".
func list(words []string) string {
	if n := len(words); n > 1 {
		return strings.Join(words[:n-1], ", ") + " and " + words[n-1]
	}
	return strings.Join(words, "")
}

// nearest returns the candidate closest to s in edit distance, if it is close enough to be
// a typo of it: at most a third of s's letters differ.
func nearest(s string, candidates []string) string {
	best, bestD := "", len(s)/3+1
	for _, c := range candidates {
		if d := editDistance(s, strings.Trim(c, "[]")); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sectionCommand returns the command whose flags the keys of the section are, or "" for
// every command.
func sectionCommand(name string) string {
	for _, s := range sections {
		if s.name == name {
			return s.command
		}
	}
	return ""
}

// hasFlag reports whether the setting d is a flag of command.
func hasFlag(d settingDoc, command string) bool {
	sc := sectionCommand(d.section)
	return sc == "" || sc == command
}

// configFlags defines a flag for every setting of command (see section.command), named as
// in the file: -section.key (-store.flush async), -key for a top-level key, and -data for
// data_dir. It returns what applies the flags given, in the order of the command line, to
// a config.
func configFlags(fs *flag.FlagSet, command string) func(*config) {
	var given []func(*config)
	for _, s := range settings {
		d := s.describe()
		if !hasFlag(d, command) {
			continue
		}
		fs.Var(&settingFlag{s: s, given: &given, text: d.defText, isBool: d.isBool}, d.flag, flagUsage(d))
	}
	return func(c *config) {
		for _, apply := range given {
			apply(c)
		}
	}
}

// flagUsage is a setting's line in `edgemq help <command>`: the doc's first sentence, the
// type and the valid values. flag.PrintDefaults takes the `quoted` type as the argument's name
// and adds the default.
func flagUsage(d settingDoc) string {
	t := "`" + d.typ + "`"
	if d.isBool {
		t = d.typ // a bool flag takes no argument to name
	}
	if d.valid != "" {
		t += ": " + d.valid
	}
	return d.summary() + " (" + t + ")"
}

// settingFlag is the flag.Value of a setting: Set checks the text at once, so that a bad
// value is a usage error, and keeps it to apply over the config file.
type settingFlag struct {
	s      setting
	given  *[]func(*config)
	text   string
	isBool bool
}

func (f *settingFlag) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

func (f *settingFlag) Set(s string) error {
	apply, err := f.s.fromFlag(s)
	if err != nil {
		return err
	}
	*f.given = append(*f.given, apply)
	f.text = s
	return nil
}

func (f *settingFlag) IsBoolFlag() bool { return f.isBool }

// docWidth is where the example file's comments wrap.
const docWidth = 96

// writeExampleConfig writes configs/edgemq.toml: every section and key of the settings table,
// each key commented out at its default under its doc.
func writeExampleConfig(w io.Writer) error {
	bw := bufio.NewWriter(w)
	comment(bw, `EdgeMQ configuration: every key, commented out at its default. Generated from the `+
		`settings table in cmd/edgemq/settings.go by "go generate ./cmd/edgemq": edit the table, not this file.`)
	comment(bw, "")
	comment(bw, `Pass a file with "edgemq <command> -config FILE". Uncomment a key to change it; a key left `+
		`out keeps its default, and later EdgeMQ versions may change defaults. Each key is also a flag of every `+
		`command that opens a data dir, named section.key (-store.flush async; top-level keys by their name, `+
		`data_dir as -data; the keys of [server] are flags of edgemq serve alone). Flags override the file, `+
		`which overrides the defaults. Unknown keys are errors.`)
	comment(bw, "")
	comment(bw, `Sizes are byte counts, or strings with a KiB, MiB, GiB or TiB suffix ("64MiB"). Durations are `+
		`strings in Go's syntax ("500ms", "10s", "72h").`)
	for _, sec := range sections {
		if sec.name != "" {
			fmt.Fprintf(bw, "\n\n[%s]\n", sec.name)
			comment(bw, sec.doc)
		}
		for _, s := range settings {
			d := s.describe()
			if d.section != sec.name {
				continue
			}
			bw.WriteString("\n")
			comment(bw, d.doc)
			typ := d.typ
			if d.valid != "" {
				typ += " (" + d.valid + ")"
			}
			flagOf := ""
			if c := sectionCommand(d.section); c != "" {
				flagOf = " of edgemq " + c
			}
			comment(bw, fmt.Sprintf("Type: %s. Flag%s: -%s.", typ, flagOf, d.flag))
			fmt.Fprintf(bw, "#%s = %s\n", d.key, d.defTOML)
		}
	}
	return bw.Flush()
}

// comment writes text as # lines of at most docWidth bytes.
func comment(w *bufio.Writer, text string) {
	line := "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > docWidth && line != "#" {
			w.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	w.WriteString(line + "\n")
}
