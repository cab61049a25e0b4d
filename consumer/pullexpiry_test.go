package consumer

import (
	"context"
	"github.com/edgemq/edgemq/edge/mq"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// hangFirstPull is a Broker whose first pull hangs until its ctx ends, as a pull lost on a
// dead connection would.
type hangFirstPull struct {
	*edge.Broker
	once sync.Once
	hung atomic.Bool
}

func (h *hangFirstPull) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	first := false
	if req.Queue.Topic == "Stuck" {
		h.once.Do(func() { first = true })
	}
	if first {
		h.hung.Store(true)
		<-ctx.Done()
		return mq.PullResult{}, ctx.Err()
	}
	return h.Broker.Pull(ctx, req)
}

// TestPullExpiryRestartsStuckQueue: a queue whose pull loop has not run for PullExpiry
// (120 s) is dropped and started again by the next rebalance, so a hung pull cannot stall
// it for good.
func TestPullExpiryRestartsStuckQueue(t *testing.T) {
	synctest.Test(t, testPullExpiryRestartsStuckQueue)
}

func testPullExpiryRestartsStuckQueue(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "Stuck", 1)
	hb := &hangFirstPull{Broker: b}
	var got atomic.Int64
	startConsumer(t, hb, bubbleOptions(t, "g-expiry"), "Stuck", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		got.Add(int64(len(msgs)))
		return ConsumeSuccess, nil
	}))
	time.Sleep(time.Second)
	if !hb.hung.Load() {
		t.Fatal("the first pull did not hang")
	}
	sendN(t, b, "Stuck", "m", 5, mq.QueueIndex(0))
	time.Sleep(DefaultOptions.PullExpiry - 2*time.Second)
	if n := got.Load(); n != 0 {
		t.Fatalf("%d messages consumed before PullExpiry, with the only pull hung", n)
	}
	time.Sleep(DefaultOptions.RebalanceInterval + 2*time.Second) // the first rebalance after PullExpiry
	if n := got.Load(); n != 5 {
		t.Fatalf("%d messages consumed after the stuck queue was restarted, want 5", n)
	}
}
