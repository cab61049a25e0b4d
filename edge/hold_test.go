package edge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// The tests of parked pulls run in synctest bubbles (testing/synctest): time moves only when
// every goroutine of the test (the broker's, the store's, the test's pulls) is blocked, so a
// parked pull returns only through an arrival, its ctx, Close, or a time.Sleep of the test's,
// and synctest.Wait lets whatever can run finish first.

// holdBroker opens a broker with topic "H" of two queues. Call it in a bubble.
func holdBroker(t *testing.T, o Options) *Broker {
	t.Helper()
	b := openBroker(t, &o)
	if err := b.CreateTopic(TopicConfig{Name: "H", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	return b
}

// holdSend sends one message per tag to (topic, queue) in a bubble and waits until the
// bubble is idle: the messages are dispatched and the pulls they woke have returned.
func holdSend(t *testing.T, b *Broker, topic string, queue int32, tags ...string) {
	t.Helper()
	var last int64
	for _, tag := range tags {
		res, err := b.Send(context.Background(), &mq.Message{Topic: topic, Tags: tag, Body: []byte("body-" + tag)}, mq.QueueIndex(int(queue)))
		if err != nil {
			t.Fatalf("send %q: %v", tag, err)
		}
		last = res.QueueOffset
	}
	synctest.Wait()
	if got := b.st.MaxOffset(topic, queue); got != last+1 {
		t.Fatalf("queue %s/%d: max offset %d once idle, want %d", topic, queue, got, last+1)
	}
}

// holdRecv returns a pull's outcome in a bubble: the pull must have returned once the
// bubble is idle, without time moving.
func holdRecv(t *testing.T, ch <-chan pullOutcome) pullOutcome {
	t.Helper()
	synctest.Wait()
	select {
	case o := <-ch:
		return o
	default:
		t.Fatal("pull did not return")
		return pullOutcome{}
	}
}

// holdStillParked checks, in a bubble, that a pull has not returned once the bubble is idle.
func holdStillParked(t *testing.T, ch <-chan pullOutcome) {
	t.Helper()
	synctest.Wait()
	select {
	case o := <-ch:
		t.Fatalf("pull returned early: %v %+v", o.err, o.res)
	default:
	}
}

// holdParked checks, in a bubble, that n pulls are parked once the bubble is idle.
func holdParked(t *testing.T, b *Broker, n int) {
	t.Helper()
	synctest.Wait()
	if got := b.hold.parked(); got != n {
		t.Fatalf("%d pulls parked, want %d", got, n)
	}
}

func TestPullParkedWakesOnMatchingArrival(t *testing.T) {
	for _, filter := range []string{"*", "A", "B || A"} {
		t.Run(filter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := holdBroker(t, Options{})
				holdSend(t, b, "H", 0, "old")
				ch := pullAsync(context.Background(), b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Offset: 1, Filter: filter, Suspend: true})
				holdParked(t, b, 1)
				holdSend(t, b, "H", 0, "A")
				o := holdRecv(t, ch)
				if o.err != nil || o.res.Status != mq.PullFound || len(o.res.Messages) != 1 ||
					o.res.Messages[0].QueueOffset != 1 || o.res.Messages[0].Tags != "A" || o.res.NextBeginOffset != 2 {
					t.Fatalf("got %v %v %v next %d, want FOUND [1] next 2", o.err, o.res.Status, pullOffsets(o.res.Messages), o.res.NextBeginOffset)
				}
				if n := b.hold.parked(); n != 0 {
					t.Fatalf("%d pulls parked after the wake-up", n)
				}
			})
		})
	}
}

