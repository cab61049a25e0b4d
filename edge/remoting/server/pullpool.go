package server

import (
	"slices"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/remoting"
)

// pullWorkerIdle is how long a pull worker waits for another parked pull before it ends.
// Long polling keeps about one pull parked per consumer and queue, each answered and
// parked again as messages come: the workers that carry them are reused at any rate of
// messages, and end when consumers leave.
const pullWorkerIdle = 30 * time.Second

// pullJob is a pull that must wait for messages (handlePull's arguments).
type pullJob struct {
	c    *conn
	req  *remoting.Command
	size int64
	st   pullStream // a streamed pull's state after its first answer
}

// pullPool holds the idle pull workers, the most recently idle last: a parked pull goes to
// the worker that went idle last, so that a burst's extra workers stay idle and end after
// pullWorkerIdle. Handed out oldest first, every idle worker would get a pull before its
// idle time ran out at any steady rate above one per pullWorkerIdle each: at 10,000
// messages a second over 1,000 connections a burst's 11,000 workers stayed, 100 MiB of
// stacks.
type pullPool struct {
	mu   sync.Mutex
	idle []*pullWorkerSlot
}

// pullWorkerSlot is how an idle worker receives its next pull: capacity 1, and a worker is
// taken off the idle list once, so that handing it a pull never blocks.
type pullWorkerSlot struct{ jobs chan pullJob }

// take removes and returns the worker that went idle last, or nil.
func (p *pullPool) take() *pullWorkerSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	w := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return w
}

// put adds w to the idle list.
func (p *pullPool) put(w *pullWorkerSlot) {
	p.mu.Lock()
	p.idle = append(p.idle, w)
	p.mu.Unlock()
}

// leave removes w from the idle list and reports whether it was there; false means that
// parkPull took it, and its pull is on the way.
func (p *pullPool) leave(w *pullWorkerSlot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, w) // the longest idle are first: those are the ones that end
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	return true
}

// parkPull runs the pull j in a pull worker: the idle one that went idle last, or a new
// one. A worker's goroutine, its stack grown by the pull's path, stays for the next parked
// pull, which then costs no goroutine of its own (creating one and growing its stack was an
// eighth of the server's CPU at 10,000 messages a second, each message answering a parked
// pull).
func (s *Server) parkPull(j pullJob) {
	if w := s.pullPool.take(); w != nil {
		w.jobs <- j
		return
	}
	s.stats.pullWorkersGo.Add(1)
	s.pullWorkers.Add(1)
	go s.pullWorker(j)
}

// pullWorker runs j, then the parked pulls handed to it, until it has waited
// pullWorkerIdle for one or the server stops parking pulls (Shutdown, Close).
func (s *Server) pullWorker(j pullJob) {
	defer s.pullWorkers.Done()
	defer s.stats.pullWorkersEnd.Add(1)
	w := &pullWorkerSlot{jobs: make(chan pullJob, 1)}
	idle := time.NewTimer(pullWorkerIdle)
	defer idle.Stop()
	for {
		j.c.handlePull(j.req, j.size, &j.st)
		j = pullJob{} // hold no request while idle
		s.pullPool.put(w)
		idle.Reset(pullWorkerIdle)
		select {
		case j = <-w.jobs:
			continue
		case <-idle.C:
		case <-s.pulls.Done():
		}
		if s.pullPool.leave(w) {
			return
		}
		j = <-w.jobs // taken as its time ran out: run the pull it was given
	}
}
