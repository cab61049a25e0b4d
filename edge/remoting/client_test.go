package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestClientBrokerMethods runs every method of the consumer's broker interface over TCP
// against an EdgeMQ server, and checks each against the broker behind it.
func TestClientBrokerMethods(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 2)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)

	// Route
	r, err := c.Route(ctx, "T")
	if err != nil {
		t.Fatalf("Route: %v", err)
	}
	qs := r.ReadQueues()
	if len(qs) != 2 || qs[0].BrokerName != "edgemq" || r.MasterAddr("edgemq") != tb.addr {
		t.Fatalf("Route = %+v, queues %v", r, qs)
	}
	if _, err := c.Route(ctx, "Nope"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("Route(Nope): %v, want %v", err, mq.ErrTopicNotExist)
	}

	// Send, to queue 1 by selector
	before := time.Now().Add(-time.Second)
	m := &mq.Message{Topic: "T", Tags: "A", Keys: "k1", Body: []byte("hello"), Properties: map[string]string{"x": "y"}}
	res, err := c.Send(ctx, m, mq.QueueIndex(1))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if res.Queue != qs[1] || res.QueueOffset != 0 || res.OffsetMsgID() == "" {
		t.Fatalf("Send = %+v", res)
	}
	if _, err := c.Send(ctx, &mq.Message{Topic: "T", Tags: "B", Body: []byte("second")}, mq.QueueIndex(1)); err != nil {
		t.Fatal(err)
	}

	// Pull: found, with filter, nothing new, offset illegal
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 0, Filter: "*"})
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if pr.Status != mq.PullFound || len(pr.Messages) != 2 || pr.NextBeginOffset != 2 || pr.MaxOffset != 2 {
		t.Fatalf("Pull = %+v", pr)
	}
	got := pr.Messages[0]
	if string(got.Body) != "hello" || got.Tags != "A" || got.Keys != "k1" || got.Properties["x"] != "y" ||
		got.BrokerName != "edgemq" || got.QueueID != 1 || got.CommitLogOffset != res.CommitLogOffset || got.OffsetMsgID() != res.OffsetMsgID() {
		t.Fatalf("pulled %+v, sent %+v", got, res)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 0, Filter: "B"})
	if err != nil || pr.Status != mq.PullFound || len(pr.Messages) != 1 || string(pr.Messages[0].Body) != "second" {
		t.Fatalf("Pull(B) = %+v, %v", pr, err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 2, Filter: "*"})
	if err != nil || pr.Status != mq.PullNoNewMsg || pr.NextBeginOffset != 2 {
		t.Fatalf("Pull(at max) = %+v, %v", pr, err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 9, Filter: "*"})
	if err != nil || pr.Status != mq.PullOffsetIllegal || pr.NextBeginOffset != 2 {
		t.Fatalf("Pull(past max) = %+v, %v", pr, err)
	}
	if _, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 0}); !errors.Is(err, mq.ErrSubscriptionNotExist) {
		t.Fatalf("Pull without filter or subscription: %v, want %v", err, mq.ErrSubscriptionNotExist)
	}

	// Offsets
	if _, err := c.QueryOffset(ctx, "g2", qs[0]); !errors.Is(err, mq.ErrOffsetNotFound) {
		t.Fatalf("QueryOffset of an empty queue: %v, want %v", err, mq.ErrOffsetNotFound)
	}
	if err := c.CommitOffset(ctx, "g", qs[1], 1); err != nil {
		t.Fatalf("CommitOffset: %v", err)
	}
	if off, err := c.QueryOffset(ctx, "g", qs[1]); err != nil || off != 1 {
		t.Fatalf("QueryOffset = %d, %v; want 1", off, err)
	}
	if off, _ := tb.b.QueryOffset(ctx, "g", mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 1}); off != 1 {
		t.Fatalf("the broker has offset %d, want 1", off)
	}
	if off, err := c.MaxOffset(ctx, qs[1]); err != nil || off != 2 {
		t.Fatalf("MaxOffset = %d, %v; want 2", off, err)
	}
	if off, err := c.MinOffset(ctx, qs[1]); err != nil || off != 0 {
		t.Fatalf("MinOffset = %d, %v; want 0", off, err)
	}
	if off, err := c.SearchOffset(ctx, qs[1], before); err != nil || off != 0 {
		t.Fatalf("SearchOffset(before) = %d, %v; want 0", off, err)
	}
	if off, err := c.SearchOffset(ctx, qs[1], time.Now().Add(time.Hour)); err != nil || off != 2 {
		t.Fatalf("SearchOffset(later) = %d, %v; want 2", off, err)
	}

	// Heartbeat, ConsumerIDs, a pull by the heartbeat's subscription, Unregister
	hb := mq.Heartbeat{ClientID: "c1", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: []mq.Subscription{{Topic: "T", Expression: "A"}}}}}
	if err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if ids, err := c.ConsumerIDs(ctx, "T", "g"); err != nil || !slices.Equal(ids, []string{"c1"}) {
		t.Fatalf("ConsumerIDs = %v, %v", ids, err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: qs[1], Offset: 0})
	if err != nil || pr.Status != mq.PullFound || len(pr.Messages) != 1 || pr.Messages[0].Tags != "A" {
		t.Fatalf("Pull by subscription = %+v, %v", pr, err)
	}
	if err := c.Unregister(ctx, "c1", "g"); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	if ids, err := c.ConsumerIDs(ctx, "T", "g"); err != nil || len(ids) != 0 {
		t.Fatalf("ConsumerIDs after Unregister = %v, %v", ids, err)
	}

	// Locks
	got2, err := c.LockQueues(ctx, "g", "c1", qs)
	if err != nil || !slices.Equal(got2, qs) {
		t.Fatalf("LockQueues = %v, %v", got2, err)
	}
	if got2, err := c.LockQueues(ctx, "g", "c2", qs); err != nil || len(got2) != 0 {
		t.Fatalf("LockQueues by another client = %v, %v; want none", got2, err)
	}
	if err := c.UnlockQueues(ctx, "g", "c1", qs[:1]); err != nil {
		t.Fatalf("UnlockQueues: %v", err)
	}
	if got2, err := c.LockQueues(ctx, "g", "c2", qs); err != nil || !slices.Equal(got2, qs[:1]) {
		t.Fatalf("LockQueues after unlock = %v, %v; want %v", got2, err, qs[:1])
	}

	// SendBack: the copy lands in the retry topic after delay level 1
	if err := c.SendBack(ctx, mq.SendBackRequest{Group: "g", BrokerName: got.BrokerName, CommitLogOffset: got.CommitLogOffset,
		DelayLevel: 1, OriginMsgID: got.MsgID()}); err != nil {
		t.Fatalf("SendBack: %v", err)
	}
	rq := mq.MessageQueue{Topic: mq.RetryTopic("g"), BrokerName: "edgemq", QueueID: 0}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: rq, Filter: "*", Suspend: true, MaxWait: 5 * time.Second})
	if err != nil || pr.Status != mq.PullFound || string(pr.Messages[0].Body) != "hello" || pr.Messages[0].ReconsumeTimes != 1 {
		t.Fatalf("Pull of the retry topic = %+v, %v", pr, err)
	}
	if err := c.SendBack(ctx, mq.SendBackRequest{Group: "g", BrokerName: "edgemq", CommitLogOffset: 1 << 40}); !errors.Is(err, mq.ErrMessageNotFound) && err == nil {
		t.Fatalf("SendBack of no message: %v", err)
	}

	// Send to the retry topic (a consumer's fallback), with a reconsume count
	rm := &mq.Message{Topic: mq.RetryTopic("g"), Body: []byte("fallback"),
		Properties: map[string]string{mq.PropertyReconsumeTime: "2", mq.PropertyRetryTopic: "T"}}
	rm.SetDelayLevel(1)
	if _, err := c.Send(ctx, rm, nil); err != nil {
		t.Fatalf("Send to the retry topic: %v", err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: rq, Offset: 1, Filter: "*", Suspend: true, MaxWait: 5 * time.Second})
	if err != nil || pr.Status != mq.PullFound || string(pr.Messages[0].Body) != "fallback" || pr.Messages[0].ReconsumeTimes != 2 {
		t.Fatalf("Pull of the fallback = %+v, %v", pr, err)
	}
}