func TestPullParkedIgnoresOtherQueuesAndTags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		ctx := context.Background()
		wantA := pullAsync(ctx, b, mq.PullRequest{Group: "a", Queue: mq.MessageQueue{Topic: "H"}, Filter: "A", Suspend: true, MaxWait: 2 * time.Second})
		wantAll := pullAsync(ctx, b, mq.PullRequest{Group: "all", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*", Suspend: true, MaxWait: 2 * time.Second})
		holdParked(t, b, 2)
		// A message on the other queue wakes nobody.
		holdSend(t, b, "H", 1, "A")
		holdStillParked(t, wantA)
		holdStillParked(t, wantAll)
		// A "B" on queue 0 wakes the "*" pull, and only it.
		holdSend(t, b, "H", 0, "B")
		if o := holdRecv(t, wantAll); o.err != nil || o.res.Status != mq.PullFound || len(o.res.Messages) != 1 {
			t.Fatalf("'*' pull: %v %v %d messages", o.err, o.res.Status, len(o.res.Messages))
		}
		holdParked(t, b, 1)
		holdStillParked(t, wantA)
		// Its wait runs out: it reads once more, finds only the "B" and says so; the
		// consumer moves past it.
		time.Sleep(2 * time.Second)
		o := holdRecv(t, wantA)
		if o.err != nil || o.res.Status != mq.PullNoMatchedMsg || len(o.res.Messages) != 0 || o.res.NextBeginOffset != 1 {
			t.Fatalf("'A' pull: got %v %v %v next %d, want NO_MATCHED_MSG next 1", o.err, o.res.Status, pullOffsets(o.res.Messages), o.res.NextBeginOffset)
		}
	})
}

// TestPullParkedHashCollision: a tag with the hash of the wanted tag may wake the pull, but
// the exact check keeps the message from it.
func TestPullParkedHashCollision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		ch := pullAsync(context.Background(), b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "Aa", Suspend: true})
		holdParked(t, b, 1)
		holdSend(t, b, "H", 0, "BB")
		o := holdRecv(t, ch)
		if o.err != nil || o.res.Status != mq.PullNoMatchedMsg || len(o.res.Messages) != 0 || o.res.NextBeginOffset != 1 {
			t.Fatalf("got %v %v %v next %d, want NO_MATCHED_MSG next 1", o.err, o.res.Status, pullOffsets(o.res.Messages), o.res.NextBeginOffset)
		}
	})
}

func TestPullParkedTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		maxWait time.Duration
		want    time.Duration
	}{
		{"MaxWait", Options{}, 3 * time.Second, 3 * time.Second},
		{"DefaultSuspend", Options{DefaultSuspend: 4 * time.Second}, 0, 4 * time.Second},
		{"capped by MaxSuspend", Options{MaxSuspend: 2 * time.Second}, time.Hour, 2 * time.Second},
		{"short polling", Options{ShortPolling: true, ShortPollingWait: 500 * time.Millisecond}, 10 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := holdBroker(t, tc.opts)
				ch := pullAsync(context.Background(), b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*", Suspend: true, MaxWait: tc.maxWait})
				holdParked(t, b, 1)
				time.Sleep(tc.want - time.Nanosecond)
				holdStillParked(t, ch)
				time.Sleep(time.Nanosecond)
				o := holdRecv(t, ch)
				if o.err != nil || o.res.Status != mq.PullNoNewMsg || o.res.NextBeginOffset != 0 {
					t.Fatalf("got %v %v next %d, want NO_NEW_MSG next 0", o.err, o.res.Status, o.res.NextBeginOffset)
				}
				if n := b.hold.parked(); n != 0 {
					t.Fatalf("%d pulls parked after the timeout", n)
				}
			})
		})
	}
}

func TestPullWithoutSuspendDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		start := time.Now()
		res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*"})
		if err != nil || res.Status != mq.PullNoNewMsg || b.hold.parked() != 0 || time.Since(start) != 0 {
			t.Fatalf("got %v %v after %v, %d parked", res.Status, err, time.Since(start), b.hold.parked())
		}
	})
}

func TestPullParkedCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		ch := pullAsync(ctx, b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*", Suspend: true})
		holdParked(t, b, 1)
		cancel()
		if o := holdRecv(t, ch); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("got %v, want %v", o.err, context.Canceled)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*", Suspend: true}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want %v", err, context.DeadlineExceeded)
		}
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Fatalf("returned after %v, want the ctx's 20ms", d)
		}
		if n := b.hold.parked(); n != 0 {
			t.Fatalf("%d pulls parked after their ctx ended", n)
		}
	})
}

// TestPullTenThousandCancelled: cancelled pulls leave no waiter, map entry or goroutine
// behind (TestMain checks goroutines).
func TestPullTenThousandCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		const n = 10000
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Go(func() {
				_, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H", QueueID: int32(i % 2)}, Filter: "*", Suspend: true})
				errs <- err
			})
		}
		holdParked(t, b, n)
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want %v", err, context.Canceled)
			}
		}
		b.hold.mu.Lock()
		parked, keys := b.hold.n.Load(), len(b.hold.m)
		b.hold.mu.Unlock()
		if parked != 0 || keys != 0 {
			t.Fatalf("%d waiters in %d hold queues left", parked, keys)
		}
	})
}

