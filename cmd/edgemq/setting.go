package main

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// A setting is one key of the config file, and the flag of the same name: everything the
// loader, the flags, `edgemq help <command>` and configs/edgemq.toml know about it. The
// settings table (settings.go) is a list of item[T] values, one per key.
type setting interface {
	// describe returns the key's names and texts.
	describe() settingDoc
	// fromTOML checks a value of the config file as github.com/BurntSushi/toml decodes it
	// and returns what stores it in a config. Its error reads "want …".
	fromTOML(v any) (func(*config), error)
	// fromFlag does the same for the text of a flag.
	fromFlag(s string) (func(*config), error)
}

// settingDoc is what describes a setting to people: help, errors, and the example file.
type settingDoc struct {
	section, key string
	flag         string // the flag's name, without the dash
	doc          string
	typ          string // the value's type in help: "size", "duration", ...
	valid        string // the valid values or range, "" when the type says it all
	defTOML      string // the default as a TOML literal: "64MiB" in quotes, or 4
	defText      string // the default as a flag's text: 64MiB
	isBool       bool   // the flag needs no value
}

// name is the key as errors and help name it: section.key, or key at the top level.
func (d settingDoc) name() string {
	if d.section == "" {
		return d.key
	}
	return d.section + "." + d.key
}

// summary is the doc's first sentence, for help.
func (d settingDoc) summary() string {
	if i := strings.Index(d.doc, ". "); i >= 0 {
		return d.doc[:i+1]
	}
	return d.doc
}

// item is a setting whose value has the Go type T.
type item[T any] struct {
	section string // "" for the top level, else the [section] the key lives in
	key     string
	// flag is the flag's name when it is not the key's name (section.key); "" for most.
	flag string
	kind kind[T]
	// def is the default, read from the DefaultOptions of the package whose option this is,
	// so that the table never states a default of its own.
	def T
	// check limits the values beyond what kind accepts; a zero check accepts them all.
	check rule[T]
	// set stores a checked value in the config.
	set func(c *config, v T)
	// doc says what the key does, in sentences; the first one is also the flag's help.
	doc string
}

func (it item[T]) describe() settingDoc {
	d := settingDoc{
		section: it.section,
		key:     it.key,
		flag:    it.flag,
		doc:     it.doc,
		typ:     it.kind.name,
		valid:   it.check.want,
		defTOML: it.kind.toml(it.def),
		defText: it.kind.text(it.def),
		isBool:  it.kind.isBool,
	}
	if d.flag == "" {
		d.flag = d.name()
	}
	if d.valid == "" {
		d.valid = it.kind.valid
	}
	return d
}

func (it item[T]) fromTOML(v any) (func(*config), error) {
	x, err := it.kind.decode(v)
	if err != nil {
		return nil, err
	}
	return it.accept(x)
}

func (it item[T]) fromFlag(s string) (func(*config), error) {
	x, err := it.kind.parse(s)
	if err != nil {
		return nil, err
	}
	return it.accept(x)
}

func (it item[T]) accept(v T) (func(*config), error) {
	if it.check.ok != nil && !it.check.ok(v) {
		return nil, errors.New("want " + it.check.want)
	}
	return func(c *config) { it.set(c, v) }, nil
}

// A kind is how values of the Go type T are written in the config file and in flags.
type kind[T any] struct {
	name   string // the type, for help: "size"
	want   string // what a value must look like, for errors: `a size: a byte count, or …`
	valid  string // the values a setting of this kind accepts, when they are few: "sync or async"
	isBool bool
	// decode converts a TOML value as github.com/BurntSushi/toml decodes it: string,
	// int64, float64, bool, []any, map[string]any, or a time type.
	decode func(v any) (T, error)
	// parse converts a flag's text.
	parse func(s string) (T, error)
	// toml writes a value as a TOML literal, text as a flag's text.
	toml, text func(v T) string
}

// wrongValue is the error of a value the kind cannot read.
func (k kind[T]) wrongValue() error { return errors.New("want " + k.want) }

// A rule limits the values of a setting.
type rule[T any] struct {
	want string // the valid values, for help and errors: "more than 0"
	ok   func(v T) bool
}

type number interface {
	~int | ~int32 | ~int64 | ~float64
}

// positive accepts values above 0.
func positive[T number]() rule[T] {
	return rule[T]{"more than 0", func(v T) bool { return v > 0 }}
}

// notNegative accepts 0 and above.
func notNegative[T number]() rule[T] {
	return rule[T]{"0 or more", func(v T) bool { return v >= 0 }}
}

