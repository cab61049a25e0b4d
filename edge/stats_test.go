package edge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestStoreStatsRecovery: StoreStats reports what the store's recovery cut. A power cut
// during a roll left the last segment named with its header lost but a record written back
// after it: the reopened broker moved it aside and says so.
func TestStoreStatsRecovery(t *testing.T) {
	dir := t.TempDir()
	b := openBrokerAt(t, dir, nil)
	if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("kept")}, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := b.StoreStats()
	if err != nil {
		t.Fatal(err)
	}
	if ss.Recovery.BrokenMade != 0 || ss.Recovery.Bytes != 0 {
		t.Fatalf("a fresh broker's recovery stats: %+v, want nothing cut", ss.Recovery)
	}
	segSize := ss.SegmentBytes // one segment
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seg := make([]byte, segSize)
	copy(seg[200:], "a record the kernel wrote back")
	if err := os.WriteFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d.log", segSize)), seg, 0o644); err != nil {
		t.Fatal(err)
	}

	b = openBrokerAt(t, dir, nil)
	ss, err = b.StoreStats()
	if err != nil {
		t.Fatal(err)
	}
	if r := ss.Recovery; r.BrokenMade != 1 || r.BrokenFiles != 1 || r.Bytes != int64(len("a record the kernel wrote back"))+200-64 {
		t.Fatalf("recovery stats %+v, want one segment of %d bytes moved aside", r, 200-64+len("a record the kernel wrote back"))
	}
}
