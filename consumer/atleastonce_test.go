package consumer

import (
	"context"
	"github.com/edgemq/edgemq/edge/mq"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// TestAtLeastOnce: 3 producers, 4 consumers of one group joining and leaving at random, some
// with Shutdown, some crashing (no offset persist, no unregister, no unlock): every message
// is consumed at least once; the orderly variant also never sees a queue's new messages out
// of order.
func TestAtLeastOnce(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		name := "concurrent"
		if orderly {
			name = "orderly"
		}
		t.Run(name, func(t *testing.T) { testAtLeastOnce(t, orderly) })
	}
}

func testAtLeastOnce(t *testing.T, orderly bool) {
	total := 100_000
	if testing.Short() {
		total = 6_000
	}
	b := testBroker(t, func(o *edge.Options) {
		o.HeartbeatTimeout = time.Second
		o.HeartbeatCheckInterval = 50 * time.Millisecond
		o.LockLifetime = 3 * time.Second
	})
	createTopic(t, b, "T", 8)
	c := newCounter()
	oc := newOrderChecker()
	var listener Listener = c.listener()
	if orderly {
		inner := oc.listener()
		listener = OrderlyListener(func(ctx context.Context, msgs []*Message, o *OrderlyContext) (ConsumeOrderlyStatus, error) {
			c.add(msgs)
			return inner(ctx, msgs, o)
		})
	}
	newConsumer := func() *PushConsumer {
		o := fastOptions(t, "g")
		o.PullBatchSize = 32
		o.ConsumeMessageBatchMaxSize = 4
		o.PullErrorDelay = 50 * time.Millisecond
		pc, err := NewPushConsumer(b, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Subscribe("T", "*", listener); err != nil {
			t.Fatal(err)
		}
		if err := pc.Start(); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	var slots [4]*PushConsumer
	slots[0], slots[1] = newConsumer(), newConsumer()
	defer func() {
		for _, pc := range slots {
			if pc != nil {
				pc.crash()
			}
		}
	}()

	var wg sync.WaitGroup
	per := total / 3
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := per
			if p == 2 {
				n = total - 2*per
			}
			for i := range n {
				key := strconv.Itoa(p*1000 + i%16)
				m := &mq.Message{Topic: "T", Body: []byte(strconv.Itoa(p) + "-" + strconv.Itoa(i))}
				if _, err := b.Send(context.Background(), m, mq.ShardingKey(key)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	produced := make(chan struct{})
	go func() { wg.Wait(); close(produced) }()

	rng := rand.New(rand.NewPCG(1, 2))
	crashes, shutdowns, joins := 0, 0, 0
	churn := time.NewTicker(150 * time.Millisecond)
	defer churn.Stop()
loop:
	for {
		select {
		case <-produced:
			break loop
		case <-churn.C:
		}
		i := rng.IntN(len(slots))
		switch pc := slots[i]; {
		case pc == nil:
			slots[i] = newConsumer()
			joins++
		case crashes <= shutdowns: // leaving members alternate between crash and Shutdown
			pc.crash()
			slots[i] = nil
			crashes++
		default:
			shutdown(t, pc)
			slots[i] = nil
			shutdowns++
		}
	}
	if t.Failed() {
		return
	}
	for i := range 2 {
		if slots[i] == nil {
			slots[i] = newConsumer()
		}
	}
	waitFor(t, 120*time.Second, "every message consumed", func() bool { return c.distinct() == total })
	oc.check(t)
	t.Logf("%d messages, %d deliveries (%d duplicates); %d joins, %d shutdowns, %d crashes",
		total, c.total(), c.total()-total, joins, shutdowns, crashes)
}
