package uplink

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// TestLingerFillsBatches: a forwarder that read fewer than a batch waits Linger for more and
// sends them together.
func TestLingerFillsBatches(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	h := startHub(t, "")
	ctx := context.Background()
	send := func(n int) {
		for range n {
			if _, err := local.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, mq.QueueIndex(0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(1) // the topic exists before the uplink starts
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: 10, Linger: 500 * time.Millisecond,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
	time.Sleep(100 * time.Millisecond) // the forwarder has read the first and lingers
	send(5)
	// Forwarded, not the hub's count: the stats move when the answer is in, after the hub
	// stored the batch.
	waitFor(t, 10*time.Second, "6 forwarded", func() bool { return u.Stats().Up[0].Forwarded == 6 })
	if n := count(t, h.b, "T"); n != 6 {
		t.Fatalf("%d upstream, want 6", n)
	}
	if s := u.Stats().Up[0]; s.Batches != 1 {
		t.Fatalf("%d batches for 6 messages within the linger, want 1", s.Batches)
	}
}

// TestTooLargeForUpstreamIsSkipped: a message the upstream refuses as too large is counted
// and skipped; the queue goes on.
func TestTooLargeForUpstreamIsSkipped(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	hb, err := edge.Open(t.TempDir(), &edge.Options{MaxMessageSize: 8 << 10, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	srv, err := server.Start(hb, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	for _, size := range []int{10, 20 << 10, 30} {
		if _, err := local.Send(ctx, &mq.Message{Topic: "T", Body: bytes.Repeat([]byte("b"), size)}, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
	}
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"},
		Upstream: Upstream{Addrs: srv.Addr().String(), Kind: KindEdgeMQ}}}})
	waitFor(t, 10*time.Second, "the queue drained", func() bool { s := u.Stats().Up[0]; return s.Queues == 4 && s.Backlog == 0 })
	if s := u.Stats().Up[0]; s.Rejected != 1 || s.Forwarded != 2 || count(t, hb, "T") != 2 {
		t.Fatalf("stats %+v, upstream %d: want 1 rejected, 2 forwarded", s, count(t, hb, "T"))
	}
}
