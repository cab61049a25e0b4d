package consumer

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// poolQueueSize bounds the tasks waiting for a worker; past it the pool grows to its maximum,
// then refuses (and the submitter retries after SubmitRetryDelay).
const poolQueueSize = 4096

// workerPool runs tasks on min..max goroutines fed by a bounded FIFO queue, as Java's
// ThreadPoolExecutor with a bounded queue: workers above min start when the queue is full and
// end when it is empty. Every worker ends when done closes.
//
// A task stays in the queue until a running worker takes it: a submit wakes at most one
// parked worker (and only when no wake-up is in flight), and a worker that takes a task
// while more wait wakes the next. A channel would hand each task to a parked worker that
// may not run for a while (a goroutine is preempted only every 10 ms), while the running
// workers go on with later tasks, so that one queue's lowest offsets lag and its span grows;
// and it would cost a wake-up per task.
type workerPool struct {
	mu     sync.Mutex
	ring   [poolQueueSize]poolTask // the queue: size tasks from head, wrapping
	head   int
	size   int
	n      int           // workers
	idle   int           // workers parked, not counting the one woken
	waking bool          // a token is in wake or a woken worker has not looked at the queue yet
	wake   chan struct{} // capacity 1: wakes one parked worker
	min    int
	max    int
	wg     *sync.WaitGroup
	done   <-chan struct{}
}

// poolTask is a task of a workerPool: a funcTask, or a *chunk, which the pool runs without
// a closure of its own.
type poolTask interface{ run() }

// funcTask is a function as a pool task.
type funcTask func()

func (f funcTask) run() { f() }

func newWorkerPool(minN, maxN int, wg *sync.WaitGroup, done <-chan struct{}) *workerPool {
	p := &workerPool{min: minN, max: maxN, wg: wg, done: done, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	for range minN {
		p.startLocked(nil)
	}
	p.mu.Unlock()
	return p
}

func (p *workerPool) startLocked(first poolTask) {
	p.n++
	p.wg.Add(1)
	go p.work(first, p.n > p.min)
}

// submit queues f; false when the pool is full (or stopped).
func (p *workerPool) submit(f poolTask) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	p.mu.Lock()
	if p.size == len(p.ring) {
		defer p.mu.Unlock()
		if p.n >= p.max {
			return false
		}
		p.startLocked(f)
		return true
	}
	p.ring[(p.head+p.size)%len(p.ring)] = f
	p.size++
	wake := p.wakeLocked()
	p.mu.Unlock()
	if wake {
		p.wake <- struct{}{} // never blocks: one token at a time
	}
	return true
}

// wakeLocked reports whether the caller must send a wake token: tasks wait, a worker is
// parked and no wake-up is in flight.
func (p *workerPool) wakeLocked() bool {
	if p.size == 0 || p.idle == 0 || p.waking {
		return false
	}
	p.idle--
	p.waking = true
	return true
}

// takeLocked returns the next task, if any, and whether the caller must wake another worker.
func (p *workerPool) takeLocked() (poolTask, bool) {
	if p.size == 0 {
		return nil, false
	}
	f := p.ring[p.head]
	p.ring[p.head] = nil
	p.head = (p.head + 1) % len(p.ring)
	p.size--
	return f, p.wakeLocked()
}

func (p *workerPool) work(first poolTask, extra bool) {
	defer p.wg.Done()
	if first != nil {
		first.run()
	}
	for {
		select {
		case <-p.done:
			return
		default:
		}
		p.mu.Lock()
		f, wake := p.takeLocked()
		if f == nil {
			if extra {
				p.n--
				p.mu.Unlock()
				return
			}
			p.idle++
			p.mu.Unlock()
			select {
			case <-p.wake:
				p.mu.Lock()
				p.waking = false
				p.mu.Unlock()
				continue
			case <-p.done:
				return
			}
		}
		p.mu.Unlock()
		if wake {
			p.wake <- struct{}{}
		}
		f.run()
	}
}

