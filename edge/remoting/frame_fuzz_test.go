package remoting

import (
	"bytes"
	"encoding/binary"
	"io"
	"reflect"
	"testing"
)

// addGoldenFrames adds the golden frames to a fuzz corpus.
func addGoldenFrames(f *testing.F) {
	for _, tc := range goldenFrames {
		f.Add(unhex(f, tc.frame))
	}
}

// FuzzReader reads a stream of frames. Every command read must encode, and its encoding
// must read back to a command that encodes to the same bytes.
func FuzzReader(f *testing.F) {
	addGoldenFrames(f)
	var stream []byte
	for _, tc := range goldenFrames {
		stream = append(stream, unhex(f, tc.frame)...)
	}
	f.Add(stream)
	var replies []byte // replies without a body, as a send's: the client reads them into its spare buffer
	for i, id := range []string{"0A00000100002A9F0000000000000001", "0A00000100002A9F00000000000000C8", "0A00000100002A9F0000000000001F40"} {
		c := &Command{Code: Success, Opaque: int32(i), Flag: FlagResponse, Ext: map[string]string{"msgId": id, "queueId": "1"}, Serialize: RocketMQ}
		if b, err := c.AppendFrame(nil); err == nil {
			replies = append(replies, b...)
		}
	}
	f.Add(replies)
	f.Add(frameOf(4, []byte{0, 0, 0, 0}))
	f.Add(frameOf(0x7fffffff, nil))
	f.Add(frameOf(8, []byte{0, 0, 0, 4, 'n', 'u', 'l', 'l'}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16)
		lazy := NewReader(bytes.NewReader(data), 1<<16)
		lazy.LazyExt = true
		// As a client reads: header and body in one allocation, which its strings share.
		one := NewReader(bytes.NewReader(data), 1<<16)
		one.LazyExt, one.reuse, one.oneAlloc = true, true, true
		type kept struct {
			c     *Command // one's
			frame []byte   // the frame of r's command read with it
		}
		var keep []kept
		defer func() { // later reads must not have changed what one read before them
			for _, k := range keep {
				if k.c == nil {
					continue // released
				}
				k.c.Fields()
				if b, err := k.c.AppendFrame(nil); err != nil || !bytes.Equal(b, k.frame) {
					t.Fatalf("a command read in one allocation: %x (%v), want %x", b, err, k.frame)
				}
			}
		}()
		ref := data // the reference: whole frames cut from data, decoded by decodeFrame
		for range 64 {
			c, err := r.Read()
			lc, lerr := lazy.Read()
			oc, oerr := one.Read()
			rc, rerr, rsticky := refRead(&ref, 1<<16)
			if (err == nil) != (lerr == nil) || (err == nil) != (oerr == nil) || (err == nil) != (rerr == nil) || (r.err != nil) != rsticky {
				t.Fatalf("Read: %v (sticky %v); lazily %v; in one allocation %v; whole frames %v (sticky %v)", err, r.err != nil, lerr, oerr, rerr, rsticky)
			}
			if err != nil {
				if r.err != nil {
					return
				}
				continue
			}
			lc.Fields()
			if !equalCommand(c, lc) || !equalCommand(c, rc) {
				t.Fatalf("Read %+v; lazily %+v; whole frames %+v", c, lc, rc)
			}
			if frame, err := c.AppendFrame(nil); err == nil {
				if len(keep)%2 == 0 {
					keep = append(keep, kept{oc, frame})
				} else {
					// Handled and given back, as an async send's reply: the reader may reuse
					// its buffer, and must not write one a kept command points into.
					oc.Fields()
					if b, err := oc.AppendFrame(nil); err != nil || !bytes.Equal(b, frame) {
						t.Fatalf("a command read in one allocation: %x (%v), want %x", b, err, frame)
					}
					oc.keepNothing()
					one.release(oc)
					keep = append(keep, kept{})
				}
			}
			checkFixedPoint(t, c)
		}
	})
}

