package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; HTML characters are not escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hexdig = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexdig[c>>4], hexdig[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isJSONObject reports whether raw (already valid JSON) is an object.
func isJSONObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// isJSONNull reports whether raw is absent or the JSON null.
func isJSONNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// jsonInt reads an integer of bitSize bits from a JSON number or a string holding one; an
// absent value or null is 0.
func jsonInt(raw json.RawMessage, bitSize int, field string) (int64, error) {
	if isJSONNull(raw) {
		return 0, nil
	}
	s := string(bytes.TrimSpace(raw))
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %s: %v", ErrMalformed, field, err)
		}
	}
	n, err := strconv.ParseInt(s, 10, bitSize)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %q is not an int%d", ErrMalformed, field, s, bitSize)
	}
	return n, nil
}

// jsonText reads a JSON value as text: a string's contents, a number's or a boolean's
// literal; ok is false for null. Objects and arrays are malformed.
func jsonText(raw json.RawMessage, field string) (s string, ok bool, err error) {
	if isJSONNull(raw) {
		return "", false, nil
	}
	t := bytes.TrimSpace(raw)
	switch t[0] {
	case '"':
		if err := json.Unmarshal(t, &s); err != nil {
			return "", false, fmt.Errorf("%w: %s: %v", ErrMalformed, field, err)
		}
		return s, true, nil
	case '{', '[':
		return "", false, fmt.Errorf("%w: %s is not a string", ErrMalformed, field)
	}
	return string(t), true, nil
}
