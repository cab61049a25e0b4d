package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// asyncBroker is the in-process broker with a PullAsync (an AsyncPuller, as the network
// client is): each pull runs on a goroutine of its own, which hands the result to the
// callback, as a client's reader does. It counts the pulls of each kind; while block is
// set PullAsync says mq.ErrWouldBlock, and the next failAsync async pulls are answered
// with an error.
type asyncBroker struct {
	*edge.Broker
	async, plain atomic.Int64
	chained      atomic.Int64 // async pulls sent from a callback of PullAsync
	block        atomic.Bool
	failAsync    atomic.Int64
	wg           sync.WaitGroup
}

var errInjected = errors.New("injected pull failure")

func (b *asyncBroker) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	b.plain.Add(1)
	return b.Broker.Pull(ctx, req)
}

func (b *asyncBroker) PullAsync(ctx context.Context, req mq.PullRequest, done func(mq.PullResult, error)) error {
	if b.block.Load() {
		return fmt.Errorf("%w: test", mq.ErrWouldBlock)
	}
	b.async.Add(1)
	if inCallback() {
		b.chained.Add(1)
	}
	fail := b.failAsync.Add(-1) >= 0
	b.wg.Add(1)
	go func() { // ends with the pull, which ends with ctx
		defer b.wg.Done()
		if fail {
			done(mq.PullResult{}, errInjected)
			return
		}
		done(b.Broker.Pull(ctx, req))
	}()
	return nil
}

// inCallback reports whether the caller runs in a callback of asyncBroker.PullAsync.
func inCallback() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "(*asyncBroker).PullAsync.func") {
			return true
		}
		if !more {
			return false
		}
	}
}

// Over an AsyncPuller the consumer pulls in chains: every message is consumed once, by
// pulls that went through PullAsync only (a callback sends the next pull), and the stored
// offsets reach the end of every queue.
func TestPullChainConsumesAll(t *testing.T) {
	eachKind(t, func(t *testing.T, orderly bool) {
		ab := &asyncBroker{Broker: testBroker(t, nil)}
		t.Cleanup(ab.wg.Wait) // after the consumer's shutdown (cleanups run last first)
		createTopic(t, ab.Broker, "T", 4)
		const n = 400
		sendN(t, ab.Broker, "T", "m", n, nil)
		c := newCounter()
		o := bubbleOptions(t, "g")
		o.PullBatchSize = 8
		pc := startConsumer(t, ab, o, "T", listenerOf(orderly, func(msgs []*Message) bool { c.add(msgs); return true }))
		waitFor(t, time.Minute, "every message", func() bool { return c.distinct() == n })
		time.Sleep(time.Second) // pulls park at the ends of the queues
		shutdown(t, pc)
		if c.total() != n {
			t.Fatalf("%d deliveries of %d messages", c.total(), n)
		}
		if ab.plain.Load() != 0 || ab.async.Load() < n/8 {
			t.Fatalf("pulls: %d by Pull, %d by PullAsync; want none by Pull, at least %d by PullAsync", ab.plain.Load(), ab.async.Load(), n/8)
		}
		// The queues' goroutines start a chain each, and again after a wait (the
		// orderly queues' first lock); the callbacks send the rest.
		if async, chained := ab.async.Load(), ab.chained.Load(); chained < async-8 {
			t.Fatalf("%d of %d async pulls sent from a callback, want all but a few", chained, async)
		}
		for id := range int32(4) {
			q := brokerQueue("T", id)
			max, err := ab.Broker.MaxOffset(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if got := storedOffset(t, ab.Broker, "g", q); got != max {
				t.Fatalf("queue %d: stored offset %d, want %d", id, got, max)
			}
		}
	})
}

// A PullAsync that would block makes the queue's goroutine pull with Pull; a chained pull
// that fails waits PullErrorDelay, and the chain goes on.
func TestPullChainFallsBackAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ab := &asyncBroker{Broker: testBroker(t, nil)}
		t.Cleanup(ab.wg.Wait) // after the consumer's shutdown (cleanups run last first)
		createTopic(t, ab.Broker, "T", 1)
		sendN(t, ab.Broker, "T", "a", 50, nil)
		ab.block.Store(true)
		c := newCounter()
		o := bubbleOptions(t, "g")
		o.PullBatchSize = 8
		o.PullErrorDelay = 100 * time.Millisecond
		o.BrokerSuspend = time.Second
		o.Model = mq.Broadcasting // one queue to pull: no retry topic
		pc := startConsumer(t, ab, o, "T", c.listener())
		waitFor(t, time.Minute, "the first messages", func() bool { return c.distinct() == 50 })
		if ab.plain.Load() == 0 || ab.async.Load() != 0 {
			t.Fatalf("while PullAsync would block: %d by Pull, %d by PullAsync", ab.plain.Load(), ab.async.Load())
		}
		ab.failAsync.Store(3)
		ab.block.Store(false)
		// The parked Pull ends within its second; then three chained pulls fail, each
		// followed by PullErrorDelay, and the fourth parks.
		start := time.Now()
		waitFor(t, time.Minute, "the injected failures", func() bool { return ab.failAsync.Load() < 0 })
		if el := time.Since(start); el < 3*o.PullErrorDelay {
			t.Fatalf("three failed pulls took %v, less than three PullErrorDelays", el)
		}
		synctest.Wait()
		start = time.Now()
		sendN(t, ab.Broker, "T", "b", 50, nil)
		waitFor(t, time.Minute, "the messages sent after", func() bool { return c.distinct() == 100 })
		if el := time.Since(start); el >= o.PullErrorDelay {
			t.Fatalf("messages sent after the failures consumed %v later: no pull was parked", el)
		}
		shutdown(t, pc)
		if c.total() != 100 {
			t.Fatalf("%d deliveries of 100 messages", c.total())
		}
	})
}
