package edge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/store"
)

// sendPipe lets SendAsync's callers go on while their messages are appended. A send that
// waits for no fsync is appended on its caller's goroutine and acknowledged before SendAsync
// returns, unless sends come fast (less than pipeGap apart) or the pipe still holds earlier
// ones: then the caller queues it and a goroutine of the broker appends what is queued in
// batches, one store append each, and calls their done functions. Callers that keep many
// sends in flight then prepare the next messages while the last are written, on another
// CPU; a sender at a low rate pays no hand-off.
//
// The queue is first in, first out, and batches are appended in the order they were taken
// from it: a goroutine's sends are stored in the order it made them. A send that does not go
// through the pipe (Send, a batch, a send that waits for an fsync) first appends what the
// pipe holds (settle), for the same reason.
type sendPipe struct {
	b *Broker

	// appendMu is held while a batch taken from pending is appended: batches are appended
	// in the order they were taken.
	appendMu sync.Mutex
	msgs     []*store.Message // the batch's messages, as the store takes them (appendMu)

	mu      sync.Mutex
	pending []*asyncSend // queued, oldest first
	spare   []*asyncSend // an appended batch's array, for pending to reuse
	closed  bool         // the broker is closing: nothing more is queued

	busy   atomic.Bool  // pending holds sends, or a batch is being appended
	queued atomic.Int64 // sends queued, ever
	piped  atomic.Int64 // sends appended from the pipe (or refused by the store), ever
	last   atomic.Int64 // when the last send that waits for no fsync came (pipeClock)
	wake   chan struct{}
}

const (
	// pipeGap: sends that come closer together than this (100,000 a second and more) are
	// handed to the pipe.
	pipeGap = 10 * time.Microsecond
	// pipeMax is how many sends the pipe holds before a caller appends them itself, so that
	// a caller that never waits for its done functions cannot queue without bound.
	pipeMax = 4096
	// pipeBatchBytes bounds a batch's bodies (with 64 bytes a message for the rest).
	pipeBatchBytes = 256 << 10
)

// pipeEpoch is the zero of pipeClock.
var pipeEpoch = time.Now()

// pipeClock reads the monotonic clock, in ns since pipeEpoch.
func pipeClock() int64 { return int64(time.Since(pipeEpoch)) }

func newSendPipe(b *Broker) *sendPipe {
	return &sendPipe{b: b, wake: make(chan struct{}, 1)}
}

// handOff reports whether a send that waits for no fsync, coming now, goes through the pipe:
// when it holds earlier sends (which must be stored first), or when sends come fast.
func (p *sendPipe) handOff() bool {
	if p.busy.Load() {
		return true
	}
	now := pipeClock()
	return now-p.last.Swap(now) < int64(pipeGap)
}

// put queues op, whose done function the pipe calls once it is appended. It returns false,
// queuing nothing, once the broker is closing.
func (p *sendPipe) put(op *asyncSend) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.pending = append(p.pending, op)
	p.queued.Add(1)
	n := len(p.pending)
	wasBusy := p.busy.Swap(true)
	p.mu.Unlock()
	if !wasBusy {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	if n >= pipeMax {
		p.appendOnce() // the caller outruns the appends: it does one itself
	}
	return true
}

// settle appends what the pipe holds (waiting for a batch being appended), so that a send
// made after them that does not go through the pipe is stored after them. Their done
// functions may still be running when it returns.
func (p *sendPipe) settle() {
	if !p.busy.Load() {
		return
	}
	// Batches are appended in the order they were queued: once as many sends as were
	// queued now are appended, these are.
	for target := p.queued.Load(); p.piped.Load() < target; {
		if !p.appendOnce() {
			return
		}
	}
}

// appendSends appends a producer's messages that do not go through the pipe, after what the
// pipe holds (settle), so that a goroutine's sends are stored in the order it made them.
func (b *Broker) appendSends(msgs []*store.Message) error {
	b.pipe.settle()
	return b.st.Append(msgs)
}

// appendSendsAsync is appendSends for the store's AppendAsync.
func (b *Broker) appendSendsAsync(msgs []*store.Message, done func(error)) error {
	b.pipe.settle()
	return b.st.AppendAsync(msgs, done)
}

// batchPrefix returns how many of the oldest sends of pending make a batch: at least one,
// and no more than pipeBatchBytes of bodies after the first.
func batchPrefix(pending []*asyncSend) int {
	n := len(pending[0].s.Body)
	for i := 1; i < len(pending); i++ {
		if n += len(pending[i].s.Body) + 64; n > pipeBatchBytes {
			return i
		}
	}
	return len(pending)
}

// appendOnce appends the sends pending (after the batch being appended, if any), then
// calls their done functions without appendMu (a done function may send again). It reports
// whether there were any; when there were none, the pipe is no longer busy.
func (p *sendPipe) appendOnce() bool {
	p.appendMu.Lock()
	p.mu.Lock()
	batch := p.pending
	if len(batch) == 0 {
		p.busy.Store(false)
		p.mu.Unlock()
		p.appendMu.Unlock()
		return false
	}
	if k := batchPrefix(batch); k < len(batch) {
		// The oldest pipeBatchBytes: the log's prefaulting keeps ahead of appends of this
		// size, and the first done functions run sooner.
		rest := append(p.spare[:0], batch[k:]...)
		clear(batch[k:])
		batch, p.pending, p.spare = batch[:k], rest, nil
	} else {
		p.pending, p.spare = p.spare[:0], nil
	}
	p.mu.Unlock()
	for _, op := range batch {
		p.msgs = append(p.msgs, &op.s)
	}
	var errs []error // each send's, when the batch was refused
	err := p.b.st.Append(p.msgs)
	if err != nil && len(p.msgs) > 1 {
		// The store refused the batch, storing none of it: a message it refuses (its
		// properties over the store's limit) must not fail the others, of other senders
		// maybe. Each is appended on its own, in order.
		errs = make([]error, len(batch))
		for i := range p.msgs {
			errs[i] = appendErr(p.b.st.Append(p.msgs[i : i+1]))
		}
	}
	err = appendErr(err)
	p.piped.Add(int64(len(batch)))
	clear(p.msgs)
	p.msgs = p.msgs[:0]
	if cap(p.msgs) > pipeMax {
		p.msgs = nil // a burst past the bound once does not pin its array
	}
	p.appendMu.Unlock()
	for i, op := range batch {
		if errs != nil {
			err = errs[i]
		}
		op.finish(err)
		batch[i] = nil
	}
	if cap(batch) <= pipeMax {
		p.mu.Lock()
		if p.spare == nil {
			p.spare = batch[:0]
		}
		p.mu.Unlock()
	}
	return true
}

// run appends what is queued until the broker closes; then it refuses more and appends what
// was queued before (the store is closed after it returns).
func (p *sendPipe) run() {
	defer p.b.wg.Done()
	for {
		select {
		case <-p.wake:
			for p.appendOnce() {
			}
		case <-p.b.done:
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
			for p.appendOnce() {
			}
			return
		}
	}
}
