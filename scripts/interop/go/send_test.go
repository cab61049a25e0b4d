package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// readBackTimeout bounds how long a test waits for messages it has sent.
const readBackTimeout = 60 * time.Second

// sample returns three messages for topic: a short text body, a body of every byte value
// (property separators \x01 and \x02 included), and a 64 KiB body, which the Go producer sends
// zlib-compressed (sysFlag 1) when it goes alone. Each has a tag, two keys, a user flag and user
// properties, one of them non-ASCII.
func sample(topic, mode string) []*primitive.Message {
	binary := make([]byte, 1024)
	for i := range binary {
		binary[i] = byte(i)
	}
	large := []byte(strings.Repeat("large body for "+mode+" | ", 4000))[:64<<10]
	bodies := [][]byte{[]byte("hello from " + mode), binary, large}
	tags := []string{"TagA", "TagB", "TagC"}
	out := make([]*primitive.Message, len(bodies))
	for i, b := range bodies {
		out[i] = newMsg(topic, b, tags[i], []string{mode + "-key-" + string(rune('0'+i)), "shared key"},
			userProps{"mode": mode, "index": string(rune('0' + i)), "unicode": "héllo, 世界"})
		out[i].Flag = int32(7 + i)
	}
	return out
}

// readBack consumes topic from the first offset with a new group and checks that each sent
// message arrives exactly once, byte for byte.
func readBack(t *testing.T, group, topic string, want []sent) []got {
	t.Helper()
	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("c"))
	gs, ok := col.waitIDs(readBackTimeout, ids(want))
	if !ok {
		t.Fatalf("after %v, %d of %d messages never arrived: %v; got:%s", readBackTimeout,
			len(missing(gs, ids(want))), len(want), missing(gs, ids(want)), describe(gs))
	}
	gs = col.settle(2 * time.Second)
	idx := byID(gs)
	for _, w := range want {
		d := idx[w.id]
		if len(d) != 1 {
			t.Errorf("message %s delivered %d times, want once:%s", w.id, len(d), describe(d))
		}
		checkDelivered(t, w, d[0].msg)
		if d[0].msg.ReconsumeTimes != 0 {
			t.Errorf("message %s: ReconsumeTimes = %d, want 0", w.id, d[0].msg.ReconsumeTimes)
		}
	}
	if len(gs) != len(want) {
		t.Errorf("got %d deliveries, want %d:%s", len(gs), len(want), describe(gs))
	}
	return gs
}

// checkResult compares a single send's result with the delivery of that message.
func checkResult(t *testing.T, res *primitive.SendResult, g *primitive.MessageExt) {
	t.Helper()
	if res.MsgID != g.MsgId {
		t.Errorf("SendResult.MsgID = %q, consumer MsgId = %q", res.MsgID, g.MsgId)
	}
	if res.OffsetMsgID != g.OffsetMsgId {
		t.Errorf("message %s: SendResult.OffsetMsgID = %q, consumer OffsetMsgId = %q", g.MsgId, res.OffsetMsgID, g.OffsetMsgId)
	}
	if res.MessageQueue.QueueId != g.Queue.QueueId || res.QueueOffset != g.QueueOffset {
		t.Errorf("message %s: sent to queue %d offset %d, delivered from queue %d offset %d", g.MsgId,
			res.MessageQueue.QueueId, res.QueueOffset, g.Queue.QueueId, g.QueueOffset)
	}
}

// TestSendSync sends three messages one by one with SendSync (request code 10) and reads them
// back: body, flag, tags, keys, user properties, msg id (UNIQ_KEY), queue, queue offset and
// offset msg id as the send result gave them.
func TestSendSync(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("sync")
	p := newProducer(t, group)
	var want []sent
	results := map[string]*primitive.SendResult{}
	for _, m := range sample(topic, "sync") {
		props := userProps{"mode": m.GetProperty("mode"), "index": m.GetProperty("index"), "unicode": m.GetProperty("unicode")}
		at := time.Now()
		res := sendSync(t, p, m)
		if res.MsgID != m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex) {
			t.Errorf("SendResult.MsgID = %q, want the UNIQ_KEY %q", res.MsgID, m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex))
		}
		if res.OffsetMsgID == "" {
			t.Errorf("SendResult.OffsetMsgID is empty (reply ext field msgId)")
		}
		want = append(want, sent{msg: m, id: res.MsgID, props: props, at: at})
		results[res.MsgID] = res
	}
	for _, g := range readBack(t, group, topic, want) {
		if res := results[g.msg.MsgId]; res != nil {
			checkResult(t, res, g.msg)
		}
	}
}

// TestSendAsync sends three messages with SendAsync and reads them back as TestSendSync does.
func TestSendAsync(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("async")
	p := newProducer(t, group)
	type outcome struct {
		res *primitive.SendResult
		err error
	}
	var want []sent
	results := map[string]*primitive.SendResult{}
	for _, m := range sample(topic, "async") {
		props := userProps{"mode": m.GetProperty("mode"), "index": m.GetProperty("index"), "unicode": m.GetProperty("unicode")}
		done := make(chan outcome, 1)
		at := time.Now()
		err := p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
			done <- outcome{res, err}
		}, m)
		if err != nil {
			t.Fatalf("SendAsync: %v", err)
		}
		var o outcome
		select {
		case o = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("SendAsync: no callback within 30s")
		}
		if o.err != nil {
			t.Fatalf("SendAsync callback: %v", o.err)
		}
		if o.res.Status != primitive.SendOK {
			t.Fatalf("SendAsync: status %d, want SendOK", o.res.Status)
		}
		want = append(want, sent{msg: m, id: o.res.MsgID, props: props, at: at})
		results[o.res.MsgID] = o.res
	}
	for _, g := range readBack(t, group, topic, want) {
		if res := results[g.msg.MsgId]; res != nil {
			checkResult(t, res, g.msg)
		}
	}
}

