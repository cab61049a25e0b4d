package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync"
)

// HeaderWriter is a header that writes its own extension fields straight into a frame, so
// that a command is encoded without building its Ext map. WriteExt writes every field in
// key order (byte order of the keys, as the Ext map is written), each key once.
type HeaderWriter interface {
	WriteExt(w *ExtWriter)
}

// ExtWriter writes a header's extension fields into a frame being encoded, in the
// command's header encoding. Values are written as the Ext map's strings would be.
type ExtWriter struct {
	dst   []byte
	start int  // where the fields begin in dst
	json  bool // the JSON encoding, else ROCKETMQ's binary one
	n     int  // fields written
	err   error
}

// key starts a field: the separator and key in JSON, the key's length and bytes in binary.
func (w *ExtWriter) key(k string) {
	if w.json {
		if w.n > 0 {
			w.dst = append(w.dst, ',')
		}
		w.dst = appendJSONString(w.dst, k)
		w.dst = append(w.dst, ':')
	} else {
		if len(k) > math.MaxInt16 && w.err == nil {
			w.err = fmt.Errorf("%w: extension key of %d bytes", ErrFrameTooLarge, len(k))
		}
		w.dst = binary.BigEndian.AppendUint16(w.dst, uint16(len(k)))
		w.dst = append(w.dst, k...)
	}
	w.n++
}

// Str writes the field k with value v.
func (w *ExtWriter) Str(k, v string) {
	w.key(k)
	if w.json {
		w.dst = appendJSONString(w.dst, v)
		return
	}
	w.dst = binary.BigEndian.AppendUint32(w.dst, uint32(len(v)))
	w.dst = append(w.dst, v...)
}

// Bytes writes the field k with value v, which must be ASCII text without characters that
// JSON escapes (digits, hex, names): it is copied as it is.
func (w *ExtWriter) Bytes(k string, v []byte) {
	w.key(k)
	if w.json {
		w.dst = append(w.dst, '"')
		w.dst = append(w.dst, v...)
		w.dst = append(w.dst, '"')
		return
	}
	w.dst = binary.BigEndian.AppendUint32(w.dst, uint32(len(v)))
	w.dst = append(w.dst, v...)
}

// Int writes the field k with v in decimal.
func (w *ExtWriter) Int(k string, v int64) {
	var b [20]byte
	w.Bytes(k, strconv.AppendInt(b[:0], v, 10))
}

// Bool writes the field k as "true" or "false".
func (w *ExtWriter) Bool(k string, v bool) {
	w.Str(k, strconv.FormatBool(v))
}

// extWriters keeps the writers of headers written through a HeaderWriter.
var extWriters = sync.Pool{New: func() any { return new(ExtWriter) }}

// appendExtFields appends c's extension fields, from c.Header when it is set, else from
// c.Ext in key order: a JSON object's members (without braces) or the binary header's
// pairs (without their length word).
func appendExtFields(dst []byte, c *Command, json bool) ([]byte, error) {
	if c.Header != nil {
		// The writer escapes through the interface call: one kept between frames, not one
		// allocated per frame.
		w := extWriters.Get().(*ExtWriter)
		*w = ExtWriter{dst: dst, start: len(dst), json: json}
		c.Header.WriteExt(w)
		dst, err := w.dst, w.err
		if err == nil && len(dst)-w.start > maxHeader {
			err = fmt.Errorf("%w: extension fields over %d bytes", ErrFrameTooLarge, maxHeader)
		}
		*w = ExtWriter{}
		extWriters.Put(w)
		return dst, err
	}
	w := ExtWriter{dst: dst, start: len(dst), json: json}
	c.Fields() // a command read lazily: its fields as read
	var arr [16]string
	for _, k := range sortedKeys(arr[:0], c.Ext) {
		v := c.Ext[k]
		if !json && len(w.dst)-w.start+len(k)+len(v) > maxHeader {
			return w.dst, fmt.Errorf("%w: extension fields over %d bytes", ErrFrameTooLarge, maxHeader)
		}
		w.Str(k, v)
		if w.err != nil {
			return w.dst, w.err
		}
	}
	return w.dst, nil
}
