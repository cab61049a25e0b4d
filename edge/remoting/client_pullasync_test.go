package remoting_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// pulled is what a PullAsync callback got.
type pulled struct {
	res mq.PullResult
	err error
}

// pullAsync calls c.PullAsync and returns the channel its callback answers on.
func pullAsync(t *testing.T, c *remoting.Client, ctx context.Context, req mq.PullRequest) <-chan pulled {
	t.Helper()
	return pullCalls(t, c, ctx, req, 2) // 2: a second call of the callback shows as a test failure
}

// pullCalls calls c.PullAsync and returns the channel, of capacity n, that every call of its
// callback goes to.
func pullCalls(t *testing.T, c *remoting.Client, ctx context.Context, req mq.PullRequest, n int) <-chan pulled {
	t.Helper()
	ch := make(chan pulled, n)
	if err := c.PullAsync(ctx, req, func(res mq.PullResult, err error) { ch <- pulled{res, err} }); err != nil {
		t.Fatalf("PullAsync: %v", err)
	}
	return ch
}

// await returns the one answer on ch.
func await(t *testing.T, ch <-chan pulled, within time.Duration) pulled {
	t.Helper()
	select {
	case p := <-ch:
		select {
		case again := <-ch:
			t.Fatalf("callback called twice: %+v, then %+v", p, again)
		case <-time.After(50 * time.Millisecond):
		}
		return p
	case <-time.After(within):
		t.Fatalf("no callback within %v", within)
	}
	return pulled{}
}

// TestClientPullAsync: PullAsync answers as Pull does (found, filtered, nothing new,
// offset illegal, a broker error), holds a suspended pull until a message comes, ends one
// whose ctx ends, and never waits for the network: before a route and a connection exist it
// says mq.ErrWouldBlock. Its refusals never call the callback.
func TestClientPullAsync(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}

	never := func(mq.PullResult, error) { t.Error("callback of a refused PullAsync called") }
	if err := c.PullAsync(ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*"}, never); !errors.Is(err, mq.ErrWouldBlock) {
		t.Fatalf("PullAsync before any route: %v, want %v", err, mq.ErrWouldBlock)
	}
	if err := c.PullAsync(ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*"}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("PullAsync without a callback: %v, want %v", err, mq.ErrInvalidArgument)
	}
	if _, err := c.Route(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []mq.PullRequest{
		{Group: "g", Queue: q, Offset: -1, Filter: "*"},
		{Group: "g", Queue: q, MaxMsgs: 5000, Filter: "*"},
		{Group: "g", Queue: q, Filter: "a || || b"},
	} {
		if err := c.PullAsync(ctx, bad, never); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Fatalf("PullAsync(%+v): %v, want %v", bad, err, mq.ErrInvalidArgument)
		}
	}
	var nilCtx context.Context
	if err := c.PullAsync(nilCtx, mq.PullRequest{Group: "g", Queue: q, Filter: "*"}, never); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("PullAsync with a nil ctx: %v, want %v", err, mq.ErrInvalidArgument)
	}

	// Held until a message comes.
	start := time.Now()
	held := pullAsync(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*", Suspend: true, MaxWait: 10 * time.Second})
	time.Sleep(300 * time.Millisecond) // the pull parks at the broker meanwhile
	for _, tag := range []string{"A", "B"} {
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Tags: tag, Body: []byte("body " + tag), Properties: map[string]string{"x": tag}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	p := await(t, held, 10*time.Second)
	if p.err != nil || p.res.Status != mq.PullFound || string(p.res.Messages[0].Body) != "body A" || p.res.Messages[0].BrokerName != "edgemq" {
		t.Fatalf("held pull = %+v, %v", p.res, p.err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("held pull answered after %v, before the message was sent", el)
	}

	// The same answers as Pull.
	for _, req := range []mq.PullRequest{
		{Group: "g", Queue: q, Filter: "*"},
		{Group: "g", Queue: q, Filter: "B"},
		{Group: "g", Queue: q, Offset: 2, Filter: "*"},
		{Group: "g", Queue: q, Offset: 9, Filter: "*"},
	} {
		want, wantErr := c.Pull(ctx, req)
		p := await(t, pullAsync(t, c, ctx, req), 10*time.Second)
		if (p.err != nil) != (wantErr != nil) || p.res.Status != want.Status || p.res.NextBeginOffset != want.NextBeginOffset ||
			len(p.res.Messages) != len(want.Messages) {
			t.Fatalf("PullAsync(%+v) = %+v, %v; Pull = %+v, %v", req, p.res, p.err, want, wantErr)
		}
		for i := range want.Messages {
			g, w := p.res.Messages[i], want.Messages[i]
			if string(g.Body) != string(w.Body) || g.Tags != w.Tags || g.Properties["x"] != w.Properties["x"] || g.QueueOffset != w.QueueOffset {
				t.Fatalf("PullAsync(%+v) message %d = %+v, Pull's %+v", req, i, g, w)
			}
		}
	}
	p = await(t, pullAsync(t, c, ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 7}, Filter: "*"}), 10*time.Second)
	if p.err == nil {
		t.Fatalf("pull of a queue the topic does not have = %+v, want an error", p.res)
	}

	// A held pull whose ctx ends is answered with ctx's error at once.
	cctx, cancel := context.WithCancel(ctx)
	ended := pullAsync(t, c, cctx, mq.PullRequest{Group: "g", Queue: q, Offset: 2, Filter: "*", Suspend: true, MaxWait: 20 * time.Second})
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	cancel()
	if p := await(t, ended, 5*time.Second); !errors.Is(p.err, context.Canceled) {
		t.Fatalf("pull whose ctx ended = %+v, %v; want %v", p.res, p.err, context.Canceled)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("pull whose ctx ended answered after %v", el)
	}
	// An ended ctx: the pull is answered with its error, not sent to wait.
	if p := await(t, pullAsync(t, c, cctx, mq.PullRequest{Group: "g", Queue: q, Offset: 2, Filter: "*", Suspend: true, MaxWait: 20 * time.Second}), 5*time.Second); !errors.Is(p.err, context.Canceled) {
		t.Fatalf("pull with an ended ctx = %+v, %v; want %v", p.res, p.err, context.Canceled)
	}
	// The connection goes on.
	if _, err := c.MaxOffset(ctx, q); err != nil {
		t.Fatalf("MaxOffset after an ended pull: %v", err)
	}
}

