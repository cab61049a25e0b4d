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
// then find their pages mapped. A page costs the kernel about as much to populate as the
// writer takes to fill it with 1 KiB records (4-7 µs on a VM), and with many producers the
// goroutine waits its turn behind them, so it falls behind: then that appender maps the
// next two steps itself (helpPrefault), after the append, outside the log's lock, where
// its page faults would hold up every other appender. Both claim what they populate
// (pfilled), so no page is populated twice, and skip what the writer has passed by the time
// they get to it: behind the writer a populate would map pages again that were dropped.
//
// Populated pages are dirty zeros until written: a flush meanwhile writes them, and after
// it each takes a cheaper write-protect fault when the writer reaches it. While busy the log flushes every FlushBytes (4 MiB) or more, so that
// costs at most PrefaultBytes of zeros a flush (6 %); a slow log is not prefaulted, so its
// frequent small flushes write no zeros; and sync flush, whose every group commit would
// write them, never prefaults.

// minPrefaultStep is the least the writer advances between two wakes of prefaultLoop.
const minPrefaultStep = 16 << 10

// populateChunk is how much one system call populates: the segment's reference is held
// across the calls, but Close does not wait for more than one.
const populateChunk = 64 << 10

// prefaultHook, when set (by tests, before Open), is called by prefaultLoop after each wake
// with whether the log was busy, the positions it populated and the error that stopped it,
// and by helpPrefault after it populated (busy, always).
var prefaultHook func(busy bool, from, to int64, err error)

// populateHook, when set (by tests, before Open), is called before each chunk [from, to)
// (log positions) is populated.
var populateHook func(from, to int64)

// prefaultStep is how far the writer advances between two wakes of prefaultLoop.
func (l *Log) prefaultStep() int64 { return max(l.opts.PrefaultBytes/4, minPrefaultStep) }

// startPrefault starts prefaultLoop if the options ask for prefaulting. Called by Open.
func (l *Log) startPrefault() {
	if l.opts.Flush != FlushAsync || l.opts.PrefaultBytes <= 0 || l.opts.WriteBuffer > 0 {
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
	l.helpPrefault(end)
}

// busyWithin is how little time a step of appends takes while the log is busy.
func (l *Log) busyWithin() time.Duration {
	return time.Duration(float64(l.prefaultStep()) / float64(l.opts.PrefaultRate) * float64(time.Second))
}

// helpPrefault is called by the appender whose append, ending at end, moved the mark. If
// the last step took less than busyWithin and less than a step past end is populated (the
// goroutine is behind), it populates up to two steps past end itself.
func (l *Log) helpPrefault(end int64) {
	now := time.Now().UnixNano()
	last := l.pstepAt.Swap(now)
	step := l.prefaultStep()
	if time.Duration(now-last) >= l.busyWithin() || l.pfilled.Load() >= end+step {
		return
	}
	segs := *l.segs.Load()
	s := segs[len(segs)-1]
	from, to := l.claim(max(end, s.base), min(end+2*step, s.base+s.size))
	err := l.populate(s, from, to)
	if hook := prefaultHook; hook != nil {
		hook(true, from, to, err)
	}
	if err != nil {
		l.prefaultFailed(err)
	}
}

// claim claims the positions of [lo, hi) that no populate claimed before, and returns
// them (from >= to: none).
func (l *Log) claim(lo, hi int64) (from, to int64) {
	for {
		p := l.pfilled.Load()
		from = max(lo, p)
		if from >= hi {
			return from, from
		}
		if l.pfilled.CompareAndSwap(p, hi) {
			return from, hi
		}
	}
}

// prefaultFailed turns prefaulting off for good after a populate failed.
func (l *Log) prefaultFailed(err error) {
	if !l.prefaultOn.Swap(false) || errors.Is(err, errors.ErrUnsupported) {
		return
	}
	l.lg.Warn("prefaulting the log ahead of the writer failed; appends will take the page faults", "err", err)
}

// prefaultLoop is the prefault goroutine. Each wake means the writer advanced a step since
// the last: if that took less time than PrefaultRate allows, the log is busy and the
// goroutine maps the pages from the write position to PrefaultBytes past it that it did not
// map before. It exits when the log closes, or for good when the OS cannot populate.
func (l *Log) prefaultLoop() {
	defer l.wg.Done()
	busyWithin := l.busyWithin()
	hook := prefaultHook
	var last time.Time // of the last wake
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
		from, to := l.claim(max(end, s.base), min(end+l.opts.PrefaultBytes, s.base+s.size))
		err := l.populate(s, from, to)
		if hook != nil {
			hook(true, from, to, err)
		}
		if err != nil {
			l.prefaultFailed(err)
			return
		}
		if !l.prefaultOn.Load() { // a helper's populate failed
			return
		}
	}
}

// populate maps the pages of [from, to) (log positions) of segment s for writing, if s is
// still mapped for writing, a chunk at a time, stopping early when the log closes. What of
// the range lies outside s is left alone: a populater that took s before a roll may have
// claimed a range (empty, or not) of the next segment.
func (l *Log) populate(s *segment, from, to int64) error {
	to = min(to, s.base+s.size)
	if to <= from { // before rounding down: an empty range stays empty
		return nil
	}
	from = max(from>>pageShift<<pageShift, s.base)
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
		// The writer may have passed the chunk while this goroutine waited its turn for a
		// CPU (64 producers of 1 KiB records write a window in a millisecond): its pages
		// are mapped, or were dropped behind it, and populating them would map them again
		// behind the drops, resident until the segment is unmapped.
		if l.written.Load()-s.base >= hi {
			continue
		}
		if hook := populateHook; hook != nil {
			hook(s.base+lo, s.base+hi)
		}
		if err := s.file.Populate(data[lo:hi]); err != nil {
			return err
		}
		// A drop behind the writer that passed the chunk during the populate may have run
		// before it: drop again what the drops have passed. A drop that moves dropped
		// after this load runs after the populate, and drops the chunk itself.
		if d := l.dropped.Load() - s.base; d > lo && !l.dropOff.Load() {
			if err := s.dropResident(lo, min(hi, d)); err != nil {
				l.stopDropping(s, err)
			}
		}
	}
	return nil
}
