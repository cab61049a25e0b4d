package vfs_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/internal/guard"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// TestHostileCalls calls every method of OS and CrashFS, and of their files open and
// closed, with hostile names, offsets, sizes and slices: each returns an error (or, where
// marked, nothing to do) and none panics.
func TestHostileCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"OS", vfs.OS, t.TempDir()}, {"CrashFS", vfstest.NewCrashFS(), "/d"}} {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := tc.fs, tc.dir
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				f    func() error
			}{
				{"OpenFile(empty)", func() error { _, err := fs.OpenFile("", os.O_RDWR|os.O_CREATE, 0o644); return err }},
				{"OpenFile(dir)", func() error { _, err := fs.OpenFile(dir, os.O_RDWR, 0); return err }},
				{"Remove(empty)", func() error { return fs.Remove("") }},
				{"Rename(empty)", func() error { return fs.Rename("", "") }},
				{"SyncDir(missing)", func() error { return fs.SyncDir(filepath.Join(dir, "missing")) }},
				{"Usage(missing)", func() error { _, err := fs.Usage(filepath.Join(dir, "missing")); return err }},
			} {
				if err := guard.Call(t, c.name, c.f); err == nil {
					t.Errorf("%s: got no error", c.name)
				}
			}
			// "" is no directory to the OS; CrashFS, a simulation, takes it as one.
			guard.Call(t, "MkdirAll(empty)", func() error { return fs.MkdirAll("", 0o755) })
			guard.Call(t, "ReadDir(empty)", func() error { _, err := fs.ReadDir(""); return err })
			f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Allocate(1 << 16); err != nil {
				t.Fatal(err)
			}
			m, err := f.Map(1<<16, true)
			if err != nil {
				t.Fatal(err)
			}
			foreign := make([]byte, 1<<16)
			const (
				fails  = iota // must return an error
				noop          // nothing to do: must return nil
				either        // OS and CrashFS differ (OS: Allocate never shrinks, so -1 is a no-op)
			)
			for _, c := range []struct {
				name string
				f    func() error
				want int
			}{
				{"ReadAt(-1)", func() error { _, err := f.ReadAt(make([]byte, 1), -1); return err }, fails},
				{"ReadAt(MaxInt64)", func() error { _, err := f.ReadAt(make([]byte, 1), math.MaxInt64); return err }, fails},
				{"WriteAt(-1)", func() error { _, err := f.WriteAt([]byte{1}, -1); return err }, fails},
				{"WriteAt(MaxInt64)", func() error { _, err := f.WriteAt([]byte{1}, math.MaxInt64); return err }, fails},
				{"Truncate(-1)", func() error { return f.Truncate(-1) }, fails},
				{"Allocate(-1)", func() error { return f.Allocate(-1) }, either},
				{"Map(-1)", func() error { _, err := f.Map(-1, false); return err }, fails},
				{"Map(0)", func() error { _, err := f.Map(0, false); return err }, noop},
				{"Unmap(nil)", func() error { return f.Unmap(nil) }, noop},
				{"Unmap(not mapped)", func() error { return f.Unmap(foreign) }, fails},
				{"DropResident(nil)", func() error { return f.DropResident(nil) }, noop},
				{"Populate(nil)", func() error { return f.Populate(nil) }, noop},
			} {
				err := guard.Call(t, c.name, c.f)
				if c.want == fails && err == nil || c.want == noop && err != nil {
					t.Errorf("%s: got %v", c.name, err)
				}
			}
			if err := f.Unmap(m); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				f    func() error
			}{
				{"ReadAt", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
				{"WriteAt", func() error { _, err := f.WriteAt([]byte{1}, 0); return err }},
				{"Sync", f.Sync},
				{"Truncate", func() error { return f.Truncate(0) }},
				{"Allocate", func() error { return f.Allocate(1 << 17) }},
				{"Size", func() error { _, err := f.Size(); return err }},
				{"Map", func() error { _, err := f.Map(1<<16, false); return err }},
				{"Close", f.Close},
			} {
				if err := guard.Call(t, "closed "+c.name, c.f); err == nil {
					t.Errorf("%s after Close: got no error", c.name)
				}
			}
		})
	}
}
