package commitlog

import (
	"errors"
	"time"
)

// Prefaulting. The first write into each page of the active segment's mapping takes a page
// fault: the kernel allocates and zeroes a page-cache page and ext4 reserves its block
// (page_mkwrite), about 4 µs on a VM, and the write that takes it runs under the store's
// append lock, which every producer waits for. 100-byte records fill a page in about 33
// appends, so the fault is about a quarter of an append's time under that lock.
//
// With async flush, while the log is busy (PrefaultRate), a goroutine (prefaultLoop) maps
// the PrefaultBytes ahead of the write position for writing (vfs.File.Populate), a quarter
// of it at a time, woken by the appender whose append passes the next mark. The appends
// then find their pages mapped. Populated pages are dirty zeros until written: a flush
// meanwhile writes them, and after it each takes a cheaper write-protect fault when the
// writer reaches it. While busy the log flushes every FlushBytes (4 MiB) or more, so that
// costs at most PrefaultBytes of zeros a flush (6 %); a slow log is not prefaulted, so its
// frequent small flushes write no zeros; and sync flush, whose every group commit would
// write them, never prefaults.

// minPrefaultStep is the least the writer advances between two wakes of prefaultLoop.
const minPrefaultStep = 16 << 10

// populateChunk is how much one system call populates: the segment's reference is held
// across the calls, but Close does not wait for more than one.
const populateChunk = 64 << 10

// prefaultHook, when set (by tests, before Open), is called by prefaultLoop after each wake
// with whether the log was busy, the positions it populated and the error that stopped it.
var prefaultHook func(busy bool, from, to int64, err error)

// prefaultStep is how far the writer advances between two wakes of prefaultLoop.
func (l *Log) prefaultStep() int64 { return max(l.opts.PrefaultBytes/4, minPrefaultStep) }

// startPrefault starts prefaultLoop if the options ask for prefaulting. Called by Open.
func (l *Log) startPrefault() {
	if l.opts.Flush != FlushAsync || l.opts.PrefaultBytes <= 0 {
		return
	}
	l.pkick = make(chan struct{}, 1)
	l.pmark.Store(l.written.Load() + l.prefaultStep())
	l.prefaultOn.Store(true)
	l.wg.Add(1)
	go l.prefaultLoop()
}

// kickPrefault wakes prefaultLoop when end, the end of an append, passed the mark. Of
// concurrent appenders, the one that moves the mark wakes it.
func (l *Log) kickPrefault(end int64) {
	if !l.prefaultOn.Load() {
		return
	}
	mark := l.pmark.Load()
	if end < mark || !l.pmark.CompareAndSwap(mark, end+l.prefaultStep()) {
		return
	}
	select {
	case l.pkick <- struct{}{}:
	default:
	}
}

// prefaultLoop is the prefault goroutine. Each wake means the writer advanced a step since
// the last: if that took less time than PrefaultRate allows, the log is busy and the
// goroutine maps the pages from the write position to PrefaultBytes past it that it did not
// map before. It exits when the log closes, or for good when the OS cannot populate.
func (l *Log) prefaultLoop() {
	defer l.wg.Done()
	step := l.prefaultStep()
	busyWithin := time.Duration(float64(step) / float64(l.opts.PrefaultRate) * float64(time.Second))
	hook := prefaultHook
	var (
		last   time.Time // of the last wake
		mapped int64     // the pages from the write position to here are mapped
	)
	for {
		select {
		case <-l.pkick:
		case <-l.done:
			return
		}
		now := time.Now()
		busy := now.Sub(last) < busyWithin
		last = now
		if !busy {
			if hook != nil {
				hook(false, 0, 0, nil)
			}
			continue
		}
		end := l.written.Load()
		segs := *l.segs.Load()
		s := segs[len(segs)-1]
		from := max(end, mapped, s.base)
		to := min(end+l.opts.PrefaultBytes, s.base+s.size)
		err := l.populate(s, from, to)
		if hook != nil {
			hook(true, from, to, err)
		}
		if err != nil {
			l.prefaultOn.Store(false)
			if !errors.Is(err, errors.ErrUnsupported) {
				l.lg.Warn("prefaulting the log ahead of the writer failed; appends will take the page faults", "err", err)
			}
			return
		}
		mapped = to
	}
}

// populate maps the pages of [from, to) (log positions) of segment s for writing, if s is
// still mapped for writing, a chunk at a time, stopping early when the log closes.
func (l *Log) populate(s *segment, from, to int64) error {
	from = from >> pageShift << pageShift
	if to <= from {
		return nil
	}
	data := s.acquireWritable()
	if data == nil {
		return nil
	}
	defer func() {
		if err := s.release(l.fs); err != nil {
			l.lg.Warn("release segment after prefaulting", "segment", s.path, "err", err)
		}
	}()
	for lo := from - s.base; lo < to-s.base; lo += populateChunk {
		select {
		case <-l.done:
			return nil
		default:
		}
		hi := min(lo+populateChunk, to-s.base)
		if err := s.file.Populate(data[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}
