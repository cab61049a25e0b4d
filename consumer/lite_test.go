package consumer

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// newLite returns a pull consumer that is shut down at cleanup.
func newLite(t testing.TB, b Broker, o *Options, p *PullOptions) *PullConsumer {
	t.Helper()
	lc, err := NewPullConsumer(consumerBroker(t, b), o, p)
	if err != nil {
		t.Fatalf("NewPullConsumer: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lc.Shutdown(ctx)
	})
	return lc
}

// assignedLite starts a pull consumer assigned mqs.
func assignedLite(t testing.TB, b Broker, o *Options, p *PullOptions, mqs ...mq.MessageQueue) *PullConsumer {
	t.Helper()
	lc := newLite(t, b, o, p)
	if err := lc.Assign(mqs); err != nil {
		t.Fatalf("Assign: %v", err)
	}
	if err := lc.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return lc
}

// subscribedLite starts a pull consumer subscribed to topic.
func subscribedLite(t testing.TB, b Broker, o *Options, p *PullOptions, topic string) *PullConsumer {
	t.Helper()
	lc := newLite(t, b, o, p)
	if err := lc.Subscribe(topic, "*"); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if err := lc.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return lc
}

// pollBatch polls once, failing the test if nothing comes within d.
func pollBatch(t testing.TB, lc *PullConsumer, d time.Duration) []*Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msgs, err := lc.Poll(ctx)
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	return msgs
}

// dispatched checks that n messages of topic's queue q can be pulled: a send's
// acknowledgement comes after its message is in the consume queue.
func dispatched(t testing.TB, b *edge.Broker, topic string, q int32, n int64) {
	t.Helper()
	if off, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: topic, QueueID: q}); err != nil || off < n {
		t.Fatalf("%s/%d: max offset %d, %v; want at least %d once the sends returned", topic, q, off, err, n)
	}
}

// pollN polls until it has n messages (failing after 10 s or beyond n).
func pollN(t testing.TB, lc *PullConsumer, n int) []*Message {
	t.Helper()
	var out []*Message
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		out = append(out, pollBatch(t, lc, time.Until(deadline))...)
	}
	if len(out) != n {
		t.Fatalf("polled %d messages, want %d", len(out), n)
	}
	return out
}

// expectNothing fails if Poll returns messages within d.
func expectNothing(t testing.TB, lc *PullConsumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if msgs, err := lc.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll = %d messages, %v; want nothing and %v", len(msgs), err, context.DeadlineExceeded)
	}
}

func queryOffset(t testing.TB, b *edge.Broker, group string, queue mq.MessageQueue) int64 {
	t.Helper()
	off, err := b.QueryOffset(context.Background(), group, mq.MessageQueue{Topic: queue.Topic, QueueID: queue.QueueID})
	if err != nil {
		t.Fatalf("QueryOffset: %v", err)
	}
	return off
}

// countPulls is a Broker that counts pulls.
type countPulls struct {
	*edge.Broker
	n atomic.Int64
}

func (c *countPulls) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	c.n.Add(1)
	return c.Broker.Pull(ctx, req)
}

func allQueues(topic string, n int32) []mq.MessageQueue {
	out := make([]mq.MessageQueue, n)
	for i := range out {
		out[i] = brokerQueue(topic, int32(i))
	}
	return out
}

// TestPullPollQueueOrder: every batch comes from one queue, holds at most PullBatchSize
// messages, and each queue's messages come in queue order with no gap or repeat.
func TestPullPollQueueOrder(t *testing.T) { synctest.Test(t, testPullPollQueueOrder) }

func testPullPollQueueOrder(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	sendN(t, b, "T", "m", 40, nil)
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	lc := assignedLite(t, b, o, nil, allQueues("T", 4)...)

	next := map[int32]int64{}
	seen := map[string]bool{}
	for n := 0; n < 40; {
		msgs := pollBatch(t, lc, 10*time.Second)
		if len(msgs) == 0 || len(msgs) > 4 {
			t.Fatalf("batch of %d messages, want 1..4", len(msgs))
		}
		q := msgs[0].QueueID
		for _, m := range msgs {
			if m.Topic != "T" || m.QueueID != q {
				t.Fatalf("batch mixes queues: %s/%d in a batch of queue %d", m.Topic, m.QueueID, q)
			}
			if m.QueueOffset != next[q] {
				t.Fatalf("queue %d: offset %d, want %d", q, m.QueueOffset, next[q])
			}
			next[q]++
			seen[string(m.Body)] = true
		}
		n += len(msgs)
	}
	if len(seen) != 40 {
		t.Fatalf("%d distinct messages, want 40", len(seen))
	}
	expectNothing(t, lc, 100*time.Millisecond)
}

