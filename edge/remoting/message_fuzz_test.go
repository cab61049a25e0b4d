package remoting

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// FuzzDecodeMessages decodes pull bodies. What decodes must encode (unless a field is too
// long for a V1 record), and the encoding must be a fixed point.
func FuzzDecodeMessages(f *testing.F) {
	golden := unhexLayout(f, goldenRecordV1)
	f.Add(golden)
	f.Add(append(bytes.Clone(golden), golden...))
	v6 := goldenMessage
	v6.BornHost = v6.StoreHost
	if b, err := AppendMessageExt(nil, &v6); err == nil {
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 4})
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := DecodeMessages(body)
		// A reply's body, whose strings the messages share, decodes to the same.
		inPlace, errInPlace := decodeMessages(bytes.Clone(body), true)
		if (err == nil) != (errInPlace == nil) || !reflect.DeepEqual(msgs, inPlace) {
			t.Fatalf("decoded in place: %v, %v; copied: %v, %v", inPlace, errInPlace, msgs, err)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for i := range msgs {
			b1, err := AppendMessageExt(nil, &msgs[i])
			if errors.Is(err, mq.ErrInvalidTopic) || errors.Is(err, mq.ErrMessageTooLarge) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			again, err := DecodeMessages(b1)
			if err != nil || len(again) != 1 {
				t.Fatalf("re-decode of %x: %d, %v", b1, len(again), err)
			}
			b2, err := AppendMessageExt(nil, &again[0])
			if err != nil || !bytes.Equal(b1, b2) {
				t.Fatalf("not a fixed point:\n%x\n%x (%v)", b1, b2, err)
			}
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(unhexLayout(f, goldenBatch))
	f.Add([]byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := DecodeBatch(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		b1, err := AppendBatch(nil, msgs)
		if errors.Is(err, mq.ErrMessageTooLarge) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeBatch(b1)
		if err != nil || len(again) != len(msgs) {
			t.Fatalf("re-decode: %d, %v", len(again), err)
		}
		b2, err := AppendBatch(nil, again)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("not a fixed point:\n%x\n%x (%v)", b1, b2, err)
		}
	})
}

func FuzzInflate(f *testing.F) {
	f.Add(deflate(f, []byte("hello hello hello")), uint16(100))
	f.Add(deflate(f, make([]byte, 5000)), uint16(4096))
	f.Add([]byte("x\x9c"), uint16(10))
	f.Fuzz(func(t *testing.T, data []byte, maxSize uint16) {
		out, err := Inflate(data, int(maxSize))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, mq.ErrMessageTooLarge) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		if len(out) > int(maxSize) {
			t.Fatalf("%d bytes out, cap %d", len(out), maxSize)
		}
	})
}

func FuzzProperties(f *testing.F) {
	f.Add("TAGS\x01a\x02KEYS\x01k1 k2\x02")
	f.Add("a\x02b\x01c\x01d\x02\x02e\x01f")
	f.Fuzz(func(t *testing.T, s string) {
		p := ParseProperties(s)
		back := ParseProperties(string(AppendProperties(nil, p)))
		if !maps.Equal(p, back) {
			t.Fatalf("%q: %q, then %q", s, p, back)
		}
		// SetMessageProperties reads the string as ParseProperties does.
		want := maps.Clone(p)
		tags, keys := want[PropertyTags], want[PropertyKeys]
		delete(want, PropertyTags)
		delete(want, PropertyKeys)
		if len(want) == 0 {
			want = nil
		}
		m := mq.Message{Tags: "old", Keys: "old", Properties: map[string]string{"old": "x"}}
		SetMessageProperties(&m, s)
		if m.Tags != tags || m.Keys != keys || !maps.Equal(m.Properties, want) || (m.Properties == nil) != (want == nil) {
			t.Fatalf("%q: SetMessageProperties gave tags %q keys %q %q, want %q %q %q", s, m.Tags, m.Keys, m.Properties, tags, keys, want)
		}
	})
}
