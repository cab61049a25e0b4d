package vfstest

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/store/vfs"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// seeded returns the rng for cut number seed, so every run draws the same cuts.
func seeded(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x5eed)) }

func mustOpen(t testing.TB, fsys vfs.FS, name string, flag int) vfs.File {
	t.Helper()
	f, err := fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return f
}

func mustWrite(t testing.TB, f vfs.File, p []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatalf("write %s at %d: %v", f.Name(), off, err)
	}
}

func mustSync(t testing.TB, f vfs.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatalf("sync %s: %v", f.Name(), err)
	}
}

// readAll returns the whole content of name in fsys, or nil and false if it does not exist.
func readAll(t testing.TB, fsys vfs.FS, name string) ([]byte, bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatalf("read %s: %v", name, err)
	}
	return b, true
}

func fill(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

// newCrashDir returns a CrashFS with directory d.
func newCrashDir(t testing.TB) *CrashFS {
	t.Helper()
	c := NewCrashFS()
	if err := c.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// durableFile creates d/f holding content, synced, with d synced too.
func durableFile(t testing.TB, c *CrashFS, content []byte) vfs.File {
	t.Helper()
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	mustWrite(t, f, content, 0)
	mustSync(t, f)
	if err := c.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCrashFSSyncedSurvivesEveryCut(t *testing.T) {
	c := newCrashDir(t)
	synced := make([]byte, 3000)
	for i := range synced {
		synced[i] = byte(i*7 + 1)
	}
	f := durableFile(t, c, synced)
	// Unsynced writes past the synced bytes must never disturb them.
	mustWrite(t, f, fill(2000, 0xEE), 3000)
	g := mustOpen(t, c, "d/g", os.O_RDWR|os.O_CREATE) // not durable: may or may not exist
	mustWrite(t, g, fill(100, 1), 0)
	for seed := range 300 {
		n := c.Cut(seeded(seed))
		got, ok := readAll(t, n, "d/f")
		if !ok {
			t.Fatalf("seed %d: d/f lost", seed)
		}
		if len(got) != 3000 && len(got) != 5000 {
			t.Fatalf("seed %d: size %d, want 3000 or 5000", seed, len(got))
		}
		if !bytes.Equal(got[:3000], synced) {
			t.Fatalf("seed %d: synced bytes changed", seed)
		}
	}
}

// classify names what a cut left in one sector that was old and then overwritten with new.
func classify(got []byte, old, new byte) string {
	p := 0
	for p < len(got) && got[p] == new {
		p++
	}
	switch {
	case p == len(got):
		return "new"
	case !bytes.Equal(got[p:], fill(len(got)-p, old)):
		return "garbage"
	case p == 0:
		return "old"
	}
	return "torn"
}

func TestCrashFSCutUnsyncedSectors(t *testing.T) {
	const sectors, cuts = 16, 400
	c := newCrashDir(t)
	f := durableFile(t, c, fill(sectors*SectorSize, 0x11))
	mustWrite(t, f, fill(sectors*SectorSize, 0x22), 0)
	count := map[string]int{}
	for seed := range cuts {
		got, _ := readAll(t, c.Cut(seeded(seed)), "d/f")
		if len(got) != sectors*SectorSize {
			t.Fatalf("seed %d: size %d, want %d", seed, len(got), sectors*SectorSize)
		}
		odd := 0
		for s := range sectors {
			k := classify(got[s*SectorSize:(s+1)*SectorSize], 0x11, 0x22)
			count[k]++
			if k == "torn" || k == "garbage" {
				odd++
			}
		}
		if odd != 1 {
			t.Fatalf("seed %d: %d torn sectors, want exactly 1", seed, odd)
		}
	}
	t.Logf("sector outcomes over %d cuts: %v", cuts, count)
	whole := count["old"] + count["new"]
	if frac := float64(count["new"]) / float64(whole); frac < 0.45 || frac > 0.55 {
		t.Errorf("fraction of whole sectors persisted = %.3f, want about 1/2", frac)
	}
	if g := count["garbage"]; g < cuts/8 || g > cuts*3/8 {
		t.Errorf("garbage sectors = %d of %d torn, want about 1/4", g, cuts)
	}
}

func TestCrashFSCutExtension(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, fill(1024, 0x11))
	mustWrite(t, f, fill(4*SectorSize, 0x22), 1024)
	sizes := map[int]int{}
	zeroTail, newTail := 0, 0
	for seed := range 200 {
		got, _ := readAll(t, c.Cut(seeded(seed)), "d/f")
		sizes[len(got)]++
		if !bytes.Equal(got[:1024], fill(1024, 0x11)) {
			t.Fatalf("seed %d: synced bytes changed", seed)
		}
		if len(got) > 1024 {
			for s := 1024; s < len(got); s += SectorSize {
				switch classify(got[s:s+SectorSize], 0, 0x22) {
				case "old":
					zeroTail++
				case "new":
					newTail++
				}
			}
		}
	}
	if len(sizes) != 2 || sizes[1024] == 0 || sizes[1024+4*SectorSize] == 0 {
		t.Errorf("sizes seen = %v, want both 1024 and %d", sizes, 1024+4*SectorSize)
	}
	if zeroTail == 0 || newTail == 0 {
		t.Errorf("extended sectors: %d zero, %d new; want some of each", zeroTail, newTail)
	}
}

func TestCrashFSCutNamespacePrefix(t *testing.T) {
	c := newCrashDir(t)
	for _, name := range []string{"d/a", "d/b", "d/c"} {
		f := mustOpen(t, c, name, os.O_RDWR|os.O_CREATE)
		mustWrite(t, f, []byte(name), 0)
		mustSync(t, f)
	}
	seen := map[string]int{}
	for seed := range 200 {
		names, err := c.Cut(seeded(seed)).ReadDir("d")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(names, ",")
		if !slices.Contains([]string{"", "a", "a,b", "a,b,c"}, got) {
			t.Fatalf("seed %d: names %q, want a prefix of a,b,c", seed, got)
		}
		seen[got]++
	}
	if len(seen) != 4 {
		t.Errorf("names seen = %v, want all 4 prefixes", seen)
	}
	if err := c.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	for seed := range 50 {
		n := c.Cut(seeded(seed))
		for _, name := range []string{"d/a", "d/b", "d/c"} {
			if got, ok := readAll(t, n, name); !ok || string(got) != name {
				t.Fatalf("seed %d: %s = %q, %v after SyncDir; want %q", seed, name, got, ok, name)
			}
		}
	}
}

func TestCrashFSCutClean(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, fill(2*SectorSize, 0x11))
	mustWrite(t, f, fill(10, 0x22), 100)           // overwrite, unsynced
	mustWrite(t, f, fill(3*SectorSize, 0x33), 900) // extend, unsynced
	g := mustOpen(t, c, "d/g", os.O_RDWR|os.O_CREATE)
	mustWrite(t, g, []byte("g"), 0)
	mustSync(t, g) // synced data, but the name is not durable
	n := c.CutClean()
	if got, _ := readAll(t, n, "d/f"); !bytes.Equal(got, fill(2*SectorSize, 0x11)) {
		t.Errorf("d/f after CutClean: %d bytes, want the %d synced bytes", len(got), 2*SectorSize)
	}
	if _, ok := readAll(t, n, "d/g"); ok {
		t.Error("d/g exists after CutClean, want it lost (no SyncDir)")
	}
	mustSync(t, f)
	want := append(fill(100, 0x11), fill(10, 0x22)...)
	want = append(want, fill(790, 0x11)...)
	want = append(want, fill(3*SectorSize, 0x33)...)
	if got, _ := readAll(t, c.CutClean(), "d/f"); !bytes.Equal(got, want) {
		t.Error("d/f after Sync and CutClean differs from what was written")
	}
}

func TestCrashFSCutIsIndependent(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, []byte("before"))
	n := c.CutClean()
	mustWrite(t, f, []byte("AFTER!"), 0)
	mustSync(t, f)
	if got, _ := readAll(t, n, "d/f"); string(got) != "before" {
		t.Errorf("cut vfs.FS sees %q after the old vfs.FS wrote, want %q", got, "before")
	}
	nf := mustOpen(t, n, "d/f", os.O_RDWR)
	mustWrite(t, nf, []byte("cut---"), 0)
	if got, _ := readAll(t, c, "d/f"); string(got) != "AFTER!" {
		t.Errorf("old vfs.FS sees %q after the cut vfs.FS wrote, want %q", got, "AFTER!")
	}
}

