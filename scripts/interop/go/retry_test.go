package interop

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// delayOf is the broker's default delay per level (messageDelayLevel "1s 5s 10s 30s 1m ...").
var delayOf = map[int]time.Duration{1: time.Second, 2: 5 * time.Second, 3: 10 * time.Second, 4: 30 * time.Second}

// clockSlack absorbs the millisecond rounding of store timestamps.
const clockSlack = 5 * time.Millisecond

// TestRetryThenDLQ has a concurrent push consumer with MaxReconsumeTimes 2 answer
// ConsumeRetryLater for one message (and ConsumeSuccess for another). The failed message goes
// back with CONSUMER_SEND_MSG_BACK (request 36, delay level 0) and comes again through
// %RETRY%<group>: after 10 s (level 3) with ReconsumeTimes 1, after 30 s more (level 4) with
// ReconsumeTimes 2, each time with its topic, id, body, tags, keys and properties; the third
// failure sends it to %DLQ%<group>, which a second group then reads. Waits are bounded: 25 s
// past each retry's delay and 30 s for the DLQ, so the test fails within about 100 s; it passes
// in about 45 s.
func TestRetryThenDLQ(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("retry")
	p := newProducer(t, group)
	okMsg := newMsg(topic, []byte("consumed at once"), "TagOK", nil, nil)
	okID := sendSync(t, p, okMsg).MsgID
	failMsg := newMsg(topic, []byte("always fails \x00\x01\x02"), "TagFail", []string{"retry-key"},
		userProps{"color": "red"})
	failID := sendSync(t, p, failMsg).MsgID
	want := sent{msg: failMsg, id: failID, props: userProps{"color": "red"}}

	// The Go client learns routes at Start and then every 30 s, so a %RETRY% topic that gets its
	// route after the consumer started is pulled only after the next poll and rebalance. A
	// consumer's heartbeat makes the broker create %RETRY%<group>; a pull consumer of the group
	// does that here (it acknowledges nothing, so it commits no offset), and the push consumer
	// starts once the name server has the route, so retries come on their own schedule.
	startPull(t, group, topic).Shutdown()
	waitRoute(t, "%RETRY%"+group, startTimeout)

	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			col.add("c", msgs...)
			for _, m := range msgs {
				if bytes.Equal(m.Body, failMsg.Body) {
					return consumer.ConsumeRetryLater, nil
				}
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithMaxReconsumeTimes(2))

	fails := func(gs []got) []got {
		var out []got
		for _, g := range gs {
			if g.msg.MsgId == failID {
				out = append(out, g)
			}
		}
		return out
	}
	for n := 1; n <= 3; n++ {
		bound := readBackTimeout
		if n > 1 {
			bound = delayOf[n+1] + 25*time.Second
		}
		gs, ok := col.waitFor(bound, func(gs []got) bool { return len(fails(gs)) >= n })
		if !ok {
			t.Fatalf("delivery %d of the failing message did not come within %v; deliveries:%s", n, bound, describe(gs))
		}
		d := fails(gs)[n-1]
		checkDelivered(t, want, d.msg)
		if d.msg.ReconsumeTimes != int32(n-1) {
			t.Errorf("delivery %d: ReconsumeTimes = %d, want %d", n, d.msg.ReconsumeTimes, n-1)
		}
		if n > 1 {
			prev := fails(gs)[n-2]
			if gap := d.at.Sub(prev.at); gap < delayOf[n+1]-clockSlack {
				t.Errorf("delivery %d came %v after delivery %d, want at least %v (delay level %d)", n, gap, n-1, delayOf[n+1], n+1)
			} else {
				t.Logf("delivery %d came %v after delivery %d (delay level %d: %v)", n, gap, n-1, n+1, delayOf[n+1])
			}
		}
	}

	dlq := newCollector()
	startPush(t, group+"_dlq", "%DLQ%"+group, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, dlq.consume("dlq"))
	gs, ok := dlq.waitIDs(30*time.Second, []string{failID})
	if !ok {
		t.Fatalf("the message never reached %%DLQ%%%s within 30s; DLQ deliveries:%s", group, describe(gs))
	}
	d := byID(gs)[failID][0].msg
	dlqWant := want
	dlqWant.msg = &primitive.Message{Topic: "%DLQ%" + group, Body: failMsg.Body, Flag: failMsg.Flag}
	dlqWant.msg.WithProperties(map[string]string{primitive.PropertyTags: failMsg.GetTags(), primitive.PropertyKeys: failMsg.GetKeys()})
	checkDelivered(t, dlqWant, d)
	if rt := d.GetProperty(primitive.PropertyRetryTopic); rt != topic {
		t.Errorf("DLQ message: RETRY_TOPIC = %q, want %q", rt, topic)
	}
	t.Logf("DLQ message: ReconsumeTimes %d, ORIGIN_MESSAGE_ID %q, offset msg id %s", d.ReconsumeTimes,
		d.GetProperty(primitive.PropertyOriginMessageId), d.OffsetMsgId)

	all := col.settle(2 * time.Second)
	if n := len(fails(all)); n != 3 {
		t.Errorf("the failing message was delivered %d times, want 3 (MaxReconsumeTimes 2)", n)
	}
	if n := len(byID(all)[okID]); n != 1 {
		t.Errorf("the message consumed successfully was delivered %d times, want once", n)
	}
}

