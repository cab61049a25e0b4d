package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/store"
)

// holdKey names the hold queue of one consume queue (RocketMQ's "topic@queueId").
type holdKey struct {
	topic string
	queue int32
}

// waiter is one parked pull. It is in its hold queue while idx >= 0; whoever takes it out
// (an arrival, the sweep, Close, or the pull itself on timeout or ctx end) sets idx to -1,
// under holdService.mu. The capacity-1 ch is sent to without blocking, so a wake-up never
// waits for the pull to read it.
type waiter struct {
	key    holdKey
	offset int64        // the pull's offset: any message at or after it may answer it
	filter store.Filter // nil matches every message
	ch     chan struct{}
	idx    int         // position in h.m[key], -1 once removed
	timer  *time.Timer // the pull's timeout, kept with a reused waiter (holdService.get)
	// fn, for a pull parked by PullViewsOrPark (holdService.getAsync), is called instead of
	// a send on ch by whoever takes the waiter out (fire), once. Its timeout is atimer,
	// made once with the waiter; stopCtx ends its ctx's AfterFunc.
	fn      func()
	atimer  *time.Timer
	ctx     context.Context // park refuses the waiter once it ended (parkCancelled)
	stopCtx func() bool
	h       *holdService
}

// getAsync returns a waiter for PullViewsOrPark, its timer stopped: a reused one, or a new
// one, whose timer takes it out of its hold queue and fires it.
func (h *holdService) getAsync(key holdKey, offset int64, filter store.Filter, fn func()) *waiter {
	w, ok := h.afree.Get().(*waiter)
	if !ok {
		w = &waiter{idx: -1, h: h}
		w.atimer = time.AfterFunc(time.Hour, w.timedOut)
		w.atimer.Stop()
	}
	w.key, w.offset, w.filter, w.fn = key, offset, filter, fn
	return w
}

// timedOut is an async waiter's timer function, and its ctx's AfterFunc.
func (w *waiter) timedOut() {
	if w.h.remove(w) {
		w.fire()
	}
}

// fire ends an async waiter that was taken out of its hold queue: its timer and ctx watch
// stop, it is kept for reuse unless one of them already started (it then finds nothing to
// take out, as the waiter is not in a hold queue, and the waiter is left to the collector),
// and its pull is handed on (fn).
func (w *waiter) fire() {
	fn := w.fn
	w.release()
	fn()
}

// release stops an async waiter that is out of its hold queue (or was never put in one)
// and keeps it for getAsync if nothing of its can still run.
func (w *waiter) release() {
	reusable := w.atimer.Stop()
	if w.stopCtx != nil && !w.stopCtx() {
		reusable = false
	}
	w.ctx, w.stopCtx, w.fn, w.filter, w.key = nil, nil, nil, nil, holdKey{}
	if reusable {
		w.h.afree.Put(w)
	}
}

func newWaiter(key holdKey, offset int64, filter store.Filter) *waiter {
	return &waiter{key: key, offset: offset, filter: filter, ch: make(chan struct{}, 1), idx: -1}
}

// holdService holds pulls that found nothing until a message they want arrives (RocketMQ's
// PullRequestHoldService). Its goroutine, run, is the periodic sweep; it exits when
// the broker closes, after waking every parked pull.
//
// Lock order: mu is taken before the consume queues' locks (park and sweep read queue max
// offsets under mu); the store calls arrive holding only its dispatch token, which nobody
// holding mu waits for (LOCKS.md).
type holdService struct {
	b      *Broker
	mu     sync.Mutex // guards m and closed, and changes to n
	m      map[holdKey][]*waiter
	closed bool // Close woke everyone: no more parking
	// n counts the parked waiters in m, and a pull about to park: park adds it before it
	// reads the queue's end, and the store moves a queue's end before it announces an
	// arrival, so an arrival that reads n == 0 comes after every parked pull read the end
	// it moved (sync/atomic is sequentially consistent), and may skip mu.
	n atomic.Int64
	// free keeps waiters whose pull returned, with their channel and timer, for the next
	// parked pulls: a pull parks without allocating. Per broker, so that a waiter never
	// leaves the (test) bubble its broker lives in.
	free sync.Pool
	// afree keeps the waiters of PullViewsOrPark (getAsync), with their timers.
	afree sync.Pool
	// parkHook, set only by a test before any pull, runs in park between counting the
	// waiter and reading the queue's end, where an arrival must not slip through: the one
	// place TestHoldParkRacesArrival needs to stop a pull, which no scheduler of
	// goroutines (testing/synctest included) can pick out.
	parkHook func()
}

// get returns a waiter for a pull parked on key at offset, with its timer stopped: a
// reused one, or a new one.
func (h *holdService) get(key holdKey, offset int64, filter store.Filter) *waiter {
	if w, ok := h.free.Get().(*waiter); ok {
		w.key, w.offset, w.filter = key, offset, filter
		return w
	}
	w := newWaiter(key, offset, filter)
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	return w
}

// put keeps w, out of its hold queue and its pull returned, for get.
func (h *holdService) put(w *waiter) {
	w.timer.Stop()
	select {
	case <-w.ch: // a wake-up that came with the timeout or ctx's end
	default:
	}
	w.key, w.filter, w.idx = holdKey{}, nil, -1
	h.free.Put(w)
}

