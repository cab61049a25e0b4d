package remoting

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// goldenMessage and goldenRecordV1 are one stored message and its record. The layout is
// taken field by field from Apache RocketMQ's MessageDecoder.encode / MessageExtEncoder
// (store) and rocketmq-client-go's primitive/message.go DecodeMessage, which read it back:
// TOTALSIZE, MAGIC (V1 = 0xAABBCCDD ^ 1880681594), BODYCRC (java.util.zip.CRC32 & 0x7FFFFFFF,
// UtilAll.crc32), QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP,
// BORNHOST (ip4 + i32 port), STORETIMESTAMP, STOREHOST, RECONSUMETIMES,
// PREPAREDTRANSACTIONOFFSET, BODY (i32 length), TOPIC (u8 length), PROPERTIES (i16 length).
// The CRC of "Hello" is 0xF7D18982, whose top bit RocketMQ clears.
var goldenMessage = mq.MessageExt{
	Message: mq.Message{
		Topic: "TopicTest", Flag: -2, Tags: "TagA", Keys: "k1 k2",
		Properties: map[string]string{mq.PropertyUniqKey: "X"}, Body: []byte("Hello"),
	},
	QueueID: 1, QueueOffset: 2, CommitLogOffset: 0x1234, SysFlag: 0,
	BornTime: 1700000000000, BornHost: netip.MustParseAddrPort("10.0.0.1:54321"),
	StoreTime: 1700000000005, StoreHost: netip.MustParseAddrPort("10.0.0.5:10911"),
	ReconsumeTimes: 3, StoreSize: 137,
}

const goldenRecordV1 = `
	00000089                 TOTALSIZE 137
	daa320a7                 MAGIC V1
	77d18982                 BODYCRC
	00000001                 QUEUEID
	fffffffe                 FLAG
	0000000000000002         QUEUEOFFSET
	0000000000001234         PHYSICALOFFSET
	00000000                 SYSFLAG
	0000018bcfe56800         BORNTIMESTAMP
	0a000001 0000d431        BORNHOST
	0000018bcfe56805         STORETIMESTAMP
	0a000005 00002a9f        STOREHOST
	00000003                 RECONSUMETIMES
	0000000000000000         PREPAREDTRANSACTIONOFFSET
	00000005 48656c6c6f      BODY
	09 546f70696354657374    TOPIC
	0020 4b455953016b31206b320254414753015461674102554e49515f4b4559015802`

// unhexLayout decodes a layout listing: the first word of each line is hex, the rest of
// the line a comment, except that further words that are all hex digits are hex too.
func unhexLayout(t testing.TB, s string) []byte {
	t.Helper()
	var hexText strings.Builder
	for _, line := range strings.Split(s, "\n") {
		for _, w := range strings.Fields(line) {
			if strings.Trim(w, "0123456789abcdef") != "" {
				break
			}
			hexText.WriteString(w)
		}
	}
	return unhex(t, hexText.String())
}

func TestMessageGolden(t *testing.T) {
	want := unhexLayout(t, goldenRecordV1)
	got, err := AppendMessageExt([]byte("x"), &goldenMessage)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("AppendMessageExt:\n got %x\nwant %x", got[1:], want)
	}
	msgs, err := DecodeMessages(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !reflect.DeepEqual(msgs[0], goldenMessage) {
		t.Fatalf("DecodeMessages = %+v, want %+v", msgs, goldenMessage)
	}
	if id := msgs[0].OffsetMsgID(); id != "0A00000500002A9F0000000000001234" {
		t.Fatalf("offset msg id %s", id)
	}
}

