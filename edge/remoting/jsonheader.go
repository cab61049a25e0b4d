package remoting

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header of nearly every frame is plain: an object of known fields whose values
// are integers, strings and an extFields object of such. scanJSONHeader
// reads that form without reflection, its strings cut from one copy of the header (only
// those with escapes have memory of their own); anything else (nested values, floats, case-folded names, invalid UTF-8, bad
// JSON) it leaves to decodeJSONHeaderSlow, which reads every JSON header.

// decodeJSONHeader reads a JSON header. Numbers may be JSON numbers or strings holding
// them; the language an enum name (an unknown name is OTHER) or its number; extension
// values strings, numbers or booleans (kept as their text); null and absent fields are
// zero.
func decodeJSONHeader(h []byte) (*Command, error) {
	if c, ok := scanJSONHeader(h); ok {
		return c, nil
	}
	return decodeJSONHeaderSlow(h)
}

// jsonScanner reads the plain form of a JSON header.
type jsonScanner struct {
	s      string
	i      int
	sawExt bool // extFields was read
}

// scanJSONHeader reads h if it is in the plain form; ok is false otherwise, and also when
// a value is out of range (the slow decoder then says why).
func scanJSONHeader(h []byte) (c *Command, ok bool) {
	if len(h) == 0 || !utf8.Valid(h) {
		return nil, false
	}
	p := jsonScanner{s: string(h)}
	c = &Command{Serialize: JSON}
	p.ws()
	if !p.byte('{') {
		return nil, false
	}
	p.ws()
	if p.byte('}') {
		return c, p.end()
	}
	for {
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.byte(':') {
			return nil, false
		}
		p.ws()
		if !p.field(c, key) {
			return nil, false
		}
		p.ws()
		if p.byte('}') {
			return c, p.end()
		}
		if !p.byte(',') {
			return nil, false
		}
		p.ws()
	}
}

// field reads the value of a top-level field into c.
func (p *jsonScanner) field(c *Command, key string) bool {
	switch key {
	case "code":
		n, ok := p.int(16)
		c.Code = int16(n)
		return ok
	case "version":
		n, ok := p.int(16)
		c.Version = int16(n)
		return ok
	case "opaque":
		n, ok := p.int(32)
		c.Opaque = int32(n)
		return ok
	case "flag":
		n, ok := p.int(32)
		c.Flag = int32(n)
		return ok
	case "language":
		return p.language(c)
	case "remark":
		v, _, ok := p.scalar()
		c.Remark = v
		return ok
	case "extFields":
		return p.ext(c)
	}
	if foldsToKnown(key) {
		return false // encoding/json matches field names without case
	}
	_, _, ok := p.scalar()
	return ok
}

