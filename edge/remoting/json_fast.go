package remoting

// A JSON header as the clients write it — one flat object of integers, plain strings and
// an extFields object of plain strings — is read by scanFastJSONHeader without
// encoding/json, which allocates for every field. Anything else (escapes, numbers that are
// not plain integers, numbers in strings, nested values, case-folded field names, trailing
// bytes) makes it give up, and decodeJSONHeader reads the header the general way, so the
// two always agree.

import "unicode/utf8"

// fastJSON scans one JSON header.
type fastJSON struct {
	b []byte
	i int
}

func (s *fastJSON) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (s *fastJSON) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters, in valid UTF-8 (encoding/json
// would replace invalid bytes), and returns its bytes.
func (s *fastJSON) str() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(s.b[start:j]) {
				return nil, false
			}
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// integer reads a JSON integer (-?(0|[1-9][0-9]*)) as its literal.
func (s *fastJSON) integer() ([]byte, bool) {
	s.space()
	start, j := s.i, s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == digits || (s.b[digits] == '0' && j-digits > 1) {
		return nil, false
	}
	if j < len(s.b) {
		switch s.b[j] {
		case '.', 'e', 'E':
			return nil, false
		}
	}
	s.i = j
	return s.b[start:j], true
}

// literal reads the word w (true, false, null).
func (s *fastJSON) literal(w string) bool {
	s.space()
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// parseFastInt parses a plain integer literal of bitSize bits; ok is false outside the range.
func parseFastInt(lit []byte, bitSize uint) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range lit {
		n = n*10 + int64(c-'0')
		if n < 0 {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	lim := int64(1) << (bitSize - 1)
	if n < -lim || n >= lim {
		return 0, false
	}
	return n, true
}

// scanFastJSONHeader reads h as decodeJSONHeader would, if h is of the plain kind; ok
// false means "read it the general way" (including every malformed header).
func scanFastJSONHeader(h []byte) (c *Command, ok bool) {
	s := fastJSON{b: h}
	if !s.consume('{') {
		return nil, false
	}
	c = &Command{Serialize: JSON, Language: LanguageJava}
	if s.consume('}') {
		return c, s.end()
	}
	for {
		key, ok := s.str()
		if !ok || !s.consume(':') {
			return nil, false
		}
		switch string(key) {
		case "code", "version", "opaque", "flag":
			if s.literal("null") {
				// zero, as absent: set below by the switch on key
				switch string(key) {
				case "code":
					c.Code = 0
				case "version":
					c.Version = 0
				case "opaque":
					c.Opaque = 0
				case "flag":
					c.Flag = 0
				}
				break
			}
			lit, ok := s.integer()
			if !ok {
				return nil, false
			}
			switch string(key) {
			case "code", "version":
				n, ok := parseFastInt(lit, 16)
				if !ok {
					return nil, false
				}
				if key[0] == 'c' {
					c.Code = int16(n)
				} else {
					c.Version = int16(n)
				}
			default:
				n, ok := parseFastInt(lit, 32)
				if !ok {
					return nil, false
				}
				if key[0] == 'o' {
					c.Opaque = int32(n)
				} else {
					c.Flag = int32(n)
				}
			}
		case "language":
			if s.literal("null") {
				c.Language = LanguageJava
				break
			}
			name, ok := s.str()
			if !ok {
				return nil, false
			}
			l, ok := parseLanguage(string(name))
			if !ok {
				return nil, false
			}
			c.Language = l
		case "remark":
			if s.literal("null") {
				c.Remark = ""
				break
			}
			r, ok := s.str()
			if !ok {
				return nil, false
			}
			c.Remark = string(r)
		case "extFields":
			if s.literal("null") {
				c.Ext = nil
				break
			}
			if !s.ext(c) {
				return nil, false
			}
		default:
			// An unknown field with a plain value is ignored, as encoding/json ignores it;
			// a name that folds to a known one would be matched by it: give up.
			if foldsToHeaderField(key) || !s.skipScalar() {
				return nil, false
			}
		}
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return c, s.end()
		}
		return nil, false
	}
}

// ext reads the extFields object into c.Ext, adding to an earlier one as encoding/json
// does for a repeated field.
func (s *fastJSON) ext(c *Command) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		k, ok := s.str()
		if !ok || !s.consume(':') {
			return false
		}
		var v []byte
		switch {
		case s.literal("null"):
			if c.Ext != nil {
				delete(c.Ext, string(k)) // a repeated key: the last value wins
				if len(c.Ext) == 0 {
					c.Ext = nil // as the general decoder, which makes the map for a value
				}
			}
			v = nil
		case s.literal("true"):
			v = []byte("true")
		case s.literal("false"):
			v = []byte("false")
		default:
			if v, ok = s.str(); !ok {
				if v, ok = s.integer(); !ok {
					return false
				}
			}
		}
		if v != nil {
			if c.Ext == nil {
				c.Ext = make(map[string]string, 8)
			}
			c.Ext[string(k)] = string(v)
		}
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

// skipScalar skips a plain string, integer, true, false or null.
func (s *fastJSON) skipScalar() bool {
	if s.literal("null") || s.literal("true") || s.literal("false") {
		return true
	}
	if _, ok := s.str(); ok {
		return true
	}
	_, ok := s.integer()
	return ok
}

// end reports whether only white space is left.
func (s *fastJSON) end() bool {
	s.space()
	return s.i == len(s.b)
}

var headerFields = []string{"code", "language", "version", "opaque", "flag", "remark", "extfields"}

// foldsToHeaderField reports whether key matches a header field case-insensitively, as
// encoding/json matches field names.
func foldsToHeaderField(key []byte) bool {
	for _, f := range headerFields {
		if len(key) != len(f) {
			continue
		}
		match := true
		for i := range key {
			c := key[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != f[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
