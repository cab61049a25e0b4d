package uplink

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// simLink is a bottleneck link: a FIFO queue drained at rate bytes per second, and a
// propagation delay each way. It is a model for the pacer's tests, run under synctest.
type simLink struct {
	mu       sync.Mutex
	rate     float64 // bytes per second
	prop     time.Duration
	busyTill time.Time // when the queue is empty
	carried  int64     // bytes through the bottleneck so far
	// burst, if not 0, holds the answers at the far end and lets them go together at each
	// multiple of it, as a link whose answers come in bursts: a modem or a shaper that
	// sends them in groups, or a transport whose answers wait behind a lost packet.
	burst time.Duration
}

// send sends n bytes now and returns when their answer arrives.
func (l *simLink) send(n int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := time.Now().Add(l.prop)
	start := at
	if l.busyTill.After(at) {
		start = l.busyTill
	}
	l.busyTill = start.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	l.carried += int64(n)
	done := l.busyTill
	if l.burst > 0 && !done.Truncate(l.burst).Equal(done) {
		done = done.Truncate(l.burst).Add(l.burst)
	}
	return done.Add(l.prop)
}

func (l *simLink) setRate(r float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate = r
}

func (l *simLink) bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.carried
}

// paceRun drives a link as the uplink does: queues lower-priority forwarders draining
// batches (capped by p, unless p is nil) and, every 900 ms from the start, one small
// high-priority message. It runs for d and returns the high-priority messages' latencies
// past the first warm of the run, and the bytes the link carried in its last half.
func paceRun(t *testing.T, l *simLink, p *pacer, queues int, d, warm time.Duration, change func()) (lat []time.Duration, lastHalf float64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	for range queues {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := DefaultBatchSize * 100 // 32 messages of 100 bytes
				var fl flight
				if p != nil { // messages enough for a batch of the pacer's size, and BatchBytes at most
					n = DefaultBatchBytes
					if b := p.batchBytes(); b > 0 {
						n = min(n, b)
					}
					var err error
					if fl, err = p.acquire(ctx, n, true); err != nil {
						return
					}
				}
				sleepUntil(ctx, l.send(n))
				if p != nil {
					p.release(fl, ctx.Err() == nil)
				}
			}
		})
	}
	var mu sync.Mutex
	wg.Go(func() {
		for ctx.Err() == nil {
			if sleep(ctx, 900*time.Millisecond) != nil {
				return
			}
			sent := time.Now()
			var fl flight
			if p != nil {
				fl, _ = p.acquire(ctx, 10, false)
			}
			sleepUntil(ctx, l.send(10))
			if p != nil {
				p.release(fl, ctx.Err() == nil)
			}
			if ctx.Err() == nil && sent.Sub(start) >= warm {
				mu.Lock()
				lat = append(lat, time.Since(sent))
				mu.Unlock()
			}
		}
	})
	time.Sleep(d / 2)
	if change != nil {
		change()
	}
	half := l.bytes()
	time.Sleep(d / 2)
	lastHalf = float64(l.bytes()-half) / (d / 2).Seconds()
	cancel()
	wg.Wait()
	if len(lat) == 0 {
		t.Fatalf("no high-priority message was answered after the first %v of %v", warm, d)
	}
	slices.Sort(lat)
	return lat, lastHalf
}

func sleepUntil(ctx context.Context, at time.Time) { sleep(ctx, time.Until(at)) }

