package commitlog

import (
	"fmt"
	"sync/atomic"
)

// The write buffer (Options.WriteBuffer): instead of writing records through the active
// segment's mapping, whose every new page costs the kernel a fault, zeroing and a
// page_mkwrite (about 6 µs a 4 KiB page on a VM), appends gather them in memory and write
// them to the file in large pwrites: when the buffer is full, before a roll, and before
// every fsync, so that what an fsync covers was written first and the power-cut guarantees
// stay those of the mapping; with FlushSync a lazy append (AfterAppendLazy), acknowledged
// before an fsync, copies the buffer into the mapping (copyOutLocked), so that a crash of
// the process keeps it as the mapping would. The mapping still serves reads (a shared
// mapping sees what pwrite writes, through the page cache); the records of the buffer, not written to the
// file yet, are read from the buffer itself (wtail), so that readers see every record
// below Written and never the file's bytes past what was written to it. A reader copies a
// record out of the buffer (records in a buffer are the newest, read by readers that keep
// up, such as the dispatcher), holding a reference only while it copies, so that the writer
// can reuse a written buffer: a fresh one a time would cost more in page faults and zeroing
// than the pwrite saves.

// wtail is the write buffer as readers see it: records from position at, in buf[:Written-at].
// Its bytes below Written do not change while it is not retired. A wtail retired with no
// reader holding it, and its buf, are reused for the next buffer (a sync-mode log retires one
// at every fsync: a new one each time would be an allocation per flush). A reader may hold a
// pointer to a wtail that was retired and reused since; it reads at and buf only after it
// took a reference and saw the wtail not retired, and the writer sets them before it clears
// retired, so it reads the new buffer whole (whose records below Written are all there, at
// or past its at). The writer reuses a wtail only if no reader held it when it was retired:
// a reader that takes a reference later sees it retired, until it is reused.
type wtail struct {
	at      atomic.Int64
	buf     []byte       // with the buffer's full capacity; the writer appends within it
	refs    atomic.Int32 // readers copying from buf
	retired atomic.Bool  // buf was written to the file: read it there
}

