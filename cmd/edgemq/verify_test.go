package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeStore sends n messages of body bytes to topic T queue 0 of a new store in dir with
// segSize segments, and returns each message's commitlog position.
func writeStore(t *testing.T, dir, segSize string, n, body int) []int64 {
	t.Helper()
	args := []string{"send", "-data", dir, "-store.segment_size", segSize, "-topic", "T", "-create", "-queue", "0", "-json"}
	for i := range n {
		b := fmt.Sprintf("message %04d ", i)
		args = append(args, b+strings.Repeat("x", body-len(b)))
	}
	out := mustRun(t, args...)
	var pos []int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var s sentJSON
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		pos = append(pos, s.CommitLogOffset)
	}
	if len(pos) != n {
		t.Fatalf("%d messages stored, want %d", len(pos), n)
	}
	return pos
}

// flip inverts the byte at log position pos of the store in dir, whose segments are segSize
// bytes: segment files are named by their base position (store/FORMAT.md).
func flip(t *testing.T, dir string, segSize, pos int64) {
	t.Helper()
	path := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d.log", pos/segSize*segSize))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos%segSize); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, pos%segSize); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCountsEveryDamagedRecord damages a store written by send, in its segment files:
// bodies of records (one alone, two adjacent, the last of a segment), and the length field of
// another, in two segments. verify must report every damaged record, read every good one
// (the scan resynchronises after a damaged length), and find every unreadable queue entry.
func TestVerifyCountsEveryDamagedRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	const segSize = 256 << 10
	pos := writeStore(t, dir, "256KiB", 150, 4000)
	lastOfFirst := 0
	for i, p := range pos {
		if p < segSize {
			lastOfFirst = i
		}
	}
	if pos[len(pos)-1] < 2*segSize {
		t.Fatalf("the messages fill %d bytes: want three segments", pos[len(pos)-1])
	}
	bodyOf := func(i int) int64 { return pos[i] + 2000 }
	damaged := []int64{
		bodyOf(3),                                          // a body
		pos[20],                                            // a length field: the scan must find record 21 byte by byte
		bodyOf(lastOfFirst),                                // the last record of segment 0: its length leads to the zeros
		bodyOf(lastOfFirst + 10), bodyOf(lastOfFirst + 11), // adjacent, in segment 1
		pos[len(pos)-1], // the length of the last record of the log: no record follows to find
	}
	for _, p := range damaged {
		flip(t, dir, segSize, p)
	}
	code, out, errOut := edgemq(t, "verify", "-data", dir, "-json")
	var rep verifyJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify -json: %v\n%s%s", err, out, errOut)
	}
	if code != 1 || !strings.Contains(errOut, "damage found: 6 damaged records") {
		t.Errorf("verify: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"damaged records", rep.DamagedRecords, len(damaged)},
		{"good records", rep.Records, int64(len(pos) - len(damaged))},
		{"readable messages", rep.Messages, int64(len(pos) - len(damaged))},
		{"unreadable queue entries", rep.UnreadableEntries, int64(len(damaged))},
		{"ok", rep.OK, false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Each stretch starts at a damaged record and ends where the next good one starts.
	wantStart := []int{3, 20, lastOfFirst, lastOfFirst + 10, len(pos) - 1}
	if len(rep.Damage) != len(wantStart) {
		t.Fatalf("%d damaged stretches: %+v", len(rep.Damage), rep.Damage)
	}
	for i, d := range rep.Damage {
		if w := pos[wantStart[i]]; d.Pos != w || d.Offset != w%segSize {
			t.Errorf("damage %d at %d (offset %d), want %d", i, d.Pos, d.Offset, w)
		}
		if j := wantStart[i] + d.Records; j < len(pos) && pos[j] < (d.Pos/segSize+1)*segSize && d.Pos+d.Bytes != pos[j] {
			t.Errorf("damage %d: %d bytes from %d, want up to the next good record at %d", i, d.Bytes, d.Pos, pos[j])
		}
	}
	if last := rep.Damage[len(rep.Damage)-1]; last.Pos+last.Bytes != rep.MaxPos {
		t.Errorf("the last damage: %d bytes from %d, want up to the end of the log at %d", last.Bytes, last.Pos, rep.MaxPos)
	}
	if rep.Damage[3].Records != 2 {
		t.Errorf("the adjacent damaged records count as %d", rep.Damage[3].Records)
	}

	// The text report names each one, and the summary counts them.
	code, out, _ = edgemq(t, "verify", "-data", dir)
	if code != 1 || strings.Count(out, "damaged: ") != 5 || !strings.Contains(out, "144 records") || !strings.Contains(out, "; 6 damaged") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
}
