package server

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
)

// TestBatchItemsStoredAsSent: each item of a batch, plain or zstd, is stored with its flag,
// tags, keys, body and every property as sent, whatever their names (around TAGS, KEYS
// and UNIQ_KEY) and values (non-ASCII, empty); a property entry without its separator is
// dropped, as RocketMQ's clients drop it.
func TestBatchItemsStoredAsSent(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	var items []byte
	var want []mq.Message
	for i := range 40 {
		m := mq.Message{Topic: "T", Flag: int32(i - 20)}
		var props []remoting.Property
		switch i % 4 {
		case 0:
			m.Body = []byte{byte(i), 0, 0xff}
		case 1:
			m.Tags, m.Keys = "tag", fmt.Sprintf("k%d k%d", i, i+1)
		case 2:
			m.Tags, m.Keys, m.Body = "t", "key", []byte("größe")
			m.Properties = map[string]string{"A": "1", "KEYSX": "x", "M": "", "TAGSX": "y", mq.PropertyUniqKey: fmt.Sprintf("U%d", i), "Z": "21°C"}
		case 3:
			m.Body = []byte("b")
			m.Properties = map[string]string{"seq": fmt.Sprint(i)}
			props = append(props, remoting.Property{Key: []byte("broken"), Value: nil}) // made malformed below
		}
		for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
			props = append(props, remoting.Property{Key: []byte(k), Value: []byte(m.Properties[k])})
		}
		var err error
		if items, err = remoting.AppendBatchItem(items, m.Flag, m.Body, []byte(m.Tags), []byte(m.Keys), props); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 { // "broken\x01\x02" into "broken\x02\x02": an entry without a name separator
			at := len(items) - len(fmt.Sprintf("seq\x01%d\x02", i)) - 2
			items[at] = '\x02'
		}
		want = append(want, m)
	}
	zbody, err := zbatch.AppendItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	c.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), items)
	c.mustCall(remoting.Success, remoting.SendBatchZstd, sendExt("T", 1, ""), zbody)
	for q := range 2 {
		res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: int32(q)}, MaxMsgs: 100, Filter: "*"})
		if err != nil || len(res.Messages) != len(want) {
			t.Fatalf("queue %d: pulled %d, %v: want %d", q, len(res.Messages), err, len(want))
		}
		for i, g := range res.Messages {
			w := want[i]
			props := g.Properties
			if g.Flag != w.Flag || g.Tags != w.Tags || g.Keys != w.Keys || string(g.Body) != string(w.Body) ||
				!(len(props) == 0 && len(w.Properties) == 0 || reflect.DeepEqual(props, w.Properties)) {
				t.Fatalf("queue %d message %d:\ngot  flag %d tags %q keys %q props %q body %q\nwant flag %d tags %q keys %q props %q body %q",
					q, i, g.Flag, g.Tags, g.Keys, g.Properties, g.Body, w.Flag, w.Tags, w.Keys, w.Properties, w.Body)
			}
		}
	}
}

// TestMalformedBatchStoresNothing: a batch whose last item is malformed, plain or zstd, is
// refused MESSAGE_ILLEGAL and none of its items is stored, not even the good ones before it.
func TestMalformedBatchStoresNothing(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	var good []byte
	for i := range 10 {
		var err error
		good, err = remoting.AppendBatchItem(good, 0, fmt.Appendf(nil, "m%d", i), []byte("t"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	last := len(good) - (22 + len("m9") + len("TAGS\x01t\x02")) // the last item's start: 22 bytes of fixed fields
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"cut short", good[:len(good)-1]},
		{"body length past the item", func() []byte { b := append([]byte(nil), good...); b[last+19] = 0xff; return b }()},
		{"trailing bytes", append(append([]byte(nil), good...), 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zbody, err := zbatch.AppendItems(nil, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			c.mustCall(remoting.MessageIllegal, remoting.SendBatchMessage, sendExt("T", 0, ""), tc.body)
			c.mustCall(remoting.MessageIllegal, remoting.SendBatchZstd, sendExt("T", 0, ""), zbody)
			if qs, err := b.Queues("T"); err == nil && len(qs) > 0 && qs[0].MaxOffset != 0 {
				t.Fatalf("queue 0 of T holds %d messages after a malformed batch", qs[0].MaxOffset)
			}
		})
	}
	c.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), good)
	if qs, err := b.Queues("T"); err != nil || qs[0].MaxOffset != 10 {
		t.Fatalf("queue 0 of T: %+v, %v: want the good batch's 10", qs, err)
	}
}