func TestPullCloseAnswersParkedPulls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		var chs []<-chan pullOutcome
		for i := 0; i < 20; i++ {
			chs = append(chs, pullAsync(context.Background(), b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H", QueueID: int32(i % 2)}, Filter: "*", Suspend: true}))
		}
		holdParked(t, b, 20)
		start := time.Now()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chs {
			if o := holdRecv(t, ch); !errors.Is(o.err, ErrClosed) {
				t.Fatalf("got %v, want %v", o.err, ErrClosed)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close took %v with pulls parked", d)
		}
		if n := b.hold.parked(); n != 0 {
			t.Fatalf("%d pulls parked after Close", n)
		}
	})
}

// TestHoldSweepWakesMissedArrival parks a waiter below the queue's max, as if its arrival
// had been missed: the periodic sweep wakes it, whatever its filter, on its first round.
func TestHoldSweepWakesMissedArrival(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		tick time.Duration
	}{
		{"long polling", Options{HoldCheckInterval: 5 * time.Second}, 5 * time.Second},
		{"short polling", Options{ShortPolling: true, ShortPollingWait: time.Second, HoldCheckInterval: time.Hour}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := holdBroker(t, tc.opts) // the sweep's first round is tc.tick from now
				holdSend(t, b, "H", 0, "A")
				f, _ := parseFilter("Z")
				missed := newWaiter(holdKey{"H", 0}, 0, f)
				current := newWaiter(holdKey{"H", 0}, 1, nil)
				b.hold.mu.Lock()
				b.hold.addLocked(missed)
				b.hold.addLocked(current)
				b.hold.mu.Unlock()
				time.Sleep(tc.tick - time.Nanosecond)
				synctest.Wait()
				if len(missed.ch) != 0 {
					t.Fatal("woken before the sweep")
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if len(missed.ch) != 1 {
					t.Fatal("the sweep did not wake the waiter")
				}
				if len(current.ch) != 0 {
					t.Fatal("the sweep woke a waiter at the queue's end")
				}
				if n := b.hold.parked(); n != 1 || !b.hold.remove(current) {
					t.Fatalf("%d parked, want the waiter at the end", n)
				}
			})
		})
	}
}

// TestHoldArrive checks which waiters one arrival wakes.
func TestHoldArrive(t *testing.T) {
	h := newHoldService(&Broker{})
	fa, _ := parseFilter("A || B")
	fz, _ := parseFilter("Z")
	ws := map[string]*waiter{
		"below, any":         newWaiter(holdKey{"T", 0}, 3, nil),
		"at, any":            newWaiter(holdKey{"T", 0}, 5, nil),
		"at, A||B":           newWaiter(holdKey{"T", 0}, 5, fa),
		"at, Z":              newWaiter(holdKey{"T", 0}, 5, fz),
		"beyond, any":        newWaiter(holdKey{"T", 0}, 6, nil),
		"other queue":        newWaiter(holdKey{"T", 1}, 5, nil),
		"other topic":        newWaiter(holdKey{"U", 0}, 5, nil),
		"at, any, 2nd":       newWaiter(holdKey{"T", 0}, 5, nil),
		"removed before arr": newWaiter(holdKey{"T", 0}, 5, nil),
	}
	want := map[string]bool{"below, any": true, "at, any": true, "at, A||B": true, "at, any, 2nd": true}
	h.mu.Lock()
	for _, w := range ws {
		h.addLocked(w)
	}
	h.mu.Unlock()
	if !h.remove(ws["removed before arr"]) || h.remove(ws["removed before arr"]) {
		t.Fatal("remove: want true, then false")
	}
	h.arrive(store.Arrival{Topic: "T", QueueID: 0, Offset: 5, TagHash: store.TagHash("B")})
	for name, w := range ws {
		woke := len(w.ch) == 1
		if woke != want[name] {
			t.Errorf("%s: woken %v, want %v", name, woke, want[name])
		}
		if woke && w.idx != -1 {
			t.Errorf("%s: woken but still in its hold queue", name)
		}
	}
	if n := h.parked(); n != 4 {
		t.Fatalf("%d parked, want 4", n)
	}
	// Removing the rest empties the map; a woken waiter cannot be removed again.
	for name, w := range ws {
		if h.remove(w) == want[name] && name != "removed before arr" {
			t.Errorf("%s: remove after arrival disagrees with woken", name)
		}
	}
	if h.parked() != 0 || len(h.m) != 0 {
		t.Fatalf("%d parked in %d hold queues after removing all", h.parked(), len(h.m))
	}
	h.arrive(store.Arrival{Topic: "T", QueueID: 0, Offset: 6}) // nobody waits: a no-op
}