// TestPullLongPolling: an idle Poll waits in a broker long poll (a handful of pulls, no
// busy loop) and returns as soon as a message arrives, well before the poll times out.
func TestPullLongPolling(t *testing.T) { overNet(t, true, testPullLongPolling) }

func testPullLongPolling(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	cb := &countPulls{Broker: b}
	o := fastOptions(t, "g")
	o.BrokerSuspend = 10 * time.Second
	lc := assignedLite(t, cb, o, nil, mq.MessageQueue{Topic: "T"})

	type result struct {
		msgs []*Message
		err  error
	}
	res := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		msgs, err := lc.Poll(ctx)
		res <- result{msgs, err}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("Poll returned %d messages, %v before any was sent", len(r.msgs), r.err)
	default:
	}
	if n := cb.n.Load(); n > 2 {
		t.Fatalf("%d pulls while idle for 300 ms, want at most 2 (one long poll)", n)
	}
	start := time.Now()
	sendN(t, b, "T", "late", 1, nil)
	select {
	case r := <-res:
		if r.err != nil || len(r.msgs) != 1 || string(r.msgs[0].Body) != "late0" {
			t.Fatalf("Poll = %d messages, %v; want late0", len(r.msgs), r.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Poll did not return within 3 s of the send (the long poll was not woken)")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("message arrived after %v", d)
	}
}

// TestPullPollContext: Poll ends with its ctx, with ErrShutdown when Shutdown comes while it
// waits, and refuses before Start and after Shutdown.
func TestPullPollContext(t *testing.T) { synctest.Test(t, testPullPollContext) }

func testPullPollContext(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	lc := newLite(t, b, fastOptions(t, "g"), nil)
	if _, err := lc.Poll(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Poll before Start = %v, want %v", err, ErrNotStarted)
	}
	if err := lc.Assign([]mq.MessageQueue{{Topic: "T"}}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	expectNothing(t, lc, 100*time.Millisecond)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("Poll returned after %v, before its deadline", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := lc.Poll(ctx)
		errc <- err
	}()
	synctest.Wait()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Poll after cancel = %v, want %v", err, context.Canceled)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Poll did not return after its ctx was cancelled")
	}

	go func() {
		_, err := lc.Poll(context.Background())
		errc <- err
	}()
	synctest.Wait()
	if err := lc.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrShutdown) {
			t.Fatalf("Poll during Shutdown = %v, want %v", err, ErrShutdown)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Poll did not return at Shutdown")
	}
	if _, err := lc.Poll(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Poll after Shutdown = %v, want %v", err, ErrShutdown)
	}
	if err := lc.Shutdown(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Fatalf("second Shutdown = %v, want %v", err, ErrShutdown)
	}
}

// TestPullSubscribeAssignExclusive: one consumer subscribes or is assigned queues, not
// both; a subscribed consumer is a CONSUME_ACTIVELY member of its group, an assigned one is
// no member at all.
func TestPullSubscribeAssignExclusive(t *testing.T) {
	overNet(t, true, testPullSubscribeAssignExclusive)
}

