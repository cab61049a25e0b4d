package store

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/store/commitlog"
)

// TestRecoveryReportsCutQueueEntriesOnce: when the commitlog lost its tail (here zeroed, with
// no checkpoint to say it was ever durable), Open cuts the queue entries of the lost records
// and says so in one line per queue, however many entries and files that is, and counts
// them in Recovery.
func TestRecoveryReportsCutQueueEntriesOnce(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{SegmentSize: testSeg, QueueSegmentEntries: 16})
	const n, keep = 300, 100
	var cutAt int64
	for i := 0; i < n; i++ {
		m := msg("T", int32(i%2), i)
		if err := s.Append([]*Message{m}); err != nil {
			t.Fatal(err)
		}
		if i == keep {
			cutAt = m.Pos
		}
	}
	if s.log.Written() > testSeg {
		t.Fatalf("the log spans segments: write fewer messages")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(dir, commitlogDir)
	f, err := os.OpenFile(filepath.Join(logDir, "00000000000000000000.log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, testSeg-cutAt), cutAt); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, name := range []string{filepath.Join(logDir, "checkpoint"), filepath.Join(dir, dispatchName)} {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}

	var logs bytes.Buffer
	s = openStore(t, dir, Options{SegmentSize: testSeg, QueueSegmentEntries: 16,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer s.Close()
	if lines := strings.Count(logs.String(), "not backed by the commitlog"); lines != 2 {
		t.Fatalf("%d lines about cut queue entries, want one for each of the 2 queues:\n%s", lines, logs.String())
	}
	rec := s.Recovery()
	if rec.QueueEntries != n-keep || rec.Queues != 2 {
		t.Fatalf("recovery stats %+v, want %d queue entries cut in 2 queues", rec, n-keep)
	}
	if rec.RecoveryStats != (commitlog.RecoveryStats{}) {
		t.Fatalf("commitlog recovery stats %+v: zeros cut nothing", rec.RecoveryStats)
	}
	for q := int32(0); q < 2; q++ {
		if got := len(getAll(t, s, "T", q, nil)); got != keep/2 {
			t.Fatalf("queue %d holds %d messages, want %d", q, got, keep/2)
		}
	}
}
