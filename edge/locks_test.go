package edge

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func lockBroker(t *testing.T) (*Broker, *ManualClock) {
	t.Helper()
	c := NewManualClock(grpT0)
	return openBroker(t, &Options{Clock: c, LockLifetime: 60 * time.Second}), c
}

func lockQs(t *testing.T, b *Broker, client string, mqs ...MessageQueue) []MessageQueue {
	t.Helper()
	got, err := b.LockQueues("g", client, mqs)
	if err != nil {
		t.Fatalf("LockQueues(%s): %v", client, err)
	}
	return got
}

func wantLocked(t *testing.T, got []MessageQueue, want ...MessageQueue) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}

var (
	lockQ0 = MessageQueue{"T", 0}
	lockQ1 = MessageQueue{"T", 1}
	lockQ2 = MessageQueue{"T", 2}
)

func TestLockGrantRefreshRefuse(t *testing.T) {
	b, c := lockBroker(t)
	// Free queues are granted, in request order.
	wantLocked(t, lockQs(t, b, "a", lockQ2, lockQ0), lockQ2, lockQ0)
	// Another client's live lock is refused; free queues in the same request are granted.
	wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1, lockQ2), lockQ1)
	// The owner's request renews its lock.
	c.Advance(40 * time.Second)
	wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
	c.Advance(40 * time.Second) // q0 renewed 40 s ago, q2 locked 80 s ago
	wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ2), lockQ2)
	// An expired lock goes to whoever asks.
	c.Advance(21 * time.Second)
	wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
	wantLocked(t, lockQs(t, b, "a", lockQ0, lockQ1, lockQ2), lockQ1) // b locked q1 101 s ago
	if got, err := b.LockQueues("g2", "a", []MessageQueue{lockQ0}); err != nil || !slices.Equal(got, []MessageQueue{lockQ0}) {
		t.Fatalf("a lock in another group: %v, %v", got, err)
	}
	if got := lockQs(t, b, "a"); got == nil || len(got) != 0 {
		t.Fatalf("empty request granted %#v, want an empty list", got)
	}
}

func TestUnlockOnlyOwn(t *testing.T) {
	b, _ := lockBroker(t)
	wantLocked(t, lockQs(t, b, "a", lockQ0, lockQ1), lockQ0, lockQ1)
	if err := b.UnlockQueues("g", "b", []MessageQueue{lockQ0, lockQ1}); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1))
	if err := b.UnlockQueues("g", "a", []MessageQueue{lockQ1}); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, lockQs(t, b, "b", lockQ0, lockQ1), lockQ1)
}

func TestLocksFreedByUnregisterNotByExpiry(t *testing.T) {
	c := NewManualClock(grpT0)
	b := openBroker(t, &Options{Clock: c, LockLifetime: 60 * time.Second, HeartbeatTimeout: 10 * time.Second, HeartbeatCheckInterval: time.Second})
	for _, id := range []string{"a", "b"} {
		mustHeartbeat(t, b, Heartbeat{ClientID: id, Consumers: []ConsumerData{hbConsumer("g")}})
	}
	wantLocked(t, lockQs(t, b, "a", lockQ0), lockQ0)
	if _, err := b.LockQueues("other", "a", []MessageQueue{lockQ1}); err != nil {
		t.Fatal(err)
	}

	// a's membership expires, its lock does not (RocketMQ's rule).
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(consumerIDs(t, b, "g"), "a") {
		if time.Now().After(deadline) {
			t.Fatal("a never expired")
		}
		c.Advance(time.Second)
		mustHeartbeat(t, b, Heartbeat{ClientID: "b", Consumers: []ConsumerData{hbConsumer("g")}})
		time.Sleep(time.Millisecond)
	}
	if c.Now().Sub(grpT0) >= 60*time.Second {
		t.Fatalf("test too slow: the lock expired too (%v)", c.Now().Sub(grpT0))
	}
	wantLocked(t, lockQs(t, b, "b", lockQ0))

	// Unregister frees a's locks in the group left at once, and only there.
	if err := b.Unregister("a", "g"); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
	if got, _ := b.LockQueues("other", "b", []MessageQueue{lockQ1}); len(got) != 0 {
		t.Fatalf("a's lock in another group was freed: %v", got)
	}
	if err := b.Unregister("a", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LockQueues("other", "b", []MessageQueue{lockQ1}); len(got) != 1 {
		t.Fatalf("Unregister(a, \"\") left a's lock in another group: %v", got)
	}
}

func TestLockBadInput(t *testing.T) {
	b, _ := lockBroker(t)
	cases := []struct {
		name          string
		group, client string
		mqs           []MessageQueue
		want          error
	}{
		{"empty group", "", "a", []MessageQueue{lockQ0}, ErrInvalidArgument},
		{"empty client", "g", "", []MessageQueue{lockQ0}, ErrInvalidArgument},
		{"bad topic", "g", "a", []MessageQueue{lockQ0, {"a b", 0}}, ErrInvalidTopic},
		{"empty topic", "g", "a", []MessageQueue{{"", 0}}, ErrInvalidTopic},
		{"negative queue", "g", "a", []MessageQueue{lockQ0, {"T", -1}}, ErrInvalidArgument},
	}
	for _, tc := range cases {
		if _, err := b.LockQueues(tc.group, tc.client, tc.mqs); !errors.Is(err, tc.want) {
			t.Errorf("LockQueues %s: err = %v, want %v", tc.name, err, tc.want)
		}
		if err := b.UnlockQueues(tc.group, tc.client, tc.mqs); !errors.Is(err, tc.want) {
			t.Errorf("UnlockQueues %s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Nothing was locked by the rejected requests.
	wantLocked(t, lockQs(t, b, "b", lockQ0), lockQ0)
	// Retry topics' queues may be locked (orderly consumers lock them too).
	wantLocked(t, lockQs(t, b, "b", MessageQueue{RetryTopic("g"), 0}), MessageQueue{RetryTopic("g"), 0})
}
