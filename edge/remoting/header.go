package remoting

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"
)

// appendHeader appends c's header in c.Serialize.
func appendHeader(dst []byte, c *Command) ([]byte, error) {
	switch c.Serialize {
	case JSON:
		return appendJSONHeader(dst, c)
	case RocketMQ:
		return appendBinaryHeader(dst, c)
	}
	return dst, fmt.Errorf("%w: unknown header encoding %d", ErrMalformed, c.Serialize)
}

// decodeHeader decodes a header in encoding t into a new command.
func decodeHeader(t SerializeType, h []byte, lazy bool) (*Command, error) {
	switch t {
	case JSON:
		return decodeJSONHeader(h)
	case RocketMQ:
		return decodeBinaryHeader(h, lazy)
	}
	return nil, fmt.Errorf("%w: unknown header encoding %d", ErrMalformed, t)
}

// sortedKeys appends m's keys to keys in order, so that headers encode the same every
// time. Callers pass a small array's slice, so that a usual header allocates nothing.
func sortedKeys(keys []string, m map[string]string) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendJSONHeader appends the JSON header, fields in the order the Go client writes them:
// {"code":10,"language":"GO","version":479,"opaque":1,"flag":0,"remark":"","extFields":{"k":"v"}}
// A language without a name is written as its number.
func appendJSONHeader(dst []byte, c *Command) ([]byte, error) {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	if int(c.Language) < len(languageNames) {
		dst = appendJSONString(dst, languageNames[c.Language])
	} else {
		dst = strconv.AppendInt(dst, int64(c.Language), 10)
	}
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	dst, err := appendExtFields(dst, c, true)
	return append(dst, "}}"...), err
}

