package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/internal/guard"
)

// errAny marks a table case that must return some error.
var errAny = errors.New("any error")

// TestHostileCalls drives every exported method of a Log and a Reader with hostile
// positions, ends, times and payloads, on an open log and a closed one: each returns an error
// or its documented answer, and none panics or hangs. The log's records are intact after.
func TestHostileCalls(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	var want [][]byte
	for i := range 300 {
		want = append(want, payload(i))
		appendOne(t, l, int64(i), want[i])
	}
	first := l.MinPos()
	r := l.NewReader()
	defer r.Close()
	for _, tc := range []struct {
		name string
		f    func() error
		want error // nil: any error or none; errAny: some error; else that error
	}{
		{"Append(fewer positions)", func() error { _, err := l.Append(1, [][]byte{{1}, {2}}, make([]int64, 1)); return err }, errAny},
		{"Append(larger than a segment)", func() error { _, err := l.Append(1, [][]byte{make([]byte, testSegSize)}, nil); return err }, ErrTooLarge},
		{"Append(batch larger than a segment)", func() error {
			_, err := l.Append(1, [][]byte{make([]byte, testSegSize/2), make([]byte, testSegSize/2)}, nil)
			return err
		}, ErrTooLarge},
		{"AppendDeferred(no payloads)", func() error { _, err := l.AppendDeferred(1, nil, nil); return err }, nil},
		{"WaitDurable(MaxInt64)", func() error { return l.WaitDurable(math.MaxInt64) }, errAny},
		{"WaitDurable(past the end)", func() error { return l.WaitDurable(l.Written() + 1) }, errAny},
		{"WaitDurable(MinInt64)", func() error { return l.WaitDurable(math.MinInt64) }, nil},
		{"AfterAppend(MaxInt64)", func() error { l.AfterAppend(math.MaxInt64); return nil }, nil},
		{"AfterAppend(MinInt64)", func() error { l.AfterAppend(math.MinInt64); return nil }, nil},
		{"Read(MinInt64)", func() error { _, err := r.Read(math.MinInt64); return err }, ErrPositionGone},
		{"Read(-1)", func() error { _, err := r.Read(-1); return err }, ErrPositionGone},
		{"Read(0)", func() error { _, err := r.Read(0); return err }, ErrPositionGone},
		{"Read(header)", func() error { _, err := r.Read(first - 1); return err }, errAny},
		{"Read(mid-record)", func() error { _, err := r.Read(first + 1); return err }, errAny},
		{"Read(end)", func() error { _, err := r.Read(l.Written()); return err }, ErrNoRecord},
		{"Read(MaxInt64)", func() error { _, err := r.Read(math.MaxInt64); return err }, ErrNoRecord},
		{"Next(MinInt64)", func() error { _, err := r.Next(math.MinInt64); return err }, nil},
		{"Next(MaxInt64)", func() error { _, err := r.Next(math.MaxInt64); return err }, ErrNoRecord},
		{"Next(MaxInt64-3)", func() error { _, err := r.Next(math.MaxInt64 - 3); return err }, ErrNoRecord},
		{"Next(end)", func() error { _, err := r.Next(l.Written()); return err }, ErrNoRecord},
		{"Flush", l.Flush, nil},
		{"Retain", func() error { l.Retain(); return nil }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guard.Call(t, tc.name, tc.f)
			switch {
			case tc.want == errAny && err == nil:
				t.Errorf("got no error")
			case tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if got, _ := readAll(t, l); len(got) != len(want) || !bytes.Equal(got[len(got)-1], want[len(want)-1]) {
		t.Fatalf("after the hostile calls: %d records, want %d", len(got), len(want))
	}
	// AfterAppend with an end past the log must not have moved the marks of dropping
	// behind the writer past it (or, overflowing, before it).
	if nd, w := l.nextDrop.Load(), l.Written(); nd <= w || l.dropped.Load() > w {
		t.Errorf("after the hostile calls: next drop at %d, dropped up to %d, log end %d", nd, l.dropped.Load(), w)
	}

	end := l.Written()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
		want error
	}{
		{"Append", func() error { _, err := l.Append(1, [][]byte{{1}}, nil); return err }, ErrClosed},
		{"Flush", l.Flush, ErrClosed},
		{"Close", l.Close, ErrClosed},
		{"Read", func() error { _, err := r.Read(first); return err }, ErrClosed},
		{"Next", func() error { _, err := r.Next(first); return err }, ErrClosed},
		{"new Reader's Read", func() error { _, err := l.NewReader().Read(first); return err }, ErrClosed},
		{"WaitDurable(end)", func() error { return l.WaitDurable(end) }, nil},
		{"WaitDurable(MaxInt64)", func() error { return l.WaitDurable(math.MaxInt64) }, errAny},
		{"Retain", func() error {
			if n := l.Retain(); n != 0 {
				return fmt.Errorf("Retain deleted %d segments of a closed log", n)
			}
			return nil
		}, nil},
		{"AfterAppend", func() error { l.AfterAppend(end); return nil }, nil},
	} {
		t.Run("closed/"+tc.name, func(t *testing.T) {
			err := guard.Call(t, tc.name, tc.f)
			switch {
			case tc.want == errAny && err == nil:
				t.Errorf("got no error")
			case tc.want != errAny && !errors.Is(err, tc.want):
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestHostileOpen opens logs from hostile paths and directories: each fails with an error
// naming what is wrong, and leaves the files as they were.
func TestHostileOpen(t *testing.T) {
	t.Run("empty path", func(t *testing.T) {
		if _, err := Open("", &Options{SegmentSize: testSegSize}); err == nil {
			t.Error("Open(\"\") succeeded")
		}
	})
	t.Run("path is a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(f, &Options{SegmentSize: testSegSize}); err == nil {
			t.Error("Open(regular file) succeeded")
		}
	})
	t.Run("segment is a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, segmentName(0)), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, &Options{SegmentSize: testSegSize}); err == nil {
			t.Error("Open succeeded")
		}
	})
	t.Run("checkpoint is a directory", func(t *testing.T) {
		dir := t.TempDir()
		openTest(t, dir, Options{}).Close()
		ck := filepath.Join(dir, checkpointName)
		if err := os.Remove(ck); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(ck, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, &Options{SegmentSize: testSegSize}); err == nil {
			t.Error("Open succeeded")
		}
	})
	// A log of 3 segments reopened with twice the segment size: its second segment's base
	// is no multiple of the size. Before, Open extended every segment with zeros, found the
	// log ending short of the next segment and moved the later ones aside: records lost.
	t.Run("reopened with a larger segment size", func(t *testing.T) {
		dir := t.TempDir()
		l := openTest(t, dir, Options{})
		for i := 0; len(*l.segs.Load()) < 3; i++ {
			appendOne(t, l, 1, payload(i))
		}
		l.Close()
		before := dirState(t, dir)
		l2, err := Open(dir, &Options{SegmentSize: 2 * testSegSize})
		if err == nil {
			l2.Close()
			t.Fatal("Open succeeded")
		}
		if want := "another SegmentSize"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
		if after := dirState(t, dir); after != before {
			t.Errorf("the failed Open changed the files:\nbefore %s\nafter  %s", before, after)
		}
		openTest(t, dir, Options{}).Close()
	})
	t.Run("segment named for the end of positions", func(t *testing.T) {
		dir := t.TempDir()
		base := int64(math.MaxInt64 / testSegSize * testSegSize)
		if err := os.WriteFile(filepath.Join(dir, segmentName(base)), make([]byte, testSegSize), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, &Options{SegmentSize: testSegSize})
		if err == nil {
			l.Close()
			t.Fatal("Open succeeded: positions in the segment would overflow")
		}
	})
}

// dirState describes the files of dir, their sizes and contents' hashes.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d:%x ", e.Name(), len(data), castagnoliSum(data))
	}
	return b.String()
}

func castagnoliSum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
