package consumer

import (
	"context"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// orderChecker fails when a queue is consumed by two goroutines at once or out of order.
type orderChecker struct {
	mu       sync.Mutex
	busy     map[mq.MessageQueue]*atomic.Int32
	last     map[mq.MessageQueue]int64
	seen     map[string]int
	problems []string
}

func newOrderChecker() *orderChecker {
	return &orderChecker{busy: map[mq.MessageQueue]*atomic.Int32{}, last: map[mq.MessageQueue]int64{}, seen: map[string]int{}}
}

func (c *orderChecker) listener() OrderlyListener {
	return func(_ context.Context, msgs []*Message, oc *OrderlyContext) (ConsumeOrderlyStatus, error) {
		c.mu.Lock()
		b, ok := c.busy[oc.Queue]
		if !ok {
			b = &atomic.Int32{}
			c.busy[oc.Queue] = b
		}
		c.mu.Unlock()
		if b.Add(1) != 1 {
			c.fail(fmt.Sprintf("queue %v consumed by two goroutines", oc.Queue))
		}
		time.Sleep(100 * time.Microsecond)
		c.mu.Lock()
		for _, m := range msgs {
			if last, ok := c.last[oc.Queue]; ok && m.QueueOffset <= last && c.seen[string(m.Body)] == 0 {
				c.problems = append(c.problems, fmt.Sprintf("queue %v: offset %d after %d", oc.Queue, m.QueueOffset, last))
			}
			c.last[oc.Queue] = m.QueueOffset
			c.seen[string(m.Body)]++
		}
		c.mu.Unlock()
		b.Add(-1)
		return OrderlySuccess, nil
	}
}

func (c *orderChecker) fail(s string) {
	c.mu.Lock()
	c.problems = append(c.problems, s)
	c.mu.Unlock()
}

func (c *orderChecker) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *orderChecker) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) > 0 {
		t.Fatalf("%d order problems, first: %s", len(c.problems), c.problems[0])
	}
}

// TestOrderlyInOrderOneGoroutinePerQueue: each queue's messages reach the listener in queue
// order, one call at a time, with many workers available; queues are locked at the broker.
func TestOrderlyInOrderOneGoroutinePerQueue(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	for i := range 400 {
		key := strconv.Itoa(i % 7)
		m := &mq.Message{Topic: "T", Body: []byte("m" + strconv.Itoa(i))}
		if _, err := b.Send(context.Background(), m, mq.ShardingKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	o := fastOptions(t, "g")
	o.ConsumeGoroutinesMin = 8
	o.ConsumeGoroutinesMax = 16
	o.ConsumeMessageBatchMaxSize = 3
	c := newOrderChecker()
	pc := startConsumer(t, b, o, "T", c.listener())
	waitFor(t, 15*time.Second, "400 messages", func() bool { return c.distinct() == 400 })
	c.check(t)
	// The queues are locked by this consumer: another client cannot take them.
	got, err := b.LockQueues(context.Background(), "g", "other", pc.assigned())
	if err != nil || len(got) != 0 {
		t.Fatalf("another client locked %v (%v) of queues held by the consumer", got, err)
	}
}

// TestOrderlyDLQAfterMaxReconsume: a message the listener keeps suspending goes to the DLQ
// after MaxReconsumeTimes reconsumes, and the queue moves on in order.
func TestOrderlyDLQAfterMaxReconsume(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 4, nil) // m1 is the poison
	o := fastOptions(t, "g")
	o.MaxReconsumeTimes = 2
	var mu sync.Mutex
	var order []string
	startConsumer(t, b, o, "T", OrderlyListener(func(_ context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, string(msgs[0].Body))
		if string(msgs[0].Body) == "m1" {
			return SuspendCurrentQueueAMoment, nil
		}
		return OrderlySuccess, nil
	}))
	waitFor(t, 10*time.Second, "m3", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) > 0 && order[len(order)-1] == "m3"
	})
	mu.Lock()
	got := strings.Join(order, " ")
	mu.Unlock()
	if want := "m0 m1 m1 m1 m2 m3"; got != want {
		t.Fatalf("consumed %q, want %q (m1 tried 1 + MaxReconsumeTimes 2 times)", got, want)
	}
	waitFor(t, 5*time.Second, "DLQ message", func() bool {
		max, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: mq.DLQTopic("g"), QueueID: 0})
		return err == nil && max == 1
	})
	waitFor(t, 5*time.Second, "offset committed", func() bool {
		off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0})
		return err == nil && off == 4
	})
}
