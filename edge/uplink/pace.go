package uplink

import (
	"context"
	"sync"
	"time"
)

// Pacing: while a rule of a lower priority drains to an upstream that a rule of a higher
// priority also sends to, the lower rules' batches are kept from filling the link's queue,
// so that a fresh message of the higher rule does not wait behind seconds of them (a slow
// link's modem or shaper queues what TCP sends it, up to a second's worth or more).
//
// A pacer per upstream estimates, from the batches the upstream acknowledges (every rule's
// there), the link's delivery rate (body bytes acknowledged per second from an earlier
// answer to each answer, over at least rateSpan, the largest of the last rateWindow) and
// its round trip (a batch's send to its answer less the batch's own time on the link at
// that rate, the smallest of the last rttWindow). Answers often come in bursts: a modem or
// a shaper sends them in groups, and answers wait behind a lost packet's retransmission
// then come together. Measured over one round trip, from the answer before a batch's send
// (the way a TCP sender measures each packet's), such a burst reads as a faster link, and
// the largest sample of the window takes the rate half again too high or more, and the cap
// with it; so a sample spans a second or more of answers, and starts at the last answer of
// a burst. Answers held at random, one here and one there, still read somewhat high (a
// quarter or so over a second's span); a longer span would read them true, but a cap of
// the true rate times the shortest round trip then leaves the link idle while answers are
// held. Until the first answer, the lower rules' batches carry at most firstBatch (a
// rule's reads would otherwise fill them to BatchBytes, minutes of a slow link) and go
// one at a time. The lower rules may send while their body
// bytes in flight, all their queues together, are under the rate times the round trip plus
// Options.PaceDelay plus one batch: what keeps the link busy, and PaceDelay's worth queued.
// The lower rules' batches carry at most a quarter second of the rate, as under a
// RateLimit. A cap below what the link carries leaves the link idle for part of each round
// trip, but the batches then answered sooner give a larger rate, and the cap grows with it
// until the link is full. When the round trip's estimate is rttWindow old, the lower rules
// wait for their batches in flight and send one alone on an empty link to measure it again
// (the queue they keep would otherwise be taken for part of the round trip).
//
// A fast link keeps its drain rate: there the rate times PaceDelay is many batches.

// The estimates' windows and spans.
const (
	rateWindow = 10 * time.Second
	rttWindow  = 10 * time.Second
	// rateSpan is the shortest time a delivery-rate sample is measured over: several
	// answers, so that answers that come in bursts (held behind a lost packet, or by a
	// modem or shaper that answers in groups) do not read as a faster link.
	rateSpan = time.Second
	// ackStep is the spacing of the acknowledgement points kept to measure samples from.
	ackStep = rateSpan / 8
	// firstBatch is the most body bytes of a capped batch before there is an estimate: the
	// link may be slow, and a high-priority message waits behind the batches first sent.
	firstBatch = 1 << 10
	// ackBurst is the most time between two answers of one burst.
	ackBurst = ackStep / 4
)

// pacer paces the lower-priority rules to one upstream. Its methods are safe for concurrent
// use.
type pacer struct {
	delay time.Duration // Options.PaceDelay

	mu        sync.Mutex    // guards what follows; a leaf
	wake      chan struct{} // closed, and replaced, when inflight drops or the estimates change
	inflight  int64         // body bytes of capped batches sent and not yet answered
	delivered int64         // body bytes acknowledged so far, every rule of the upstream
	ackedAt   time.Time     // when the last of them were
	acks      []ackPoint    // delivered by time, ackStep apart or more, the last rateWindow, oldest first
	rates     []rateSample  // the last rateWindow's delivery-rate samples, by second, oldest first
	rtt       time.Duration // the smallest round trip of the last rttWindow; 0: none yet
	rttAt     time.Time     // when rtt was measured
	probing   bool          // rtt is stale: capped batches wait for an empty link
}

// ackPoint is pacer.delivered at a time, right after an answer.
type ackPoint struct {
	at        time.Time
	delivered int64
	since     time.Time // the first answer of the burst at ends
}

// rateSample is a delivery rate measured when a batch was answered.
type rateSample struct {
	at   time.Time
	rate float64 // body bytes per second
	full bool    // measured over rateSpan or more
}

