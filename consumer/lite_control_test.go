package consumer

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// queuePulls is a Broker that counts the pulls of each queue (ids 0..3).
type queuePulls struct {
	*edge.Broker
	n [4]atomic.Int64
}

func (p *queuePulls) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	p.n[req.Queue.QueueID].Add(1)
	return p.Broker.Pull(ctx, req)
}

// hangPulls is a Broker whose pulls from offset hangFrom on hang until their ctx ends, as a
// pull lost on a dead connection would.
type hangPulls struct {
	*edge.Broker
	hangFrom atomic.Int64
	hangs    atomic.Int64 // pulls hung so far
}

func (h *hangPulls) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	if req.Offset >= h.hangFrom.Load() {
		h.hangs.Add(1)
		<-ctx.Done()
		return mq.PullResult{}, ctx.Err()
	}
	return h.Broker.Pull(ctx, req)
}

// liteQueueOf returns queue's liteQueue (nil if not assigned) and the messages it has in the
// buffer.
func liteQueueOf(lc *PullConsumer, queue mq.MessageQueue) (*liteQueue, int) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	q := lc.queues[queue]
	if q == nil {
		return nil, 0
	}
	return q, q.msgs
}

// sendTo sends n messages to topic's queue q and waits until they can be pulled.
func sendTo(t testing.TB, b *edge.Broker, topic, prefix string, n int, q int32) {
	t.Helper()
	before, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: topic, QueueID: q})
	if err != nil {
		t.Fatalf("MaxOffset: %v", err)
	}
	sendN(t, b, topic, prefix, n, mq.QueueIndex(int(q)))
	dispatched(t, b, topic, q, before+int64(n))
}

// checkOffsets fails unless msgs are the messages of queue from offset from on, in order.
func checkOffsets(t testing.TB, msgs []*Message, queue mq.MessageQueue, from int64) {
	t.Helper()
	for i, m := range msgs {
		if m.Topic != queue.Topic || m.QueueID != queue.QueueID || m.QueueOffset != from+int64(i) {
			t.Fatalf("message %d is %s/%d at %d, want %s/%d at %d", i, m.Topic, m.QueueID, m.QueueOffset, queue.Topic, queue.QueueID, from+int64(i))
		}
	}
}

// TestPullPauseResume: a paused queue is not pulled and its buffered batches are not
// polled; the other queues go on; Resume polls it again from its position, which commits
// as usual meanwhile; Seek keeps it paused; errors leave every queue as it was.
func TestPullPauseResume(t *testing.T) { synctest.Test(t, testPullPauseResume) }

