package consumer

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
)

func TestMixedListeners(t *testing.T) { overNet(t, true, testMixedListeners) }

func testMixedListeners(t *testing.T) {
	b := testBroker(t, nil)
	pc, err := NewPushConsumer(consumerBroker(t, b), fastOptions(t, "g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe("T1", "*", newCounter().listener()); err != nil {
		t.Fatal(err)
	}
	ol := OrderlyListener(func(context.Context, []*Message, *OrderlyContext) (ConsumeOrderlyStatus, error) {
		return OrderlySuccess, nil
	})
	if err := pc.Subscribe("T2", "*", ol); !errors.Is(err, ErrMixedListeners) {
		t.Fatalf("Subscribe orderly after concurrent: %v, want ErrMixedListeners", err)
	}
	if _, err := NewPushConsumer(consumerBroker(t, b), &Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no group: %v", err)
	}
}

// TestHooksAndStats: every message reaches the listener once, the hooks run around each
// call, and the stats count pulls, consumes and the lag.
func TestHooksAndStats(t *testing.T) { overNet(t, true, testHooksAndStats) }

func testHooksAndStats(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	sendN(t, b, "T", "m", 100, nil)
	var before, after, afterOK atomic.Int64
	o := fastOptions(t, "g")
	o.BeforeConsume = []Hook{func(_ context.Context, hc *HookContext) { before.Add(int64(len(hc.Messages))) }}
	o.AfterConsume = []Hook{func(_ context.Context, hc *HookContext) {
		after.Add(int64(len(hc.Messages)))
		if hc.Success && hc.Status == "CONSUME_SUCCESS" && hc.Group == "g" {
			afterOK.Add(int64(len(hc.Messages)))
		}
	}}
	c := newCounter()
	pc := startConsumer(t, b, o, "T", c.listener())
	waitFor(t, 10*time.Second, "100 messages", func() bool { return c.distinct() == 100 })
	waitFor(t, 5*time.Second, "hooks", func() bool { return after.Load() == 100 })
	if before.Load() != 100 || afterOK.Load() != 100 {
		t.Fatalf("hooks saw before %d, after ok %d messages, want 100", before.Load(), afterOK.Load())
	}
	waitFor(t, 5*time.Second, "results counted", func() bool { return pc.Stats().Topics["T"].ConsumeOK == 100 })
	st := pc.Stats().Topics["T"]
	if st.PullMsgs != 100 || st.ConsumeOK != 100 || st.ConsumeFailed != 0 || st.Consumes != 100 || st.Pulls == 0 || st.PullTPS <= 0 || st.ConsumeOKTPS <= 0 {
		t.Fatalf("stats %+v", st)
	}
	waitFor(t, 5*time.Second, "zero lag", func() bool {
		lag := pc.Stats().Lag
		var sum int64
		for queue, l := range lag {
			if queue.Topic == "T" {
				sum += l
			}
		}
		return len(lag) >= 4 && sum == 0
	})
}

// TestFlowControl: a queue's cache never holds more than PullThresholdForQueue messages
// plus one pull batch while the listener is blocked.
func TestFlowControl(t *testing.T) { overNet(t, true, testFlowControl) }

func testFlowControl(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 100, nil)
	o := fastOptions(t, "g")
	o.PullThresholdForQueue = 10
	o.PullBatchSize = 4
	release := make(chan struct{})
	c := newCounter()
	pc := startConsumer(t, b, o, "T", ConcurrentListener(func(ctx context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		c.add(msgs)
		return ConsumeSuccess, nil
	}))
	waitFor(t, 5*time.Second, "flow control", func() bool { return pc.Stats().Topics["T"].FlowControls > 3 })
	for _, qs := range pc.snapshot() {
		if n := qs.pq.Count(); n > 10+4 {
			t.Fatalf("queue caches %d messages, threshold 10 + batch 4", n)
		}
	}
	close(release)
	waitFor(t, 10*time.Second, "all messages", func() bool { return c.distinct() == 100 })
}

// TestFlowControlMaxSpan: a concurrent queue stops pulling while the offsets it caches span
// more than ConsumeConcurrentlyMaxSpan (the count threshold stays far away).
func TestFlowControlMaxSpan(t *testing.T) { overNet(t, true, testFlowControlMaxSpan) }