// TestPaceSlowLink: on a 8,000 B/s link with a 300 ms round trip, 16 queues of a
// lower-priority rule draining batches as fast as they are answered keep the link's queue
// seconds long; paced, while the link stays busy, a high-priority message waits at most the
// round trip plus what the lower rule may have in flight over the link's rate: the cap (the
// round trip, PaceDelay and a quarter-second batch) and the batch admitted just under it.
// Seconds under synctest depend on the order goroutines run in at one instant: the bound
// is the design's worst case, not a typical run's (p50 about 600 ms, max 750 ms to 1.26 s).
// It holds from the start too: before the pacer has an estimate, it keeps the lower rule's
// batches small (whose reads would otherwise take BatchBytes, here half a minute of the
// link).
func TestPaceSlowLink(t *testing.T) {
	const rate, prop = 8000, 150 * time.Millisecond
	const batch = time.Second / 4
	worstCase := 2*prop + (2*prop + DefaultOptions.PaceDelay + batch) + batch
	for _, tc := range []struct {
		name        string
		paced       bool
		maxLat      time.Duration // every high-priority message within it; 0: over it
		minLastHalf float64       // link bytes per second in the run's second half
		warm        time.Duration // latencies from then on
	}{
		{"paced", true, worstCase, 0.9 * rate, 10 * time.Second},
		{"paced from the start", true, worstCase, 0.9 * rate, 0},
		{"unpaced", false, 0, 0.9 * rate, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &simLink{rate: rate, prop: prop}
				var p *pacer
				if tc.paced {
					p = newPacer(DefaultOptions.PaceDelay)
				}
				lat, got := paceRun(t, l, p, 16, 60*time.Second, tc.warm, nil)
				worst := lat[len(lat)-1]
				t.Logf("latency p50 %v, max %v; link %.0f B/s of %d", lat[len(lat)/2], worst, got, rate)
				if tc.maxLat > 0 && worst > tc.maxLat {
					t.Errorf("a high-priority message took %v, want at most %v", worst, tc.maxLat)
				}
				if tc.maxLat == 0 && worst <= worstCase {
					t.Errorf("unpaced, a high-priority message took at most %v: the model no longer fills the queue", worst)
				}
				if got < tc.minLastHalf {
					t.Errorf("the link carried %.0f B/s, want at least %.0f", got, tc.minLastHalf)
				}
				if p != nil {
					r, rtt := p.estimate()
					t.Logf("estimate: %.0f B/s, round trip %v", r, rtt)
					if b := p.batchBytes(); b < rate/5 || b > rate/3 {
						t.Errorf("batches of %d bytes, want about a quarter second of the link's %d B/s", b, rate)
					}
				}
			})
		})
	}
}

// TestPaceBurstyAnswers: on the slow link of TestPaceSlowLink whose answers come in
// bursts, the delivery-rate estimate stays near the link's rate (each sample spans a
// second or more of answers, from the end of a burst: measured from the answer before each
// batch's send, it reads a quarter to a half again too high), and a high-priority message
// waits at most the slow link's worst case and two bursts' holds (its own answer's, and
// the one the round trip's estimate may hold).
func TestPaceBurstyAnswers(t *testing.T) {
	const rate, prop = 8000, 150 * time.Millisecond
	const batch = time.Second / 4
	worstCase := 2*prop + (2*prop + DefaultOptions.PaceDelay + batch) + batch
	for _, burst := range []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond} {
		t.Run(burst.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &simLink{rate: rate, prop: prop, burst: burst}
				p := newPacer(DefaultOptions.PaceDelay)
				// The rate's estimate, every half second from the tenth to the sixtieth.
				var rates []float64
				var wg sync.WaitGroup
				wg.Go(func() {
					time.Sleep(10 * time.Second)
					for range 100 {
						time.Sleep(500 * time.Millisecond)
						r, _ := p.estimate()
						rates = append(rates, r)
					}
				})
				lat, got := paceRun(t, l, p, 16, 60*time.Second, 10*time.Second, nil)
				wg.Wait()
				slices.Sort(rates)
				r := rates[len(rates)/2]
				_, rtt := p.estimate()
				worst := lat[len(lat)-1]
				t.Logf("latency p50 %v, max %v; link %.0f B/s of %d; estimate's median %.0f B/s (%.0f-%.0f), round trip %v",
					lat[len(lat)/2], worst, got, rate, r, rates[0], rates[len(rates)-1], rtt)
				if r > 1.2*rate {
					t.Errorf("delivery-rate estimate's median %.0f B/s, want at most 1.2 times the link's %d B/s", r, rate)
				}
				if bound := worstCase + 2*burst; worst > bound {
					t.Errorf("a high-priority message took %v, want at most %v (the slow link's worst case and two bursts)", worst, bound)
				}
				if got < 0.5*rate { // answers held a second need a second more in flight
					t.Errorf("the link carried %.0f B/s, want at least half its %d B/s", got, rate)
				}
			})
		})
	}
}