func TestCrashFSMapping(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, fill(4*SectorSize, 0))
	m, err := f.Map(4*SectorSize, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 4*SectorSize || cap(m) != 4*SectorSize {
		t.Fatalf("len, cap = %d, %d; want %d", len(m), cap(m), 4*SectorSize)
	}
	copy(m[10:], "mapped")
	got := make([]byte, 6)
	if _, err := f.ReadAt(got, 10); err != nil || string(got) != "mapped" {
		t.Errorf("ReadAt after a mapped write = %q, %v; want %q", got, err, "mapped")
	}
	mustWrite(t, f, []byte("written"), 600)
	if string(m[600:607]) != "written" {
		t.Errorf("mapping after WriteAt = %q, want %q", m[600:607], "written")
	}

	// Mapped writes are unsynced writes: lost by CutClean, sometimes kept by Cut.
	if got, _ := readAll(t, c.CutClean(), "d/f"); !bytes.Equal(got, fill(4*SectorSize, 0)) {
		t.Error("CutClean kept unsynced mapped bytes")
	}
	kept, lost := 0, 0
	for seed := range 100 {
		got, _ := readAll(t, c.Cut(seeded(seed)), "d/f")
		switch string(got[10:16]) {
		case "mapped":
			kept++
		case "\x00\x00\x00\x00\x00\x00":
			lost++
		}
	}
	if kept == 0 || lost == 0 {
		t.Errorf("unsynced mapped write kept %d, lost %d times; want some of each", kept, lost)
	}
	mustSync(t, f)
	if got, _ := readAll(t, c.CutClean(), "d/f"); string(got[10:16]) != "mapped" {
		t.Error("CutClean lost synced mapped bytes")
	}
	if err := f.Unmap(m); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmap(m); err == nil {
		t.Error("second Unmap succeeded, want an error")
	}
	if got := c.Stats().Mappings; got != 0 {
		t.Errorf("Mappings = %d after Unmap, want 0", got)
	}
}

