package uplink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
)

// A forwarder's state, as RuleStats.State sums them.
const (
	fwdIdle int32 = iota
	fwdConnected
	fwdDraining
	fwdBackingOff
)

// localWait bounds one wait for new local messages, so that a forwarder looks at its ctx
// and its holes now and then even on a quiet queue.
const localWait = 5 * time.Second

// queueFwd forwards one local queue for one rule, one batch in flight at a time.
type queueFwd struct {
	r      *rule
	queue  mq.MessageQueue // local
	up     string          // the upstream topic
	bo     backoff         // owned by run
	stored bool            // the cursor was stored once; owned by run after start
	caught bool            // the last read reached the queue's end; owned by run

	cursor atomic.Int64 // next queue offset to forward
	floor  atomic.Int64 // commit-log position retention must keep for this queue (0 until read)
	oldest atomic.Int64 // store time (unix ms) of the oldest message not forwarded; 0: none known
	state  atomic.Int32
}

// run forwards until the Uplink closes or the local topic is deleted.
func (f *queueFwd) run() {
	r, u := f.r, f.r.u
	defer u.wg.Done()
	defer u.gate.mark(f, r.cfg.Priority, false)
	ctx := u.ctx
	for ctx.Err() == nil {
		if f.caught { // the read may wait for new messages: hold no one up meanwhile
			u.gate.mark(f, r.cfg.Priority, false)
		}
		msgs, err := f.read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, mq.ErrTopicNotExist) || errors.Is(err, mq.ErrInvalidQueue) || errors.Is(err, edge.ErrClosed) {
				u.lg.Info("uplink: local queue gone, forwarder stops", "rule", r.cfg.Name, "queue", f.queue, "err", err)
				r.mu.Lock()
				delete(r.queues, mq.MessageQueue{Topic: f.queue.Topic, QueueID: f.queue.QueueID})
				r.cursor[mq.MessageQueue{Topic: f.queue.Topic, QueueID: f.queue.QueueID}] = f.cursor.Load()
				r.mu.Unlock()
				return
			}
			r.fail(fmt.Errorf("read %s: %w", f.queue, err))
			sleep(ctx, f.bo.next())
			continue
		}
		if len(msgs) == 0 {
			u.gate.mark(f, r.cfg.Priority, false)
			continue
		}
		u.gate.mark(f, r.cfg.Priority, true)
		f.forward(ctx, msgs)
	}
}

// read returns the next batch of the queue from the cursor, waiting up to localWait for
// one; none if there is nothing yet. It moves the cursor over holes and, for a DropOldest
// rule, over messages retention deleted (counted as lost).
func (f *queueFwd) read(ctx context.Context) ([]mq.MessageExt, error) {
	r, b := f.r, f.r.u.b
	from := f.cursor.Load()
	pos := b.WritePos() // a message not read yet is at or past this
	req := mq.PullRequest{Group: r.group, Queue: f.queue, Offset: from, MaxMsgs: r.cfg.BatchSize, Filter: "*", Suspend: true, MaxWait: localWait}
	res, err := b.Pull(ctx, req)
	if err != nil {
		return nil, err
	}
	switch res.Status {
	case mq.PullFound:
	case mq.PullOffsetIllegal:
		switch {
		case from < res.MinOffset:
			if f.stored {
				n := res.MinOffset - from
				r.c.lost.Add(n)
				r.u.lg.Warn("uplink: messages deleted before they were forwarded", "rule", r.cfg.Name, "queue", f.queue,
					"lost", n, "from", from, "to", res.MinOffset)
			}
			f.advance(res.MinOffset)
		case from > res.MaxOffset: // the queue is shorter than the cursor: a new store
			r.u.lg.Warn("uplink: cursor past the queue's end, restarting at its end", "rule", r.cfg.Name, "queue", f.queue,
				"cursor", from, "max", res.MaxOffset)
			f.advance(res.MaxOffset)
		default: // the broker could not say: try again later
			return nil, sleep(ctx, localWait/10)
		}
		return nil, nil
	default: // nothing new, or past holes
		if res.NextBeginOffset > from {
			f.gone(from, res.NextBeginOffset)
			f.advance(res.NextBeginOffset)
			return nil, nil // the queue's end is not known to be reached
		}
		f.floor.Store(pos)
		f.oldest.Store(0)
		if f.state.Load() == fwdDraining {
			f.state.Store(fwdConnected)
		}
		return nil, nil
	}
	msgs := res.Messages
	f.floor.Store(msgs[0].CommitLogOffset)
	f.oldest.Store(msgs[0].StoreTime)
	msgs = f.trim(msgs)
	f.skipped(from, msgs)
	f.caught = len(msgs) == len(res.Messages) && res.NextBeginOffset >= res.MaxOffset
	if l := r.cfg.Linger; l > 0 && len(msgs) < r.cfg.BatchSize && len(msgs) == len(res.Messages) {
		if sleep(ctx, l) != nil {
			return nil, ctx.Err()
		}
		req.Offset, req.Suspend, req.MaxMsgs = res.NextBeginOffset, false, r.cfg.BatchSize-len(msgs)
		if more, err := b.Pull(ctx, req); err == nil && more.Status == mq.PullFound {
			n0, n := len(msgs), len(msgs)+len(more.Messages)
			msgs = f.trim(append(msgs, more.Messages...))
			f.skipped(msgs[n0-1].QueueOffset+1, msgs[n0:])
			f.caught = len(msgs) == n && more.NextBeginOffset >= more.MaxOffset
		}
	}
	return msgs, nil
}

