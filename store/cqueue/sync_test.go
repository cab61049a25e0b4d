package cqueue

import (
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// gateWait bounds every wait of these tests: a step that does not come fails the test
// instead of hanging it.
const gateWait = 10 * time.Second

// entered waits until a Sync reaches g's gate, or fails the test when synced reports that
// the Sync returned without reaching it, or after gateWait.
func entered(t *testing.T, g vfstest.GatedFS, synced <-chan error, what string) {
	t.Helper()
	select {
	case <-g.Entered:
	case err := <-synced:
		t.Fatalf("%s returned (%v) without an fdatasync", what, err)
	case <-time.After(gateWait):
		t.Fatalf("%s: no fdatasync after %v", what, gateWait)
	}
}

// release lets the Sync at g's gate go on and returns its result, failing the test after
// gateWait.
func release(t *testing.T, g vfstest.GatedFS, synced <-chan error) error {
	t.Helper()
	select {
	case g.Release <- struct{}{}:
	case <-time.After(gateWait):
		t.Fatalf("no Sync at the gate after %v", gateWait)
	}
	select {
	case err := <-synced:
		return err
	case <-time.After(gateWait):
		t.Fatalf("Sync did not return %v after its fdatasync", gateWait)
		return nil
	}
}

// TestSyncLetsAppendsGoOn: while Sync's fdatasync is in flight, Appends and reads go on;
// an Append that came during it leaves the queue dirty, so the next Sync syncs again. Every
// wait is bounded. (Checked: with Sync skipping its fdatasync, it fails at once, saying so;
// with the second Sync finding the queue clean, too.)
func TestSyncLetsAppendsGoOn(t *testing.T) {
	g := vfstest.NewGatedFS("", 0)
	q := openQueue(t, t.TempDir(), &Options{FS: g, SegmentEntries: 1024})
	defer g.Open() // a failed test leaves no Sync at the gate for Close
	appendRange(t, q, 0, 10)
	g.Gates.Store(2) // the two syncs below wait at the gate (not the new file's); Close's passes
	synced := make(chan error, 1)
	go func() { synced <- q.Sync() }()
	entered(t, g, synced, "Sync of 10 entries") // the fdatasync is in flight
	appended := make(chan struct{})
	go func() {
		appendRange(t, q, 10, 20)
		close(appended)
	}()
	select {
	case <-appended:
	case <-time.After(gateWait):
		t.Fatal("Append waited for the fdatasync of a Sync")
	}
	if got, err := q.Get(15); err != nil || got != ent(15) {
		t.Fatalf("Get(15) during the sync: %+v, %v", got, err)
	}
	if err := release(t, g, synced); err != nil {
		t.Fatal(err)
	}
	// Entries 10-19 came during that sync: the next one must sync again.
	go func() { synced <- q.Sync() }()
	entered(t, g, synced, "Sync after appends during the last one")
	if err := release(t, g, synced); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteWaitsForSync: retention does not close a file whose fdatasync is in flight (a
// sync of a closed file would fail, or reach another file reusing the descriptor); it
// deletes it once the sync is done.
func TestDeleteWaitsForSync(t *testing.T) {
	g := vfstest.NewGatedFS("", 0)
	q := openQueue(t, t.TempDir(), &Options{FS: g, SegmentEntries: 4})
	appendRange(t, q, 0, 4) // fills file 0
	g.Gates.Store(1)        // only the next sync waits at the gate (not the new file's)
	synced := make(chan error, 1)
	defer g.Open()
	go func() { synced <- q.Sync() }()
	entered(t, g, synced, "Sync of file 0") // syncing file 0
	appendRange(t, q, 4, 6)                 // file 1 is active now; file 0 is sealed
	deleted := make(chan error, 1)
	go func() {
		n, err := q.DeleteBefore(ent(5).Pos)
		if err == nil && n != 1 {
			t.Errorf("DeleteBefore deleted %d files, want 1", n)
		}
		deleted <- err
	}()
	select {
	case err := <-deleted:
		g.Release <- struct{}{}
		t.Fatalf("DeleteBefore returned (%v) with the sync of the file in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.Release <- struct{}{}
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if q.Min() != 5 {
		t.Fatalf("Min %d after deleting before entry 5", q.Min())
	}
}