func TestCrashFSMappingGrowth(t *testing.T) {
	c := newCrashDir(t)
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	if err := f.Allocate(1000); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(4096, true) // past the end: reserves the buffer
	if err != nil {
		t.Fatal(err)
	}
	// Growing within the mapped length keeps the mapping aliased.
	mustWrite(t, f, []byte("grown"), 3000)
	if string(m[3000:3005]) != "grown" {
		t.Errorf("mapping after growth = %q, want %q", m[3000:3005], "grown")
	}
	if err := f.Truncate(4096); err != nil {
		t.Errorf("Truncate within the mapped length: %v", err)
	}
	// Growing past it would move the buffer under the mapping.
	if err := f.Allocate(4097); err == nil {
		t.Error("Allocate past a live mapping succeeded, want an error")
	}
	if _, err := f.WriteAt([]byte("x"), 5000); err == nil {
		t.Error("WriteAt past a live mapping succeeded, want an error")
	}
	if size, _ := f.Size(); size != 4096 {
		t.Errorf("size = %d after failed growth, want 4096", size)
	}
	if err := f.Unmap(m); err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(8192); err != nil {
		t.Errorf("Allocate after Unmap: %v", err)
	}
	got := make([]byte, 5)
	if _, err := f.ReadAt(got, 3000); err != nil || string(got) != "grown" {
		t.Errorf("ReadAt after reallocation = %q, %v; want %q", got, err, "grown")
	}
}