// TestMessageV2Record reads a record as a Java broker writes it for a long topic: V2
// magic and a 2-byte topic length, with IPv6 hosts.
func TestMessageV2Record(t *testing.T) {
	rec := unhexLayout(t, `
		000000a2                 TOTALSIZE 162 = 137 + 2*12 IPv6 address bytes + 1 topic length byte
		daa320ab                 MAGIC V2
		00000000                 BODYCRC (not checked)
		00000001                 QUEUEID
		fffffffe                 FLAG
		0000000000000002         QUEUEOFFSET
		0000000000001234         PHYSICALOFFSET
		00000030                 SYSFLAG born and store host IPv6
		0000018bcfe56800         BORNTIMESTAMP
		20010db8000000000000000000000001 0000d431   BORNHOST
		0000018bcfe56805         STORETIMESTAMP
		20010db8000000000000000000000005 00002a9f   STOREHOST
		00000003                 RECONSUMETIMES
		0000000000000007         PREPAREDTRANSACTIONOFFSET
		00000005 48656c6c6f      BODY
		0009 546f70696354657374  TOPIC
		0020 4b455953016b31206b320254414753015461674102554e49515f4b4559015802`)
	want := goldenMessage
	want.SysFlag = SysFlagBornHostV6 | SysFlagStoreHostV6
	want.BornHost = netip.MustParseAddrPort("[2001:db8::1]:54321")
	want.StoreHost = netip.MustParseAddrPort("[2001:db8::5]:10911")
	want.StoreSize = int32(len(rec))
	msgs, err := DecodeMessages(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !reflect.DeepEqual(msgs[0], want) {
		t.Fatalf("got %+v, want %+v", msgs, want)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	v6 := goldenMessage
	v6.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1")
	v6.SysFlag = SysFlagCompressed | SysFlagStoreHostV6 // the store host bit is cleared: IPv4
	mapped := goldenMessage
	mapped.StoreHost = netip.MustParseAddrPort("[::ffff:10.0.0.5]:10911")
	bare := mq.MessageExt{Message: mq.Message{Topic: strings.Repeat("t", 255)}}
	var body []byte
	var want []mq.MessageExt
	for _, m := range []mq.MessageExt{goldenMessage, v6, mapped, bare} {
		var err error
		if body, err = AppendMessageExt(body, &m); err != nil {
			t.Fatal(err)
		}
		m.StoreSize = 0
		want = append(want, m)
	}
	want[1].SysFlag = SysFlagCompressed | SysFlagBornHostV6
	want[2].StoreHost = netip.MustParseAddrPort("10.0.0.5:10911")
	want[3].BornHost = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	want[3].StoreHost = want[3].BornHost
	got, err := DecodeMessages(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].StoreSize <= 0 {
			t.Fatalf("#%d: StoreSize %d", i, got[i].StoreSize)
		}
		got[i].StoreSize = 0
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("#%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if msgs, err := DecodeMessages(nil); msgs != nil || err != nil {
		t.Fatalf("empty body: %v, %v", msgs, err)
	}
}

func TestAppendMessageExtErrors(t *testing.T) {
	long := goldenMessage
	long.Topic = strings.Repeat("t", 256)
	props := goldenMessage
	props.Properties = map[string]string{"k": strings.Repeat("v", MaxPropertiesLen)}
	tests := []struct {
		name string
		m    *mq.MessageExt
		want error
	}{
		{"nil", nil, ErrMalformed},
		{"topic of 256 bytes", &long, mq.ErrInvalidTopic},
		{"properties over 32767 bytes", &props, mq.ErrMessageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendMessageExt([]byte("keep"), tc.m)
			if !errors.Is(err, tc.want) || string(got) != "keep" {
				t.Fatalf("got %d bytes, %v; want %v", len(got), err, tc.want)
			}
		})
	}
	// Properties of exactly 32767 bytes fit.
	fit := goldenMessage
	fit.Tags, fit.Keys = "", ""
	fit.Properties = map[string]string{"k": strings.Repeat("v", MaxPropertiesLen-3)}
	b, err := AppendMessageExt(nil, &fit)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeMessages(b); err != nil || !maps.Equal(got[0].Properties, fit.Properties) {
		t.Fatalf("properties of 32767 bytes: %v", err)
	}
}

func TestDecodeMessagesMalformed(t *testing.T) {
	good := unhexLayout(t, goldenRecordV1)
	mutate := func(at int, b ...byte) []byte {
		r := bytes.Clone(good)
		copy(r[at:], b)
		return r
	}
	const bodyLenAt, topicLenAt, propLenAt = 84, 84 + 4 + 5, 84 + 4 + 5 + 1 + 9
	tests := []struct {
		name, body, field string
	}{
		{"short size", string(good[:3]), "TOTALSIZE"},
		{"size under the fixed part", string(mutate(0, 0, 0, 0, 83)), "TOTALSIZE 83"},
		{"size past the end", string(mutate(0, 0, 0, 0, 138)), "TOTALSIZE 138"},
		{"size negative", string(mutate(0, 0xff, 0xff, 0xff, 0xff)), "TOTALSIZE -1"},
		{"bad magic", string(mutate(4, 0xaa)), "MAGIC"},
		{"batch item magic", string(mutate(4, 0, 0, 0, 0)), "MAGIC"},
		{"port out of range", string(mutate(48+4, 0, 1, 0, 0)), "BORNHOST port 65536"},
		{"v6 flag without the bytes", string(mutate(36, 0, 0, 0, 0x30)), "BORNHOST port"},
		{"store v6 flag without the bytes", string(mutate(36, 0, 0, 0, 0x20)), "body of 1885954900 bytes"},
		{"body length past the record", string(mutate(bodyLenAt, 0, 0, 0, 200)), "body of 200 bytes"},
		{"body length negative", string(mutate(bodyLenAt, 0x80, 0, 0, 0)), "body of -2147483648 bytes"},
		{"topic length past the record", string(mutate(topicLenAt, 200)), "topic of 200 bytes"},
		{"properties length negative", string(mutate(propLenAt, 0xff, 0xff)), "properties of -1 bytes"},
		{"properties length past the record", string(mutate(propLenAt, 0, 33)), "properties of 33 bytes"},
		{"record longer than its fields", string(append(mutate(0, 0, 0, 0, 138), 0)), "1 bytes after the properties"},
		{"second record cut", string(append(bytes.Clone(good), good[:50]...)), "message 1 at byte 137"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := DecodeMessages([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) || msgs != nil {
				t.Fatalf("got %d messages, %v; want ErrMalformed", len(msgs), err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", nil},
		{"trailing separator", "a\x01b\x02c\x01d\x02", map[string]string{"a": "b", "c": "d"}},
		{"no trailing separator", "a\x01b\x02c\x01d", map[string]string{"a": "b", "c": "d"}},
		{"empty value and key", "a\x01\x02\x01v\x02", map[string]string{"a": "", "": "v"}},
		{"entries without one separator skipped", "a\x02b\x01c\x01d\x02\x02e\x01f", map[string]string{"e": "f"}},
		{"utf-8", "键\x01值\x02", map[string]string{"键": "值"}},
		{"last wins", "a\x011\x02a\x012\x02", map[string]string{"a": "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseProperties(tc.in)
			if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if back := ParseProperties(string(AppendProperties(nil, got))); !maps.Equal(back, got) {
				t.Fatalf("round trip %q", back)
			}
		})
	}
	if got := string(AppendProperties([]byte("x"), map[string]string{"b": "2", "a": "1"})); got != "xa\x011\x02b\x012\x02" {
		t.Fatalf("AppendProperties = %q", got)
	}
	m := &mq.Message{Tags: "T", Keys: "K", Properties: map[string]string{"TAGS": "old", "P": "v"}}
	s := FormatMessageProperties(m)
	if s != "KEYS\x01K\x02P\x01v\x02TAGS\x01T\x02" {
		t.Fatalf("FormatMessageProperties = %q", s)
	}
	if m.Properties["TAGS"] != "old" {
		t.Fatal("FormatMessageProperties changed the message")
	}
	var back mq.Message
	SetMessageProperties(&back, s)
	if back.Tags != "T" || back.Keys != "K" || !maps.Equal(back.Properties, map[string]string{"P": "v"}) {
		t.Fatalf("SetMessageProperties = %+v", back)
	}
	SetMessageProperties(&back, "TAGS\x01x\x02")
	if back.Tags != "x" || back.Keys != "" || back.Properties != nil {
		t.Fatalf("SetMessageProperties = %+v", back)
	}
	if FormatMessageProperties(nil) != "" {
		t.Fatal("nil message")
	}
	SetMessageProperties(nil, "TAGS\x01x\x02") // no panic
}

// TestFormatPropertiesUniq: a unique id given apart travels as the UNIQ_KEY property, in
// key order, in place of the message's own only when that is empty, and the message is
// not changed.
func TestFormatPropertiesUniq(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    mq.Message
		uniq string
		want string
	}{
		{"no properties", mq.Message{}, "U1", "UNIQ_KEY\x01U1\x02"},
		{"no id", mq.Message{Tags: "t"}, "", "TAGS\x01t\x02"},
		{"in key order", mq.Message{Tags: "t", Keys: "k", Properties: map[string]string{"A": "1", "Z": "9"}}, "U2",
			"A\x011\x02KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01U2\x02Z\x019\x02"},
		{"in place of an empty one", mq.Message{Properties: map[string]string{"UNIQ_KEY": ""}}, "U3", "UNIQ_KEY\x01U3\x02"},
		{"the message's own kept", mq.Message{Properties: map[string]string{"UNIQ_KEY": "MINE"}}, uniqOf(&mq.Message{Properties: map[string]string{"UNIQ_KEY": "MINE"}}, "U4"),
			"UNIQ_KEY\x01MINE\x02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.m.Properties)
			if got := formatProperties(&tc.m, tc.uniq); got != tc.want {
				t.Fatalf("formatProperties = %q, want %q", got, tc.want)
			}
			if !maps.Equal(tc.m.Properties, before) {
				t.Fatalf("the message's properties changed: %q", tc.m.Properties)
			}
			if tc.uniq == "" {
				if got := FormatMessageProperties(&tc.m); got != tc.want {
					t.Fatalf("FormatMessageProperties = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// goldenBatch is two batch items as rocketmq-client-go's primitive/message.go Marshal
// writes them (TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLEN + body, PROPLEN (i16) +
// properties): byte for byte its output, at commit 2173d07, for a message with flag 7, tag
// A and body "hi", then an empty one.
const goldenBatch = `
	0000001f 00000000 00000000 00000007 00000002 6869 0007 5441475301 41 02
	00000016 00000000 00000000 00000000 00000000      0000`

func TestBatchGolden(t *testing.T) {
	want := unhexLayout(t, goldenBatch)
	msgs := []*mq.Message{{Flag: 7, Tags: "A", Body: []byte("hi")}, {}}
	got, err := AppendBatch([]byte("x"), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[1:], want) {
		t.Fatalf("AppendBatch:\n got %x\nwant %x", got[1:], want)
	}
	back, err := DecodeBatch(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, msgs) {
		t.Fatalf("DecodeBatch = %+v, want %+v", back, msgs)
	}
	// Java writes a magic and a CRC in some versions; both are ignored.
	java := bytes.Clone(want)
	copy(java[4:], []byte{0xda, 0xa3, 0x20, 0xa7, 1, 2, 3, 4})
	if back, err := DecodeBatch(java); err != nil || !reflect.DeepEqual(back, msgs) {
		t.Fatalf("with magic and CRC: %+v, %v", back, err)
	}
}

// TestJavaBatch reads a batch body captured from Apache RocketMQ 5.5.0's
// MessageDecoder.encodeMessages: a message with tag TagA, key K1, property u=v and body
// "hey", then an empty one; the Java client adds WAIT=true to each.
func TestJavaBatch(t *testing.T) {
	body := unhex(t, "00000039000000000000000000000000000000036865790020750176024b455953014b310257414954017472756502544147530154616741"+
		"020000002000000000000000000000000000000000000a57414954017472756502")
	want := []*mq.Message{
		{Tags: "TagA", Keys: "K1", Properties: map[string]string{"u": "v", "WAIT": "true"}, Body: []byte("hey")},
		{Properties: map[string]string{"WAIT": "true"}},
	}
	got, err := DecodeBatch(body)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	msgs := []*mq.Message{
		{Flag: -1, Keys: "a b", Properties: map[string]string{"UNIQ_KEY": "U1", "DELAY": "3"}, Body: bytes.Repeat([]byte{9}, 70000)},
		{Tags: "T", Body: []byte("x")},
	}
	b, err := AppendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeBatch(b)
	if err != nil || !reflect.DeepEqual(back, msgs) {
		t.Fatalf("got %+v, %v", back, err)
	}
	if got, err := AppendBatch([]byte("k"), []*mq.Message{msgs[0], nil}); !errors.Is(err, ErrMalformed) || string(got) != "k" {
		t.Fatalf("nil message: %q, %v", got, err)
	}
	big := &mq.Message{Properties: map[string]string{"k": strings.Repeat("v", MaxPropertiesLen)}}
	if got, err := AppendBatch([]byte("k"), []*mq.Message{msgs[1], big}); !errors.Is(err, mq.ErrMessageTooLarge) || string(got) != "k" {
		t.Fatalf("long properties: %d bytes, %v", len(got), err)
	}
	if got, err := DecodeBatch(nil); got != nil || err != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
}

func TestDecodeBatchMalformed(t *testing.T) {
	good := unhexLayout(t, goldenBatch)
	mutate := func(at int, b ...byte) []byte {
		r := bytes.Clone(good)
		copy(r[at:], b)
		return r
	}
	tests := []struct {
		name  string
		body  []byte
		field string
	}{
		{"short size", good[:2], "TOTALSIZE"},
		{"size under the fixed part", mutate(0, 0, 0, 0, 21), "TOTALSIZE 21"},
		{"size past the end", good[:30], "TOTALSIZE 31, 30 bytes left"},
		{"body length past the item", mutate(16, 0, 0, 0, 12), "body of 12 bytes"},
		{"body length negative", mutate(16, 0xff, 0xff, 0xff, 0xfe), "body of -2 bytes"},
		{"properties length past the item", mutate(22, 0, 8), "properties of 8 bytes"},
		{"properties length negative", mutate(22, 0x80, 0), "properties of -32768 bytes"},
		{"item longer than its fields", append(mutate(0, 0, 0, 0, 0x20), 0), "1 bytes after the properties"},
		{"second item cut", good[:31+10], "batch message 1 at byte 31"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := DecodeBatch(tc.body)
			if !errors.Is(err, ErrMalformed) || msgs != nil {
				t.Fatalf("got %d messages, %v; want ErrMalformed", len(msgs), err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// deflate compresses b with zlib.
func deflate(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestInflate(t *testing.T) {
	body := bytes.Repeat([]byte("EdgeMQ "), 1000)
	z := deflate(t, body)
	for _, maxSize := range []int{len(body), len(body) + 1, 1 << 20, math.MaxInt} {
		if got, err := Inflate(z, maxSize); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("max %d: %d bytes, %v", maxSize, len(got), err)
		}
	}
	if got, err := Inflate(z, len(body)-1); !errors.Is(err, mq.ErrMessageTooLarge) {
		t.Fatalf("one byte over: %d bytes, %v", len(got), err)
	}
	if got, err := Inflate(deflate(t, nil), 0); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q, %v", got, err)
	}
	bad := bytes.Clone(z)
	bad[len(bad)-1] ^= 1 // Adler-32 checksum
	for name, in := range map[string][]byte{"checksum": bad, "not zlib": []byte("hello"), "cut": z[:len(z)/2], "empty": nil} {
		if got, err := Inflate(in, 1<<20); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %d bytes, %v; want ErrMalformed", name, len(got), err)
		}
	}
}

// TestInflateBomb inflates 64 MiB of zeros with a cap of 1 MiB: it fails without
// allocating much past the cap.
func TestInflateBomb(t *testing.T) {
	var buf bytes.Buffer
	w, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		w.Write(zeros)
	}
	w.Close()
	bomb := buf.Bytes()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := Inflate(bomb, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, mq.ErrMessageTooLarge) {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("allocated %d bytes for a cap of 1 MiB", n)
	}
}

func TestDecompressBody(t *testing.T) {
	body := []byte(strings.Repeat("compress me ", 400))
	for _, flag := range []int32{SysFlagCompressed, SysFlagCompressed | 3<<8} {
		m := &mq.MessageExt{SysFlag: flag | SysFlagMultiTags, Message: mq.Message{Body: deflate(t, body)}}
		if err := DecompressBody(m, 1<<20); err != nil || !bytes.Equal(m.Body, body) || m.SysFlag != SysFlagMultiTags {
			t.Fatalf("flag %#x: %v, sysflag %#x", flag, err, m.SysFlag)
		}
	}
	plain := &mq.MessageExt{Message: mq.Message{Body: []byte("x")}}
	if err := DecompressBody(plain, 0); err != nil || string(plain.Body) != "x" {
		t.Fatalf("uncompressed: %v", err)
	}
	lz4 := &mq.MessageExt{SysFlag: SysFlagCompressed | 1<<8, Message: mq.Message{Body: []byte("x")}}
	if err := DecompressBody(lz4, 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("LZ4: %v", err)
	}
	big := &mq.MessageExt{SysFlag: SysFlagCompressed, Message: mq.Message{Body: deflate(t, body)}}
	if err := DecompressBody(big, 10); !errors.Is(err, mq.ErrMessageTooLarge) || big.SysFlag != SysFlagCompressed {
		t.Fatalf("over the cap: %v", err)
	}
	if err := DecompressBody(nil, 0); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDecodeMessages decodes a pull body of 32 records of 100-byte bodies, each with a
// unique key and a tag as a producer sends them, as the client does with a pull's reply.
func BenchmarkDecodeMessages(b *testing.B) {
	var body []byte
	for i := range 32 {
		m := &mq.MessageExt{Message: mq.Message{Topic: "bench_topic", Body: make([]byte, 100), Tags: "tagA",
			Properties: map[string]string{mq.PropertyUniqKey: fmt.Sprintf("7F0000010000%020X", i)}},
			QueueOffset: int64(i), BornHost: netip.MustParseAddrPort("127.0.0.1:1234"), StoreHost: netip.MustParseAddrPort("127.0.0.1:10911")}
		var err error
		if body, err = AppendMessageExt(body, m); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := DecodeMessages(body)
		if err != nil || len(msgs) != 32 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
}

// TestAppendMessageExtAllocs checks that a record with tags, keys and properties is
// encoded into a buffer with room without allocating.
func TestAppendMessageExtAllocs(t *testing.T) {
	m := &mq.MessageExt{Message: mq.Message{Topic: "t", Tags: "T", Keys: "K", Body: make([]byte, 100),
		Properties: map[string]string{"UNIQ_KEY": "0123456789ABCDEF", "WAIT": "true", "TAGS": "old"}}}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := AppendMessageExt(buf[:0], m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendMessageExt allocated %v times per record", allocs)
	}
}

// sortedProps returns p as a Property list in key order.
func sortedProps(p map[string]string) []Property {
	var out []Property
	for _, k := range slices.Sorted(maps.Keys(p)) {
		out = append(out, Property{[]byte(k), []byte(p[k])})
	}
	return out
}

// TestAppendMessageExtProps checks that a record whose properties are given as a list in
// key order is the record AppendMessageExt writes from the map, TAGS and KEYS merged alike.
func TestAppendMessageExtProps(t *testing.T) {
	tests := []struct {
		name       string
		tags, keys string
		props      map[string]string
	}{
		{"none", "", "", nil},
		{"tags only", "T", "", nil},
		{"keys and tags only", "T", "K1 K2", nil},
		{"around", "T", "K", map[string]string{"A": "1", "L": "2", "UNIQ_KEY": "u", "a": "lower"}},
		{"stored TAGS and KEYS replaced", "T", "K", map[string]string{"KEYS": "old", "TAGS": "old", "Z": "z"}},
		{"stored TAGS kept without Tags", "", "K", map[string]string{"TAGS": "kept", "B": ""}},
		{"before all", "T", "K", map[string]string{"AAA": "1", "B": "2"}},
		{"after all", "T", "", map[string]string{"zz": "1", "\xff": "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &mq.MessageExt{Message: mq.Message{Topic: "t", Tags: tc.tags, Keys: tc.keys, Properties: tc.props, Body: []byte("b")},
				QueueOffset: 3, StoreTime: 9}
			want, err := AppendMessageExt(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			byList := *m
			byList.Properties = map[string]string{"IGNORED": "x"}
			got, err := AppendMessageExtProps(nil, &byList, sortedProps(tc.props))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %q\nwant %q", got, want)
			}
		})
	}
}

// FuzzAppendMessageExtProps checks the list form against the map form on properties read
// from arbitrary properties strings.
func FuzzAppendMessageExtProps(f *testing.F) {
	f.Add("a\x011\x02TAGS\x01x\x02", "T", "K")
	f.Add("KEYS\x01k\x02z\x01\x02", "", "K")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, props, tags, keys string) {
		p := ParseProperties(props)
		m := &mq.MessageExt{Message: mq.Message{Topic: "t", Tags: tags, Keys: keys, Properties: p}}
		want, werr := AppendMessageExt(nil, m)
		got, gerr := AppendMessageExtProps(nil, m, sortedProps(p))
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("list form %q %v, map form %q %v", got, gerr, want, werr)
		}
	})
}