func testFlowControlMaxSpan(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 200, nil)
	o := fastOptions(t, "g")
	o.ConsumeConcurrentlyMaxSpan = 20
	o.PullBatchSize = 4
	release := make(chan struct{})
	c := newCounter()
	pc := startConsumer(t, b, o, "T", ConcurrentListener(func(ctx context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		c.add(msgs)
		return ConsumeSuccess, nil
	}))
	waitFor(t, 5*time.Second, "flow control", func() bool { return pc.Stats().Topics["T"].FlowControls > 3 })
	for _, qs := range pc.snapshot() {
		if qs.queue.Topic == "T" && (qs.pq.MaxSpan() > 20+4 || qs.pq.Count() > 21+4) {
			t.Fatalf("cache spans %d offsets with %d messages, limit 20 + batch 4", qs.pq.MaxSpan(), qs.pq.Count())
		}
	}
	close(release)
	waitFor(t, 10*time.Second, "all messages", func() bool { return c.distinct() == 200 })
}

// TestOffsetIllegal: a stored offset beyond the queue's end is corrected from
// NextBeginOffset, stored, and the queue is consumed again from there.
func TestOffsetIllegal(t *testing.T) { overNet(t, true, testOffsetIllegal) }

func testOffsetIllegal(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "old", 5, nil)
	if err := b.CommitOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0}, 1000); err != nil {
		t.Fatal(err)
	}
	c := newCounter()
	startConsumer(t, b, fastOptions(t, "g"), "T", c.listener())
	waitFor(t, 5*time.Second, "corrected offset", func() bool {
		off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0})
		return err == nil && off < 1000
	})
	sendN(t, b, "T", "new", 3, nil)
	waitFor(t, 5*time.Second, "new messages", func() bool { return c.get("new0")+c.get("new1")+c.get("new2") == 3 })
}

// TestRetryTopicSubscriptionAndRedelivery: a clustering consumer subscribes to its group's
// retry topic; a failed message is sent back and comes again with its original topic.
func TestRetryTopicSubscriptionAndRedelivery(t *testing.T) {
	overNet(t, true, testRetryTopicSubscriptionAndRedelivery)
}

func testRetryTopicSubscriptionAndRedelivery(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	var mu sync.Mutex
	var seen []Message
	pc := startConsumer(t, b, fastOptions(t, "g"), "T", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen = append(seen, *m)
		}
		if msgs[0].ReconsumeTimes == 0 {
			return ReconsumeLater, nil
		}
		return ConsumeSuccess, nil
	}))
	members, err := b.Members("g")
	if err != nil || len(members) != 1 {
		t.Fatalf("Members: %v %v", members, err)
	}
	subs := map[string]string{}
	for _, s := range members[0].Subscriptions {
		subs[s.Topic] = s.Expression
	}
	if subs[mq.RetryTopic("g")] != "*" || subs["T"] != "*" {
		t.Fatalf("subscriptions %v, want T and %s", subs, mq.RetryTopic("g"))
	}
	sendN(t, b, "T", "m", 3, nil)
	waitFor(t, 10*time.Second, "redelivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 6
	})
	waitFor(t, 5*time.Second, "retry queue assigned", func() bool {
		for _, queue := range pc.assigned() {
			if queue.Topic == mq.RetryTopic("g") {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, m := range seen {
		if m.Topic != "T" {
			t.Fatalf("listener saw topic %q, want T restored", m.Topic)
		}
		if m.ReconsumeTimes == 1 {
			again++
		}
	}
	if again != 3 {
		t.Fatalf("%d redeliveries with reconsume times 1, want 3", again)
	}
	if st := pc.Stats().Topics["T"]; st.ConsumeFailed != 3 {
		t.Fatalf("failed count %d, want 3", st.ConsumeFailed)
	}
}

// TestAckIndexPartialSuccess: with ConsumeSuccess and AckIndex 1 of a batch of 4, only the
// last two messages come back.
func TestAckIndexPartialSuccess(t *testing.T) { overNet(t, true, testAckIndexPartialSuccess) }

func testAckIndexPartialSuccess(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 4, nil)
	waitFor(t, 5*time.Second, "4 messages dispatched", func() bool {
		max, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: "T", QueueID: 0})
		return err == nil && max == 4
	})
	o := fastOptions(t, "g")
	o.ConsumeMessageBatchMaxSize = 4
	o.PullBatchSize = 4
	c := newCounter()
	var first atomic.Bool
	var firstLen atomic.Int64
	startConsumer(t, b, o, "T", ConcurrentListener(func(_ context.Context, msgs []*Message, cc *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		if first.CompareAndSwap(false, true) {
			firstLen.Store(int64(len(msgs)))
			cc.AckIndex = 1
		}
		return ConsumeSuccess, nil
	}))
	waitFor(t, 10*time.Second, "redelivery of m2 and m3", func() bool { return c.get("m2") == 2 && c.get("m3") == 2 })
	if firstLen.Load() != 4 {
		t.Fatalf("first batch had %d messages, want 4", firstLen.Load())
	}
	waitFor(t, 5*time.Second, "offset committed", func() bool {
		off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0})
		return err == nil && off == 4
	})
	if c.get("m0") != 1 || c.get("m1") != 1 {
		t.Fatalf("acknowledged messages redelivered: m0 %d, m1 %d", c.get("m0"), c.get("m1"))
	}
}