func testPullSubscribeAssignExclusive(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	mqs := []mq.MessageQueue{{Topic: "T"}}

	sub := newLite(t, b, fastOptions(t, "gs"), nil)
	if err := sub.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Assign(mqs); !errors.Is(err, ErrSubscribeAndAssign) {
		t.Fatalf("Assign after Subscribe = %v, want %v", err, ErrSubscribeAndAssign)
	}
	asg := newLite(t, b, fastOptions(t, "ga"), nil)
	if err := asg.Assign(mqs); err != nil {
		t.Fatal(err)
	}
	if err := asg.Subscribe("T", "*"); !errors.Is(err, ErrSubscribeAndAssign) {
		t.Fatalf("Subscribe after Assign = %v, want %v", err, ErrSubscribeAndAssign)
	}
	none := newLite(t, b, fastOptions(t, "gn"), nil)
	if err := none.Start(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Start with neither = %v, want %v", err, ErrInvalidOptions)
	}

	for _, lc := range []*PullConsumer{sub, asg} {
		if err := lc.Start(); err != nil {
			t.Fatal(err)
		}
		if err := lc.Subscribe("T", "*"); !errors.Is(err, ErrStarted) {
			t.Fatalf("Subscribe after Start = %v, want %v", err, ErrStarted)
		}
		if err := lc.Assign(mqs); !errors.Is(err, ErrStarted) {
			t.Fatalf("Assign after Start = %v, want %v", err, ErrStarted)
		}
		if err := lc.Start(); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start = %v, want %v", err, ErrStarted)
		}
	}
	members, err := b.Members("gs")
	if err != nil || len(members) != 1 || members[0].ConsumeType != mq.ConsumeActively {
		t.Fatalf("members of gs = %+v, %v; want one CONSUME_ACTIVELY member", members, err)
	}
	if got := asg.Assignment(); len(got) != 1 || got[0] != mqs[0] {
		t.Fatalf("assigned consumer's queues = %v, want %v", got, mqs)
	}
	if _, err := b.Members("ga"); !errors.Is(err, mq.ErrGroupNotExist) {
		t.Fatalf("members of ga: %v, want %v (Assign needs no membership)", err, mq.ErrGroupNotExist)
	}
	waitFor(t, 5*time.Second, "subscribed consumer owns both queues", func() bool { return len(sub.Assignment()) == 2 })
}

// TestPullRebalanceSplit: two subscribed members of a group split the queues, and once they
// have, every message is polled exactly once, each by the owner of its queue.
func TestPullRebalanceSplit(t *testing.T) { synctest.Test(t, testPullRebalanceSplit) }

