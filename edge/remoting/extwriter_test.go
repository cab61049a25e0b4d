package remoting

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestHeaderWriterMatchesExt checks that a header written by its WriteExt encodes to the
// same frame, byte for byte, as its Ext map, in both header encodings.
func TestHeaderWriterMatchesExt(t *testing.T) {
	type header interface {
		HeaderWriter
		Ext() map[string]string
	}
	sendExt := func(h SendResponseHeader) header { return &h }
	pullExt := func(h PullResponseHeader) header { return &h }
	cases := []struct {
		name string
		h    header
	}{
		{"send", sendExt(SendResponseHeader{MsgID: "7F00000100002A9F0000000000000000", QueueID: 3, QueueOffset: 42, Region: "DefaultRegion", TraceOn: true})},
		{"send with transaction id", sendExt(SendResponseHeader{MsgID: "A,B", QueueID: -1, QueueOffset: -7, TransactionID: "tx\"1\\\x01é"})},
		{"send zero", sendExt(SendResponseHeader{})},
		{"pull", pullExt(PullResponseHeader{SuggestWhichBrokerID: 1, NextBeginOffset: 1 << 40, MinOffset: 0, MaxOffset: -1})},
		{"pull, more to come", pullExt(PullResponseHeader{NextBeginOffset: 7, MinOffset: 0, MaxOffset: 9, More: true})},
	}
	for _, tc := range cases {
		for _, ser := range []SerializeType{JSON, RocketMQ} {
			t.Run(tc.name+"/"+ser.String(), func(t *testing.T) {
				byMap := &Command{Code: Success, Language: LanguageGo, Version: Version, Opaque: 9, Flag: FlagResponse,
					Ext: tc.h.Ext(), Body: []byte("body"), Serialize: ser}
				byWriter := *byMap
				byWriter.Ext, byWriter.Header = nil, tc.h
				want, err := byMap.AppendFrame(nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := byWriter.AppendFrame(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("got  %q\nwant %q", got, want)
				}
				back, err := decodeFrame(got[frameLenSize:], false)
				if err != nil {
					t.Fatal(err)
				}
				if len(back.Ext) != len(tc.h.Ext()) {
					t.Fatalf("decoded %d fields, want %d: %v", len(back.Ext), len(tc.h.Ext()), back.Ext)
				}
				for k, v := range tc.h.Ext() {
					if back.Ext[k] != v {
						t.Fatalf("field %s = %q, want %q", k, back.Ext[k], v)
					}
				}
			})
		}
	}
}

// TestHeaderWriterKeyTooLong checks that a binary header refuses a key over 32 KiB, as the
// Ext map's encoder does.
func TestHeaderWriterKeyTooLong(t *testing.T) {
	c := &Command{Code: Success, Header: longKey{}, Serialize: RocketMQ}
	if _, err := c.AppendFrame(nil); err == nil {
		t.Fatal("a key of 40,000 bytes was encoded")
	}
}

type longKey struct{}

func (longKey) WriteExt(w *ExtWriter) { w.Str(string(bytes.Repeat([]byte("k"), 40_000)), "v") }

// decodeFrame decodes a frame without its length word: the type and header-length word,
// the header and the body.
func decodeFrame(frame []byte, lazy bool) (*Command, error) {
	if len(frame) < typeLenSize {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrMalformed, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	t, headerLen := SerializeType(word>>24), int(word&maxHeader)
	rest := frame[typeLenSize:]
	if headerLen > len(rest) {
		return nil, fmt.Errorf("%w: header of %d bytes in a frame of %d", ErrMalformed, headerLen, len(frame)+frameLenSize)
	}
	c, err := decodeHeader(t, rest[:headerLen], lazy)
	if err != nil {
		return nil, err
	}
	if body := rest[headerLen:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}
