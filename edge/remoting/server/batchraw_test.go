package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
	"github.com/edgemq/edgemq/store"
)

// recordViews returns the records of a queue from offset on, as read in place: every field
// of the payload, the properties in the order the record holds them.
func recordViews(t testing.TB, b *edge.Broker, q mq.MessageQueue, offset int64) []string {
	t.Helper()
	var out []string
	for {
		res, err := b.PullViews(context.Background(), mq.PullRequest{Group: "g", Queue: q, Offset: offset, MaxMsgs: 1024, Filter: "*"}, func(v *store.View) {
			var sb strings.Builder
			fmt.Fprintf(&sb, "topic %q queue %d offset %d flag %d sysflag %#x born %d host %v reconsume %d tags %q keys %q body %q props",
				v.Topic, v.QueueID, v.QueueOffset, v.Flag, v.SysFlag, v.BornTime, v.BornHost, v.ReconsumeTimes, v.Tags, v.Keys, v.Body)
			for k, val := range v.Properties {
				fmt.Fprintf(&sb, " %q=%q", k, val)
			}
			out = append(out, sb.String())
		})
		if errors.Is(err, mq.ErrTopicNotExist) { // none stored yet (the schedule topic)
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != mq.PullFound {
			return out
		}
		offset = res.NextBeginOffset
	}
}

// sameRecords fails t unless queue q of got and want hold the same records from offset on.
func sameRecords(t testing.TB, got, want *edge.Broker, q mq.MessageQueue, offset int64) {
	t.Helper()
	g, w := recordViews(t, got, q, offset), recordViews(t, want, q, offset)
	if len(g) != len(w) {
		t.Fatalf("%v: %d records from %d, want %d", q, len(g), offset, len(w))
	}
	for i := range w {
		if g[i] != w[i] {
			t.Fatalf("%v record %d:\ngot  %s\nwant %s", q, i, g[i], w[i])
		}
	}
}

// uplinkItems lays out n batch items as a gateway's uplink does (remoting.AppendBatchItem,
// properties in key order, a UNIQ_KEY each) with tags, keys and other properties.
func uplinkItems(t testing.TB, n int) []byte {
	var items []byte
	for i := range n {
		props := []remoting.Property{
			{Key: []byte("A"), Value: []byte(fmt.Sprint(i))},
			{Key: []byte("TAGSX"), Value: []byte("größe")},
			{Key: []byte(mq.PropertyUniqKey), Value: fmt.Appendf(nil, "7F00000100002A9F%016X", i)},
			{Key: []byte("z"), Value: nil},
		}
		var err error
		items, err = remoting.AppendBatchItem(items, int32(i%3-1), fmt.Appendf(nil, `{"seq":%d,"temp":21.5}`, i),
			[]byte("telemetry"), fmt.Appendf(nil, "dev-%d", i%7), props[:i%5])
		if err != nil {
			t.Fatal(err)
		}
	}
	return items
}

// TestBatchItemsStoredAsMessages: a batch send, plain or zstd, stores each item as the
// broker's SendBatchFrom stores the message DecodeBatch reads of it, with the send's born
// time and the connection's address as born host: the records are the same, field for
// field and property for property in stored order.
func TestBatchItemsStoredAsMessages(t *testing.T) {
	hub, ref := openBroker(t, nil), openBroker(t, nil)
	s := startServer(t, hub, Options{})
	c := dial(t, s.Addr())
	items := uplinkItems(t, 300)
	zbody, err := zbatch.AppendItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	c.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), items)
	c.mustCall(remoting.Success, remoting.SendBatchZstd, sendExt("T", 1, ""), zbody)
	msgs, err := remoting.DecodeBatchTopic(items, "T")
	if err != nil {
		t.Fatal(err)
	}
	o := edge.Origin{BornTime: 1700000000000, BornHost: c.nc.LocalAddr().(*net.TCPAddr).AddrPort()}
	for q := range 2 {
		if _, err := ref.SendBatchFrom(context.Background(), msgs, mq.QueueIndex(q), o); err != nil {
			t.Fatal(err)
		}
		sameRecords(t, hub, ref, mq.MessageQueue{Topic: "T", QueueID: int32(q)}, 0)
	}
}

// TestOffsetMsgIDs: a batch's reply lists mq.OffsetMsgID of each result.
func TestOffsetMsgIDs(t *testing.T) {
	for _, host := range []string{"10.0.0.7:10911", "[2001:db8::1]:65535", "[::ffff:10.1.2.3]:0"} {
		h := netip.MustParseAddrPort(host)
		var res []mq.SendResult
		var want []string
		for _, off := range []int64{0, 1, 0x7fffffffffffffff, 123456789, 0xabcdef} {
			res = append(res, mq.SendResult{CommitLogOffset: off})
			want = append(want, mq.OffsetMsgID(h, off))
		}
		if got := offsetMsgIDs(h, res); got != strings.Join(want, ",") {
			t.Fatalf("%s: %s\nwant %s", host, got, strings.Join(want, ","))
		}
	}
}