func testPullRebalanceSplit(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	lcs := []*PullConsumer{
		subscribedLite(t, b, fastOptions(t, "g"), nil, "T"),
		subscribedLite(t, b, fastOptions(t, "g"), nil, "T"),
	}
	waitFor(t, 5*time.Second, "queues split 2/2", func() bool {
		a, c := lcs[0].Assignment(), lcs[1].Assignment()
		if len(a) != 2 || len(c) != 2 {
			return false
		}
		for _, queue := range a {
			for _, mq2 := range c {
				if queue == mq2 {
					return false
				}
			}
		}
		return true
	})
	owned := [2]map[int32]bool{{}, {}}
	for i, lc := range lcs {
		for _, queue := range lc.Assignment() {
			owned[i][queue.QueueID] = true
		}
	}
	sendN(t, b, "T", "m", 80, nil)

	var mu sync.Mutex
	got := map[string]int{}
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var bad atomic.Value
	for i, lc := range lcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msgs, err := lc.Poll(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				for _, m := range msgs {
					if !owned[i][m.QueueID] {
						bad.Store(m.QueueID)
					}
					got[string(m.Body)]++
					total++
				}
				if total >= 80 {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if q := bad.Load(); q != nil {
		t.Fatalf("a consumer polled queue %d, which it does not own", q)
	}
	for _, body := range bodies("m", 80) {
		if got[body] != 1 {
			t.Fatalf("%s polled %d times, want once (total %d)", body, got[body], total)
		}
	}
	for _, lc := range lcs {
		expectNothing(t, lc, 100*time.Millisecond)
	}
}

// TestPullCommitSyncResume: CommitSync commits the position after the last polled message;
// with ManualCommit, Shutdown does not commit what was polled since; a new member of the
// group resumes at the committed position.
func TestPullCommitSyncResume(t *testing.T) { synctest.Test(t, testPullCommitSyncResume) }

func testPullCommitSyncResume(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 20, nil)
	dispatched(t, b, "T", 0, 20)
	queue := mq.MessageQueue{Topic: "T"}
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	manual := &PullOptions{ManualCommit: true}
	a := assignedLite(t, b, o, manual, queue)
	pollN(t, a, 8)
	if err := a.CommitSync(context.Background()); err != nil {
		t.Fatalf("CommitSync: %v", err)
	}
	if got := queryOffset(t, b, "g", queue); got != 8 {
		t.Fatalf("committed offset %d, want 8", got)
	}
	pollN(t, a, 4) // polled, never committed
	time.Sleep(3 * o.PersistInterval)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := queryOffset(t, b, "g", queue); got != 8 {
		t.Fatalf("offset after a manual-commit Shutdown %d, want 8", got)
	}

	o2 := fastOptions(t, "g")
	o2.PullBatchSize = 4
	c := subscribedLite(t, b, o2, nil, "T")
	msgs := pollN(t, c, 12)
	for i, m := range msgs {
		if m.QueueOffset != int64(8+i) {
			t.Fatalf("resumed message %d at offset %d, want %d", i, m.QueueOffset, 8+i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.CommitSync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("CommitSync with a cancelled ctx = %v, want %v", err, context.Canceled)
	}
}

// TestPullAutoCommit: with auto-commit the position after the last polled message (not
// the last pulled one) is committed at Shutdown, and every PersistInterval.
func TestPullAutoCommit(t *testing.T) { overNet(t, true, testPullAutoCommit) }

func testPullAutoCommit(t *testing.T) {
	queue := mq.MessageQueue{Topic: "T"}
	t.Run("shutdown", func(t *testing.T) {
		b := testBroker(t, nil)
		createTopic(t, b, "T", 1)
		sendN(t, b, "T", "m", 20, nil)
		dispatched(t, b, "T", 0, 20)
		o := fastOptions(t, "g")
		o.PullBatchSize = 4
		o.PersistInterval = time.Hour
		lc := assignedLite(t, b, o, nil, queue)
		pollN(t, lc, 8)
		waitFor(t, 5*time.Second, "the rest pulled", func() bool {
			lc.mu.Lock()
			defer lc.mu.Unlock()
			return lc.bufMsgs == 12
		})
		if got := queryOffset(t, b, "g", queue); got == 8 {
			t.Fatalf("offset 8 committed before Shutdown with an hour's PersistInterval")
		}
		if err := lc.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if got := queryOffset(t, b, "g", queue); got != 8 {
			t.Fatalf("offset after Shutdown %d, want 8", got)
		}
	})
	t.Run("interval", func(t *testing.T) {
		b := testBroker(t, nil)
		createTopic(t, b, "T", 1)
		sendN(t, b, "T", "m", 20, nil)
		dispatched(t, b, "T", 0, 20)
		o := fastOptions(t, "g")
		o.PullBatchSize = 4
		lc := assignedLite(t, b, o, nil, queue)
		pollN(t, lc, 8)
		waitFor(t, 5*time.Second, "offset 8 committed", func() bool { return queryOffset(t, b, "g", queue) == 8 })
		pollN(t, lc, 12)
		waitFor(t, 5*time.Second, "offset 20 committed", func() bool { return queryOffset(t, b, "g", queue) == 20 })
	})
}

// TestPullSeek: Seek drops the batches already pulled and polls from the new offset;
// SeekToBegin and SeekToEnd go to the queue's ends; a sought position is what the next
// commit stores; bad offsets and queues are refused.
func TestPullSeek(t *testing.T) { synctest.Test(t, testPullSeek) }

func testPullSeek(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	sendN(t, b, "T", "m", 20, mq.QueueIndex(0))
	dispatched(t, b, "T", 0, 20)
	queue := mq.MessageQueue{Topic: "T"}
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	lc := newLite(t, b, o, &PullOptions{ManualCommit: true})
	if err := lc.Assign([]mq.MessageQueue{queue}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Seek(queue, 0); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Seek before Start = %v, want %v", err, ErrNotStarted)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	first := func() int64 {
		t.Helper()
		return pollBatch(t, lc, 10*time.Second)[0].QueueOffset
	}
	if got := first(); got != 0 {
		t.Fatalf("first offset %d, want 0", got)
	}
	waitFor(t, 5*time.Second, "batches pulled ahead", func() bool {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		return lc.bufMsgs >= 8
	})
	if err := lc.Seek(queue, 10); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	if got := first(); got != 10 {
		t.Fatalf("offset after Seek(10) %d, want 10", got)
	}
	if err := lc.SeekToBegin(queue); err != nil {
		t.Fatalf("SeekToBegin: %v", err)
	}
	if got := first(); got != 0 {
		t.Fatalf("offset after SeekToBegin %d, want 0", got)
	}
	if err := lc.SeekToEnd(queue); err != nil {
		t.Fatalf("SeekToEnd: %v", err)
	}
	expectNothing(t, lc, 150*time.Millisecond)
	sendN(t, b, "T", "n", 1, mq.QueueIndex(0))
	if got := first(); got != 20 {
		t.Fatalf("offset after SeekToEnd and a send %d, want 20", got)
	}

	if err := lc.Seek(queue, 5); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	if err := lc.CommitSync(context.Background()); err != nil {
		t.Fatalf("CommitSync: %v", err)
	}
	if got := queryOffset(t, b, "g", queue); got != 5 {
		t.Fatalf("committed offset after Seek(5) %d, want 5", got)
	}

	for _, off := range []int64{-1, 22} {
		if err := lc.Seek(queue, off); !errors.Is(err, ErrSeekOffset) {
			t.Fatalf("Seek(%d) = %v, want %v", off, err, ErrSeekOffset)
		}
	}
	other := mq.MessageQueue{Topic: "T", QueueID: 1}
	if err := lc.Seek(other, 0); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("Seek of an unassigned queue = %v, want %v", err, ErrNotAssigned)
	}
	if err := lc.SeekToEnd(other); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("SeekToEnd of an unassigned queue = %v, want %v", err, ErrNotAssigned)
	}
}

// TestPullFlowControl: a full buffer stops the pulls (it never holds more than the
// threshold plus one batch), and polling resumes them.
func TestPullFlowControl(t *testing.T) { synctest.Test(t, testPullFlowControl) }

func testPullFlowControl(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 100, nil)
	dispatched(t, b, "T", 0, 100)
	o := fastOptions(t, "g")
	o.PullBatchSize = 4
	lc := assignedLite(t, b, o, &PullOptions{PullThresholdForAll: 8}, mq.MessageQueue{Topic: "T"})
	buffered := func() int {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		return lc.bufMsgs
	}
	waitFor(t, 5*time.Second, "the buffer filled", func() bool { return buffered() >= 8 })
	time.Sleep(100 * time.Millisecond)
	if n := buffered(); n > 12 {
		t.Fatalf("%d messages buffered, want at most 8 + one batch of 4", n)
	}
	msgs := pollN(t, lc, 100)
	for i, m := range msgs {
		if m.QueueOffset != int64(i) {
			t.Fatalf("message %d at offset %d", i, m.QueueOffset)
		}
	}
}