// TestSendOneWay sends three messages with SendOneWay, which gets no result, and reads them back
// by the UNIQ_KEY the producer set.
func TestSendOneWay(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("oneway")
	p := newProducer(t, group)
	// The first send auto-creates the topic; a one-way send that fails is not reported, so the
	// test makes the topic exist with one sync send first and reads that one back too.
	first := newMsg(topic, []byte("creates the topic"), "TagZ", nil, nil)
	res := sendSync(t, p, first)
	want := []sent{{msg: first, id: res.MsgID}}
	for _, m := range sample(topic, "oneway") {
		props := userProps{"mode": m.GetProperty("mode"), "index": m.GetProperty("index"), "unicode": m.GetProperty("unicode")}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.SendOneWay(ctx, m)
		cancel()
		if err != nil {
			t.Fatalf("SendOneWay: %v", err)
		}
		id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
		if id == "" {
			t.Fatalf("SendOneWay left no UNIQ_KEY on the message")
		}
		want = append(want, sent{msg: m, id: id, props: props})
	}
	readBack(t, group, topic, want)
}

// TestSendBatch sends the three messages as one batch (request code 320). The Go producer gives
// batch items no UNIQ_KEY, so the test sets one on each, as the Java producer does. The broker
// must store the items as three records on consecutive offsets of one queue, and answer with the
// first offset and the offset msg ids joined by commas (SendResult.OffsetMsgID).
func TestSendBatch(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("batch")
	p := newProducer(t, group)
	msgs := sample(topic, "batch")
	var want []sent
	for _, m := range msgs {
		id := primitive.CreateUniqID()
		m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, id)
		want = append(want, sent{msg: m, id: id, props: userProps{"mode": m.GetProperty("mode"),
			"index": m.GetProperty("index"), "unicode": m.GetProperty("unicode")}})
	}
	// The Go client's SendResult.MsgID for a batch is the UNIQ_KEY of the outer batch message,
	// which has none, so only the consumer side shows the items' ids.
	res := sendSync(t, p, msgs...)
	gs := readBack(t, group, topic, want)
	idx := byID(gs)
	var offsetIDs []string
	for i, w := range want {
		d := idx[w.id]
		if len(d) == 0 {
			continue
		}
		m := d[0].msg
		offsetIDs = append(offsetIDs, m.OffsetMsgId)
		if m.Queue.QueueId != res.MessageQueue.QueueId || m.QueueOffset != res.QueueOffset+int64(i) {
			t.Errorf("batch item %d: delivered from queue %d offset %d, want queue %d offset %d", i,
				m.Queue.QueueId, m.QueueOffset, res.MessageQueue.QueueId, res.QueueOffset+int64(i))
		}
	}
	if got := strings.Join(offsetIDs, ","); res.OffsetMsgID != got {
		t.Errorf("SendResult.OffsetMsgID = %q, want the items' offset msg ids %q", res.OffsetMsgID, got)
	}
}

// TestTagFilter subscribes to "TagA || TagC" and checks that only those tags arrive. The Go push
// consumer sends no subscription with its pulls, so the broker must filter by the subscription
// of the heartbeat (and the client filters again by tag).
func TestTagFilter(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("tags")
	p := newProducer(t, group)
	var want []sent
	var unwanted []string
	for i, tag := range []string{"TagA", "TagB", "TagC", "TagB", "TagA", "TagD", "TagC", ""} {
		m := newMsg(topic, []byte("tag "+tag+" #"+string(rune('0'+i))), tag, nil, nil)
		res := sendSync(t, p, m)
		if tag == "TagA" || tag == "TagC" {
			want = append(want, sent{msg: m, id: res.MsgID})
		} else {
			unwanted = append(unwanted, res.MsgID)
		}
	}
	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagC"}, col.consume("c"))
	gs, ok := col.waitIDs(readBackTimeout, ids(want))
	if !ok {
		t.Fatalf("messages never arrived: %v; got:%s", missing(gs, ids(want)), describe(gs))
	}
	gs = col.settle(3 * time.Second)
	idx := byID(gs)
	for _, id := range unwanted {
		if d := idx[id]; len(d) > 0 {
			t.Errorf("message %s with tag %q was delivered to a TagA || TagC subscription", id, d[0].msg.GetTags())
		}
	}
	for _, w := range want {
		if len(idx[w.id]) != 1 {
			t.Errorf("message %s delivered %d times, want once", w.id, len(idx[w.id]))
		}
		checkDelivered(t, w, idx[w.id][0].msg)
	}
}

// TestSendLargeBodies sends incompressible bodies of 300 KiB and 3.5 MiB (under RocketMQ's
// 4 MiB default maxMessageSize; the Go producer zlib-compresses them, which here makes them a
// little larger) and reads them back byte for byte: a pull must return a message larger than the
// broker's per-pull byte budget on its own.
func TestSendLargeBodies(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("large")
	p := newProducer(t, group)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []sent
	for i, size := range []int{300 << 10, 3584 << 10} {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		m := newMsg(topic, body, "TagLarge", []string{fmt.Sprint("large-", i)}, userProps{"size": fmt.Sprint(size)})
		want = append(want, sent{msg: m, id: sendSync(t, p, m).MsgID, props: userProps{"size": fmt.Sprint(size)}})
	}
	readBack(t, group, topic, want)
}
