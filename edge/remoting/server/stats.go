package server

import (
	"sync"
	"sync/atomic"
)

// Stats counts what the server did since Start.
type Stats struct {
	// Conns is the number of client connections open now, ConnsAccepted the number
	// accepted since Start (connections refused for MaxConns or during shutdown excluded).
	Conns         int
	ConnsAccepted int64
	// Requests counts the requests read, by request code (RocketMQ's RequestCode), refused
	// ones (SYSTEM_BUSY) and one-way ones included; clients' answers to notifications are
	// not requests.
	Requests map[int16]int64
	// Replies counts the replies queued for writing, by response code (remoting.Success,
	// remoting.SystemBusy, ...).
	Replies map[int16]int64
	// StreamsEnded counts the streamed pulls that END_PULL_STREAM ended while they were
	// parked (answered PULL_NOT_FOUND at once): their consumers had dropped them.
	StreamsEnded int64
	// PullsAnsweredInline counts the parked pulls that a send read on their own
	// connection woke, answered by that connection's reader in the write of the send's
	// reply, without a pull worker.
	PullsAnsweredInline int64
	// PullWorkers is the number of pull workers alive now: the goroutines that answer
	// parked pulls woken from elsewhere (another connection's send, a timeout).
	PullWorkers int
}

// serverStats holds the counters behind Stats; each is safe for concurrent use.
type serverStats struct {
	accepted       atomic.Int64
	pullWorkersGo  atomic.Int64 // pull workers started (parkPull)
	pullWorkersEnd atomic.Int64 // pull workers ended
	streamsEnded   atomic.Int64 // Stats.StreamsEnded
	pullsByReader  atomic.Int64 // Stats.PullsAnsweredInline (runWoken)
	requests       codeCounts
	replies        codeCounts
}

// codeCounts counts events by remoting code. A code's counter is made on its first event;
// later events find it without locking.
type codeCounts struct {
	m sync.Map // int16 -> *atomic.Int64
}

func (cc *codeCounts) add(code int16) {
	if v, ok := cc.m.Load(code); ok {
		v.(*atomic.Int64).Add(1)
		return
	}
	v, _ := cc.m.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (cc *codeCounts) snapshot() map[int16]int64 {
	out := map[int16]int64{}
	cc.m.Range(func(k, v any) bool {
		out[k.(int16)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Stats returns the server's counters. It is safe to call at any time, after Shutdown or
// Close too.
func (s *Server) Stats() Stats {
	return Stats{Conns: s.Conns(), ConnsAccepted: s.stats.accepted.Load(),
		Requests: s.stats.requests.snapshot(), Replies: s.stats.replies.snapshot(),
		StreamsEnded: s.stats.streamsEnded.Load(), PullsAnsweredInline: s.stats.pullsByReader.Load(),
		PullWorkers: int(s.stats.pullWorkersGo.Load() - s.stats.pullWorkersEnd.Load())}
}
