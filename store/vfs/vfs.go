// Package vfs is the storage layer under the message store: the few file and directory
// operations the commitlog, the consume queues and the checkpoint need, behind an interface so
// tests can swap the real file system (OS) for one that simulates power cuts (CrashFS, in
// the test-support package store/internal/vfstest).
//
// Durability contract, the same for every implementation:
//   - bytes written through WriteAt or through a writable mapping are durable only after
//     File.Sync returns;
//   - a file created, renamed or removed in a directory is durable only after SyncDir on that
//     directory returns.
//
// Anything not made durable that way may be lost, partly written or torn by a power cut.
package vfs

import (
	"errors"
	"io"
	"os"
)

// ErrNoSpace is returned (wrapped) when the file system has no room for a write or an
// allocation. Callers test it with errors.Is; OS maps ENOSPC and EDQUOT to it.
var ErrNoSpace = errors.New("vfs: no space left on device")

// FS is a file system.
type FS interface {
	// OpenFile opens the named file with the os.O_* flags (os.O_RDWR|os.O_CREATE and the like).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes the named file.
	Remove(name string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names of the entries in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// Usage reports the size and free space of the file system holding dir.
	Usage(dir string) (Usage, error)
}

// Usage is what statfs says of a file system, in bytes.
type Usage struct {
	Total uint64 // bytes in use plus Free: the size df's Use% divides by (no root reserve)
	Free  uint64 // bytes available to an unprivileged writer
}

// UsedRatio returns the fraction of the file system in use, 0..1: df's Use%.
func (u Usage) UsedRatio() float64 {
	if u.Total == 0 {
		return 0
	}
	return float64(u.Total-min(u.Free, u.Total)) / float64(u.Total)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes the file's written bytes durable (fdatasync).
	Sync() error
	// Truncate changes the size of the file; bytes past the old end read as zeros.
	Truncate(size int64) error
	// Allocate makes the file at least size bytes long with its blocks reserved, so later
	// writes within size cannot fail for lack of space. It returns an error wrapping
	// ErrNoSpace when the file system is full.
	Allocate(size int64) error
	// Size returns the file's size in bytes.
	Size() (int64, error)
	// Map maps the first length bytes of the file (which must be at least that long) into
	// memory. Writes through a writable mapping behave like WriteAt (durable after Sync).
	// A writable mapping is written in pages, not in larger page-cache folios: a write
	// through a mapping dirties the whole folio it falls in, and Sync writes what is dirty,
	// so on Linux 6.x with large folios every Sync after a small write rewrote up to 2 MiB
	// (70 times the data of the peer benchmark's durable sends). The price is a page fault
	// per page written instead of per folio.
	Map(length int, writable bool) ([]byte, error)
	// Unmap releases a mapping returned by Map. The slice must not be used afterwards.
	Unmap(b []byte) error
	// DropResident tells the OS the pages of b, a part of a mapping starting on a page
	// boundary, will not be needed soon: they leave the process's resident set but stay in
	// the page cache, and a later access reads them back (a minor fault). Pages written
	// through a writable mapping and not yet synced may be given: their data is kept and
	// the next Sync makes it durable as if they had not been dropped. (On Linux,
	// MADV_DONTNEED on a shared file mapping moves each page table entry's dirty bit to the
	// page-cache page: mm/memory.c, zap_pte_range.) The mapping stays valid.
	DropResident(b []byte) error
	// Populate maps the pages of b, a part of a writable mapping starting on a page
	// boundary, for writing, so that writes into them take no page fault. It changes no
	// data, but it dirties the pages: the next Sync writes them (zeros where nothing was
	// written yet). It returns an error wrapping errors.ErrUnsupported where the OS cannot
	// (Linux before 5.14).
	Populate(b []byte) error
	// Close closes the file. Mappings stay valid until Unmap.
	Close() error
	// Name returns the name the file was opened with.
	Name() string
}