// skipped counts as lost the entries of the queue from from that a read of msgs skipped
// (gone), before and between them.
func (f *queueFwd) skipped(from int64, msgs []mq.MessageExt) {
	for i := range msgs {
		if off := msgs[i].QueueOffset; off > from {
			f.gone(from, off)
		}
		from = msgs[i].QueueOffset + 1
	}
}

// gone counts the queue offsets from..to, whose records the read found gone (deleted by
// retention before the queue's min offset caught up, lost in a crash, or damaged), as lost:
// they were not forwarded. Not before the cursor was stored once (a new rule reads what the
// queue still has).
func (f *queueFwd) gone(from, to int64) {
	if !f.stored {
		return
	}
	r := f.r
	r.c.lost.Add(to - from)
	r.u.lg.Warn("uplink: messages gone before they were forwarded", "rule", r.cfg.Name, "queue", f.queue,
		"lost", to-from, "from", from, "to", to)
}

// trim cuts msgs to the rule's BatchBytes (less when paced), keeping at least one.
func (f *queueFwd) trim(msgs []mq.MessageExt) []mq.MessageExt {
	n, limit := 0, f.batchBytes()
	for i := range msgs {
		n += len(msgs[i].Body)
		if i > 0 && n > limit {
			return msgs[:i]
		}
	}
	return msgs
}

// forward sends msgs upstream until the upstream acknowledged them or the Uplink closes,
// backing off after each failure, and moves the cursor past what was acknowledged.
func (f *queueFwd) forward(ctx context.Context, msgs []mq.MessageExt) {
	r, u := f.r, f.r.u
	out := make([]*mq.Message, len(msgs))
	for i := range msgs {
		out[i] = f.upstreamMessage(&msgs[i])
	}
	failed := false
	alone := false // the upstream refused the batch as too large: find the culprit alone
	for len(out) > 0 && ctx.Err() == nil {
		if f.state.Load() != fwdBackingOff {
			f.state.Store(fwdDraining)
		}
		batch := out
		if alone {
			batch = out[:1]
		}
		if failed {
			r.c.resent.Add(int64(len(batch)))
		}
		n, err := f.send(ctx, batch)
		if n > 0 {
			last := &msgs[n-1]
			bytes := 0
			for _, m := range out[:n] {
				bytes += len(m.Body)
			}
			r.c.forwarded.Add(int64(n))
			r.c.forwardedBytes.Add(int64(bytes))
			r.c.batches.Add(1)
			f.advance(last.QueueOffset + 1)
			f.floor.Store(last.CommitLogOffset + int64(last.StoreSize))
			msgs, out = msgs[n:], out[n:]
			if len(msgs) > 0 {
				f.floor.Store(msgs[0].CommitLogOffset)
				f.oldest.Store(msgs[0].StoreTime)
			} else {
				f.oldest.Store(0)
			}
			f.bo.reset()
			if f.state.Swap(fwdDraining) == fwdBackingOff {
				u.lg.Info("uplink: link up again", "rule", r.cfg.Name, "queue", f.queue)
			}
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, mq.ErrMessageTooLarge) && len(batch) > 1 {
			alone = true
			continue
		}
		if errors.Is(err, mq.ErrMessageTooLarge) {
			alone = false
			r.c.rejected.Add(1)
			u.lg.Error("uplink: upstream refuses a message as too large: skipped", "rule", r.cfg.Name, "queue", f.queue,
				"offset", msgs[0].QueueOffset, "bytes", len(out[0].Body), "err", err)
			f.advance(msgs[0].QueueOffset + 1)
			msgs, out = msgs[1:], out[1:]
			continue
		}
		failed = true
		r.fail(err)
		if f.state.Swap(fwdBackingOff) != fwdBackingOff {
			u.lg.Warn("uplink: send failed, backing off", "rule", r.cfg.Name, "queue", f.queue, "err", err)
		}
		u.gate.mark(f, r.cfg.Priority, false) // a rule whose link is down holds no one up
		sleep(ctx, f.bo.next())
		u.gate.mark(f, r.cfg.Priority, true)
	}
}

