package commitlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// brokenFiles returns the names of the .broken files in dir and their bytes.
func brokenFiles(t *testing.T, fs vfs.FS, dir string) ([]string, int64) {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var total int64
	for _, name := range names {
		if !strings.HasSuffix(name, ".broken") {
			continue
		}
		size, err := fileSize(fs, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
		total += size
	}
	return out, total
}

// TestCutDuringRollsRemovesEmptySegments: a power cut after async appends rolled through
// several segments, none flushed, with every rename durable (a journal that committed them)
// but no byte of the new segments written back: each new segment is a named preallocated
// file of zeros, with no header and no record. Open removes them all instead of moving
// them aside, keeps every durable record, and counts what it removed.
func TestCutDuringRollsRemovesEmptySegments(t *testing.T) {
	fs := vfstest.NewCrashFS()
	fs.DirSyncNotNeeded = true
	dir := t.TempDir()
	l := openTest(t, dir, Options{FS: fs, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 30})
	defer func() { l.Close() }()
	var want [][]byte
	for i := 0; i < 20; i++ {
		want = append(want, payload(i))
		if _, err := l.Append(1, want[i:i+1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; len(*l.segs.Load()) < 5; i++ {
		if _, err := l.Append(1, [][]byte{payload(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rolled := len(*l.segs.Load()) - 1
	cut := fs.CutClean()
	l.Close()

	l = openTest(t, dir, Options{FS: cut})
	if got, _ := readAll(t, l); len(got) != len(want) {
		t.Fatalf("%d records after the cut, want the %d durable ones", len(got), len(want))
	}
	if names, _ := brokenFiles(t, cut, dir); len(names) != 0 {
		t.Fatalf("segments that held no record moved aside: %v", names)
	}
	if rec := l.Recovery(); rec.EmptyRemoved != rolled || rec.BrokenMade != 0 || rec.Bytes != 0 {
		t.Fatalf("recovery stats %+v, want %d empty segments removed and nothing cut", rec, rolled)
	}
}

// TestBrokenFilesBounded: Open keeps the .broken files within MaxBrokenBytes, deleting the
// oldest first (earlier recoveries, then lower positions; names of earlier versions count as
// the oldest), and keeps what its own recovery cut.
func TestBrokenFilesBounded(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	for i := 0; i < 50; i++ {
		appendOne(t, l, 1, payload(i))
	}
	end := l.Written()
	l.Close()
	old := []struct {
		name string
		size int
	}{ // oldest first
		{segmentName(0) + ".broken", 3000},
		{segmentName(testSegSize) + ".100.broken", 3000},
		{segmentName(0) + ".500.1.broken", 3000},
		{segmentName(2*testSegSize) + ".0.1.broken", 3000},
		{segmentName(0) + ".700.2.broken", 3000},
		{segmentName(testSegSize) + ".0.2.broken", 3000},
	}
	for _, o := range old {
		if err := os.WriteFile(filepath.Join(dir, o.name), bytes.Repeat([]byte{7}, o.size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not ours: left alone, and not counted.
	if err := os.WriteFile(filepath.Join(dir, "notes.broken"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segmentName(0))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := make([]byte, frameSize(1000, 0))
	putFrame(torn, 0, bytes.Repeat([]byte("t"), 1000))
	if _, err := f.WriteAt(torn[:600], end); err != nil { // 600 bytes of a torn record
		t.Fatal(err)
	}
	f.Close()

	l = openTest(t, dir, Options{MaxBrokenBytes: 7000})
	defer l.Close()
	names, total := brokenFiles(t, vfs.OS, dir)
	newest := segmentName(0) + fmt.Sprintf(".%d.3.broken", end)
	want := []string{newest, old[4].name, old[5].name, "notes.broken"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf(".broken files %v, want %v", names, want)
	}
	if total-1 > 7000 {
		t.Fatalf(".broken files hold %d bytes, over MaxBrokenBytes", total-1)
	}
	rec := l.Recovery()
	if rec.BrokenMade != 1 || rec.Bytes != 600 || rec.BrokenDeleted != 4 || rec.BrokenFiles != 3 || rec.BrokenBytes != 6600 {
		t.Fatalf("recovery stats %+v, want 1 file of 600 bytes made, 4 deleted, 3 of 6600 bytes left", rec)
	}
	l.Close()

	// Negative keeps none.
	l = openTest(t, dir, Options{MaxBrokenBytes: -1})
	if names, _ := brokenFiles(t, vfs.OS, dir); !slices.Equal(names, []string{"notes.broken"}) {
		t.Fatalf(".broken files %v with MaxBrokenBytes -1, want only what is not the log's", names)
	}
}

func TestParseBrokenName(t *testing.T) {
	seg := segmentName(3 * testSegSize)
	for _, tc := range []struct {
		name string
		want brokenName
		ok   bool
	}{
		{seg + ".broken", brokenName{pos: 3 * testSegSize}, true},
		{seg + ".77.broken", brokenName{pos: 3*testSegSize + 77}, true},
		{seg + ".77.9.broken", brokenName{gen: 9, pos: 3*testSegSize + 77}, true},
		{seg + ".0.9.broken", brokenName{gen: 9, pos: 3 * testSegSize}, true},
		{seg + ".1.2.3.broken", brokenName{}, false},
		{seg + ".x.broken", brokenName{}, false},
		{seg + ".-1.broken", brokenName{}, false},
		{seg + "x.broken", brokenName{}, false},
		{seg, brokenName{}, false},
		{"notes.broken", brokenName{}, false},
		{"prealloc-1.tmp", brokenName{}, false},
	} {
		got, ok := parseBrokenName(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseBrokenName(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPowerCutsDuringRollsBoundBroken cuts the power (CrashFS) at random moments while async
// appends roll through small segments faster than they are flushed: after every reopen the
// .broken files fit in MaxBrokenBytes, and none is a segment that held no record.
func TestPowerCutsDuringRollsBoundBroken(t *testing.T) {
	cuts := 60
	if testing.Short() {
		cuts = 15
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	fs := vfstest.NewCrashFS()
	dir := t.TempDir()
	o := Options{Flush: FlushAsync, FlushInterval: 20 * time.Millisecond, FlushBytes: 4 * testSegSize, MaxBytes: 4 * testSegSize}
	made := 0
	for cut := 0; cut < cuts; cut++ {
		o.FS = fs
		l := openTest(t, dir, o)
		rec := l.Recovery()
		made += rec.BrokenMade
		names, total := brokenFiles(t, fs, dir)
		if total > 2*testSegSize || rec.BrokenBytes != total || rec.BrokenFiles != len(names) {
			t.Fatalf("cut %d: %d .broken files of %d bytes (stats %+v), over MaxBrokenBytes %d", cut, len(names), total, rec, 2*testSegSize)
		}
		for _, name := range names {
			if b, _ := parseBrokenName(name); b.pos%testSegSize != 0 {
				continue // a cut tail
			}
			data := readFile(t, fs, filepath.Join(dir, name))
			if len(data) > HeaderSize && allZero(data[HeaderSize:]) {
				t.Fatalf("cut %d: %s, moved aside, held no record", cut, name)
			}
		}
		stop := time.Now().Add(time.Duration(rng.IntN(30_000)) * time.Microsecond)
		for i := 0; time.Now().Before(stop); i++ {
			if _, err := l.Append(1, [][]byte{payload(i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		fs = fs.Cut(rng)
		l.Close()
	}
	t.Logf("%d cuts, %d .broken files made", cuts, made)
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}