// submitConcurrently queues one batch; a refused batch is retried after SubmitRetryDelay.
func (pc *PushConsumer) submitConcurrently(qs *queueState, msgs []*Message) {
	if !pc.pool.submit(funcTask(func() { pc.consumeConcurrently(qs, msgs) })) {
		pc.after(pc.opts.SubmitRetryDelay, func() { pc.submitConcurrently(qs, msgs) })
	}
}

// submitChunks queues the pulled msgs as listener batches of ConsumeMessageBatchMaxSize,
// several batches to a pool task (a chunk): a task per batch costs a closure, a channel
// hand-off and often a goroutine wake-up per message with the default batch size of 1.
//
// While listener calls are slow (their recent mean at least slowCall, and at first), the
// batches are split over up to ConsumeGoroutinesMin tasks, so that the pool's standing
// workers share one pull's batches as they would one batch per task: a slow listener takes
// as many rounds of batches as with a task per batch. While they are fast, a pull's batches
// go to as many tasks as the process has processors (fastTasks): each task a worker takes
// while more wait wakes another worker, which costs more than the calls it would share. A
// call that turns slow in a large task brings in helpers (consumeChunk). A refused task is
// retried after SubmitRetryDelay.
func (pc *PushConsumer) submitChunks(qs *queueState, msgs []*Message) {
	n := pc.opts.ConsumeMessageBatchMaxSize
	batches := (len(msgs) + n - 1) / n
	tasks := pc.tasksFor(batches)
	per := (batches + tasks - 1) / max(tasks, 1) // batches per task
	step := max(per, 1) * n
	cs := make([]chunk, (len(msgs)+step-1)/step) // one allocation for the pull's tasks
	ccs := make([]ConcurrentlyContext, batches)  // and one for its batches' contexts
	for i := 0; i < len(msgs); i += step {
		c := &cs[i/step]
		c.pc, c.qs, c.msgs, c.n = pc, qs, msgs[i:min(i+step, len(msgs))], n
		c.ccs = ccs[i/n : (i+len(c.msgs)+n-1)/n]
		if !pc.pool.submit(c) {
			pc.after(pc.opts.SubmitRetryDelay, func() { pc.submitChunks(qs, c.msgs) })
		}
	}
}

// tasksFor returns how many pool tasks a pull's batches go to (submitChunks).
func (pc *PushConsumer) tasksFor(batches int) int {
	tasks := min(batches, pc.opts.ConsumeGoroutinesMin)
	if pc.callNs.Load() < int64(slowCall) {
		tasks = min(tasks, pc.fastTasks)
	}
	return tasks
}

// slowCall is the listener call time from which a pull's batches are shared among the
// pool's workers from the start, and from which a call in a large task brings in helpers:
// a worker's wake-up costs a few microseconds.
const slowCall = 50 * time.Microsecond

// noteCalls adds calls listener calls that took d in all to the consumer's moving mean of a
// call's time (callNs), which submitChunks reads. Updates that race may be lost: it is an
// estimate.
func (pc *PushConsumer) noteCalls(calls int64, d time.Duration) {
	if calls <= 0 {
		return
	}
	old := pc.callNs.Load()
	pc.callNs.Store(old + (int64(d)/calls-old)/4)
}

// chunk is one pool task of concurrent consumption: msgs, consumed as listener batches of n
// messages one after the other. A batch is claimed before it starts, so that when a call
// hangs, the consume-timeout check can take the batches queued behind it away from the task
// (rest) and submit them anew: the hung worker, when it returns, finds them claimed. For
// the same reason workers can share a chunk: helpers (consumeChunk) claim its batches too.
type chunk struct {
	pc   *PushConsumer
	qs   *queueState
	msgs []*Message
	n    int
	next atomic.Int32 // index of the next batch to claim; past the last once all are claimed
	// ccs are the contexts of its batches, by index: part of one array for the pull.
	ccs    []ConcurrentlyContext
	helped atomic.Bool // a slow call brought in helpers
}

