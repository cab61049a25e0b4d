package consumer

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBroker opens a broker with small store settings and short delay levels, so retries
// come back in milliseconds. mod may adjust the options.
func testBroker(t testing.TB, mod func(*edge.Options)) *edge.Broker {
	t.Helper()
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 20 * time.Millisecond
	}
	o := &edge.Options{
		Store:          &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true, Flush: commitlog.FlushAsync},
		MaxMessageSize: 64 << 10,
		DelayLevels:    levels,
	}
	if mod != nil {
		mod(o)
	}
	b, err := edge.Open(t.TempDir(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// brokerQueue returns queue id of topic on the test broker, named as its routes name it.
func brokerQueue(topic string, id int32) mq.MessageQueue {
	return mq.MessageQueue{Topic: topic, BrokerName: edge.DefaultOptions.BrokerName, QueueID: id}
}

func createTopic(t testing.TB, b *edge.Broker, name string, queues int32) {
	t.Helper()
	if err := b.CreateTopic(edge.TopicConfig{Name: name, ReadQueues: queues, WriteQueues: queues}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
}

// fastOptions returns consumer options with every interval small. Over the network the
// broker holds pulls for a second, the shortest hold the client sends as one (shorter, a
// pull is not held at, and does not stream).
func fastOptions(t testing.TB, group string) *Options {
	suspend := 200 * time.Millisecond
	if isNet(t) {
		suspend = time.Second
	}
	return &Options{
		Group:                   group,
		FromWhere:               ConsumeFromFirstOffset,
		PullBatchSize:           8,
		FlowControlDelay:        5 * time.Millisecond,
		SuspendedDelay:          10 * time.Millisecond,
		PullErrorDelay:          30 * time.Millisecond,
		BrokerSuspend:           suspend,
		OffsetIllegalDelay:      50 * time.Millisecond,
		ConsumeGoroutinesMin:    2,
		ConsumeGoroutinesMax:    8,
		SubmitRetryDelay:        20 * time.Millisecond,
		SendBackRetryDelay:      20 * time.Millisecond,
		LockInterval:            100 * time.Millisecond,
		LockExpiry:              2 * time.Second,
		SuspendCurrentQueueTime: 10 * time.Millisecond,
		RebalanceInterval:       100 * time.Millisecond,
		HeartbeatInterval:       100 * time.Millisecond,
		PersistInterval:         50 * time.Millisecond,
		OffsetDir:               t.TempDir(),
	}
}

// bubbleOptions returns consumer options for a test in a synctest bubble: RocketMQ's
// intervals (a fake clock makes minutes cost nothing), from the first offset, with
// broadcasting offsets in a temporary directory.
func bubbleOptions(t testing.TB, group string) *Options {
	return &Options{Group: group, FromWhere: ConsumeFromFirstOffset, OffsetDir: t.TempDir()}
}

// eachKind runs f in a synctest bubble for a concurrent and for an orderly consumer, as
// subtests named so.
func eachKind(t *testing.T, f func(t *testing.T, orderly bool)) {
	for _, orderly := range []bool{false, true} {
		name := map[bool]string{false: "concurrent", true: "orderly"}[orderly]
		t.Run(name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { f(t, orderly) }) })
	}
}

// listenerOf returns a concurrent or an orderly listener that calls consume with each batch
// and reports success if it returns true, else a failure to consume again later
// (ReconsumeLater, SuspendCurrentQueueAMoment).
func listenerOf(orderly bool, consume func(msgs []*Message) bool) Listener {
	if orderly {
		return OrderlyListener(func(_ context.Context, msgs []*Message, _ *OrderlyContext) (ConsumeOrderlyStatus, error) {
			if consume(msgs) {
				return OrderlySuccess, nil
			}
			return SuspendCurrentQueueAMoment, nil
		})
	}
	return ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		if consume(msgs) {
			return ConsumeSuccess, nil
		}
		return ReconsumeLater, nil
	})
}

// sendN sends n messages with bodies prefix0..prefix(n-1).
func sendN(t testing.TB, b *edge.Broker, topic, prefix string, n int, sel mq.QueueSelector) {
	t.Helper()
	for i := range n {
		m := &mq.Message{Topic: topic, Body: []byte(prefix + strconv.Itoa(i))}
		if _, err := b.Send(context.Background(), m, sel); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
}

// storedOffset returns group's offset of queue at the broker, -1 if none is stored (the
// broker may answer 0 for a queue whose first message is younger than
// edge.Options.NewQueueWindow).
func storedOffset(t testing.TB, b *edge.Broker, group string, queue mq.MessageQueue) int64 {
	t.Helper()
	off, err := b.QueryOffset(context.Background(), group, queue)
	if errors.Is(err, mq.ErrOffsetNotFound) {
		return -1
	}
	if err != nil {
		t.Fatalf("QueryOffset: %v", err)
	}
	return off
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startConsumer starts a push consumer with one subscription; it is shut down at cleanup.
func startConsumer(t testing.TB, b Broker, o *Options, topic string, l Listener) *PushConsumer {
	t.Helper()
	pc, err := NewPushConsumer(consumerBroker(t, b), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, "*", l); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pc.Shutdown(ctx)
	})
	return pc
}

func shutdown(t testing.TB, pc *PushConsumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pc.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// counter records deliveries by body.
type counter struct {
	mu sync.Mutex
	m  map[string]int
	n  int
}

func newCounter() *counter { return &counter{m: map[string]int{}} }

func (c *counter) add(msgs []*Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.m[string(m.Body)]++
		c.n++
	}
}

func (c *counter) get(body string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[body]
}

func (c *counter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *counter) listener() ConcurrentListener {
	return func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		return ConsumeSuccess, nil
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
