package uplink

import (
	"context"
	"time"
)

// State is a rule's link state.
type State int

const (
	// Idle: the rule has not reached its upstream, and has nothing to send.
	Idle State = iota
	// Connected: the upstream is reached and every message was forwarded.
	Connected
	// Draining: a backlog is being sent.
	Draining
	// BackingOff: the last send or dial failed; the rule waits before trying again.
	BackingOff
)

// String returns "idle", "connected", "draining" or "backing_off".
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Connected:
		return "connected"
	case Draining:
		return "draining"
	case BackingOff:
		return "backing_off"
	}
	return "State(?)"
}

// Stats is a snapshot of every rule.
type Stats struct {
	Up   []RuleStats
	Down []DownStats
}

// DownStats is a down rule's state, lag and totals since Start.
type DownStats struct {
	Name     string
	Upstream string
	State    State
	// Queues is the number of upstream queues mirrored: those the group's allocation gives
	// the rule now.
	Queues int
	// Lag is the messages upstream not yet stored locally, as of each queue's last pull.
	Lag int64
	// Received counts the messages stored locally.
	Received int64
	// Failures counts failed dials, pulls and local stores.
	Failures    int64
	LastError   string
	LastErrorAt time.Time
}

// RuleStats is an up rule's state, backlog and totals since Start.
type RuleStats struct {
	Name     string
	Upstream string // the upstream's addresses
	Priority int
	State    State
	// Queues is the number of local queues forwarded.
	Queues int
	// Backlog is the number of messages stored and not yet acknowledged upstream.
	Backlog int64
	// BacklogBytes is the commit-log bytes from the oldest message not yet forwarded to
	// the log's end: an upper bound of the backlog's size (other topics' messages stored
	// meanwhile count too).
	BacklogBytes int64
	// OldestAge is how long ago the oldest message not yet forwarded was stored (0 with no
	// backlog, or before the forwarder first read it).
	OldestAge time.Duration
	// Forwarded and ForwardedBytes count the messages (and body bytes) the upstream
	// acknowledged; Batches the acknowledged sends.
	Forwarded, ForwardedBytes, Batches int64
	// Failures counts failed dials, sends and local reads.
	Failures int64
	// Resent counts the messages of every attempt that repeated one that failed: an upper
	// bound of the duplicates upstream (a failed attempt may have been stored before its
	// answer was lost).
	Resent int64
	// Lost counts messages retention deleted before they were forwarded (DropOldest), and
	// those whose records were found gone (lost in a crash, or damaged) and skipped.
	Lost int64
	// Rejected counts messages the upstream refused as too large, skipped.
	Rejected int64
	// LastError is the last failure, and LastErrorAt when it happened.
	LastError   string
	LastErrorAt time.Time
}

// Stats returns the state, backlog and totals of every rule, in the order of the Options.
func (u *Uplink) Stats() Stats {
	var s Stats
	now := u.now()
	end := u.b.WritePos()
	for _, r := range u.rules {
		rs := RuleStats{Name: r.cfg.Name, Upstream: r.cfg.Upstream.Addrs, Priority: r.cfg.Priority,
			Forwarded: r.c.forwarded.Load(), ForwardedBytes: r.c.forwardedBytes.Load(), Batches: r.c.batches.Load(),
			Failures: r.c.failures.Load(), Resent: r.c.resent.Load(), Lost: r.c.lost.Load(), Rejected: r.c.rejected.Load()}
		r.mu.Lock()
		rs.LastError, rs.LastErrorAt = r.lastEr, r.lastAt
		connected := r.prod != nil
		fwds := make([]*queueFwd, 0, len(r.queues))
		for _, f := range r.queues {
			fwds = append(fwds, f)
		}
		r.mu.Unlock()
		rs.Queues = len(fwds)
		backingOff := false
		var oldest int64
		for _, f := range fwds {
			top, err := u.b.MaxOffset(context.Background(), f.queue)
			if err != nil {
				continue
			}
			n := top - f.cursor.Load()
			if n <= 0 {
				continue
			}
			rs.Backlog += n
			rs.BacklogBytes = max(rs.BacklogBytes, end-f.floor.Load())
			if o := f.oldest.Load(); o > 0 && (oldest == 0 || o < oldest) {
				oldest = o
			}
			backingOff = backingOff || f.state.Load() == fwdBackingOff
		}
		if oldest > 0 {
			rs.OldestAge = max(0, now.Sub(time.UnixMilli(oldest)))
		}
		switch {
		case backingOff:
			rs.State = BackingOff
		case rs.Backlog > 0 && connected:
			rs.State = Draining
		case connected:
			rs.State = Connected
		}
		s.Up = append(s.Up, rs)
	}
	for _, d := range u.downs {
		ds := DownStats{Name: d.cfg.Name, Upstream: d.cfg.Upstream.Addrs, Received: d.received.Load(), Failures: d.failures.Load()}
		d.mu.Lock()
		ds.LastError, ds.LastErrorAt = d.lastEr, d.lastAt
		connected := d.client != nil
		qs := make([]*downQueue, 0, len(d.queues))
		for _, q := range d.queues {
			qs = append(qs, q)
		}
		d.mu.Unlock()
		ds.Queues = len(qs)
		backingOff := false
		for _, q := range qs {
			if c := q.cursor.Load(); c >= 0 {
				ds.Lag += max(0, q.max.Load()-c)
			}
			backingOff = backingOff || q.state.Load() == fwdBackingOff
		}
		switch {
		case backingOff || !connected && ds.Failures > 0:
			ds.State = BackingOff
		case ds.Lag > 0:
			ds.State = Draining
		case connected:
			ds.State = Connected
		}
		s.Down = append(s.Down, ds)
	}
	return s
}
