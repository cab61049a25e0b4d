// Package vfstest has file systems for tests of the store's packages. GatedFS holds fsyncs
// at a gate, so that a test can act while one is in flight.
package vfstest

import (
	"os"
	"strings"
	"sync/atomic"

	"github.com/edgemq/edgemq/store/vfs"
)

// GatedFS is a vfs.FS whose files' Sync, for files whose path contains Match, waits at a
// gate while Gates is positive (each gated Sync counts it down): it sends on Entered, then
// waits to receive on Release, then syncs. Other Syncs pass.
type GatedFS struct {
	vfs.FS
	Match            string
	Entered, Release chan struct{}
	Gates            *atomic.Int32
}

// NewGatedFS returns a GatedFS over vfs.OS that gates the next gates Syncs of files whose
// path contains match.
func NewGatedFS(match string, gates int32) GatedFS {
	g := GatedFS{FS: vfs.OS, Match: match, Entered: make(chan struct{}), Release: make(chan struct{}), Gates: new(atomic.Int32)}
	g.Gates.Store(gates)
	return g
}

// OpenFile opens name on the underlying FS, gated if it matches.
func (g GatedFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, g.Match) {
		return f, err
	}
	return gatedFile{f, g}, nil
}

type gatedFile struct {
	vfs.File
	g GatedFS
}

func (f gatedFile) Sync() error {
	if f.g.Gates.Add(-1) >= 0 {
		f.g.Entered <- struct{}{}
		<-f.g.Release
	}
	return f.File.Sync()
}
