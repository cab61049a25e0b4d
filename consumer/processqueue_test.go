package consumer

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// pqMsgs returns messages at the given offsets, each with a body of offset+1 bytes.
func pqMsgs(offs ...int64) []*Message {
	out := make([]*Message, len(offs))
	for i, o := range offs {
		out[i] = &Message{Message: mq.Message{Topic: "t", Body: make([]byte, o+1)}, QueueOffset: o}
	}
	return out
}

func offsetsOf(ms []*Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.QueueOffset
	}
	return out
}

// newPQ returns a ProcessQueue holding messages at offs. Tests that move time run in a
// synctest bubble, where time.Sleep moves the fake clock at once.
func newPQ(t *testing.T, offs ...int64) *processQueue {
	t.Helper()
	pq := newProcessQueue()
	if len(offs) > 0 {
		pq.PutMessages(pqMsgs(offs...))
	}
	return pq
}

// hasCached reports whether the cache (not counting the orderly consuming set) holds
// messages.
func (pq *processQueue) hasCached() bool {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	return len(pq.msgs) > 0
}

// checkStats fails unless Count and Size are as given.
func checkStats(t *testing.T, pq *processQueue, count, size int64) {
	t.Helper()
	if got := pq.Count(); got != count {
		t.Errorf("Count = %d, want %d", got, count)
	}
	if got := pq.Size(); got != size {
		t.Errorf("Size = %d, want %d", got, size)
	}
}

func TestProcessQueuePutMessages(t *testing.T) {
	pq := newPQ(t)
	if !pq.PutMessages(pqMsgs(3, 1, 2)) {
		t.Error("first put: dispatch = false, want true")
	}
	checkStats(t, pq, 3, 2+3+4)
	if pq.PutMessages(pqMsgs(2, 5)) {
		t.Error("put while consuming: dispatch = true, want false")
	}
	checkStats(t, pq, 4, 2+3+4+6) // offset 2 was a duplicate
	if got := pq.MaxSpan(); got != 4 {
		t.Errorf("MaxSpan = %d, want 4", got)
	}
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{1, 2, 3, 5}) {
		t.Errorf("cache order %v, want [1 2 3 5]", got)
	}
	if pq.PutMessages(nil) {
		t.Error("empty put after take: dispatch = true, want false")
	}
}

func TestProcessQueuePutDispatchAfterIdle(t *testing.T) {
	pq := newPQ(t)
	if pq.PutMessages(nil) {
		t.Error("empty put on empty queue: dispatch = true")
	}
	if !pq.PutMessages(pqMsgs(0)) {
		t.Fatal("dispatch = false, want true")
	}
	if pq.PutMessages(pqMsgs(1)) {
		t.Error("a second put while the run goes on: dispatch = true, want false")
	}
	pq.takeMessages(1)
	pq.Commit()
	pq.takeMessages(1)
	pq.Commit()
	if got := pq.takeMessages(1); len(got) != 0 {
		t.Fatalf("take on empty = %v", offsetsOf(got))
	}
	if !pq.PutMessages(pqMsgs(2)) {
		t.Error("put after the run ended: dispatch = false, want true")
	}
}

func TestProcessQueuePutIgnoresTaken(t *testing.T) {
	pq := newPQ(t, 0, 1)
	pq.takeMessages(1)
	pq.PutMessages(pqMsgs(0, 2))
	checkStats(t, pq, 3, 1+2+3)
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("took %v, want [1 2]", got)
	}
}

func TestProcessQueueRemoveMessages(t *testing.T) {
	for _, c := range []struct {
		name   string
		cached []int64
		remove []int64
		want   int64
		count  int64
	}{
		{"nothing cached", nil, []int64{1}, -1, 0},
		{"middle", []int64{1, 2, 3}, []int64{2}, 1, 2},
		{"first", []int64{1, 2, 3}, []int64{1}, 2, 2},
		{"all", []int64{1, 2, 3}, []int64{3, 1, 2}, 4, 0},
		{"all, max not last", []int64{7, 1, 2}, []int64{1, 2, 7}, 8, 0},
		{"unknown", []int64{1, 2}, []int64{9}, 1, 2},
		{"twice", []int64{1, 2}, []int64{1, 1}, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pq := newPQ(t, c.cached...)
			if got := pq.removeMessages(pqMsgs(c.remove...)); got != c.want {
				t.Errorf("removeMessages = %d, want %d", got, c.want)
			}
			var size int64
			for _, o := range c.cached {
				if !slices.Contains(c.remove, o) {
					size += o + 1
				}
			}
			checkStats(t, pq, c.count, size)
		})
	}
}

