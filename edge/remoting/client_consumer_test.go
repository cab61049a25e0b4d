package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
)

// consumerOptions are a test consumer's: short intervals.
func consumerOptions(t *testing.T, group string) *consumer.Options {
	return &consumer.Options{
		Group:             group,
		FromWhere:         consumer.ConsumeFromFirstOffset,
		BrokerSuspend:     2 * time.Second,
		PullErrorDelay:    100 * time.Millisecond,
		RebalanceInterval: 500 * time.Millisecond,
		PersistInterval:   200 * time.Millisecond,
		OffsetDir:         t.TempDir(),
		Logger:            testLogger(t),
	}
}

// TestPushConsumerConcurrentlyOverTCP: a PushConsumer over the client consumes what a
// producer over another client sent, a message that failed once comes back through the
// group's retry topic, and the offsets are committed at the broker.
func TestPushConsumerConcurrentlyOverTCP(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 4)
	cc := dial(t, tb.addr, nil)
	pcl := dial(t, tb.addr, nil)
	ctx := ctxT(t, 60*time.Second)

	const n = 100
	var mu sync.Mutex
	seen := map[string]int{}
	failedOnce := false
	all := make(chan struct{})
	pc, err := consumer.NewPushConsumer(cc, consumerOptions(t, "g"))
	if err != nil {
		t.Fatal(err)
	}
	err = pc.Subscribe("T", "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if string(m.Body) == "m7" && !failedOnce {
				failedOnce = true
				return consumer.ReconsumeLater, nil
			}
		}
		for _, m := range msgs {
			if m.Topic != "T" {
				t.Errorf("message %q delivered with topic %q", m.Body, m.Topic)
			}
			seen[string(m.Body)]++
		}
		if len(seen) == n {
			select {
			case <-all:
			default:
				close(all)
			}
		}
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	p, err := producer.New(pcl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "m%d", i)}, nil); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("consumed %d of %d messages", len(seen), n)
	}
	if err := pc.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	mu.Lock()
	if !failedOnce || seen["m7"] != 1 {
		t.Errorf("m7: failed once %v, consumed %d times after; want once", failedOnce, seen["m7"])
	}
	mu.Unlock()
	var committed int64
	for i := range int32(4) {
		off, err := tb.b.QueryOffset(ctx, "g", mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: i})
		if err != nil {
			t.Fatalf("offset of queue %d: %v", i, err)
		}
		committed += off
	}
	if committed != n {
		t.Errorf("committed offsets sum to %d, want %d", committed, n)
	}
	if ids, _ := tb.b.ConsumerIDs(ctx, "T", "g"); len(ids) != 0 {
		t.Errorf("members after Shutdown: %v", ids)
	}
}