// TestCrashFSConcurrentMapping runs the commitlog's pattern under -race: one writer appends
// through the mapping and WriteAt; readers read what is below the published mark.
func TestCrashFSConcurrentMapping(t *testing.T) {
	const size, chunk = 64 << 10, 40
	c := newCrashDir(t)
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size, true)
	if err != nil {
		t.Fatal(err)
	}
	want := func(i int) byte { return byte(i*7 + 3) }
	var mark atomic.Int64
	var wg, started sync.WaitGroup
	for r := range 3 {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			buf := make([]byte, size)
			for w := 0; w < size; w = int(mark.Load()) {
				var got []byte
				if r == 0 {
					got = m[:w]
				} else if n, err := f.ReadAt(buf[:w], 0); err != nil || n != w {
					t.Errorf("ReadAt(%d) = %d, %v", w, n, err)
					return
				} else {
					got = buf[:w]
				}
				for i, b := range got {
					if b != want(i) {
						t.Errorf("reader %d: byte %d = %d, want %d", r, i, b, want(i))
						return
					}
				}
				if st := c.Stats(); st.Mappings != 1 {
					t.Errorf("Mappings = %d, want 1", st.Mappings)
				}
			}
		})
	}
	started.Wait()
	p := make([]byte, chunk)
	for off, k := 0, 0; off < size; off, k = off+chunk, k+1 {
		n := min(chunk, size-off)
		for i := range n {
			p[i] = want(off + i)
		}
		if k%2 == 0 {
			copy(m[off:], p[:n])
		} else {
			mustWrite(t, f, p[:n], int64(off))
		}
		if k%4 == 0 {
			mustSync(t, f) // the writer syncs: never concurrent with its mapped writes
		}
		mark.Store(int64(off + n))
	}
	wg.Wait()
}

func TestCrashFSRename(t *testing.T) {
	c := newCrashDir(t)
	old := mustOpen(t, c, "d/cur", os.O_RDWR|os.O_CREATE)
	mustWrite(t, old, []byte("old"), 0)
	mustSync(t, old)
	tmp := mustOpen(t, c, "d/cur.tmp", os.O_RDWR|os.O_CREATE)
	mustWrite(t, tmp, []byte("new"), 0)
	mustSync(t, tmp)
	if err := c.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename("d/cur.tmp", "d/cur"); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, c, "d/cur"); string(got) != "new" {
		t.Errorf("live d/cur = %q, want %q", got, "new")
	}
	n := c.CutClean()
	if got, _ := readAll(t, n, "d/cur"); string(got) != "old" {
		t.Errorf("d/cur after a cut before SyncDir = %q, want %q", got, "old")
	}
	if _, ok := readAll(t, n, "d/cur.tmp"); !ok {
		t.Error("d/cur.tmp lost by a cut before SyncDir")
	}
	if err := c.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	n = c.CutClean()
	if got, _ := readAll(t, n, "d/cur"); string(got) != "new" {
		t.Errorf("d/cur after SyncDir and a cut = %q, want %q", got, "new")
	}
	if names, _ := n.ReadDir("d"); !slices.Equal(names, []string{"cur"}) {
		t.Errorf("names after SyncDir and a cut = %q, want [cur]", names)
	}
	if err := c.Remove("d/cur"); err != nil {
		t.Fatal(err)
	}
	if _, ok := readAll(t, c.CutClean(), "d/cur"); !ok {
		t.Error("removal durable without SyncDir")
	}
}

