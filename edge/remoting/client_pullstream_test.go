package remoting_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// streamCalls calls c.PullAsync with req and returns the channel every call of its
// callback goes to.
func streamCalls(t *testing.T, c *remoting.Client, ctx context.Context, req mq.PullRequest) <-chan pulled {
	t.Helper()
	return pullCalls(t, c, ctx, req, 64)
}

// next returns the next call on ch.
func next(t *testing.T, ch <-chan pulled, within time.Duration) pulled {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(within):
		t.Fatalf("no callback within %v", within)
	}
	return pulled{}
}

// quiet fails t if ch gets a call within d.
func quiet(t *testing.T, ch <-chan pulled, d time.Duration, after string) {
	t.Helper()
	select {
	case p := <-ch:
		t.Fatalf("callback called again after %s: %+v, %v", after, p.res, p.err)
	case <-time.After(d):
	}
}

// TestClientPullStream: a suspended PullAsync with PushMsgs streams against edgemq serve:
// its callback gets each arrival's messages, with More, without another pull, from where
// the last answer ended; the answer that spends the budget of messages (or of body bytes),
// the hold that runs out, or the ctx that ends, is the last, without More, and nothing
// comes after it. Each answer restarts the request's timeout. Pull, which cannot stream,
// is answered once.
func TestClientPullStream(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	// A timeout of the hold plus 300 ms: a stream answered every 150 ms for 2 s outlives it.
	c := dial(t, tb.addr, &remoting.Options{PullTimeoutMargin: 300 * time.Millisecond})
	ctx := ctxT(t, 60*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}
	if _, err := c.Route(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MaxOffset(ctx, q); err != nil { // the broker's connection open
		t.Fatal(err)
	}
	sent := int64(0)
	send := func(body string) {
		t.Helper()
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	// check reads the next answer: n messages from offset from, the last at sent-1 when
	// the answer has any, with more as its More.
	check := func(ch <-chan pulled, from int64, n int, more bool) {
		t.Helper()
		p := next(t, ch, 10*time.Second)
		if p.err != nil || p.res.Status != mq.PullFound || len(p.res.Messages) != n || p.res.More != more ||
			p.res.Messages[0].QueueOffset != from || p.res.NextBeginOffset != from+int64(n) {
			t.Fatalf("answer = %+v, %v; want %d messages from %d, More %v", p.res, p.err, n, from, more)
		}
	}

	// A budget of 5 messages, batches of 2: four arrivals one by one, then three at once,
	// of which the budget's last one comes, and the stream ends.
	stream := streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*", MaxMsgs: 2, Suspend: true,
		MaxWait: 5 * time.Second, PushMsgs: 5})
	for i := range 4 {
		time.Sleep(20 * time.Millisecond) // parked again meanwhile
		send("a")
		check(stream, int64(i), 1, true)
	}
	send("b")
	send("b")
	send("b")
	check(stream, 4, 1, false)
	quiet(t, stream, 300*time.Millisecond, "the budget was spent")

	// A budget of 10 body bytes: 6 bytes, then 6 more, which spend it.
	stream = streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Offset: sent, Filter: "*", Suspend: true,
		MaxWait: 5 * time.Second, PushMsgs: 100, PushBytes: 10})
	for _, more := range []bool{true, false} {
		time.Sleep(20 * time.Millisecond)
		send("sixsix")
		check(stream, sent-1, 1, more)
	}
	quiet(t, stream, 300*time.Millisecond, "the budget of bytes was spent")

	// Answered every 150 ms for 2 s, past the request's timeout (hold 1 s + 300 ms), then
	// idle for its hold: the last answer says nothing new.
	stream = streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Offset: sent, Filter: "*", Suspend: true,
		MaxWait: time.Second, PushMsgs: 100})
	for range 14 {
		time.Sleep(150 * time.Millisecond)
		send("c")
		check(stream, sent-1, 1, true)
	}
	start := time.Now()
	if p := next(t, stream, 10*time.Second); p.err != nil || p.res.Status != mq.PullNoNewMsg || p.res.More || p.res.NextBeginOffset != sent {
		t.Fatalf("answer of an idle stream = %+v, %v; want nothing new at %d", p.res, p.err, sent)
	}
	if el := time.Since(start); el < 800*time.Millisecond {
		t.Fatalf("idle stream ended after %v, before its hold of 1 s", el)
	}
	quiet(t, stream, 300*time.Millisecond, "its hold ran out")

	// A stream whose ctx ends gets ctx's error, and nothing of the arrivals after.
	cctx, cancel := context.WithCancel(ctx)
	stream = streamCalls(t, c, cctx, mq.PullRequest{Group: "g", Queue: q, Offset: sent, Filter: "*", Suspend: true,
		MaxWait: 5 * time.Second, PushMsgs: 100})
	time.Sleep(20 * time.Millisecond)
	send("d")
	check(stream, sent-1, 1, true)
	cancel()
	if p := next(t, stream, 5*time.Second); !errors.Is(p.err, context.Canceled) {
		t.Fatalf("stream whose ctx ended = %+v, %v; want %v", p.res, p.err, context.Canceled)
	}
	send("e")
	quiet(t, stream, 300*time.Millisecond, "its ctx ended")

	// Pull cannot stream: one answer.
	res, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Offset: sent - 1, Filter: "*", Suspend: true,
		MaxWait: 5 * time.Second, PushMsgs: 100})
	if err != nil || len(res.Messages) != 1 || res.More {
		t.Fatalf("Pull with PushMsgs = %+v, %v; want one message, no More", res, err)
	}
	// Nor does a pull that is not suspended.
	stream = streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Offset: sent - 1, Filter: "*", PushMsgs: 100})
	check(stream, sent-1, 1, false)
	send("f")
	quiet(t, stream, 300*time.Millisecond, "an answer to a pull that does not suspend")
}

// TestClientPullStreamOff: a server with NoStreamPulls answers a pull that asks to stream
// once, as Apache RocketMQ does.
func TestClientPullStreamOff(t *testing.T) {
	tb := startBrokerWith(t, "", "", brokerOptions(), server.Options{NoStreamPulls: true})
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}
	if _, err := c.Route(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MaxOffset(ctx, q); err != nil {
		t.Fatal(err)
	}
	stream := streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*", Suspend: true,
		MaxWait: 5 * time.Second, PushMsgs: 100})
	time.Sleep(20 * time.Millisecond)
	for range 2 {
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := next(t, stream, 10*time.Second); p.err != nil || p.res.Status != mq.PullFound || p.res.More {
		t.Fatalf("answer = %+v, %v; want messages, no More", p.res, p.err)
	}
	quiet(t, stream, 300*time.Millisecond, "the one answer of a server that does not stream")
}