// TestPanicCountsAsFailure: a listener panic is recovered and the batch is sent back.
func TestPanicCountsAsFailure(t *testing.T) { overNet(t, true, testPanicCountsAsFailure) }

func testPanicCountsAsFailure(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 1, nil)
	c := newCounter()
	var reconsumed atomic.Int32
	pc := startConsumer(t, b, fastOptions(t, "g"), "T", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		if msgs[0].ReconsumeTimes == 0 {
			panic("boom")
		}
		reconsumed.Store(msgs[0].ReconsumeTimes)
		return ConsumeSuccess, nil
	}))
	waitFor(t, 10*time.Second, "redelivery after panic", func() bool { return c.get("m0") == 2 })
	if reconsumed.Load() != 1 {
		t.Fatalf("reconsume times %d, want 1", reconsumed.Load())
	}
	// Stats go by the queue's topic, as RocketMQ's: the redelivery is the retry topic's.
	waitFor(t, 5*time.Second, "stats", func() bool { return pc.Stats().Topics[mq.RetryTopic("g")].ConsumeOK == 1 })
	if st := pc.Stats().Topics["T"]; st.ConsumeFailed != 1 {
		t.Fatalf("stats %+v, want 1 failed and 1 ok", st)
	}
}

// failingSendBack is a broker whose send-backs and sends fail.
type failingSendBack struct {
	*edge.Broker
	sendBacks, sends atomic.Int32
}

func (f *failingSendBack) SendBack(context.Context, mq.SendBackRequest) error {
	f.sendBacks.Add(1)
	return errors.New("test: send back refused")
}

func (f *failingSendBack) Send(context.Context, *mq.Message, mq.QueueSelector) (mq.SendResult, error) {
	f.sends.Add(1)
	return mq.SendResult{}, errors.New("test: send refused")
}

// TestSendBackFailsConsumesLocally: when the send-back and the normal send to the retry
// topic both fail, failed messages are consumed again locally, and the offset moves on
// once they succeed.
func TestSendBackFailsConsumesLocally(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 1, nil)
	fb := &failingSendBack{Broker: b}
	c := newCounter()
	var lastTimes atomic.Int32
	startConsumer(t, fb, fastOptions(t, "g"), "T", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		lastTimes.Store(msgs[0].ReconsumeTimes)
		if c.get("m0") < 3 {
			return ReconsumeLater, nil
		}
		return ConsumeSuccess, nil
	}))
	waitFor(t, 10*time.Second, "local reconsumption", func() bool { return c.get("m0") >= 3 })
	waitFor(t, 5*time.Second, "offset committed", func() bool {
		off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0})
		return err == nil && off == 1
	})
	if fb.sendBacks.Load() != 2 || fb.sends.Load() != 2 || lastTimes.Load() != 2 {
		t.Fatalf("%d send-backs, %d sends, reconsume times %d; want 2, 2, 2", fb.sendBacks.Load(), fb.sends.Load(), lastTimes.Load())
	}
}

// TestSuspendResume: a suspended consumer pulls nothing until resumed (the pulls parked at
// the broker before Suspend run out first).
func TestSuspendResume(t *testing.T) { synctest.Test(t, testSuspendResume) }

func testSuspendResume(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	c := newCounter()
	pc := startConsumer(t, b, bubbleOptions(t, "g"), "T", c.listener())
	time.Sleep(time.Second)
	if n := len(pc.assigned()); n != 3 {
		t.Fatalf("%d queues assigned, want T's 2 and the retry queue", n)
	}
	pc.Suspend()
	time.Sleep(DefaultOptions.BrokerSuspend)
	sendN(t, b, "T", "m", 10, nil)
	time.Sleep(time.Minute)
	if n := c.total(); n != 0 {
		t.Fatalf("suspended consumer consumed %d messages", n)
	}
	pc.Resume()
	time.Sleep(2 * DefaultOptions.SuspendedDelay) // each pull loop looks again within SuspendedDelay
	if n := c.distinct(); n != 10 {
		t.Fatalf("%d messages consumed after Resume, want 10", n)
	}
}

