package cqueue

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/vfs"
)

// gatedFS is the OS file system with a gate on fdatasync: each Sync of a file announces
// itself on entered and waits for release, while gates is positive (then it counts down;
// after, Syncs pass).
type gatedFS struct {
	vfs.FS
	entered, release chan struct{}
	gates            *atomic.Int32
}

func newGatedFS(gates int32) gatedFS {
	g := gatedFS{vfs.OS, make(chan struct{}), make(chan struct{}), new(atomic.Int32)}
	g.gates.Store(gates)
	return g
}

func (g gatedFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gatedFile{f, g}, nil
}

type gatedFile struct {
	vfs.File
	g gatedFS
}

func (f gatedFile) Sync() error {
	if f.g.gates.Add(-1) >= 0 {
		f.g.entered <- struct{}{}
		<-f.g.release
	}
	return f.File.Sync()
}

// TestSyncLetsAppendsGoOn: while Sync's fdatasync is in flight, Appends and reads go on;
// an Append that came during it leaves the queue dirty, so the next Sync syncs again.
func TestSyncLetsAppendsGoOn(t *testing.T) {
	g := newGatedFS(2) // the two syncs below wait at the gate; Close's passes
	q := openQueue(t, t.TempDir(), &Options{FS: g, SegmentEntries: 1024})
	appendRange(t, q, 0, 10)
	synced := make(chan error, 1)
	go func() { synced <- q.Sync() }()
	<-g.entered // the fdatasync is in flight
	appended := make(chan struct{})
	go func() {
		appendRange(t, q, 10, 20)
		close(appended)
	}()
	select {
	case <-appended:
	case <-time.After(10 * time.Second):
		t.Fatal("Append waited for the fdatasync of a Sync")
	}
	if got, err := q.Get(15); err != nil || got != ent(15) {
		t.Fatalf("Get(15) during the sync: %+v, %v", got, err)
	}
	g.release <- struct{}{}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	// Entries 10-19 came during that sync: the next one must sync again.
	go func() { synced <- q.Sync() }()
	select {
	case <-g.entered:
	case err := <-synced:
		t.Fatalf("Sync after appends during the last one returned (%v) without syncing", err)
	}
	g.release <- struct{}{}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
}

// TestDeleteWaitsForSync: retention does not close a file whose fdatasync is in flight (a
// sync of a closed file would fail, or reach another file reusing the descriptor); it
// deletes it once the sync is done.
func TestDeleteWaitsForSync(t *testing.T) {
	g := newGatedFS(1) // only the first sync waits at the gate
	q := openQueue(t, t.TempDir(), &Options{FS: g, SegmentEntries: 4})
	appendRange(t, q, 0, 4) // fills file 0
	synced := make(chan error, 1)
	go func() { synced <- q.Sync() }()
	<-g.entered             // syncing file 0
	appendRange(t, q, 4, 6) // file 1 is active now; file 0 is sealed
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
		g.release <- struct{}{}
		t.Fatalf("DeleteBefore returned (%v) with the sync of the file in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release <- struct{}{}
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