func testPullPauseResume(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 3)
	q0, q1, q2 := mq.MessageQueue{Topic: "T"}, mq.MessageQueue{Topic: "T", QueueID: 1}, mq.MessageQueue{Topic: "T", QueueID: 2}
	sendTo(t, b, "T", "a", 20, 0)
	sendTo(t, b, "T", "b", 20, 1)
	qp := &queuePulls{Broker: b}
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	lc := newLite(t, qp, o, &PullOptions{ManualCommit: true})
	if err := lc.Assign([]mq.MessageQueue{q0, q1}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Pause([]mq.MessageQueue{q0}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Pause before Start = %v, want %v", err, ErrNotStarted)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[int32][]*Message{}
	for len(got[0]) < 4 {
		msgs := pollBatch(t, lc, 10*time.Second)
		got[msgs[0].QueueID] = append(got[msgs[0].QueueID], msgs...)
	}
	waitFor(t, 5*time.Second, "queue 0 pulled ahead", func() bool { _, n := liteQueueOf(lc, q0); return n > 0 })

	if err := lc.Pause([]mq.MessageQueue{q0, q0}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if q, n := liteQueueOf(lc, q0); !q.paused || n != 0 {
		t.Fatalf("after Pause: paused %v with %d messages buffered, want paused with none", q.paused, n)
	}
	pulls := qp.n[0].Load()
	sendN(t, b, "T", "late", 5, mq.QueueIndex(0))
	got[1] = append(got[1], pollN(t, lc, 20-len(got[1]))...)
	checkOffsets(t, got[1], q1, 0)
	expectNothing(t, lc, 3*o.BrokerSuspend/2)
	if n := qp.n[0].Load(); n != pulls {
		t.Fatalf("%d pulls of the paused queue, want none", n-pulls)
	}

	// Pausing again, resuming a queue not paused, and an all-or-nothing refusal change nothing.
	before, _ := liteQueueOf(lc, q1)
	if err := lc.Pause([]mq.MessageQueue{q0}); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if err := lc.Resume([]mq.MessageQueue{q1}); err != nil {
		t.Fatalf("Resume of a queue not paused: %v", err)
	}
	if err := lc.Pause([]mq.MessageQueue{q1, q2}); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("Pause of an unassigned queue = %v, want %v", err, ErrNotAssigned)
	}
	if err := lc.Resume([]mq.MessageQueue{q2}); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("Resume of an unassigned queue = %v, want %v", err, ErrNotAssigned)
	}
	if after, _ := liteQueueOf(lc, q1); after != before || after.paused {
		t.Fatal("queue 1 was restarted or paused by calls that should leave it alone")
	}

	pos := int64(len(got[0]))
	if err := lc.CommitSync(context.Background()); err != nil {
		t.Fatalf("CommitSync: %v", err)
	}
	if off := queryOffset(t, b, "g", q0); off != pos {
		t.Fatalf("committed offset of the paused queue %d, want its position %d", off, pos)
	}
	if err := lc.Resume([]mq.MessageQueue{q0}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	checkOffsets(t, pollN(t, lc, int(25-pos)), q0, pos)

	if err := lc.Pause([]mq.MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Seek(q0, 2); err != nil {
		t.Fatalf("Seek of a paused queue: %v", err)
	}
	if q, _ := liteQueueOf(lc, q0); !q.paused {
		t.Fatal("Seek resumed a paused queue")
	}
	expectNothing(t, lc, 50*time.Millisecond)
	if err := lc.Resume([]mq.MessageQueue{q0}); err != nil {
		t.Fatal(err)
	}
	checkOffsets(t, pollN(t, lc, 23), q0, 2)

	if err := lc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func([]mq.MessageQueue) error{lc.Pause, lc.Resume} {
		if err := call([]mq.MessageQueue{q0}); !errors.Is(err, ErrShutdown) {
			t.Fatalf("after Shutdown: %v, want %v", err, ErrShutdown)
		}
	}
}

// TestPullPauseSurvivesRebalance: queues paused and still assigned after rebalances stay
// paused; those a rebalance takes away and brings back come back unpaused.
func TestPullPauseSurvivesRebalance(t *testing.T) { synctest.Test(t, testPullPauseSurvivesRebalance) }

func testPullPauseSurvivesRebalance(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	all := allQueues("T", 4)
	a := subscribedLite(t, b, fastOptions(t, "g"), nil, "T")
	waitFor(t, 5*time.Second, "a owns every queue", func() bool { return len(a.Assignment()) == 4 })
	if err := a.Pause(all); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	c := subscribedLite(t, b, fastOptions(t, "g"), nil, "T")
	waitFor(t, 5*time.Second, "queues split 2/2", func() bool {
		return len(a.Assignment()) == 2 && len(c.Assignment()) == 2
	})
	kept := a.Assignment()
	for _, queue := range kept {
		if q, _ := liteQueueOf(a, queue); q == nil || !q.paused {
			t.Fatalf("queue %d lost its pause in the rebalance", queue.QueueID)
		}
	}
	// round sends 10 messages to every queue and polls 20 from lc, none of a kept queue.
	round := func(lc *PullConsumer, prefix string) {
		t.Helper()
		for q := range int32(4) {
			sendN(t, b, "T", prefix, 10, mq.QueueIndex(int(q)))
		}
		for _, m := range pollN(t, lc, 20) {
			if slices.Contains(kept, m.Queue()) {
				t.Fatalf("polled queue %d, which a keeps paused", m.QueueID)
			}
		}
	}
	round(c, "m")
	expectNothing(t, a, 300*time.Millisecond)

	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a owns every queue again", func() bool { return len(a.Assignment()) == 4 })
	round(a, "n")
	expectNothing(t, a, 100*time.Millisecond)
	if err := a.Resume(kept); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	pollN(t, a, 40)
}

// TestPullUnsubscribe: Unsubscribe commits the positions of the topic's queues and drops
// them, heartbeats the subscriptions left at once, and the topic is rebalanced no more.
func TestPullUnsubscribe(t *testing.T) { synctest.Test(t, testPullUnsubscribe) }

func testPullUnsubscribe(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "A", 2)
	createTopic(t, b, "B", 2)
	sendTo(t, b, "A", "a", 10, 0)
	a0 := mq.MessageQueue{Topic: "A"}
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	o.HeartbeatInterval = time.Hour // only Unsubscribe's heartbeat can tell the broker
	o.PersistInterval = time.Hour   // only Unsubscribe's commit can commit
	lc := newLite(t, b, o, nil)
	for _, topic := range []string{"A", "B"} {
		if err := lc.Subscribe(topic, "*"); err != nil {
			t.Fatal(err)
		}
	}
	if err := lc.Unsubscribe("C"); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("Unsubscribe of a topic not subscribed = %v, want %v", err, ErrNotSubscribed)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "four queues", func() bool { return len(lc.Assignment()) == 4 })
	checkOffsets(t, pollN(t, lc, 4), a0, 0)

	if err := lc.Unsubscribe("A"); err != nil {
		t.Fatalf("Unsubscribe: %v", err)
	}
	if got, want := lc.Assignment(), allQueues("B", 2); !slices.Equal(got, want) {
		t.Fatalf("assignment %v, want %v", got, want)
	}
	if off := queryOffset(t, b, "g", a0); off != 4 {
		t.Fatalf("committed offset of A/0 %d, want 4", off)
	}
	waitFor(t, 5*time.Second, "the heartbeat without A", func() bool {
		ms, err := b.Members("g")
		return err == nil && len(ms) == 1 && len(ms[0].Subscriptions) == 1 && ms[0].Subscriptions[0].Topic == "B"
	})
	sendN(t, b, "A", "late", 5, mq.QueueIndex(0))
	sendN(t, b, "B", "b", 5, mq.QueueIndex(1))
	checkOffsets(t, pollN(t, lc, 5), mq.MessageQueue{Topic: "B", QueueID: 1}, 0)
	expectNothing(t, lc, 3*o.RebalanceInterval)
	if n := len(lc.Assignment()); n != 2 {
		t.Fatalf("%d queues after rebalances, want B's 2", n)
	}
	if err := lc.Unsubscribe("A"); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("second Unsubscribe = %v, want %v", err, ErrNotSubscribed)
	}

	if err := lc.Unsubscribe("B"); err != nil {
		t.Fatalf("Unsubscribe of the last topic: %v", err)
	}
	waitFor(t, 5*time.Second, "a member with no subscription", func() bool {
		ms, err := b.Members("g")
		return err == nil && len(ms) == 1 && len(ms[0].Subscriptions) == 0 && len(lc.Assignment()) == 0
	})
	if err := lc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ms, err := b.Members("g"); err == nil && len(ms) != 0 {
		t.Fatalf("members after Shutdown: %+v, want none", ms)
	}
	if err := lc.Unsubscribe("B"); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Unsubscribe after Shutdown = %v, want %v", err, ErrShutdown)
	}

	asg := newLite(t, b, fastOptions(t, "g2"), nil)
	if err := asg.Assign([]mq.MessageQueue{a0}); err != nil {
		t.Fatal(err)
	}
	if err := asg.Unsubscribe("A"); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("Unsubscribe after Assign = %v, want %v", err, ErrNotSubscribed)
	}
	sub := newLite(t, b, fastOptions(t, "g3"), nil)
	if err := sub.Subscribe("A", "*"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Unsubscribe("A"); err != nil {
		t.Fatalf("Unsubscribe before Start: %v", err)
	}
	if err := sub.Start(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Start with every topic unsubscribed = %v, want %v", err, ErrInvalidOptions)
	}
}

