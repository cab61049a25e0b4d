package store

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
)

// msgDiff lists the fields in which got differs from want, "" if none. A nil and an empty
// Properties map, and a nil and an empty Body, are equal.
func msgDiff(got, want *Message) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.Topic != want.Topic {
		add("Topic", fmt.Sprintf("%q", got.Topic), fmt.Sprintf("%q", want.Topic))
	}
	if got.QueueID != want.QueueID {
		add("QueueID", got.QueueID, want.QueueID)
	}
	if got.QueueOffset != want.QueueOffset {
		add("QueueOffset", got.QueueOffset, want.QueueOffset)
	}
	if got.Flag != want.Flag {
		add("Flag", got.Flag, want.Flag)
	}
	if got.SysFlag != want.SysFlag {
		add("SysFlag", got.SysFlag, want.SysFlag)
	}
	if got.BornTime != want.BornTime {
		add("BornTime", got.BornTime, want.BornTime)
	}
	if got.StoreTime != want.StoreTime {
		add("StoreTime", got.StoreTime, want.StoreTime)
	}
	if got.BornHost != want.BornHost {
		add("BornHost", got.BornHost, want.BornHost)
	}
	if got.ReconsumeTimes != want.ReconsumeTimes {
		add("ReconsumeTimes", got.ReconsumeTimes, want.ReconsumeTimes)
	}
	if got.Tags != want.Tags {
		add("Tags", fmt.Sprintf("%q", got.Tags), fmt.Sprintf("%q", want.Tags))
	}
	if got.Keys != want.Keys {
		add("Keys", fmt.Sprintf("%q", got.Keys), fmt.Sprintf("%q", want.Keys))
	}
	if !maps.Equal(got.Properties, want.Properties) {
		add("Properties", got.Properties, want.Properties)
	}
	if !bytes.Equal(got.Body, want.Body) {
		add("Body", fmt.Sprintf("%d bytes %.40q", len(got.Body), got.Body), fmt.Sprintf("%d bytes %.40q", len(want.Body), want.Body))
	}
	if got.Pos != want.Pos {
		add("Pos", got.Pos, want.Pos)
	}
	if got.Size != want.Size {
		add("Size", got.Size, want.Size)
	}
	return strings.Join(d, "; ")
}

// decoded returns what decoding m's payload gives: a zero BornTime reads as the store time,
// and the store-assigned Pos and Size are not in the payload.
func decoded(m *Message) *Message {
	w := *m
	if w.BornTime == 0 {
		w.BornTime = w.StoreTime
	}
	w.Pos, w.Size = 0, 0
	return &w
}

const testStoreTime = 1764460800000 // 2025-11-30T00:00:00Z