// flight is a batch in flight, from pacer.acquire to pacer.release.
type flight struct {
	at        time.Time
	delivered int64     // pacer.delivered when it was sent
	ackedAt   time.Time // pacer.ackedAt then (its send time if none)
	bytes     int64
	capped    bool
	alone     bool // no capped batch was in flight when it was sent
}

func newPacer(delay time.Duration) *pacer { return &pacer{delay: delay, wake: make(chan struct{})} }

// acquire waits until a batch of n body bytes may go, for a capped (lower-priority) rule,
// and returns its flight for release; ctx's error if ctx ends first. An uncapped batch goes
// at once; a capped batch while the capped bytes in flight are under the cap, or none.
func (p *pacer) acquire(ctx context.Context, n int, capped bool) (flight, error) {
	for {
		p.mu.Lock()
		now := time.Now()
		if !p.probing && p.rtt > 0 && now.Sub(p.rttAt) > rttWindow {
			p.probing = true
		}
		fl := flight{at: now, delivered: p.delivered, ackedAt: p.ackedAt, bytes: int64(n), capped: capped, alone: p.inflight == 0}
		if fl.ackedAt.IsZero() {
			fl.ackedAt = now
		}
		if !capped || p.inflight == 0 || !p.probing && p.inflight < p.capLocked(now) {
			if capped {
				p.inflight += int64(n)
			}
			p.mu.Unlock()
			return fl, nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return flight{}, ctx.Err()
		}
	}
}

// release ends fl: acked says whether the upstream acknowledged its batch, which then
// gives a delivery-rate and a round-trip sample.
func (p *pacer) release(fl flight, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fl.capped {
		p.inflight -= fl.bytes
	}
	if acked {
		now := time.Now()
		rtt := max(now.Sub(fl.at), time.Microsecond)
		p.delivered += fl.bytes
		sample, full := p.deliveryRateLocked(now, fl, rtt)
		p.ackedAt = now
		p.sampleLocked(now, sample, full)
		// The round trip of the batch less its own time on the link at the rate: what a
		// small message's would be. At least half the batch's, the rate being an estimate.
		if r := p.rateLocked(now); r > 0 {
			rtt = max(rtt-time.Duration(float64(fl.bytes)/r*float64(time.Second)), rtt/2)
		}
		switch {
		case p.probing && fl.alone:
			p.rtt, p.rttAt, p.probing = rtt, now, false
		case p.rtt == 0 || rtt <= p.rtt:
			p.rtt, p.rttAt = rtt, now
		}
	}
	close(p.wake)
	p.wake = make(chan struct{})
}

// deliveryRateLocked measures a delivery-rate sample as fl's answer comes (p.delivered
// counts it already, p.ackedAt is still the answer before): the bytes acknowledged from an
// earlier answer to this one, over that time. An interval from one answer to another,
// while the link is busy, holds the answers of what the link carried in it: at most the
// link's rate. The interval starts at least rateSpan back, at the last answer of a burst,
// so that a burst of answers after a gap is measured with the gap, and it is at least the
// batch's round trip. Until there is an answer rateSpan old the sample is over what there
// is, from the first answer or the batch's send, and full is false.
func (p *pacer) deliveryRateLocked(now time.Time, fl flight, rtt time.Duration) (rate float64, full bool) {
	from, delivered := fl.ackedAt, fl.delivered
	for i := len(p.acks) - 1; i >= 0; i-- {
		if a := p.acks[i]; now.Sub(a.at) >= rateSpan {
			from, delivered, full = a.at, a.delivered, true
			break
		}
	}
	if !full && len(p.acks) > 0 && p.acks[0].at.Before(from) {
		from, delivered = p.acks[0].at, p.acks[0].delivered
	}
	rate = float64(p.delivered-delivered) / max(now.Sub(from), rtt).Seconds()
	n := len(p.acks)
	switch {
	case n > 0 && p.acks[n-1].at.Equal(p.ackedAt) && now.Sub(p.ackedAt) < ackBurst && now.Sub(p.acks[n-1].since) < ackStep:
		p.acks[n-1].at, p.acks[n-1].delivered = now, p.delivered // the burst goes on
	case n == 0 || now.Sub(p.acks[n-1].at) >= ackStep:
		i := 0
		for i < n-1 && now.Sub(p.acks[i+1].at) > rateWindow {
			i++
		}
		p.acks = append(p.acks[:0], p.acks[i:]...)
		p.acks = append(p.acks, ackPoint{at: now, delivered: p.delivered, since: now})
	}
	return rate, full
}