// TestDelayLevels sends messages with delay levels 1 (1 s) and 2 (5 s) to a running consumer:
// each must arrive no earlier than its delay after the send, within 15 s after it, in the
// queue it was sent to and unchanged.
func TestDelayLevels(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("delay")
	p := newProducer(t, group)
	control := sendSync(t, p, newMsg(topic, []byte("no delay"), "TagNow", nil, nil)).MsgID
	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("c"))
	if gs, ok := col.waitIDs(readBackTimeout, []string{control}); !ok {
		t.Fatalf("the undelayed message never arrived; got:%s", describe(gs))
	}

	type delayed struct {
		sent
		level int
		queue int
	}
	var ds []delayed
	for _, level := range []int{2, 1} {
		m := newMsg(topic, []byte("delayed by level "+string(rune('0'+level))), "TagDelay", []string{"delay"}, userProps{"level": string(rune('0' + level))})
		m.WithDelayTimeLevel(level)
		at := time.Now()
		res := sendSync(t, p, m)
		ds = append(ds, delayed{sent: sent{msg: m, id: res.MsgID, props: userProps{"level": string(rune('0' + level))}, at: at},
			level: level, queue: res.MessageQueue.QueueId})
	}
	var want []string
	for _, d := range ds {
		want = append(want, d.id)
	}
	gs, ok := col.waitIDs(delayOf[2]+15*time.Second, want)
	if !ok {
		t.Fatalf("delayed messages never arrived: %v; got:%s", missing(gs, want), describe(gs))
	}
	gs = col.settle(time.Second)
	idx := byID(gs)
	for _, d := range ds {
		g := idx[d.id]
		if len(g) != 1 {
			t.Errorf("level %d message delivered %d times, want once", d.level, len(g))
		}
		checkDelivered(t, d.sent, g[0].msg)
		after := g[0].at.Sub(d.at)
		if after < delayOf[d.level]-clockSlack {
			t.Errorf("level %d message arrived %v after its send, before its delay %v", d.level, after, delayOf[d.level])
		} else if after > delayOf[d.level]+15*time.Second {
			t.Errorf("level %d message arrived %v after its send, more than 15s past its delay %v", d.level, after, delayOf[d.level])
		} else {
			t.Logf("level %d message arrived %v after its send", d.level, after)
		}
		if g[0].msg.Queue.QueueId != d.queue {
			t.Errorf("level %d message: delivered from queue %d, sent to queue %d", d.level, g[0].msg.Queue.QueueId, d.queue)
		}
	}
}
