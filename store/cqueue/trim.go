package cqueue

import (
	"fmt"
	"slices"
)

// TruncateFrom removes the entries at offsets >= off: files past the one holding off are
// removed (newest first, so a crash leaves a contiguous prefix) and the rest of that file
// is zeroed and synced. Recovery uses it when the commitlog was cut. off >= Max does
// nothing; off <= Min removes every entry and leaves an empty queue at Min. If removing
// a file fails the queue refuses further writes (the error is sticky), because the disk
// would no longer match Max.
func (q *Queue) TruncateFrom(off int64) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.werr != nil {
		return q.werr
	}
	lo, hi := q.min.Load(), q.max.Load()
	off = max(off, lo)
	if off >= hi {
		return nil
	}
	k := int((off - q.segs[0].base) / q.n)
	s := q.segs[k]
	last := len(q.segs) - 1
	if k == last {
		q.mu.Lock()
		q.max.Store(off)
		q.mu.Unlock()
	} else {
		m, err := s.f.Map(q.fileSize(), true)
		if err != nil {
			return fmt.Errorf("cqueue: map %s: %w", s.path, err)
		}
		q.mu.Lock()
		uerr := q.segs[last].unmap()
		s.m = m
		q.sealed = nil // s, or removed below: s is active again, and synced below
		dropped := append([]*segment(nil), q.segs[k+1:]...)
		clear(q.segs[k+1:])
		q.segs = q.segs[:k+1]
		q.max.Store(off)
		q.mu.Unlock()
		if uerr != nil {
			q.log.Warn("cqueue: unmap truncated file", "err", uerr)
		}
		q.waitSyncLocked()
		for i := len(dropped) - 1; i >= 0; i-- {
			d := dropped[i]
			_ = d.f.Close()
			if err := q.fs.Remove(d.path); err != nil {
				q.werr = fmt.Errorf("cqueue: truncate: remove %s: %w", d.path, err)
				return q.werr
			}
		}
		if err := q.syncDirLocked(); err != nil {
			q.werr = fmt.Errorf("cqueue: truncate: %w", err)
			return q.werr
		}
	}
	// Readers can no longer reach [off, hi): Max went down under mu.
	from := (off - s.base) * EntrySize
	to := min(hi-s.base, q.n) * EntrySize
	clear(s.m[from:to])
	q.dropAll(s)
	q.resetDropLocked()
	if err := s.f.Sync(); err != nil {
		q.markDirtyLocked()
		return fmt.Errorf("cqueue: sync %s: %w", s.path, err)
	}
	q.dirty = false
	return nil
}

// DeleteBefore is retention: it deletes every sealed file whose last entry has
// Pos < pos, then moves Min up past the entries with Pos < pos (found by binary search,
// so Pos must grow with the offset, as the commitlog makes it). Min never passes Max and
// the active file is never deleted. It returns the number of files deleted. Readers of a
// deleted file get ErrOffsetTooSmall; a reader already inside it finishes first.
//
// Min moved inside a file is not written down: after Open, Min is the first slot of the
// first file again, and the store calls DeleteBefore once more.
func (q *Queue) DeleteBefore(pos int64) (int, error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return 0, ErrClosed
	}
	if q.werr != nil {
		return 0, q.werr
	}
	drop := 0
	var last [1]Entry
	for ; drop < len(q.segs)-1; drop++ {
		if _, err := q.segs[drop].read(q.n-1, last[:]); err != nil {
			return 0, err
		}
		if last[0].Pos >= pos {
			break
		}
	}
	var err error
	if drop > 0 {
		q.mu.Lock()
		dropped := append([]*segment(nil), q.segs[:drop]...)
		if slices.Contains(dropped, q.sealed) {
			q.sealed = nil
		}
		q.segs = append([]*segment(nil), q.segs[drop:]...)
		if b := q.segs[0].base; q.min.Load() < b {
			q.min.Store(b)
		}
		q.mu.Unlock()
		// Oldest first: a crash in between leaves a gap, and Open removes what is before it.
		q.waitSyncLocked()
		for _, d := range dropped {
			_ = d.f.Close()
			if rerr := q.fs.Remove(d.path); rerr != nil && err == nil {
				err = fmt.Errorf("cqueue: remove %s: %w", d.path, rerr)
			}
		}
		if derr := q.syncDirLocked(); derr != nil && err == nil {
			err = derr
		}
	}
	m, serr := q.Search(func(e Entry) (bool, error) { return e.Pos >= pos, nil })
	if serr != nil {
		if err == nil {
			err = serr
		}
		return drop, err
	}
	if m > q.min.Load() {
		q.min.Store(m)
	}
	return drop, err
}
