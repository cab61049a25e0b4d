package uplink

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/netfault"
	"github.com/edgemq/edgemq/store"
)

// TestForwardThroughFaults: while the link to the hub is cut at random moments across the
// forward, and stalled, throttled and has replies dropped after the hub stored a batch,
// and the hub restarts once, every message arrives at least once, in order per queue, and
// the messages stored twice are at most those of the attempts that repeated a failed one
// (RuleStats.Resent), one batch per failure. Full scale: 1,000,000 messages, 100 cuts.
func TestForwardThroughFaults(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	total, batch, cuts := scaled(3000, 1_000_000), scaled(20, 64), scaled(5, 100)
	var so func() *store.Options // nil: the small tests' settings
	if fullScale() {
		so = bulkStore
	}
	ln := freeListener(t)
	h := startHubStore(t, ln.Addr().String(), so)
	p, err := netfault.New(h.addr, &netfault.Options{Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	local := openLocal(t, t.TempDir(), storeOpts(so))
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	u := startUplink(t, local, Options{SendTimeout: time.Second, Up: []UpRule{{Name: "r", Topics: []string{"T"},
		Upstream: Upstream{Addrs: p.Addr(), Kind: KindEdgeMQ}, BatchSize: batch}}})
	r := rand.New(rand.NewPCG(seed, seed))
	cutAt := make([]int64, cuts) // the forwarded counts at which the link is cut
	for i := range cutAt {
		cutAt[i] = r.Int64N(int64(total) * 95 / 100) // all of them before the last batches
	}
	slices.Sort(cutAt)
	var cutsMade atomic.Int64
	stop, cutDone := make(chan struct{}), make(chan struct{})
	go func() { // cuts the link as the forward passes each of cutAt
		defer close(cutDone)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for len(cutAt) > 0 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if u.rules[0].c.forwarded.Load() >= cutAt[0] {
				p.Cut()
				cutsMade.Add(1)
				cutAt = cutAt[1:]
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-cutDone })
	if err := p.StartFaults(netfault.Schedule{Seed: seed, MinGap: 20 * time.Millisecond, MaxGap: 200 * time.Millisecond,
		Stall: 1, Throttle: 1, DropReply: 3, MaxStall: 300 * time.Millisecond, ThrottleRate: scaled(64<<10, 4<<20)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sendMany(t, local, "T", 0, total/2)
	waitFor(t, 300*time.Second, "a quarter forwarded", func() bool { return u.Stats().Up[0].Forwarded > int64(total/4) })
	h.restart()
	sendMany(t, local, "T", total/2, total-total/2)
	waitFor(t, 600*time.Second, "every cut", func() bool {
		select {
		case <-cutDone:
			return true
		default:
			return u.Stats().Up[0].Backlog == 0 // a forward that lost messages never reaches the last cuts
		}
	})
	p.StopFaults()
	p.Throttle(0)
	waitFor(t, 600*time.Second, "backlog drained", func() bool { return u.Stats().Up[0].Backlog == 0 })
	took := time.Since(start)
	s := u.Stats().Up[0]
	dups := checkStream(t, local, "T", h.b, "T", int(s.Resent))
	if n := cutsMade.Load(); n != int64(cuts) {
		t.Fatalf("%d cuts made, want %d", n, cuts)
	}
	t.Logf("%d messages forwarded in %v (%.0f/s); %d cuts and %d other faults (%d replies dropped), a hub restart; failures %d, resent %d, duplicates upstream %d",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), cuts, len(p.Faults()), p.RepliesDropped(), s.Failures, s.Resent, dups)
	if s.Resent > s.Failures*int64(batch) {
		t.Fatalf("resent %d messages after %d failures of batches of at most %d", s.Resent, s.Failures, batch)
	}
}