// positiveOrOff accepts values above 0, and negative ones, which turn the feature off. 0 is
// refused: to the options it means "the default", which would surprise a reader of the file.
func positiveOrOff[T number]() rule[T] {
	return rule[T]{"more than 0, or negative to turn it off", func(v T) bool { return v != 0 }}
}

// atMostOrOff accepts values up to hi: 0 means the default, negative ones turn the feature
// off.
func atMostOrOff[T number](k kind[T], hi T) rule[T] {
	return rule[T]{"at most " + k.text(hi) + "; 0: the default, negative: off", func(v T) bool { return v <= hi }}
}

// between accepts lo..hi, written in the kind's words.
func between[T number](k kind[T], lo, hi T) rule[T] {
	return rule[T]{k.text(lo) + ".." + k.text(hi), func(v T) bool { return v >= lo && v <= hi }}
}

// --- kinds -------------------------------------------------------------------------------

// text is the kind of strings; noun names them in help ("dir").
func text(noun string) kind[string] {
	return kind[string]{
		name:   noun,
		want:   "a string",
		decode: func(v any) (string, error) { return decodeAs[string](v, "a string") },
		parse:  func(s string) (string, error) { return s, nil },
		toml:   tomlQuote,
		text:   func(s string) string { return s },
	}
}

var boolKind = kind[bool]{
	name:   "bool",
	want:   "true or false",
	isBool: true,
	decode: func(v any) (bool, error) { return decodeAs[bool](v, "true or false") },
	parse: func(s string) (bool, error) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, errors.New("want true or false")
		}
		return b, nil
	},
	toml: strconv.FormatBool,
	text: strconv.FormatBool,
}

var floatKind = kind[float64]{
	name: "number",
	want: "a number such as 0.75",
	decode: func(v any) (float64, error) {
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
		return 0, errors.New("want a number such as 0.75")
	},
	parse: func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, errors.New("want a number such as 0.75")
		}
		return f, nil
	},
	toml: func(f float64) string {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	},
	text: func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
}

// integer is the kind of counts: a TOML integer.
func integer[T ~int | ~int32]() kind[T] {
	k := kind[T]{name: "integer", want: "a whole number"}
	k.decode = func(v any) (T, error) {
		n, ok := v.(int64)
		if !ok {
			return 0, k.wrongValue()
		}
		return fitInt[T](n, k.text)
	}
	k.parse = func(s string) (T, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, k.wrongValue()
		}
		return fitInt[T](n, k.text)
	}
	k.text = func(v T) string { return strconv.FormatInt(int64(v), 10) }
	k.toml = k.text
	return k
}

// fitInt converts n to T, or fails naming T's range (int has 32 bits on arm).
func fitInt[T ~int | ~int32 | ~int64](n int64, text func(T) string) (T, error) {
	if int64(T(n)) != n {
		lo := T(1) << (bitsOf[T]() - 1) // the most negative T
		return 0, fmt.Errorf("want %s..%s", text(lo), text(lo-1))
	}
	return T(n), nil
}

func bitsOf[T ~int | ~int32 | ~int64]() int {
	for bits := 8; bits < 64; bits *= 2 {
		if T(1)<<(bits-1) < 0 {
			return bits
		}
	}
	return 64
}

