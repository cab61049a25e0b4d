package remoting

import "testing"

// TestCountExtFields: the fields of a binary header's extFields are counted as far as
// they are well formed, so that the decoder makes its map for all of them at once.
func TestCountExtFields(t *testing.T) {
	field := func(k, v string) string {
		return string([]byte{byte(len(k) >> 8), byte(len(k))}) + k +
			string([]byte{byte(len(v) >> 24), byte(len(v) >> 16), byte(len(v) >> 8), byte(len(v))}) + v
	}
	two := field("topic", "T") + field("queueId", "3")
	for _, tc := range []struct {
		name string
		ext  string
		want int
	}{
		{"none", "", 0},
		{"one", field("a", "b"), 1},
		{"empty key and value", field("", ""), 1},
		{"two", two, 2},
		{"key length cut short", two + "\x00", 2},
		{"negative key length", two + "\xff\xff", 2},
		{"key past the end", two + "\x00\x09ab", 2},
		{"value length cut short", two + "\x00\x01k\x00\x00", 2},
		{"value past the end", two + "\x00\x01k\x00\x00\x00\x05ab", 2},
		{"negative value length", two + "\x00\x01k\xff\xff\xff\xff", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := countExtFields(tc.ext); got != tc.want {
				t.Fatalf("countExtFields = %d, want %d", got, tc.want)
			}
		})
	}
}

// mapSink makes the maps of TestDecodeBinaryHeaderMapOnce escape, as the decoder's does.
var mapSink map[string]string

// TestDecodeBinaryHeaderMapOnce: a pull's header, a dozen fields, decodes with one map made
// for all of them (a map grown field by field leaves its first table behind).
func TestDecodeBinaryHeaderMapOnce(t *testing.T) {
	h := PullHeader{ConsumerGroup: "g", Topic: "T", QueueID: 1, QueueOffset: 5, MaxMsgNums: 32, SysFlag: 3, CommitOffset: 4,
		SuspendTimeoutMillis: 15000, Subscription: "*", ExpressionType: "TAG", BrokerName: "b"}
	buf, err := appendBinaryHeader(nil, &Command{Code: PullMessage, Header: &h, Serialize: RocketMQ})
	if err != nil {
		t.Fatal(err)
	}
	c, err := decodeBinaryHeader(buf, false)
	if err != nil || len(c.Ext) < 9 {
		t.Fatalf("decoded %d fields, %v; want over 8 (what a map holds before it grows)", len(c.Ext), err)
	}
	grown := testing.AllocsPerRun(100, func() {
		m := map[string]string{}
		for k, v := range c.Ext {
			m[k] = v
		}
		mapSink = m
	})
	once := testing.AllocsPerRun(100, func() {
		m := make(map[string]string, len(c.Ext))
		for k, v := range c.Ext {
			m[k] = v
		}
		mapSink = m
	})
	// The command, the fields' string, and the map made once.
	if got := testing.AllocsPerRun(100, func() { decodeBinaryHeader(buf, false) }); got > 2+once || grown <= once {
		t.Fatalf("decode: %v allocations, want at most 2 + %v (a map made at once; grown: %v)", got, once, grown)
	}
}