// jsonHeader is the JSON header as read: each field raw, so that it can be read leniently.
// Unknown fields (Java's serializeTypeCurrentRPC) are ignored.
type jsonHeader struct {
	Code      json.RawMessage            `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   json.RawMessage            `json:"version"`
	Opaque    json.RawMessage            `json:"opaque"`
	Flag      json.RawMessage            `json:"flag"`
	Remark    json.RawMessage            `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// decodeJSONHeaderSlow reads any JSON header with encoding/json, as decodeJSONHeader
// describes.
func decodeJSONHeaderSlow(h []byte) (*Command, error) {
	var jh jsonHeader
	if err := json.Unmarshal(h, &jh); err != nil {
		return nil, fmt.Errorf("%w: JSON header: %v", ErrMalformed, err)
	}
	if !isJSONObject(h) {
		return nil, fmt.Errorf("%w: JSON header is not an object", ErrMalformed)
	}
	c := &Command{Serialize: JSON}
	code, err := jsonInt(jh.Code, 16, "code")
	if err != nil {
		return nil, err
	}
	version, err := jsonInt(jh.Version, 16, "version")
	if err != nil {
		return nil, err
	}
	opaque, err := jsonInt(jh.Opaque, 32, "opaque")
	if err != nil {
		return nil, err
	}
	flag, err := jsonInt(jh.Flag, 32, "flag")
	if err != nil {
		return nil, err
	}
	c.Code, c.Version, c.Opaque, c.Flag = int16(code), int16(version), int32(opaque), int32(flag)
	if c.Language, err = jsonLanguage(jh.Language); err != nil {
		return nil, err
	}
	if c.Remark, _, err = jsonText(jh.Remark, "remark"); err != nil {
		return nil, err
	}
	for k, raw := range jh.ExtFields {
		v, ok, err := jsonText(raw, "extFields."+k)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if c.Ext == nil {
			c.Ext = make(map[string]string, len(jh.ExtFields))
		}
		c.Ext[k] = v
	}
	return c, nil
}

// jsonLanguage reads the language: an enum name or a number.
func jsonLanguage(raw json.RawMessage) (LanguageCode, error) {
	if isJSONNull(raw) {
		return LanguageJava, nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if l, ok := parseLanguage(name); ok {
			return l, nil
		}
		if n, err := strconv.ParseUint(name, 10, 8); err == nil {
			return LanguageCode(n), nil
		}
		return LanguageOther, nil
	}
	n, err := jsonInt(raw, 16, "language")
	if err != nil || n < 0 || n > math.MaxUint8 {
		return 0, fmt.Errorf("%w: language %s", ErrMalformed, raw)
	}
	return LanguageCode(n), nil
}

// Binary (ROCKETMQ) header layout, big-endian:
// code i16 | language u8 | version i16 | opaque i32 | flag i32 |
// remarkLen i32 | remark | extLen i32 | (keyLen i16 | key | valLen i32 | val)*
const binaryHeaderFixed = 2 + 1 + 2 + 4 + 4 + 4 + 4

// appendBinaryHeader appends the ROCKETMQ binary header, extension fields in key order.
func appendBinaryHeader(dst []byte, c *Command) ([]byte, error) {
	if len(c.Remark) > maxHeader {
		return dst, fmt.Errorf("%w: remark of %d bytes", ErrFrameTooLarge, len(c.Remark))
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, byte(c.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := appendExtFields(dst, c, false)
	if err != nil {
		return dst, err
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst, nil
}

// decodeBinaryHeader reads a ROCKETMQ binary header. Bytes after the extension fields are
// ignored, as Java does.
func decodeBinaryHeader(h []byte, lazy bool) (*Command, error) {
	c := new(Command)
	if err := decodeBinaryHeaderInto(h, lazy, false, c); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeBinaryHeaderInto is decodeBinaryHeader into c, every field of which it sets. With
// owned, h is memory that nothing writes from now on: c's strings point into it.
func decodeBinaryHeaderInto(h []byte, lazy, owned bool, c *Command) error {
	if len(h) < binaryHeaderFixed {
		return fmt.Errorf("%w: binary header of %d bytes, want at least %d", ErrMalformed, len(h), binaryHeaderFixed)
	}
	*c = Command{
		Code:      int16(binary.BigEndian.Uint16(h[0:])),
		Language:  LanguageCode(h[2]),
		Version:   int16(binary.BigEndian.Uint16(h[3:])),
		Opaque:    int32(binary.BigEndian.Uint32(h[5:])),
		Flag:      int32(binary.BigEndian.Uint32(h[9:])),
		Serialize: RocketMQ,
	}
	p := h[13:]
	remark, p, err := cutLen32(p, "remark")
	if err != nil {
		return err
	}
	c.Remark = headString(remark, owned)
	extb, _, err := cutLen32(p, "extFields")
	if err != nil {
		return err
	}
	// One string holds every key and value (they are substrings of it): one allocation for
	// the fields, not two each; the map is made for all of them at once (a pull's or a
	// send's dozen fields would make it grow, leaving its first table to the collector).
	ext := headString(extb, owned)
	if lazy {
		c.raw = ext
	} else if n := countExtFields(ext); n > 0 {
		c.Ext = make(map[string]string, min(n, maxExtHint))
	}
	for len(ext) > 0 {
		k, v, rest, err := cutExtField(ext)
		if err != nil {
			return err
		}
		ext = rest
		if lazy {
			continue // checked; kept in raw
		}
		if c.Ext == nil {
			c.Ext = make(map[string]string)
		}
		c.Ext[k] = v
	}
	return nil
}

// headString returns b as a string: b itself when owned (nothing writes it), else a copy.
func headString(b []byte, owned bool) string {
	if owned {
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	return string(b)
}

// maxExtHint caps the map size made ahead for a header's extension fields: a header of
// many tiny fields repeating one key makes a map of one entry, not a large empty one.
const maxExtHint = 64

// cutExtField cuts the first field off a binary header's extension fields: an i16 key
// length and the key, an i32 value length and the value.
func cutExtField(ext string) (k, v, rest string, err error) {
	if len(ext) < 2 {
		return "", "", "", fmt.Errorf("%w: extension key length cut short", ErrMalformed)
	}
	kl := int(int16(uint16(ext[0])<<8 | uint16(ext[1])))
	ext = ext[2:]
	if kl < 0 || kl > len(ext) {
		return "", "", "", fmt.Errorf("%w: extension key length %d, %d bytes left", ErrMalformed, kl, len(ext))
	}
	v, rest, err = cutLen32String(ext[kl:], "extension value")
	return ext[:kl], v, rest, err
}

// countExtFields counts the extension fields of a binary header as far as they are well
// formed (decodeBinaryHeader reports what is not).
func countExtFields(ext string) int {
	n := 0
	for ; len(ext) > 0; n++ {
		_, _, rest, err := cutExtField(ext)
		if err != nil {
			break
		}
		ext = rest
	}
	return n
}

// cutLen32String is cutLen32 of a string.
func cutLen32String(p string, field string) (val, rest string, err error) {
	if len(p) < 4 {
		return "", "", fmt.Errorf("%w: %s length cut short", ErrMalformed, field)
	}
	n := int64(int32(uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])))
	p = p[4:]
	if n < 0 || n > int64(len(p)) {
		return "", "", fmt.Errorf("%w: %s length %d, %d bytes left", ErrMalformed, field, n, len(p))
	}
	return p[:n], p[n:], nil
}

// cutLen32 reads an i32 length and that many bytes from p.
func cutLen32(p []byte, field string) (val, rest []byte, err error) {
	if len(p) < 4 {
		return nil, nil, fmt.Errorf("%w: %s length cut short", ErrMalformed, field)
	}
	n := int64(int32(binary.BigEndian.Uint32(p)))
	p = p[4:]
	if n < 0 || n > int64(len(p)) {
		return nil, nil, fmt.Errorf("%w: %s length %d, %d bytes left", ErrMalformed, field, n, len(p))
	}
	return p[:n], p[n:], nil
}
