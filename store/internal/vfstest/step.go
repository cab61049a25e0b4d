package vfstest

import (
	"os"

	"github.com/edgemq/edgemq/store/vfs"
)

// Op is a kind of step that orders what reaches the disk.
type Op int

// The steps StepFS reports.
const (
	StepSync    Op = iota // File.Sync: the file's bytes become durable
	StepSyncDir           // SyncDir: the names created, renamed or removed in a directory become durable
	StepRename            // Rename: a file takes a new name (durable after a SyncDir)
)

func (op Op) String() string {
	switch op {
	case StepSync:
		return "sync"
	case StepSyncDir:
		return "syncdir"
	case StepRename:
		return "rename"
	}
	return "op?"
}

// Step is one step a program is about to take through a StepFS.
type Step struct {
	Op   Op
	Path string   // the file as it was opened (StepSync), the directory, or the rename's old name
	To   string   // the rename's new name
	File vfs.File // StepSync: the file of the underlying FS about to be synced
}

// StepFS is a vfs.FS that calls Before before every step that orders what reaches the
// disk: each File.Sync of a file it opened, each SyncDir and each Rename. Between two such
// steps, writes reach the disk in any order or not at all, so these are the points where the
// order of a program's steps decides what a power cut can leave: a test that takes cuts in
// Before (CrashFS.CutClean, CutAllBut, CutNamesOnly) meets every ordering the program has,
// deterministically, where cuts at random times almost never fall between two steps
// microseconds apart. Before may block: the step waits for it. It may be called
// from several goroutines at once.
type StepFS struct {
	vfs.FS
	Before func(Step)
}

// OpenFile opens name on the underlying FS, with its Sync reported.
func (s StepFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	return stepFile{f, name, s.Before}, nil
}

// SyncDir reports the step, then syncs dir on the underlying FS.
func (s StepFS) SyncDir(dir string) error {
	s.Before(Step{Op: StepSyncDir, Path: dir})
	return s.FS.SyncDir(dir)
}

// Rename reports the step, then renames on the underlying FS.
func (s StepFS) Rename(oldname, newname string) error {
	s.Before(Step{Op: StepRename, Path: oldname, To: newname})
	return s.FS.Rename(oldname, newname)
}

type stepFile struct {
	vfs.File
	path   string
	before func(Step)
}

func (f stepFile) Sync() error {
	f.before(Step{Op: StepSync, Path: f.path, File: f.File})
	return f.File.Sync()
}
