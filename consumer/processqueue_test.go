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
func newPQ(t *testing.T, offs ...int64) *ProcessQueue {
	t.Helper()
	pq := NewProcessQueue()
	if len(offs) > 0 {
		pq.PutMessages(pqMsgs(offs...))
	}
	return pq
}

// checkStats fails unless Count and Size are as given.
func checkStats(t *testing.T, pq *ProcessQueue, count, size int64) {
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
	if got := pq.QueueOffsetMax(); got != 5 {
		t.Errorf("QueueOffsetMax = %d, want 5", got)
	}
	if got := pq.MaxSpan(); got != 4 {
		t.Errorf("MaxSpan = %d, want 4", got)
	}
	if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{1, 2, 3, 5}) {
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
	if !pq.Consuming() {
		t.Error("Consuming = false after a dispatching put")
	}
	pq.TakeMessages(1)
	pq.Commit()
	if got := pq.TakeMessages(1); len(got) != 0 {
		t.Fatalf("take on empty = %v", offsetsOf(got))
	}
	if pq.Consuming() {
		t.Error("Consuming = true after an empty take")
	}
	if !pq.PutMessages(pqMsgs(1)) {
		t.Error("put after the run ended: dispatch = false, want true")
	}
}

func TestProcessQueuePutIgnoresTaken(t *testing.T) {
	pq := newPQ(t, 0, 1)
	pq.TakeMessages(1)
	pq.PutMessages(pqMsgs(0, 2))
	checkStats(t, pq, 3, 1+2+3)
	if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("took %v, want [1 2]", got)
	}
}

func TestProcessQueueMsgAccCount(t *testing.T) {
	pq := newPQ(t)
	ms := pqMsgs(4, 5)
	ms[1].Properties = map[string]string{"MAX_OFFSET": "12"}
	pq.PutMessages(ms)
	if got := pq.MsgAccCount(); got != 7 {
		t.Errorf("MsgAccCount = %d, want 7", got)
	}
	pq.SetMsgAccCount(3)
	if got := pq.MsgAccCount(); got != 3 {
		t.Errorf("MsgAccCount = %d, want 3", got)
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
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				pq := newPQ(t, c.cached...)
				time.Sleep(time.Minute)
				if got := pq.RemoveMessages(pqMsgs(c.remove...)); got != c.want {
					t.Errorf("RemoveMessages = %d, want %d", got, c.want)
				}
				var size int64
				for _, o := range c.cached {
					if !slices.Contains(c.remove, o) {
						size += o + 1
					}
				}
				checkStats(t, pq, c.count, size)
				if got := pq.LastConsumeTime(); !got.Equal(start.Add(time.Minute)) {
					t.Errorf("LastConsumeTime = %v, want %v", got, start.Add(time.Minute))
				}
			})
		})
	}
}

func TestProcessQueueTakeMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		pq := newPQ(t, 4, 2, 3, 1, 5)
		time.Sleep(time.Second)
		if got := offsetsOf(pq.TakeMessages(2)); !slices.Equal(got, []int64{1, 2}) {
			t.Errorf("took %v, want [1 2]", got)
		}
		checkStats(t, pq, 5, 2+3+4+5+6) // taken messages still count
		if got := pq.MaxSpan(); got != 2 {
			t.Errorf("MaxSpan of the rest = %d, want 2", got)
		}
		if got := offsetsOf(pq.TakeMessages(0)); !slices.Equal(got, []int64{3}) {
			t.Errorf("TakeMessages(0) took %v, want [3]", got)
		}
		if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{4, 5}) {
			t.Errorf("took %v, want [4 5]", got)
		}
		if pq.HasCached() {
			t.Error("HasCached after taking everything")
		}
		if got := pq.LastConsumeTime(); !got.Equal(start.Add(time.Second)) {
			t.Errorf("LastConsumeTime = %v", got)
		}
	})
}

func TestProcessQueueCommit(t *testing.T) {
	pq := newPQ(t, 1, 2, 3, 4)
	if got := pq.Commit(); got != -1 {
		t.Errorf("Commit with nothing taken = %d, want -1", got)
	}
	pq.TakeMessages(3)
	if got := pq.Commit(); got != 4 {
		t.Errorf("Commit = %d, want 4", got)
	}
	checkStats(t, pq, 1, 5)
	if got := pq.Commit(); got != -1 {
		t.Errorf("second Commit = %d, want -1", got)
	}
	if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{4}) {
		t.Errorf("took %v after commit, want [4]", got)
	}
}

func TestProcessQueueRollback(t *testing.T) {
	pq := newPQ(t, 1, 2, 3)
	pq.TakeMessages(2)
	pq.Rollback()
	checkStats(t, pq, 3, 2+3+4)
	if got := pq.Commit(); got != -1 {
		t.Errorf("Commit after Rollback = %d, want -1", got)
	}
	if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("took %v after rollback, want [1 2 3]", got)
	}
}

