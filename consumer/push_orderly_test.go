package consumer

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
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
	overNet(t, true, testOrderlyInOrderOneGoroutinePerQueue)
}

func testOrderlyInOrderOneGoroutinePerQueue(t *testing.T) {
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
func TestOrderlyDLQAfterMaxReconsume(t *testing.T) { overNet(t, true, testOrderlyDLQAfterMaxReconsume) }

func testOrderlyDLQAfterMaxReconsume(t *testing.T) {
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

// clientLog records which clients consumed each message, by body.
type clientLog struct {
	mu  sync.Mutex
	got map[string][]string
}

func newClientLog() *clientLog { return &clientLog{got: map[string][]string{}} }

func (l *clientLog) add(client string, msgs []*Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.got[string(m.Body)] = append(l.got[string(m.Body)], client)
	}
}

// check fails unless each of want's bodies was consumed exactly once, by the client want
// names, and nothing else was consumed.
func (l *clientLog) check(t *testing.T, when string, want map[string]string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for body, client := range want {
		if got := l.got[body]; len(got) != 1 || got[0] != client {
			t.Errorf("%s: %s consumed by %v, want once by %s", when, body, got, client)
		}
	}
	for body, got := range l.got {
		if _, ok := want[body]; !ok {
			t.Errorf("%s: %s consumed by %v, want not yet", when, body, got)
		}
	}
}

// TestOrderlyHungListenerLosesQueue: an orderly listener hangs on a queue that a rebalance
// gives to a new member. The old owner goes on heartbeating and renewing its locks: it stays
// in the group, keeps consuming its other queue, and keeps the hung queue locked, so the new
// member cannot consume it meanwhile. Once the listener returns, the queue is unlocked at
// once with its offset past the hung message, and the new owner consumes the rest: nothing
// twice.
func TestOrderlyHungListenerLosesQueue(t *testing.T) {
	synctest.Test(t, testOrderlyHungListenerLosesQueue)
}

// hungOrderly starts orderly consumer a alone on topic T (queues 0 and 1, five messages
// q1-0..q1-4 on queue 1) with a listener that hangs on q1-2 until release is called or its
// ctx ends (then returns success), waits until it hangs, then starts b, which the broker
// gives queue 1. Consumptions go to the returned log.
func hungOrderly(t *testing.T, b *edge.Broker) (a, bc *PushConsumer, log *clientLog, release func()) {
	t.Helper()
	createTopic(t, b, "T", 2)
	sendN(t, b, "T", "q1-", 5, mq.QueueIndex(1))
	hang := make(chan struct{})
	release = sync.OnceFunc(func() { close(hang) })
	log = newClientLog()
	listener := func(client string) OrderlyListener {
		return func(ctx context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
			log.add(client, msgs)
			if string(msgs[0].Body) == "q1-2" {
				select {
				case <-hang:
				case <-ctx.Done():
				}
			}
			return OrderlySuccess, nil
		}
	}
	// a and b sort in that order: with both in the group, a gets queue 0 and b queue 1.
	oa, ob := bubbleOptions(t, "g"), bubbleOptions(t, "g")
	oa.ClientID, ob.ClientID = "a", "b"
	a = startConsumer(t, b, oa, "T", listener("a"))
	t.Cleanup(release) // before Shutdown, which waits for the listener
	time.Sleep(time.Second)
	log.check(t, "a alone", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a"})
	bc = startConsumer(t, b, ob, "T", listener("b"))
	return a, bc, log, release
}

func testOrderlyHungListenerLosesQueue(t *testing.T) {
	b := testBroker(t, nil)
	q0, q1 := brokerQueue("T", 0), brokerQueue("T", 1)
	a, bc, log, release := hungOrderly(t, b)
	// Longer than the broker's heartbeat timeout (120 s) and lock lifetime (60 s).
	time.Sleep(5 * time.Minute)
	sendN(t, b, "T", "q0-", 2, mq.QueueIndex(0))
	time.Sleep(time.Second)
	if ids, err := b.ConsumerIDs(context.Background(), "T", "g"); err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("members %v (%v) while a's listener hangs, want [a b]", ids, err)
	}
	if got, err := b.LockQueues(context.Background(), "g", "x", []mq.MessageQueue{q0, q1}); err != nil || len(got) != 0 {
		t.Fatalf("another client locked %v (%v) while a renews its locks", got, err)
	}
	if slices.Contains(bc.assigned(), q1) {
		t.Fatal("b was given queue 1 while a's listener still consumes it")
	}
	log.check(t, "while a's listener hangs", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a", "q0-0": "a", "q0-1": "a"})
	// Once a removal has waited for the run, later rebalances do not wait again.
	start := time.Now()
	a.rebalance()
	if d := time.Since(start); d != 0 {
		t.Fatalf("a rebalance took %v with a queue still waiting for its run, want no wait", d)
	}

	release()
	time.Sleep(time.Second)
	if slices.Contains(a.assigned(), q1) {
		t.Fatal("a still holds queue 1 a second after its listener returned")
	}
	if off := storedOffset(t, b, "g", q1); off < 3 {
		t.Fatalf("offset of queue 1 after a let it go = %d, want 3 (past the hung message)", off)
	}
	time.Sleep(DefaultOptions.RebalanceInterval) // b's next try
	log.check(t, "after the hand-over", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a", "q0-0": "a", "q0-1": "a",
		"q1-3": "b", "q1-4": "b"})
}

// TestOrderlyShutdownWhileRemovingQueue: Shutdown comes while a rebalance waits for the hung
// run of a queue it takes away, and the run ends when Shutdown cancels the listener's ctx.
// Whichever finishes the queue, the removal or Shutdown, its offset is persisted past the
// hung message and it is unlocked: the new owner consumes the rest, nothing twice.
func TestOrderlyShutdownWhileRemovingQueue(t *testing.T) {
	synctest.Test(t, testOrderlyShutdownWhileRemovingQueue)
}

func testOrderlyShutdownWhileRemovingQueue(t *testing.T) {
	b := testBroker(t, nil)
	q1 := brokerQueue("T", 1)
	a, _, log, _ := hungOrderly(t, b)
	time.Sleep(orderlyUnlockWait / 2) // a's rebalance waits for the run of queue 1
	ctx, cancel := context.WithTimeout(context.Background(), orderlyUnlockWait/10)
	defer cancel()
	if err := a.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with the listener hung = %v, want %v", err, context.DeadlineExceeded)
	}
	// b may have consumed on from there already.
	if off := storedOffset(t, b, "g", q1); off < 3 {
		t.Fatalf("offset of queue 1 after a's Shutdown = %d, want 3 (past the hung message)", off)
	}
	time.Sleep(time.Second) // b rebalances at once: a left the group
	log.check(t, "after the hand-over", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a", "q1-3": "b", "q1-4": "b"})
}

// TestOrderlyHungQueueComesBack: a queue taken away while its listener hangs comes back to
// its old owner (the new one left) before the listener returns. It is not consumed twice at
// once: the old owner consumes it again once the hung run has ended, from past the hung
// message.
func TestOrderlyHungQueueComesBack(t *testing.T) { synctest.Test(t, testOrderlyHungQueueComesBack) }

func testOrderlyHungQueueComesBack(t *testing.T) {
	b := testBroker(t, nil)
	a, bc, log, release := hungOrderly(t, b)
	time.Sleep(time.Minute)
	shutdown(t, bc)
	time.Sleep(time.Minute)
	if !slices.Contains(a.assigned(), brokerQueue("T", 1)) {
		t.Fatal("a forgot queue 1 while its listener still consumes it")
	}
	log.check(t, "while a's listener hangs", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a"})
	release()
	time.Sleep(time.Second)
	log.check(t, "after the listener returned", map[string]string{"q1-0": "a", "q1-1": "a", "q1-2": "a", "q1-3": "a", "q1-4": "a"})
}

// lockGate is a Broker whose LockQueues fail while shut, as when the broker cannot be
// reached.
type lockGate struct {
	*edge.Broker
	shut atomic.Bool
}

func (g *lockGate) LockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) ([]mq.MessageQueue, error) {
	if g.shut.Load() {
		return nil, errors.New("test: broker unreachable")
	}
	return g.Broker.LockQueues(ctx, group, clientID, qs)
}

// orderLog records the bodies an orderly listener consumed, in order.
type orderLog struct {
	mu     sync.Mutex
	bodies []string
}

func (l *orderLog) add(msgs []*Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.bodies = append(l.bodies, string(m.Body))
	}
}

