package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// interopOptions are the clients' options for INTEROP_NAMESRV's cluster: signed with
// INTEROP_ACCESS_KEY and INTEROP_SECRET_KEY when set (a cluster with an ACL).
func interopOptions() *remoting.Options {
	return &remoting.Options{Credentials: remoting.Credentials{
		AccessKey: os.Getenv("INTEROP_ACCESS_KEY"), SecretKey: os.Getenv("INTEROP_SECRET_KEY")}}
}

// TestInterop runs the producer and push consumers over the client against the cluster
// whose name server INTEROP_NAMESRV names (Apache RocketMQ, scripts/interop/rocketmq.sh,
// or edgemq serve); it is skipped without it. Topics and groups carry a run id, so that
// it reruns on the same cluster.
func TestInterop(t *testing.T) {
	ns := os.Getenv("INTEROP_NAMESRV")
	if ns == "" {
		t.Skip("INTEROP_NAMESRV not set")
	}
	run := strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)
	topic, otopic, group, ogroup := "EdgeClientT"+run, "EdgeClientO"+run, "edge_client_g"+run, "edge_client_og"+run
	ctx := ctxT(t, 3*time.Minute)
	pc := dial(t, ns, interopOptions()) // the producer's client
	cc := dial(t, ns, interopOptions()) // the concurrent consumer's
	oc := dial(t, ns, interopOptions()) // the orderly consumer's
	p, err := producer.New(pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// The first send creates the topic (from TBW102).
	first, err := p.Send(ctx, &mq.Message{Topic: topic, Tags: "A", Keys: "k0", Body: []byte("m0")}, nil)
	if err != nil {
		t.Fatalf("first send (auto-create): %v", err)
	}
	t.Logf("first send: %+v uniq %s offset id %s", first, first.UniqID, first.OffsetMsgID())
	waitFor(t, 60*time.Second, "route of the new topic", func() bool {
		_, err := pc.Route(ctx, topic)
		return err == nil
	})
	r, err := pc.Route(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("route: %+v", r)
	// Ordered topic: created by its first send too.
	if _, err := p.Send(ctx, &mq.Message{Topic: otopic, Keys: "warmup", Body: []byte("-1")}, mq.ShardingKey("warmup")); err != nil {
		t.Fatalf("first send to the ordered topic: %v", err)
	}
	waitFor(t, 60*time.Second, "route of the ordered topic", func() bool {
		_, err := pc.Route(ctx, otopic)
		return err == nil
	})

	want := map[string]bool{"m0": true}
	var wmu sync.Mutex
	add := func(s string) { wmu.Lock(); want[s] = true; wmu.Unlock() }

	// Concurrent push consumer; m3 fails once and must come back through the retry topic.
	var mu sync.Mutex
	seen := map[string]int{}
	failed := false
	opts := consumerOptions(t, group)
	opts.BrokerSuspend = 15 * time.Second
	pcons, err := consumer.NewPushConsumer(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := pcons.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if string(m.Body) == "m3" && !failed {
				failed = true
				return consumer.ReconsumeLater, nil
			}
		}
		for _, m := range msgs {
			if m.Topic != topic {
				t.Errorf("%q delivered with topic %q", m.Body, m.Topic)
			}
			seen[string(m.Body)]++
		}
		return consumer.ConsumeSuccess, nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := pcons.Start(); err != nil {
		t.Fatalf("push consumer Start: %v", err)
	}
	defer pcons.Shutdown(context.Background())

	// Sync, selector, compressed, delayed, async, oneway, batch.
	for i := 1; i < 10; i++ {
		b := fmt.Sprintf("m%d", i)
		add(b)
		if _, err := p.Send(ctx, &mq.Message{Topic: topic, Tags: "A", Body: []byte(b)}, nil); err != nil {
			t.Fatalf("send %s: %v", b, err)
		}
	}
	big := make([]byte, 10<<10)
	for i := range big {
		big[i] = byte('a' + i%13)
	}
	add(string(big))
	if _, err := p.Send(ctx, &mq.Message{Topic: topic, Body: big}, mq.QueueIndex(0)); err != nil {
		t.Fatalf("compressed send: %v", err)
	}
	dm := &mq.Message{Topic: topic, Body: []byte("delayed")}
	dm.SetDelayLevel(1)
	add("delayed")
	if _, err := p.Send(ctx, dm, nil); err != nil {
		t.Fatalf("delayed send: %v", err)
	}
	var awg sync.WaitGroup
	for i := range 5 {
		b := fmt.Sprintf("async%d", i)
		add(b)
		awg.Add(1)
		if err := p.SendAsync(ctx, &mq.Message{Topic: topic, Body: []byte(b)}, nil, func(_ mq.SendResult, err error) {
			if err != nil {
				t.Errorf("async send: %v", err)
			}
			awg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	awg.Wait()
	add("oneway")
	if err := p.SendOneway(ctx, &mq.Message{Topic: topic, Body: []byte("oneway")}, nil); err != nil {
		t.Fatal(err)
	}
	var batch []*mq.Message
	for i := range 5 {
		b := fmt.Sprintf("batch%d", i)
		add(b)
		batch = append(batch, &mq.Message{Topic: topic, Body: []byte(b)})
	}
	rs, err := p.SendBatch(ctx, batch, nil)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	for i, r := range rs {
		if r.Queue != rs[0].Queue || r.QueueOffset != rs[0].QueueOffset+int64(i) || len(r.UniqID) != 32 {
			t.Errorf("batch result %d: %+v", i, r)
		}
	}

	// Orderly consumer by sharding key.
	const keys, perKey = 4, 10
	var omu sync.Mutex
	order := map[string][]int{}
	oopts := consumerOptions(t, ogroup)
	oopts.BrokerSuspend = 15 * time.Second
	ocons, err := consumer.NewPushConsumer(oc, oopts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ocons.Subscribe(otopic, "*", consumer.OrderlyListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.OrderlyContext) (consumer.ConsumeOrderlyStatus, error) {
		omu.Lock()
		defer omu.Unlock()
		for _, m := range msgs {
			n, _ := strconv.Atoi(string(m.Body))
			order[m.Keys] = append(order[m.Keys], n)
		}
		return consumer.OrderlySuccess, nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := ocons.Start(); err != nil {
		t.Fatalf("orderly consumer Start: %v", err)
	}
	defer ocons.Shutdown(context.Background())
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("key%d", k)
			if _, err := p.Send(ctx, &mq.Message{Topic: otopic, Keys: key, Body: []byte(strconv.Itoa(i))}, mq.ShardingKey(key)); err != nil {
				t.Fatalf("ordered send: %v", err)
			}
		}
	}

	waitFor(t, 120*time.Second, "every message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		wmu.Lock()
		defer wmu.Unlock()
		for b := range want {
			if seen[b] == 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, 60*time.Second, "every ordered message consumed", func() bool {
		omu.Lock()
		defer omu.Unlock()
		for k := range keys {
			if len(order[fmt.Sprintf("key%d", k)]) < perKey {
				return false
			}
		}
		return true
	})
	mu.Lock()
	if !failed || seen["m3"] != 1 {
		t.Errorf("m3: failed %v, consumed %d times after", failed, seen["m3"])
	}
	for b, n := range seen {
		if n != 1 && !want[b] {
			t.Errorf("unexpected %q consumed %d times", b, n)
		}
	}
	mu.Unlock()
	omu.Lock()
	for k, seq := range order {
		if k != "warmup" && !slices.Equal(seq, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Errorf("key %s consumed as %v", k, seq)
		}
	}
	omu.Unlock()

	// An offset reset moves the running consumer: it consumes the topic again. (An EdgeMQ
	// broker and RocketMQ's with useServerSideResetOffset=false send the group
	// RESET_CONSUMER_CLIENT_OFFSET; RocketMQ 5's default answers the consumer's next pull
	// with the new offset instead.)
	if _, err := cc.ResetOffsets(ctx, group, topic, time.Now().Add(-time.Hour).UnixMilli()); err != nil {
		t.Fatalf("ResetOffsets: %v", err)
	}
	waitFor(t, 120*time.Second, "every message consumed again after the offset reset", func() bool {
		mu.Lock()
		defer mu.Unlock()
		wmu.Lock()
		defer wmu.Unlock()
		for b := range want {
			if seen[b] < 2 {
				return false
			}
		}
		return true
	})

	// The rest of the broker calls, directly.
	q := r.ReadQueues()[0]
	if ids, err := cc.ConsumerIDs(ctx, topic, group); err != nil || len(ids) != 1 {
		t.Errorf("ConsumerIDs = %v, %v", ids, err)
	}
	maxOff, err := cc.MaxOffset(ctx, q)
	if err != nil {
		t.Errorf("MaxOffset: %v", err)
	}
	if minOff, err := cc.MinOffset(ctx, q); err != nil || minOff != 0 {
		t.Errorf("MinOffset = %d, %v", minOff, err)
	}
	if off, err := cc.SearchOffset(ctx, q, time.Now().Add(-time.Hour)); err != nil || off != 0 {
		t.Errorf("SearchOffset = %d, %v", off, err)
	}
	pr, err := cc.Pull(ctx, mq.PullRequest{Group: group + "x", Queue: q, Filter: "*"})
	if err != nil || pr.Status != mq.PullFound || int64(len(pr.Messages)) != min(maxOff, 32) {
		t.Errorf("Pull = %v %d messages, %v; max offset %d", pr.Status, len(pr.Messages), err, maxOff)
	}
	if err == nil && len(pr.Messages) > 0 {
		m := pr.Messages[0]
		if err := cc.SendBack(ctx, mq.SendBackRequest{Group: group + "x", BrokerName: m.BrokerName, CommitLogOffset: m.CommitLogOffset,
			DelayLevel: 1, OriginMsgID: m.MsgID()}); err != nil {
			t.Errorf("SendBack: %v", err)
		}
		rq := mq.MessageQueue{Topic: mq.RetryTopic(group + "x"), BrokerName: m.BrokerName}
		waitFor(t, 30*time.Second, "the message sent back in the retry topic", func() bool {
			pr, err := cc.Pull(ctx, mq.PullRequest{Group: group + "x", Queue: rq, Filter: "*", Suspend: true, MaxWait: 2 * time.Second})
			return err == nil && pr.Status == mq.PullFound && string(pr.Messages[0].Body) == string(m.Body) && pr.Messages[0].ReconsumeTimes == 1
		})
	}
	if err := cc.CommitOffset(ctx, group+"x", q, 1); err != nil {
		t.Errorf("CommitOffset: %v", err)
	}
	waitFor(t, 10*time.Second, "committed offset", func() bool {
		off, err := cc.QueryOffset(ctx, group+"x", q)
		return err == nil && off == 1
	})
	got, err := cc.LockQueues(ctx, group+"x", "lock-client", []mq.MessageQueue{q})
	if err != nil || !slices.Equal(got, []mq.MessageQueue{q}) {
		t.Errorf("LockQueues = %v, %v", got, err)
	}
	if err := cc.UnlockQueues(ctx, group+"x", "lock-client", []mq.MessageQueue{q}); err != nil {
		t.Errorf("UnlockQueues: %v", err)
	}
	if _, err := cc.Route(ctx, "NoSuchTopic"+run); err == nil {
		t.Error("Route of an unknown topic: no error")
	}
}

// TestInteropWrongSecret: against a cluster with an ACL (INTEROP_ACCESS_KEY set), a send
// signed with a wrong secret is refused NO_PERMISSION.
func TestInteropWrongSecret(t *testing.T) {
	ns, ak := os.Getenv("INTEROP_NAMESRV"), os.Getenv("INTEROP_ACCESS_KEY")
	if ns == "" || ak == "" {
		t.Skip("INTEROP_NAMESRV or INTEROP_ACCESS_KEY not set")
	}
	c := dial(t, ns, &remoting.Options{Credentials: remoting.Credentials{AccessKey: ak, SecretKey: "not-the-secret"}})
	ctx := ctxT(t, time.Minute)
	topic := "EdgeClientACL" + strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)
	_, err := c.Send(ctx, &mq.Message{Topic: topic, Body: []byte("refused")}, nil)
	if !errors.Is(err, mq.ErrNoPermission) {
		t.Fatalf("send with a wrong secret: got %v, want mq.ErrNoPermission", err)
	}
}
