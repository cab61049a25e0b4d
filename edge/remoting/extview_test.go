package remoting

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
)

// A command read with LazyExt keeps its binary header's fields undecoded: Fields makes the
// map a Reader without it makes (a repeated key keeps its last value, more fields than
// the view holds spill into a map), and the hot headers parse from them alike.
func TestLazyExtFields(t *testing.T) {
	many := map[string]string{}
	for i := range extViewPairs + 5 {
		many[fmt.Sprintf("k%02d", i)] = fmt.Sprint(i)
	}
	pull := PullHeader{ConsumerGroup: "g", Topic: "T", QueueID: 3, QueueOffset: 42, MaxMsgNums: 32, SysFlag: 2,
		SuspendTimeoutMillis: 20000, Subscription: "*", SubVersion: 7, BrokerName: "b"}
	for _, tc := range []struct {
		name   string
		fields [][2]string // in wire order
	}{
		{"none", nil},
		{"one", [][2]string{{"a", "1"}}},
		{"repeated key", [][2]string{{"a", "1"}, {"b", "2"}, {"a", "3"}}},
		{"more than the view holds", pairsOf(many)},
		{"more than the view holds, repeated", append(pairsOf(many), [2]string{"k00", "last"})},
		{"pull header", pairsOf(pull.Ext())},
		{"send response header", pairsOf(SendResponseHeader{MsgID: "ID", QueueID: 1, QueueOffset: 9}.Ext())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ext []byte
			for _, p := range tc.fields {
				ext = append(ext, byte(len(p[0])>>8), byte(len(p[0])))
				ext = append(ext, p[0]...)
				ext = append(ext, byte(len(p[1])>>24), byte(len(p[1])>>16), byte(len(p[1])>>8), byte(len(p[1])))
				ext = append(ext, p[1]...)
			}
			h := append(unhex(t, "0069 09 01df 00000001 00000000 00000000"), byte(len(ext)>>24), byte(len(ext)>>16), byte(len(ext)>>8), byte(len(ext)))
			h = append(h, ext...)
			eager, err := decodeBinaryHeader(h, false)
			if err != nil {
				t.Fatal(err)
			}
			lazy, err := decodeBinaryHeader(h, true)
			if err != nil {
				t.Fatal(err)
			}
			if lazy.Ext != nil {
				t.Fatalf("lazily read: Ext %v, want nil until Fields", lazy.Ext)
			}
			checkLazyFields(t, eager, lazy)
			want := map[string]string(nil)
			for _, p := range tc.fields {
				if want == nil {
					want = map[string]string{}
				}
				want[p[0]] = p[1]
			}
			if got := lazy.Fields(); !maps.Equal(got, want) || (got == nil) != (want == nil) {
				t.Fatalf("Fields: %v, want %v", got, want)
			}
		})
	}
	// The pull header read lazily is the one written.
	c := &Command{Code: PullMessage, Ext: pull.Ext(), Serialize: RocketMQ}
	b, err := c.AppendFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(&byteReader{b: b}, 0)
	r.LazyExt = true
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	back, err := got.ParsePullHeader()
	if err != nil || !reflect.DeepEqual(back, pull) {
		t.Fatalf("ParsePullHeader of a lazily read pull: %+v, %v; want %+v", back, err, pull)
	}
}

// pairsOf returns m's fields, in no particular order.
func pairsOf(m map[string]string) [][2]string {
	var ps [][2]string
	for k, v := range m {
		ps = append(ps, [2]string{k, v})
	}
	return ps
}
