package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// TestSendAsync: one goroutine keeps many sends in flight; each done gets the result Send
// would have returned, once, in the order the messages were stored; the messages are there
// to pull. A delayed message reports its schedule copy, as Send does.
func TestSendAsync(t *testing.T) {
	b := openBroker(t, nil) // sync flush: done comes from the store's ack goroutine
	ctx := context.Background()
	if err := b.CreateTopic(TopicConfig{Name: "A", WriteQueues: 1, ReadQueues: 1}); err != nil {
		t.Fatal(err)
	}
	const n = 500
	var (
		mu    sync.Mutex
		got   []mq.SendResult
		calls = map[string]int{}
		wg    sync.WaitGroup
	)
	wg.Add(n)
	for i := range n {
		m := &mq.Message{Topic: "A", Body: fmt.Appendf(nil, "m%d", i)}
		err := b.SendAsync(ctx, m, nil, func(res mq.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			got = append(got, res)
			calls[res.MsgID()]++
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, r := range got {
		if r.QueueOffset != int64(i) || calls[r.MsgID()] != 1 {
			t.Fatalf("result %d: %+v (done called %d times for it)", i, r, calls[r.MsgID()])
		}
	}
	// Acknowledged messages can be pulled at once.
	res, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "A"}, MaxMsgs: 1024, Filter: "*"})
	if err != nil || len(res.Messages) != n || string(res.Messages[n-1].Body) != fmt.Sprintf("m%d", n-1) {
		t.Fatalf("pulled %d messages, %v", len(res.Messages), err)
	}
	if st := b.TopicStats("A"); st.MessagesIn != n {
		t.Fatalf("stats count %d messages in", st.MessagesIn)
	}

	d := &mq.Message{Topic: "A", Body: []byte("later")}
	d.SetDelayLevel(1)
	ch := make(chan mq.SendResult, 1)
	if err := b.SendAsync(ctx, d, nil, func(r mq.SendResult, err error) {
		if err != nil {
			t.Error(err)
		}
		ch <- r
	}); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Queue.Topic != mq.ScheduleTopic || r.Queue.QueueID != 0 {
		t.Fatalf("delayed: result %+v, want the schedule topic's level-1 queue", r)
	}
}

// TestSendAsyncBadInput: refused sends return their error and never call done.
func TestSendAsyncBadInput(t *testing.T) {
	b := openBroker(t, &Options{NoAutoCreateTopics: true, MaxMessageSize: 100})
	ctx := context.Background()
	if err := b.CreateTopic(TopicConfig{Name: "T", WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	done := func(mq.SendResult, error) { t.Error("done called for a refused send") }
	for _, tc := range []struct {
		name string
		m    *mq.Message
		sel  mq.QueueSelector
		want error
	}{
		{"bad topic", &mq.Message{Topic: "a b"}, nil, mq.ErrInvalidTopic},
		{"unknown topic", &mq.Message{Topic: "Nope"}, nil, mq.ErrTopicNotExist},
		{"queue out of range", &mq.Message{Topic: "T"}, mq.QueueIndex(2), mq.ErrInvalidQueue},
		{"too large", &mq.Message{Topic: "T", Body: make([]byte, 101)}, nil, mq.ErrMessageTooLarge},
	} {
		if err := b.SendAsync(ctx, tc.m, tc.sel, done); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := b.SendAsync(ctx, &mq.Message{Topic: "T"}, nil, nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("nil done: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.SendAsync(ctx, &mq.Message{Topic: "T"}, nil, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestSendAllocs pins the allocations of a plain Send (async flush, no delay or
// compression), without a selector and with one: none. The caller's message stays where the
// caller put it (a selector, a function value, is given a pooled copy so that the message
// need not escape), and the message id is made only when asked for.
func TestSendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := openBroker(t, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, SegmentSize: 16 << 20}})
	ctx := context.Background()
	body := make([]byte, 100)
	send := func(sel mq.QueueSelector) {
		if _, err := b.Send(ctx, &mq.Message{Topic: "Allocs", Tags: "t", Body: body}, sel); err != nil {
			t.Fatal(err)
		}
	}
	send(nil) // creates the topic and its queues
	if n := testing.AllocsPerRun(2000, func() { send(nil) }); n > 0.1 {
		t.Errorf("Send without a selector: %.2f allocations per call, want 0", n)
	}
	sel := mq.QueueIndex(1)
	if n := testing.AllocsPerRun(2000, func() { send(sel) }); n > 0.1 {
		t.Errorf("Send with a selector: %.2f allocations per call, want 0", n)
	}
}

// TestSendAsyncAllocs pins the allocations of a SendAsync (sync flush, acknowledged by the
// store's goroutine) to none: the send in flight is a pooled record whose completion
// function is made once, so a caller that reuses its messages keeps the heap still.
func TestSendAsyncAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := openBroker(t, &Options{Store: &store.Options{MetaNoSync: true, SegmentSize: 16 << 20}})
	ctx := context.Background()
	body := make([]byte, 100)
	m := new(mq.Message)
	acked := make(chan error, 1)
	done := func(_ mq.SendResult, err error) { acked <- err }
	send := func() {
		*m = mq.Message{Topic: "Allocs", Body: body}
		if err := b.SendAsync(ctx, m, nil, done); err != nil {
			t.Fatal(err)
		}
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	send() // creates the topic and its queues
	if n := testing.AllocsPerRun(500, send); n > 0.1 {
		t.Errorf("SendAsync: %.2f allocations per call, want 0", n)
	}
}

// TestSendAsyncNoFsyncActsNow: a send that waits for no fsync (async flush, or a topic of
// durability async in a sync store), made while sends come slowly, is acknowledged before
// SendAsync returns, with the result Send would give, and counted in the topic's stats.
func TestSendAsyncNoFsyncActsNow(t *testing.T) {
	for _, c := range []struct {
		name  string
		flush commitlog.FlushMode
		dur   store.Durability
	}{
		{"async flush", commitlog.FlushAsync, store.DurabilityDefault},
		{"async topic, sync flush", commitlog.FlushSync, store.DurabilityAsync},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := openBroker(t, &Options{Store: &store.Options{Flush: c.flush, MetaNoSync: true, SegmentSize: 16 << 20}})
			if err := b.CreateTopic(TopicConfig{Name: "T", WriteQueues: 1, ReadQueues: 1, Durability: c.dur}); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 3 {
				time.Sleep(10 * pipeGap) // slowly: not handed to the pipe
				var got *mq.SendResult
				err := b.SendAsync(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil, func(r mq.SendResult, err error) {
					if err != nil {
						t.Error(err)
					}
					got = &r
				})
				if err != nil {
					t.Fatal(err)
				}
				if got == nil {
					t.Fatalf("send %d: done not called before SendAsync returned", i)
				}
				if got.QueueOffset != int64(i) || got.Queue.Topic != "T" {
					t.Fatalf("send %d: result %+v, want queue offset %d of T", i, *got, i)
				}
			}
			if st := b.TopicStats("T"); st.MessagesIn != 3 {
				t.Fatalf("topic stats count %d sends, want 3", st.MessagesIn)
			}
		})
	}
}