// TestClientLongPoll: a suspended pull is held by the broker until a message arrives,
// or its hold ends; a cancelled ctx ends it at once.
func TestClientLongPoll(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, &remoting.Options{RequestTimeout: 200 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}

	// Held past RequestTimeout, woken by a send.
	type result struct {
		pr  mq.PullResult
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Filter: "*", Suspend: true, MaxWait: 10 * time.Second})
		done <- result{pr, err}
	}()
	time.Sleep(500 * time.Millisecond) // longer than RequestTimeout: the pull must still wait
	if _, err := tb.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("wake")}, nil); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.pr.Status != mq.PullFound || string(r.pr.Messages[0].Body) != "wake" {
		t.Fatalf("held pull = %+v, %v", r.pr, r.err)
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("pull answered after %v, before the message was sent", el)
	}

	// Not woken: answered at the end of its hold.
	start = time.Now()
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Offset: 1, Filter: "*", Suspend: true, MaxWait: time.Second})
	if err != nil || pr.Status != mq.PullNoNewMsg {
		t.Fatalf("pull at the end of its hold = %+v, %v", pr, err)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("held %v, want about 1 s", el)
	}

	// Cancelled while held.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	if _, err := c.Pull(cctx, mq.PullRequest{Group: "g", Queue: q, Offset: 1, Filter: "*", Suspend: true, MaxWait: 10 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v, want %v", err, context.Canceled)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("cancelled pull returned after %v", el)
	}
	// The connection goes on: the late answer to the cancelled pull is dropped.
	if _, err := c.MaxOffset(ctx, q); err != nil {
		t.Fatalf("MaxOffset after a cancelled pull: %v", err)
	}
}

