package netfault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// FaultKind names a fault.
type FaultKind int

// The faults a Schedule injects.
const (
	FaultCut       FaultKind = iota + 1 // Cut: every open connection closed
	FaultStall                          // Stall: no forwarding for Fault.Duration
	FaultThrottle                       // Throttle: Fault.Rate bytes/s until the next fault
	FaultDropReply                      // DropNextReply armed
)

func (k FaultKind) String() string {
	switch k {
	case FaultCut:
		return "cut"
	case FaultStall:
		return "stall"
	case FaultThrottle:
		return "throttle"
	case FaultDropReply:
		return "drop-reply"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is one fault a Schedule injected.
type Fault struct {
	At       time.Duration // since StartFaults
	Kind     FaultKind
	Duration time.Duration // of a stall
	Rate     int           // of a throttle, bytes per second
}

func (f Fault) String() string {
	switch f.Kind {
	case FaultStall:
		return fmt.Sprintf("%v %v %v", f.At.Round(time.Millisecond), f.Kind, f.Duration.Round(time.Millisecond))
	case FaultThrottle:
		return fmt.Sprintf("%v %v %dB/s", f.At.Round(time.Millisecond), f.Kind, f.Rate)
	}
	return fmt.Sprintf("%v %v", f.At.Round(time.Millisecond), f.Kind)
}

// Schedule describes random faults. The same Seed and fields give the same sequence of
// faults at the same offsets from StartFaults (what the link does at each moment still
// depends on the traffic). A zero field takes its default.
type Schedule struct {
	// Seed seeds the random choices; print it in a test so that a failure can be replayed.
	Seed uint64
	// MinGap and MaxGap bound the time between two faults, drawn uniformly. Defaults
	// 50 ms and 500 ms.
	MinGap, MaxGap time.Duration
	// Cut, Stall, Throttle and DropReply weigh how often each fault is chosen. All zero:
	// equal weights. A fault of weight 0 is never chosen unless all are 0.
	Cut, Stall, Throttle, DropReply int
	// MaxStall bounds a stall, drawn uniformly from (0, MaxStall]. Default 1 s.
	MaxStall time.Duration
	// ThrottleRate is the rate of a throttle, in bytes per second per direction; a
	// throttle lasts until the next fault. Default 64 KiB/s.
	ThrottleRate int
}

func (s Schedule) withDefaults() (Schedule, error) {
	if s.MinGap <= 0 {
		s.MinGap = 50 * time.Millisecond
	}
	if s.MaxGap <= 0 {
		s.MaxGap = max(500*time.Millisecond, s.MinGap)
	}
	if s.MaxGap < s.MinGap {
		return s, fmt.Errorf("netfault: schedule: MaxGap %v below MinGap %v", s.MaxGap, s.MinGap)
	}
	if s.Cut < 0 || s.Stall < 0 || s.Throttle < 0 || s.DropReply < 0 {
		return s, errors.New("netfault: schedule: negative weight")
	}
	if s.Cut+s.Stall+s.Throttle+s.DropReply == 0 {
		s.Cut, s.Stall, s.Throttle, s.DropReply = 1, 1, 1, 1
	}
	if s.MaxStall <= 0 {
		s.MaxStall = time.Second
	}
	if s.ThrottleRate <= 0 {
		s.ThrottleRate = 64 << 10
	}
	return s, nil
}

// ErrFaultsRunning is returned by StartFaults while a schedule runs.
var ErrFaultsRunning = errors.New("netfault: faults already running")

// StartFaults starts injecting faults from s until StopFaults or Close.
func (p *Proxy) StartFaults(s Schedule) error {
	s, err := s.withDefaults()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.schedStop != nil {
		return ErrFaultsRunning
	}
	stop := make(chan struct{})
	p.schedStop = stop
	p.faults = nil
	p.wg.Add(1)
	go p.schedule(s, stop)
	return nil
}

// StopFaults stops the schedule and heals the link: it ends a stall and a throttle. The
// faults injected stay in Faults. Open connections stay open.
func (p *Proxy) StopFaults() {
	p.mu.Lock()
	if p.schedStop != nil {
		close(p.schedStop)
		p.schedStop = nil
	}
	p.stallUntil = time.Time{}
	p.rate = 0
	p.mu.Unlock()
	p.dropArmed.Store(false)
}

// Faults returns the faults the last schedule injected, in order.
func (p *Proxy) Faults() []Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Fault(nil), p.faults...)
}

// schedule injects the faults of s until stop closes.
func (p *Proxy) schedule(s Schedule, stop chan struct{}) {
	defer p.wg.Done()
	r := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	start := time.Now()
	at := time.Duration(0)
	total := s.Cut + s.Stall + s.Throttle + s.DropReply
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		at += s.MinGap + time.Duration(r.Int64N(int64(s.MaxGap-s.MinGap)+1))
		t.Reset(time.Until(start.Add(at)))
		select {
		case <-stop:
			return
		case <-t.C:
		}
		f := Fault{At: at}
		switch w := r.IntN(total); {
		case w < s.Cut:
			f.Kind = FaultCut
		case w < s.Cut+s.Stall:
			f.Kind = FaultStall
			f.Duration = time.Duration(r.Int64N(int64(s.MaxStall))) + 1
		case w < s.Cut+s.Stall+s.Throttle:
			f.Kind = FaultThrottle
			f.Rate = s.ThrottleRate
		default:
			f.Kind = FaultDropReply
		}
		p.mu.Lock()
		if p.schedStop != stop {
			p.mu.Unlock()
			return
		}
		p.faults = append(p.faults, f)
		if f.Kind != FaultThrottle {
			p.rate = 0 // a throttle lasts until the next fault
		}
		p.mu.Unlock()
		switch f.Kind {
		case FaultCut:
			p.Cut()
		case FaultStall:
			p.Stall(f.Duration)
		case FaultThrottle:
			p.Throttle(f.Rate)
		case FaultDropReply:
			p.DropNextReply()
		}
	}
}
