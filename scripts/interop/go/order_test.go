package interop

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestOrderedBySharding sends messages of four sharding keys through the hash queue selector,
// half before an orderly push consumer starts (it locks its queues, request code 41) and half
// while it runs, and checks that each key's messages went to one queue and were consumed once
// each, in the order sent.
func TestOrderedBySharding(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("order")
	p := newProducer(t, group, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	keys := []string{"order-1", "order-2", "order-3", "order-4"}
	const perKey = 12
	queueOf := map[string]int{}
	var want []string
	send := func(from, to int) {
		for seq := from; seq < to; seq++ {
			for _, k := range keys {
				m := newMsg(topic, []byte(fmt.Sprintf("%s %d", k, seq)), "ordered", []string{k}, userProps{"seq": fmt.Sprint(seq)})
				m.WithShardingKey(k)
				res := sendSync(t, p, m)
				if q, ok := queueOf[k]; ok && q != res.MessageQueue.QueueId {
					t.Errorf("key %s: seq %d went to queue %d, earlier ones to queue %d", k, seq, res.MessageQueue.QueueId, q)
				}
				queueOf[k] = res.MessageQueue.QueueId
				want = append(want, res.MsgID)
			}
		}
	}
	send(0, perKey/2)

	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		col.consume("c"), consumer.WithConsumerOrder(true))
	send(perKey/2, perKey)

	gs, ok := col.waitIDs(readBackTimeout, want)
	if !ok {
		t.Fatalf("messages never arrived: %v; got:%s", missing(gs, want), describe(gs))
	}
	gs = col.settle(2 * time.Second)
	next := map[string]int{}  // next seq expected per key
	count := map[string]int{} // deliveries per key
	for _, g := range gs {
		k := g.msg.GetKeys()
		var seq int
		if _, err := fmt.Sscan(g.msg.GetProperty("seq"), &seq); err != nil {
			t.Errorf("message %s: property seq = %q", g.msg.MsgId, g.msg.GetProperty("seq"))
			continue
		}
		if seq != next[k] {
			t.Errorf("key %s: got seq %d, want %d (deliveries must follow the send order, once each)", k, seq, next[k])
		}
		next[k] = seq + 1
		count[k]++
		if q := queueOf[k]; g.msg.Queue.QueueId != q {
			t.Errorf("key %s seq %d: delivered from queue %d, sent to %d", k, seq, g.msg.Queue.QueueId, q)
		}
	}
	for _, k := range keys {
		if count[k] != perKey {
			t.Errorf("key %s: %d deliveries, want %d", k, count[k], perKey)
		}
	}
	if t.Failed() {
		t.Logf("deliveries:%s", describe(gs))
	}
}