// TestClientTimeouts: a peer that never answers fails requests at ctx's deadline, or at
// RequestTimeout when ctx has none.
func TestClientTimeouts(t *testing.T) {
	addr := silentListener(t)
	c := dial(t, addr, &remoting.Options{RequestTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Route(ctx, "T"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Route with a ctx deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Fatalf("Route returned after %v, past its ctx deadline", el)
	}
	start = time.Now()
	if _, err := c.Route(context.Background(), "T"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Route without a deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("Route returned after %v, want RequestTimeout (300 ms)", el)
	}
}

// TestClientUnreachable: Dial fails when no name server answers; a request to a broker
// that went away is mq.ErrUnavailable, and so is every call after Close.
func TestClientUnreachable(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	addr := tb.addr
	c := dial(t, addr, nil)
	ctx := ctxT(t, 10*time.Second)
	if _, err := c.MaxOffset(ctx, mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}); err != nil {
		t.Fatal(err)
	}
	tb.stop()
	if _, err := c.MaxOffset(ctx, mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("MaxOffset of a stopped broker: %v, want %v", err, mq.ErrUnavailable)
	}
	if _, err := remoting.Dial(ctx, addr, nil); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Dial of nothing: %v, want %v", err, mq.ErrUnavailable)
	}
	if _, err := remoting.Dial(ctx, "nohost", nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("Dial(nohost): %v, want %v", err, mq.ErrInvalidArgument)
	}
	c.Close()
	if _, err := c.Route(ctx, "T"); !errors.Is(err, remoting.ErrClientClosed) || !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Route after Close: %v", err)
	}
}

// TestClientReconnect: after the server restarts (a new server on the same data dir and
// port) the client connects again, and its heartbeats register it again at once.
func TestClientReconnect(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	dir, addr := tb.dir, tb.addr
	c := dial(t, addr, &remoting.Options{ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	hb := mq.Heartbeat{ClientID: "c1", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: []mq.Subscription{{Topic: "T", Expression: "*"}}}}}
	if err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	tb.stop()
	if _, err := c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("down")}, nil); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Send while down: %v, want %v", err, mq.ErrUnavailable)
	}
	tb2 := startBroker(t, dir, addr)
	var res mq.SendResult
	waitFor(t, 10*time.Second, "send after restart", func() bool {
		var err error
		res, err = c.Send(ctx, &mq.Message{Topic: "T", Body: []byte("after")}, nil)
		return err == nil
	})
	if res.QueueOffset != 1 {
		t.Fatalf("send after restart at offset %d, want 1", res.QueueOffset)
	}
	// Reconnected, the client heartbeat again: the restarted broker knows the member.
	waitFor(t, 5*time.Second, "member registered again", func() bool {
		ids, err := tb2.b.ConsumerIDs(ctx, "T", "g")
		return err == nil && slices.Equal(ids, []string{"c1"})
	})
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: res.Queue})
	if err != nil || pr.Status != mq.PullFound || len(pr.Messages) != 2 {
		t.Fatalf("Pull after restart = %+v, %v", pr, err)
	}
}

