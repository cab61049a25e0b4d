package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// cutPoint is what a step of the running store left, taken just before the step: the
// cuts, and what the store had acknowledged by then.
type cutPoint struct {
	n       int
	step    vfstest.Step
	cuts    []*vfstest.CrashFS // CutClean, CutAllBut(step), and before a SyncDir CutNamesOnly
	acked   []ack              // messages whose Append had returned
	durable int64              // the log's durable position; -1 during Open
	done    chan struct{}      // closed when the cuts were checked
}

// TestPowerCutAtEveryStep cuts the power before every step of a running store that orders
// what reaches the disk: every fsync of a file, every fsync of a directory and every rename
// (vfstest.StepFS), from Open through appends by three writers, rolls and queue syncs to
// Close. At each step it takes two or three cuts and recovers each: the cut that loses
// everything not yet durable (CutClean), the cut of a disk that did everything asked of it
// but that step (CutAllBut), and before a directory fsync with names pending, the cut of a
// disk that made every name durable and no unsynced data (CutNamesOnly). In each recovered store every acknowledged message survives (in sync
// mode, with or without Linger, every message whose Append returned; in async mode those below the durable position
// the log reported), the log ends at or past that durable position with no hole below its
// end, and the queues agree with the log (verifyStore). Unlike TestPowerCut's random cut
// times, which almost never fall between two steps microseconds apart, every ordering of
// steps the run takes is cut. Each mode runs also with a write buffer (Options.WriteBuffer).
// (Checked: releasing sync appenders before the fsync that
// covers them fails at the first flush, by CutClean; writing the commitlog checkpoint
// before syncing the data it covers fails at the first checkpoint, by CutAllBut.)
func TestPowerCutAtEveryStep(t *testing.T) {
	const batches = 100 // about 1.2 segments
	uncut := 0
	if testing.Short() {
		uncut = 70 // cut the steps from batch 70 on: the first roll, and Close
	}
	for _, c := range []struct {
		name   string
		mode   commitlog.FlushMode
		linger time.Duration
		wbuf   int64
	}{
		{"sync", commitlog.FlushSync, 0, 0}, // the default write buffer
		{"sync-mapped", commitlog.FlushSync, 0, -1},
		{"sync-linger", commitlog.FlushSync, 2 * time.Millisecond, 0},
		{"async", commitlog.FlushAsync, 0, 0},
		{"sync-writebuffer", commitlog.FlushSync, 0, 8 << 10},
		{"async-writebuffer", commitlog.FlushAsync, 0, 8 << 10},
	} {
		t.Run(c.name, func(t *testing.T) { cutAtEveryStep(t, c.mode, c.linger, c.wbuf, batches, uncut) })
	}
}

