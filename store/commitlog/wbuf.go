package commitlog

import (
	"fmt"
	"sync/atomic"
)

// The write buffer (Options.WriteBuffer): instead of writing records through the active
// segment's mapping, whose every new page costs the kernel a fault, zeroing and a
// page_mkwrite (about 6 µs a 4 KiB page on a VM), appends gather them in memory and write
// them to the file in large pwrites: when the buffer is full (by a goroutine, while appends
// fill a second buffer), before a roll, and before every fsync (both wait for a write under
// way first), so that what an fsync covers was written first and the power-cut guarantees
// stay those of the mapping. The mapping still serves reads (a shared mapping sees what
// pwrite writes, through the page cache); the records of the buffer, not written to the
// file yet, are read from the buffer itself (wtail, and its prev while that is written), so that readers see every record
// below Written and never the file's bytes past what was written to it. A reader copies a
// record out of the buffer (records in a buffer are the newest, read by readers that keep
// up, such as the dispatcher), holding a reference only while it copies, so that the writer
// can reuse a written buffer: a fresh one a time would cost more in page faults and zeroing
// than the pwrite saves.

// wtail is the write buffer as readers see it: records from position at, in buf[:Written-at].
// Its bytes below Written do not change while it is not retired. A wtail is never reused;
// its buf is, once retired with no reader holding it.
type wtail struct {
	at      int64
	buf     []byte                // with the buffer's full capacity; the writer appends within it
	prev    atomic.Pointer[wtail] // the buffer before, while a goroutine writes it out (wout)
	refs    atomic.Int32          // readers copying from buf
	retired atomic.Bool           // buf was written to the file: read it there
}

// wout is a full write buffer that a goroutine of its own writes to the file (handOffLocked),
// while appends fill the next buffer: the appender does not wait for the write, which on a
// 1 MiB buffer costs the kernel about as much CPU as the appends that filled it. At most one
// is under way: the next hand-off, a roll and a flush wait for it first.
type wout struct {
	t    *wtail
	buf  []byte
	done chan struct{} // closed once the write returned
	err  error         // the write's error, set before done is closed
}

// bufferFramesLocked writes the frames of payloads at wpos into the write buffer, first
// writing out a buffer without room for them, and fills pos. Caller holds mu, and has
// rolled if the batch does not fit the segment.
func (l *Log) bufferFramesLocked(d int64, payloads [][]byte, need int64, pos []int64) error {
	if len(l.wbuf)+int(need) > cap(l.wbuf) {
		if err := l.handOffLocked(); err != nil {
			return err
		}
	}
	if l.wbuf == nil {
		if k := len(l.wspare) - 1; k >= 0 && int64(cap(l.wspare[k])) >= need {
			l.wbuf = l.wspare[k][:0]
			l.wspare[k] = nil
			l.wspare = l.wspare[:k]
		} else {
			l.wbuf = make([]byte, 0, max(l.opts.WriteBuffer, need))
		}
		t := &wtail{at: l.wpos, buf: l.wbuf[:cap(l.wbuf)]}
		if l.wout != nil {
			t.prev.Store(l.wout.t) // readers find its records there until it is written
		}
		l.wtail.Store(t)
	}
	p0 := l.wpos
	k := int64(len(l.wbuf))
	l.wbuf = l.wbuf[:k+need]
	for i, p := range payloads {
		n := int64(frameSize(len(p), d))
		putFrame(l.wbuf[k:k+n], d, p)
		if pos != nil {
			pos[i] = p0
		}
		k += n
		p0 += n
	}
	l.wpos = p0
	return nil
}

// drainLocked writes the write buffer to the active segment's file and lets readers read
// the file's copy (a new buffer is made for the next append). Caller holds mu. A failed
// write keeps the buffer, which readers go on reading, and fails the log as a failed fsync
// does: the records are acknowledged (with async flush) but would not survive a crash.
func (l *Log) drainLocked() error {
	if err := l.waitOutLocked(); err != nil {
		return err
	}
	if len(l.wbuf) == 0 {
		return nil
	}
	if err := l.flushErr(); err != nil {
		return err
	}
	t := l.wtail.Load()
	if _, err := l.active.file.WriteAt(l.wbuf, t.at-l.active.base); err != nil {
		err = fmt.Errorf("%w: write %s: %w", ErrFlush, l.active.path, err)
		l.fail(err)
		return err
	}
	// Retire the buffer, then see whether a reader holds it: a reader that takes it after
	// this sees it retired (retired before refs here, refs before retired in readBuffered).
	t.retired.Store(true)
	l.wtail.Store(nil)
	if t.refs.Load() == 0 && cap(l.wbuf) <= int(max(l.opts.WriteBuffer, 0)) {
		l.keepSpare(l.wbuf)
	}
	l.wbuf = nil
	return nil
}