func codecCases() []struct {
	name string
	m    *Message
	want *Message // nil: decoded(m)
} {
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	full := func() *Message {
		return &Message{
			Topic: "Telemetry", QueueID: 3, QueueOffset: 1234567, Flag: 7, SysFlag: 0x10, ReconsumeTimes: 16,
			BornTime: testStoreTime - 1500, StoreTime: testStoreTime, BornHost: netip.MustParseAddrPort("192.168.1.20:10911"),
			Tags: "TagA", Keys: "K1 K2",
			Properties: map[string]string{"UNIQ_KEY": "C0A801140001", "EMPTY": "", "": "empty key", "温度": "°C ✓", "emoji": "😀"},
			Body:       []byte("payload"),
		}
	}
	with := func(f func(m *Message)) *Message { m := full(); f(m); return m }
	return []struct {
		name string
		m    *Message
		want *Message
	}{
		{"minimal", &Message{Topic: "T", StoreTime: testStoreTime}, nil},
		{"minimal zero store time", &Message{Topic: "T"}, nil},
		{"all fields, IPv4 host", full(), nil},
		{"IPv6 host", with(func(m *Message) { m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:65535") }), nil},
		{"IPv6 host port 0", with(func(m *Message) { m.BornHost = netip.MustParseAddrPort("[::1]:0") }), nil},
		// The encoder stores an IPv4-mapped address as IPv4 (FORMAT.md: length 4 or 16).
		{"IPv4-mapped host is stored as IPv4", with(func(m *Message) { m.BornHost = netip.MustParseAddrPort("[::ffff:10.0.0.7]:5555") }),
			decoded(with(func(m *Message) { m.BornHost = netip.MustParseAddrPort("10.0.0.7:5555") }))},
		{"born before store", with(func(m *Message) { m.BornTime = testStoreTime - 86_400_000 }), nil},
		{"born after store (clock skew)", with(func(m *Message) { m.BornTime = testStoreTime + 3_600_000 }), nil},
		{"born at store time", with(func(m *Message) { m.BornTime = testStoreTime }), nil},
		{"born time unset", with(func(m *Message) { m.BornTime = 0 }), nil},
		{"store time before epoch", with(func(m *Message) { m.StoreTime, m.BornTime = -5000, 12 }), nil},
		{"extreme times", with(func(m *Message) { m.StoreTime, m.BornTime = math.MaxInt64, math.MinInt64 }), nil},
		{"negative flags", with(func(m *Message) { m.Flag, m.SysFlag, m.ReconsumeTimes = -1, math.MinInt32, math.MaxInt32 }), nil},
		{"max queue id and offset", with(func(m *Message) { m.QueueID, m.QueueOffset = math.MaxInt32, math.MaxInt64 }), nil},
		{"255-byte topic", with(func(m *Message) { m.Topic = strings.Repeat("t", 255) }), nil},
		{"non-ASCII tags and keys", with(func(m *Message) { m.Tags, m.Keys = "标签", "ключ 😀" }), nil},
		{"single property with empty value", with(func(m *Message) { m.Properties = map[string]string{"k": ""} }), nil},
		{"empty properties map", with(func(m *Message) { m.Properties = map[string]string{} }), nil},
		{"empty body", with(func(m *Message) { m.Body = nil }), nil},
		{"body looks like fields", with(func(m *Message) { m.Body = []byte{0xff, 0x00, 0x80, 0x80, 0x80} }), nil},
		{"4 MiB body", with(func(m *Message) { m.Body = big }), nil},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range codecCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = decoded(tc.m)
			}
			p := tc.m.appendPayload(nil)
			prefix := []byte("junk")
			if q := tc.m.appendPayload(prefix); !bytes.Equal(q[len(prefix):], p) {
				t.Fatal("appendPayload depends on what dst holds")
			}

			var got Message
			if err := decodeMessage(p, tc.m.StoreTime, &got); err != nil {
				t.Fatalf("decodeMessage: %v", err)
			}
			if d := msgDiff(&got, want); d != "" {
				t.Fatalf("decodeMessage: %s", d)
			}

			var arena []byte
			var into Message
			if err := decodeInto(p, tc.m.StoreTime, &into, &arena, tc.m.Topic); err != nil {
				t.Fatalf("decodeInto: %v", err)
			}
			if d := msgDiff(&into, want); d != "" {
				t.Fatalf("decodeInto: %s", d)
			}
			var into2 Message // a topic other than the message's goes through the arena
			if err := decodeInto(p, tc.m.StoreTime, &into2, &arena, "other"); err != nil {
				t.Fatalf("decodeInto, other topic: %v", err)
			}
			if d := msgDiff(&into2, want); d != "" {
				t.Fatalf("decodeInto, other topic: %s", d)
			}

			h, err := decodeHeader(p)
			if err != nil {
				t.Fatalf("decodeHeader: %v", err)
			}
			if h.queueID != want.QueueID || h.queueOffset != want.QueueOffset || string(h.topic) != want.Topic || string(h.tags) != want.Tags {
				t.Fatalf("decodeHeader = %d %d %q %q, want %d %d %q %q", h.queueID, h.queueOffset, h.topic, h.tags, want.QueueID, want.QueueOffset, want.Topic, want.Tags)
			}

			// Neither decoder's result may alias the payload.
			for i := range p {
				p[i] = 0xa5
			}
			if d := msgDiff(&got, want); d != "" {
				t.Fatalf("decodeMessage result changed with the payload: %s", d)
			}
			if d := msgDiff(&into, want); d != "" {
				t.Fatalf("decodeInto result changed with the payload: %s", d)
			}
		})
	}
}

// TestCodecRejectsTruncated cuts a full payload before its body at every length: no prefix
// that ends inside the fields may decode.
func TestCodecRejectsTruncated(t *testing.T) {
	m := codecCases()[2].m
	m.Body = nil
	p := m.appendPayload(nil)
	for n := 0; n < len(p); n++ {
		var got Message
		if err := decodeMessage(p[:n:n], m.StoreTime, &got); err == nil {
			t.Errorf("payload cut to %d of %d bytes decodes: %+v", n, len(p), got)
		}
	}
}