func TestCrashFSSyncDirCommitsInOrder(t *testing.T) {
	c := NewCrashFS()
	for _, d := range []string{"a", "b"} {
		if err := c.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustOpen(t, c, "a/1", os.O_RDWR|os.O_CREATE)
	mustOpen(t, c, "b/1", os.O_RDWR|os.O_CREATE)
	mustOpen(t, c, "a/2", os.O_RDWR|os.O_CREATE)
	if err := c.SyncDir("b"); err != nil {
		t.Fatal(err)
	}
	n := c.CutClean()
	for name, want := range map[string]bool{"a/1": true, "b/1": true, "a/2": false} {
		if _, ok := readAll(t, n, name); ok != want {
			t.Errorf("%s exists = %v after SyncDir(b), want %v", name, ok, want)
		}
	}
	if got := c.Stats().PendingOps; got != 1 {
		t.Errorf("PendingOps = %d, want 1", got)
	}
}

func TestCrashFSDirSyncNotNeeded(t *testing.T) {
	c := newCrashDir(t)
	c.DirSyncNotNeeded = true
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	mustWrite(t, f, []byte("x"), 0)
	mustSync(t, f)
	if err := c.Rename("d/f", "d/g"); err != nil {
		t.Fatal(err)
	}
	n := c.CutClean()
	if names, _ := n.ReadDir("d"); !slices.Equal(names, []string{"g"}) {
		t.Errorf("names after a cut = %q, want [g]", names)
	}
	if !n.DirSyncNotNeeded {
		t.Error("Cut dropped DirSyncNotNeeded")
	}
}

func TestCrashFSOpen(t *testing.T) {
	c := newCrashDir(t)
	if _, err := c.OpenFile("missing/f", os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("create in a missing dir: %v, want ErrNotExist", err)
	}
	if _, err := c.OpenFile("d/f", os.O_RDWR, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open a missing file: %v, want ErrNotExist", err)
	}
	f := mustOpen(t, c, "d/./x/../f", os.O_RDWR|os.O_CREATE|os.O_EXCL)
	mustWrite(t, f, []byte("hello"), 0)
	if _, err := c.OpenFile("d/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file: %v, want ErrExist", err)
	}
	r := mustOpen(t, c, "d/f", os.O_RDONLY)
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on an O_RDONLY file succeeded")
	}
	if err := r.Truncate(0); err == nil {
		t.Error("Truncate on an O_RDONLY file succeeded")
	}
	if _, err := r.Map(5, true); err == nil {
		t.Error("writable Map of an O_RDONLY file succeeded")
	}
	got := make([]byte, 10)
	if n, err := r.ReadAt(got, 0); n != 5 || err != io.EOF || string(got[:n]) != "hello" {
		t.Errorf("ReadAt = %d, %v, %q; want 5, EOF, hello", n, err, got[:n])
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(got, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("ReadAt after Close: %v, want ErrClosed", err)
	}
	mustOpen(t, c, "d/f", os.O_RDWR|os.O_TRUNC)
	if size, _ := f.Size(); size != 0 {
		t.Errorf("size after O_TRUNC = %d, want 0", size)
	}
	if err := c.MkdirAll("d/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	if names, _ := c.ReadDir("d"); !slices.Equal(names, []string{"f", "sub"}) {
		t.Errorf("ReadDir = %q, want [f sub]", names)
	}
	if _, err := c.ReadDir("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir of a missing dir: %v, want ErrNotExist", err)
	}
}

func TestCrashFSCapacity(t *testing.T) {
	c := newCrashDir(t)
	c.SetCapacity(1000)
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	mustWrite(t, f, fill(600, 1), 0)
	g := mustOpen(t, c, "d/g", os.O_RDWR|os.O_CREATE)
	mustWrite(t, g, fill(300, 2), 0)
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"WriteAt", func() error { _, err := f.WriteAt(fill(201, 9), 500); return err }},
		{"Allocate", func() error { return f.Allocate(701) }},
		{"Truncate", func() error { return f.Truncate(701) }},
	} {
		if err := tc.do(); !errors.Is(err, vfs.ErrNoSpace) {
			t.Errorf("%s past capacity: %v, want vfs.ErrNoSpace", tc.name, err)
		}
		if got, _ := readAll(t, c, "d/f"); !bytes.Equal(got, fill(600, 1)) {
			t.Errorf("%s past capacity changed the file", tc.name)
		}
	}
	mustWrite(t, f, fill(100, 3), 500) // an overwrite needs no space
	if err := f.Allocate(700); err != nil {
		t.Errorf("Allocate to exactly the capacity: %v", err)
	}
	if got := c.Stats().LiveBytes; got != 1000 {
		t.Errorf("LiveBytes = %d, want 1000", got)
	}
	if err := c.Remove("d/g"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, fill(300, 4), 700) // removal frees space at once
}