// handOffLocked hands the full write buffer to a goroutine that writes it to the active
// segment's file, once the write before it is done; readers go on reading it (through the
// next buffer's prev) until it is written. A failed write fails the log as drainLocked's
// does, and its buffer stays readable. Caller holds mu.
func (l *Log) handOffLocked() error {
	if len(l.wbuf) == 0 {
		return nil
	}
	if err := l.waitOutLocked(); err != nil {
		return err
	}
	if err := l.flushErr(); err != nil {
		return err
	}
	t := l.wtail.Load()
	w := &wout{t: t, buf: l.wbuf, done: make(chan struct{})}
	f, off, path := l.active.file, t.at-l.active.base, l.active.path
	l.wout, l.wbuf = w, nil
	// Close waits for it (l.wg); a roll, a flush and the next hand-off wait for done.
	l.wg.Go(func() {
		defer close(w.done)
		if _, err := f.WriteAt(w.buf, off); err != nil {
			w.err = fmt.Errorf("%w: write %s: %w", ErrFlush, path, err)
			l.fail(w.err)
			return
		}
		t.retired.Store(true)
	})
	return nil
}

// waitOutLocked waits for the write of the buffer handed off, if any, and keeps its buffer
// for reuse when no reader holds it. After a failed write it keeps returning the error, and
// the buffer stays readable. Caller holds mu.
func (l *Log) waitOutLocked() error {
	w := l.wout
	if w == nil {
		return nil
	}
	<-w.done
	if w.err != nil {
		return w.err
	}
	l.wout = nil
	if t := l.wtail.Load(); t != nil {
		t.prev.CompareAndSwap(w.t, nil)
	}
	// Retired before done was closed; a reader that takes it after this sees it retired.
	if w.t.refs.Load() == 0 && cap(w.buf) <= int(max(l.opts.WriteBuffer, 0)) {
		l.keepSpare(w.buf)
	}
	return nil
}

// keepSpare keeps a written buffer for reuse, unless two are kept already: one fills while
// the other is written out, and a flush or a roll writes the one filling, so that both come
// back. Caller holds mu.
func (l *Log) keepSpare(b []byte) {
	if len(l.wspare) < 2 {
		l.wspare = append(l.wspare, b)
	}
}

// fail makes err the log's sticky error: no more appends, waiters for durability get it.
func (l *Log) fail(err error) {
	l.fmu.Lock()
	if l.ferr == nil {
		l.ferr = err
		l.failed.Store(true)
		l.lg.Error("write failed: the log refuses writes until reopened", "err", err)
	}
	l.fcond.Broadcast()
	l.fmu.Unlock()
}

// drainForFlush writes the write buffer out for an fsync and returns the end of what the
// fsync is to cover.
func (l *Log) drainForFlush() (int64, error) {
	if l.opts.WriteBuffer <= 0 {
		return l.written.Load(), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.drainLocked()
	return l.written.Load(), err
}

// readBuffered decodes the record at pos, below w (Written, loaded before), from the write
// buffer, copying its payload into r.copy, if pos lies in the buffer; ok false: read the
// file.
func (r *Reader) readBuffered(pos, w int64) (d int64, payload []byte, n int, st frameStatus, ok bool) {
	t := r.l.wtail.Load() // loaded after w: a buffer written out before w was loaded is gone
	for t != nil && pos < t.at {
		t = t.prev.Load() // the buffer being written out, if pos is in it
	}
	if t == nil {
		return 0, nil, 0, 0, false // in the file
	}
	t.refs.Add(1)
	defer t.refs.Add(-1)
	if t.retired.Load() {
		return 0, nil, 0, 0, false // written to the file meanwhile
	}
	d, payload, n, st = decodeFrame(t.buf[pos-t.at : min(w-t.at, int64(len(t.buf)))])
	r.copy = append(r.copy[:0], payload...)
	return d, r.copy, n, st, true
}
