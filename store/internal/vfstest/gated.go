// Package vfstest has file systems for tests of the store's packages. CrashFS keeps files
// in memory and simulates power cuts: a Cut keeps what was synced and tears what was not.
// SyncHookFS calls a function before every fsync; GatedFS, built on it, holds fsyncs at a
// gate, so that a test can act while one is in flight. StepFS calls a function before every
// step that orders what reaches the disk (fsyncs and renames), where a test can take cuts.
package vfstest

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/store/vfs"
)

// SyncHookFS is a vfs.FS that calls Hook before each Sync of a file it opened (with the
// path the file was opened by, dir false) and before each SyncDir (with the directory, dir
// true). Hook may block: the sync waits for it.
type SyncHookFS struct {
	vfs.FS
	Hook func(path string, dir bool)
}

// OpenFile opens name on the underlying FS, with its Sync hooked.
func (h SyncHookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	return hookedFile{f, name, h.Hook}, nil
}

// SyncDir calls the hook, then syncs dir on the underlying FS.
func (h SyncHookFS) SyncDir(dir string) error {
	h.Hook(dir, true)
	return h.FS.SyncDir(dir)
}

type hookedFile struct {
	vfs.File
	path string
	hook func(path string, dir bool)
}

func (f hookedFile) Sync() error {
	f.hook(f.path, false)
	return f.File.Sync()
}

// GatedFS is a vfs.FS whose files' Sync, for files whose path contains Match, waits at a
// gate while Gates is positive (each gated Sync counts it down): it sends on Entered, then
// waits to receive on Release, then syncs. Other Syncs, and SyncDir, pass. Once Open is
// called, no Sync waits any more.
type GatedFS struct {
	SyncHookFS
	Match            string
	Entered, Release chan struct{}
	Gates            *atomic.Int32
	open             chan struct{}
	once             *sync.Once
}

// NewGatedFS returns a GatedFS over vfs.OS that gates the next gates Syncs of files whose
// path contains match.
func NewGatedFS(match string, gates int32) GatedFS {
	g := GatedFS{Match: match, Entered: make(chan struct{}), Release: make(chan struct{}), Gates: new(atomic.Int32),
		open: make(chan struct{}), once: new(sync.Once)}
	g.Gates.Store(gates)
	entered, release, count, open := g.Entered, g.Release, g.Gates, g.open
	g.SyncHookFS = SyncHookFS{FS: vfs.OS, Hook: func(path string, dir bool) {
		if !dir && strings.Contains(path, match) && count.Add(-1) >= 0 {
			select {
			case entered <- struct{}{}:
			case <-open:
				return
			}
			select {
			case <-release:
			case <-open:
			}
		}
	}}
	return g
}

// Open opens the gate for good: the Syncs waiting at it go on, and later ones pass. A test
// defers it, so that when it fails with a Sync at the gate it can still close what it opened.
func (g GatedFS) Open() { g.once.Do(func() { close(g.open) }) }