// TestPushConsumerOrderlyOverTCP: an orderly PushConsumer over the client locks its queues
// at the broker and consumes each key's messages in the order they were sent with a
// sharding-key selector.
func TestPushConsumerOrderlyOverTCP(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("O", 4)
	cc := dial(t, tb.addr, nil)
	ctx := ctxT(t, 60*time.Second)

	const keys, perKey = 8, 25
	var mu sync.Mutex
	order := map[string][]int{}
	total := 0
	all := make(chan struct{})
	opts := consumerOptions(t, "og")
	opts.ClientID = "orderly-1"
	pc, err := consumer.NewPushConsumer(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = pc.Subscribe("O", "*", consumer.OrderlyListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.OrderlyContext) (consumer.ConsumeOrderlyStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seq, _ := strconv.Atoi(string(m.Body))
			order[m.Keys] = append(order[m.Keys], seq)
			total++
		}
		if total == keys*perKey {
			close(all)
		}
		return consumer.OrderlySuccess, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer pc.Shutdown(ctx)
	p, err := producer.New(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	queueOf := map[string]int32{}
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("order-%d", k)
			res, err := p.Send(ctx, &mq.Message{Topic: "O", Keys: key, Body: []byte(strconv.Itoa(i))}, mq.ShardingKey(key))
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if q, ok := queueOf[key]; ok && q != res.Queue.QueueID {
				t.Fatalf("key %s went to queues %d and %d", key, q, res.Queue.QueueID)
			}
			queueOf[key] = res.Queue.QueueID
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("consumed %d of %d messages", total, keys*perKey)
	}
	mu.Lock()
	for key, seqs := range order {
		if !slices.IsSorted(seqs) || len(seqs) != perKey {
			t.Errorf("key %s consumed as %v", key, seqs)
		}
	}
	mu.Unlock()
	// The consumer holds its queues' locks at the broker.
	qs := []mq.MessageQueue{{Topic: "O", BrokerName: "edgemq", QueueID: 0}}
	if got, err := tb.b.LockQueues(ctx, "og", "someone-else", qs); err != nil || len(got) != 0 {
		t.Errorf("another client locked %v (%v) of the orderly consumer's queues", got, err)
	}
}

// TestProducerOverTCP: sync, async, oneway and batch sends, selectors, delay levels and
// message ids through the client.
func TestProducerOverTCP(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 4)
	c := dial(t, tb.addr, &remoting.Options{CompressOver: 64})
	ctx := ctxT(t, 30*time.Second)
	p, err := producer.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// Sync, round robin over the four queues; ids as RocketMQ makes them.
	var queues []int32
	for i := range 4 {
		res, err := p.Send(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "s%d", i)}, nil)
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		queues = append(queues, res.Queue.QueueID)
		if len(res.UniqID) != 32 || res.MsgID() != res.UniqID || len(res.OffsetMsgID()) != 32 {
			t.Fatalf("ids: uniq %q, offset %q", res.UniqID, res.OffsetMsgID())
		}
		pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: res.Queue, Offset: res.QueueOffset, MaxMsgs: 1, Filter: "*"})
		if err != nil || len(pr.Messages) != 1 || pr.Messages[0].MsgID() != res.UniqID || pr.Messages[0].OffsetMsgID() != res.OffsetMsgID() {
			t.Fatalf("pulled %+v, %v; sent %+v", pr, err, res)
		}
	}
	slices.Sort(queues)
	if !slices.Equal(queues, []int32{0, 1, 2, 3}) {
		t.Fatalf("round robin used queues %v", queues)
	}

	// A compressed body comes back whole.
	big := make([]byte, 10<<10)
	for i := range big {
		big[i] = byte('a' + i%7)
	}
	res, err := p.Send(ctx, &mq.Message{Topic: "T", Body: big}, mq.QueueIndex(2))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: res.Queue, Offset: res.QueueOffset, MaxMsgs: 1, Filter: "*"})
	if err != nil || len(pr.Messages) != 1 || string(pr.Messages[0].Body) != string(big) {
		t.Fatalf("compressed body did not come back whole: %v", err)
	}

	// Async.
	const nAsync = 20
	var wg sync.WaitGroup
	wg.Add(nAsync)
	var amu sync.Mutex
	var asyncErrs []error
	ids := map[string]bool{}
	for i := range nAsync {
		err := p.SendAsync(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "a%d", i)}, nil, func(r mq.SendResult, err error) {
			amu.Lock()
			if err != nil {
				asyncErrs = append(asyncErrs, err)
			} else {
				ids[r.UniqID] = true
			}
			amu.Unlock()
			wg.Done()
		})
		if err != nil {
			t.Fatalf("SendAsync: %v", err)
		}
	}
	wg.Wait()
	if len(asyncErrs) != 0 || len(ids) != nAsync {
		t.Fatalf("async sends: errors %v, %d distinct ids", asyncErrs, len(ids))
	}

	// Oneway: nothing comes back, the message is stored.
	q3 := mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 3}
	before, _ := c.MaxOffset(ctx, q3)
	if err := p.SendOneway(ctx, &mq.Message{Topic: "T", Body: []byte("oneway")}, mq.QueueIndex(3)); err != nil {
		t.Fatalf("SendOneway: %v", err)
	}
	waitFor(t, 5*time.Second, "oneway message stored", func() bool {
		n, _ := c.MaxOffset(ctx, q3)
		return n == before+1
	})

	// Batch: consecutive offsets of one queue, each message its own id.
	batch := []*mq.Message{{Topic: "T", Tags: "x", Body: []byte("b0")}, {Topic: "T", Body: []byte("b1")}, {Topic: "T", Body: []byte("b2")}}
	rs, err := p.SendBatch(ctx, batch, mq.QueueIndex(1))
	if err != nil || len(rs) != 3 {
		t.Fatalf("SendBatch = %v, %v", rs, err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: rs[0].Queue, Offset: rs[0].QueueOffset, Filter: "*"})
	if err != nil || len(pr.Messages) < 3 {
		t.Fatalf("Pull of the batch = %+v, %v", pr, err)
	}
	for i, r := range rs {
		m := pr.Messages[i]
		if r.Queue.QueueID != 1 || r.QueueOffset != rs[0].QueueOffset+int64(i) || string(m.Body) != fmt.Sprintf("b%d", i) ||
			m.MsgID() != r.UniqID || m.OffsetMsgID() != r.OffsetMsgID() {
			t.Fatalf("batch message %d: result %+v, stored %+v", i, r, m)
		}
	}
	if pr.Messages[0].Tags != "x" {
		t.Fatalf("batch message 0 lost its tag: %+v", pr.Messages[0])
	}

	// Delay level 1: stored in the schedule topic first, then in its queue.
	dm := &mq.Message{Topic: "T", Body: []byte("later")}
	dm.SetDelayLevel(1)
	q0 := mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 0}
	before, _ = c.MaxOffset(ctx, q0)
	if _, err := p.Send(ctx, dm, mq.QueueIndex(0)); err != nil {
		t.Fatalf("delayed Send: %v", err)
	}
	pr, err = c.Pull(ctx, mq.PullRequest{Group: "g", Queue: q0, Offset: before, Filter: "*", Suspend: true, MaxWait: 5 * time.Second})
	if err != nil || pr.Status != mq.PullFound || string(pr.Messages[0].Body) != "later" {
		t.Fatalf("Pull of the delayed message = %+v, %v", pr, err)
	}

	// A topic without a route is created by its first send.
	if res, err := p.Send(ctx, &mq.Message{Topic: "NewTopic", Body: []byte("first")}, nil); err != nil || res.Queue.Topic != "NewTopic" {
		t.Fatalf("Send to a new topic = %+v, %v", res, err)
	}
	if r, err := c.Route(ctx, "NewTopic"); err != nil || len(r.WriteQueues()) == 0 {
		t.Fatalf("route of the created topic = %+v, %v", r, err)
	}
}

