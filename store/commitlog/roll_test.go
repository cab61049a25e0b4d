package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// stuckFS is the OS file system with a disk that stops completing fsyncs once stuck is set:
// SyncDir and the Sync of every file opened under a segment's name wait until release is
// closed. Files opened under a temporary name (the preparer's) sync at once.
type stuckFS struct {
	vfstest.SyncHookFS
	stuck   *atomic.Bool
	release chan struct{}
	once    *sync.Once
	waiting *atomic.Int32 // fsyncs waiting now
}

// newStuckFS returns a stuckFS that the test's cleanup unsticks, so that a failing test
// still closes its log.
func newStuckFS(t *testing.T) stuckFS {
	s := stuckFS{stuck: new(atomic.Bool), release: make(chan struct{}), once: new(sync.Once), waiting: new(atomic.Int32)}
	s.SyncHookFS = vfstest.SyncHookFS{FS: vfs.OS, Hook: func(path string, dir bool) {
		if (dir || strings.HasSuffix(path, segSuffix)) && s.stuck.Load() {
			s.waiting.Add(1)
			<-s.release
			s.waiting.Add(-1)
		}
	}}
	t.Cleanup(s.unstick)
	return s
}

// unstick lets every fsync through, the waiting ones too.
func (s stuckFS) unstick() {
	s.once.Do(func() {
		s.stuck.Store(false)
		close(s.release)
	})
}

// appendUntil appends rec from another goroutine until done reports true and returns how
// many it appended. It fails the test with stuck's words if that takes over 10 s.
func appendUntil(t *testing.T, l *Log, rec []byte, done func() bool, stuck func() string) int {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		n := 0
		for ; !done(); n++ {
			if _, err := l.Append(1, [][]byte{rec}, nil); err != nil {
				res <- result{n, err}
				return
			}
		}
		res <- result{n, nil}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.n
	case <-time.After(10 * time.Second):
		t.Fatal(stuck())
		return 0
	}
}

// TestRollWaitsForNoFsync: appends roll into new segments while the disk completes no fsync
// at all, so a roll (under the append lock) waits for none; and the records written then
// are durable once the disk comes back, names included (a reopen finds them all).
func TestRollWaitsForNoFsync(t *testing.T) {
	dir := t.TempDir()
	fs := newStuckFS(t)
	l := openTest(t, dir, Options{FS: fs, Flush: FlushAsync, FlushInterval: time.Millisecond, FlushBytes: 1})
	fs.stuck.Store(true)
	rec := make([]byte, 1000)
	n := appendUntil(t, l, rec, func() bool { return l.Written() > 2*testSegSize }, func() string {
		return fmt.Sprintf("appends stuck at %d, at a roll, waiting for the disk (%d fsyncs waiting)", l.Written(), fs.waiting.Load())
	})
	if segs := len(*l.segs.Load()); segs < 3 {
		t.Fatalf("%d segments: the appends did not roll twice", segs)
	}
	if d := l.Durable(); d != HeaderSize {
		t.Fatalf("durable %d while no fsync completed", d)
	}
	fs.unstick()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, s := range *l.segs.Load() {
		if !s.named.Load() {
			t.Fatalf("segment %s covered by a flush, its name not synced", s.path)
		}
	}
	l.Close()
	l = openTest(t, dir, Options{})
	defer l.Close()
	if got, _ := readAll(t, l); len(got) != n {
		t.Fatalf("%d records after reopen, want %d", len(got), n)
	}
}

// TestOpenDropsUnstartedSegment: a power cut during a roll can leave the new segment under
// its name with its header never written. Open drops it (moving it aside when it holds
// bytes), and the log goes on from the end of the segment before, or at the dropped
// segment's base when it was the only one. A segment with a damaged header is moved aside
// too, or removed when it held no record.
func TestOpenDropsUnstartedSegment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		only     bool // the unstarted segment is the only one (retention took the others)
		data     bool // bytes after its header
		zeroHead bool // false: a damaged, not a zero, header (moved aside, as ever)
	}{
		{name: "zeros after an earlier segment", zeroHead: true},
		{name: "records written back after an earlier segment", data: true, zeroHead: true},
		{name: "the only segment", only: true, zeroHead: true},
		{name: "damaged header", data: true, zeroHead: false},
		{name: "damaged header, no record", zeroHead: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, Options{})
			var want [][]byte
			for i := 0; len(*l.segs.Load()) < 2; i++ {
				want = append(want, payload(i))
				appendOne(t, l, 1, want[i])
			}
			want = want[:len(want)-1] // the record that rolled into the last segment
			firstEnd := (*l.segs.Load())[0].base + l.active.prevEnd
			l.Close()

			seg := lastSegment(t, dir)
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			head := make([]byte, HeaderSize)
			if !tc.zeroHead {
				head[3] = 1 // neither copy verifies
			}
			if _, err := f.WriteAt(head, 0); err != nil {
				t.Fatal(err)
			}
			if !tc.data {
				// The record in it is gone with the header: the kernel never wrote it.
				if _, err := f.WriteAt(make([]byte, 4<<10), HeaderSize); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			base := int64(testSegSize)
			if tc.only {
				if err := os.Remove(filepath.Join(dir, segmentName(0))); err != nil {
					t.Fatal(err)
				}
				want = nil
			}

			l = openTest(t, dir, Options{})
			defer l.Close()
			got, _ := readAll(t, l)
			if len(got) != len(want) {
				t.Fatalf("%d records after reopen, want %d", len(got), len(want))
			}
			broken, _ := filepath.Glob(seg + ".*.broken")
			if (len(broken) == 1) != tc.data {
				t.Fatalf("moved aside: %v, want %v", broken, tc.data)
			}
			if rec := l.Recovery(); rec.BrokenMade != len(broken) || rec.EmptyRemoved != 1-len(broken) || (rec.Records > 0) != tc.data {
				t.Fatalf("recovery stats %+v, want %d moved aside and %d removed, records %v", rec, len(broken), 1-len(broken), tc.data)
			}
			switch {
			case tc.only:
				if l.MinPos() != base+HeaderSize || l.Written() != base+HeaderSize {
					t.Fatalf("log starts at %d and ends at %d, want both at %d", l.MinPos(), l.Written(), base+HeaderSize)
				}
			case l.Written() != firstEnd:
				t.Fatalf("log ends at %d, want %d, the end of the first segment's records", l.Written(), firstEnd)
			}
			// The log rolls into the dropped segment's place again.
			for i := 0; len(*l.segs.Load()) < 2; i++ {
				appendOne(t, l, 2, payload(i))
			}
			wantBase := base
			if tc.only {
				wantBase += testSegSize
			}
			if s := l.active; s.base != wantBase {
				t.Fatalf("new segment at %d, want %d", s.base, wantBase)
			}
		})
	}
}

