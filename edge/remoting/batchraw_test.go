package remoting

import (
	"bytes"
	"errors"
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