// foldsToKnown reports whether key may match a header field's name in another case
// (any non-ASCII byte may be part of a Unicode fold, such as the long s).
func foldsToKnown(key string) bool {
	for i := range len(key) {
		if key[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, k := range [...]string{"code", "language", "version", "opaque", "flag", "remark", "extFields"} {
		if len(k) == len(key) && equalFoldASCII(k, key) {
			return true
		}
	}
	return false
}

// equalFoldASCII reports whether ASCII strings a and b, of the same length, are equal
// ignoring case.
func equalFoldASCII(a, b string) bool {
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ext reads the extFields object (or null) into c.Ext.
func (p *jsonScanner) ext(c *Command) bool {
	if p.sawExt {
		return false // encoding/json merges a repeated object into the first: rare, left to it
	}
	p.sawExt = true
	if p.lit("null") {
		return true
	}
	if !p.byte('{') {
		return false
	}
	p.ws()
	if p.byte('}') {
		return true
	}
	for {
		k, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if !p.byte(':') {
			return false
		}
		p.ws()
		v, set, ok := p.scalar()
		if !ok {
			return false
		}
		if _, dup := c.Ext[k]; dup {
			return false // a key repeated after a value: the last one counts, null or not
		}
		if set {
			if c.Ext == nil {
				c.Ext = make(map[string]string, 16)
			}
			c.Ext[k] = v
		}
		p.ws()
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
		p.ws()
	}
}

// language reads the language: an enum name, a number, or a string holding one.
func (p *jsonScanner) language(c *Command) bool {
	if p.lit("null") {
		c.Language = LanguageJava
		return true
	}
	if p.i < len(p.s) && p.s[p.i] == '"' {
		name, ok := p.str()
		if !ok {
			return false
		}
		if l, ok := parseLanguage(name); ok {
			c.Language = l
		} else if n, err := strconv.ParseUint(name, 10, 8); err == nil {
			c.Language = LanguageCode(n)
		} else {
			c.Language = LanguageOther
		}
		return true
	}
	n, ok := p.int(16)
	if !ok || n < 0 || n > 255 {
		return false
	}
	c.Language = LanguageCode(n)
	return true
}

// int reads an integer of bitSize bits: a JSON integer, a string holding one, or null (0).
func (p *jsonScanner) int(bitSize int) (int64, bool) {
	var text string
	switch {
	case p.lit("null"):
		return 0, true
	case p.i < len(p.s) && p.s[p.i] == '"':
		var ok bool
		if text, ok = p.str(); !ok {
			return 0, false
		}
	default:
		var ok bool
		if text, ok = p.integer(); !ok {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(text, 10, bitSize)
	return n, err == nil
}

// scalar reads a string (its contents), an integer or a boolean (their literal); set is
// false for null.
func (p *jsonScanner) scalar() (v string, set, ok bool) {
	if p.i >= len(p.s) {
		return "", false, false
	}
	switch b := p.s[p.i]; {
	case b == '"':
		v, ok = p.str()
		return v, ok, ok
	case b == 'n':
		return "", false, p.lit("null")
	case b == 't':
		return "true", true, p.lit("true")
	case b == 'f':
		return "false", true, p.lit("false")
	}
	v, ok = p.integer()
	return v, ok, ok
}

// integer reads a JSON integer literal: -?(0|[1-9][0-9]*) not followed by a fraction or
// exponent.
func (p *jsonScanner) integer() (string, bool) {
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	switch n := p.i - digits; {
	case n == 0, n > 1 && p.s[digits] == '0':
		return "", false
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E':
			return "", false
		}
	}
	return p.s[start:p.i], true
}

// str reads a string. One without escapes is a substring of the header; one with them
// is decoded into its own memory, as encoding/json decodes it.
func (p *jsonScanner) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		switch b := p.s[p.i]; {
		case b == '"':
			p.i++
			return p.s[start : p.i-1], true
		case b == '\\':
			return p.unescape(start)
		case b < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// unescape reads the rest of a string that began at start and has an escape at p.i.
func (p *jsonScanner) unescape(start int) (string, bool) {
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, p.s[start:p.i]...)
	for p.i < len(p.s) {
		b := p.s[p.i]
		switch {
		case b == '"':
			p.i++
			return string(buf), true
		case b < 0x20:
			return "", false
		case b != '\\':
			buf = append(buf, b)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; anything else is U+FFFD, and what follows is
				// read on its own.
				save := p.i
				r2 := rune(-1)
				if p.lit(`\u`) {
					if r2, ok = p.hex4(); !ok {
						return "", false
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
				} else {
					r = utf8.RuneError
					p.i = save
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (p *jsonScanner) hex4() (rune, bool) {
	if len(p.s)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

// lit consumes the literal word if it is next.
func (p *jsonScanner) lit(word string) bool {
	if len(p.s)-p.i >= len(word) && p.s[p.i:p.i+len(word)] == word {
		p.i += len(word)
		return true
	}
	return false
}

// byte consumes b if it is next.
func (p *jsonScanner) byte(b byte) bool {
	if p.i < len(p.s) && p.s[p.i] == b {
		p.i++
		return true
	}
	return false
}

// ws skips JSON white space.
func (p *jsonScanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (p *jsonScanner) end() bool {
	p.ws()
	return p.i == len(p.s)
}
