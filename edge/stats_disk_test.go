package edge

import (
	"context"
	"errors"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestDiskStats: the data dir's file system has a size and free space within it; a closed
// broker answers ErrClosed.
func TestDiskStats(t *testing.T) {
	dir := t.TempDir()
	b := openBrokerAt(t, dir, nil)
	d, err := b.DiskStats()
	if err != nil {
		t.Fatal(err)
	}
	if d.Dir != dir || d.TotalBytes == 0 || d.FreeBytes > d.TotalBytes || d.UsedBytes() != d.TotalBytes-d.FreeBytes {
		t.Fatalf("DiskStats = %+v (used %d), want dir %s, 0 < free <= total", d, d.UsedBytes(), dir)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DiskStats(); !errors.Is(err, ErrClosed) {
		t.Fatalf("DiskStats after Close: got %v, want ErrClosed", err)
	}
}

// TestStoreStatsPositionsAndFsyncs: after a durable send the flusher has fsynced, and the
// positions are ordered dispatched <= durable <= written.
func TestStoreStatsPositionsAndFsyncs(t *testing.T) {
	b := openBroker(t, nil)
	for range 5 {
		if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.st.Flush(); err != nil {
		t.Fatal(err)
	}
	ss, err := b.StoreStats()
	if err != nil {
		t.Fatal(err)
	}
	if ss.Fsyncs.Count == 0 || ss.Fsyncs.Sum <= 0 {
		t.Errorf("fsyncs: got %+v, want some after a flush", ss.Fsyncs)
	}
	if ss.DispatchedPos > ss.DurablePos || ss.DurablePos > ss.MaxPos || ss.DurablePos <= ss.MinPos {
		t.Errorf("positions: min %d dispatched %d durable %d max %d, want min < durable, dispatched <= durable <= max",
			ss.MinPos, ss.DispatchedPos, ss.DurablePos, ss.MaxPos)
	}
}