// run consumes c: a chunk is its own pool task, and its helpers' (the same chunk, queued
// again).
func (c *chunk) run() { c.pc.consumeChunk(c) }

// unclaimed returns how many batches of c are not claimed yet (ccs has one per batch).
func (c *chunk) unclaimed() int {
	return max(len(c.ccs)-int(c.next.Load()), 0)
}

// claim returns the next batch of c and its index; no messages once every batch is claimed.
func (c *chunk) claim() ([]*Message, int) {
	k := int(c.next.Add(1) - 1)
	i := k * c.n
	if i >= len(c.msgs) {
		return nil, k
	}
	return c.msgs[i:min(i+c.n, len(c.msgs))], k
}

// rest claims every batch of c not yet claimed and returns their messages (none if there is
// no such batch).
func (c *chunk) rest() []*Message {
	for {
		k := c.next.Load()
		i := int(k) * c.n
		if i >= len(c.msgs) {
			return nil
		}
		if c.next.CompareAndSwap(k, int32(len(c.msgs))) { // len(msgs) >= the batch count
			return c.msgs[i:]
		}
	}
}

// settleInterval is how often a run of listener calls on one queue (a chunk of concurrent
// batches, an orderly run) records its stats and its queue's offset; a run also does at its
// end. A listener call that takes this long is settled right after it, as every call was
// before; fast calls share one stats lock and one offset-store update.
const settleInterval = time.Millisecond

// consumeChunk consumes c's batches, one after the other, claiming each before it starts.
// It records their stats and moves the queue's offset every settleInterval and at the end:
// the offset is the largest of those the batches' RemoveMessages returned, as their
// increase-only updates would have left it.
//
// A call that follows a fully acknowledged one is timed from that call's end (without hooks):
// ConsumeRT then includes the bookkeeping between the two, well under a microsecond, and
// each call reads the clock once rather than twice.
//
// The first call of c that takes slowCall or longer while more of its batches wait queues c
// again, once for each waiting batch (up to ConsumeGoroutinesMin-1): idle workers take the
// copies and claim the batches, as they would have taken them as tasks of their own.
func (pc *PushConsumer) consumeChunk(c *chunk) {
	qs := c.qs
	var t consumeTally
	commit, settled := int64(-1), monoNow()
	next := settled
	for {
		msgs, k := c.claim()
		if len(msgs) == 0 {
			break
		}
		rt := t.rt
		off, end := pc.consumeBatch(qs, msgs, &t, next, &c.ccs[k], c)
		if t.rt-rt >= slowCall && !c.helped.Load() {
			pc.help(c)
		}
		commit = max(commit, off)
		next = end
		if end != 0 && end-settled >= int64(settleInterval) {
			pc.noteCalls(t.consumes, t.rt)
			pc.settle(qs, &t, commit)
			commit, settled = -1, end
		}
	}
	pc.noteCalls(t.consumes, t.rt)
	pc.settle(qs, &t, commit)
}

// help queues c again for each of its unclaimed batches but one (up to
// ConsumeGoroutinesMin-1 copies), once per chunk; a copy that finds nothing left to claim
// ends at once, and a copy the full pool refuses is dropped (c's worker goes on).
func (pc *PushConsumer) help(c *chunk) {
	if c.helped.Swap(true) {
		return
	}
	for range min(c.unclaimed()-1, pc.opts.ConsumeGoroutinesMin-1) {
		if !pc.pool.submit(c) {
			return
		}
	}
}

// consumeConcurrently is ConsumeMessageConcurrentlyService.ConsumeRequest.run.
func (pc *PushConsumer) consumeConcurrently(qs *queueState, msgs []*Message) {
	var t consumeTally
	off, _ := pc.consumeBatch(qs, msgs, &t, 0, &ConcurrentlyContext{}, nil)
	pc.settle(qs, &t, off)
}

