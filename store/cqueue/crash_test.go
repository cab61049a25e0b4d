package cqueue

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// TestPowerCut appends, syncs, truncates, deletes and prepares the next file at random on a
// vfstest.CrashFS, cuts the power, and reopens: every entry synced before the cut must be
// there, nothing in [Min, Max) may fail to decode, and once the store's recovery truncates to
// the synced end and re-appends, the queue must be exact and stay so across another cut.
func TestPowerCut(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	const dir = "/data/cq/topic/0"
	var logs bytes.Buffer // recovery warnings of every reopen
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	wrong := 0 // unsynced entries that came back torn into other valid values
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		fs := vfstest.NewCrashFS()
		opts := &Options{FS: fs, SegmentEntries: 64} // 1280-byte files: entries straddle sectors
		q, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("seed %d: Open: %v", seed, err)
		}
		synced := int64(0) // entries [Min, synced) are durable
		for range rng.IntN(400) {
			switch r := rng.IntN(100); {
			case r < 3:
				if err := q.Sync(); err != nil {
					t.Fatalf("seed %d: Sync: %v", seed, err)
				}
				synced = q.Max()
			case r < 4:
				off := q.Min() + rng.Int64N(q.Max()-q.Min()+1)
				if err := q.TruncateFrom(off); err != nil {
					t.Fatalf("seed %d: TruncateFrom(%d): %v", seed, off, err)
				}
				synced = min(synced, q.Max())
			case r < 5:
				if _, err := q.DeleteBefore(ent(q.Min() + rng.Int64N(100)).Pos); err != nil {
					t.Fatalf("seed %d: DeleteBefore: %v", seed, err)
				}
			case r < 15:
				if q.PrepareDue() || r < 7 { // as the store does, and at random times
					if err := q.Prepare(); err != nil {
						t.Fatalf("seed %d: Prepare: %v", seed, err)
					}
				}
			default:
				off, restart := q.Max(), false
				if q.Min() == q.Max() && rng.IntN(2) == 0 {
					off, restart = off+1+rng.Int64N(100), true // an empty queue may restart further on
				}
				if err := q.Append(off, ent(off)); err != nil {
					t.Fatalf("seed %d: Append(%d): %v", seed, off, err)
				}
				if q.Max() != off+1 || restart && q.Min() != off {
					t.Fatalf("seed %d: after Append(%d): Min %d, Max %d", seed, off, q.Min(), q.Max())
				}
				if restart {
					synced = off // the restarted queue's file is durable at once
				}
			}
		}
		wantMin, wantMax := q.Min(), q.Max()
		cut := fs.Cut(rng) // q is abandoned, as a process is by a power cut

		opts = &Options{FS: cut, SegmentEntries: 64, Logger: logger}
		q2, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("seed %d: Open after cut: %v", seed, err)
		}
		lo, hi := q2.Min(), q2.Max()
		// Min may fall back (Min inside a file is not persisted), never forward.
		if hi < synced || hi > wantMax || lo > wantMin || lo > hi {
			t.Fatalf("seed %d: after cut Min, Max = %d, %d; before %d, %d; synced up to %d",
				seed, lo, hi, wantMin, wantMax, synced)
		}
		for off := lo; off < hi; off++ {
			e, err := q2.Get(off)
			if err != nil {
				t.Fatalf("seed %d: Get(%d) after cut: %v", seed, off, err)
			}
			// Unsynced entries may be torn into other valid values; synced ones may not.
			if e != ent(off) {
				if off < synced {
					t.Fatalf("seed %d: synced entry %d = %+v, want %+v", seed, off, e, ent(off))
				}
				wrong++
			}
		}
		// The store's recovery: drop what was not synced, re-dispatch, sync.
		if err := q2.TruncateFrom(max(synced, lo)); err != nil {
			t.Fatalf("seed %d: TruncateFrom: %v", seed, err)
		}
		start := q2.Max()
		appendRange(t, q2, start, start+70)
		if err := q2.Sync(); err != nil {
			t.Fatal(err)
		}
		q3, err := Open(dir, &Options{FS: cut.Cut(rng), SegmentEntries: 64})
		if err != nil {
			t.Fatalf("seed %d: Open after second cut: %v", seed, err)
		}
		checkQueue(t, q3, q2.Min(), start+70)
		if err := q3.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cuts := bytes.Count(logs.Bytes(), []byte("torn tail")) + bytes.Count(logs.Bytes(), []byte("past the end"))
	t.Logf("%d seeds: %d recoveries cut or zeroed a tail; %d unsynced entries came back torn but valid",
		seeds, cuts, wrong)
	if cuts == 0 {
		t.Fatalf("no cut tore a tail: the test does not exercise recovery")
	}
}

func TestDiskFullCrashFS(t *testing.T) {
	fs := vfstest.NewCrashFS()
	q := openQueue(t, "/q", &Options{FS: fs, SegmentEntries: 4})
	appendRange(t, q, 0, 4)
	fs.SetCapacity(4 * EntrySize)
	if err := q.Append(4, ent(4)); !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("Append(4) on a full disk = %v, want ErrNoSpace", err)
	}
	checkQueue(t, q, 0, 4)
	if names, err := fs.ReadDir("/q"); err != nil || len(names) != 1 {
		t.Fatalf("files = %v, %v; want only the first", names, err)
	}
	fs.SetCapacity(0)
	appendRange(t, q, 4, 9)
	checkQueue(t, q, 0, 9)
}
