package main

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// expo writes metrics in the Prometheus text exposition format (version 0.0.4): per family
// a # HELP and a # TYPE line, then its samples, one a line.
type expo struct {
	buf []byte
}

// contentType is the Content-Type of the text exposition format.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// family starts a metric family: typ is counter, gauge or histogram.
func (e *expo) family(name, typ, help string) {
	e.buf = append(e.buf, "# HELP "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = appendEscaped(e.buf, help, false)
	e.buf = append(e.buf, "\n# TYPE "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, '\n')
}

// sample writes one sample of name with labels given as name, value pairs.
func (e *expo) sample(name string, v float64, labels ...string) {
	e.buf = append(e.buf, name...)
	if len(labels) > 0 {
		e.buf = append(e.buf, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, labels[i]...)
			e.buf = append(e.buf, `="`...)
			e.buf = appendEscaped(e.buf, labels[i+1], true)
			e.buf = append(e.buf, '"')
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ' ')
	e.buf = appendFloat(e.buf, v)
	e.buf = append(e.buf, '\n')
}

// one writes a family of a single unlabelled sample.
func (e *expo) one(name, typ, help string, v float64) {
	e.family(name, typ, help)
	e.sample(name, v)
}

// histogram writes the samples of a histogram family (started with family): counts holds
// one non-cumulative count per bound plus one above every bound.
func (e *expo) histogram(name string, bounds []time.Duration, counts []int64, sum time.Duration, labels ...string) {
	var cum int64
	for i, b := range bounds {
		cum += counts[i]
		e.sample(name+"_bucket", float64(cum), append(labels[:len(labels):len(labels)], "le", strconv.FormatFloat(b.Seconds(), 'g', -1, 64))...)
	}
	if len(counts) > len(bounds) {
		cum += counts[len(bounds)]
	}
	e.sample(name+"_bucket", float64(cum), append(labels[:len(labels):len(labels)], "le", "+Inf")...)
	e.sample(name+"_sum", sum.Seconds(), labels...)
	e.sample(name+"_count", float64(cum), labels...)
}

// appendEscaped appends s escaped for a HELP line (backslash, newline) or, with quote, for
// a label value (double quote too).
func appendEscaped(b []byte, s string, quote bool) []byte {
	if !strings.ContainsAny(s, "\\\n\"") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
