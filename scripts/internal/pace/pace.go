// Package pace sleeps until given instants, for the benchmarks' paced senders. At 10,000
// sends a second a sender waits about 100 µs between sends, and time.Sleep cannot wait that
// little in a process with nothing else to do: the runtime's poller then sleeps in epoll
// with a timeout in whole milliseconds, so a 100 µs sleep lasts a millisecond and the
// sender catches up with a burst of ten sends. A Pacer waits on a timerfd through the
// poller instead, on Linux, which wakes it when the timer fires.
package pace

import "time"

// A Pacer waits until instants, one caller at a time.
type Pacer struct {
	t timer // nil: time.Sleep
}

// New returns a Pacer; where the operating system has no timer it can wait on, or one
// cannot be made, it uses time.Sleep.
func New() *Pacer {
	t, err := newTimer()
	if err != nil {
		return &Pacer{}
	}
	return &Pacer{t: t}
}

// Until returns at t or after it, at once when t has passed.
func (p *Pacer) Until(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if p.t == nil || p.t.wait(d) != nil {
		time.Sleep(time.Until(t))
	}
}

// Close releases the Pacer's timer.
func (p *Pacer) Close() error {
	if p.t == nil {
		return nil
	}
	return p.t.close()
}

// timer waits for a duration.
type timer interface {
	wait(d time.Duration) error
	close() error
}