// TestPullRetryTopicRestored: a message of the group's retry topic is polled with its
// original topic.
func TestPullRetryTopicRestored(t *testing.T) { overNet(t, true, testPullRetryTopicRestored) }

func testPullRetryTopicRestored(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 1, nil)
	dispatched(t, b, "T", 0, 1)
	res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T"}, Filter: "*"})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("Pull: %d messages, %v", len(res.Messages), err)
	}
	if err := b.SendBack(context.Background(), mq.SendBackRequest{CommitLogOffset: res.Messages[0].CommitLogOffset, Group: "g", DelayLevel: 1}); err != nil {
		t.Fatalf("SendBack: %v", err)
	}
	retry := mq.MessageQueue{Topic: mq.RetryTopic("g")}
	waitFor(t, 5*time.Second, "the retry message", func() bool {
		n, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: retry.Topic, QueueID: 0})
		return err == nil && n == 1
	})
	lc := assignedLite(t, b, fastOptions(t, "g"), nil, retry)
	msgs := pollN(t, lc, 1)
	if m := msgs[0]; m.Topic != "T" || string(m.Body) != "m0" || m.ReconsumeTimes != 1 {
		t.Fatalf("polled %s %q reconsume %d, want T \"m0\" reconsume 1", m.Topic, m.Body, m.ReconsumeTimes)
	}
}

// TestPullBroadcasting: every broadcasting member polls every message and keeps its
// offsets in its own file.
func TestPullBroadcasting(t *testing.T) { overNet(t, true, testPullBroadcasting) }