// cutAtEveryStep runs the store of TestPowerCutAtEveryStep, appending batches batches, and
// checks cuts at every step after the first uncut batches were acknowledged.
func cutAtEveryStep(t *testing.T, mode commitlog.FlushMode, linger time.Duration, wbuf int64, batches, uncut int) {
	fs := vfstest.NewCrashFS()
	dir := t.TempDir() // the running store's path in the CrashFS; its lock and meta.db on disk
	recoverDir := t.TempDir()
	o := testOptions(Options{Flush: mode, Linger: linger, SegmentSize: 136 << 10, MaxMessageSize: 1 << 10, QueueSegmentEntries: 32,
		FlushInterval: time.Hour, FlushBytes: 24 << 10, QueueFlushInterval: time.Hour, QueueFlushBytes: 32 << 10,
		RetentionInterval: time.Hour, WriteBuffer: wbuf})
	var (
		mu      sync.Mutex // guards acked, next and done
		acked   []ack
		next    int64
		done    int // batches acknowledged
		running atomic.Pointer[Store]
		steps   int
		points  = make(chan *cutPoint)
		dead    = make(chan struct{}) // the test is over: steps go on uncut
	)
	o.FS = vfstest.StepFS{FS: fs, Before: func(step vfstest.Step) {
		p := &cutPoint{step: step, durable: -1, done: make(chan struct{})}
		mu.Lock()
		if done < uncut {
			mu.Unlock()
			return
		}
		p.acked = append([]ack(nil), acked...)
		if s := running.Load(); s != nil {
			p.durable = s.log.Durable()
		}
		p.cuts = []*vfstest.CrashFS{fs.CutClean(), fs.CutAllBut(step)}
		if step.Op == vfstest.StepSyncDir && fs.Stats().PendingOps > 0 { // else it is CutClean
			p.cuts = append(p.cuts, fs.CutNamesOnly())
		}
		mu.Unlock()
		select {
		case points <- p:
		case <-dead:
			return
		}
		select {
		case <-p.done:
		case <-dead:
		}
	}}

	runDone := make(chan struct{})
	var runErr error
	go func() { // the running store; the test goroutine checks the cuts it sends
		defer close(runDone)
		s, err := Open(dir, &o)
		if err != nil {
			runErr = fmt.Errorf("Open: %w", err)
			return
		}
		running.Store(s)
		var wg sync.WaitGroup
		var werr atomic.Value
		for w := range 3 {
			wg.Go(func() {
				for b := w; b < batches; b += 3 {
					mu.Lock()
					batch := make([]*Message, 1+b%16) // 1 to 16 messages, about 1.6 KiB
					for i := range batch {
						batch[i] = crashMessage(next)
						next++
					}
					mu.Unlock()
					if err := s.Append(batch); err != nil {
						werr.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					for _, m := range batch {
						id, _ := crashID(m.Body)
						acked = append(acked, ack{id, m.Topic, m.QueueID, m.QueueOffset, m.Pos, m.Size})
					}
					done++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if err, ok := werr.Load().(error); ok {
			runErr = fmt.Errorf("Append: %w", err)
		}
		if err := s.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("Close: %w", err)
		}
	}()
	defer func() {
		close(dead)
		<-runDone
	}()
	count := map[vfstest.Op]int{}
	for running := true; running; {
		select {
		case p := <-points:
			steps++
			p.n = steps
			count[p.step.Op]++
			checkCutPoint(t, p, dir, recoverDir, o)
			close(p.done)
		case <-runDone:
			running = false
		}
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	// The store closed whole: everything it acknowledged is there.
	final := o
	final.FS = fs
	s, err := Open(dir, &final)
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	defer s.Close()
	checkLogWhole(t, s, -1)
	verifyStore(t, s, acked)
	t.Logf("%d steps cut (%v), %d messages acknowledged in %d segments", steps, count, len(acked), s.log.Size()/s.log.SegmentSize())
}

// checkCutPoint recovers each cut of p in data dir rdir (the cut's files moved there from
// dir; the lock and meta.db, which hold no messages, stay on disk from one cut to the next)
// and checks it.
func checkCutPoint(t *testing.T, p *cutPoint, dir, rdir string, o Options) {
	t.Helper()
	what := ""
	defer func() {
		if t.Failed() {
			t.Logf("at step %d, before %s of %s (as opened), cut %s: %d messages acknowledged, durable position %d",
				p.n, p.step.Op, p.step.Path, what, len(p.acked), p.durable)
		}
	}()
	for i, cut := range p.cuts {
		what = [...]string{"CutClean", "CutAllBut", "CutNamesOnly"}[i]
		moveTree(t, cut, dir, rdir)
		o.FS = cut
		s, err := Open(rdir, &o)
		if err != nil {
			t.Fatalf("recovery: %v", err)
		}
		if w := s.log.Written(); w < p.durable {
			s.Close()
			t.Fatalf("the recovered log ends at %d, short of the durable position %d before the cut", w, p.durable)
		}
		survivors := p.acked
		if o.Flush == commitlog.FlushAsync {
			survivors = nil
			for _, a := range p.acked {
				if a.pos+int64(a.size) <= p.durable {
					survivors = append(survivors, a)
				}
			}
		}
		checkLogWhole(t, s, p.durable)
		verifyStore(t, s, survivors)
		if err := s.Close(); err != nil {
			t.Fatalf("Close of the recovered store: %v", err)
		}
	}
}

// checkLogWhole walks the commitlog of s from its start and checks that its records follow
// one another with no hole up to the end of the log (a record may skip only the unused tail
// of a segment, to the next segment's first record).
func checkLogWhole(t *testing.T, s *Store, durable int64) {
	t.Helper()
	r := s.log.NewReader()
	defer r.Close()
	seg := s.log.SegmentSize()
	want := s.log.MinPos()
	for pos := want; ; {
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			break
		}
		if err != nil {
			t.Fatalf("commitlog walk at %d: %v", pos, err)
		}
		if rec.Pos != want && (rec.Pos%seg != commitlog.HeaderSize || rec.Pos/seg == want/seg) {
			t.Fatalf("the log has a hole: a record at %d where the one before ended at %d (durable was %d)", rec.Pos, want, durable)
		}
		want, pos = rec.Next, rec.Next
	}
	if w := s.log.Written(); want != w && (w%seg != commitlog.HeaderSize || w/seg == want/seg) {
		t.Fatalf("the log ends at %d, its last whole record at %d: a hole below the end (durable was %d)", w, want, durable)
	}
}

// moveTree moves every file under from in fs to the same place under to.
func moveTree(t *testing.T, fs vfs.FS, from, to string) {
	t.Helper()
	names, err := fs.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		src, dst := filepath.Join(from, name), filepath.Join(to, name)
		if _, err := fs.ReadDir(src); err == nil {
			moveTree(t, fs, src, dst)
			continue
		}
		if err := fs.Rename(src, dst); err != nil {
			t.Fatal(err)
		}
	}
}
