package store

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// faultFS fails, while its flags are set, the creation of commitlog files (no space) and the
// fsyncs of files whose path holds syncMatch (EIO).
type faultFS struct {
	vfs.FS
	full      *atomic.Bool
	failSync  *atomic.Bool
	syncMatch string
}

func (f faultFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if f.full.Load() && flag&os.O_CREATE != 0 && strings.Contains(name, commitlogDir) {
		return nil, &os.PathError{Op: "open", Path: name, Err: vfs.ErrNoSpace}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, f.syncMatch) {
		return file, err
	}
	return faultFile{file, f.failSync}, nil
}

type faultFile struct {
	vfs.File
	fail *atomic.Bool
}

func (f faultFile) Sync() error {
	if f.fail.Load() {
		return &os.PathError{Op: "fdatasync", Path: "test", Err: syscall.EIO}
	}
	return f.File.Sync()
}

// TestErrReportsDiskFailures: Err is nil while the disk works; it reports a full disk that
// fails appends until an append succeeds again, a queue sync's failure until a sync succeeds,
// and a commitlog fsync's failure for good; a batch refused for its size is no disk failure.
func TestErrReportsDiskFailures(t *testing.T) {
	open := func(t *testing.T, match string) (*Store, faultFS) {
		fs := faultFS{vfs.OS, new(atomic.Bool), new(atomic.Bool), match}
		s := openStore(t, t.TempDir(), Options{FS: fs, SegmentSize: testSeg})
		t.Cleanup(func() { s.Close() })
		return s, fs
	}
	big := func(i int) *Message {
		m := msg("T", 0, i)
		m.Body = bytes.Repeat([]byte{'x'}, 60<<10)
		return m
	}

	t.Run("full disk", func(t *testing.T) {
		s, fs := open(t, commitlogDir)
		appendN(t, s, "T", 0, 0, 3)
		if err := s.Err(); err != nil {
			t.Fatalf("Err %v on a working disk", err)
		}
		fs.full.Store(true)
		var err error
		for i := 0; i < 20 && err == nil; i++ { // fills the active segment and the prepared one
			err = s.Append([]*Message{big(i)})
		}
		if !errors.Is(err, commitlog.ErrDiskFull) {
			t.Fatalf("appends on a full disk: %v, want ErrDiskFull", err)
		}
		if err := s.Err(); !errors.Is(err, commitlog.ErrDiskFull) {
			t.Fatalf("Err %v after an append failed on a full disk, want ErrDiskFull", err)
		}
		fs.full.Store(false)
		if err := s.Append([]*Message{big(99)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err %v after an append succeeded again", err)
		}
	})

	t.Run("too large", func(t *testing.T) {
		s, _ := open(t, commitlogDir)
		batch := []*Message{big(0), big(1), big(2), big(3), big(4)} // more than a segment
		if err := s.Append(batch); !errors.Is(err, commitlog.ErrTooLarge) {
			t.Fatalf("a batch larger than a segment: %v", err)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err %v after a batch was refused for its size", err)
		}
	})

	t.Run("queue sync", func(t *testing.T) {
		s, fs := open(t, queuesDir)
		appendN(t, s, "T", 0, 0, 3)
		fs.failSync.Store(true)
		if err := s.Flush(); err == nil {
			t.Fatal("Flush succeeded while the queues' fsync fails")
		}
		if err := s.Err(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Err %v after a queue sync failed, want EIO", err)
		}
		fs.failSync.Store(false)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err %v after a queue sync succeeded again", err)
		}
	})

	t.Run("commitlog fsync", func(t *testing.T) {
		s, fs := open(t, commitlogDir)
		appendN(t, s, "T", 0, 0, 3)
		fs.failSync.Store(true)
		if err := s.Append([]*Message{msg("T", 0, 3)}); !errors.Is(err, commitlog.ErrFlush) {
			t.Fatalf("an append whose fsync fails: %v, want ErrFlush", err)
		}
		fs.failSync.Store(false)
		if err := s.Err(); !errors.Is(err, commitlog.ErrFlush) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("Err %v after the commitlog's fsync failed, want ErrFlush (EIO)", err)
		}
	})
}
