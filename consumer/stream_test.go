package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// countingHandler is a slog.Handler that counts the records whose message holds sub.
type countingHandler struct {
	sub string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestStreamedPulls: over the network a concurrent consumer's queue streams its pull: a
// message every 20 ms for 2 s reaches the listener, each once, through a few pulls where
// an ordinary chain sends one per answer; and a stream answered all that time is a live
// pull, not one stuck past PullExpiry (1.5 s) that the rebalance restarts. With
// NoStreamPulls every answer is a pull of its own.
func TestStreamedPulls(t *testing.T) {
	overNet(t, true, func(t *testing.T) {
		if !isNet(t) {
			return // the in-process broker answers each pull once
		}
		for _, off := range []bool{false, true} {
			t.Run(fmt.Sprintf("NoStreamPulls=%v", off), func(t *testing.T) { testStreamedPulls(t, off) })
		}
	})
}

func testStreamedPulls(t *testing.T, off bool) {
	const n = 100
	b := testBroker(t, nil)
	createTopic(t, b, "S", 1)
	o := fastOptions(t, "g-stream")
	o.PullExpiry = 1500 * time.Millisecond
	o.NoStreamPulls = off
	var restarts atomic.Int64
	o.Logger = slog.New(countingHandler{sub: "not pulled for too long", n: &restarts})
	c := newCounter()
	pc := startConsumer(t, b, o, "S", ConcurrentListener(func(_ context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		c.add(msgs)
		return ConsumeSuccess, nil
	}))
	srv := serverOf(t, b)
	before := srv.Stats().Requests[remoting.PullMessage]
	for i := range n {
		time.Sleep(20 * time.Millisecond)
		sendN(t, b, "S", fmt.Sprintf("m%d-", i), 1, mq.QueueIndex(0))
	}
	waitFor(t, 10*time.Second, "every message consumed", func() bool { return c.distinct() == n })
	pulls := srv.Stats().Requests[remoting.PullMessage] - before
	if total := c.total(); total != n {
		t.Fatalf("%d deliveries of %d messages", total, n)
	}
	if r := restarts.Load(); r != 0 {
		t.Fatalf("the queue was restarted %d times as not pulled for PullExpiry", r)
	}
	if off && pulls < n {
		t.Fatalf("%d pulls for %d messages sent one at a time with NoStreamPulls: want one an answer", pulls, n)
	}
	if !off && pulls > n/10 {
		t.Fatalf("%d pulls for %d messages sent one at a time: the pull did not stream", pulls, n)
	}
	t.Logf("%d pulls for %d messages", pulls, n)
	// Its consumer's shutdown ends the stream parked at the broker (END_PULL_STREAM).
	if err := pc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended := func() bool { return srv.Stats().StreamsEnded > 0 }
	if off {
		time.Sleep(200 * time.Millisecond)
		if ended() {
			t.Fatal("a stream ended at the broker with NoStreamPulls")
		}
		return
	}
	waitFor(t, 5*time.Second, "the parked stream ended at the broker", ended)
}
