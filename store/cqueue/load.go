package cqueue

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// load reads q.dir and recovers the queue (doc.go, "Recovery"). On error every file it
// opened is closed again.
func (q *Queue) load() (err error) {
	if err := q.fs.MkdirAll(q.dir, dirPerm); err != nil {
		return fmt.Errorf("cqueue: create dir: %w", err)
	}
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("cqueue: read dir: %w", err)
	}
	var segs []*segment
	if slices.Contains(names, nextName) { // made ahead and never renamed into place: holds nothing
		if err := q.fs.Remove(filepath.Join(q.dir, nextName)); err != nil {
			return fmt.Errorf("cqueue: remove %s: %w", nextName, err)
		}
	}
	for _, name := range names {
		if base, ok := parseFileName(name); ok {
			if base > math.MaxInt64-q.n { // Append never names a file so: its end would overflow
				return fmt.Errorf("%w: %s: file name offset %d beyond the last queue offset %d",
					ErrCorrupt, filepath.Join(q.dir, name), base, int64(math.MaxInt64-q.n))
			}
			segs = append(segs, &segment{base: base, path: filepath.Join(q.dir, name)})
		}
	}
	slices.SortFunc(segs, func(a, b *segment) int { return cmp.Compare(a.base, b.base) })
	defer func() {
		if err != nil {
			for _, s := range segs {
				if s.f != nil {
					_ = s.unmap()
					_ = s.f.Close()
				}
			}
		}
	}()
	if len(segs) == 0 {
		return nil
	}

	// Every file but the last must be exactly full size: anything else means the
	// directory was written with another SegmentEntries, and guessing could lose data.
	size := int64(q.fileSize())
	for i, s := range segs {
		if s.f, err = q.fs.OpenFile(s.path, os.O_RDWR, filePerm); err != nil {
			return fmt.Errorf("cqueue: open: %w", err)
		}
		got, err := s.f.Size()
		if err != nil {
			return fmt.Errorf("cqueue: size of %s: %w", s.path, err)
		}
		if got != size && (i < len(segs)-1 || got > size) {
			return fmt.Errorf("%w: %s is %d bytes, want %d (was SegmentEntries changed?)",
				ErrCorrupt, s.path, got, size)
		}
	}

	// Keep the newest contiguous run of files. Files before a gap are what a crash in the
	// middle of DeleteBefore or of a rebase leaves: they can no longer be served.
	first := len(segs) - 1
	for first > 0 && segs[first-1].base+q.n == segs[first].base {
		first--
	}
	if first > 0 {
		for _, s := range segs[:first] {
			q.log.Warn("cqueue: removing file before a gap", "file", s.path)
			_ = s.f.Close()
			s.f = nil
			if err := q.fs.Remove(s.path); err != nil {
				return fmt.Errorf("cqueue: remove stale file: %w", err)
			}
		}
		segs = slices.Delete(segs, 0, first)
		if err := q.fs.SyncDir(q.dir); err != nil {
			return fmt.Errorf("cqueue: sync dir %s: %w", q.dir, err)
		}
	}

	// A roll leaves the file it sealed for a later sync, so a power cut may have torn the
	// file before the last one (never one before that, and never its size, see rollLocked).
	// Entries from its first one that does not decode are lost: the queue ends there, and
	// the last file, whose entries would follow a hole, goes.
	if len(segs) >= 2 {
		prev := segs[len(segs)-2]
		hole, err := q.firstHole(prev)
		if err != nil {
			return err
		}
		if hole < q.n {
			last := segs[len(segs)-1]
			q.log.Warn("cqueue: the file before the last is torn: removing the last file",
				"file", prev.path, "offset", prev.base+hole, "removed", last.path)
			_ = last.f.Close()
			last.f = nil
			if err := q.fs.Remove(last.path); err != nil {
				return fmt.Errorf("cqueue: remove file after a torn one: %w", err)
			}
			segs = segs[:len(segs)-1]
			if err := q.fs.SyncDir(q.dir); err != nil {
				return fmt.Errorf("cqueue: sync dir %s: %w", q.dir, err)
			}
		}
	}

	last := segs[len(segs)-1]
	if err := last.f.Allocate(size); err != nil { // a no-op unless a crash cut a roll short
		return fmt.Errorf("cqueue: allocate %s: %w", last.path, err)
	}
	if last.m, err = last.f.Map(int(size), true); err != nil {
		return fmt.Errorf("cqueue: map %s: %w", last.path, err)
	}
	end := q.recoverTail(last)
	q.dropAll(last) // recovery read the whole file
	q.segs = segs
	q.min.Store(segs[0].base)
	q.max.Store(last.base + end)
	return nil
}

// recoverTail finds the end of the data in the active segment s and zeroes everything
// after it, returning the number of entries kept. The data ends at the first all-zero
// entry or the first one that does not decode.
func (q *Queue) recoverTail(s *segment) int64 {
	end := int64(0)
	for ; end < q.n; end++ {
		b := s.m[end*EntrySize : (end+1)*EntrySize]
		if isZero(b) {
			break
		}
		if _, err := DecodeEntry(b); err != nil {
			q.log.Warn("cqueue: cutting torn tail", "file", s.path, "offset", s.base+end, "err", err)
			break
		}
	}
	rest := s.m[end*EntrySize:]
	if n := lastNonZero(rest); n > 0 {
		q.log.Warn("cqueue: zeroing bytes past the end of data",
			"file", s.path, "offset", s.base+end, "bytes", n)
		clear(rest[:n])
		if err := s.f.Sync(); err != nil {
			// Not fatal: the bytes are zero in memory, and the next Sync retries.
			q.log.Warn("cqueue: sync after zeroing", "file", s.path, "err", err)
			q.markDirtyLocked()
		}
	}
	return end
}

// lastNonZero returns the length of the shortest prefix of b after which b is all zero.
func lastNonZero(b []byte) int {
	n := len(b)
	for n >= 8 && binary.LittleEndian.Uint64(b[n-8:]) == 0 {
		n -= 8
	}
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

// firstHole returns the slot of the first entry of the sealed file s that does not decode
// (all-zero or invalid), or q.n if every one does.
func (q *Queue) firstHole(s *segment) (int64, error) {
	m, err := s.f.Map(q.fileSize(), false)
	if err != nil {
		return 0, fmt.Errorf("cqueue: map %s: %w", s.path, err)
	}
	slot := int64(0)
	for ; slot < q.n; slot++ {
		if !decode(m[slot*EntrySize : (slot+1)*EntrySize]).valid() {
			break
		}
	}
	if err := s.f.Unmap(m); err != nil {
		return 0, fmt.Errorf("cqueue: unmap %s: %w", s.path, err)
	}
	return slot, nil
}
