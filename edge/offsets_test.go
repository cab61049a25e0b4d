package edge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestQueryOffsetNewQueueWindow: a group with no stored offset reads a queue from 0 only
// while the queue's first message is younger than Options.NewQueueWindow, so that the first
// messages of a topic made moments before its consumers are not skipped; on a queue with
// older history it gets mq.ErrOffsetNotFound, and its consumers start where their
// consume-from-where says (with ConsumeFromLastOffset, at new messages), instead of
// replaying the whole backlog.
func TestQueryOffsetNewQueueWindow(t *testing.T) {
	q := mq.MessageQueue{Topic: "T", QueueID: 0}
	query := func(t *testing.T, b *Broker, group string) (int64, error) {
		t.Helper()
		return b.QueryOffset(context.Background(), group, q)
	}
	wantZero := func(t *testing.T, b *Broker, group string) {
		t.Helper()
		if off, err := query(t, b, group); err != nil || off != 0 {
			t.Fatalf("at %v: QueryOffset(%s) = %d, %v; want 0 (the queue is new)", time.Since(bubbleStart), group, off, err)
		}
	}
	wantNone := func(t *testing.T, b *Broker, group string) {
		t.Helper()
		if off, err := query(t, b, group); !errors.Is(err, mq.ErrOffsetNotFound) {
			t.Fatalf("at %v: QueryOffset(%s) = %d, %v; want %v (the queue has history)", time.Since(bubbleStart), group, off, err, mq.ErrOffsetNotFound)
		}
	}
	send := func(t *testing.T, b *Broker, n int) {
		t.Helper()
		for range n {
			if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("x")}, mq.QueueIndex(0)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // dispatched
	}

	t.Run("default window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := openBroker(t, nil) // NewQueueWindow 60 s
			if err := b.CreateTopic(TopicConfig{Name: "T"}); err != nil {
				t.Fatal(err)
			}
			wantNone(t, b, "early") // an empty queue: nothing to start from
			send(t, b, 1)
			time.Sleep(10 * time.Second)
			send(t, b, 5)
			// A group that starts with the topic's first messages reads them all.
			wantZero(t, b, "g1")
			time.Sleep(50*time.Second - time.Nanosecond)
			wantZero(t, b, "g2")
			// The first message is 60 s old: a new group is told of no offset, and starts
			// at new messages, though offset 0 is still stored.
			time.Sleep(time.Nanosecond)
			wantNone(t, b, "g3")
			time.Sleep(time.Hour)
			send(t, b, 1) // new messages do not make the queue new
			wantNone(t, b, "g4")
			// A stored offset is the answer, however old the queue.
			if err := b.CommitOffset(context.Background(), "g5", q, 3); err != nil {
				t.Fatal(err)
			}
			if off, err := query(t, b, "g5"); err != nil || off != 3 {
				t.Fatalf("QueryOffset with an offset stored = %d, %v; want 3", off, err)
			}
		})
	})
	t.Run("window 5 s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := openBroker(t, &Options{NewQueueWindow: 5 * time.Second})
			send(t, b, 1)
			time.Sleep(5*time.Second - time.Nanosecond)
			wantZero(t, b, "g1")
			time.Sleep(time.Nanosecond)
			wantNone(t, b, "g2")
		})
	})
	t.Run("negative window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := openBroker(t, &Options{NewQueueWindow: -1})
			send(t, b, 1)
			wantNone(t, b, "g1") // never 0, even for a queue made this instant
		})
	})
}

// TestResetOffsetsTellsMembers: ResetOffsets calls the OnReset of each member of the group
// that set one, with the topic's queues (this broker's) and their new offsets; members of
// other groups are not told.
func TestResetOffsetsTellsMembers(t *testing.T) {
	b := openBroker(t, nil)
	if err := b.CreateTopic(TopicConfig{Name: "T", WriteQueues: 2, ReadQueues: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("x")}, mq.QueueIndex(i%2)); err != nil {
			t.Fatal(err)
		}
	}
	type reset struct {
		group, topic string
		offs         map[mq.MessageQueue]int64
	}
	got := make(chan reset, 4)
	hb := func(client, group string) mq.Heartbeat {
		return mq.Heartbeat{ClientID: client,
			Consumers: []mq.ConsumerData{{Group: group, Model: mq.Clustering, ConsumeType: mq.ConsumePassively,
				Subscriptions: []mq.Subscription{{Topic: "T", Expression: "*"}}}},
			OnReset: func(group, topic string, offs map[mq.MessageQueue]int64) { got <- reset{group, topic, offs} }}
	}
	for _, h := range []mq.Heartbeat{hb("c1", "g"), hb("c2", "other")} {
		if err := b.Heartbeat(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ResetOffsets("g", "T", ResetToLast, time.Time{}); err != nil {
		t.Fatal(err)
	}
	broker := b.Options().BrokerName
	want := map[mq.MessageQueue]int64{{Topic: "T", BrokerName: broker, QueueID: 0}: 3, {Topic: "T", BrokerName: broker, QueueID: 1}: 2}
	select {
	case r := <-got:
		if r.group != "g" || r.topic != "T" || len(r.offs) != len(want) {
			t.Fatalf("OnReset(%q, %q, %v); want g, T, %v", r.group, r.topic, r.offs, want)
		}
		for q, off := range want {
			if r.offs[q] != off {
				t.Fatalf("OnReset offsets %v; want %v", r.offs, want)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnReset not called")
	}
	b.groups.notes.wait()
	select {
	case r := <-got:
		t.Fatalf("a second OnReset: %+v (only group g's member was to be told)", r)
	default:
	}
}
