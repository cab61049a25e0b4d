package commitlog

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// segmentSyncs returns a CrashFS that counts the fsyncs of segment files (opened under their
// prealloc-*.tmp names), and the counter.
func segmentSyncs() (vfstest.StepFS, *atomic.Int64) {
	n := new(atomic.Int64)
	return vfstest.StepFS{FS: vfstest.NewCrashFS(), Before: func(s vfstest.Step) {
		if s.Op == vfstest.StepSync && strings.Contains(s.Path, "prealloc-") {
			n.Add(1)
		}
	}}, n
}

// TestLinger checks, on a fake clock, when a sync-mode log with Linger acknowledges: an
// append is durable exactly Linger after it woke the flusher, not before; appends within
// the Linger share its one fsync; a page of unflushed records ends the wait at once; and
// without Linger a lone append is synced at once.
func TestLinger(t *testing.T) {
	const linger = 10 * time.Millisecond
	small := []byte("telemetry")
	page := bytes.Repeat([]byte{'p'}, LingerPage)
	for _, c := range []struct {
		name      string
		linger    time.Duration
		appends   [][]byte      // appended one after the other
		gap       time.Duration // between appends
		wantAfter time.Duration // from the first append to the acknowledgement of all
		wantSyncs int64         // segment fsyncs covering them
	}{
		{name: "one append waits the linger", linger: linger, appends: [][]byte{small}, wantAfter: linger, wantSyncs: 1},
		{name: "appends within the linger share its fsync", linger: linger, appends: [][]byte{small, small, small},
			gap: 3 * time.Millisecond, wantAfter: linger, wantSyncs: 1},
		{name: "a page ends the linger", linger: linger, appends: [][]byte{small, page}, gap: 2 * time.Millisecond,
			wantAfter: 2 * time.Millisecond, wantSyncs: 1},
		{name: "no linger syncs at once", appends: [][]byte{small}, wantSyncs: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs, syncs := segmentSyncs()
				l, err := Open("/log", &Options{FS: fs, Flush: FlushSync, Linger: c.linger, SegmentSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				synctest.Wait() // the preparer has synced the next segment's file
				syncs.Store(0)
				start := time.Now()
				var end int64
				for i, p := range c.appends {
					if i > 0 {
						time.Sleep(c.gap)
					}
					if end, err = l.Append(1, [][]byte{p}, nil); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
					if i < len(c.appends)-1 && l.Durable() >= end {
						t.Fatalf("append %d durable after %v, before the linger of %v ended", i, time.Since(start), c.linger)
					}
				}
				if err := l.WaitDurable(end); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != c.wantAfter {
					t.Errorf("acknowledged after %v, want %v", got, c.wantAfter)
				}
				if got := syncs.Load(); got != c.wantSyncs {
					t.Errorf("%d segment fsyncs, want %d", got, c.wantSyncs)
				}
			})
		})
	}
}
