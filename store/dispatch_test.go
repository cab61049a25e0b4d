package store

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestHandoffStaysSmall: the hand-off holds the entries of the appends in flight, at most
// maxHandoff of them, within its heap budget (it and the dispatcher's carry are live heap,
// which the GC's goal doubles). While the dispatch token is held, pipelined AppendAsync in
// sync mode (the one path on which an appender does not wait for its records' dispatch)
// fills it to maxHandoff and no further, and no acknowledgement comes (it waits for the
// dispatch); once the token is free, every batch is acknowledged, and the handed-over records
// were dispatched from their entries, none read back from the log (but the first of each
// segment).
func TestHandoffStaysSmall(t *testing.T) {
	const budget = 320 << 10 // bytes of one hand-off slice (its capacity may exceed maxHandoff)
	s := openStore(t, t.TempDir(), Options{SegmentSize: testSeg})
	defer s.Close()
	const n = 2 * maxHandoff
	var acked atomic.Int64
	s.dmu.Lock() // the dispatch token: nobody dispatches
	for i := 0; i < n; i += 4 {
		err := s.AppendAsync([]*Message{msg("S", 0, i), msg("S", 0, i+1), msg("S", 0, i+2), msg("S", 0, i+3)}, func(err error) {
			if err != nil {
				t.Error(err)
			}
			acked.Add(4)
		})
		if err != nil {
			s.unlockDispatch()
			t.Fatal(err)
		}
	}
	if err := s.log.Flush(); err != nil {
		s.unlockDispatch()
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // an acknowledgement that did not wait would come
	s.hmu.Lock()
	l, c := len(s.handoff), cap(s.handoff)
	s.hmu.Unlock()
	a := acked.Load()
	s.unlockDispatch()
	if a != 0 {
		t.Errorf("%d messages acknowledged while the dispatch token was held", a)
	}
	if l != maxHandoff {
		t.Errorf("hand-off of %d entries after %d appended, want %d", l, n, maxHandoff)
	}
	if size := uintptr(c) * unsafe.Sizeof(handoffEntry{}); size > budget {
		t.Errorf("hand-off slice of %d entries, %d bytes: want at most %d", c, size, budget)
	}
	deadline := time.Now().Add(10 * time.Second)
	for acked.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := acked.Load(); got != n {
		t.Fatalf("%d of %d messages acknowledged", got, n)
	}
	if got := s.MaxOffset("S", 0); got != n {
		t.Fatalf("%d messages in the queue, want %d", got, n)
	}
	s.dmu.Lock()
	fromHandoff := s.handedOverN
	s.unlockDispatch()
	// The first record of each segment is read from the log (a segment's start is where the
	// dispatcher looks first).
	if segs := s.log.Size() / s.log.SegmentSize(); fromHandoff < maxHandoff-segs || fromHandoff > maxHandoff {
		t.Errorf("%d of %d records dispatched from handed-over entries, want the %d handed over but the first of each of %d segments", fromHandoff, n, maxHandoff, segs)
	}
}

// TestDispatchDuringQueueSync: while the dispatcher's periodic sync waits for a queue's
// fdatasync, an append still dispatches its message itself (the arrival is reported before
// Append returns): the sync does not hold the dispatch token across the disk's wait.
func TestDispatchDuringQueueSync(t *testing.T) {
	g := vfstest.NewGatedFS(queuesDir, 0)
	var arrived atomic.Int64
	s := openStore(t, t.TempDir(), Options{FS: g, Flush: commitlog.FlushAsync, QueueFlushInterval: 5 * time.Millisecond,
		OnArrival: func(Arrival) { arrived.Add(1) }})
	defer s.Close()
	defer g.Open()     // a failed test leaves no sync at the gate for Close
	for i := range 2 { // the queue exists; then a message for the next sync to cover
		if i == 1 {
			g.Gates.Store(1)
		}
		if err := s.Append([]*Message{msg("S", 0, i)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-g.Entered: // the ticker's sync is in the queue's fdatasync
	case <-time.After(10 * time.Second):
		t.Fatal("no queue sync after 10 s")
	}
	err := s.Append([]*Message{msg("S", 0, 2)})
	n := arrived.Load()
	g.Release <- struct{}{}
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d arrivals after the third append, want 3: it waited for the queue sync", n)
	}
}
