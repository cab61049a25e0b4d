package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

func prop(k, v string) store.Property { return store.Property{Key: k, Value: v} }

func TestReadItemProps(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		tags, keys string
		uniq       string
		props      []store.Property
		slow       bool
	}{
		{name: "none"},
		{name: "tags and keys only", in: "KEYS\x01k1 k2\x02TAGS\x01t\x02", tags: "t", keys: "k1 k2"},
		{name: "in key order", in: "A\x011\x02KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01U1\x02z\x01\x02", tags: "t", keys: "k", uniq: "U1",
			props: []store.Property{prop("A", "1"), prop("UNIQ_KEY", "U1"), prop("z", "")}},
		{name: "out of order", in: "z\x019\x02UNIQ_KEY\x01U\x02A\x011\x02M\x01m", uniq: "U",
			props: []store.Property{prop("A", "1"), prop("M", "m"), prop("UNIQ_KEY", "U"), prop("z", "9")}},
		{name: "a name twice: the last counts", in: "A\x011\x02TAGS\x01x\x02B\x01b\x02A\x012\x02TAGS\x01y\x02A\x013", tags: "y",
			props: []store.Property{prop("A", "3"), prop("B", "b")}},
		{name: "malformed entries skipped", in: "noSep\x02A\x01b\x01c\x02\x02B\x01ok\x02\x01empty name\x02",
			props: []store.Property{prop("", "empty name"), prop("B", "ok")}},
		{name: "empty tags", in: "TAGS\x01\x02", props: nil},
		{name: "a delay level", in: "DELAY\x013\x02", slow: true, props: []store.Property{prop("DELAY", "3")}},
		{name: "a transaction's mark", in: "TRAN_MSG\x01true\x02", slow: true, props: []store.Property{prop("TRAN_MSG", "true")}},
		{name: "many, reversed", in: func() string {
			var s string
			for i := 40; i > 0; i-- {
				s += fmt.Sprintf("p%02d\x01%d\x02", i, i)
			}
			return s + "p07\x01last\x02"
		}(), props: func() []store.Property {
			var ps []store.Property
			for i := 1; i <= 40; i++ {
				v := fmt.Sprint(i)
				if i == 7 {
					v = "last"
				}
				ps = append(ps, store.Property{Key: fmt.Sprintf("p%02d", i), Value: v})
			}
			return ps
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readItemProps(tc.in, nil)
			if got.tags != tc.tags || got.keys != tc.keys || got.uniq != tc.uniq || got.slow != tc.slow ||
				!(len(got.props) == 0 && len(tc.props) == 0 || reflect.DeepEqual(got.props, tc.props)) {
				t.Fatalf("got  tags %q keys %q uniq %q slow %v props %q\nwant tags %q keys %q uniq %q slow %v props %q",
					got.tags, got.keys, got.uniq, got.slow, got.props, tc.tags, tc.keys, tc.uniq, tc.slow, tc.props)
			}
		})
	}
}

// wireProps lays out m's properties as a batch item carries them, TAGS and KEYS among
// them, in key order or reversed.
func wireProps(m *mq.Message, reverse bool) []byte {
	var names []string
	for k := range m.Properties {
		names = append(names, k)
	}
	if m.Tags != "" {
		names = append(names, "TAGS")
	}
	if m.Keys != "" {
		names = append(names, "KEYS")
	}
	slices.Sort(names)
	if reverse {
		slices.Reverse(names)
	}
	var b []byte
	for _, k := range names {
		v := m.Properties[k]
		switch k {
		case "TAGS":
			v = m.Tags
		case "KEYS":
			v = m.Keys
		}
		b = fmt.Appendf(b, "%s\x01%s\x02", k, v)
	}
	return b
}