func TestProcessQueueMakeMessagesToConsumeAgain(t *testing.T) {
	pq := newPQ(t, 1, 2, 3, 4)
	taken := pq.TakeMessages(3)
	pq.MakeMessagesToConsumeAgain(append(taken[2:3], pqMsgs(9)...)) // 3, and 9 never taken
	checkStats(t, pq, 4, 2+3+4+5)
	if got := pq.Commit(); got != 3 {
		t.Errorf("Commit = %d, want 3 (1 and 2 consumed)", got)
	}
	if got := offsetsOf(pq.TakeMessages(10)); !slices.Equal(got, []int64{3, 4}) {
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
				pq.MarkConsumeStart(pqMsgs(c.started...))
				time.Sleep(10 * time.Minute)
				pq.MarkConsumeStart(pqMsgs(c.late...))
				time.Sleep(10 * time.Minute)
				var sent []int64
				calls := 0
				n := pq.CleanExpired(timeout, c.limit, func(m *Message) error {
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
				if got, want := pq.RemoveMessages(nil), int64(len(c.want)); got != want {
					t.Errorf("commit offset = %d, want %d", got, want)
				}
			})
		})
	}
}

func TestProcessQueueCleanExpiredNotYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pq := newPQ(t, 0)
		pq.MarkConsumeStart(pqMsgs(0))
		time.Sleep(15 * time.Minute) // exactly the timeout: not older than it
		if n := pq.CleanExpired(15*time.Minute, 16, func(*Message) error { return nil }); n != 0 {
			t.Errorf("CleanExpired at the timeout = %d, want 0", n)
		}
	})
}

func TestProcessQueueFlagsAndTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		pq := newPQ(t)
		if pq.Dropped() || pq.Locked() {
			t.Fatal("new queue dropped or locked")
		}
		pq.SetDropped(true)
		if !pq.Dropped() {
			t.Error("Dropped = false after SetDropped(true)")
		}
		if got := pq.LastPullTime(); !got.Equal(start) {
			t.Errorf("LastPullTime = %v, want the clock's start", got)
		}
		time.Sleep(2 * time.Minute)
		if !pq.IsPullExpired(time.Minute) || pq.IsPullExpired(3*time.Minute) {
			t.Error("IsPullExpired wrong 2 min after the last pull")
		}
		pq.SetLastPullTime(time.Now())
		if pq.IsPullExpired(time.Minute) {
			t.Error("IsPullExpired right after SetLastPullTime")
		}
		if !pq.IsLockExpired(time.Minute) {
			t.Error("IsLockExpired = false 2 min after the last lock")
		}
		pq.SetLocked(true)
		if !pq.Locked() || pq.IsLockExpired(time.Minute) {
			t.Error("SetLocked(true) did not lock and stamp the lock time")
		}
		time.Sleep(31 * time.Second)
		if !pq.IsLockExpired(30 * time.Second) {
			t.Error("IsLockExpired = false 31 s after locking, expiry 30 s")
		}
		pq.SetLastLockTime(time.Now())
		if pq.IsLockExpired(30*time.Second) || !pq.LastLockTime().Equal(time.Now()) {
			t.Error("SetLastLockTime not applied")
		}
		pq.SetLocked(false)
		if pq.Locked() {
			t.Error("Locked after SetLocked(false)")
		}
		pq.IncTryUnlockTimes()
		pq.IncTryUnlockTimes()
		if got := pq.TryUnlockTimes(); got != 2 {
			t.Errorf("TryUnlockTimes = %d, want 2", got)
		}
	})
}

func TestProcessQueueClear(t *testing.T) {
	pq := newPQ(t, 1, 2, 3)
	pq.TakeMessages(1)
	pq.Clear()
	checkStats(t, pq, 0, 0)
	if pq.HasCached() || pq.Commit() != -1 || pq.QueueOffsetMax() != 0 {
		t.Error("Clear left messages behind")
	}
}

func TestNewProcessQueue(t *testing.T) {
	before := time.Now()
	pq := NewProcessQueue()
	if got := pq.LastPullTime(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("LastPullTime = %v, want about now", got)
	}
	checkStats(t, pq, 0, 0)
}

// TestProcessQueueConcurrent runs concurrent-mode producers and consumers against one
// queue under -race and checks the counters settle at zero.
func TestProcessQueueConcurrent(t *testing.T) {
	pq := NewProcessQueue()
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
				pq.MarkConsumeStart(ms)
				if off := pq.RemoveMessages(ms); off < 0 {
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
			_ = pq.Count() + pq.Size() + pq.MaxSpan() + pq.MsgAccCount()
			_ = pq.Dropped() || pq.Locked() || pq.IsPullExpired(time.Minute) || pq.IsLockExpired(time.Minute)
			pq.SetLocked(true)
			pq.SetLastPullTime(time.Now())
			pq.CleanExpired(time.Hour, 16, func(*Message) error { return nil })
		}
	})
	wg.Wait()
	close(work)
	consumers.Wait()
	close(stop)
	readers.Wait()
	checkStats(t, pq, 0, 0)
	if got := pq.RemoveMessages(nil); got != -1 {
		t.Errorf("RemoveMessages on the empty queue = %d, want -1", got)
	}
}

// TestProcessQueueConcurrentOrderly runs puts against take/commit/rollback runs.
func TestProcessQueueConcurrentOrderly(t *testing.T) {
	pq := NewProcessQueue()
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
			got := pq.TakeMessages(7)
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