// goldenMessage is the message of testdata/record.golden.
func goldenMessage() *Message {
	return &Message{
		Topic: "Telemetry", QueueID: 1, QueueOffset: 42,
		BornTime: testStoreTime - 250, StoreTime: testStoreTime, BornHost: netip.MustParseAddrPort("10.0.0.7:5555"),
		Tags: "temp", Keys: "k1", Properties: map[string]string{"region": "eu"},
		Body: []byte("hello"),
	}
}

// TestCodecGolden pins the payload layout (FORMAT.md section 2): a change of the encoding must
// be a deliberate PayloadVersion bump with a new golden file (UPDATE_GOLDEN=1 rewrites it).
// The bytes are, in order: bits f8 (born host, tags, keys, properties, born delta) | queue id
// 01 | queue offset 2a | 09 "Telemetry" | 04 0a000007 15b3 | 04 "temp" | 02 "k1" | 01 06
// "region" 02 "eu" | born delta zigzag(-250) = f3 03 | "hello".
func TestCodecGolden(t *testing.T) {
	m := goldenMessage()
	p := m.appendPayload(nil)
	got := hex.Dump(p)
	path := filepath.Join("testdata", "record.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("payload bytes changed:\ngot\n%swant\n%s", got, want)
	}
	var d Message
	if err := decodeMessage(p, testStoreTime, &d); err != nil {
		t.Fatal(err)
	}
	if diff := msgDiff(&d, decoded(m)); diff != "" {
		t.Fatalf("golden record decodes wrong: %s", diff)
	}
}

// frameSizeOf is the commitlog frame size of a payload of p bytes stored delta ms after its
// segment's base time (store/commitlog/doc.go): uvarint n | 4 CRC | varint delta | payload.
func frameSizeOf(p int, delta int64) int {
	n := varintLen(delta) + p
	return uvarintLen(uint64(n)) + 4 + n
}

// TestOverhead checks the per-message disk cost of FORMAT.md's telemetry example: a 100-byte
// body, topic "Telemetry", tag "temp", queue offset 250,000, born at its store time. The frame
// formula is checked against a real store first.
func TestOverhead(t *testing.T) {
	var now atomic.Int64 // unix ms; the store's goroutines read the clock too
	now.Store(testStoreTime)
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return time.UnixMilli(now.Load()) }, MaxAge: -1, MaxUsedRatio: -1})
	defer s.Close()
	body := bytes.Repeat([]byte("x"), 100)
	for _, after := range []time.Duration{0, 10 * time.Minute, time.Hour} {
		now.Store(testStoreTime + after.Milliseconds()) // the only segment was started at testStoreTime
		m := &Message{Topic: "Telemetry", Tags: "temp", Body: body}
		if err := s.Append([]*Message{m}); err != nil {
			t.Fatal(err)
		}
		p := len(m.appendPayload(nil))
		if want := frameSizeOf(p, after.Milliseconds()); int(m.Size) != want {
			t.Fatalf("%v into the segment: record of %d bytes, formula says %d", after, m.Size, want)
		}
	}

	m := &Message{Topic: "Telemetry", QueueOffset: 250_000, Tags: "temp", Body: body, StoreTime: testStoreTime}
	p := len(m.appendPayload(nil))
	if p != 120 {
		t.Errorf("payload %d bytes, FORMAT.md says 120", p)
	}
	for _, tc := range []struct {
		after time.Duration
		doc   int // FORMAT.md's figure, 0 if none
	}{{10 * time.Minute, 128}, {time.Hour, 0}, {24 * time.Hour, 0}} {
		d := tc.after.Milliseconds()
		frame := frameSizeOf(p, d)
		total := frame + cqueue.EntrySize
		t.Logf("%v into the segment: payload %d B, delta %d B, frame %d B, frame + queue entry %d B (overhead beyond body, topic and tag: %d B log, %d B total)",
			tc.after, p, varintLen(d), frame, total, frame-100-9-4, total-100-9-4)
		if tc.doc != 0 && frame != tc.doc {
			t.Errorf("%v: frame %d bytes, FORMAT.md says %d", tc.after, frame, tc.doc)
		}
		if total > 150 {
			t.Errorf("%v: %d bytes per message on disk, want at most 150", tc.after, total)
		}
	}
	if commitlog.HeaderSize != 64 {
		t.Errorf("segment header %d bytes, FORMAT.md says 64", commitlog.HeaderSize)
	}
}