// TestClientNotify: a broker's NOTIFY_CONSUMER_IDS_CHANGED reaches the OnChange of the
// heartbeat of the group, when a member joins.
func TestClientNotify(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c1 := dial(t, tb.addr, nil)
	c2 := dial(t, tb.addr, nil)
	ctx := ctxT(t, 10*time.Second)
	var mu sync.Mutex
	var changes []string
	changed := make(chan struct{}, 16)
	sub := []mq.Subscription{{Topic: "T", Expression: "*"}}
	hb1 := mq.Heartbeat{ClientID: "c1", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: sub}, {Group: "other", Subscriptions: sub}},
		OnChange: func(g string) {
			mu.Lock()
			changes = append(changes, g)
			mu.Unlock()
			changed <- struct{}{}
		}}
	next := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no OnChange %s", what)
		}
	}
	if err := c1.Heartbeat(ctx, hb1); err != nil {
		t.Fatal(err)
	}
	// A member is told of its own joining too, once per group (as RocketMQ's broker does).
	next("after c1 joined")
	next("after c1 joined")
	if err := c2.Heartbeat(ctx, mq.Heartbeat{ClientID: "c2", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: sub}}}); err != nil {
		t.Fatal(err)
	}
	next("after another member joined")
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(changes[:2])
	if !slices.Equal(changes, []string{"g", "other", "g"}) {
		t.Fatalf("OnChange calls %v, want [g other g]", changes)
	}
}

// TestCodeError: each RocketMQ response code maps to its package mq error.
func TestCodeError(t *testing.T) {
	for _, tc := range []struct {
		code   int16
		remark string
		want   error
	}{
		{remoting.SystemError, "boom", nil},
		{remoting.SystemBusy, "", mq.ErrUnavailable},
		{remoting.RequestCodeNotSupported, "", errors.ErrUnsupported},
		{remoting.FlushDiskTimeout, "", mq.ErrUnavailable},
		{remoting.MessageIllegal, "the message body size over max value", mq.ErrMessageTooLarge},
		{remoting.MessageIllegal, "topic name is illegal", mq.ErrInvalidArgument},
		{remoting.ServiceNotAvailable, "", mq.ErrUnavailable},
		{remoting.NoPermission, "", mq.ErrNoPermission},
		{remoting.TopicNotExist, "", mq.ErrTopicNotExist},
		{remoting.QueryNotFound, "", mq.ErrOffsetNotFound},
		{remoting.SubscriptionParseFailed, "", mq.ErrInvalidArgument},
		{remoting.SubscriptionNotExist, "", mq.ErrSubscriptionNotExist},
		{remoting.SubscriptionNotLatest, "", mq.ErrSubscriptionNotExist},
		{remoting.SubscriptionGroupNotExist, "", mq.ErrGroupNotExist},
		{remoting.InvalidParameter, "", mq.ErrInvalidArgument},
		{remoting.FlowControl, "", mq.ErrUnavailable},
	} {
		err := remoting.CodeError("b:1", remoting.PullMessage, tc.code, tc.remark)
		var re *remoting.ResponseError
		if !errors.As(err, &re) || re.Code != tc.code || re.Remark != tc.remark || re.Addr != "b:1" {
			t.Errorf("code %d: %v is not its ResponseError", tc.code, err)
			continue
		}
		if got := errors.Unwrap(err); got != tc.want {
			t.Errorf("code %d (%q): unwraps to %v, want %v", tc.code, tc.remark, got, tc.want)
		}
	}
	if err := remoting.CodeError("b:1", remoting.PullMessage, remoting.Success, ""); err != nil {
		t.Errorf("Success: %v", err)
	}
}

// TestClientAnswerErrors: errors the server answers arrive as package mq's errors.
func TestClientAnswerErrors(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 10*time.Second)
	q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq"}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"route of an unknown topic", func() error { _, err := c.Route(ctx, "Nope"); return err }(), mq.ErrTopicNotExist},
		{"body too large", func() error {
			_, err := c.Send(ctx, &mq.Message{Topic: "T", Body: make([]byte, 100<<10)}, nil)
			return err
		}(), mq.ErrMessageTooLarge},
		{"queue out of range", func() error {
			_, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 7}, Filter: "*"})
			return err
		}(), mq.ErrInvalidArgument},
		{"negative offset", func() error {
			_, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Offset: -1, Filter: "*"})
			return err
		}(), mq.ErrInvalidArgument},
		{"bad group", func() error { return c.CommitOffset(ctx, "bad group!", q, 1) }(), mq.ErrInvalidArgument},
		{"offset not found", func() error { _, err := c.QueryOffset(ctx, "g", q); return err }(), mq.ErrOffsetNotFound},
		{"no subscription", func() error { _, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q}); return err }(), mq.ErrSubscriptionNotExist},
		{"selector out of range", func() error { _, err := c.Send(ctx, &mq.Message{Topic: "T"}, mq.QueueIndex(5)); return err }(), mq.ErrInvalidQueue},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

