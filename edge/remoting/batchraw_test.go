package remoting

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestAppendBatchItem checks that an item laid out from a message's parts is byte for byte
// the item AppendBatch lays out from the message.
func TestAppendBatchItem(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flag       int32
		body       string
		tags, keys string
		props      [][2]string // in key order
	}{
		{name: "bare"},
		{name: "body and flag", flag: -7, body: "hello"},
		{name: "tags", body: "b", tags: "TagA"},
		{name: "keys", body: "b", keys: "k1 k2"},
		{name: "tags keys and props around them", body: "b", tags: "T", keys: "K",
			props: [][2]string{{"A", "1"}, {"KEYT", "2"}, {"M", "3"}, {"TAGT", "4"}, {"UNIQ_KEY", "U"}}},
		{name: "props only", body: "b", props: [][2]string{{"EDGEMQ_SRC", "gw1"}, {"UNIQ_KEY", "X"}}},
		{name: "own TAGS and KEYS kept without fields", props: [][2]string{{"KEYS", "pk"}, {"TAGS", "pt"}}},
		{name: "own TAGS and KEYS replaced by fields", tags: "ft", keys: "fk", props: [][2]string{{"KEYS", "pk"}, {"TAGS", "pt"}}},
		{name: "empty value", body: "b", props: [][2]string{{"E", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mq.Message{Flag: tc.flag, Tags: tc.tags, Keys: tc.keys}
			if tc.body != "" {
				m.Body = []byte(tc.body)
			}
			var props []Property
			for _, p := range tc.props {
				if m.Properties == nil {
					m.Properties = map[string]string{}
				}
				m.Properties[p[0]] = p[1]
				props = append(props, Property{Key: []byte(p[0]), Value: []byte(p[1])})
			}
			want, err := AppendBatch(nil, []*mq.Message{m})
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendBatchItem([]byte("x"), tc.flag, m.Body, []byte(tc.tags), []byte(tc.keys), props)
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != 'x' || !bytes.Equal(got[1:], want) {
				t.Fatalf("got  %q\nwant %q", got[1:], want)
			}
			back, err := DecodeBatch(got[1:])
			if err != nil || len(back) != 1 {
				t.Fatalf("decode: %v, %d messages", err, len(back))
			}
			if b := back[0]; b.Flag != tc.flag || string(b.Body) != tc.body {
				t.Fatalf("decoded flag %d body %q", b.Flag, b.Body)
			}
		})
	}
}

func TestAppendBatchItemTooLarge(t *testing.T) {
	big := []Property{{Key: []byte("K"), Value: []byte(strings.Repeat("v", MaxPropertiesLen))}}
	got, err := AppendBatchItem([]byte("x"), 0, []byte("b"), nil, nil, big)
	if !errors.Is(err, mq.ErrMessageTooLarge) || string(got) != "x" {
		t.Fatalf("got %q, %v; want x and mq.ErrMessageTooLarge", got, err)
	}
}

