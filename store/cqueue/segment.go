package cqueue

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/edgemq/edgemq/store/vfs"
)

// fileExt is the extension of a queue file. The format has no header and no version: a
// format change must use a new extension.
const fileExt = ".cq"

// nextName is the file Prepare makes ahead of the roll that renames it into place. Open
// removes it: until renamed, it holds nothing.
const nextName = "next.cq.tmp"

// segment is one file of a queue. base, path and f never change once it is in the queue's
// list (the file made ahead gets its base and path when renamed into place); m is set while
// the segment is the active (last) one and nil once it is sealed. The queue's mu guards m
// against readers (see Queue).
type segment struct {
	base int64    // queue offset of the file's first slot; the file is named for it
	path string   // dir/%020d.cq
	f    vfs.File // open for the queue's lifetime
	m    []byte   // writable mapping of the whole file while active; nil when sealed
}

// fileName returns the name of the file whose first slot holds queue offset base.
func fileName(base int64) string { return fmt.Sprintf("%020d%s", base, fileExt) }

// parseFileName returns the base offset a queue file name stands for; ok is false for
// any other name.
func parseFileName(name string) (base int64, ok bool) {
	digits, found := strings.CutSuffix(name, fileExt)
	if !found || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil
}

// readChunk is how many entries a read of a sealed file fetches per ReadAt.
const readChunk = 64

// readBufs holds *[readChunk * EntrySize]byte buffers for reading sealed files, so reads
// allocate nothing in the steady state.
var readBufs = sync.Pool{New: func() any { return new([readChunk * EntrySize]byte) }}

// read decodes the entries at slots [slot, slot+len(dst)) of s into dst; the slots must
// be inside the file and below Max. It returns how many entries it stored; an entry that
// does not decode stops it with a *CorruptError. The caller holds the queue's mu (read)
// or, for a sealed segment, its wmu.
func (s *segment) read(slot int64, dst []Entry) (int, error) {
	if s.m != nil {
		for i := range dst {
			o := (slot + int64(i)) * EntrySize
			e := decode(s.m[o : o+EntrySize])
			if !e.valid() {
				return i, &CorruptError{File: s.path, Offset: s.base + slot + int64(i)}
			}
			dst[i] = e
		}
		return len(dst), nil
	}
	buf := readBufs.Get().(*[readChunk * EntrySize]byte)
	defer readBufs.Put(buf)
	done := 0
	for done < len(dst) {
		k := min(len(dst)-done, readChunk)
		b := buf[:k*EntrySize]
		at := (slot + int64(done)) * EntrySize
		if n, err := s.f.ReadAt(b, at); n < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, fmt.Errorf("cqueue: read %s at %d: %w", s.path, at, err)
		}
		for i := range k {
			e := decode(b[i*EntrySize:])
			if !e.valid() {
				return done + i, &CorruptError{File: s.path, Offset: s.base + slot + int64(done+i)}
			}
			dst[done+i] = e
		}
		done += k
	}
	return done, nil
}

// createSegment creates, allocates and maps the file for base in dir, and makes its
// directory entry durable. On error nothing is left behind (as far as Remove allows).
func createSegment(fs vfs.FS, dir string, base int64, size int) (*segment, error) {
	s, err := makeSegment(fs, filepath.Join(dir, fileName(base)), size)
	if err != nil {
		return nil, err
	}
	if err := fs.SyncDir(dir); err != nil {
		_ = s.unmap()
		_ = s.f.Close()
		_ = fs.Remove(s.path)
		return nil, fmt.Errorf("cqueue: sync dir %s: %w", dir, err)
	}
	s.base = base
	return s, nil
}

// makeSegment creates, allocates, syncs and maps the file path of size bytes. The sync makes
// its size durable before its name is, or any later file's, since the file it is sealed
// later without a sync of its own (see rollLocked). On error nothing is left behind (as far
// as Remove allows).
func makeSegment(fs vfs.FS, path string, size int) (*segment, error) {
	f, err := fs.OpenFile(path, osCreate, filePerm)
	if err != nil {
		return nil, fmt.Errorf("cqueue: create %s: %w", path, err)
	}
	s := &segment{path: path, f: f}
	fail := func(err error) (*segment, error) {
		if s.m != nil {
			_ = f.Unmap(s.m)
		}
		_ = f.Close()
		_ = fs.Remove(path)
		return nil, err
	}
	if err := f.Allocate(int64(size)); err != nil {
		return fail(fmt.Errorf("cqueue: allocate %s: %w", path, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("cqueue: sync %s: %w", path, err))
	}
	if s.m, err = f.Map(size, true); err != nil {
		return fail(fmt.Errorf("cqueue: map %s: %w", path, err))
	}
	return s, nil
}

// unmap releases s's mapping, sealing it.
func (s *segment) unmap() error {
	if s.m == nil {
		return nil
	}
	m := s.m
	s.m = nil
	if err := s.f.Unmap(m); err != nil {
		return fmt.Errorf("cqueue: unmap %s: %w", s.path, err)
	}
	return nil
}
