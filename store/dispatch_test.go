package store

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestHandoffStaysSmall: while the dispatcher cannot run, appenders hand over entries until
// half of maxHandoff are pending, then wait to help dispatch instead of appending on; so the
// hand-off stays within its heap budget (it and the dispatcher's carry are live heap, which
// the GC's goal doubles), and once the dispatch token is free again every record is
// dispatched from its handed-over entry, none read back from the log (but the first of
// each segment).
func TestHandoffStaysSmall(t *testing.T) {
	const budget = 320 << 10 // bytes of one hand-off slice (its capacity may exceed maxHandoff)
	dir := t.TempDir()
	s := openStore(t, dir, Options{Flush: commitlog.FlushAsync, SegmentSize: testSeg})
	defer s.Close()
	const n = 3 * maxHandoff
	s.dmu.Lock() // the dispatch token: nobody dispatches
	appended := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 4 {
			if err := s.Append([]*Message{msg("S", 0, i), msg("S", 0, i+1), msg("S", 0, i+2), msg("S", 0, i+3)}); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	handed := func() int {
		s.hmu.Lock()
		defer s.hmu.Unlock()
		return len(s.handoff)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.handoffHigh.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l := handed()
	time.Sleep(50 * time.Millisecond) // an appender that did not wait would append on
	select {
	case err := <-appended:
		s.dmu.Unlock()
		t.Fatalf("the appender went on while dispatch lagged by %d entries (err %v)", l, err)
	default:
	}
	if l2 := handed(); l2 != l || l < maxHandoff/2 || l > maxHandoff/2+4 {
		s.dmu.Unlock()
		t.Fatalf("hand-off of %d, then %d entries while the appender waits, want %d to %d, unchanged", l, l2, maxHandoff/2, maxHandoff/2+4)
	}
	s.hmu.Lock()
	c := cap(s.handoff)
	s.hmu.Unlock()
	if size := uintptr(c) * unsafe.Sizeof(handoffEntry{}); size > budget {
		t.Errorf("hand-off slice of %d entries, %d bytes: want at most %d", c, size, budget)
	}
	s.dmu.Unlock()
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, s)
	if got := s.MaxOffset("S", 0); got != n {
		t.Fatalf("%d messages in the queue, want %d", got, n)
	}
	s.dmu.Lock()
	fromHandoff := s.handedOverN
	s.dmu.Unlock()
	// The first record of each segment is read from the log (a segment's start is where the
	// dispatcher looks first).
	if segs := s.log.Size() / s.log.SegmentSize(); n-fromHandoff > segs {
		t.Errorf("%d of %d records dispatched from handed-over entries, want all but the first of each of %d segments", fromHandoff, n, segs)
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
	for i := range 2 { // the queue exists; then a message for the next sync to cover
		if i == 1 {
			g.Gates.Store(1)
		}
		if err := s.Append([]*Message{msg("S", 0, i)}); err != nil {
			t.Fatal(err)
		}
	}
	<-g.Entered // the ticker's sync is in the queue's fdatasync
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