func TestAppendBatchItemAllocs(t *testing.T) {
	props := []Property{{Key: []byte("A"), Value: []byte("1")}, {Key: []byte("UNIQ_KEY"), Value: []byte("X")}}
	buf := make([]byte, 0, 1024)
	n := testing.AllocsPerRun(100, func() {
		if _, err := AppendBatchItem(buf, 1, []byte("body"), []byte("T"), []byte("K"), props); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

// batchBodies are batch bodies, good and bad, that DecodeBatchTopic must read as
// DecodeBatch does.
func batchBodies(t testing.TB) map[string][]byte {
	good := unhexLayout(t, goldenBatch)
	mutate := func(at int, b ...byte) []byte {
		r := bytes.Clone(good)
		copy(r[at:], b)
		return r
	}
	item := func(props string) []byte {
		b, err := AppendBatchItem(nil, 3, []byte("body"), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b[:len(b)-2], byte(len(props)>>8), byte(len(props)))
		b = append(b, props...)
		b[0], b[1], b[2], b[3] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
		return b
	}
	var many []*mq.Message
	for i := range 200 {
		many = append(many, &mq.Message{Flag: int32(i), Tags: "t", Keys: fmt.Sprintf("k%d", i),
			Properties: map[string]string{mq.PropertyUniqKey: fmt.Sprintf("U%d", i), "seq": fmt.Sprint(i)},
			Body:       fmt.Appendf(nil, "body %d", i)})
	}
	manyBody, err := AppendBatch(nil, many)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"empty":                           nil,
		"golden":                          good,
		"many":                            manyBody,
		"only tags and keys":              item("TAGS\x01a\x02KEYS\x01b\x02"),
		"a name twice, the last wins":     item("A\x011\x02TAGS\x01x\x02A\x012\x02TAGS\x01y"),
		"malformed entries skipped":       item("noSep\x02A\x01b\x01c\x02\x02B\x01ok\x02\x01empty name\x02"),
		"no props":                        item(""),
		"short size":                      good[:2],
		"size under the fixed part":       mutate(0, 0, 0, 0, 21),
		"size past the end":               good[:30],
		"body length past the item":       mutate(16, 0, 0, 0, 12),
		"body length negative":            mutate(16, 0xff, 0xff, 0xff, 0xfe),
		"properties length past the item": mutate(22, 0, 8),
		"properties length negative":      mutate(22, 0x80, 0),
		"item longer than its fields":     append(mutate(0, 0, 0, 0, 0x20), 0),
		"second item cut":                 good[:31+10],
		"good then bad":                   append(bytes.Clone(manyBody), good[:30]...),
	}
}

// checkDecodeBatchTopic fails t unless DecodeBatchTopic reads body as DecodeBatch does.
func checkDecodeBatchTopic(t *testing.T, body []byte) {
	t.Helper()
	want, werr := DecodeBatch(body)
	for _, m := range want {
		m.Topic = "T"
	}
	got, err := DecodeBatchTopic(body, "T")
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("error %v, DecodeBatch's %v", err, werr)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, DecodeBatch %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("message %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestDecodeBatchTopic(t *testing.T) {
	for name, body := range batchBodies(t) {
		t.Run(name, func(t *testing.T) { checkDecodeBatchTopic(t, body) })
	}
}

// TestDecodeBatchTopicAllocs: a batch costs far fewer allocations than DecodeBatch's
// several per message.
func TestDecodeBatchTopicAllocs(t *testing.T) {
	body := batchBodies(t)["many"]
	old := testing.AllocsPerRun(20, func() { DecodeBatch(body) })
	n := testing.AllocsPerRun(20, func() { DecodeBatchTopic(body, "T") })
	if n > old/2+1 {
		t.Fatalf("%v allocations for 200 messages, DecodeBatch %v: want at most about half", n, old)
	}
	t.Logf("%v allocations for 200 messages, DecodeBatch %v", n, old)
}

func FuzzDecodeBatchTopic(f *testing.F) {
	for _, body := range batchBodies(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeBatchTopic(t, body)
		if _, err := DecodeBatchTopic(body, "T"); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
	})
}

// checkDecodeBatchItems fails t unless DecodeBatchItems reads body as DecodeBatch does: the
// same error, or items holding DecodeBatch's messages.
func checkDecodeBatchItems(t *testing.T, body []byte) {
	t.Helper()
	want, werr := DecodeBatch(body)
	prior := []BatchItem{{Flag: 7}}
	got, err := DecodeBatchItems(prior, body)
	if fmt.Sprint(err) != fmt.Sprint(werr) {
		t.Fatalf("error %v, DecodeBatch's %v", err, werr)
	}
	if len(got) != 1+len(want) || got[0].Flag != 7 {
		t.Fatalf("%d items after the one given, DecodeBatch %d messages", len(got)-1, len(want))
	}
	for i, w := range want {
		it := got[1+i]
		m := &mq.Message{Flag: it.Flag}
		if len(it.Body) > 0 {
			m.Body = it.Body
		}
		SetMessageProperties(m, string(it.Properties))
		if !reflect.DeepEqual(m, w) {
			t.Fatalf("item %d:\ngot  %+v\nwant %+v", i, m, w)
		}
	}
}

func TestDecodeBatchItems(t *testing.T) {
	for name, body := range batchBodies(t) {
		t.Run(name, func(t *testing.T) { checkDecodeBatchItems(t, body) })
	}
}

// TestDecodeBatchItemsAllocs: read into room it has, a batch costs no allocation.
func TestDecodeBatchItemsAllocs(t *testing.T) {
	body := batchBodies(t)["many"]
	dst := make([]BatchItem, 0, 256)
	if n := testing.AllocsPerRun(20, func() { DecodeBatchItems(dst, body) }); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

func FuzzDecodeBatchItems(f *testing.F) {
	for _, body := range batchBodies(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeBatchItems(t, body)
		if _, err := DecodeBatchItems(nil, body); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
	})
}