// expiryConsumer starts a consumer of queue T/0, which holds n messages; its pulls go
// through a hangPulls that hangs those from offset hangFrom on. Tests of expiry run in a
// synctest bubble, so that minutes pass in a moment.
func expiryConsumer(t *testing.T, n int, hangFrom int64, p *PullOptions) (*PullConsumer, *hangPulls) {
	t.Helper()
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendTo(t, b, "T", "m", n, 0)
	h := &hangPulls{Broker: b}
	h.hangFrom.Store(hangFrom)
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	return assignedLite(t, h, o, p, mq.MessageQueue{Topic: "T"}), h
}

// TestPullExpiryRestartsStuckPull: a pull in flight for PullExpiry is abandoned and the
// queue starts again from its position: the batches pulled but not polled are pulled
// again, and nothing is polled twice or skipped.
func TestPullExpiryRestartsStuckPull(t *testing.T) { synctest.Test(t, testPullExpiryRestartsStuckPull) }

func testPullExpiryRestartsStuckPull(t *testing.T) {
	lc, h := expiryConsumer(t, 10, 10, nil)
	queue := mq.MessageQueue{Topic: "T"}
	checkOffsets(t, pollN(t, lc, 4), queue, 0)
	waitFor(t, 5*time.Second, "the pull at offset 10 to hang", func() bool { return h.hangs.Load() == 1 })
	stuck, n := liteQueueOf(lc, queue)
	if n != 6 {
		t.Fatalf("%d messages buffered, want 6", n)
	}

	synctest.Wait()
	hung := time.Now()
	time.Sleep(DefaultOptions.PullExpiry - time.Second)
	lc.restartExpired()
	if q, _ := liteQueueOf(lc, queue); q != stuck {
		t.Fatal("queue restarted before PullExpiry")
	}
	time.Sleep(time.Until(hung.Add(DefaultOptions.PullExpiry)))
	waitFor(t, 5*time.Second, "the restarted queue's pull to hang", func() bool { return h.hangs.Load() == 2 })
	checkOffsets(t, pollN(t, lc, 6), queue, 4)

	h.hangFrom.Store(1 << 62)
	sendN(t, h.Broker, "T", "n", 1, nil)
	time.Sleep(DefaultOptions.PullExpiry)
	checkOffsets(t, pollN(t, lc, 1), queue, 10)
}