// send sends msgs to the upstream queue of the local queue, after the higher priorities'
// batches and within the rate limits. It returns how many of msgs (a prefix) the upstream
// acknowledged.
func (f *queueFwd) send(ctx context.Context, msgs []*mq.Message) (int, error) {
	r, u := f.r, f.r.u
	p, err := r.conn(ctx)
	if err != nil {
		return 0, err
	}
	if err := u.gate.wait(ctx, r.cfg.Priority); err != nil {
		return 0, err
	}
	qid := int(f.queue.QueueID)
	sel := func(n int, _ *mq.Message) int { return qid % n }
	hub := r.cfg.Upstream.Kind == KindEdgeMQ
	if r.cfg.Compress && !hub || len(msgs) == 1 {
		for i, m := range msgs {
			if err := f.pace(ctx, len(m.Body)); err != nil {
				return i, err
			}
			fl, err := f.acquire(ctx, len(m.Body))
			if err != nil {
				return i, err
			}
			_, err = f.sendOne(ctx, p, m, sel)
			f.release(fl, err == nil)
			if err != nil {
				return i, err
			}
		}
		return len(msgs), nil
	}
	bytes := 0
	for _, m := range msgs {
		bytes += len(m.Body)
	}
	if err := f.pace(ctx, bytes); err != nil {
		return 0, err
	}
	fl, err := f.acquire(ctx, bytes)
	if err != nil {
		return 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, u.opts.SendTimeout)
	defer cancel()
	if r.cfg.Compress && hub && !r.noZstd.Load() {
		r.mu.Lock()
		c := r.client
		r.mu.Unlock()
		_, err := c.SendBatchWith(sctx, msgs, sel, remoting.SendBatchZstd, zbatch.Append)
		switch {
		case err == nil:
			f.release(fl, true)
			return len(msgs), nil
		case errors.Is(err, errors.ErrUnsupported): // an older hub, or zstd batches off: nothing stored
			r.noZstd.Store(true)
			u.lg.Warn("uplink: the hub does not take zstd batches; sending them plain", "rule", r.cfg.Name, "err", err)
		case errors.Is(err, mq.ErrMessageTooLarge):
			f.release(fl, false)
			return f.sendEach(ctx, p, msgs, sel)
		default:
			f.release(fl, false)
			return 0, err
		}
	}
	_, err = p.SendBatch(sctx, msgs, sel)
	f.release(fl, err == nil)
	if err != nil {
		if errors.Is(err, mq.ErrMessageTooLarge) { // one at a time, so that only the culprit is skipped
			return f.sendEach(ctx, p, msgs, sel)
		}
		return 0, err
	}
	return len(msgs), nil
}

// sendEach sends msgs one by one (paced already).
func (f *queueFwd) sendEach(ctx context.Context, p *producer.Producer, msgs []*mq.Message, sel mq.QueueSelector) (int, error) {
	for i, m := range msgs {
		if _, err := f.sendOne(ctx, p, m, sel); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

func (f *queueFwd) sendOne(ctx context.Context, p *producer.Producer, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error) {
	sctx, cancel := context.WithTimeout(ctx, f.r.u.opts.SendTimeout)
	defer cancel()
	return p.Send(sctx, m, sel)
}

// pace takes n bytes from the rule's and the Uplink's buckets.
func (f *queueFwd) pace(ctx context.Context, n int) error {
	if err := f.r.bucket.take(ctx, n); err != nil {
		return err
	}
	return f.r.u.bucket.take(ctx, n)
}

// advance moves the cursor to off and stores it. A failed store is logged: the cursor
// moves on in memory, and after a restart what followed the stored cursor is sent again.
func (f *queueFwd) advance(off int64) {
	f.cursor.Store(off)
	r := f.r
	err := r.u.b.PutForwardCursors([]edge.ForwardCursor{{Name: r.cfg.Name, Topic: f.queue.Topic, QueueID: f.queue.QueueID,
		Offset: off, Updated: r.u.now()}})
	if err != nil {
		r.fail(fmt.Errorf("store cursor of %s: %w", f.queue, err))
		return
	}
	f.stored = true
}

// upstreamMessage is the copy of m sent upstream: the same flag, tags, keys, body and
// properties, UNIQ_KEY included (m's offset message id if it has none), without the delay
// properties.
func (f *queueFwd) upstreamMessage(m *mq.MessageExt) *mq.Message {
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	for _, k := range []string{mq.PropertyDelayLevel, mq.PropertyRealTopic, mq.PropertyRealQueueID} {
		delete(props, k)
	}
	if props[mq.PropertyUniqKey] == "" {
		props[mq.PropertyUniqKey] = m.OffsetMsgID()
	}
	return &mq.Message{Topic: f.up, Flag: m.Flag, Tags: m.Tags, Keys: m.Keys, Properties: props, Body: m.Body}
}
