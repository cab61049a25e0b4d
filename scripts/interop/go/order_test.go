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