// TestProducerOverTCPIdsAndTimeouts: a producer's sync send over the client gives a
// message its unique id without changing it, keeps the id a message has, sends its
// properties, tags and keys whole; and Options.SendTimeout bounds an attempt the broker
// does not answer, though the client's own request timeout is far longer.
func TestProducerOverTCPIdsAndTimeouts(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	px := proxied(t, tb)
	c := dial(t, px.Addr(), &remoting.Options{RequestTimeout: time.Minute})
	ctx := ctxT(t, 30*time.Second)
	p, err := producer.New(c, &producer.Options{SendTimeout: 300 * time.Millisecond, RetryTimes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	props := map[string]string{"A": "1", "b": "two"}
	m := &mq.Message{Topic: "T", Tags: "tag", Keys: "k1 k2", Properties: props, Body: []byte("given an id")}
	res, err := p.Send(ctx, m, nil)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(res.UniqID) != 32 || len(m.Properties) != 2 || m.Properties[mq.PropertyUniqKey] != "" {
		t.Fatalf("result id %q; the message's properties after: %q", res.UniqID, m.Properties)
	}
	own := &mq.Message{Topic: "T", Properties: map[string]string{mq.PropertyUniqKey: "MY-OWN-ID"}, Body: []byte("own id")}
	res2, err := p.Send(ctx, own, nil)
	if err != nil || res2.UniqID != "MY-OWN-ID" {
		t.Fatalf("Send of a message with its id = %+v, %v", res2, err)
	}
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: res.Queue, Offset: res.QueueOffset, MaxMsgs: 2, Filter: "*"})
	if err != nil || len(pr.Messages) != 2 {
		t.Fatalf("Pull = %+v, %v", pr, err)
	}
	got := pr.Messages[0]
	if got.MsgID() != res.UniqID || got.Tags != "tag" || got.Keys != "k1 k2" || got.Properties["A"] != "1" ||
		got.Properties["b"] != "two" || string(got.Body) != "given an id" || pr.Messages[1].MsgID() != "MY-OWN-ID" {
		t.Fatalf("stored %+v and %+v; sent %+v (id %s)", got, pr.Messages[1], m, res.UniqID)
	}

	// The route is cached and the connection up: a stalled link leaves only the send
	// attempt's own bound.
	px.Stall(20 * time.Second)
	defer px.Stall(0)
	start := time.Now()
	_, err = p.Send(ctx, &mq.Message{Topic: "T", Body: []byte("unanswered")}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("Send over a stalled link = %v after %v (ctx %v); want the attempt's deadline", err, time.Since(start), ctx.Err())
	}
}