// TestPaceLinkGetsFaster: when the link's rate grows tenfold, the pacer's estimate follows
// and the lower-priority rule drains at the new rate, its queue still short.
func TestPaceLinkGetsFaster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &simLink{rate: 8000, prop: 150 * time.Millisecond}
		p := newPacer(DefaultOptions.PaceDelay)
		lat, got := paceRun(t, l, p, 16, 60*time.Second, 40*time.Second, func() { l.setRate(80000) })
		r, rtt := p.estimate()
		t.Logf("latency p50 %v, max %v; link %.0f B/s of 80000; estimate %.0f B/s, round trip %v",
			lat[len(lat)/2], lat[len(lat)-1], got, r, rtt)
		if got < 0.8*80000 {
			t.Errorf("the link carried %.0f B/s after it got faster, want at least 80 %% of 80000", got)
		}
		if worst := lat[len(lat)-1]; worst > 1500*time.Millisecond {
			t.Errorf("a high-priority message took %v, want at most 1.5 s", worst)
		}
	})
}

// TestPaceFastLink: on a fast link (100 MB/s, 100 µs round trip) pacing leaves the drain
// rate as it is without.
func TestPaceFastLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 100e6
		l := &simLink{rate: rate, prop: 50 * time.Microsecond}
		_, got := paceRun(t, l, newPacer(DefaultOptions.PaceDelay), 4, 4*time.Second, time.Second, nil)
		t.Logf("link %.0f B/s of %.0f", got, float64(rate))
		if got < 0.95*rate {
			t.Errorf("the link carried %.0f B/s paced, want at least 95 %% of %.0f", got, float64(rate))
		}
	})
}

// TestPacersFor: only upstreams shared by rules of different priorities get a pacer, and
// only the rules below the highest priority there are capped.
func TestPacersFor(t *testing.T) {
	a, b := Upstream{Addrs: "10.0.0.1:9876"}, Upstream{Addrs: "10.0.0.2:9876"}
	rules := []UpRule{
		{Name: "bulk", Upstream: a},
		{Name: "alarm", Upstream: a, Priority: 10},
		{Name: "mid", Upstream: a, Priority: 5},
		{Name: "alone", Upstream: b, Priority: 3},
	}
	ps, capped := pacersFor(rules, time.Second)
	if ps[0] == nil || ps[0] != ps[1] || ps[0] != ps[2] || ps[3] != nil {
		t.Errorf("pacers %v: want one shared by the rules to a, none for b", ps)
	}
	if want := []bool{true, false, true, false}; !slices.Equal(capped, want) {
		t.Errorf("capped %v, want %v", capped, want)
	}
	ps, capped = pacersFor(rules, -1)
	if slices.ContainsFunc(ps, func(p *pacer) bool { return p != nil }) || slices.Contains(capped, true) {
		t.Errorf("negative delay: pacers %v capped %v, want none", ps, capped)
	}
}

// TestPaceLoopbackDrain: over loopback, a lower-priority rule sharing its upstream with a
// higher one drains a backlog about as fast paced as not (runs interleaved, the best of
// each kept: the machine may be loaded).
func TestPaceLoopbackDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("drains a backlog four times")
	}
	h := startHub(t, "")
	const n = 10000
	body := bytes.Repeat([]byte("t"), 1000)
	drain := func(delay time.Duration, topic string) float64 {
		local := openLocal(t, t.TempDir(), nil)
		for i := range n {
			if _, err := local.Send(context.Background(), &mq.Message{Topic: topic, Body: body}, mq.QueueIndex(i%4)); err != nil {
				t.Fatal(err)
			}
		}
		up := Upstream{Addrs: h.addr, Kind: KindEdgeMQ}
		start := time.Now()
		u := startUplink(t, local, Options{ScanInterval: 50 * time.Millisecond, PaceDelay: delay, Up: []UpRule{
			{Name: "telemetry", Topics: []string{topic}, Upstream: up},
			{Name: "alarms", Topics: []string{"alarm"}, Upstream: up, Priority: 10},
		}})
		waitFor(t, time.Minute, "the backlog drained", func() bool { return u.Stats().Up[0].Forwarded == n })
		rate := n / time.Since(start).Seconds()
		u.Close()
		return rate
	}
	var paced, unpaced float64
	for i := range 2 {
		unpaced = max(unpaced, drain(-1, fmt.Sprintf("unpaced%d", i)))
		paced = max(paced, drain(0, fmt.Sprintf("paced%d", i)))
	}
	t.Logf("drain of %d messages of 1 KB on 4 queues, best of 2: paced %.0f msg/s, unpaced %.0f msg/s", n, paced, unpaced)
	if paced < unpaced/2 {
		t.Errorf("paced drain %.0f msg/s, unpaced %.0f: pacing slows a fast link", paced, unpaced)
	}
}
