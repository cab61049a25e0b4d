package vfs

import (
	"fmt"
	"testing"
)

// check fails t, naming what, when err is not nil.
func check(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustOpen(t testing.TB, fsys FS, name string, flag int) File {
	t.Helper()
	f, err := fsys.OpenFile(name, flag, 0o644)
	check(t, "open "+name, err)
	return f
}

func mustWrite(t testing.TB, f File, p []byte, off int64) {
	t.Helper()
	_, err := f.WriteAt(p, off)
	check(t, fmt.Sprintf("write %s at %d", f.Name(), off), err)
}

func mustSync(t testing.TB, f File) {
	t.Helper()
	check(t, "sync "+f.Name(), f.Sync())
}
