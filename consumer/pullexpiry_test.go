package consumer

import (
	"context"
	"github.com/edgemq/edgemq/edge/mq"
	"sync"
	"sync/atomic"
	"testing"
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

// TestPullExpiryRestartsStuckQueue: a queue whose pull loop has not run for PullExpiry is
// dropped and started again by the next rebalance, so a hung pull cannot stall it for good.
func TestPullExpiryRestartsStuckQueue(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "Stuck", 1)
	hb := &hangFirstPull{Broker: b}
	var got atomic.Int64
	o := fastOptions(t, "g-expiry")
	o.PullExpiry = 300 * time.Millisecond
	startConsumer(t, hb, o, "Stuck", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		got.Add(int64(len(msgs)))
		return ConsumeSuccess, nil
	}))
	waitFor(t, 5*time.Second, "the first pull to hang", hb.hung.Load)
	sendN(t, b, "Stuck", "m", 5, mq.QueueIndex(0))
	waitFor(t, 10*time.Second, "messages consumed after the stuck queue was restarted", func() bool { return got.Load() >= 5 })
}
