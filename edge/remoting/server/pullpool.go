package server

import (
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
}

// parkPull runs the pull j in a pull worker: an idle one, or a new one. A worker's
// goroutine, its stack grown by the pull's path, stays for the next parked pull, which
// then costs no goroutine of its own (creating one and growing its stack was an eighth of
// the server's CPU at 10,000 messages a second, each message answering a parked pull).
func (s *Server) parkPull(j pullJob) {
	select {
	case s.pullJobs <- j:
	default:
		s.stats.pullWorkersGo.Add(1)
		s.pullWorkers.Add(1)
		go s.pullWorker(j)
	}
}

// pullWorker runs j, then the parked pulls handed to it, until it has waited
// pullWorkerIdle for one or the server stops parking pulls (Shutdown, Close).
func (s *Server) pullWorker(j pullJob) {
	defer s.pullWorkers.Done()
	idle := time.NewTimer(pullWorkerIdle)
	defer idle.Stop()
	for {
		j.c.handlePull(j.req, j.size)
		j = pullJob{} // hold no request while idle
		idle.Reset(pullWorkerIdle)
		select {
		case j = <-s.pullJobs:
		case <-idle.C:
			return
		case <-s.pulls.Done():
			return
		}
	}
}