func testPullBroadcasting(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	var lcs [2]*PullConsumer
	for i := range lcs {
		o := fastOptions(t, "g")
		o.Model = mq.Broadcasting
		o.ClientID = "c" + string(rune('0'+i))
		lcs[i] = subscribedLite(t, b, o, nil, "T")
		waitFor(t, 5*time.Second, "both queues", func() bool { return len(lcs[i].Assignment()) == 2 })
	}
	sendN(t, b, "T", "m", 20, nil)
	for _, lc := range lcs {
		seen := map[string]bool{}
		for _, m := range pollN(t, lc, 20) {
			seen[string(m.Body)] = true
		}
		if len(seen) != 20 {
			t.Fatalf("%d distinct messages, want 20", len(seen))
		}
		if err := lc.CommitSync(context.Background()); err != nil {
			t.Fatalf("CommitSync: %v", err)
		}
		off, err := lc.offsets.Read(context.Background(), brokerQueue("T", 0), readFromStore)
		if err != nil || off != 10 {
			t.Fatalf("local offset of queue 0 = %d, %v; want 10", off, err)
		}
	}
}

// TestPullBadInput: options, subscriptions and assignments the consumer cannot use are
// refused with errors that say why.
func TestPullBadInput(t *testing.T) { overNet(t, true, testPullBadInput) }

func testPullBadInput(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	if _, err := NewPullConsumer(nil, fastOptions(t, "g"), nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("nil broker: %v, want %v", err, ErrInvalidOptions)
	}
	if _, err := NewPullConsumer(consumerBroker(t, b), &Options{}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("empty group: %v, want %v", err, ErrInvalidOptions)
	}
	if _, err := NewPullConsumer(consumerBroker(t, b), nil, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("nil options: %v, want %v", err, ErrInvalidOptions)
	}
	if _, err := NewPullConsumer(consumerBroker(t, b), fastOptions(t, "g"), &PullOptions{PullThresholdForAll: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("negative PullThresholdForAll: %v, want %v", err, ErrInvalidOptions)
	}
	for _, c := range []struct {
		name string
		call func(*PullConsumer) error
		want error
	}{
		{"empty topic", func(lc *PullConsumer) error { return lc.Subscribe("", "*") }, ErrInvalidOptions},
		{"unknown topic", func(lc *PullConsumer) error { return lc.Subscribe("Nope", "*") }, mq.ErrTopicNotExist},
		{"bad expression", func(lc *PullConsumer) error { return lc.Subscribe("T", "a || || b") }, ErrInvalidOptions},
		{"no queues", func(lc *PullConsumer) error { return lc.Assign(nil) }, ErrInvalidOptions},
		{"unknown topic assigned", func(lc *PullConsumer) error { return lc.Assign([]mq.MessageQueue{{Topic: "Nope"}}) }, mq.ErrTopicNotExist},
		{"queue out of range", func(lc *PullConsumer) error { return lc.Assign([]mq.MessageQueue{{Topic: "T", QueueID: 2}}) }, mq.ErrInvalidQueue},
		{"commit before Start", func(lc *PullConsumer) error { return lc.CommitSync(context.Background()) }, ErrNotStarted},
	} {
		t.Run(c.name, func(t *testing.T) {
			lc := newLite(t, b, fastOptions(t, "g"), nil)
			if err := c.call(lc); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if err := lc.Start(); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Start after a refused call = %v, want %v (nothing to consume)", err, ErrInvalidOptions)
			}
		})
	}
}

// TestPullConcurrentPollers: batches that arrive together, while several Polls wait, each
// reach a Poll (one wake-up token is passed on by the Poll that takes it).
func TestPullConcurrentPollers(t *testing.T) { synctest.Test(t, testPullConcurrentPollers) }

func testPullConcurrentPollers(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	queue := mq.MessageQueue{Topic: "T"}
	lc := assignedLite(t, b, fastOptions(t, "g"), nil, queue)
	const pollers = 3
	errc := make(chan error, pollers)
	for range pollers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			msgs, err := lc.Poll(ctx)
			if err == nil && len(msgs) != 1 {
				err = errors.New("wrong batch")
			}
			errc <- err
		}()
	}
	synctest.Wait() // every Poll waits
	// Three batches appended at once, with the one token a burst of appends leaves.
	lc.mu.Lock()
	q := lc.queues[queue]
	for i := range pollers {
		m := &Message{Message: mq.Message{Topic: "T", Body: []byte("x")}, QueueOffset: int64(i)}
		lc.buf = append(lc.buf, &liteBatch{q: q, msgs: []*Message{m}, bytes: 1, next: int64(i + 1)})
		q.msgs++
		q.bytes++
		lc.bufMsgs++
	}
	wake(lc.ready)
	lc.mu.Unlock()
	for range pollers {
		if err := <-errc; err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
}
