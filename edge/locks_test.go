package edge

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// lockBroker opens a broker whose locks live 60 s. Call it in a synctest bubble, where time
// moves only by the test's time.Sleep.
func lockBroker(t *testing.T) *Broker {
	t.Helper()
	return openBroker(t, &Options{LockLifetime: 60 * time.Second})
}

func lockQs(t *testing.T, b *Broker, client string, mqs ...mq.MessageQueue) []mq.MessageQueue {
	t.Helper()
	got, err := b.LockQueues(context.Background(), "g", client, mqs)
	if err != nil {
		t.Fatalf("LockQueues(%s): %v", client, err)
	}
	return got
}

func wantLocked(t *testing.T, got []mq.MessageQueue, want ...mq.MessageQueue) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}

var (
	lockQ0 = mq.MessageQueue{Topic: "T", QueueID: 0}
	lockQ1 = mq.MessageQueue{Topic: "T", QueueID: 1}
	lockQ2 = mq.MessageQueue{Topic: "T", QueueID: 2}
)

func TestLockGrantRefreshRefuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lockBroker(t)
		// Free queues are granted, in request order.
		wantLocked(t, lockQs(t, b, "a", lockQ2, lockQ0), lockQ2, lockQ0)
		// Another client's live lock is refused; free queues in the same request are granted.
		wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1, lockQ2), lockQ1)
		// The owner's request renews its lock.
		time.Sleep(40 * time.Second)
		wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
		time.Sleep(40 * time.Second) // q0 renewed 40 s ago, q2 locked 80 s ago
		wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ2), lockQ2)
		// An expired lock goes to whoever asks.
		time.Sleep(21 * time.Second)
		wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
		wantLocked(t, lockQs(t, b, "a", lockQ0, lockQ1, lockQ2), lockQ1) // b locked q1 101 s ago
		if got, err := b.LockQueues(context.Background(), "g2", "a", []mq.MessageQueue{lockQ0}); err != nil || !slices.Equal(got, []mq.MessageQueue{lockQ0}) {
			t.Fatalf("a lock in another group: %v, %v", got, err)
		}
		if got := lockQs(t, b, "a"); got == nil || len(got) != 0 {
			t.Fatalf("empty request granted %#v, want an empty list", got)
		}
	})
}

func TestUnlockOnlyOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lockBroker(t)
		wantLocked(t, lockQs(t, b, "a", lockQ0, lockQ1), lockQ0, lockQ1)
		if err := b.UnlockQueues(context.Background(), "g", "b", []mq.MessageQueue{lockQ0, lockQ1}); err != nil {
			t.Fatal(err)
		}
		wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1))
		if err := b.UnlockQueues(context.Background(), "g", "a", []mq.MessageQueue{lockQ1}); err != nil {
			t.Fatal(err)
		}
		wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1), lockQ1)
	})
}

func TestLocksFreedByUnregisterNotByExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, &Options{LockLifetime: 60 * time.Second, HeartbeatTimeout: 10 * time.Second, HeartbeatCheckInterval: time.Second})
		for _, id := range []string{"a", "b"} {
			mustHeartbeat(t, b, mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{hbConsumer("g")}})
		}
		wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
		if _, err := b.LockQueues(context.Background(), "other", "a", []mq.MessageQueue{lockQ1}); err != nil {
			t.Fatal(err)
		}

		// a's membership expires (at the first check more than 10 s after its heartbeat), its
		// lock does not (RocketMQ's rule).
		for range 11 {
			time.Sleep(time.Second)
			mustHeartbeat(t, b, mq.Heartbeat{ClientID: "b", Consumers: []mq.ConsumerData{hbConsumer("g")}})
		}
		synctest.Wait()
		if got := consumerIDs(t, b, "g"); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("members after a's timeout: %v, want [b]", got)
		}
		wantLocked(t, lockQs(t, b, "b", lockQ0))

		// Unregister frees a's locks in the group left at once, and only there.
		if err := b.Unregister(context.Background(), "a", "g"); err != nil {
			t.Fatal(err)
		}
		wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
		if got, _ := b.LockQueues(context.Background(), "other", "b", []mq.MessageQueue{lockQ1}); len(got) != 0 {
			t.Fatalf("a's lock in another group was freed: %v", got)
		}
		if err := b.Unregister(context.Background(), "a", ""); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.LockQueues(context.Background(), "other", "b", []mq.MessageQueue{lockQ1}); len(got) != 1 {
			t.Fatalf("Unregister(a, \"\") left a's lock in another group: %v", got)
		}
	})
}

// TestDisconnectKeepsLocks: a client whose connection closed leaves its groups at once,
// but its queue locks live on until their lifetime ends: it may still be consuming them.
func TestDisconnectKeepsLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, &Options{LockLifetime: 60 * time.Second})
		for _, id := range []string{"a", "b"} {
			mustHeartbeat(t, b, mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{hbConsumer("g")}})
		}
		wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
		if err := b.Disconnect(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if got := consumerIDs(t, b, "g"); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("members after a disconnected: %v, want [b]", got)
		}
		wantLocked(t, lockQs(t, b, "b", lockQ0))
		time.Sleep(59 * time.Second)
		wantLocked(t, lockQs(t, b, "b", lockQ0))
		time.Sleep(2 * time.Second)
		wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
		if err := b.Disconnect(context.Background(), ""); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Fatalf("Disconnect of an empty client id: %v", err)
		}
	})
}

func TestLockBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lockBroker(t)
		cases := []struct {
			name          string
			group, client string
			mqs           []mq.MessageQueue
			want          error
		}{
			{"empty group", "", "a", []mq.MessageQueue{lockQ0}, mq.ErrInvalidArgument},
			{"empty client", "g", "", []mq.MessageQueue{lockQ0}, mq.ErrInvalidArgument},
			{"bad topic", "g", "a", []mq.MessageQueue{lockQ0, {Topic: "a b", QueueID: 0}}, mq.ErrInvalidTopic},
			{"empty topic", "g", "a", []mq.MessageQueue{{Topic: "", QueueID: 0}}, mq.ErrInvalidTopic},
			{"negative queue", "g", "a", []mq.MessageQueue{lockQ0, {Topic: "T", QueueID: -1}}, mq.ErrInvalidArgument},
			{"another broker's queue", "g", "a", []mq.MessageQueue{lockQ0, {Topic: "T", BrokerName: "other"}}, mq.ErrInvalidQueue},
		}
		for _, tc := range cases {
			if _, err := b.LockQueues(context.Background(), tc.group, tc.client, tc.mqs); !errors.Is(err, tc.want) {
				t.Errorf("LockQueues %s: err = %v, want %v", tc.name, err, tc.want)
			}
			if err := b.UnlockQueues(context.Background(), tc.group, tc.client, tc.mqs); !errors.Is(err, tc.want) {
				t.Errorf("UnlockQueues %s: err = %v, want %v", tc.name, err, tc.want)
			}
		}
		// Nothing was locked by the rejected requests.
		wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
		// Retry topics' queues may be locked (orderly consumers lock them too).
		wantLocked(t, lockQs(t, b, "b", mq.MessageQueue{Topic: mq.RetryTopic("g")}), mq.MessageQueue{Topic: mq.RetryTopic("g")})
	})
}

// TestLockLifetimeBoundary: a lock lives LockLifetime exactly: at 60 s it is still its
// owner's, a moment later anyone's.
func TestLockLifetimeBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lockBroker(t)
		wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
		time.Sleep(60 * time.Second)
		wantLocked(t, lockQs(t, b, "b", lockQ0))
		time.Sleep(time.Nanosecond)
		wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
	})
}