// TestShutdownPersistsOffsets: a consumer restarted after Shutdown resumes where it stopped,
// without redelivering what it consumed.
func TestShutdownPersistsOffsets(t *testing.T) { synctest.Test(t, testShutdownPersistsOffsets) }

func testShutdownPersistsOffsets(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	sendN(t, b, "T", "a", 40, nil)
	c := newCounter()
	o := bubbleOptions(t, "g")
	o.PersistInterval = time.Hour // only Shutdown persists
	pc := startConsumer(t, b, o, "T", c.listener())
	time.Sleep(time.Second)
	if n := c.distinct(); n != 40 {
		t.Fatalf("%d messages consumed, want 40", n)
	}
	shutdown(t, pc)
	ids, _ := b.ConsumerIDs(context.Background(), "", "g")
	if len(ids) != 0 {
		t.Fatalf("members after Shutdown: %v", ids)
	}
	for q := int32(0); q < 4; q++ {
		if off := storedOffset(t, b, "g", brokerQueue("T", q)); off != 10 {
			t.Fatalf("queue %d offset %d, want 10", q, off)
		}
	}
	sendN(t, b, "T", "b", 20, nil)
	c2 := newCounter()
	startConsumer(t, b, bubbleOptions(t, "g"), "T", c2.listener())
	time.Sleep(time.Minute)
	if c2.distinct() != 20 || c2.total() != 20 {
		t.Fatalf("restarted consumer consumed %d messages, %d distinct; want the 20 new ones", c2.total(), c2.distinct())
	}
	for _, body := range bodies("a", 40) {
		if c2.get(body) != 0 {
			t.Fatalf("%s redelivered after restart", body)
		}
	}
}

// TestConsumeTimeout: a listener call that hangs for ConsumeTimeout is sent back to the
// retry topic and dropped from the cache at the next expiry check; the batches queued
// behind it in its pool task are taken from that task and consumed, each once, and the
// committed offset moves past the hung message, which comes back from the retry topic.
func TestConsumeTimeout(t *testing.T) { synctest.Test(t, testConsumeTimeout) }

func testConsumeTimeout(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	const n = 20
	sendN(t, b, "T", "m", n, nil)
	dispatched(t, b, "T", 0, n)
	o := bubbleOptions(t, "g")
	// One pull of 20 one-message batches goes to 4 pool tasks of 5 batches: m3 and m4 wait
	// behind m2 in its task.
	o.ConsumeGoroutinesMin, o.ConsumeGoroutinesMax = 4, 4
	hang := make(chan struct{})
	release := sync.OnceFunc(func() { close(hang) })
	c := newCounter()
	startConsumer(t, b, o, "T", ConcurrentListener(func(ctx context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		if string(msgs[0].Body) == "m2" && msgs[0].ReconsumeTimes == 0 {
			select {
			case <-hang:
			case <-ctx.Done():
			}
		}
		return ConsumeSuccess, nil
	}))
	t.Cleanup(release) // before Shutdown, which waits for the listener
	queue := brokerQueue("T", 0)

	time.Sleep(time.Minute)
	if c.get("m3")+c.get("m4") != 0 || c.distinct() != n-2 {
		t.Fatalf("before the timeout: m3 consumed %d times, m4 %d, %d distinct; want 0, 0, %d (all but the two behind m2)",
			c.get("m3"), c.get("m4"), c.distinct(), n-2)
	}
	if off := storedOffset(t, b, "g", queue); off > 2 {
		t.Fatalf("committed offset %d while m2 hangs, want at most 2", off)
	}

	time.Sleep(DefaultOptions.ConsumeTimeout + DefaultOptions.ExpiredCheckInterval)
	check := func(when string) {
		t.Helper()
		for _, body := range bodies("m", n) {
			want := 1
			if body == "m2" {
				want = 2 // the hung call, then the copy from the retry topic
			}
			if got := c.get(body); got != want {
				t.Errorf("%s: %s consumed %d times, want %d", when, body, got, want)
			}
		}
		if off := storedOffset(t, b, "g", queue); off != n {
			t.Fatalf("%s: committed offset %d, want %d", when, off, n)
		}
	}
	check("after the timeout")
	// The hung call returns: its worker does not consume the batches taken from it.
	release()
	time.Sleep(time.Minute)
	check("after the hung call returned")
}

