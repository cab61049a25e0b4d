package meta

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestQueueKey(t *testing.T) {
	tests := []struct {
		a, b string
		q    int32
		want []byte
	}{
		{"g", "t", 0, []byte{0, 1, 'g', 0, 1, 't', 0, 0, 0, 0}},
		{"ab", "c", 258, []byte{0, 2, 'a', 'b', 0, 1, 'c', 0, 0, 1, 2}},
		{"a", "bc", 1<<31 - 1, []byte{0, 1, 'a', 0, 2, 'b', 'c', 0x7f, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		k := queueKey(tt.a, tt.b, tt.q)
		if !bytes.Equal(k, tt.want) {
			t.Errorf("queueKey(%q, %q, %d) = %v, want %v", tt.a, tt.b, tt.q, k, tt.want)
		}
		a, b, q, err := decodeQueueKey(k)
		if err != nil || a != tt.a || b != tt.b || q != tt.q {
			t.Errorf("decodeQueueKey(%v) = %q, %q, %d, %v; want %q, %q, %d", k, a, b, q, err, tt.a, tt.b, tt.q)
		}
	}
}

func TestDecodeQueueKeyErrors(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	tests := []struct {
		name string
		key  []byte
		want error
	}{
		{"empty", nil, errShortKey},
		{"one byte", []byte{0}, errShortKey},
		{"empty group", []byte{0, 0, 0, 1, 't', 0, 0, 0, 0}, errBadName},
		{"long group", appendName(nil, long), errBadName},
		{"group cut", []byte{0, 5, 'g'}, errShortKey},
		{"no topic", []byte{0, 1, 'g'}, errShortKey},
		{"no queue", []byte{0, 1, 'g', 0, 1, 't', 0, 0}, errShortKey},
		{"trailing", []byte{0, 1, 'g', 0, 1, 't', 0, 0, 0, 0, 0}, errLongKey},
		{"negative queue", []byte{0, 1, 'g', 0, 1, 't', 0x80, 0, 0, 0}, errBadQueueID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, err := decodeQueueKey(tt.key); !errors.Is(err, tt.want) {
				t.Errorf("decodeQueueKey(%v): got %v, want %v", tt.key, err, tt.want)
			}
		})
	}
}

// TestDecodeUnknownFields checks that values written with fields this
// version does not know still decode, for forward compatibility.
func TestDecodeUnknownFields(t *testing.T) {
	// {"name": "t", "future": [1], "perm": 6}
	v := []byte{0x83, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 't', 0xa6, 'f', 'u', 't', 'u', 'r', 'e', 0x91, 0x01, 0xa4, 'p', 'e', 'r', 'm', 0x06}
	got, err := decodeTopic(v)
	if want := (Topic{Name: "t", Perm: 6}); err != nil || got != want {
		t.Errorf("decodeTopic = %+v, %v; want %+v", got, err, want)
	}
}

func FuzzDecodeQueueKey(f *testing.F) {
	f.Add(queueKey("group", "topic", 3))
	f.Add(queueKey("a", "b", 1<<31-1))
	f.Add([]byte{0, 1, 'g', 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, k []byte) {
		a, b, q, err := decodeQueueKey(k)
		if err != nil {
			return
		}
		// Accepted keys are exactly the ones queueKey writes.
		if err := checkQueueKey("fuzz", "group", a, b, q); err != nil {
			t.Fatalf("decodeQueueKey(%v) accepted an invalid key: %v", k, err)
		}
		if k2 := queueKey(a, b, q); !bytes.Equal(k2, k) {
			t.Fatalf("queueKey(decodeQueueKey(%v)) = %v", k, k2)
		}
	})
}

// fuzzDecode fuzzes dec with seeds: it must not panic, and whatever it
// accepts must survive an encode/decode round trip.
func fuzzDecode[T comparable, P record[T]](f *testing.F, dec func([]byte) (T, error), seeds ...T) {
	for _, s := range seeds {
		b := encode[T, P](s)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{0x80})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := dec(b)
		if err != nil {
			return
		}
		v2, err := dec(encode[T, P](v))
		if err != nil || v2 != v {
			t.Fatalf("round trip of %+v = %+v, %v", v, v2, err)
		}
	})
}

func FuzzDecodeTopic(f *testing.F) {
	fuzzDecode(f, decodeTopic, Topic{}, Topic{Name: "t", ReadQueues: 4, WriteQueues: 4, Perm: 6, Order: true, SysFlag: 1, Created: 1 << 40})
}

func FuzzDecodeGroup(f *testing.F) {
	fuzzDecode(f, decodeGroup, Group{}, Group{Name: "g", ConsumeEnable: true, BroadcastEnable: true, RetryQueues: 1, MaxReconsumeTimes: 16, ConsumeFromMinEnable: true})
}

func FuzzDecodeUplinkCursor(f *testing.F) {
	fuzzDecode(f, decodeUplinkCursor, UplinkCursor{}, UplinkCursor{Name: "cloud", Topic: "t", QueueID: 3, Offset: 1 << 33, Updated: -1})
}

func FuzzDecodeSettings(f *testing.F) {
	fuzzDecode(f, decodeSettings, Settings{}, Settings{SchemaVersion: 1, FlushPolicy: "async", SegmentSize: 1 << 30})
}

func FuzzDecodeLevelKey(f *testing.F) {
	f.Add(levelKey(0), int64Value(0))
	f.Add(levelKey(1<<31-1), int64Value(-1))
	f.Add([]byte{0x80, 0, 0, 0}, []byte{1, 2, 3})
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if level, err := decodeLevelKey(k); err == nil {
			if level < 0 || !bytes.Equal(levelKey(level), k) {
				t.Fatalf("decodeLevelKey(%x) = %d", k, level)
			}
		}
		if off, err := decodeInt64(v); err == nil && !bytes.Equal(int64Value(off), v) {
			t.Fatalf("decodeInt64(%x) = %d", v, off)
		}
	})
}