// TestProducerAsyncRetryOverTCP: an async send whose answer is lost is retried with the
// same unique id and the message as it was when SendAsync returned (the caller changed it
// after), and its done gets the retry's result once.
func TestProducerAsyncRetryOverTCP(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("T", 1)
	px := proxied(t, tb)
	c := dial(t, px.Addr(), &remoting.Options{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	p, err := producer.New(c, &producer.Options{RetryTimes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, &mq.Message{Topic: "T", Body: []byte("route")}, nil); err != nil {
		t.Fatal(err)
	}
	m := &mq.Message{Topic: "T", Properties: map[string]string{"A": "1"}, Body: []byte("retried")}
	type result struct {
		res mq.SendResult
		err error
	}
	done := make(chan result, 2)
	px.DropNextReply()
	if err := p.SendAsync(ctx, m, nil, func(res mq.SendResult, err error) { done <- result{res, err} }); err != nil {
		t.Fatal(err)
	}
	m.Properties["A"] = "changed after SendAsync"
	m.Topic = "Other"
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
	}
	if r.err != nil || len(r.res.UniqID) != 32 || r.res.QueueOffset != 2 {
		t.Fatalf("async send over a lost answer = %+v, %v; want the retry's result at offset 2", r.res, r.err)
	}
	if px.RepliesDropped() != 1 {
		t.Fatalf("%d answers dropped, want 1", px.RepliesDropped())
	}
	pr, err := c.Pull(ctx, mq.PullRequest{Group: "g", Queue: r.res.Queue, Offset: 1, MaxMsgs: 4, Filter: "*"})
	if err != nil || len(pr.Messages) != 2 {
		t.Fatalf("Pull = %+v, %v; want the first attempt and the retry", pr, err)
	}
	for _, got := range pr.Messages {
		if got.MsgID() != r.res.UniqID || got.Properties["A"] != "1" || string(got.Body) != "retried" {
			t.Fatalf("stored %+v (id %s); want id %s and the message as sent", got, got.MsgID(), r.res.UniqID)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("done called again: %+v, %v", r.res, r.err)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestPullConsumerOverTCP: the lite pull consumer over the client polls what was sent and
// commits it at the broker.
func TestPullConsumerOverTCP(t *testing.T) {
	tb := startBroker(t, "", "")
	tb.createTopic("L", 2)
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)
	for i := range 10 {
		if _, err := tb.b.Send(ctx, &mq.Message{Topic: "L", Body: fmt.Appendf(nil, "l%d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	lc, err := consumer.NewPullConsumer(c, consumerOptions(t, "lg"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Subscribe("L", "*"); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer lc.Shutdown(ctx)
	got := map[string]bool{}
	for len(got) < 10 {
		msgs, err := lc.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll after %d messages: %v", len(got), err)
		}
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
	}
	if err := lc.CommitSync(ctx); err != nil {
		t.Fatalf("CommitSync: %v", err)
	}
	var sum int64
	for i := range int32(2) {
		off, err := tb.b.QueryOffset(ctx, "lg", mq.MessageQueue{Topic: "L", BrokerName: "edgemq", QueueID: i})
		if err != nil {
			t.Fatal(err)
		}
		sum += off
	}
	if sum != 10 {
		t.Fatalf("committed offsets sum to %d, want 10", sum)
	}
}