func TestTagHash(t *testing.T) {
	// Java: "...".hashCode(), computed over UTF-16 code units with 32-bit overflow.
	for _, tc := range []struct {
		tags string
		want int64
	}{
		{"", 0},
		{"a", 97},
		{"TagA", 2598919},           // ((84*31+97)*31+103)*31+65
		{"hello world", 1794106052}, // the well-known Java value
		{"Telemetry", -1510653031},  // overflows: sign-extended to int64
		{"标签", 857175},              // U+6807 U+7B7E: 26631*31 + 31614
		{"😀", 1772899},              // U+1F600 = surrogates D83D DE00: 55357*31 + 56832
		{"a😀b", 57849694},           // ((97*31+55357)*31+56832)*31+98
	} {
		if got := TagHash(tc.tags); got != tc.want {
			t.Errorf("TagHash(%q) = %d, want %d", tc.tags, got, tc.want)
		}
		if got := tagHashBytes([]byte(tc.tags)); got != tc.want {
			t.Errorf("tagHashBytes(%q) = %d, want %d", tc.tags, got, tc.want)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, tc := range codecCases() {
		if len(tc.m.Body) > 1<<10 {
			continue
		}
		p := tc.m.appendPayload(nil)
		f.Add(p, tc.m.StoreTime)
		f.Add(p[:len(p)/2], tc.m.StoreTime)
	}
	f.Add(goldenMessage().appendPayload(nil), int64(testStoreTime))
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, int64(1))
	f.Add([]byte{0x40, 0x00, 0x00, 0x01, 'T', 0xff, 0xff, 0xff, 0xff, 0x0f}, int64(1))
	f.Fuzz(func(t *testing.T, b []byte, storeTime int64) {
		in := slices.Clip(slices.Clone(b)) // cap == len: a read past the end panics
		var m Message
		merr := decodeMessage(in, storeTime, &m)
		var mi Message
		var arena []byte
		ierr := decodeInto(in, storeTime, &mi, &arena, "T")
		h, herr := decodeHeader(in)
		if !bytes.Equal(in, b) {
			t.Fatal("a decoder modified its input")
		}
		if (merr == nil) != (ierr == nil) {
			t.Fatalf("decodeMessage: %v; decodeInto: %v", merr, ierr)
		}
		if merr != nil {
			return
		}
		if herr != nil {
			t.Fatalf("decodeMessage succeeds, decodeHeader fails: %v", herr)
		}
		if h.queueID != m.QueueID || h.queueOffset != m.QueueOffset || string(h.topic) != m.Topic || string(h.tags) != m.Tags {
			t.Fatalf("decodeHeader %d %d %q %q disagrees with decodeMessage %+v", h.queueID, h.queueOffset, h.topic, h.tags, m)
		}
		if d := msgDiff(&mi, &m); d != "" {
			t.Fatalf("decodeInto disagrees with decodeMessage: %s", d)
		}
		if len(m.Body) > len(in) {
			t.Fatalf("body of %d bytes from %d bytes of input", len(m.Body), len(in))
		}
		for i := range in { // results must not alias the input
			in[i] ^= 0xff
		}
		if d := msgDiff(&mi, &m); d != "" {
			t.Fatalf("decodeInto result aliases its input: %s", d)
		}
		var again Message
		if err := decodeMessage(b, storeTime, &again); err != nil || msgDiff(&again, &m) != "" {
			t.Fatalf("decodeMessage result aliases its input: %v %s", err, msgDiff(&again, &m))
		}

		// Re-encoding gives the canonical form, which decodes to the same message, except for
		// two inputs the encoder never writes: a 16-byte IPv4-mapped born host (written as 4
		// bytes) and a born delta that makes BornTime 0 (0 means "unset": written as no delta).
		want := m
		want.BornHost = netip.AddrPortFrom(m.BornHost.Addr().Unmap(), m.BornHost.Port())
		if m.BornTime == 0 {
			want.BornTime = storeTime
		}
		q := m.appendPayload(nil)
		var m2 Message
		if err := decodeMessage(q, storeTime, &m2); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", q, err)
		}
		if d := msgDiff(&m2, &want); d != "" {
			t.Fatalf("re-encoded message differs: %s\ninput %x\nre-encoded %x", d, b, q)
		}
		if q2 := m2.appendPayload(nil); !bytes.Equal(q2, q) {
			t.Fatalf("encoding is not canonical: %x then %x", q, q2)
		}
	})
}