func TestProcessQueueTakeMessages(t *testing.T) {
	pq := newPQ(t, 4, 2, 3, 1, 5)
	if got := offsetsOf(pq.takeMessages(2)); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("took %v, want [1 2]", got)
	}
	checkStats(t, pq, 5, 2+3+4+5+6) // taken messages still count
	if got := pq.MaxSpan(); got != 2 {
		t.Errorf("MaxSpan of the rest = %d, want 2", got)
	}
	if got := offsetsOf(pq.takeMessages(0)); !slices.Equal(got, []int64{3}) {
		t.Errorf("TakeMessages(0) took %v, want [3]", got)
	}
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{4, 5}) {
		t.Errorf("took %v, want [4 5]", got)
	}
	if pq.hasCached() {
		t.Error("hasCached after taking everything")
	}
}

func TestProcessQueueCommit(t *testing.T) {
	pq := newPQ(t, 1, 2, 3, 4)
	if got := pq.Commit(); got != -1 {
		t.Errorf("Commit with nothing taken = %d, want -1", got)
	}
	pq.takeMessages(3)
	if got := pq.Commit(); got != 4 {
		t.Errorf("Commit = %d, want 4", got)
	}
	checkStats(t, pq, 1, 5)
	if got := pq.Commit(); got != -1 {
		t.Errorf("second Commit = %d, want -1", got)
	}
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{4}) {
		t.Errorf("took %v after commit, want [4]", got)
	}
}

func TestProcessQueueRollback(t *testing.T) {
	pq := newPQ(t, 1, 2, 3)
	pq.takeMessages(2)
	pq.Rollback()
	checkStats(t, pq, 3, 2+3+4)
	if got := pq.Commit(); got != -1 {
		t.Errorf("Commit after Rollback = %d, want -1", got)
	}
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("took %v after rollback, want [1 2 3]", got)
	}
}

func TestProcessQueueMakeMessagesToConsumeAgain(t *testing.T) {
	pq := newPQ(t, 1, 2, 3, 4)
	taken := pq.takeMessages(3)
	pq.MakeMessagesToConsumeAgain(append(taken[2:3], pqMsgs(9)...)) // 3, and 9 never taken
	checkStats(t, pq, 4, 2+3+4+5)
	if got := pq.Commit(); got != 3 {
		t.Errorf("Commit = %d, want 3 (1 and 2 consumed)", got)
	}
	if got := offsetsOf(pq.takeMessages(10)); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("took %v, want [3 4]", got)
	}
}

func TestProcessQueueCleanExpired(t *testing.T) {
	const timeout = 15 * time.Minute
	errSend := errors.New("send back failed")
	for _, c := range []struct {
		name    string
		started []int64 // marked at the start, then 20 min pass
		late    []int64 // marked 10 min in
		limit   int
		failAt  int64 // sendBack fails for this offset
		want    []int64
	}{
		{"expired prefix", []int64{0, 1, 2}, []int64{3}, 16, -1, []int64{0, 1, 2}},
		{"limit", []int64{0, 1, 2}, nil, 2, -1, []int64{0, 1}},
		{"first not started", []int64{1, 2}, nil, 16, -1, nil},
		{"first not expired", []int64{1, 2}, []int64{0}, 16, -1, nil},
		{"send back fails", []int64{0, 1, 2}, nil, 16, 1, []int64{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pq := newPQ(t, 0, 1, 2, 3, 4)
				pq.markConsumeStart(pqMsgs(c.started...), monoNow(), nil)
				time.Sleep(10 * time.Minute)
				pq.markConsumeStart(pqMsgs(c.late...), monoNow(), nil)
				time.Sleep(10 * time.Minute)
				var sent []int64
				calls := 0
				n := pq.cleanExpired(timeout, c.limit, func(m *Message, _ *chunk) error {
					calls++
					if m.QueueOffset == c.failAt {
						return errSend
					}
					sent = append(sent, m.QueueOffset)
					return nil
				})
				if !slices.Equal(sent, c.want) {
					t.Errorf("sent back %v, want %v", sent, c.want)
				}
				wantCalls := len(c.want)
				if c.failAt >= 0 {
					wantCalls++ // it stops at the first failure
				}
				if calls != wantCalls {
					t.Errorf("sendBack called %d times, want %d", calls, wantCalls)
				}
				if n != len(c.want) {
					t.Errorf("CleanExpired = %d, want %d", n, len(c.want))
				}
				if got := pq.Count(); got != 5-int64(len(c.want)) {
					t.Errorf("Count = %d, want %d", got, 5-len(c.want))
				}
				// The committed offset moves past the removed messages.
				if got, want := pq.removeMessages(nil), int64(len(c.want)); got != want {
					t.Errorf("commit offset = %d, want %d", got, want)
				}
			})
		})
	}
}

func TestProcessQueueCleanExpiredNotYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pq := newPQ(t, 0)
		pq.markConsumeStart(pqMsgs(0), monoNow(), nil)
		time.Sleep(15 * time.Minute) // exactly the timeout: not older than it
		if n := pq.cleanExpired(15*time.Minute, 16, func(*Message, *chunk) error { return nil }); n != 0 {
			t.Errorf("CleanExpired at the timeout = %d, want 0", n)
		}
	})
}

func TestProcessQueueFlagsAndTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pq := newPQ(t)
		if pq.Dropped() || pq.Locked() {
			t.Fatal("new queue dropped or locked")
		}
		pq.SetDropped(true)
		if !pq.Dropped() {
			t.Error("Dropped = false after SetDropped(true)")
		}
		time.Sleep(time.Minute)
		if pq.IsPullExpired(time.Minute) || !pq.IsPullExpired(time.Minute-1) {
			t.Error("IsPullExpired wrong 1 min after a new queue's start: it counts from then")
		}
		time.Sleep(time.Minute)
		if !pq.IsPullExpired(time.Minute) || pq.IsPullExpired(3*time.Minute) {
			t.Error("IsPullExpired wrong 2 min after the last pull")
		}
		pq.SetLastPullTime(time.Now())
		if pq.IsPullExpired(time.Minute) {
			t.Error("IsPullExpired right after SetLastPullTime")
		}
		if !pq.isLockExpiredAt(time.Minute, monoNow()) {
			t.Error("lock expired = false 2 min after the last lock")
		}
		pq.SetLocked(true)
		if !pq.Locked() || pq.isLockExpiredAt(time.Minute, monoNow()) {
			t.Error("SetLocked(true) did not lock and stamp the lock time")
		}
		time.Sleep(30 * time.Second)
		if pq.isLockExpiredAt(30*time.Second, monoNow()) {
			t.Error("lock expired exactly 30 s after locking, expiry 30 s: not older than it")
		}
		time.Sleep(time.Nanosecond)
		if !pq.isLockExpiredAt(30*time.Second, monoNow()) {
			t.Error("lock not expired just over 30 s after locking, expiry 30 s")
		}
		pq.SetLocked(false)
		if pq.Locked() {
			t.Error("Locked after SetLocked(false)")
		}
	})
}

func TestNewProcessQueue(t *testing.T) {
	pq := newProcessQueue()
	checkStats(t, pq, 0, 0)
}