// variedMessage returns message i of topic T of one of five kinds: a one-byte body; tags,
// keys and a UNIQ_KEY; odd property names and values, and a body over CompressOver 200;
// keys alone; a WAIT property and a UNIQ_KEY (to which callers add, on the wire, a
// malformed entry and WAIT given twice).
func variedMessage(i, kind int) *mq.Message {
	m := &mq.Message{Topic: "T", Flag: int32(i - 30)}
	switch kind {
	case 0:
		m.Body = []byte{byte(i)}
	case 1:
		m.Tags, m.Keys = "telemetry", fmt.Sprintf("k%d", i)
		m.Properties = map[string]string{mq.PropertyUniqKey: fmt.Sprintf("C0A8000100%04X", i)}
		m.Body = bytes.Repeat([]byte("21.5 "), 20)
	case 2:
		m.Tags = "t"
		m.Properties = map[string]string{"A": "1", "KEYSX": "x", "M": "", "TAGSX": "y", "Z": "größe 21°C", "": "no name"}
		m.Body = bytes.Repeat([]byte{byte(i), 0xff, 0}, 100) // compressed
	case 3:
		m.Keys = "only keys"
	case 4:
		m.Properties = map[string]string{"WAIT": "true", mq.PropertyUniqKey: fmt.Sprint(i)}
		m.Body = []byte("b")
	}
	return m
}

// sendItems stores items through SendBatchItemsAsyncFrom and waits for its results.
func sendItems(t testing.TB, b *Broker, topic string, items []BatchItem, sel mq.QueueSelector, o Origin) ([]mq.SendResult, error) {
	t.Helper()
	type out struct {
		res []mq.SendResult
		err error
	}
	ch := make(chan out, 1)
	if err := b.SendBatchItemsAsyncFrom(context.Background(), topic, items, sel, o, func(r []mq.SendResult, err error) { ch <- out{r, err} }); err != nil {
		return nil, err
	}
	r := <-ch
	return r.res, r.err
}

