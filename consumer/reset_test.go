package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// TestOffsetResetMovesRunningConsumer: when an admin resets a group's offsets, a running
// PushConsumer of the group moves to them (the broker tells it, in-process through the
// heartbeat's OnReset, over TCP with RESET_CONSUMER_CLIENT_OFFSET): it consumes the topic
// again from the first message, and its old positions are never committed over the reset
// ones, not by its periodic persist nor by a consume run that was going on.
func TestOffsetResetMovesRunningConsumer(t *testing.T) {
	overNet(t, true, func(t *testing.T) {
		for _, orderly := range []bool{false, true} {
			t.Run(map[bool]string{false: "concurrent", true: "orderly"}[orderly], func(t *testing.T) {
				testOffsetReset(t, orderly)
			})
		}
	})
}

func testOffsetReset(t *testing.T, orderly bool) {
	const n = 20
	b := testBroker(t, nil)
	createTopic(t, b, "R", 2)
	sendN(t, b, "R", "m", n, nil)
	queues := []int32{0, 1}
	ends := map[int32]int64{}
	for _, q := range queues {
		end, err := b.MaxOffset(context.Background(), brokerQueue("R", q))
		if err != nil || end == 0 {
			t.Fatalf("queue %d: max offset %d, %v", q, end, err)
		}
		ends[q] = end
	}
	c := newCounter()
	var hold atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { hold.Store(false); releaseOnce.Do(func() { close(release) }) }
	startConsumer(t, b, fastOptions(t, "rg"), "R", listenerOf(orderly, func(msgs []*Message) bool {
		c.add(msgs)
		if hold.Load() {
			<-release
		}
		return true
	}))
	t.Cleanup(unhold) // before the consumer's shutdown (cleanups run last first): a failed test must not leave the listener held
	committedAt := func(want func(q int32) int64) func() bool {
		return func() bool {
			for _, q := range queues {
				if storedOffset(t, b, "rg", brokerQueue("R", q)) != want(q) {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "the first pass consumed and committed", committedAt(func(q int32) int64 { return ends[q] }))

	// The listener now holds every message it gets: after the reset, the consumer may
	// commit nothing past the first message of each queue.
	hold.Store(true)
	if _, err := b.ResetOffsets("rg", "R", edge.ResetToFirst, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "messages delivered again after the reset", func() bool { return c.total() > n })
	// Long enough for the periodic persist (every 50 ms) and the rebalance (100 ms) to run
	// several times: a consumer that kept its old positions would have committed them.
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if !committedAt(func(int32) int64 { return 0 })() {
			offs := []int64{storedOffset(t, b, "rg", brokerQueue("R", 0)), storedOffset(t, b, "rg", brokerQueue("R", 1))}
			t.Fatalf("committed offsets %v after a reset to the first messages, with the listener holding them", offs)
		}
	}
	unhold()
	waitFor(t, 10*time.Second, "every message consumed again", func() bool {
		for i := range n {
			if c.get(fmt.Sprintf("m%d", i)) < 2 {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "the second pass committed", committedAt(func(q int32) int64 { return ends[q] }))
}
