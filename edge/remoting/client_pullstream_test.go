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

// streamClient dials tb and readies the client for pulls of topic T's queue 0 (its route
// known, the broker's connection open), which it returns with a ctx of d.
func streamClient(t *testing.T, tb *testBroker, d time.Duration) (*remoting.Client, context.Context, mq.MessageQueue) {
	t.Helper()
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, d)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}
	if _, err := c.Route(ctx, "T"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MaxOffset(ctx, q); err != nil {
		t.Fatal(err)
	}
	return c, ctx, q
}

// heartbeatT sends c's heartbeat as client id, a consumer of group g on topic T.
func heartbeatT(t *testing.T, c *remoting.Client, ctx context.Context, id string) {
	t.Helper()
	hb := mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: []mq.Subscription{{Topic: "T", Expression: "*"}}}}}
	if err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
}

// dropParked sends req with PullAsync, lets it park for 50 ms, then ends its ctx, and
// checks that the callback got ctx's error.
func dropParked(t *testing.T, c *remoting.Client, ctx context.Context, req mq.PullRequest) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	stream := streamCalls(t, c, cctx, req)
	time.Sleep(50 * time.Millisecond)
	cancel()
	if p := next(t, stream, 5*time.Second); !errors.Is(p.err, context.Canceled) {
		t.Fatalf("pull whose ctx ended = %+v, %v; want %v", p.res, p.err, context.Canceled)
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
	c, ctx, q := streamClient(t, tb, 30*time.Second)
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

// TestClientPullStreamEnded: a streamed pull whose ctx ends is ended at the broker too
// (END_PULL_STREAM): the broker answers its parked pull at once instead of holding it, and
// streaming, until its budget or its hold runs out; so is one parked before its first
// answer, once the connection's broker has streamed. On a connection whose broker never
// streamed (Apache RocketMQ's does not know the code) nothing is sent.
func TestClientPullStreamEnded(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 2)
	c, ctx, q := streamClient(t, tb, 60*time.Second)
	send := func() {
		t.Helper()
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
	}
	// ended waits until the server counts want streams ended by their clients, and
	// reports how long that took.
	ended := func(want int64) time.Duration {
		t.Helper()
		start := time.Now()
		for tb.srv.Stats().StreamsEnded < want {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("streams ended by their clients = %d after 5 s, want %d", tb.srv.Stats().StreamsEnded, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	endRequests := func() int64 { return tb.srv.Stats().Requests[remoting.EndPullStream] }
	req := mq.PullRequest{Group: "g", Queue: q, Filter: "*", Suspend: true, MaxWait: 20 * time.Second, PushMsgs: 100}

	// A pull parked before any stream or heartbeat on this connection: its ctx's end sends
	// nothing, so the broker holds it on (the client does not know that the broker streams).
	dropParked(t, c, ctx, req)
	time.Sleep(100 * time.Millisecond)
	if n := endRequests(); n != 0 {
		t.Fatalf("END_PULL_STREAM sent %d times before the broker streamed a pull", n)
	}

	// A stream answered once, then dropped: ended at the broker at once.
	cctx, cancel := context.WithCancel(ctx)
	stream := streamCalls(t, c, cctx, req)
	time.Sleep(50 * time.Millisecond)
	send() // answers the first pull too (its answer dropped by the client)
	p := next(t, stream, 10*time.Second)
	if p.err != nil || p.res.Status != mq.PullFound || !p.res.More {
		t.Fatalf("answer = %+v, %v; want messages, More", p.res, p.err)
	}
	cancel()
	if p := next(t, stream, 5*time.Second); !errors.Is(p.err, context.Canceled) {
		t.Fatalf("stream whose ctx ended = %+v, %v; want %v", p.res, p.err, context.Canceled)
	}
	if d := ended(1); d > 2*time.Second {
		t.Fatalf("stream ended after %v", d)
	}
	if n := endRequests(); n != 1 {
		t.Fatalf("END_PULL_STREAM sent %d times, want 1", n)
	}

	// Now a pull parked before its first answer is ended too, on the other queue.
	req.Queue.QueueID = 1
	dropParked(t, c, ctx, req)
	if d := ended(2); d > 2*time.Second {
		t.Fatalf("parked pull ended after %v", d)
	}

	// A stream that ended with its last answer is not ended again.
	stream = streamCalls(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Offset: 1, Filter: "*", Suspend: true,
		MaxWait: 20 * time.Second, PushMsgs: 1})
	time.Sleep(50 * time.Millisecond)
	send()
	if p := next(t, stream, 10*time.Second); p.err != nil || p.res.Status != mq.PullFound || p.res.More {
		t.Fatalf("answer that spends the budget = %+v, %v; want messages, no More", p.res, p.err)
	}
	if n := endRequests(); n != 2 {
		t.Fatalf("END_PULL_STREAM sent %d times, want 2", n)
	}

	// A client whose heartbeat the broker answered "streams" ends a pull parked before any
	// answer on its connection.
	c2, _, _ := streamClient(t, tb, 60*time.Second)
	heartbeatT(t, c2, ctx, "c2")
	req.Offset = 0
	dropParked(t, c2, ctx, req)
	if d := ended(3); d > 2*time.Second {
		t.Fatalf("parked pull ended after %v", d)
	}
}

// TestClientPullStreamEndedOff: a server with NoStreamPulls does not say in its heartbeat
// replies that it streams, and its clients send it no END_PULL_STREAM.
func TestClientPullStreamEndedOff(t *testing.T) {
	tb := startBrokerWith(t, "", "", brokerOptions(), server.Options{NoStreamPulls: true})
	tb.createTopic("T", 1)
	c, ctx, q := streamClient(t, tb, 30*time.Second)
	heartbeatT(t, c, ctx, "c1")
	dropParked(t, c, ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*", Suspend: true, MaxWait: 20 * time.Second, PushMsgs: 100})
	time.Sleep(100 * time.Millisecond)
	if n := tb.srv.Stats().Requests[remoting.EndPullStream]; n != 0 {
		t.Fatalf("END_PULL_STREAM sent %d times to a server that does not stream", n)
	}
}
