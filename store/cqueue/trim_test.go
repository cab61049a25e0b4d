package cqueue

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTruncateFrom(t *testing.T) {
	tests := []struct {
		name      string
		off       int64
		wantMax   int64
		wantFiles []int64
	}{
		{"past max", 12, 10, []int64{0, 4, 8}},
		{"at max", 10, 10, []int64{0, 4, 8}},
		{"last entry", 9, 9, []int64{0, 4, 8}},
		{"start of last file", 8, 8, []int64{0, 4, 8}},
		{"end of sealed file", 7, 7, []int64{0, 4}},
		{"start of sealed file", 4, 4, []int64{0, 4}},
		{"middle of first file", 2, 2, []int64{0}},
		{"everything", 0, 0, []int64{0}},
		{"below min", -5, 0, []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			q := openQueue(t, dir, segOpts(4))
			appendRange(t, q, 0, 10)
			if err := q.TruncateFrom(tt.off); err != nil {
				t.Fatalf("TruncateFrom(%d): %v", tt.off, err)
			}
			checkQueue(t, q, 0, tt.wantMax)
			checkFiles(t, dir, tt.wantFiles...)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			// On disk too: the removed entries are zeroed, not just forgotten.
			q = openQueue(t, dir, segOpts(4))
			checkQueue(t, q, 0, tt.wantMax)
			appendRange(t, q, tt.wantMax, 14)
			checkQueue(t, q, 0, 14)
		})
	}
}

func TestTruncateFromAfterDeleteBefore(t *testing.T) {
	q := openQueue(t, t.TempDir(), segOpts(4))
	appendRange(t, q, 0, 10)
	if _, err := q.DeleteBefore(ent(6).Pos); err != nil {
		t.Fatal(err)
	}
	if err := q.TruncateFrom(2); err != nil {
		t.Fatal(err)
	}
	checkQueue(t, q, 6, 6)
	appendRange(t, q, 6, 9)
	checkQueue(t, q, 6, 9)
}

func TestTruncateFromRemoveFails(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	q := openQueue(t, dir, &Options{FS: fs, SegmentEntries: 4})
	appendRange(t, q, 0, 10)
	fs.failRemove.Store(true)
	err := q.TruncateFrom(1)
	if err == nil {
		t.Fatal("TruncateFrom with failing Remove succeeded")
	}
	fs.failRemove.Store(false)
	// The disk no longer matches Max: writes must refuse until the queue is reopened.
	if err2 := q.Append(1, ent(1)); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Append after failed truncate = %v, want %v", err2, err)
	}
	checkQueue(t, q, 0, 1)
	if err2 := q.Close(); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Close after failed truncate = %v, want %v", err2, err)
	}
}

func TestDeleteBefore(t *testing.T) {
	tests := []struct {
		name      string
		pos       int64
		wantDel   int
		wantMin   int64
		wantFiles []int64
	}{
		{"nothing", ent(0).Pos, 0, 0, []int64{0, 4, 8}},
		{"inside first file", ent(3).Pos, 0, 3, []int64{0, 4, 8}},
		{"first file", ent(4).Pos, 1, 4, []int64{4, 8}},
		{"inside second file", ent(6).Pos + 1, 1, 7, []int64{4, 8}},
		{"sealed files", ent(8).Pos, 2, 8, []int64{8}},
		{"active file kept", ent(9).Pos, 2, 9, []int64{8}},
		{"everything", 1 << 50, 2, 10, []int64{8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			q := openQueue(t, dir, segOpts(4))
			appendRange(t, q, 0, 10)
			del, err := q.DeleteBefore(tt.pos)
			if del != tt.wantDel || err != nil {
				t.Fatalf("DeleteBefore(%d) = %d, %v; want %d, nil", tt.pos, del, err, tt.wantDel)
			}
			checkQueue(t, q, tt.wantMin, 10)
			checkFiles(t, dir, tt.wantFiles...)
			if tt.wantMin > 0 {
				if _, err := q.Get(tt.wantMin - 1); !errors.Is(err, ErrOffsetTooSmall) {
					t.Fatalf("Get(Min-1) = %v, want ErrOffsetTooSmall", err)
				}
			}
			appendRange(t, q, 10, 13)
			checkQueue(t, q, tt.wantMin, 13)
		})
	}
}

// TestDeleteBeforeConcurrentReaders deletes files under readers that keep reading them:
// each read must return the right entries or ErrOffsetTooSmall, never a closed-file error.
func TestDeleteBeforeConcurrentReaders(t *testing.T) {
	const total = 400
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, total)
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		tooOld atomic.Int64
	)
	for r := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			buf := make([]Entry, 1+r)
			for !stop.Load() {
				off := rng.Int64N(total)
				n, err := q.Read(off, buf)
				if errors.Is(err, ErrOffsetTooSmall) {
					tooOld.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("Read(%d): %v", off, err)
					return
				}
				for i, e := range buf[:n] {
					if e != ent(off+int64(i)) {
						t.Errorf("Read(%d)[%d] = %+v, want %+v", off, i, e, ent(off+int64(i)))
						return
					}
				}
			}
		})
	}
	deleted := 0
	for k := int64(0); k <= total; k += 3 {
		n, err := q.DeleteBefore(ent(k).Pos)
		if err != nil {
			t.Fatalf("DeleteBefore(pos of %d): %v", k, err)
		}
		deleted += n
		if k%40 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	if deleted != total/4-1 {
		t.Fatalf("deleted %d files, want %d", deleted, total/4-1)
	}
	checkQueue(t, q, total-1, total)
	if tooOld.Load() == 0 {
		t.Fatalf("no reader saw ErrOffsetTooSmall: the test did not race reads with deletes")
	}
}