// TestPoisonMessageToDLQ: with MaxReconsumeTimes -1 (RocketMQ's Go client's default,
// meaning 16), a message that always fails is delivered 17 times, then goes to the group's
// dead-letter topic, and the queue moves on; concurrently (through the retry topic) and in
// order.
func TestPoisonMessageToDLQ(t *testing.T) { eachKind(t, testPoisonMessageToDLQ) }

func testPoisonMessageToDLQ(t *testing.T, orderly bool) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 3, nil) // m1 is the poison
	o := bubbleOptions(t, "g")
	o.MaxReconsumeTimes = -1
	c := newCounter()
	l := listenerOf(orderly, func(msgs []*Message) bool {
		c.add(msgs)
		return string(msgs[0].Body) != "m1"
	})
	pc := startConsumer(t, b, o, "T", l)
	if pc.opts.MaxReconsumeTimes != 16 {
		t.Fatalf("MaxReconsumeTimes -1 became %d, want 16", pc.opts.MaxReconsumeTimes)
	}
	time.Sleep(time.Hour)
	if got := [3]int{c.get("m0"), c.get("m1"), c.get("m2")}; got != [3]int{1, 17, 1} {
		t.Fatalf("m0, m1, m2 delivered %v times, want [1 17 1]", got)
	}
	dlq := mq.MessageQueue{Topic: mq.DLQTopic("g")}
	if n, err := b.MaxOffset(context.Background(), dlq); err != nil || n != 1 {
		t.Fatalf("dead-letter topic holds %d messages (%v), want 1", n, err)
	}
	if off := storedOffset(t, b, "g", brokerQueue("T", 0)); off != 3 {
		t.Fatalf("committed offset %d, want 3", off)
	}
}

// TestConsumeFromWhere: where a new group starts on a queue. A queue whose first message
// is younger than the broker's NewQueueWindow (60 s) is read from its start whatever
// FromWhere says, so that the first messages of a new topic are not lost; on a queue with
// older history, ConsumeFromLastOffset starts at new messages only, ConsumeFromFirstOffset
// at the first stored one, ConsumeFromTimestamp at the first stored at or after
// ConsumeTimestamp (default 30 min before Start).
func TestConsumeFromWhere(t *testing.T) {
	for _, c := range []struct {
		name  string
		from  ConsumeFromWhere
		at    time.Duration // ConsumeTimestamp after the first send, if not 0
		first time.Duration // how long before Start the first send is
		want  string        // prefixes of the batches consumed: a sent first, b 10 min later, n after Start
	}{
		{"last offset, new queue", ConsumeFromLastOffset, 0, 0, "a b n"},
		{"last offset, older history", ConsumeFromLastOffset, 0, 12 * time.Minute, "n"},
		{"first offset, older history", ConsumeFromFirstOffset, 0, 12 * time.Minute, "a b n"},
		{"timestamp", ConsumeFromTimestamp, 5 * time.Minute, 12 * time.Minute, "b n"},
		{"timestamp by default 30 min before Start", ConsumeFromTimestamp, 0, 35 * time.Minute, "b n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := testBroker(t, nil)
				createTopic(t, b, "T", 1)
				start := time.Now()
				sendN(t, b, "T", "a", 2, nil)
				if c.first > 0 {
					time.Sleep(10 * time.Minute)
				}
				sendN(t, b, "T", "b", 2, nil)
				time.Sleep(c.first - time.Since(start))
				o := bubbleOptions(t, "g")
				o.FromWhere = c.from
				if c.at > 0 {
					o.ConsumeTimestamp = start.Add(c.at)
				}
				cnt := newCounter()
				startConsumer(t, b, o, "T", cnt.listener())
				time.Sleep(time.Second)
				sendN(t, b, "T", "n", 2, nil)
				time.Sleep(time.Second)
				var want []string
				for _, p := range strings.Fields(c.want) {
					want = append(want, bodies(p, 2)...)
				}
				for _, body := range want {
					if cnt.get(body) != 1 {
						t.Errorf("%s consumed %d times, want 1", body, cnt.get(body))
					}
				}
				if cnt.total() != len(want) {
					t.Errorf("%d messages consumed, want %d: %v", cnt.total(), len(want), want)
				}
			})
		})
	}
}
