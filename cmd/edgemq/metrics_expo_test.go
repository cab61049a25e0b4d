package main

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample is one parsed sample line of the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// exposition is a parsed scrape: the families in order, their type and help, and the
// samples of each.
type exposition struct {
	types   map[string]string
	help    map[string]string
	samples map[string][]sample // by family
}

// parseExposition parses the text exposition format strictly: every sample follows the
// # TYPE of its family (a histogram's _bucket, _sum and _count count as its own), no family
// is declared twice, label values use only the format's escapes.
func parseExposition(text string) (*exposition, error) {
	e := &exposition{types: map[string]string{}, help: map[string]string{}, samples: map[string][]sample{}}
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			h, err := unescape(help, false)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			e.help[name] = h
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(line[len("# TYPE "):], " ")
			if _, dup := e.types[name]; dup {
				return nil, fmt.Errorf("line %d: family %s declared twice", n, name)
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				return nil, fmt.Errorf("line %d: type %q", n, typ)
			}
			e.types[name], cur = typ, name
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			s, err := parseSample(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			fam := s.name
			if e.types[cur] == "histogram" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if strings.TrimSuffix(s.name, suf) == cur {
						fam = cur
					}
				}
			}
			if fam != cur {
				return nil, fmt.Errorf("line %d: sample %s outside its family (current %s)", n, s.name, cur)
			}
			if e.types[cur] == "counter" && !strings.HasSuffix(s.name, "_total") {
				return nil, fmt.Errorf("line %d: counter %s lacks _total", n, s.name)
			}
			e.samples[cur] = append(e.samples[cur], s)
		}
	}
	return e, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no value: %q", line)
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for line[0] != '}' {
			k, rest, ok := strings.Cut(line, `="`)
			if !ok {
				return s, fmt.Errorf("bad label in %q", line)
			}
			// The value ends at the first unescaped quote.
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
				}
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value in %q", line)
			}
			v, err := unescape(rest[:j], true)
			if err != nil {
				return s, err
			}
			s.labels[k] = v
			line = rest[j+1:]
			line = strings.TrimPrefix(line, ",")
			if line == "" {
				return s, fmt.Errorf("unterminated labels")
			}
		}
		line = line[1:]
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(line, " "), 64)
	if err != nil {
		return s, fmt.Errorf("value of %s: %w", s.name, err)
	}
	s.value = v
	return s, nil
}

func unescape(s string, quote bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && quote {
			return "", fmt.Errorf("unescaped quote in %q", s)
		}
		if c == '\n' {
			return "", fmt.Errorf("newline in %q", s)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(s) {
			return "", fmt.Errorf("trailing backslash in %q", s)
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quote {
				return "", fmt.Errorf(`\" in help %q`, s)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("bad escape \\%c in %q", s[i], s)
		}
	}
	return b.String(), nil
}

// TestExpoEscapes: label values and help text with the characters the format escapes come
// back as they were.
func TestExpoEscapes(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"plain", "Orders"},
		{"rocketmq chars", "%RETRY%g|1-x_y"},
		{"quote", `a"b`},
		{"backslash", `a\b`},
		{"backslash before quote", `a\"b`},
		{"trailing backslash", `ab\`},
		{"newline", "a\nb"},
		{"unicode", "Bestellungen-ü-注文"},
		{"empty", ""},
		{"braces and comma", `x},y="z`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e expo
			e.family("edgemq_test_total", "counter", "Help with "+tc.value+" in it.")
			e.sample("edgemq_test_total", 3, "topic", tc.value, "other", tc.value)
			p, err := parseExposition(string(e.buf))
			if err != nil {
				t.Fatalf("%v\n%s", err, e.buf)
			}
			s := p.samples["edgemq_test_total"]
			if len(s) != 1 || s[0].labels["topic"] != tc.value || s[0].labels["other"] != tc.value || s[0].value != 3 {
				t.Fatalf("got %+v, want topic and other %q, value 3\n%s", s, tc.value, e.buf)
			}
			if got, want := p.help["edgemq_test_total"], "Help with "+tc.value+" in it."; got != want {
				t.Fatalf("help: got %q, want %q", got, want)
			}
		})
	}
}

// TestExpoValues: values print as the format wants them.
func TestExpoValues(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "x 0\n"}, {3, "x 3\n"}, {1.5, "x 1.5\n"}, {-2, "x -2\n"}, {1 << 53, "x 9.007199254740992e+15\n"},
		{math.Inf(1), "x +Inf\n"}, {math.Inf(-1), "x -Inf\n"}, {math.NaN(), "x NaN\n"},
	} {
		var e expo
		e.sample("x", tc.v)
		if got := string(e.buf); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestExpoHistogram: buckets are cumulative, end in +Inf, and _count is their total.
func TestExpoHistogram(t *testing.T) {
	var e expo
	e.family("h_seconds", "histogram", "A histogram.")
	e.histogram("h_seconds", []time.Duration{time.Millisecond, time.Second}, []int64{2, 3, 4}, 1500*time.Millisecond)
	p, err := parseExposition(string(e.buf))
	if err != nil {
		t.Fatalf("%v\n%s", err, e.buf)
	}
	var got []string
	for _, s := range p.samples["h_seconds"] {
		got = append(got, fmt.Sprintf("%s%s=%v", s.name, s.labels["le"], s.value))
	}
	want := []string{"h_seconds_bucket0.001=2", "h_seconds_bucket1=5", "h_seconds_bucket+Inf=9", "h_seconds_sum=1.5", "h_seconds_count=9"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
