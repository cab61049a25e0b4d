//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func (osFS) Usage(dir string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("vfs: statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize) //nolint:unconvert // Bsize is int32 on some platforms
	// As df counts: the blocks in use, plus those an unprivileged writer may still take.
	// Blocks reserved for root (and any other gap between free and available blocks) are
	// neither, so a file system with a large reserve is not taken for a full one.
	used := uint64(st.Blocks) - min(uint64(st.Bfree), uint64(st.Blocks))
	return Usage{Total: (used + uint64(st.Bavail)) * bs, Free: uint64(st.Bavail) * bs}, nil
}

// Allocate reserves blocks with fallocate. Where the file system cannot (UBIFS, some FUSE
// file systems), it writes zeros over the new range instead: slower, and one more write of
// flash per segment, but a later write through a mapping can then never hit ENOSPC (which a
// mapping reports as SIGBUS, not as an error).
func (f osFile) Allocate(size int64) error {
	cur, err := f.Size()
	if err != nil {
		return err
	}
	if cur >= size {
		return nil
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return noSpace(&os.PathError{Op: "fallocate", Path: f.File.Name(), Err: err})
	}
	zeros := make([]byte, 1<<20)
	for off := cur; off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}

func (f osFile) Map(length int, writable bool) ([]byte, error) {
	if length == 0 {
		return nil, nil
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(int(f.Fd()), 0, length, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.File.Name(), Err: err}
	}
	if writable {
		// One-page folios for what is written through the mapping (see the File.Map
		// doc): a write fault dirties its whole page-cache folio, and with large folios
		// (ext4 on Linux 6.x) every fsync rewrote up to 2 MiB around the write position.
		// MADV_RANDOM makes faults read no ahead and allocate single pages. It is advice:
		// a kernel that refuses it only loses the benefit.
		_ = unix.Madvise(b, unix.MADV_RANDOM)
	}
	return b, nil
}

func (f osFile) Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// DropResident is madvise(MADV_DONTNEED). On a MAP_SHARED file mapping it only unmaps the
// pages from this process; a dirty page stays dirty in the page cache for the next
// fdatasync (TestDropResidentKeepsUnsyncedWrites). On a private mapping it would discard
// writes, but Map makes only shared ones.
func (f osFile) DropResident(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		return &os.PathError{Op: "madvise", Path: f.File.Name(), Err: err}
	}
	return nil
}

// Populate is madvise(MADV_POPULATE_WRITE): it faults the pages of b in for writing as a
// write would, allocating and zeroing page-cache pages over holes and unwritten extents and
// marking them dirty. Kernels before 5.14 answer EINVAL. An interrupted call is retried.
func (f osFile) Populate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	for err == unix.EINTR {
		err = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	}
	if err != nil {
		if err == unix.EINVAL {
			err = fmt.Errorf("%w: madvise(MADV_POPULATE_WRITE): %w", errors.ErrUnsupported, err)
		}
		return &os.PathError{Op: "madvise", Path: f.File.Name(), Err: err}
	}
	return nil
}