// TestProcessQueueConcurrent runs concurrent-mode producers and consumers against one
// queue under -race and checks the counters settle at zero.
func TestProcessQueueConcurrent(t *testing.T) {
	pq := newProcessQueue()
	const writers, per = 4, 500
	work := make(chan []*Message, 64)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < per; i += 10 {
				ms := pqMsgs()
				for j := range 10 {
					ms = append(ms, &Message{Message: mq.Message{Body: []byte("x")}, QueueOffset: int64(w*per + i + j)})
				}
				pq.PutMessages(ms)
				pq.PutMessages(ms[:3]) // duplicates
				work <- ms
			}
		})
	}
	var consumers sync.WaitGroup
	for range 4 {
		consumers.Go(func() {
			for ms := range work {
				pq.markConsumeStart(ms, monoNow(), nil)
				if off := pq.removeMessages(ms); off < 0 {
					t.Errorf("RemoveMessages = %d with messages cached", off)
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = pq.Count() + pq.Size() + pq.MaxSpan()
			_ = pq.Dropped() || pq.Locked() || pq.IsPullExpired(time.Minute) || pq.isLockExpiredAt(time.Minute, monoNow())
			pq.SetLocked(true)
			pq.SetLastPullTime(time.Now())
			pq.cleanExpired(time.Hour, 16, func(*Message, *chunk) error { return nil })
		}
	})
	wg.Wait()
	close(work)
	consumers.Wait()
	close(stop)
	readers.Wait()
	checkStats(t, pq, 0, 0)
	if got := pq.removeMessages(nil); got != -1 {
		t.Errorf("RemoveMessages on the empty queue = %d, want -1", got)
	}
}

// TestProcessQueueConcurrentOrderly runs puts against take/commit/rollback runs.
func TestProcessQueueConcurrentOrderly(t *testing.T) {
	pq := newProcessQueue()
	const total = 2000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(0); i < total; i += 20 {
			ms := pqMsgs()
			for j := range int64(20) {
				ms = append(ms, &Message{Message: mq.Message{Body: []byte("ab")}, QueueOffset: i + j})
			}
			pq.PutMessages(ms)
		}
	})
	var last int64 = -1
	deadline := time.Now().Add(20 * time.Second)
	wg.Go(func() {
		for n := 0; last < total; n++ {
			if time.Now().After(deadline) {
				t.Errorf("committed up to %d of %d before the deadline", last, total)
				return
			}
			got := pq.takeMessages(7)
			if len(got) == 0 {
				continue
			}
			if n%5 == 0 {
				pq.Rollback()
				continue
			}
			if n%7 == 0 {
				pq.MakeMessagesToConsumeAgain(got[len(got)-1:])
			}
			off := pq.Commit()
			if off == -1 {
				continue // the only message taken went back
			}
			if off <= last {
				t.Errorf("Commit = %d, not past %d", off, last)
				return
			}
			last = off
		}
	})
	wg.Wait()
	checkStats(t, pq, 0, 0)
}

// TestProcessQueueReusesItsArray: a consumer that keeps up (each pull's messages consumed
// before the next pull's, one pull lagging behind) keeps its cache in one array: putting
// and removing messages allocates nothing once the cache has its room; the cache holds,
// in order, every message put and not removed, and its array no other.
func TestProcessQueueReusesItsArray(t *testing.T) {
	for _, batch := range []int{32, 8, 5} {
		pq := newProcessQueue()
		var next int64
		var prev []*Message
		ring := [3][]*Message{} // messages reused once out of the cache: rounds allocate none
		for k := range ring {
			ring[k] = make([]*Message, batch)
			for j := range ring[k] {
				ring[k][j] = &Message{}
			}
		}
		rounds := 0
		round := func() {
			b := ring[rounds%len(ring)]
			rounds++
			for _, m := range b {
				m.QueueOffset = next
				next++
			}
			pq.PutMessages(b)
			if prev != nil {
				pq.removeMessages(prev) // the batch before: one lags
			}
			prev = b
		}
		check := func() {
			t.Helper()
			pq.mu.Lock()
			defer pq.mu.Unlock()
			if len(pq.msgs) != batch || pq.dead != 0 {
				t.Fatalf("batch %d: cache of %d entries (%d dead), want the last batch's", batch, len(pq.msgs), pq.dead)
			}
			for j, e := range pq.msgs {
				if e.msg != prev[j] || e.off != prev[j].QueueOffset {
					t.Fatalf("batch %d: cache entry %d at offset %d, want %d", batch, j, e.off, prev[j].QueueOffset)
				}
			}
			held := 0
			for _, e := range pq.buf[:cap(pq.buf)] {
				if e.msg != nil {
					held++
				}
			}
			if held != len(pq.msgs) {
				t.Fatalf("batch %d: the cache's array holds %d messages, the cache %d", batch, held, len(pq.msgs))
			}
		}
		for range 50 {
			round()
			check()
		}
		if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
			t.Fatalf("batch %d: a put and a removal allocated %.1f times", batch, allocs)
		}
	}
}