// TestClientPullAsyncChain: pulls sent from PullAsync's callback (on the connection's
// reader) read a queue to its end, one pull a message, and a parked one is answered when
// the connection is lost.
func TestClientPullAsyncChain(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, &remoting.Options{ReconnectMin: time.Hour, ReconnectMax: time.Hour})
	ctx := ctxT(t, 30*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}
	const n = 200
	for i := range n {
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte{byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Route(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MaxOffset(ctx, q); err != nil { // the broker's connection open
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []byte
	)
	end := make(chan error, 1)
	var next func(mq.PullResult, error)
	pull := func(off int64) {
		req := mq.PullRequest{Group: "g", Queue: q, Offset: off, MaxMsgs: 1, Filter: "*", Suspend: true, MaxWait: 20 * time.Second}
		if err := c.PullAsync(ctx, req, next); err != nil {
			end <- err
		}
	}
	next = func(res mq.PullResult, err error) {
		if err != nil {
			end <- err
			return
		}
		mu.Lock()
		for _, m := range res.Messages {
			got = append(got, m.Body...)
		}
		mu.Unlock()
		pull(res.NextBeginOffset) // parks at the end
	}
	pull(0)
	waitFor(t, 10*time.Second, "the chain to read every message", func() bool {
		select {
		case err := <-end:
			t.Fatalf("chain ended: %v", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	tb.stop() // answers the parked pull or cuts it
	select {
	case err := <-end:
		if err == nil {
			t.Fatal("nil error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked pull of a lost connection was not answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("chain read %d messages, want %d", len(got), n)
	}
	for i, b := range got {
		if b != byte(i) {
			t.Fatalf("message %d has body %d", i, b)
		}
	}
}
