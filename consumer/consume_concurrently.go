package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// poolQueueSize bounds the tasks waiting for a worker; past it the pool grows to its maximum,
// then refuses (and the submitter retries after SubmitRetryDelay).
const poolQueueSize = 4096

// workerPool runs tasks on min..max goroutines fed by a bounded queue, as Java's
// ThreadPoolExecutor with a bounded queue: workers above min start when the queue is full and
// end when it is empty. Every worker ends when done closes.
type workerPool struct {
	tasks    chan func()
	min, max int
	mu       sync.Mutex
	n        int
	wg       *sync.WaitGroup
	done     <-chan struct{}
}

func newWorkerPool(minN, maxN int, wg *sync.WaitGroup, done <-chan struct{}) *workerPool {
	p := &workerPool{tasks: make(chan func(), poolQueueSize), min: minN, max: maxN, wg: wg, done: done}
	p.mu.Lock()
	for range minN {
		p.startLocked(nil)
	}
	p.mu.Unlock()
	return p
}

func (p *workerPool) startLocked(first func()) {
	p.n++
	p.wg.Add(1)
	go p.work(first, p.n > p.min)
}

// submit queues f; false when the pool is full (or stopped).
func (p *workerPool) submit(f func()) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	select {
	case p.tasks <- f:
		return true
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= p.max {
		return false
	}
	p.startLocked(f)
	return true
}

func (p *workerPool) work(first func(), extra bool) {
	defer p.wg.Done()
	if first != nil {
		first()
	}
	for {
		if extra {
			select {
			case f := <-p.tasks:
				f()
				continue
			case <-p.done:
			default:
			}
			p.mu.Lock()
			p.n--
			p.mu.Unlock()
			return
		}
		select {
		case f := <-p.tasks:
			f()
		case <-p.done:
			return
		}
	}
}

// submitConcurrently queues one batch; a refused batch is retried after SubmitRetryDelay.
func (pc *PushConsumer) submitConcurrently(qs *queueState, msgs []*Message) {
	if !pc.pool.submit(func() { pc.consumeConcurrently(qs, msgs) }) {
		pc.after(pc.opts.SubmitRetryDelay, func() { pc.submitConcurrently(qs, msgs) })
	}
}

// consumeConcurrently is ConsumeMessageConcurrentlyService.ConsumeRequest.run.
func (pc *PushConsumer) consumeConcurrently(qs *queueState, msgs []*Message) {
	if qs.pq.Dropped() || !pc.beginConsume() {
		return
	}
	defer pc.endConsume()
	o := &pc.opts
	cc := &ConcurrentlyContext{Queue: qs.mq, AckIndex: len(msgs) - 1}
	hc := &HookContext{Group: o.Group, Queue: qs.mq, Messages: msgs}
	pc.runHooks(o.BeforeConsume, hc)
	qs.pq.MarkConsumeStart(msgs)
	begin := o.Clock.Now()
	status, err := pc.callConcurrent(msgs, cc)
	elapsed := o.Clock.Now().Sub(begin)
	if err != nil {
		o.Logger.Warn("consumer: listener failed", "queue", qs.mq, "err", err)
		status = ReconsumeLater
	}
	hc.Success, hc.Elapsed = status == ConsumeSuccess, elapsed
	hc.Status = [...]string{"CONSUME_SUCCESS", "RECONSUME_LATER"}[status]
	pc.runHooks(o.AfterConsume, hc)
	pc.stats.consumed(qs.mq.Topic, elapsed)
	if !qs.pq.Dropped() {
		pc.processConsumeResult(qs, msgs, status, cc)
	}
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

// processConsumeResult is ConsumeMessageConcurrentlyService.processConsumeResult: failed
// messages go back to the broker (or are consumed again locally), then the batch leaves the
// cache and the offset moves up.
func (pc *PushConsumer) processConsumeResult(qs *queueState, msgs []*Message, status ConsumeConcurrentlyStatus, cc *ConcurrentlyContext) {
	o := &pc.opts
	ack := cc.AckIndex
	if status == ReconsumeLater {
		ack = -1
	}
	ack = min(max(ack, -1), len(msgs)-1)
	pc.stats.consumeResult(qs.mq.Topic, ack+1, len(msgs)-ack-1)
	done := msgs
	if ack < len(msgs)-1 {
		if o.Model == edge.Broadcasting {
			for _, m := range msgs[ack+1:] {
				o.Logger.Warn("consumer: broadcasting consume failed, dropped", "queue", qs.mq, "offset", m.QueueOffset)
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
	if off := qs.pq.RemoveMessages(done); off >= 0 && !qs.pq.Dropped() {
		pc.offsets.Update(qs.mq, off, true)
	}
}

// sendBack returns m to the broker's retry (or dead-letter) topic; when that fails it sends
// a retry copy as a normal message (RocketMQ's sendMessageBackAsNormal).
func (pc *PushConsumer) sendBack(m *Message, level int32) bool {
	o := &pc.opts
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := pc.b.SendBack(ctx, edge.SendBackRequest{Pos: m.Pos, Group: o.Group, DelayLevel: level, MaxReconsumeTimes: o.MaxReconsumeTimes})
	if err == nil {
		return true
	}
	o.Logger.Warn("consumer: send back", "topic", m.Topic, "offset", m.QueueOffset, "err", err)
	if level < 0 {
		return false // the dead-letter topic takes no normal sends
	}
	c := &Message{Topic: edge.RetryTopic(o.Group), Flag: m.Flag, Tags: m.Tags, Keys: m.Keys, Body: m.Body,
		ReconsumeTimes: m.ReconsumeTimes + 1, Properties: maps.Clone(m.Properties)}
	if c.Properties == nil {
		c.Properties = map[string]string{}
	}
	if c.Properties[edge.PropertyRetryTopic] == "" {
		c.Properties[edge.PropertyRetryTopic] = m.Topic
	}
	if c.Properties[edge.PropertyOriginMessageID] == "" && c.Properties[edge.PropertyUniqKey] != "" {
		c.Properties[edge.PropertyOriginMessageID] = c.Properties[edge.PropertyUniqKey]
	}
	c.Properties[edge.PropertyMaxReconsumeTimes] = strconv.Itoa(int(o.MaxReconsumeTimes))
	edge.SetDelayLevel(c, 3+int(m.ReconsumeTimes))
	if _, err := pc.b.Send(ctx, c, nil); err != nil {
		o.Logger.Warn("consumer: send back as normal", "topic", m.Topic, "offset", m.QueueOffset, "err", err)
		return false
	}
	return true
}

// cleanExpired sends back messages consuming for longer than ConsumeTimeout (RocketMQ's
// cleanExpireMsg).
func (pc *PushConsumer) cleanExpired() {
	if pc.opts.Model != edge.Clustering {
		return
	}
	for _, qs := range pc.snapshot() {
		qs.pq.CleanExpired(pc.opts.ConsumeTimeout, pc.opts.MaxExpiredPerQueue, func(m *Message) error {
			if !pc.sendBack(m, 3) {
				return errSendBack
			}
			return nil
		})
	}
}

var errSendBack = errors.New("consumer: send back failed")