// TestOrderlyTwoProcesses runs an orderly clustering group of two members, A in this process
// and B in a child process, over messages of 8 sharding keys. It checks that
//   - A alone consumes the first messages in order per key;
//   - B gets queues once their locks are free (LOCK_BATCH_MQ, request 41). The Go client does
//     not unlock the queues a rebalance takes from it, so B waits for A's locks to expire (60 s
//     on Apache RocketMQ) and its next rebalance (every 20 s): the join ends when two rounds of
//     messages were each consumed once, by both members together; it takes about 65 s and is
//     bounded at 110 s;
//   - in steady state each message is consumed once, each key by one member, in order;
//   - after B shuts down (it unlocks its queues, request 42, and commits its offsets), A locks
//     B's queues and consumes every later message once, in order per key, and nothing consumed
//     before again.
func TestOrderlyTwoProcesses(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("order2")
	p := newProducer(t, group, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	next := map[string]int{}
	send := func(perKey int) []string {
		var out []string
		for range perKey {
			for _, k := range keys {
				m := newMsg(topic, []byte(fmt.Sprintf("%s %d", k, next[k])), "ordered", []string{k}, nil)
				m.WithShardingKey(k)
				out = append(out, sendSync(t, p, m).MsgID)
				next[k]++
			}
		}
		return out
	}
	col := newCollector()

	alone := send(3)
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("A"),
		consumer.WithConsumerOrder(true))
	if gs, ok := col.waitIDs(readBackTimeout, alone); !ok {
		t.Fatalf("A alone: messages never arrived: %v; got:%s", missing(gs, alone), describe(gs))
	}
	checkKeyOrder(t, only(col.snapshot(), alone), "A alone", false)

	b := startMember(t, "B", group, topic, "orderly", col)
	joined := time.Now()
	var join []string
	deadline := time.Now().Add(110 * time.Second)
	for {
		join = append(join, send(1)...)
		gs, _ := col.waitFor(time.Second, func([]got) bool { return false })
		// The last two rounds but the newest one (which may still be on its way).
		if n := len(join); n >= 3*len(keys) && splitDone(gs, join[:n-len(keys)], 2*len(keys)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B joined but the queues were not split within 110s; deliveries of the join phase:%s",
				describe(only(gs, join)))
		}
	}
	if gs, ok := col.waitIDs(readBackTimeout, join); !ok {
		t.Fatalf("join phase: messages never arrived: %v", missing(gs, join))
	}
	t.Logf("join phase: the queues were split %v after B started", time.Since(joined).Round(time.Second))

	steady := send(5)
	if gs, ok := col.waitIDs(readBackTimeout, steady); !ok {
		t.Fatalf("steady phase: messages never arrived: %v", missing(gs, steady))
	}
	gs := col.settle(2 * time.Second)
	per := deliveredOnce(t, gs, steady, "steady phase")
	checkKeyOrder(t, only(gs, steady), "steady phase", true)
	t.Logf("steady phase: A consumed %d, B consumed %d", per["A"], per["B"])

	b.stop(t)
	left := time.Now()
	seen := len(col.snapshot())
	after := send(5)
	gs, ok := col.waitIDs(readBackTimeout, after)
	if !ok {
		t.Fatalf("after B left: messages never arrived within %v (A never locked B's queues?): %v; deliveries since B left:%s",
			readBackTimeout, missing(gs, after), describe(gs[seen:]))
	}
	t.Logf("after B left: A consumed every later message %v after B stopped", time.Since(left).Round(time.Second))
	gs = col.settle(2 * time.Second)
	per = deliveredOnce(t, gs, after, "after B left")
	if per["A"] != len(after) {
		t.Errorf("after B left: A consumed %d of %d", per["A"], len(after))
	}
	checkKeyOrder(t, only(gs, after), "after B left", false)
	var earlier []string
	earlier = append(append(append(earlier, alone...), join...), steady...)
	if re := only(gs[seen:], earlier); len(re) > 0 {
		t.Errorf("after B left, %d messages consumed before were delivered again (B's offsets, committed "+
			"with request 15 at its shutdown, were not used):%s", len(re), describe(re))
	}
}

// checkKeyOrder checks that, for each member, the messages of each key (body "key seq") came in
// increasing seq order, and with oneMember that each key was consumed by a single member.
func checkKeyOrder(t *testing.T, gs []got, phase string, oneMember bool) {
	t.Helper()
	last := map[[2]string]int{} // (member, key) -> last seq
	owner := map[string]string{}
	for _, g := range gs {
		var k string
		var seq int
		if _, err := fmt.Sscan(string(g.msg.Body), &k, &seq); err != nil {
			t.Errorf("%s: message %s: body %q is not \"key seq\"", phase, g.msg.MsgId, g.msg.Body)
			continue
		}
		mk := [2]string{g.by, k}
		if prev, ok := last[mk]; ok && seq <= prev {
			t.Errorf("%s: member %s got %s seq %d after seq %d", phase, g.by, k, seq, prev)
		}
		last[mk] = seq
		if o, ok := owner[k]; ok && o != g.by && oneMember {
			t.Errorf("%s: key %s consumed by both %s and %s", phase, k, o, g.by)
		}
		owner[k] = g.by
	}
}
