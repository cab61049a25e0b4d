package uplink

import (
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// TestCompressToHubSendsZstdBatches: a rule with Compress to an EdgeMQ hub sends its
// batches as SEND_BATCH_ZSTD, never plain, and every message lands as it was, properties
// and all.
func TestCompressToHubSendsZstdBatches(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	h := startHub(t, "")
	for _, b := range []*edge.Broker{local, h.b} {
		if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
			t.Fatal(err)
		}
	}
	sendN(t, local, "T", 0, 2000)
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, Compress: true, BatchSize: 100,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
	waitFor(t, 30*time.Second, "2000 forwarded", func() bool { return u.Stats().Up[0].Forwarded == 2000 })
	checkSame(t, local, "T", h.b, "T", 0)
	req := h.srv.Stats().Requests
	if req[remoting.SendBatchZstd] == 0 || req[remoting.SendBatchMessage] != 0 {
		t.Fatalf("hub requests %v: want zstd batches only", req)
	}
	if u.rules[0].noZstd.Load() {
		t.Fatal("the rule fell back to plain batches from a hub that takes zstd")
	}
}

// TestCompressFallsBackToPlainBatches: a hub that answers SEND_BATCH_ZSTD not supported
// (zstd batches turned off, as an older hub) stores nothing of it; the rule sends that
// batch and every later one plain, asking once.
func TestCompressFallsBackToPlainBatches(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	hb, err := edge.Open(t.TempDir(), brokerOptions(t, "hub", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	srv, err := server.Start(hb, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", NoZstdBatch: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, b := range []*edge.Broker{local, hb} {
		if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
			t.Fatal(err)
		}
	}
	sendN(t, local, "T", 0, 1000)
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, Compress: true, BatchSize: 50,
		Upstream: Upstream{Addrs: srv.Addr().String(), Kind: KindEdgeMQ}}}})
	waitFor(t, 30*time.Second, "1000 forwarded", func() bool { return u.Stats().Up[0].Forwarded == 1000 })
	checkSame(t, local, "T", hb, "T", 0)
	st := srv.Stats()
	if n := st.Requests[remoting.SendBatchZstd]; n < 1 || n > 4 { // at most one per queue, racing before the first answer
		t.Fatalf("%d zstd batches asked: want the first batches only", n)
	}
	if st.Replies[remoting.RequestCodeNotSupported] != st.Requests[remoting.SendBatchZstd] || st.Requests[remoting.SendBatchMessage] == 0 {
		t.Fatalf("hub requests %v, replies %v: want the zstd batches refused and plain batches after", st.Requests, st.Replies)
	}
	if s := u.Stats().Up[0]; !u.rules[0].noZstd.Load() || s.Resent != 0 || s.Failures != 0 {
		t.Fatalf("stats %+v, fallen back %v: want the fallback remembered, no failure", s, u.rules[0].noZstd.Load())
	}
}
