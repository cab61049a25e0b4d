package cqueue

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenTornTail(t *testing.T) {
	const n = 8 // entries per file
	encoded := func(e Entry) []byte {
		b := make([]byte, EntrySize)
		e.Put(b)
		return b
	}
	tests := []struct {
		name    string
		data    int64 // entries appended before the damage: files 0 and 8
		slot    int64 // slot of the last file (base 8) the damage is written at
		damage  []byte
		wantMax int64
	}{
		{"garbage after data", 11, 3, bytes.Repeat([]byte{0xff}, EntrySize), 11},
		{"half written entry", 11, 3, encoded(ent(11))[:posOff+8], 11},
		{"valid entry after a hole", 11, 5, encoded(ent(13)), 11},
		{"garbage far after data", 11, 7, []byte{0, 0, 0, 1}, 11},
		{"torn entry inside data", 14, 2, make([]byte, 4), 10},
		{"invalid size inside data", 14, 4, []byte{0, 0, 0, 0}, 12},
		{"last file empty", 8, 0, nil, 8},
		{"garbage in empty last file", 8, 0, []byte{7}, 8},
		{"full last file", 16, 0, nil, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			q := openQueue(t, dir, segOpts(n))
			appendRange(t, q, 0, tt.data)
			if tt.data == 8 { // force the second file into existence
				if err := q.Append(8, ent(8)); err != nil {
					t.Fatal(err)
				}
				if err := q.TruncateFrom(8); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			last := filepath.Join(dir, fileName(8))
			off := tt.slot * EntrySize
			if tt.name == "torn entry inside data" || tt.name == "invalid size inside data" {
				off += sizeOff
			}
			if len(tt.damage) > 0 {
				writeFileAt(t, last, tt.damage, off)
			}
			q = openQueue(t, dir, segOpts(n))
			checkQueue(t, q, 0, tt.wantMax)
			// Everything past the end of the data was zeroed on disk.
			b, err := os.ReadFile(last)
			if err != nil {
				t.Fatal(err)
			}
			if rest := b[(tt.wantMax-8)*EntrySize:]; lastNonZero(rest) != 0 {
				t.Fatalf("bytes past Max not zeroed: %x", rest)
			}
			// Filling the hole cannot bring a stale entry back.
			appendRange(t, q, tt.wantMax, 16)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			q = openQueue(t, dir, segOpts(n))
			checkQueue(t, q, 0, 16)
		})
	}
}

func TestOpenShortLastFile(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, 6)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// A power cut during a roll can leave the new file shorter than its allocation.
	last := filepath.Join(dir, fileName(4))
	if err := os.Truncate(last, EntrySize+3); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 0, 5)
	if fi, err := os.Stat(last); err != nil || fi.Size() != 4*EntrySize {
		t.Fatalf("last file size = %v, %v; want %d", fi.Size(), err, 4*EntrySize)
	}
	appendRange(t, q, 5, 9)
	checkQueue(t, q, 0, 9)
}

func TestOpenGap(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, 14)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of DeleteBefore: 4 is gone, 0 is not.
	if err := os.Remove(filepath.Join(dir, fileName(4))); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 8, 14)
	checkFiles(t, dir, 8, 12)
}

func TestOpenIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"notes.txt", "123.cq", "0000000000000000000x.cq", "00000000000000000000.cq.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q := openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 0, 0)
	appendRange(t, q, 0, 5)
	checkQueue(t, q, 0, 5)
}

func TestOpenSegmentEntriesMismatch(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, 10)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 8} {
		if _, err := Open(dir, segOpts(n)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with SegmentEntries %d = %v, want ErrCorrupt", n, err)
		}
	}
	checkFiles(t, dir, 0, 4, 8) // nothing removed
	checkQueue(t, openQueue(t, dir, segOpts(4)), 0, 10)
}

func TestOpenOptions(t *testing.T) {
	for _, n := range []int{-1, MaxSegmentEntries + 1} {
		if _, err := Open(t.TempDir(), segOpts(n)); err == nil {
			t.Errorf("Open with SegmentEntries %d succeeded", n)
		}
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	q := openQueue(t, dir, nil)
	appendRange(t, q, 0, 2)
	if fi, err := os.Stat(filepath.Join(dir, fileName(0))); err != nil || fi.Size() != 65536*EntrySize {
		t.Fatalf("default file: %v, %v; want size %d", fi, err, 65536*EntrySize)
	}
}
