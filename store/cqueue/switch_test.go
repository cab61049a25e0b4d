package cqueue

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestPowerCutAroundSwitch cuts the power before every fsync, directory fsync and rename of a
// queue that switches files many times, with the switch's work done ahead by Prepare for some
// files and by Append itself (the fallback) for others, and Syncs now and then. Every cut
// (losing all that is not durable, all but the step about to be taken, every name but no
// data, and random ones) must reopen to a queue that holds every synced entry, whose
// [Min, Max) all decode, and that appends and survives a clean cut after that.
// (Checked: it fails with the sync of the sealed file left out of the fallback switch, with
// Open not scanning the file before the last, and with new files' sizes not synced.)
func TestPowerCutAroundSwitch(t *testing.T) {
	const (
		dir     = "/q"
		perFile = 8
		total   = 8 * perFile
	)
	fs := vfstest.NewCrashFS()
	rng := rand.New(rand.NewPCG(1, 2))
	synced := int64(0) // entries below it are durable
	steps, cuts := 0, 0
	check := func(name string, cut *vfstest.CrashFS) {
		cuts++
		q, err := Open(dir, &Options{FS: cut, SegmentEntries: perFile})
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		defer q.Close()
		lo, hi := q.Min(), q.Max()
		if hi < synced {
			t.Fatalf("%s: Max %d after the cut, but %d entries were synced", name, hi, synced)
		}
		for off := lo; off < hi; off++ {
			e, err := q.Get(off)
			if err != nil {
				t.Fatalf("%s: Get(%d) of [%d, %d): %v", name, off, lo, hi, err)
			}
			if off < synced && e != ent(off) {
				t.Fatalf("%s: synced entry %d = %+v, want %+v", name, off, e, ent(off))
			}
		}
		if err := q.TruncateFrom(synced); err != nil {
			t.Fatalf("%s: TruncateFrom(%d): %v", name, synced, err)
		}
		appendRange(t, q, q.Max(), q.Max()+perFile+1)
		if err := q.Sync(); err != nil {
			t.Fatalf("%s: Sync: %v", name, err)
		}
		q2, err := Open(dir, &Options{FS: cut.CutClean(), SegmentEntries: perFile})
		if err != nil {
			t.Fatalf("%s: Open after appending: %v", name, err)
		}
		checkQueue(t, q2, lo, q.Max())
		_ = q2.Close()
	}
	sfs := vfstest.StepFS{FS: fs, Before: func(step vfstest.Step) {
		steps++
		name := fmt.Sprintf("step %d (%v %s)", steps, step.Op, step.Path)
		check(name+" clean", fs.CutClean())
		check(name+" all but", fs.CutAllBut(step))
		check(name+" names only", fs.CutNamesOnly())
		for i := range 3 {
			check(fmt.Sprintf("%s random %d", name, i), fs.Cut(rng))
		}
	}}
	q, err := Open(dir, &Options{FS: sfs, SegmentEntries: perFile})
	if err != nil {
		t.Fatal(err)
	}
	prepared := 0
	for off := int64(0); off < total; off++ {
		if err := q.Append(off, ent(off)); err != nil {
			t.Fatalf("Append(%d): %v", off, err)
		}
		if q.PrepareDue() && (off/perFile)%3 != 2 { // every third switch is left to Append
			if err := q.Prepare(); err != nil {
				t.Fatalf("Prepare at %d: %v", off, err)
			}
			prepared++
		}
		if off%13 == 12 {
			if err := q.Sync(); err != nil {
				t.Fatalf("Sync at %d: %v", off, err)
			}
			synced = off + 1
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	synced = total
	check("after Close", fs.CutClean())
	if prepared < 4 {
		t.Fatalf("Prepare ran %d times: the test does not exercise it", prepared)
	}
	t.Logf("%d steps, %d cuts checked, %d switches prepared ahead", steps, cuts, prepared)
}