// TestHoldParkRechecksMax: a waiter whose queue already grew past its offset is not parked
// (the arrival that would wake it may have come before it was in the map).
func TestHoldParkRechecksMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		holdSend(t, b, "H", 0, "A", "B")
		if got := b.hold.park(newWaiter(holdKey{"H", 0}, 1, nil)); got != parkMoved {
			t.Fatalf("below max: got %v, want parkMoved", got)
		}
		w := newWaiter(holdKey{"H", 0}, 2, nil)
		if got := b.hold.park(w); got != parked {
			t.Fatalf("at max: got %v, want parked", got)
		}
		if b.hold.parked() != 1 || !b.hold.remove(w) {
			t.Fatal("waiter at max not parked")
		}
	})
}

// addLocked parks w without park's check of the queue's end. h.mu must be held.
func (h *holdService) addLocked(w *waiter) {
	h.n.Add(1)
	h.insertLocked(w)
}

// TestHoldParkRacesArrival sends the message a pull waits for in the middle of its park,
// after park counted the waiter and before it read the queue's end: the arrival skips the
// hold queues only if it finds no waiter counted, so the pull must see the message, now or
// when woken. In the bubble no time passes, so neither the pull's timeout nor the sweep
// fires: a lost wake-up leaves the pull parked once the bubble is idle.
func TestHoldParkRacesArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := holdBroker(t, Options{})
		ctx := context.Background()
		b.hold.parkHook = func() {
			b.hold.parkHook = nil
			go func() {
				if _, err := b.Send(ctx, &mq.Message{Topic: "H", Body: []byte("m")}, mq.QueueIndex(1)); err != nil {
					t.Error(err)
				}
			}()
			// The store moves the queue's end, then announces the arrival, which waits for
			// hold's lock (held here). Not time.Sleep: time cannot move in the bubble while
			// the sender waits for a mutex.
			for b.st.MaxOffset("H", 1) == 0 {
				runtime.Gosched()
			}
		}
		ch := pullAsync(ctx, b, mq.PullRequest{Group: "G", Queue: mq.MessageQueue{Topic: "H", QueueID: 1}, Offset: 0, Filter: "*", Suspend: true})
		o := holdRecv(t, ch)
		if o.err != nil || o.res.Status != mq.PullFound || len(o.res.Messages) != 1 {
			t.Fatalf("got %v %v with %d messages, want the message", o.err, o.res.Status, len(o.res.Messages))
		}
	})
}

