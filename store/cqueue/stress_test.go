package cqueue

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestConcurrentStress runs one writer, a retention loop and many readers: random
// readers, and tailing readers that follow Max as a caught-up consumer does. Every entry
// read must be the one appended at its offset.
//
// On vfs.OS the race detector cannot see the mapped bytes; on vfstest.CrashFS mappings are Go
// memory, so it checks that no reader touches bytes the writer is writing.
//
// The "dropping" run has 80 KiB files and a one-page resident window, so that Append drops
// pages behind itself every page of entries and readers sweep the file under each other.
func TestConcurrentStress(t *testing.T) {
	t.Run("os", func(t *testing.T) { testConcurrentStress(t, t.TempDir(), &Options{SegmentEntries: 256}) })
	t.Run("crashfs", func(t *testing.T) {
		testConcurrentStress(t, "/stress", &Options{FS: vfstest.NewCrashFS(), SegmentEntries: 256})
	})
	t.Run("dropping", func(t *testing.T) {
		testConcurrentStress(t, t.TempDir(), &Options{SegmentEntries: 4096, ResidentBytes: 1})
	})
}

func testConcurrentStress(t *testing.T, dir string, opts *Options) {
	total := int64(20000)
	if testing.Short() {
		total = 2000
	}
	q := openQueue(t, dir, opts)
	done := make(chan struct{})
	var wg sync.WaitGroup
	check := func(off int64, es []Entry) bool {
		for i, e := range es {
			if e != ent(off+int64(i)) {
				t.Errorf("entry %d = %+v, want %+v", off+int64(i), e, ent(off+int64(i)))
				return false
			}
		}
		return true
	}
	for r := range 4 { // random readers
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			buf := make([]Entry, 32)
			for {
				select {
				case <-done:
					return
				default:
				}
				lo, hi := q.Min(), q.Max()
				if hi == lo {
					continue
				}
				off := lo + rng.Int64N(hi-lo)
				n, err := q.Read(off, buf[:1+rng.IntN(len(buf))])
				if errors.Is(err, ErrOffsetTooSmall) {
					continue
				}
				if err != nil {
					t.Errorf("Read(%d): %v", off, err)
					return
				}
				if !check(off, buf[:n]) {
					return
				}
			}
		})
	}
	for range 2 { // tailing readers
		wg.Go(func() {
			buf := make([]Entry, 32)
			for off := int64(0); off < total; {
				n, err := q.Read(off, buf)
				if errors.Is(err, ErrOffsetTooSmall) {
					off = q.Min()
					continue
				}
				if err != nil {
					t.Errorf("Read(%d): %v", off, err)
					return
				}
				if !check(off, buf[:n]) {
					return
				}
				off += int64(n)
			}
		})
	}
	retain := make(chan struct{}, 1)
	wg.Go(func() { // retention keeps about 1000 entries, when the writer kicks it
		for {
			select {
			case <-done:
				return
			case <-retain:
			}
			if _, err := q.DeleteBefore(ent(q.Max() - 1000).Pos); err != nil {
				t.Errorf("DeleteBefore: %v", err)
				return
			}
		}
	})
	for off := int64(0); off < total; off++ {
		if err := q.Append(off, ent(off)); err != nil {
			t.Fatalf("Append(%d): %v", off, err)
		}
		if off%500 == 0 {
			select {
			case retain <- struct{}{}:
			default:
			}
		}
		if off%1000 == 0 {
			if err := q.Sync(); err != nil {
				t.Fatalf("Sync: %v", err)
			}
		}
	}
	close(done)
	wg.Wait()
	checkQueue(t, q, q.Min(), total)
}
