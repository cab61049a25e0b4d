package edge

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// sickFS is a file system whose disk can go wrong under a broker: while hold is set, the
// fsyncs of commitlog files wait until it is cleared (a stuck disk); while failSync is set
// they fail with EIO; while queuesFull is set, consume-queue files cannot be created (no
// space).
type sickFS struct {
	vfs.FS
	release    chan struct{} // each held fsync takes one to go on
	holding    *atomic.Bool
	failSync   *atomic.Bool
	queuesFull *atomic.Bool
}

func newSickFS() *sickFS {
	return &sickFS{FS: vfs.OS, release: make(chan struct{}), holding: new(atomic.Bool), failSync: new(atomic.Bool), queuesFull: new(atomic.Bool)}
}

func (f *sickFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if f.queuesFull.Load() && flag&os.O_CREATE != 0 && strings.Contains(name, "consumequeue") {
		return nil, &os.PathError{Op: "open", Path: name, Err: vfs.ErrNoSpace}
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "commitlog") {
		return file, err
	}
	return sickFile{file, f}, nil
}

type sickFile struct {
	vfs.File
	fs *sickFS
}

func (f sickFile) Sync() error {
	if f.fs.holding.Load() {
		<-f.fs.release
	}
	if f.fs.failSync.Load() {
		return &os.PathError{Op: "fdatasync", Path: "segment", Err: syscall.EIO}
	}
	return f.File.Sync()
}

// openSick opens a broker over fs in a temp dir, with one-queue topics and consume-queue
// files of 16 entries. At the end of the test, fs holds no fsync any more.
func openSick(t *testing.T, fs *sickFS) *Broker {
	t.Helper()
	b := openBroker(t, &Options{DefaultQueues: 1, Store: &store.Options{FS: fs, SegmentSize: 4 << 20,
		MaxMessageSize: 64 << 10, QueueSegmentEntries: 16, MetaNoSync: true}})
	t.Cleanup(func() { // before Close: a failed test leaves no fsync held
		fs.holding.Store(false)
		close(fs.release)
	})
	return b
}

func send(t *testing.T, b *Broker, body string) error {
	t.Helper()
	_, err := b.Send(context.Background(), &mq.Message{Topic: "H", Body: []byte(body)}, nil)
	return err
}

const stall = 10 * time.Second

// unhold lets held fsyncs go on until the send that waits for them returns its error.
func unhold(fs *sickFS, sent chan error) error {
	for {
		select {
		case fs.release <- struct{}{}:
		case err := <-sent:
			return err
		}
	}
}

// TestHealthIdleAndBusy: an idle broker is healthy however long it idles, and so is a busy
// one whose flusher makes progress between the calls, though each call finds a send
// waiting for its fsync.
func TestHealthIdleAndBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newSickFS()
		b := openSick(t, fs)
		for i := 0; i < 3; i++ {
			time.Sleep(stall)
			if err := b.Health(stall); err != nil {
				t.Fatalf("idle broker, call %d: %v", i, err)
			}
		}
		fs.holding.Store(true)
		sent := make(chan error, 1)
		go func() { sent <- send(t, b, "0") }()
		for i := 1; i < 5; i++ {
			synctest.Wait() // the send waits for its fsync
			if err := b.Health(stall); err != nil {
				t.Fatalf("busy broker, call %d: %v", i, err)
			}
			time.Sleep(stall)
			if err := unhold(fs, sent); err != nil {
				t.Fatal(err)
			}
			go func() { sent <- send(t, b, "1") }()
		}
		fs.holding.Store(false)
		if err := unhold(fs, sent); err != nil {
			t.Fatal(err)
		}
		if err := b.Health(0); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("Health(0): %v", err)
		}
		b.Close()
		if err := b.Health(stall); !errors.Is(err, ErrClosed) {
			t.Errorf("Health after Close: %v", err)
		}
	})
}

// TestHealthStuckFlush: records written but held from the disk (an fsync that does not
// return) make the broker unhealthy stall after a call saw them pending, not before; healthy
// again once the fsync returns.
func TestHealthStuckFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newSickFS()
		b := openSick(t, fs)
		fs.holding.Store(true)
		sent := make(chan error, 1)
		go func() { sent <- send(t, b, "held") }()
		synctest.Wait() // the send waits for its fsync, which waits at the hold
		if err := b.Health(stall); err != nil {
			t.Fatalf("a flush in flight: %v", err)
		}
		time.Sleep(stall / 2)
		if err := b.Health(stall); err != nil {
			t.Fatalf("a flush in flight for half the stall: %v", err)
		}
		time.Sleep(stall / 2)
		if err := b.Health(stall); err == nil || !strings.Contains(err.Error(), "flusher is stuck") {
			t.Fatalf("a flush stuck for the stall: %v", err)
		}
		fs.holding.Store(false)
		if err := unhold(fs, sent); err != nil {
			t.Fatal(err)
		}
		if err := b.Health(stall); err != nil {
			t.Fatalf("after the flush returned: %v", err)
		}
	})
}

// TestHealthDispatcherBehind: a message stored whose consume-queue entry cannot be written
// (the queue's next file cannot be made: no space) makes the broker unhealthy stall later;
// healthy again once the dispatcher caught up.
func TestHealthDispatcherBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newSickFS()
		b := openSick(t, fs)
		for i := 0; i < 16; i++ { // the queue's first file is full
			if i == 7 { // before it is half full, when the queue makes its next file ahead
				fs.queuesFull.Store(true)
			}
			if err := send(t, b, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if err := send(t, b, "stored, not queued"); err != nil {
			t.Fatal(err)
		}
		if err := b.Health(stall); err != nil {
			t.Fatalf("just stored: %v", err)
		}
		time.Sleep(stall)
		if err := b.Health(stall); err == nil || !strings.Contains(err.Error(), "dispatcher is behind") {
			t.Fatalf("not queued for the stall: %v", err)
		}
		fs.queuesFull.Store(false)
		if err := send(t, b, "y"); err != nil { // the next send dispatches both
			t.Fatal(err)
		}
		if err := b.Health(stall); err != nil {
			t.Fatalf("after the dispatcher caught up: %v", err)
		}
	})
}

// TestHealthDiskFailure: a failed fsync of the commitlog makes the broker unhealthy at once,
// and for good.
func TestHealthDiskFailure(t *testing.T) {
	fs := newSickFS()
	b := openSick(t, fs)
	if err := send(t, b, "x"); err != nil {
		t.Fatal(err)
	}
	fs.failSync.Store(true)
	if err := send(t, b, "lost"); err == nil {
		t.Fatal("a send whose fsync failed succeeded")
	}
	fs.failSync.Store(false)
	for range 2 {
		if err := b.Health(stall); !errors.Is(err, commitlog.ErrFlush) || !strings.Contains(err.Error(), "disk failure") {
			t.Fatalf("after a failed fsync: %v", err)
		}
	}
}
