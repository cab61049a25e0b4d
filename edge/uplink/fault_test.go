package uplink

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/netfault"
)

// TestForwardThroughFaults: while the link to the hub is cut, stalled, throttled and has
// replies dropped after the hub stored a batch, at random moments, and the hub restarts
// once, every message arrives at least once, in order per queue, and the messages stored
// twice are at most those of the attempts that repeated a failed one (RuleStats.Resent),
// one batch per failure.
func TestForwardThroughFaults(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	ln := freeListener(t)
	h := startHub(t, ln.Addr().String())
	p, err := netfault.New(h.addr, &netfault.Options{Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	local := openLocal(t, t.TempDir(), nil)
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	const batch, total = 20, 3000
	u := startUplink(t, local, Options{SendTimeout: time.Second, Up: []UpRule{{Name: "r", Topics: []string{"T"},
		Upstream: Upstream{Addrs: p.Addr(), Kind: KindEdgeMQ}, BatchSize: batch}}})
	if err := p.StartFaults(netfault.Schedule{Seed: seed, MinGap: 20 * time.Millisecond, MaxGap: 200 * time.Millisecond,
		Cut: 2, Stall: 1, Throttle: 1, DropReply: 3, MaxStall: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	sendN(t, local, "T", 0, total/2)
	waitFor(t, 60*time.Second, "some forwarded", func() bool { return u.Stats().Up[0].Forwarded > total/4 })
	h.restart()
	sendN(t, local, "T", total/2, total/2)
	time.Sleep(time.Second) // let faults hit the forwarding after the restart
	p.StopFaults()
	p.Throttle(0)
	waitFor(t, 120*time.Second, "backlog drained", func() bool { return u.Stats().Up[0].Backlog == 0 })
	s := u.Stats().Up[0]
	dups := checkSame(t, local, "T", h.b, "T", int(s.Resent))
	t.Logf("faults %d (%d replies dropped), failures %d, resent %d, duplicates upstream %d", len(p.Faults()),
		p.RepliesDropped(), s.Failures, s.Resent, dups)
	if s.Resent > s.Failures*batch {
		t.Fatalf("resent %d messages after %d failures of batches of at most %d", s.Resent, s.Failures, batch)
	}
	if p.RepliesDropped() > 0 && dups == 0 {
		t.Logf("no duplicate despite dropped replies (the reply may have been dropped for another request)")
	}
}