// bufferFramesLocked writes the frames of payloads at wpos into the write buffer, first
// writing out a buffer without room for them, and fills pos. Caller holds mu, and has
// rolled if the batch does not fit the segment.
func (l *Log) bufferFramesLocked(d int64, payloads [][]byte, need int64, pos []int64) error {
	if len(l.wbuf)+int(need) > cap(l.wbuf) {
		if err := l.drainLocked(); err != nil {
			return err
		}
	}
	if l.wbuf == nil {
		if int64(cap(l.wspare)) >= need {
			l.wbuf, l.wspare = l.wspare[:0], nil
		} else {
			l.wbuf = make([]byte, 0, max(l.opts.WriteBuffer, need))
		}
		t := l.wfree
		if l.wfree = nil; t == nil {
			t = new(wtail)
		}
		t.at.Store(l.wpos)
		t.buf = l.wbuf[:cap(l.wbuf)]
		t.retired.Store(false) // after at and buf: see wtail
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
	if len(l.wbuf) == 0 {
		return nil
	}
	if err := l.flushErr(); err != nil {
		return err
	}
	t := l.wtail.Load()
	off := t.at.Load() - l.active.base
	if _, err := l.active.file.WriteAt(l.wbuf, off); err != nil {
		err = fmt.Errorf("%w: write %s: %w", ErrFlush, l.active.path, err)
		l.fail(err)
		return err
	}
	end := off + int64(len(l.wbuf))
	l.retireLocked(t)
	return l.zeroAheadLocked(end)
}

// zeros is what zeroAheadLocked writes, a piece at a time.
var zeros [64 << 10]byte

// zeroAheadLocked writes zeros into the active segment's file from end, the file offset
// where its written records end, to Options.ZeroAhead past it, once end comes within half
// of that of the zeros written before (see ZeroAhead). Past end no record was written or
// buffered yet, and none can be while the caller holds mu, so the zeros overwrite nothing.
// A failed write fails the log as a failed write of records does.
func (l *Log) zeroAheadLocked(end int64) error {
	za := l.opts.ZeroAhead
	if za <= 0 || l.opts.Flush != FlushSync || end+za/2 <= l.zeroed {
		return nil
	}
	from, to := max(l.zeroed, end), min(end+za, l.active.size)
	for from < to {
		n, err := l.active.file.WriteAt(zeros[:min(to-from, int64(len(zeros)))], from)
		if err != nil {
			err = fmt.Errorf("%w: write zeros ahead in %s: %w", ErrFlush, l.active.path, err)
			l.fail(err)
			return err
		}
		from += int64(n)
	}
	l.zeroed = to
	return nil
}

// copyOutLocked is drainLocked through the active segment's mapping: it copies the buffer's
// records into the page cache with a memcpy instead of a pwrite. A pwrite of a few records
// costs more than their copy (on ext4 each one updates the file's times, a journal handle,
// where a write through the mapping does so once per page and writeback), which a lazy
// append waits for. Caller holds mu.
func (l *Log) copyOutLocked() {
	if len(l.wbuf) == 0 {
		return
	}
	t := l.wtail.Load()
	copy(l.adata[t.at.Load()-l.active.base:], l.wbuf)
	l.retireLocked(t)
}

// retireLocked lets readers read the file's copy of the write buffer t, now written out,
// and keeps its memory for the next buffer unless a reader holds it. Caller holds mu.
func (l *Log) retireLocked(t *wtail) {
	// Retire the buffer, then see whether a reader holds it: a reader that takes it after
	// this sees it retired (retired before refs here, refs before retired in readBuffered).
	t.retired.Store(true)
	l.wtail.Store(nil)
	if t.refs.Load() == 0 {
		l.wfree = t
		if cap(l.wbuf) <= int(max(l.opts.WriteBuffer, 0)) {
			l.wspare = l.wbuf
		}
	}
	l.wbuf = nil
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

// drainThrough copies the write buffer into the file's pages (copyOutLocked) if it holds
// records below end.
func (l *Log) drainThrough(end int64) {
	if t := l.wtail.Load(); t == nil || t.at.Load() >= end {
		return // already in the file
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.wtail.Load(); t != nil && t.at.Load() < end && !l.closed { // Close drained it
		l.copyOutLocked()
	}
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

// testHookReadBuffered, set by tests only, runs in readBuffered at stage 0, when the reader
// has loaded the buffer and not yet taken its reference, and at stage 1, when it has seen
// the buffer not retired and not yet copied from it: the two points where the writer
// retiring and reusing the buffer meanwhile must not make the reader return wrong bytes.
var testHookReadBuffered func(stage int)

// readBuffered decodes the record at pos, below w (Written, loaded before), from the write
// buffer, copying its payload into r.copy, if pos lies in the buffer; ok false: read the
// file.
func (r *Reader) readBuffered(pos, w int64) (d int64, payload []byte, n int, st frameStatus, ok bool) {
	t := r.l.wtail.Load() // loaded after w: a buffer written out before w was loaded is gone
	// Buffers start ever further on, so pos below this one's start, whichever buffer it
	// stands for now, is in the file: most reads, which need no reference.
	if t == nil || pos < t.at.Load() {
		return 0, nil, 0, 0, false // in the file
	}
	if testHookReadBuffered != nil {
		testHookReadBuffered(0)
	}
	t.refs.Add(1)
	defer t.refs.Add(-1)
	if t.retired.Load() {
		return 0, nil, 0, 0, false // written to the file meanwhile
	}
	// A buffer made since w was loaded starts at or past w, so past pos.
	at := t.at.Load()
	if pos < at {
		return 0, nil, 0, 0, false // in the file
	}
	if testHookReadBuffered != nil {
		testHookReadBuffered(1)
	}
	d, payload, n, st = decodeFrame(t.buf[pos-at : w-at])
	r.copy = append(r.copy[:0], payload...)
	return d, r.copy, n, st, true
}
