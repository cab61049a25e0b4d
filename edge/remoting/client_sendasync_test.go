package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// asyncSends records the results of async sends by their unique ids: each done must come
// once, with its own send's id.
type asyncSends struct {
	t       *testing.T
	mu      sync.Mutex
	results map[string]mq.SendResult
	errs    map[string]error
	calls   map[string]int
	pending sync.WaitGroup
}

func newAsyncSends(t *testing.T) *asyncSends {
	return &asyncSends{t: t, results: map[string]mq.SendResult{}, errs: map[string]error{}, calls: map[string]int{}}
}

// send sends body with unique id uniq by SendAsyncUniq; an error returned counts as its
// result.
func (s *asyncSends) send(ctx context.Context, c *remoting.Client, topic, uniq string) {
	s.pending.Add(1)
	err := c.SendAsyncUniq(ctx, &mq.Message{Topic: topic, Body: []byte(uniq)}, nil, uniq, func(res mq.SendResult, err error) {
		s.done(uniq, res, err)
	})
	if err != nil {
		s.done(uniq, mq.SendResult{}, err)
	}
}

func (s *asyncSends) done(uniq string, res mq.SendResult, err error) {
	defer s.pending.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[uniq]++; s.calls[uniq] > 1 {
		s.t.Errorf("send %s: done called %d times", uniq, s.calls[uniq])
		return
	}
	if err != nil {
		s.errs[uniq] = err
		return
	}
	if res.UniqID != uniq {
		s.t.Errorf("send %s: result of another send, id %q", uniq, res.UniqID)
	}
	s.results[uniq] = res
}

// stored returns how many sends were stored so far.
func (s *asyncSends) stored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.results)
}

// wait waits for every done, up to d.
func (s *asyncSends) wait(d time.Duration) {
	s.t.Helper()
	ch := make(chan struct{})
	go func() { s.pending.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
		s.t.Fatalf("async sends not all answered within %v", d)
	}
}

// TestClientSendAsync: every async send's done comes exactly once and with its own
// result, whether the broker answers, its answer comes too late, or the connection is lost
// while sends are being issued (their pooled state must never serve two sends at once:
// run it under -race); and stored sends sit on distinct offsets with their own bodies.
func TestClientSendAsync(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 2)
	px := proxied(t, tb)
	c := dial(t, px.Addr(), &remoting.Options{RequestTimeout: time.Minute, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	ctx := ctxT(t, 2*time.Minute)
	if _, err := c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("route")}, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("answered", func(t *testing.T) {
		s := newAsyncSends(t)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 250 {
					s.send(ctx, c, "T", fmt.Sprintf("A-%d-%d", g, i))
				}
			})
		}
		wg.Wait()
		s.wait(30 * time.Second)
		if len(s.errs) > 0 || len(s.results) != 2000 {
			t.Fatalf("%d stored, errors %v", len(s.results), s.errs)
		}
		at := map[mq.MessageQueue]map[int64]bool{}
		for uniq, r := range s.results {
			if at[r.Queue] == nil {
				at[r.Queue] = map[int64]bool{}
			}
			if at[r.Queue][r.QueueOffset] {
				t.Fatalf("two sends at %v offset %d", r.Queue, r.QueueOffset)
			}
			at[r.Queue][r.QueueOffset] = true
			pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: r.Queue, Offset: r.QueueOffset, MaxMsgs: 1, Filter: "*"})
			if err != nil || len(pr.Messages) != 1 || string(pr.Messages[0].Body) != uniq || pr.Messages[0].MsgID() != uniq {
				t.Fatalf("send %s stored at %v offset %d: %+v, %v", uniq, r.Queue, r.QueueOffset, pr, err)
			}
		}
	})

	t.Run("timed out", func(t *testing.T) {
		c := dial(t, px.Addr(), &remoting.Options{RequestTimeout: 300 * time.Millisecond})
		if _, err := c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("route")}, nil); err != nil {
			t.Fatal(err)
		}
		px.Stall(2 * time.Second)
		s := newAsyncSends(t)
		for i := range 50 {
			s.send(ctx, c, "T", fmt.Sprintf("S-%d", i))
		}
		s.wait(10 * time.Second)
		px.Stall(0)
		for uniq, err := range s.errs {
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fmt.Sprintf("request %d to", remoting.SendMessageV2)) {
				t.Fatalf("send %s over a stalled link: %v; want its request's deadline", uniq, err)
			}
		}
		if len(s.errs) != 50 {
			t.Fatalf("%d of 50 sends over a stalled link timed out; results %v", len(s.errs), s.results)
		}
		// The late answers find no call; the connection goes on.
		waitFor(t, 10*time.Second, "a send after the stall", func() bool {
			_, err := c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("after")}, nil)
			return err == nil
		})
	})

	t.Run("connection lost", func(t *testing.T) {
		s := newAsyncSends(t)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					s.send(ctx, c, "T", fmt.Sprintf("L-%d-%d", g, i))
					if i%64 == 63 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		for range 10 {
			// Each cut after some sends were stored since the last one (20 ms at least): on
			// a slow machine the client may take longer than that to reconnect.
			before := s.stored()
			time.Sleep(20 * time.Millisecond)
			waitFor(t, 10*time.Second, "sends stored between cuts", func() bool { return s.stored() > before })
			px.Cut()
		}
		stop.Store(true)
		wg.Wait()
		s.wait(30 * time.Second)
		if len(s.results) == 0 || len(s.errs) == 0 {
			t.Fatalf("%d sends stored, %d failed: want both across the cuts", len(s.results), len(s.errs))
		}
		for uniq, err := range s.errs {
			if !errors.Is(err, mq.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("send %s across a cut: %v", uniq, err)
			}
		}
		t.Logf("%d sends stored, %d failed across 10 cuts", len(s.results), len(s.errs))
	})
}

// TestClientSendAsyncRefusals: a nil context, message or done function and an unknown
// topic's write queues are errors, never a panic, and a refused send calls no done.
func TestClientSendAsyncRefusals(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)
	called := func(mq.SendResult, error) { t.Error("done called for a refused send") }
	m := &mq.Message{Topic: "T", Body: []byte("x")}
	if err := c.SendAsyncUniq(nil, m, nil, "u", called); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("SendAsyncUniq(nil ctx) = %v", err)
	}
	if err := c.SendAsyncUniq(ctx, nil, nil, "u", called); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("SendAsyncUniq(nil message) = %v", err)
	}
	if err := c.SendAsyncUniq(ctx, m, nil, "u", nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("SendAsyncUniq(nil done) = %v", err)
	}
	if qs, err := c.AppendWriteQueues(nil, nil, "Unknown"); err == nil || len(qs) != 0 {
		t.Fatalf("AppendWriteQueues(nil ctx) = %v, %v", qs, err)
	}
	qs, err := c.AppendWriteQueues(ctx, make([]mq.MessageQueue, 1, 4), "T")
	if err != nil || len(qs) != 2 || qs[1].Topic != "T" {
		t.Fatalf("AppendWriteQueues = %v, %v; want the one given and the topic's queue", qs, err)
	}
}