// sampleLocked records a delivery-rate sample: the samples of one second are kept as their
// largest, so that a fast link's many answers keep a few of them. The first full sample
// drops the others.
func (p *pacer) sampleLocked(now time.Time, rate float64, full bool) {
	n := len(p.rates)
	if full && n > 0 && !p.rates[n-1].full {
		p.rates, n = p.rates[:0], 0
	}
	if n > 0 && now.Sub(p.rates[n-1].at) < time.Second {
		p.rates[n-1].rate = max(p.rates[n-1].rate, rate)
		return
	}
	i := 0
	for i < len(p.rates) && now.Sub(p.rates[i].at) > rateWindow {
		i++
	}
	p.rates = append(p.rates[:0], p.rates[i:]...)
	p.rates = append(p.rates, rateSample{at: now, rate: rate, full: full})
}

// rateLocked returns the delivery rate's estimate in body bytes per second; 0: none yet.
func (p *pacer) rateLocked(now time.Time) float64 {
	r := 0.0
	for _, s := range p.rates {
		if now.Sub(s.at) <= rateWindow {
			r = max(r, s.rate)
		}
	}
	return r
}

// capLocked returns the body bytes in flight under which the capped rules may send: the
// rate times the round trip plus the delay, and a batch (its own time on the link).
func (p *pacer) capLocked(now time.Time) int64 {
	r := p.rateLocked(now)
	return int64(r*(p.rtt+p.delay).Seconds()) + int64(quarterSecond(int64(r)))
}

// batchBytes returns the most body bytes of a capped rule's batch: a quarter second of the
// delivery rate; firstBatch while there is no estimate.
func (p *pacer) batchBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := quarterSecond(int64(p.rateLocked(time.Now()))); n > 0 {
		return n
	}
	return firstBatch
}

// estimate returns the delivery rate's and the round trip's estimates.
func (p *pacer) estimate() (rate float64, rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rateLocked(time.Now()), p.rtt
}

// quarterSecond returns the bytes of a quarter second at rate bytes per second, at least 1;
// 0 for no rate. Under a rate, a batch holds at most that much, so that a message of a
// higher priority waits at most that long behind one batch.
func quarterSecond(rate int64) int {
	if rate <= 0 {
		return 0
	}
	return int(max(rate/4, 1))
}

// pacersFor returns each rule's pacer, shared by the rules to one upstream (by its
// addresses) when some of them are of a lower priority than others, and whether the
// rule's batches are capped by it (its priority is below the highest there). None with a
// negative delay.
func pacersFor(rules []UpRule, delay time.Duration) (ps []*pacer, capped []bool) {
	ps, capped = make([]*pacer, len(rules)), make([]bool, len(rules))
	if delay < 0 {
		return ps, capped
	}
	top := map[string]int{}
	for _, u := range rules {
		if p, ok := top[u.Upstream.Addrs]; !ok || u.Priority > p {
			top[u.Upstream.Addrs] = u.Priority
		}
	}
	shared := map[string]*pacer{}
	for i, u := range rules {
		capped[i] = u.Priority < top[u.Upstream.Addrs]
		if capped[i] && shared[u.Upstream.Addrs] == nil {
			shared[u.Upstream.Addrs] = newPacer(delay)
		}
	}
	for i, u := range rules {
		ps[i] = shared[u.Upstream.Addrs]
	}
	return ps, capped
}

// batchBytes returns the most body bytes of the forwarder's next batch.
func (f *queueFwd) batchBytes() int {
	n := f.r.cfg.BatchBytes
	if f.r.capped {
		if b := f.r.pace.batchBytes(); b > 0 && b < n {
			n = b
		}
	}
	return n
}

// acquire waits until the rule may send a batch of n body bytes (see pacer.acquire).
func (f *queueFwd) acquire(ctx context.Context, n int) (flight, error) {
	if f.r.pace == nil {
		return flight{}, nil
	}
	return f.r.pace.acquire(ctx, n, f.r.capped)
}

// release ends a flight acquire began.
func (f *queueFwd) release(fl flight, acked bool) {
	if f.r.pace != nil {
		f.r.pace.release(fl, acked)
	}
}