func TestCrashFSUsage(t *testing.T) {
	c := newCrashDir(t)
	f := mustOpen(t, c, "d/f", os.O_RDWR|os.O_CREATE)
	mustWrite(t, f, fill(600, 1), 0)
	u, err := c.Usage("d")
	if err != nil || u.Total != unlimitedTotal || u.Free != unlimitedTotal-600 {
		t.Errorf("unlimited vfs.Usage = %+v, %v; want Total %d, Free %d", u, err, uint64(unlimitedTotal), uint64(unlimitedTotal-600))
	}
	c.SetCapacity(1000)
	if u, err := c.Usage("d"); err != nil || u != (vfs.Usage{Total: 1000, Free: 400}) || u.UsedRatio() != 0.6 {
		t.Errorf("vfs.Usage = %+v, %v; want {1000 400}", u, err)
	}
	c.SetCapacity(500) // below the used space
	if u, _ := c.Usage("d"); u.Free != 0 {
		t.Errorf("Free = %d over capacity, want 0", u.Free)
	}
	if _, err := c.Usage("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vfs.Usage of a missing dir: %v, want ErrNotExist", err)
	}
	c.SetUsage(func(dir string) (vfs.Usage, error) { return vfs.Usage{Total: 7, Free: 3}, nil })
	if u, _ := c.Usage("d"); u != (vfs.Usage{Total: 7, Free: 3}) {
		t.Errorf("vfs.Usage with SetUsage = %+v, want {7 3}", u)
	}
	c.SetUsage(nil)
	if u, _ := c.Usage("d"); u.Total != 500 {
		t.Errorf("vfs.Usage after SetUsage(nil) = %+v, want Total 500", u)
	}
}

func TestCrashFSFailSync(t *testing.T) {
	c := newCrashDir(t)
	f := durableFile(t, c, []byte("old"))
	mustWrite(t, f, []byte("new"), 0)
	boom := errors.New("boom")
	c.FailSync(boom)
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Errorf("Sync = %v, want %v", err, boom)
	}
	if got, _ := readAll(t, c.CutClean(), "d/f"); string(got) != "old" {
		t.Errorf("after a failed Sync, cut content = %q, want %q", got, "old")
	}
	c.FailSync(nil)
	mustSync(t, f)
	if got, _ := readAll(t, c.CutClean(), "d/f"); string(got) != "new" {
		t.Errorf("after FailSync(nil) and Sync, cut content = %q, want %q", got, "new")
	}
}

// ExampleCrashFS shows a test cutting power after an unsynced rename.
func ExampleCrashFS() {
	c := NewCrashFS()
	_ = c.MkdirAll("store", 0o755)
	f, _ := c.OpenFile("store/checkpoint.tmp", os.O_RDWR|os.O_CREATE, 0o644)
	_, _ = f.WriteAt([]byte("offset=42"), 0)
	_ = f.Sync()
	_ = c.Rename("store/checkpoint.tmp", "store/checkpoint")
	// No SyncDir: after the cut, neither name need exist.
	names, _ := c.CutClean().ReadDir("store")
	fmt.Println(names)
	_ = c.SyncDir("store")
	names, _ = c.CutClean().ReadDir("store")
	fmt.Println(names)
	// Output:
	// []
	// [checkpoint]
}