// settle records t's stats, then moves qs's offset up to off (unless off is -1 or the queue
// was dropped).
func (pc *PushConsumer) settle(qs *queueState, t *consumeTally, off int64) {
	pc.stats.tally(qs.queue.Topic, t)
	if off >= 0 {
		pc.updateOffset(qs, off, true)
	}
}

// consumeBatch is the body of ConsumeRequest.run: it calls the listener on msgs with cc
// (which it fills in) and settles them (processResult), adding the call and its results to
// t. The call starts at begin (monoNow), if not zero and no hook runs before it. c is the
// chunk msgs belong to, if any. It returns the offset to commit, or -1, and, when every
// message was acknowledged, the time the listener returned (monoNow; else zero).
func (pc *PushConsumer) consumeBatch(qs *queueState, msgs []*Message, t *consumeTally, begin int64, cc *ConcurrentlyContext, c *chunk) (int64, int64) {
	if qs.pq.Dropped() || !pc.beginConsume() {
		return -1, 0
	}
	defer pc.endConsume()
	o := &pc.opts
	*cc = ConcurrentlyContext{Queue: qs.queue, AckIndex: len(msgs) - 1}
	var hc *HookContext // only with hooks: one allocation less per batch
	if len(o.BeforeConsume) > 0 || len(o.AfterConsume) > 0 {
		hc = &HookContext{Group: o.Group, Queue: qs.queue, Messages: msgs}
		pc.runHooks(o.BeforeConsume, hc)
		begin = 0
	}
	if begin == 0 {
		begin = monoNow()
	}
	qs.pq.markConsumeStart(msgs, begin, c)
	status, err := pc.callConcurrent(msgs, cc)
	end := monoNow()
	elapsed := time.Duration(end - begin)
	if err != nil {
		o.Logger.Warn("consumer: listener failed", "queue", qs.queue, "err", err)
		status = ReconsumeLater
	}
	if hc != nil {
		hc.Success, hc.Elapsed = status == ConsumeSuccess, elapsed
		hc.Status = [...]string{"CONSUME_SUCCESS", "RECONSUME_LATER"}[status]
		pc.runHooks(o.AfterConsume, hc)
		end = monoNow()
	}
	t.consumes++
	t.rt += elapsed
	if qs.pq.Dropped() {
		return -1, 0
	}
	failed := t.failed
	off := pc.processResult(qs, msgs, status, cc, t)
	if t.failed != failed { // sending back took its time
		end = 0
	}
	return off, end
}

// callConcurrent calls the listener; a panic is an error.
func (pc *PushConsumer) callConcurrent(msgs []*Message, cc *ConcurrentlyContext) (st ConsumeConcurrentlyStatus, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = ReconsumeLater, fmt.Errorf("consumer: listener panic: %v", r)
		}
	}()
	st, err = pc.concurrent(pc.ctx, msgs, cc)
	if st != ConsumeSuccess && st != ReconsumeLater {
		st = ReconsumeLater
	}
	return st, err
}

func (pc *PushConsumer) runHooks(hooks []Hook, hc *HookContext) {
	for _, h := range hooks {
		func() {
			defer func() {
				if r := recover(); r != nil {
					pc.opts.Logger.Warn("consumer: hook panic", "panic", r)
				}
			}()
			h(pc.ctx, hc)
		}()
	}
}