// TestFlushSyncsEachNewNameOnce: flushes sync the directory once for each segment a roll
// (or the Open of an empty log) named, not on every fsync.
func TestFlushSyncsEachNewNameOnce(t *testing.T) {
	dir := t.TempDir()
	fs := &countingFS{FS: vfs.OS}
	l := openTest(t, dir, Options{FS: fs})
	defer l.Close()
	before := fs.dirSyncs.Load()
	rec := make([]byte, 1000)
	for i := 0; i < 3*testSegSize/1024; i++ {
		appendOne(t, l, 1, rec)
	}
	if n, segs := fs.dirSyncs.Load()-before, int64(len(*l.segs.Load())); n != segs {
		t.Fatalf("%d directory syncs for %d segments", n, segs)
	}
}

type countingFS struct {
	vfs.FS
	dirSyncs atomic.Int64
}

func (c *countingFS) SyncDir(dir string) error {
	c.dirSyncs.Add(1)
	return c.FS.SyncDir(dir)
}

// TestPowerCutAfterRoll: a power cut that loses exactly what is not durable (CrashFS's
// CutClean), taken right after the first acknowledged record of each new segment, keeps
// every acknowledged record: the segment's header and name were made durable before its
// first record counted as durable. Each cut also reopens whole, and the log goes on.
func TestPowerCutAfterRoll(t *testing.T) {
	fs := vfstest.NewCrashFS()
	dir := t.TempDir() // a path inside the CrashFS
	l := openTest(t, dir, Options{FS: fs})
	defer func() { l.Close() }()
	var want [][]byte
	for i, segs := 0, 1; segs < 4; i++ {
		want = append(want, payload(i))
		appendOne(t, l, 1, want[i])
		if n := len(*l.segs.Load()); n > segs {
			segs = n
			cut := openTest(t, dir, Options{FS: fs.CutClean()})
			got, _ := readAll(t, cut)
			cut.Close()
			if len(got) != len(want) {
				t.Fatalf("cut after the roll into segment %d: %d records, want %d", segs, len(got), len(want))
			}
		}
	}
}

// TestRollLeavesDeletesToTheRetentionLoop: the segments a roll's retention takes out of the
// log (here by MaxBytes) are deleted by the retention loop, so the roll waits neither for
// the unlink nor for the directory fsync after it; OnRetention follows the deletion.
func TestRollLeavesDeletesToTheRetentionLoop(t *testing.T) {
	dir := t.TempDir()
	fs := newStuckFS(t)
	var minPos atomic.Int64
	l := openTest(t, dir, Options{FS: fs, MaxBytes: 2 * testSegSize, RetentionInterval: time.Hour,
		OnRetention: func(min int64) { minPos.Store(min) }})
	defer func() { fs.unstick(); l.Close() }() // a failing test must not leave the roll stuck
	rec := make([]byte, 1000)
	for len(*l.segs.Load()) < 2 {
		appendOne(t, l, 1, rec) // durable: the first segment may go
	}
	first := (*l.segs.Load())[0].path
	fs.stuck.Store(true)
	appendUntil(t, l, rec, func() bool { return l.Written() > 2*testSegSize }, func() string {
		return fmt.Sprintf("the roll waits for the disk (%d fsyncs waiting)", fs.waiting.Load())
	})
	if got := l.MinPos(); got != testSegSize+HeaderSize {
		t.Fatalf("MinPos %d after the roll, want %d", got, testSegSize+HeaderSize)
	}
	fs.unstick()
	deadline := time.Now().Add(10 * time.Second)
	for minPos.Load() != testSegSize+HeaderSize {
		if time.Now().After(deadline) {
			t.Fatalf("OnRetention never told of the deletion (min %d)", minPos.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("%s still there after OnRetention (%v)", first, err)
	}
}