func (l *orderLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.bodies, " ")
}

// TestOrderlyLockLossAndRelock: an orderly queue whose lock cannot be renewed stops being
// consumed once the lock is older than LockExpiry (30 s), stays stopped while another
// client holds the lock at the broker, and is consumed again, in order and nothing twice,
// once the consumer locks it again.
func TestOrderlyLockLossAndRelock(t *testing.T) { synctest.Test(t, testOrderlyLockLossAndRelock) }

func testOrderlyLockLossAndRelock(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	queue := brokerQueue("T", 0)
	gate := &lockGate{Broker: b}
	var log orderLog
	startConsumer(t, gate, bubbleOptions(t, "g"), "T", OrderlyListener(func(_ context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
		log.add(msgs)
		return OrderlySuccess, nil
	}))
	sendN(t, b, "T", "a", 2, nil)
	time.Sleep(time.Second)
	if got, want := log.String(), "a0 a1"; got != want {
		t.Fatalf("consumed %q, want %q", got, want)
	}

	gate.shut.Store(true) // the lock taken at start (0 s) is not renewed
	time.Sleep(DefaultOptions.LockExpiry)
	sendN(t, b, "T", "b", 2, nil)
	time.Sleep(30 * time.Second) // the broker's lock lives 60 s
	if got, err := b.LockQueues(context.Background(), "g", "x", []mq.MessageQueue{queue}); err != nil || len(got) != 1 {
		t.Fatalf("another client could not take the lock not renewed for 61 s: %v, %v", got, err)
	}
	gate.shut.Store(false)
	time.Sleep(time.Minute)
	if got, want := log.String(), "a0 a1"; got != want {
		t.Fatalf("consumed %q with the lock expired, then held by another client; want %q", got, want)
	}

	if err := b.UnlockQueues(context.Background(), "g", "x", []mq.MessageQueue{queue}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(DefaultOptions.LockInterval)
	sendN(t, b, "T", "c", 2, nil)
	time.Sleep(time.Second)
	if got, want := log.String(), "a0 a1 b0 b1 c0 c1"; got != want {
		t.Fatalf("consumed %q after the relock, want %q", got, want)
	}
}

// TestOrderlyYield: a consume run yields after MaxTimeConsumeContinuously (60 s), so that
// with one worker a queue with a long backlog does not keep the others waiting.
func TestOrderlyYield(t *testing.T) { synctest.Test(t, testOrderlyYield) }

func testOrderlyYield(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	const n = 100
	for q := range 2 {
		sendN(t, b, "T", "q"+strconv.Itoa(q)+"-", n, mq.QueueIndex(q))
	}
	o := bubbleOptions(t, "g")
	o.ConsumeGoroutinesMin, o.ConsumeGoroutinesMax = 1, 1
	var mu sync.Mutex
	var queues []int32 // the queue of each call, in order
	startConsumer(t, b, o, "T", OrderlyListener(func(_ context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
		time.Sleep(time.Second)
		mu.Lock()
		queues = append(queues, msgs[0].QueueID)
		mu.Unlock()
		return OrderlySuccess, nil
	}))
	time.Sleep(2*n*time.Second + time.Minute)
	mu.Lock()
	defer mu.Unlock()
	if len(queues) != 2*n {
		t.Fatalf("%d calls, want %d", len(queues), 2*n)
	}
	// A run checks the time after each call: it makes 61 calls of 1 s, then yields.
	longest, streak, switches := 0, 0, 0
	for i, q := range queues {
		if i > 0 && q != queues[i-1] {
			streak = 0
			switches++
		}
		streak++
		longest = max(longest, streak)
	}
	if longest != 61 || switches < 3 {
		t.Fatalf("longest run of one queue %d calls, %d switches; want 61 calls, at least 3 switches", longest, switches)
	}
}

// TestOrderlyManualCommitRollback: with AutoCommit off, a batch consumed with
// OrderlySuccess is not committed until a Commit; Rollback consumes again everything since
// the last Commit; what is not committed is consumed again after a restart.
func TestOrderlyManualCommitRollback(t *testing.T) {
	synctest.Test(t, testOrderlyManualCommitRollback)
}

func testOrderlyManualCommitRollback(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 6, nil)
	var log orderLog
	seen := map[string]int{}
	verdict := map[string]ConsumeOrderlyStatus{"m2": Commit, "m4": Commit}
	pc := startConsumer(t, b, bubbleOptions(t, "g"), "T", OrderlyListener(func(_ context.Context, msgs []*Message, oc *OrderlyContext) (ConsumeOrderlyStatus, error) {
		log.add(msgs)
		oc.AutoCommit = false
		body := string(msgs[0].Body)
		seen[body]++ // one call at a time on one queue
		if body == "m4" && seen[body] == 1 {
			return Rollback, nil
		}
		if v, ok := verdict[body]; ok {
			return v, nil
		}
		return OrderlySuccess, nil
	}))
	time.Sleep(time.Minute)
	if got, want := log.String(), "m0 m1 m2 m3 m4 m3 m4 m5"; got != want {
		t.Fatalf("consumed %q, want %q (m4's rollback goes back to m2's commit)", got, want)
	}
	shutdown(t, pc)
	if off := storedOffset(t, b, "g", brokerQueue("T", 0)); off != 5 {
		t.Fatalf("committed offset %d, want 5 (m5 succeeded but was not committed)", off)
	}
	var again orderLog
	startConsumer(t, b, bubbleOptions(t, "g"), "T", OrderlyListener(func(_ context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
		again.add(msgs)
		return OrderlySuccess, nil
	}))
	time.Sleep(time.Minute)
	if got, want := again.String(), "m5"; got != want {
		t.Fatalf("consumed %q after a restart, want %q", got, want)
	}
}