// processResult is ConsumeMessageConcurrentlyService.processConsumeResult up to the
// offset, which it returns (-1: none) instead of storing: failed messages go back to the
// broker (or are consumed again locally), then the batch leaves the cache. It adds the
// results to t.
func (pc *PushConsumer) processResult(qs *queueState, msgs []*Message, status ConsumeConcurrentlyStatus, cc *ConcurrentlyContext, t *consumeTally) int64 {
	o := &pc.opts
	ack := cc.AckIndex
	if status == ReconsumeLater {
		ack = -1
	}
	ack = min(max(ack, -1), len(msgs)-1)
	t.ok += int64(ack + 1)
	t.failed += int64(len(msgs) - ack - 1)
	done := msgs
	if ack < len(msgs)-1 {
		if o.Model == mq.Broadcasting {
			for _, m := range msgs[ack+1:] {
				o.Logger.Warn("consumer: broadcasting consume failed, dropped", "queue", qs.queue, "offset", m.QueueOffset)
			}
		} else {
			done = append([]*Message(nil), msgs[:ack+1]...)
			var failed []*Message
			for _, m := range msgs[ack+1:] {
				if pc.sendBack(m, cc.DelayLevel) {
					done = append(done, m)
				} else {
					m.ReconsumeTimes++
					failed = append(failed, m)
				}
			}
			if len(failed) > 0 {
				pc.after(o.SendBackRetryDelay, func() { pc.submitConcurrently(qs, failed) })
			}
		}
	}
	return qs.pq.removeMessages(done)
}

// sendBack returns m to the broker's retry (or dead-letter) topic; when that fails it sends
// a retry copy as a normal message (RocketMQ's sendMessageBackAsNormal).
func (pc *PushConsumer) sendBack(m *Message, level int32) bool {
	o := &pc.opts
	ctx, cancel := o.callCtx(pc.ctx)
	defer cancel()
	err := pc.b.SendBack(ctx, mq.SendBackRequest{Group: o.Group, BrokerName: m.BrokerName, CommitLogOffset: m.CommitLogOffset,
		DelayLevel: level, MaxReconsumeTimes: o.MaxReconsumeTimes, OriginMsgID: m.MsgID()})
	if err == nil {
		return true
	}
	if quiet(pc.ctx, err) {
		return false
	}
	o.Logger.Warn("consumer: send back", "topic", m.Topic, "offset", m.QueueOffset, "err", err)
	if level < 0 {
		return false // the dead-letter topic takes no normal sends
	}
	c := &mq.Message{Topic: mq.RetryTopic(o.Group), Flag: m.Flag, Tags: m.Tags, Keys: m.Keys, Body: m.Body,
		Properties: maps.Clone(m.Properties)}
	if c.Properties[mq.PropertyRetryTopic] == "" {
		c.SetProperty(mq.PropertyRetryTopic, m.Topic)
	}
	if c.Properties[mq.PropertyOriginMessageID] == "" {
		c.SetProperty(mq.PropertyOriginMessageID, m.MsgID())
	}
	c.SetProperty(mq.PropertyReconsumeTime, strconv.Itoa(int(m.ReconsumeTimes+1)))
	c.SetProperty(mq.PropertyMaxReconsumeTimes, strconv.Itoa(int(o.MaxReconsumeTimes)))
	c.SetDelayLevel(3 + int(m.ReconsumeTimes))
	if _, err := pc.b.Send(ctx, c, nil); err != nil {
		if !quiet(pc.ctx, err) {
			o.Logger.Warn("consumer: send back as normal", "topic", m.Topic, "offset", m.QueueOffset, "err", err)
		}
		return false
	}
	return true
}

// cleanExpired sends back messages consuming for longer than ConsumeTimeout (RocketMQ's
// cleanExpireMsg). The batches queued behind a hung call in its pool task are first taken
// from that task and submitted anew: else they would never start, the check would stop at
// them, and the queue's offset would stay behind them until the call returns.
func (pc *PushConsumer) cleanExpired() {
	if pc.opts.Model != mq.Clustering {
		return
	}
	for _, qs := range pc.snapshot() {
		qs.pq.cleanExpired(pc.opts.ConsumeTimeout, pc.opts.MaxExpiredPerQueue, func(m *Message, c *chunk) error {
			if c != nil {
				if rest := c.rest(); len(rest) > 0 {
					pc.submitChunks(qs, rest)
				}
			}
			if !pc.sendBack(m, 3) {
				return errSendBack
			}
			return nil
		})
	}
}

var errSendBack = errors.New("consumer: send back failed")
