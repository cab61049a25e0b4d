package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestOSFile(t *testing.T) {
	const size = 64 << 10
	dir := t.TempDir()
	name := filepath.Join(dir, "seg")
	f := mustOpen(t, OS, name, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	defer f.Close()
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(size / 2); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Size(); err != nil || got != size {
		t.Fatalf("Size after Allocate = %d, %v; want %d (Allocate never shrinks)", got, err, size)
	}
	m, err := f.Map(size, true)
	if err != nil {
		t.Fatal(err)
	}
	copy(m[100:], "mapped")
	got := make([]byte, 6)
	if _, err := f.ReadAt(got, 100); err != nil || string(got) != "mapped" {
		t.Errorf("ReadAt after a mapped write = %q, %v; want %q", got, err, "mapped")
	}
	mustWrite(t, f, []byte("written"), size-7)
	if string(m[size-7:]) != "written" {
		t.Errorf("mapping after WriteAt = %q, want %q", m[size-7:], "written")
	}
	mustSync(t, f)
	if err := f.Unmap(m); err != nil {
		t.Fatal(err)
	}
	if err := OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if names, err := OS.ReadDir(dir); err != nil || !slices.Equal(names, []string{"seg"}) {
		t.Errorf("ReadDir = %q, %v; want [seg]", names, err)
	}
	if _, err := OS.OpenFile(filepath.Join(dir, "missing", "f"), os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("create in a missing dir: %v, want ErrNotExist", err)
	}
	u, err := OS.Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Total == 0 || u.Free > u.Total || u.UsedRatio() < 0 || u.UsedRatio() > 1 {
		t.Errorf("Usage = %+v (used ratio %.3f), want 0 < Total, Free <= Total", u, u.UsedRatio())
	}
}

func TestNoSpace(t *testing.T) {
	eio := &os.PathError{Op: "write", Path: "f", Err: syscall.EIO}
	for _, tc := range []struct {
		name  string
		err   error
		full  bool
		errno error
	}{
		{"ENOSPC", &os.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}, true, syscall.ENOSPC},
		{"EDQUOT", &os.PathError{Op: "fallocate", Path: "f", Err: syscall.EDQUOT}, true, syscall.EDQUOT},
		{"EIO", eio, false, syscall.EIO},
	} {
		got := noSpace(tc.err)
		if errors.Is(got, ErrNoSpace) != tc.full {
			t.Errorf("%s: errors.Is(%v, ErrNoSpace) = %v, want %v", tc.name, got, !tc.full, tc.full)
		}
		if !errors.Is(got, tc.errno) {
			t.Errorf("%s: %v lost the errno", tc.name, got)
		}
	}
	if got := noSpace(eio); got != error(eio) {
		t.Errorf("noSpace(EIO) = %v, want the error unchanged", got)
	}
	if got := noSpace(nil); got != nil {
		t.Errorf("noSpace(nil) = %v, want nil", got)
	}
}