// TestClientConcurrentRequests: many requests in flight on one connection get their own
// answers.
func TestClientConcurrentRequests(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 4)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			q := mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: int32(i % 4)}
			res, err := c.Send(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "m%d", i)}, mq.QueueIndex(i%4))
			if err == nil && res.Queue != q {
				err = fmt.Errorf("message %d stored in %v, want %v", i, res.Queue, q)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range int32(4) {
		if n, err := c.MaxOffset(ctx, mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: i}); err != nil || n != 16 {
			t.Errorf("queue %d has %d messages, %v; want 16", i, n, err)
		}
	}
}

// TestClientMaintenance: routes are cached and fetched again every RouteRefresh, and
// heartbeats are repeated every HeartbeatInterval.
func TestClientMaintenance(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 2)
	c := dial(t, tb.addr, &remoting.Options{RouteRefresh: 300 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond})
	ctx := ctxT(t, 10*time.Second)
	if r, err := c.Route(ctx, "T"); err != nil || len(r.ReadQueues()) != 2 {
		t.Fatalf("Route = %+v, %v", r, err)
	}
	if err := tb.b.UpdateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Route(ctx, "T"); err != nil || len(r.ReadQueues()) != 2 {
		t.Fatalf("Route at once after the change = %+v, %v; want the cached route", r, err)
	}
	if qs, err := c.WriteQueues(ctx, "T"); err != nil || len(qs) != 2 || qs[1].Topic != "T" || qs[1].QueueID != 1 {
		t.Fatalf("WriteQueues at once after the change = %v, %v; want the cached route's 2", qs, err)
	}
	waitFor(t, 5*time.Second, "refreshed route", func() bool {
		r, err := c.Route(ctx, "T")
		return err == nil && len(r.ReadQueues()) == 4
	})
	if qs, err := c.WriteQueues(ctx, "T"); err != nil || len(qs) != 4 {
		t.Fatalf("WriteQueues after the refresh = %v, %v; want 4", qs, err)
	}
	if _, err := c.WriteQueues(ctx, "Nope"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("WriteQueues(Nope): %v, want %v", err, mq.ErrTopicNotExist)
	}

	hb := mq.Heartbeat{ClientID: "c1", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: []mq.Subscription{{Topic: "T", Expression: "*"}}}}}
	if err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	ms, err := tb.b.Members("g")
	if err != nil || len(ms) != 1 {
		t.Fatalf("Members = %v, %v", ms, err)
	}
	first := ms[0].LastHeartbeat
	waitFor(t, 5*time.Second, "a repeated heartbeat", func() bool {
		ms, err := tb.b.Members("g")
		return err == nil && len(ms) == 1 && ms[0].LastHeartbeat.After(first)
	})
}

// TestClientHeaderEncoding checks the encoding of the client's request headers as a
// listener reads them: ROCKETMQ's binary one by default, JSON with Options.JSONHeaders.
func TestClientHeaderEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
		want remoting.SerializeType
	}{{"default", false, remoting.RocketMQ}, {"json", true, remoting.JSON}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan *remoting.Command, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					close(got)
					return
				}
				defer nc.Close()
				cmd, err := remoting.NewReader(nc, 0).Read()
				if err != nil {
					t.Errorf("read the request: %v", err)
				}
				got <- cmd
			}()
			c := dial(t, ln.Addr().String(), &remoting.Options{JSONHeaders: tc.json, RequestTimeout: 200 * time.Millisecond})
			defer c.Close()
			c.Route(context.Background(), "T") // nobody answers: it times out
			cmd := <-got
			if cmd == nil {
				t.Fatal("no request read")
			}
			if cmd.Serialize != tc.want || cmd.Code != remoting.GetRouteInfoByTopic || cmd.Ext["topic"] != "T" {
				t.Errorf("request %d in %v with %v; want %d in %v with topic T", cmd.Code, cmd.Serialize, cmd.Ext, remoting.GetRouteInfoByTopic, tc.want)
			}
		})
	}
}
