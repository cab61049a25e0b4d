package zbatch

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/klauspost/compress/zstd"
)

// telemetry returns n JSON telemetry messages of topic, each with its UNIQ_KEY and a key.
func telemetry(topic string, n int) []*mq.Message {
	msgs := make([]*mq.Message, n)
	for i := range msgs {
		msgs[i] = &mq.Message{Topic: topic, Flag: int32(i), Tags: "t", Keys: fmt.Sprintf("k%d", i),
			Properties: map[string]string{mq.PropertyUniqKey: fmt.Sprintf("7F0000010001%020X", i), "seq": fmt.Sprint(i)},
			Body:       fmt.Appendf(nil, `{"ts":%d,"temp":%d.%d,"hum":%d,"dev":"gw-17"}`, int64(1764633600000)+int64(i)*250, 20+i%7, i%10, 40+i%13)}
	}
	return msgs
}

func TestZstdBatchRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []*mq.Message
	}{
		{"one", telemetry("T", 1)},
		{"telemetry", telemetry("T", 500)},
		{"empty body", []*mq.Message{{Topic: "T", Body: nil, Properties: map[string]string{"a": "b"}}}},
		{"large body", []*mq.Message{{Topic: "T", Body: bytes.Repeat([]byte("0123456789"), 100_000)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := Append(nil, tc.msgs)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := remoting.AppendBatch(nil, tc.msgs)
			var h zstd.Header
			if err := h.Decode(body); err != nil || len(plain) > 1024 && (!h.HasFCS || h.FrameContentSize != uint64(len(plain))) {
				t.Fatalf("frame header %+v, %v: want the decompressed size %d recorded", h, err, len(plain))
			}
			items, err := Decode(body, len(plain))
			if err != nil {
				t.Fatal(err)
			}
			got, err := remoting.DecodeBatch(items)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := remoting.DecodeBatch(plain)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %d messages, not the %d sent", len(got), len(want))
			}
			if len(plain) > 1000 && len(body)*3 > len(plain) {
				t.Errorf("%d bytes compressed to %d: want at least 3x smaller", len(plain), len(body))
			}
		})
	}
}

// TestAppendItems: items laid out already compress to the body Append makes of their
// messages, and decode back to them.
func TestAppendItems(t *testing.T) {
	msgs := telemetry("T", 300)
	plain, err := remoting.AppendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	body, err := AppendItems([]byte("x"), plain)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Append(nil, msgs)
	if body[0] != 'x' || !bytes.Equal(body[1:], want) {
		t.Fatalf("AppendItems made %d bytes, Append %d: not the same", len(body)-1, len(want))
	}
	items, err := Decode(body[1:], len(plain))
	if err != nil || !bytes.Equal(items, plain) {
		t.Fatalf("decoded %d bytes (%v), want the %d laid out", len(items), err, len(plain))
	}
}

// TestZstdBatchBomb: a body that would inflate past the limit is refused as too large,
// whether its frame says its size or not, and a body that is not zstd as malformed.
func TestZstdBatchBomb(t *testing.T) {
	const limit = 1 << 20
	enc, _ := zstd.NewWriter(nil)
	zeros := make([]byte, 64<<20)
	withSize := enc.EncodeAll(zeros, nil)
	var stream bytes.Buffer // a streamed frame records no size
	w, _ := zstd.NewWriter(&stream)
	w.Write(zeros)
	w.Close()
	var h zstd.Header
	if err := h.Decode(stream.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("streamed frame %+v, %v: want one without its size", h, err)
	}
	just := enc.EncodeAll(zeros[:limit], nil)
	twoFrames := append(enc.EncodeAll(zeros[:limit], nil), just...)
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"64 MiB of zeros", withSize, mq.ErrMessageTooLarge},
		{"64 MiB streamed", stream.Bytes(), mq.ErrMessageTooLarge},
		{"two frames over the limit together", twoFrames, mq.ErrMessageTooLarge},
		{"not zstd", []byte("plain text, not a frame"), remoting.ErrMalformed},
		{"empty", nil, remoting.ErrMalformed},
		{"truncated", just[:len(just)-5], remoting.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Decode(tc.body, limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%d bytes out, error %v: want %v", len(out), err, tc.want)
			}
		})
	}
	if out, err := Decode(just, limit); err != nil || len(out) != limit {
		t.Fatalf("exactly the limit: %d bytes, %v", len(out), err)
	}
	// The streamed bomb is refused before it is inflated: it allocates about the limit.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Decode(stream.Bytes(), limit)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*limit {
		t.Errorf("refusing a 64 MiB bomb allocated %d bytes, limit %d", n, limit)
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Append(nil, telemetry("T", 20))
	f.Add(good)
	f.Add(good[:len(good)-3])
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll(make([]byte, 1<<20), nil))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		const limit = 64 << 10
		items, err := Decode(body, limit)
		if err != nil {
			if !errors.Is(err, remoting.ErrMalformed) && !errors.Is(err, mq.ErrMessageTooLarge) {
				t.Fatalf("error %v wraps neither remoting.ErrMalformed nor mq.ErrMessageTooLarge", err)
			}
			return
		}
		if len(items) > limit {
			t.Fatalf("%d bytes decompressed past the limit %d", len(items), limit)
		}
		msgs, err := remoting.DecodeBatch(items)
		if err != nil {
			return
		}
		back, err := Append(nil, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := Decode(back, limit+len(items)); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		} else if m2, err := remoting.DecodeBatch(again); err != nil || len(m2) != len(msgs) {
			t.Fatalf("re-encoded batch: %d messages, %v; want %d", len(m2), err, len(msgs))
		}
	})
}