// TestPullExpiryNotWhileWaiting: a queue waiting for Poll to make room, or paused, has no
// pull in flight, however long it waits.
func TestPullExpiryNotWhileWaiting(t *testing.T) { synctest.Test(t, testPullExpiryNotWhileWaiting) }

func testPullExpiryNotWhileWaiting(t *testing.T) {
	lc, _ := expiryConsumer(t, 20, 1<<62, &PullOptions{PullThresholdForAll: 4})
	queue := mq.MessageQueue{Topic: "T"}
	waitFor(t, 5*time.Second, "the buffer full and the pull waiting", func() bool {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		return lc.spaceWait && lc.bufMsgs == 8
	})
	waiting, _ := liteQueueOf(lc, queue)
	time.Sleep(2 * DefaultOptions.PullExpiry)
	lc.restartExpired()
	if q, n := liteQueueOf(lc, queue); q != waiting || n != 8 {
		t.Fatal("a queue waiting for room was restarted as if its pull were stuck")
	}
	checkOffsets(t, pollN(t, lc, 20), queue, 0)

	if err := lc.Pause([]mq.MessageQueue{queue}); err != nil {
		t.Fatal(err)
	}
	paused, _ := liteQueueOf(lc, queue)
	time.Sleep(2 * DefaultOptions.PullExpiry)
	lc.restartExpired()
	if q, _ := liteQueueOf(lc, queue); q != paused {
		t.Fatal("a paused queue was restarted")
	}
}

// TestPullCommittedAndOffsetForTimestamp: Committed reads what was committed, by this
// consumer or another; OffsetForTimestamp finds the first message stored at or after a time.
func TestPullCommittedAndOffsetForTimestamp(t *testing.T) {
	synctest.Test(t, testPullCommittedAndOffsetForTimestamp)
}