// byteUnits are the suffixes of sizes, largest first.
var byteUnits = []struct {
	suffix string
	n      int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// size is the kind of byte counts: a TOML integer, or a string of a whole number with an
// optional KiB, MiB, GiB or TiB suffix ("64MiB"). Negative sizes are allowed: some settings
// use them to turn a feature off.
func size[T ~int | ~int64]() kind[T] {
	k := kind[T]{name: "size", want: `a size: a byte count, or a string such as "64MiB" (units KiB, MiB, GiB, TiB)`}
	k.decode = func(v any) (T, error) {
		switch x := v.(type) {
		case int64:
			return fitInt[T](x, k.text)
		case string:
			return k.parse(x)
		}
		return 0, k.wrongValue()
	}
	k.parse = func(s string) (T, error) {
		n, ok := parseSize(s)
		if !ok {
			return 0, k.wrongValue()
		}
		return fitInt[T](n, k.text)
	}
	k.text = func(v T) string { return formatSize(int64(v)) }
	k.toml = func(v T) string {
		if s := formatSize(int64(v)); strings.HasSuffix(s, "B") {
			return tomlQuote(s)
		}
		return strconv.FormatInt(int64(v), 10)
	}
	return k
}

// parseSize parses a whole number with an optional unit, a space allowed before it.
func parseSize(s string) (int64, bool) {
	mult := int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSuffix(n, " "), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// formatSize writes n in the largest unit that divides it.
func formatSize(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

const durationWant = `a duration such as "500ms", "10s" or "72h"`

// durationKind is a TOML string in Go's duration syntax.
var durationKind = kind[time.Duration]{
	name:   "duration",
	want:   durationWant,
	decode: func(v any) (time.Duration, error) { return decodeText(v, parseDuration, durationWant) },
	parse:  parseDuration,
	toml:   func(d time.Duration) string { return tomlQuote(formatDuration(d)) },
	text:   formatDuration,
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want " + durationWant)
	}
	return d, nil
}

// formatDuration writes d in the largest unit that divides it: "72h", not "72h0m0s".
func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d != 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return d.String()
}

const durationsWant = `an array of durations such as ["1s", "5s"] (in a flag: 1s,5s)`

// durationsKind is a TOML array of duration strings; in a flag, durations separated by
// commas.
var durationsKind = kind[[]time.Duration]{
	name: "durations",
	want: durationsWant,
	decode: func(v any) ([]time.Duration, error) {
		a, ok := v.([]any)
		if !ok {
			return nil, errors.New("want " + durationsWant)
		}
		ds := make([]time.Duration, len(a))
		for i, x := range a {
			s, ok := x.(string)
			d, err := time.ParseDuration(s)
			if !ok || err != nil {
				return nil, fmt.Errorf("want %s; element %d is %s", durationsWant, i+1, tomlValue(x))
			}
			ds[i] = d
		}
		return ds, nil
	},
	parse: func(s string) ([]time.Duration, error) {
		var ds []time.Duration
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return nil, errors.New("want " + durationsWant)
			}
			ds = append(ds, d)
		}
		return ds, nil
	},
	toml: func(ds []time.Duration) string {
		q := make([]string, len(ds))
		for i, d := range ds {
			q[i] = tomlQuote(formatDuration(d))
		}
		return "[" + strings.Join(q, ", ") + "]"
	},
	text: func(ds []time.Duration) string {
		q := make([]string, len(ds))
		for i, d := range ds {
			q[i] = formatDuration(d)
		}
		return strings.Join(q, ",")
	},
}

const addrPortWant = `an address and port such as "127.0.0.1:10911" or "[::1]:10911"`

var addrPortKind = kind[netip.AddrPort]{
	name: "address",
	want: addrPortWant,
	decode: func(v any) (netip.AddrPort, error) {
		return decodeText(v, parseAddrPort, addrPortWant)
	},
	parse: parseAddrPort,
	toml:  func(a netip.AddrPort) string { return tomlQuote(a.String()) },
	text:  netip.AddrPort.String,
}

func parseAddrPort(s string) (netip.AddrPort, error) {
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		return a, errors.New("want " + addrPortWant)
	}
	return a, nil
}

// A choice is one value of a oneOf kind and its name in the file.
type choice[T comparable] struct {
	name  string
	value T
}

// oneOf is the kind of a setting with a few named values: a TOML string, one of the names.
// noun names the type in help ("mode").
func oneOf[T comparable](noun string, choices ...choice[T]) kind[T] {
	names := make([]string, len(choices))
	for i, c := range choices {
		names[i] = c.name
	}
	list := strings.Join(names, " or ")
	if n := len(names); n > 2 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	k := kind[T]{name: noun, want: list, valid: list}
	k.parse = func(s string) (T, error) {
		for _, c := range choices {
			if c.name == s {
				return c.value, nil
			}
		}
		var zero T
		return zero, k.wrongValue()
	}
	k.decode = func(v any) (T, error) { return decodeText(v, k.parse, list) }
	k.text = func(v T) string {
		for _, c := range choices {
			if c.value == v {
				return c.name
			}
		}
		panic(fmt.Sprintf("edgemq: %v is none of %s", v, list))
	}
	k.toml = func(v T) string { return tomlQuote(k.text(v)) }
	return k
}

// decodeAs returns v as a T, or an error that wants what want says.
func decodeAs[T any](v any, want string) (T, error) {
	x, ok := v.(T)
	if !ok {
		return x, errors.New("want " + want)
	}
	return x, nil
}

// decodeText parses a TOML string with parse.
func decodeText[T any](v any, parse func(string) (T, error), want string) (T, error) {
	s, ok := v.(string)
	if !ok {
		var zero T
		return zero, errors.New("want " + want)
	}
	return parse(s)
}

// tomlQuote writes s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlValue writes a decoded TOML value back as TOML, for errors that quote it.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return tomlQuote(x)
	case []any:
		q := make([]string, len(x))
		for i, e := range x {
			q[i] = tomlValue(e)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	case float64:
		return floatKind.toml(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}