// holeAt damages, in the closed broker's data dir, the record at commit-log position pos of
// size bytes: its last byte is flipped, so that its checksum fails and the store reads its
// queue entry as a hole (OFFSET_FOUND_NULL), as after bit rot.
func holeAt(t *testing.T, dir string, pos int64, size int32) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "commitlog", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s (%v)", dir, err)
	}
	file, base := "", int64(-1)
	for _, s := range segs {
		b, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(s), ".log"), 10, 64)
		if err == nil && b <= pos && b > base {
			file, base = s, b
		}
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := pos - base + int64(size) - 1
	var c [1]byte
	if _, err := f.ReadAt(c[:], off); err != nil {
		t.Fatal(err)
	}
	c[0] ^= 0xff
	if _, err := f.WriteAt(c[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestPullParkedPastHoles: a suspended pull that finds only holes at the end of its queue
// (records lost with their entries) waits past them, as at the queue's end, instead of
// answering at once; the next message, or its timeout, answers it.
func TestPullParkedPastHoles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		b := openBrokerAt(t, dir, nil)
		if err := b.CreateTopic(TopicConfig{Name: "H", ReadQueues: 1, WriteQueues: 1}); err != nil {
			t.Fatal(err)
		}
		holdSend(t, b, "H", 0, "a", "b", "c")
		// Offsets 1 and 2 become holes; a message of another topic follows them in the log.
		var lost []mq.MessageExt
		for off := int64(1); off <= 2; off++ {
			res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Offset: off, MaxMsgs: 1, Filter: "*"})
			if err != nil || len(res.Messages) != 1 {
				t.Fatalf("pull at %d: %v, %v", off, res.Status, err)
			}
			lost = append(lost, res.Messages[0])
		}
		holdSend(t, b, "Other", 0, "x")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for _, m := range lost {
			holeAt(t, dir, m.CommitLogOffset, m.StoreSize)
		}
		b = openBrokerAt(t, dir, nil)
		req := mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Offset: 1, Filter: "*"}
		res, err := b.Pull(context.Background(), req)
		if err != nil || res.Status != mq.PullNoNewMsg || len(res.Messages) != 0 || res.NextBeginOffset != 3 || res.MaxOffset != 3 {
			t.Fatalf("pull at the holes: %v %v next %d max %d, %v; want NO_NEW_MSG next 3 max 3", res.Status, pullOffsets(res.Messages), res.NextBeginOffset, res.MaxOffset, err)
		}

		// Suspended, it waits past the holes: here until its timeout, then answers as above.
		req.Suspend, req.MaxWait = true, 3*time.Second
		ch := pullAsync(context.Background(), b, req)
		holdParked(t, b, 1)
		time.Sleep(3*time.Second - time.Nanosecond)
		holdStillParked(t, ch)
		time.Sleep(time.Nanosecond)
		if o := holdRecv(t, ch); o.err != nil || o.res.Status != mq.PullNoNewMsg || o.res.NextBeginOffset != 3 {
			t.Fatalf("timed-out pull: %v %v next %d, want NO_NEW_MSG next 3", o.err, o.res.Status, o.res.NextBeginOffset)
		}
		// And here until the next message.
		req.MaxWait = 10 * time.Second
		ch = pullAsync(context.Background(), b, req)
		holdParked(t, b, 1)
		holdSend(t, b, "H", 0, "d")
		o := holdRecv(t, ch)
		if o.err != nil || o.res.Status != mq.PullFound || !slices.Equal(pullOffsets(o.res.Messages), []int64{3}) || o.res.NextBeginOffset != 4 {
			t.Fatalf("woken pull: %v %v %v next %d, want FOUND [3] next 4", o.err, o.res.Status, pullOffsets(o.res.Messages), o.res.NextBeginOffset)
		}
	})
}

// TestShortPollingArrivalWakesNobody: with long polling off (Options.ShortPolling), an
// arrival wakes no parked pull, as RocketMQ's broker with longPollingEnable=false; the pull
// is answered by the sweep every ShortPollingWait (or its own wait of at most that).
func TestShortPollingArrivalWakesNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The sweep runs at 1 s, 2 s, ... from the open.
		b := holdBroker(t, Options{ShortPolling: true, ShortPollingWait: time.Second})
		time.Sleep(300 * time.Millisecond)
		ch := pullAsync(context.Background(), b, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "H"}, Filter: "*", Suspend: true, MaxWait: 10 * time.Second})
		holdParked(t, b, 1) // waits until 1.3 s at most
		time.Sleep(200 * time.Millisecond)
		holdSend(t, b, "H", 0, "A") // at 0.5 s
		holdStillParked(t, ch)
		time.Sleep(500*time.Millisecond - time.Nanosecond)
		holdStillParked(t, ch)
		time.Sleep(time.Nanosecond) // the sweep at 1 s
		o := holdRecv(t, ch)
		if o.err != nil || o.res.Status != mq.PullFound || !slices.Equal(pullOffsets(o.res.Messages), []int64{0}) {
			t.Fatalf("got %v %v %v, want FOUND [0] from the sweep", o.err, o.res.Status, pullOffsets(o.res.Messages))
		}
		if d := time.Since(bubbleStart); d != time.Second {
			t.Fatalf("answered at %v, want 1s", d)
		}
	})
}

// TestParkedPullReusesItsWaiter: a pull that parks and times out reuses a waiter, its
// channel and its timer from the pulls before: it allocates at most once (6 times when
// each park made its own).
func TestParkedPullReusesItsWaiter(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	b := openBroker(t, nil)
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	req := mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T"}, Filter: "*", Suspend: true, MaxWait: time.Millisecond}
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(100, func() {
		if res, err := b.Pull(ctx, req); err != nil || res.Status != mq.PullNoNewMsg {
			t.Fatalf("Pull = %v, %v", res.Status, err)
		}
	}); allocs > 1 {
		t.Fatalf("a parked pull that timed out allocated %.0f times, want at most 1", allocs)
	}
}