// FuzzBatchItems: for any batch body, the broker stores what the server reads of it through
// SendBatchItemsAsyncFrom as SendBatchFrom stores what DecodeBatch reads, or refuses it
// alike; a body that does not decode is refused alike.
func FuzzBatchItems(f *testing.F) {
	f.Add(uplinkItems(f, 3))
	for _, props := range []string{"", "TAGS\x01a\x02KEYS\x01b\x02", "A\x011\x02TAGS\x01x\x02A\x012\x02TAGS\x01y",
		"noSep\x02A\x01b\x01c\x02\x02B\x01ok\x02\x01empty name\x02", "DELAY\x011\x02", "DELAY\x01x\x02",
		"z\x01\x02y\x01\x02UNIQ_KEY\x01U\x02"} {
		item, err := remoting.AppendBatchItem(nil, 3, []byte("body"), nil, nil, nil)
		if err != nil {
			f.Fatal(err)
		}
		item = append(item[:len(item)-2], byte(len(props)>>8), byte(len(props)))
		item = append(item, props...)
		item[0], item[1], item[2], item[3] = byte(len(item)>>24), byte(len(item)>>16), byte(len(item)>>8), byte(len(item))
		f.Add(item)
		f.Add(append(append([]byte(nil), item...), item[:10]...))
	}
	// Delayed messages stay in the schedule topic for the run: a day at every level.
	opts := func() *edge.Options { return &edge.Options{DelayLevels: []time.Duration{24 * time.Hour}} }
	hub, ref := openBroker(f, opts()), openBroker(f, opts())
	o := edge.Origin{BornTime: 1764633600000, BornHost: netip.MustParseAddrPort("192.0.2.1:5000"), ReconsumeTimes: 1}
	ctx := context.Background()
	q := mq.MessageQueue{Topic: "T"}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, werr := remoting.DecodeBatchTopic(body, "T")
		wire, err := remoting.DecodeBatchItems(nil, body)
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("DecodeBatchItems: %v; DecodeBatchTopic: %v", err, werr)
		}
		if err != nil || len(wire) == 0 {
			return
		}
		items := make([]edge.BatchItem, len(wire))
		for i, it := range wire {
			items[i] = edge.BatchItem(it)
		}
		from := int64(0)
		if qs, err := ref.Queues("T"); err == nil && len(qs) > 0 {
			from = qs[0].MaxOffset
		}
		_, werr = ref.SendBatchFrom(ctx, msgs, mq.QueueIndex(0), o)
		done := make(chan error, 1)
		err = hub.SendBatchItemsAsyncFrom(ctx, "T", items, mq.QueueIndex(0), o, func(_ []mq.SendResult, err error) { done <- err })
		if err == nil {
			err = <-done
		}
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("SendBatchItemsAsyncFrom: %v; SendBatchFrom: %v", err, werr)
		}
		sameRecords(t, hub, ref, q, from)
		if werr == nil {
			sameRecords(t, hub, ref, mq.MessageQueue{Topic: mq.ScheduleTopic}, 0)
		}
	})
}

// FuzzSendEncoded: for any properties of a single send, the broker stores what
// SendEncodedAsyncFrom is given as SendFrom stores the message the server made of them
// before (remoting.SetMessageProperties), or refuses it alike.
func FuzzSendEncoded(f *testing.F) {
	for _, props := range []string{"", "TAGS\x01a\x02KEYS\x01b\x02", "A\x011\x02TAGS\x01x\x02A\x012\x02TAGS\x01y",
		"noSep\x02A\x01b\x01c\x02\x02B\x01ok\x02\x01empty name\x02", "DELAY\x011\x02", "DELAY\x01x\x02",
		"z\x01\x02y\x01\x02UNIQ_KEY\x01U\x02", "TRAN_MSG\x01true\x02PGROUP\x01g\x02", "TRAN_MSG\x01no\x02"} {
		f.Add(props, []byte("body"), int32(3))
	}
	// Delayed messages stay in the schedule topic for the run: a day at every level.
	opts := func() *edge.Options { return &edge.Options{DelayLevels: []time.Duration{24 * time.Hour}} }
	hub, ref := openBroker(f, opts()), openBroker(f, opts())
	o := edge.Origin{BornTime: 1764633600000, BornHost: netip.MustParseAddrPort("192.0.2.1:5000"), ReconsumeTimes: 1}
	ctx := context.Background()
	q := mq.MessageQueue{Topic: "T"}
	f.Fuzz(func(t *testing.T, props string, body []byte, flag int32) {
		m := &mq.Message{Topic: "T", Flag: flag, Body: body}
		remoting.SetMessageProperties(m, props)
		from := int64(0)
		if qs, err := ref.Queues("T"); err == nil && len(qs) > 0 {
			from = qs[0].MaxOffset
		}
		want, werr := ref.SendFrom(ctx, m, mq.QueueIndex(0), o)
		done := make(chan error, 1)
		var got mq.SendResult
		err := hub.SendEncodedAsyncFrom(ctx, "T", flag, body, props, 0, o, func(r mq.SendResult, err error) { got = r; done <- err })
		if err == nil {
			err = <-done
		}
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Fatalf("SendEncodedAsyncFrom: %v; SendFrom: %v", err, werr)
		}
		if werr != nil {
			return
		}
		if got.Queue != want.Queue || got.QueueOffset != want.QueueOffset || got.UniqID != want.UniqID {
			t.Fatalf("result %+v, want %+v", got, want)
		}
		sameRecords(t, hub, ref, q, from)
		sameRecords(t, hub, ref, mq.MessageQueue{Topic: mq.ScheduleTopic}, 0)
	})
}