// refRead reads a frame as a whole off *data, for FuzzReader: its length word, then its
// bytes decoded by decodeFrame. sticky says the stream is lost (as Reader's sticky errors).
func refRead(data *[]byte, maxFrame int) (c *Command, err error, sticky bool) {
	d := *data
	if len(d) < frameLenSize {
		return nil, io.ErrUnexpectedEOF, true
	}
	n := int64(int32(binary.BigEndian.Uint32(d)))
	if n < typeLenSize || n+frameLenSize > int64(maxFrame) || int64(len(d)-frameLenSize) < n {
		return nil, io.ErrUnexpectedEOF, true
	}
	*data = d[frameLenSize+n:]
	c, err = decodeFrame(d[frameLenSize:frameLenSize+n], false)
	if c != nil && c.Body != nil {
		c.Body = bytes.Clone(c.Body)
	}
	return c, err, false
}

// checkFixedPoint checks that c encodes, and that what its frame reads back as encodes to
// the same frame.
func checkFixedPoint(t *testing.T, c *Command) {
	t.Helper()
	b1, err := c.AppendFrame(nil)
	if err != nil {
		t.Fatalf("AppendFrame(%+v): %v", c, err)
	}
	c2, err := readOne(t, b1)
	if err != nil {
		t.Fatalf("re-read %x: %v", b1, err)
	}
	b2, err := c2.AppendFrame(nil)
	if err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("not a fixed point:\n%x\n%x (%v)", b1, b2, err)
	}
}

func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(`{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}`))
	f.Add([]byte(`{"code":"34","language":9,"version":"317","opaque":"-5","flag":"1","remark":"\u00e9\n"}`))
	f.Add([]byte(`{"code":0,"remark":null,"language":null,"extFields":{"n":12,"f":1.5,"b":true,"s":"x","z":null}}`))
	f.Add([]byte(`{"language":"COBOL","extFields":{"k":{}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, h []byte) {
		c, err := decodeJSONHeader(h)
		if err != nil {
			return
		}
		c.Body = []byte("b")
		checkFixedPoint(t, c)
	})
}

func FuzzBinaryHeader(f *testing.F) {
	for _, tc := range goldenFrames {
		if tc.cmd.Serialize == RocketMQ {
			b := unhex(f, tc.frame)
			f.Add(b[8 : len(b)-len(tc.cmd.Body)])
		}
	}
	f.Add(unhex(f, "0069 09 01df 00000001 00000000 00000000 00000000 deadbeef"))
	f.Add(unhex(f, "0069 09 01df 00000001 00000000 00000000 00000008 0001 41 00000002 41"))
	f.Fuzz(func(t *testing.T, h []byte) {
		c, err := decodeBinaryHeader(h, false)
		lazy, lerr := decodeBinaryHeader(h, true)
		if (err == nil) != (lerr == nil) {
			t.Fatalf("decode of %x: %v, lazily %v", h, err, lerr)
		}
		if err != nil {
			return
		}
		checkLazyFields(t, c, lazy)
		b, err := c.AppendFrame(nil)
		if err != nil {
			t.Fatalf("AppendFrame(%+v): %v", c, err)
		}
		c2, err := readOne(t, b)
		if err != nil || !equalCommand(c, c2) {
			t.Fatalf("round trip of %x: got %+v, %v; want %+v", h, c2, err, c)
		}
	})
}

// checkLazyFields checks a command decoded lazily against the same decoded into a map: the
// hot headers parse alike, and Fields makes the same map.
func checkLazyFields(t *testing.T, c, lazy *Command) {
	t.Helper()
	same := func(what string, a, b any, aerr, berr error) {
		if !reflect.DeepEqual(a, b) || (aerr == nil) != (berr == nil) {
			t.Fatalf("%s of %v: %+v, %v; lazily %+v, %v", what, c.Ext, a, aerr, b, berr)
		}
	}
	sh, err := ParseSendHeader(c.Code, c.Ext)
	lsh, lerr := lazy.ParseSendHeader()
	same("send header", sh, lsh, err, lerr)
	ph, err := ParsePullHeader(c.Ext)
	lph, lerr := lazy.ParsePullHeader()
	same("pull header", ph, lph, err, lerr)
	sr, err := ParseSendResponseHeader(c.Ext)
	lsr, lerr := lazy.ParseSendResponseHeader()
	same("send response header", sr, lsr, err, lerr)
	pr, err := ParsePullResponseHeader(c.Ext)
	lpr, lerr := lazy.ParsePullResponseHeader()
	same("pull response header", pr, lpr, err, lerr)
	if m := lazy.Fields(); !reflect.DeepEqual(m, c.Ext) {
		t.Fatalf("Fields: %v, want %v", m, c.Ext)
	}
}
