package main

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// probe measures the end-to-end latency of paced messages. Each body carries its index
// (bytes 0-7) and its send time (bytes 8-15, ns since base on the monotonic clock); the
// consumer calls recv with its own reading of the clock.
type probe struct {
	base   time.Time
	warmup int
	size   int
	lats   []time.Duration // by index - warmup
	got    atomic.Int64
	done   chan struct{}
}

func newProbe(j job) *probe {
	return &probe{base: time.Now(), warmup: j.Warmup, size: j.Size, lats: make([]time.Duration, j.N), done: make(chan struct{})}
}

func (p *probe) total() int { return p.warmup + len(p.lats) }

// now is the probe's clock.
func (p *probe) now() time.Duration { return time.Since(p.base) }

// body returns the body of message i, stamped with the current time.
func (p *probe) body(i int) []byte {
	b := make([]byte, p.size)
	binary.LittleEndian.PutUint64(b, uint64(i))
	binary.LittleEndian.PutUint64(b[8:], uint64(p.now()))
	return b
}

// recv records a message received at now. It may be called from several goroutines (a
// PushConsumer's workers), once per message.
func (p *probe) recv(b []byte, now time.Duration) {
	if len(b) < 16 {
		return
	}
	i := int(binary.LittleEndian.Uint64(b))
	if k := i - p.warmup; k >= 0 && k < len(p.lats) {
		p.lats[k] = now - time.Duration(binary.LittleEndian.Uint64(b[8:]))
	}
	if p.got.Add(1) == int64(p.total()) {
		close(p.done)
	}
}

// run paces the messages through send at j.Rate, waits for the consumer to receive them all
// and summarises.
func (p *probe) run(j job, send func(b []byte) error) (result, error) {
	var res result
	sp, err := begin(j.Profile)
	if err != nil {
		return res, err
	}
	calls := make([]time.Duration, p.total())
	lags, err := pacer(p.total(), j.Rate, func(i int) error {
		b := p.body(i)
		t := time.Now()
		err := send(b)
		calls[i] = time.Since(t)
		return err
	})
	if err == nil {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			err = fmt.Errorf("received %d of %d messages after 30 s", p.got.Load(), p.total())
		}
	}
	d := sp.end()
	res.Msgs, res.Seconds = p.got.Load(), d.Seconds()
	if err != nil {
		return res, err
	}
	res.Lat = summarize(p.lats)
	res.Pace = summarize(lags[p.warmup:])
	res.Call = summarize(calls[p.warmup:])
	late := 0
	for _, l := range lags[p.warmup:] {
		if l > 2*time.Millisecond {
			late++
		}
	}
	res.Note = fmt.Sprintf("%d of %d sends started over 2 ms behind schedule; achieved %.0f msgs/s", late, len(lags)-p.warmup, float64(p.total())/d.Seconds())
	return res, nil
}
