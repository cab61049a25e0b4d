package vfstest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCrashFSCutAllBut: the cut before a step keeps every unsynced write and every pending
// name but what the step was to make durable: the synced file's unsynced bytes (found under
// its new name after a rename), or, before a SyncDir, the pending names from the first one
// in that directory on. CutNamesOnly keeps every pending name and no unsynced byte.
func TestCrashFSCutAllBut(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, fill(SectorSize, 0x11))
	if err := c.MkdirAll("e", 0o755); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, c, "e/x", os.O_RDWR|os.O_CREATE)    // pending, before those in d
	mustWrite(t, f, fill(SectorSize, 0x22), 0)      // unsynced
	if err := c.Rename("d/f", "d/f2"); err != nil { // pending
		t.Fatal(err)
	}
	g := mustOpen(t, c, "d/g", os.O_RDWR|os.O_CREATE) // pending
	mustWrite(t, g, []byte("g data"), 0)              // unsynced
	for _, tc := range []struct {
		step        Step
		names       []string
		f, g        []byte
		wantPending bool
	}{
		{Step{Op: StepSync, Path: "d/f", File: f.(*crashFile)}, []string{"f2", "g"}, fill(SectorSize, 0x11), []byte("g data"), true},
		{Step{Op: StepSync, Path: "d/g", File: g.(*crashFile)}, []string{"f2", "g"}, fill(SectorSize, 0x22), nil, true},
		{Step{Op: StepSyncDir, Path: "d"}, []string{"f"}, fill(SectorSize, 0x22), nil, false},
		{Step{Op: StepRename, Path: "d/g", To: "d/h"}, []string{"f2", "g"}, fill(SectorSize, 0x22), []byte("g data"), true},
	} {
		n := c.CutAllBut(tc.step)
		names, err := n.ReadDir("d")
		if err != nil || !slices.Equal(names, tc.names) {
			t.Errorf("before %s %s: names %v, %v; want %v", tc.step.Op, tc.step.Path, names, err, tc.names)
			continue
		}
		fname := "d/f"
		if tc.wantPending {
			fname = "d/f2"
		}
		if got, _ := readAll(t, n, fname); !bytes.Equal(got, tc.f) {
			t.Errorf("before %s %s: %s holds %.8q..., want %.8q...", tc.step.Op, tc.step.Path, fname, got, tc.f)
		}
		if tc.wantPending {
			if got, _ := readAll(t, n, "d/g"); !bytes.Equal(got, tc.g) {
				t.Errorf("before %s %s: d/g holds %q, want %q", tc.step.Op, tc.step.Path, got, tc.g)
			}
		}
		if _, ok := readAll(t, n, "e/x"); !ok {
			t.Errorf("before %s %s: e/x, created before anything in d, is lost", tc.step.Op, tc.step.Path)
		}
	}
	n := c.CutNamesOnly()
	if names, err := n.ReadDir("d"); err != nil || !slices.Equal(names, []string{"f2", "g"}) {
		t.Errorf("CutNamesOnly: names %v, %v; want [f2 g]", names, err)
	}
	if got, _ := readAll(t, n, "d/f2"); !bytes.Equal(got, fill(SectorSize, 0x11)) {
		t.Errorf("CutNamesOnly: d/f2 holds %.8q..., want its synced bytes", got)
	}
	if got, ok := readAll(t, n, "d/g"); !ok || len(got) != 0 {
		t.Errorf("CutNamesOnly: d/g holds %q (exists %v), want it empty", got, ok)
	}
}

// TestCrashFSUnmapPoisons: releasing a file's last mapping poisons the memory it mapped and
// keeps the file's bytes; releasing one of two mappings changes nothing.
func TestCrashFSUnmapPoisons(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, fill(2*SectorSize, 0x11))
	m1, err := f.Map(2*SectorSize, true)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := f.Map(2*SectorSize, false)
	if err != nil {
		t.Fatal(err)
	}
	copy(m1, "mapped")
	if err := f.Unmap(m2); err != nil {
		t.Fatal(err)
	}
	if string(m2[:6]) != "mapped" || string(m1[:6]) != "mapped" {
		t.Fatalf("after releasing one of two mappings: %q and %q, want both %q", m1[:6], m2[:6], "mapped")
	}
	if err := f.Unmap(m1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m1, fill(2*SectorSize, Poison)) {
		t.Errorf("released mapping reads %.8q..., want poison", m1)
	}
	want := append([]byte("mapped"), fill(2*SectorSize-6, 0x11)...)
	if got, _ := readAll(t, c, "d/f"); !bytes.Equal(got, want) {
		t.Errorf("file after its last Unmap: %.8q..., want %.8q...", got, want)
	}
	m3, err := f.Map(2*SectorSize, false)
	if err != nil || !bytes.Equal(m3, want) {
		t.Errorf("a new mapping reads %.8q..., %v; want the file's bytes", m3, err)
	}
}

// TestStepFS: StepFS reports each fsync, directory fsync and rename before it happens, with
// the underlying file for a Sync.
func TestStepFS(t *testing.T) {
	c := newCrashDir(t)
	var steps []Step
	s := StepFS{FS: c, Before: func(st Step) {
		if st.Op == StepSync {
			if st.File.(*crashFile).ino != c.files["d/f"] {
				t.Errorf("Sync reported with another file than d/f")
			}
			if got, _ := readAll(t, c.CutClean(), "d/f"); len(got) != 0 {
				t.Errorf("Sync reported after it made %q durable", got)
			}
		}
		steps = append(steps, st)
	}}
	f := mustOpen(t, s, "d/f", os.O_RDWR|os.O_CREATE)
	mustWrite(t, f, []byte("x"), 0)
	if err := c.SyncDir("d"); err != nil { // not through s: not reported
		t.Fatal(err)
	}
	mustSync(t, f)
	if err := s.Rename("d/f", "d/g"); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range steps {
		got = append(got, st.Op.String()+" "+st.Path+st.To)
	}
	if want := []string{"sync d/f", "rename d/fd/g", "syncdir d"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
}

// TestGatedFSOpen: Open lets a Sync waiting at the gate go on, and later ones pass.
func TestGatedFSOpen(t *testing.T) {
	g := NewGatedFS("", 2)
	f := mustOpen(t, g, filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE)
	defer f.Close()
	synced := make(chan error, 2)
	go func() { synced <- f.Sync() }()
	select {
	case <-g.Entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Sync never reached the gate")
	}
	g.Open()
	go func() { synced <- f.Sync() }() // a second gate, open
	for range 2 {
		select {
		case err := <-synced:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Sync still waits at an open gate")
		}
	}
}
