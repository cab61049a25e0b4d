package server

import (
	"slices"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/remoting"
)

// pullWorkerIdle is how long a pull worker waits for another pull before it ends. A pull
// worker reads and answers a pull that waited (parking it in the broker, then, once woken,
// reading it again), and holds nothing while the pull waits: the workers are as many as
// pulls are woken at once, reused at any rate of messages, and end when the rate falls.
const pullWorkerIdle = 30 * time.Second

// pullJob is a pull that must wait for messages, or streams: handlePull carries it on.
// While it waits it is parked in the broker (PullViewsOrPark), not in a goroutine; the
// broker's wake hands it back to a pull worker.
type pullJob struct {
	c     *conn
	req   *remoting.Command
	size  int64
	st    pullStream // a streamed pull's state after its first answer
	woken bool       // the broker woke it: read it again without waiting
	wake  func()     // j.woke, bound once: PullViewsOrPark's wake
}

// newPullJob returns the job of the pull req of size bytes, with its stream state st.
func newPullJob(c *conn, req *remoting.Command, size int64, st pullStream) *pullJob {
	j := &pullJob{c: c, req: req, size: size, st: st}
	j.wake = j.woke
	return j
}

// woke hands j, which the broker woke, to its connection's reader if that holds frames it
// read (it answers j before it writes: runWoken), else to a pull worker. It runs on the
// goroutine of what woke it (the store's dispatch, among others): it never blocks.
func (j *pullJob) woke() {
	j.woken = true
	c := j.c
	c.jmu.Lock()
	if c.collect {
		c.woken = append(c.woken, j)
		c.jmu.Unlock()
		return
	}
	c.jmu.Unlock()
	c.s.parkPull(j)
}

// pullPool holds the idle pull workers, the most recently idle last: a pull goes to the
// worker that went idle last, so that a burst's extra workers stay idle and end after
// pullWorkerIdle. Handed out oldest first, every idle worker would get a pull before its
// idle time ran out at any steady rate above one per pullWorkerIdle each (when a parked
// pull held its worker, a burst's 11,000 workers stayed at 10,000 messages a second over
// 1,000 connections, 100 MiB of stacks).
type pullPool struct {
	mu   sync.Mutex
	idle []*pullWorkerSlot
}

// pullWorkerSlot is how an idle worker receives its next pull: capacity 1, and a worker is
// taken off the idle list once, so that handing it a pull never blocks.
type pullWorkerSlot struct{ jobs chan *pullJob }

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
// one. A worker's goroutine, its stack grown by the pull's path, stays for the next pull
// woken, which then costs no goroutine of its own (creating one and growing its stack was
// an eighth of the server's CPU at 10,000 messages a second, each message answering a
// parked pull). It never blocks.
func (s *Server) parkPull(j *pullJob) {
	if w := s.pullPool.take(); w != nil {
		w.jobs <- j
		return
	}
	s.stats.pullWorkersGo.Add(1)
	s.pullWorkers.Add(1)
	go s.pullWorker(j)
}

// pullWorker runs j, then the pulls handed to it, until it has waited pullWorkerIdle for
// one or the server stops parking pulls (Shutdown, Close).
func (s *Server) pullWorker(j *pullJob) {
	defer s.pullWorkers.Done()
	defer s.stats.pullWorkersEnd.Add(1)
	w := &pullWorkerSlot{jobs: make(chan *pullJob, 1)}
	idle := time.NewTimer(pullWorkerIdle)
	defer idle.Stop()
	for {
		j.c.handlePull(j)
		j = nil // hold no request while idle
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