func testPullCommittedAndOffsetForTimestamp(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	queue, other := mq.MessageQueue{Topic: "T"}, mq.MessageQueue{Topic: "T", QueueID: 1}
	sendTo(t, b, "T", "m", 5, 0)
	time.Sleep(5 * time.Millisecond) // store times are in milliseconds
	at := time.Now()
	time.Sleep(5 * time.Millisecond)
	sendTo(t, b, "T", "n", 5, 0)

	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	lc := newLite(t, b, o, &PullOptions{ManualCommit: true})
	if _, err := lc.Committed(queue); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Committed before Start = %v, want %v", err, ErrNotStarted)
	}
	if _, err := lc.OffsetForTimestamp(queue, at); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("OffsetForTimestamp before Start = %v, want %v", err, ErrNotStarted)
	}
	if err := lc.Assign([]mq.MessageQueue{queue}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	committed := func(queue mq.MessageQueue) int64 {
		t.Helper()
		off, err := lc.Committed(queue)
		if err != nil {
			t.Fatalf("Committed: %v", err)
		}
		return off
	}
	if off := committed(other); off != -1 {
		t.Fatalf("Committed of an empty queue never committed = %d, want -1", off)
	}
	// The broker answers 0 for a queue never committed that still holds its first message.
	if off := committed(queue); off != 0 {
		t.Fatalf("Committed with nothing committed = %d, want 0", off)
	}
	pollN(t, lc, 4)
	if off := committed(queue); off != 0 {
		t.Fatalf("Committed after a poll, before CommitSync = %d, want 0", off)
	}
	if err := lc.CommitSync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off := committed(queue); off != 4 {
		t.Fatalf("Committed = %d, want 4", off)
	}
	if err := b.CommitOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 1}, 7); err != nil {
		t.Fatal(err)
	}
	if off := committed(other); off != 7 {
		t.Fatalf("Committed of a queue committed by another member = %d, want 7", off)
	}

	for _, c := range []struct {
		name string
		at   time.Time
		want int64
	}{
		{"between the sends", at, 5},
		{"before every message", at.Add(-time.Hour), 0},
		{"after every message", at.Add(time.Hour), 10},
	} {
		if off, err := lc.OffsetForTimestamp(queue, c.at); err != nil || off != c.want {
			t.Fatalf("%s: OffsetForTimestamp = %d, %v; want %d", c.name, off, err, c.want)
		}
	}
	if _, err := lc.OffsetForTimestamp(mq.MessageQueue{Topic: "Nope"}, at); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("OffsetForTimestamp of an unknown topic: %v, want %v", err, mq.ErrTopicNotExist)
	}
	off, _ := lc.OffsetForTimestamp(queue, at)
	if err := lc.Seek(queue, off); err != nil {
		t.Fatal(err)
	}
	checkOffsets(t, pollN(t, lc, 5), queue, 5)

	if err := lc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Committed(queue); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Committed after Shutdown = %v, want %v", err, ErrShutdown)
	}
	if _, err := lc.OffsetForTimestamp(queue, at); !errors.Is(err, ErrShutdown) {
		t.Fatalf("OffsetForTimestamp after Shutdown = %v, want %v", err, ErrShutdown)
	}
}

// TestPullExpiryOption: PullExpiry must exceed BrokerSuspend, or every idle long poll
// would count as stuck.
func TestPullExpiryOption(t *testing.T) {
	b := testBroker(t, nil)
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"negative PullExpiry", func(o *Options) { o.PullExpiry = -time.Second }},
		{"PullExpiry below BrokerSuspend", func(o *Options) { o.PullExpiry = o.BrokerSuspend / 2 }},
		{"PullExpiry equal to BrokerSuspend", func(o *Options) { o.PullExpiry = o.BrokerSuspend }},
		{"negative LockInterval", func(o *Options) { o.LockInterval = -time.Second }},
		{"negative PersistInterval", func(o *Options) { o.PersistInterval = -time.Second }},
	} {
		o := fastOptions(t, "g")
		tc.set(o)
		if _, err := NewPullConsumer(b, o, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: NewPullConsumer = %v, want %v", tc.name, err, ErrInvalidOptions)
		}
		if _, err := NewPushConsumer(b, o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: NewPushConsumer = %v, want %v", tc.name, err, ErrInvalidOptions)
		}
	}
}
