package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/store/vfs"
)

const segSuffix = ".log"

func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }

func parseSegmentName(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(s, 10, 64)
	return base, err == nil && base >= 0
}

// HasSegments reports whether dir holds a segment file, as a log that was ever opened there
// does; a missing dir holds none.
func HasSegments(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("commitlog: list %s: %w", dir, err)
	}
	for _, name := range names {
		if _, ok := parseSegmentName(name); ok {
			return true, nil
		}
	}
	return false, nil
}

// segment is one file of the log. Its mapping is reference counted: readers acquire it, and
// retention or Close unmaps only once the last reference is gone.
type segment struct {
	base     int64 // global position of byte 0 of the file
	baseTime int64 // unix ms from the header
	prevEnd  int64 // where the previous segment's data ended when this one began
	path     string
	size     int64
	file     vfs.File
	// named: the segment's directory entry is durable. A roll names the new segment
	// without syncing the directory; the flusher syncs it with the segment's first fsync.
	named atomic.Bool

	mu       sync.Mutex // guards the fields below
	data     []byte     // the mapping, nil while unmapped
	writable bool
	refs     int // acquirers, plus one for the writer while the segment is active
	deleted  bool
	closing  bool  // Close ran while readers held the segment: the last release closes it
	lastUse  int64 // retention tick of the last acquire
}

// acquire maps the segment if needed, takes a reference and returns the mapping, which
// stays valid until release. It returns nil once the segment was deleted.
func (s *segment) acquire(tick int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted || s.closing {
		return nil, nil
	}
	if s.data == nil {
		b, err := s.file.Map(int(s.size), false)
		if err != nil {
			return nil, fmt.Errorf("commitlog: map %s: %w", s.path, err)
		}
		s.data = b
	}
	s.refs++
	s.lastUse = tick
	return s.data, nil
}

// release drops a reference; the last one of a deleted segment unmaps, closes and removes it.
func (s *segment) release(fs vfs.FS) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	switch {
	case s.refs > 0:
		return nil
	case s.deleted:
		return s.destroyLocked(fs)
	case s.closing:
		err := s.unmapLocked()
		if cerr := s.file.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return nil
}

// markDeleted marks the segment gone; its file is removed once no reader holds it.
func (s *segment) markDeleted(fs vfs.FS) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return nil
	}
	s.deleted = true
	if s.refs == 0 {
		return s.destroyLocked(fs)
	}
	return nil
}

func (s *segment) destroyLocked(fs vfs.FS) error {
	err := s.unmapLocked()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	if rerr := fs.Remove(s.path); err == nil {
		err = rerr
	}
	return err
}

// unmapIdle unmaps the segment if nobody holds it.
func (s *segment) unmapIdle() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs > 0 || s.data == nil {
		return nil
	}
	return s.unmapLocked()
}

func (s *segment) unmapLocked() error {
	if s.data == nil {
		return nil
	}
	err := s.file.Unmap(s.data)
	s.data = nil
	s.writable = false
	return err
}

func (s *segment) mapped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data != nil
}

func (s *segment) idleSince() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUse, s.refs == 0 && s.data != nil
}

// close unmaps and closes without removing the file; while readers hold the segment, the
// last of them does it.
func (s *segment) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs > 0 {
		s.closing = true
		return nil
	}
	if s.deleted {
		return nil // destroyed already
	}
	err := s.unmapLocked()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// openWritable maps the segment for writing, takes the writer's reference and returns the
// mapping.
func (s *segment) openWritable() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data != nil && !s.writable {
		if s.refs > 0 {
			return nil, fmt.Errorf("commitlog: %s is mapped read-only by a reader", s.path)
		}
		if err := s.unmapLocked(); err != nil {
			return nil, err
		}
	}
	if s.data == nil {
		b, err := s.file.Map(int(s.size), true)
		if err != nil {
			return nil, fmt.Errorf("commitlog: map %s for writing: %w", s.path, err)
		}
		s.data = b
		s.writable = true
	}
	s.refs++
	return s.data, nil
}

func segPath(dir string, base int64) string { return filepath.Join(dir, segmentName(base)) }

// dropResident drops the pages of [lo, hi) (file offsets) from the resident set, if the
// segment is mapped: lo is rounded down to a page, hi down too unless it is the end of the
// file. Dirty pages may be given: they stay dirty in the page cache (vfs.File.DropResident).
func (s *segment) dropResident(lo, hi int64) error {
	lo = lo >> pageShift << pageShift
	if hi < s.size {
		hi = hi >> pageShift << pageShift
	}
	if hi <= lo {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil || s.deleted {
		return nil
	}
	if lo, hi = max(lo, 0), min(hi, int64(len(s.data))); hi <= lo { // a caller's range past s
		return nil
	}
	return s.file.DropResident(s.data[lo:hi])
}

// acquireWritable takes a reference to the segment's writable mapping and returns it, or
// nil if the segment is not mapped for writing (sealed and remapped, deleted, closing).
func (s *segment) acquireWritable() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil || !s.writable || s.deleted || s.closing {
		return nil
	}
	s.refs++
	return s.data
}