// storedViews returns the records of a queue as read in place, copied: every field of the
// payload, the properties in the order the record holds them.
func storedViews(t testing.TB, b *Broker, q mq.MessageQueue) []string {
	t.Helper()
	var out []string
	_, err := b.PullViews(context.Background(), mq.PullRequest{Group: "g", Queue: q, MaxMsgs: 1000, Filter: "*"}, func(v *store.View) {
		s := fmt.Sprintf("topic %q queue %d offset %d flag %d sysflag %#x born %d host %v reconsume %d tags %q keys %q body %q props",
			v.Topic, v.QueueID, v.QueueOffset, v.Flag, v.SysFlag, v.BornTime, v.BornHost, v.ReconsumeTimes, v.Tags, v.Keys, v.Body)
		for k, val := range v.Properties {
			s += fmt.Sprintf(" %q=%q", k, val)
		}
		out = append(out, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSendBatchItemsStoresAsSendBatch: a batch's items are stored as SendBatchAsyncFrom
// stores the messages they hold, with the same origin: flag, body (compressed over
// CompressOver alike), tags, keys and every property, born time and host, reconsume count;
// and the results are the same, UNIQ_KEYs included. Both brokers read one fixed clock: a
// record's size depends on its store time (varint deltas), so do the commit log offsets.
func TestSendBatchItemsStoresAsSendBatch(t *testing.T) {
	now := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	opts := func() *Options { return &Options{CompressOver: 200, Now: func() time.Time { return now }} }
	raw, ref := openBroker(t, opts()), openBroker(t, opts())
	o := Origin{BornTime: 1_764_633_600_123, BornHost: netip.MustParseAddrPort("192.0.2.7:40123"), ReconsumeTimes: 2}
	var msgs []*mq.Message
	var items []BatchItem
	for i := range 60 {
		m := variedMessage(i, i%5)
		msgs = append(msgs, m)
		it := BatchItem{Flag: m.Flag, Body: m.Body, Properties: wireProps(m, i%2 == 1)}
		if i%5 == 4 { // a malformed entry and a name given twice, which readers treat alike
			it.Properties = append(it.Properties, "broken\x02WAIT\x01false\x02"...)
			m.Properties["WAIT"] = "false"
		}
		items = append(items, it)
	}
	for q := range 2 {
		sel := mq.QueueIndex(q)
		if q == 1 {
			sel = nil // round robin: the first queue, as the reference's
		}
		got, err := sendItems(t, raw, "T", items, sel, o)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		var want []mq.SendResult
		if err := ref.SendBatchAsyncFrom(context.Background(), msgs, sel, o, func(r []mq.SendResult, err error) { want = r; ch <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("results\n%+v\nwant\n%+v", got, want)
		}
	}
	for q := range int32(4) {
		queue := mq.MessageQueue{Topic: "T", QueueID: q}
		got, want := storedViews(t, raw, queue), storedViews(t, ref, queue)
		if len(got) != len(want) {
			t.Fatalf("queue %d: %d records, want %d", q, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("queue %d record %d:\ngot  %s\nwant %s", q, i, got[i], want[i])
			}
		}
	}
}

// TestSendBatchItemsDelayLevel: an item with a delay level waits in the schedule topic, as
// a delayed message sent any other way does, while its batch's other items are stored in
// their topic; a delay level that is no number is refused.
func TestSendBatchItemsDelayLevel(t *testing.T) {
	b := openBroker(t, nil)
	items := []BatchItem{
		{Body: []byte("now"), Properties: []byte("UNIQ_KEY\x01U0\x02")},
		{Body: []byte("later"), Properties: []byte("DELAY\x012\x02UNIQ_KEY\x01U1\x02")},
	}
	res, err := sendItems(t, b, "T", items, mq.QueueIndex(1), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Queue != (mq.MessageQueue{Topic: "T", BrokerName: b.opts.BrokerName, QueueID: 1}) ||
		res[1].Queue.Topic != mq.ScheduleTopic || res[1].Queue.QueueID != 1 || res[1].UniqID != "U1" {
		t.Fatalf("results %+v: want the delayed item in queue 1 (level 2) of %s", res, mq.ScheduleTopic)
	}
	ms := schedRead(t, b, mq.ScheduleTopic, 1)
	if len(ms) != 1 || string(ms[0].Body) != "later" || ms[0].Properties[mq.PropertyRealTopic] != "T" ||
		ms[0].Properties[mq.PropertyRealQueueID] != "1" || ms[0].Properties[mq.PropertyDelayLevel] != "2" {
		t.Fatalf("schedule queue 1 holds %+v", ms)
	}
	bad := []BatchItem{{Body: []byte("x"), Properties: []byte("DELAY\x01soon\x02")}}
	if _, err := sendItems(t, b, "T", bad, nil, Origin{}); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("a bad delay level: %v, want %v", err, mq.ErrInvalidArgument)
	}
}

// TestSendBatchItemsRetryTopic: items sent to a retry topic count their reconsume times as
// any message sent there does: past the maximum they go to the dead-letter topic.
func TestSendBatchItemsRetryTopic(t *testing.T) {
	b := openBroker(t, nil)
	retry := mq.RetryTopic("g")
	items := []BatchItem{{Body: []byte("again"), Properties: []byte("MAX_RECONSUME_TIMES\x012\x02RECONSUME_TIME\x013\x02")}}
	res, err := sendItems(t, b, retry, items, nil, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Queue.Topic != mq.DLQTopic("g") {
		t.Fatalf("stored in %s, want %s", res[0].Queue.Topic, mq.DLQTopic("g"))
	}
}

// TestSendBatchItemsRefused: what SendBatchAsyncFrom refuses is refused, nothing stored and
// no topic made; an empty batch stores nothing and is acknowledged.
func TestSendBatchItemsRefused(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	never := func([]mq.SendResult, error) { t.Error("done called for a refused batch") }
	big := make([]byte, b.opts.MaxMessageSize+1)
	items := []BatchItem{{Body: []byte("fine")}, {Body: big}}
	if err := b.SendBatchItemsAsyncFrom(ctx, "New", items, nil, Origin{}, never); !errors.Is(err, mq.ErrMessageTooLarge) {
		t.Fatalf("a body over the limit: %v, want %v", err, mq.ErrMessageTooLarge)
	}
	if err := b.SendBatchItemsAsyncFrom(ctx, "New", items[:1], nil, Origin{BornTime: -1}, never); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("a negative born time: %v, want %v", err, mq.ErrInvalidArgument)
	}
	if err := b.SendBatchItemsAsyncFrom(ctx, "New", items[:1], nil, Origin{}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("no done function: %v, want %v", err, mq.ErrInvalidArgument)
	}
	if err := b.SendBatchItemsAsyncFrom(ctx, "bad/name", items[:1], nil, Origin{}, never); !errors.Is(err, mq.ErrInvalidTopic) {
		t.Fatalf("a bad topic name: %v, want %v", err, mq.ErrInvalidTopic)
	}
	for _, tc := range b.Topics() {
		if tc.Name == "New" || strings.Contains(tc.Name, "bad") {
			t.Fatalf("topic %q made by a refused batch", tc.Name)
		}
	}
	if res, err := sendItems(t, b, "New", nil, nil, Origin{}); err != nil || res != nil {
		t.Fatalf("empty batch: %v, %v", res, err)
	}
}