// newHoldService is called before the store opens: b.st may be used only from run, park
// and sweep.
func newHoldService(b *Broker) *holdService {
	return &holdService{b: b, m: map[holdKey][]*waiter{}}
}

// parkResult says what park did.
type parkResult int

const (
	parked        parkResult = iota // w waits in its hold queue
	parkMoved                       // the queue grew past w.offset already: read again now
	parkRefused                     // the broker is closing
	parkCancelled                   // w's ctx ended (PullViewsOrPark's waiters)
)

// park puts w in its hold queue unless the queue already holds a message at or after
// w.offset. The check and the insert happen under mu, and the store moves a queue's max
// offset before it announces the arrival (which takes mu, or finds n zero before park
// counted w; see n), so no arrival slips between them.
func (h *holdService) park(w *waiter) parkResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return parkRefused
	}
	// An async waiter's ctx that ended before it was parked: its AfterFunc found nothing
	// to take out.
	if w.ctx != nil && w.ctx.Err() != nil {
		return parkCancelled
	}
	h.n.Add(1)
	if h.parkHook != nil {
		h.parkHook()
	}
	if h.b.st.MaxOffset(w.key.topic, w.key.queue) > w.offset {
		h.n.Add(-1)
		return parkMoved
	}
	h.insertLocked(w)
	return parked
}

// insertLocked puts w at the end of its hold queue; n must count it already.
func (h *holdService) insertLocked(w *waiter) {
	ws := h.m[w.key]
	w.idx = len(ws)
	h.m[w.key] = append(ws, w)
}

// remove takes w out of its hold queue if it is still there (it timed out or its ctx
// ended). It reports whether it did; false means w was woken.
func (h *holdService) remove(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.idx < 0 {
		return false
	}
	ws := h.m[w.key]
	last := len(ws) - 1
	if w.idx != last {
		ws[w.idx] = ws[last]
		ws[w.idx].idx = w.idx
	}
	ws[last] = nil
	if last == 0 {
		delete(h.m, w.key)
	} else {
		h.m[w.key] = ws[:last]
	}
	w.idx = -1
	h.n.Add(-1)
	return true
}

// wakeLocked wakes and removes the waiters of key that wake says to, keeping the rest in
// order.
func (h *holdService) wakeLocked(key holdKey, ws []*waiter, wake func(*waiter) bool) {
	keep := ws[:0]
	for _, w := range ws {
		if !wake(w) {
			w.idx = len(keep)
			keep = append(keep, w)
			continue
		}
		w.idx = -1
		if w.fn != nil {
			w.fire()
			continue
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	h.n.Add(-int64(len(ws) - len(keep)))
	clear(ws[len(keep):])
	if len(keep) == 0 {
		delete(h.m, key)
	} else {
		h.m[key] = keep
	}
}

// arrive is called by the store's dispatch for every message: it wakes the pulls
// parked on the message's queue at or below its offset whose filter passes its tag hash (the
// exact tag is checked when they read). It never blocks; with no pull parked anywhere it
// costs one atomic load, with none parked on the queue one map lookup under mu.
//
// With short polling (Options.ShortPolling) arrivals wake nobody: parked pulls wait for the
// sweep, every ShortPollingWait, as RocketMQ's broker with long polling off.
func (h *holdService) arrive(a store.Arrival) {
	if h.n.Load() == 0 || h.b.opts.ShortPolling {
		return
	}
	key := holdKey{a.Topic, a.QueueID}
	h.mu.Lock()
	if ws := h.m[key]; len(ws) > 0 {
		h.wakeLocked(key, ws, func(w *waiter) bool {
			return w.offset <= a.Offset && (w.filter == nil || w.filter.MatchHash(a.TagHash))
		})
	}
	h.mu.Unlock()
}

// sweep wakes every parked pull whose queue has grown past its offset, whatever the tag
// (RocketMQ's checkHoldRequest): a safety net for a missed arrival.
func (h *holdService) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, ws := range h.m {
		maxOff := h.b.st.MaxOffset(key.topic, key.queue)
		h.wakeLocked(key, ws, func(w *waiter) bool { return w.offset < maxOff })
	}
}

// closeAll wakes every parked pull and refuses new ones.
func (h *holdService) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for key, ws := range h.m {
		h.wakeLocked(key, ws, func(*waiter) bool { return true })
	}
}

// parked returns how many pulls are parked.
func (h *holdService) parked() int {
	h.mu.Lock() // n counts a pull in the middle of park too
	defer h.mu.Unlock()
	return int(h.n.Load())
}

func (h *holdService) interval() time.Duration {
	if h.b.opts.ShortPolling {
		return h.b.opts.ShortPollingWait
	}
	return h.b.opts.HoldCheckInterval
}

// run sweeps the parked pulls every HoldCheckInterval (ShortPollingWait with short polling)
// until the broker closes; then it wakes them all and returns.
func (h *holdService) run() {
	defer h.b.wg.Done()
	for {
		t := time.NewTimer(h.interval())
		select {
		case <-h.b.done:
			t.Stop()
			h.closeAll()
			return
		case <-t.C:
			h.sweep()
		}
	}
}
