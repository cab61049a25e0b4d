package uplink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
	"github.com/edgemq/edgemq/store"
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
	// storeFirst: the cursor, set by start at the queue's first message, is to be stored
	// before the first read (run).
	storeFirst bool
	caught     bool // the last read reached the queue's end; owned by run

	// Owned by run: the batch read last (its buffers reused by the next read), and what
	// laying it out and sending it reuse.
	buf       batch
	props     []remoting.Property
	stubs     []mq.Message
	ptrs      []*mq.Message
	storeHost netip.AddrPort // the local broker's, for the UNIQ_KEY of a message without one
	hostSet   bool

	cursor atomic.Int64 // next queue offset to forward
	floor  atomic.Int64 // commit-log position retention must keep for this queue (0 until read)
	oldest atomic.Int64 // store time (unix ms) of the oldest message not forwarded; 0: none known
	state  atomic.Int32
}

// item is one message of a batch read for forwarding: where it is in the local queue and
// commit log, and where its batch item (what goes upstream) is in the batch's bytes.
type item struct {
	queueOffset int64
	pos         int64 // commit-log position
	storeTime   int64 // unix ms
	size        int32 // bytes of its record in the commit log
	bodyLen     int
	start, end  int   // its batch item in batch.raw; empty when err is set
	err         error // why its batch item could not be laid out (too large)
	// alone is the message to send on its own when no batch item can carry it (properties
	// over a batch item's 32 KiB, which a single send's header carries); nil otherwise.
	alone *mq.Message
}

// batch is what a forwarder read: its messages and, back to back in raw, their batch
// items as they are sent upstream (remoting.AppendBatchItem), laid out straight from the
// stored records without decoding them into messages.
type batch struct {
	items []item
	raw   []byte
}

// maxKeptBatch bounds the bytes of batch items a forwarder keeps between reads: a larger
// buffer (a batch of large messages) is left to the GC, so that many idle queues hold
// little.
const maxKeptBatch = 1 << 20

// reset empties b for the next read, keeping its buffers unless raw is over maxKeptBatch.
func (b *batch) reset() {
	b.items, b.raw = b.items[:0], b.raw[:0]
	if cap(b.raw) > maxKeptBatch {
		b.raw = nil
	}
}

// bytesOf returns the batch items of items, a run of b.items without errors.
func (b *batch) bytesOf(items []item) []byte {
	return b.raw[items[0].start:items[len(items)-1].end]
}

// run forwards until the Uplink closes or the local topic is deleted.
func (f *queueFwd) run() {
	r, u := f.r, f.r.u
	defer u.wg.Done()
	defer u.gate.mark(f, r.cfg.Priority, false)
	ctx := u.ctx
	if f.storeFirst {
		f.advance(f.cursor.Load())
	}
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
		if f.caught { // the buffers serve a backlog; a queue that keeps up holds none
			f.buf = batch{}
		}
	}
}

// read returns the next batch of the queue from the cursor (its items in f.buf), waiting
// up to localWait for one; none if there is nothing yet. It moves the cursor over holes and, for a DropOldest
// rule, over messages retention deleted (counted as lost).
func (f *queueFwd) read(ctx context.Context) ([]item, error) {
	r, b := f.r, f.r.u.b
	if !f.hostSet {
		f.storeHost, f.hostSet = b.Options().StoreHost, true
	}
	from := f.cursor.Load()
	pos := b.WritePos() // a message not read yet is at or past this
	req := mq.PullRequest{Group: r.group, Queue: f.queue, Offset: from, MaxMsgs: r.cfg.BatchSize, Filter: "*", Suspend: true, MaxWait: localWait}
	f.buf.reset()
	res, err := b.PullViews(ctx, req, f.add)
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
	if len(f.buf.items) == 0 { // found, yet nothing handed over: read again
		return nil, nil
	}
	msgs := f.buf.items
	f.floor.Store(msgs[0].pos)
	f.oldest.Store(msgs[0].storeTime)
	msgs = f.trim(msgs)
	f.skipped(from, msgs)
	f.caught = len(msgs) == len(f.buf.items) && res.NextBeginOffset >= res.MaxOffset
	if l := r.cfg.Linger; l > 0 && len(msgs) < r.cfg.BatchSize && len(msgs) == len(f.buf.items) {
		if sleep(ctx, l) != nil {
			return nil, ctx.Err()
		}
		req.Offset, req.Suspend, req.MaxMsgs = res.NextBeginOffset, false, r.cfg.BatchSize-len(msgs)
		if more, err := b.PullViews(ctx, req, f.add); err == nil && more.Status == mq.PullFound && len(f.buf.items) > len(msgs) {
			n0, n := len(msgs), len(f.buf.items)
			msgs = f.trim(f.buf.items)
			f.skipped(msgs[n0-1].queueOffset+1, msgs[n0:])
			f.caught = len(msgs) == n && more.NextBeginOffset >= more.MaxOffset
		}
	}
	return msgs, nil
}

// add lays out the batch item of the stored message v in f.buf, as sent upstream: the same
// flag, tags, keys, body and properties, UNIQ_KEY included (v's offset message id if it has
// none), without the delay properties. PullViews calls it for each message read.
func (f *queueFwd) add(v *store.View) {
	props, uniq := f.props[:0], false
	for k, val := range v.Properties {
		switch string(k) {
		case mq.PropertyDelayLevel, mq.PropertyRealTopic, mq.PropertyRealQueueID:
			continue
		case mq.PropertyUniqKey:
			if len(val) == 0 {
				continue
			}
			uniq = true
		}
		props = append(props, remoting.Property{Key: k, Value: val})
	}
	if !uniq { // in key order, as the properties are stored
		i := 0
		for i < len(props) && string(props[i].Key) < mq.PropertyUniqKey {
			i++
		}
		id := remoting.Property{Key: []byte(mq.PropertyUniqKey), Value: []byte(mq.OffsetMsgID(f.storeHost, v.Pos))}
		props = append(props, remoting.Property{})
		copy(props[i+1:], props[i:])
		props[i] = id
	}
	it := item{queueOffset: v.QueueOffset, pos: v.Pos, storeTime: v.StoreTime, size: v.Size, bodyLen: len(v.Body),
		start: len(f.buf.raw)}
	f.buf.raw, it.err = remoting.AppendBatchItem(f.buf.raw, v.Flag, v.Body, v.Tags, v.Keys, props)
	it.end = len(f.buf.raw)
	if it.err != nil {
		it.alone = aloneMessage(f.up, v, props)
	}
	f.buf.items = append(f.buf.items, it)
	clear(props) // they point into the store's memory
	f.props = props[:0]
}

// aloneMessage returns the message of v with props, as a single send carries it upstream to
// topic, its own copy of the store's bytes.
func aloneMessage(topic string, v *store.View, props []remoting.Property) *mq.Message {
	m := &mq.Message{Topic: topic, Flag: v.Flag, Tags: string(v.Tags), Keys: string(v.Keys),
		Body: bytes.Clone(v.Body), Properties: make(map[string]string, len(props))}
	for _, p := range props {
		m.Properties[string(p.Key)] = string(p.Value)
	}
	return m
}

// skipped counts as lost the entries of the queue from from that a read of msgs skipped
// (gone), before and between them.
func (f *queueFwd) skipped(from int64, msgs []item) {
	for i := range msgs {
		if off := msgs[i].queueOffset; off > from {
			f.gone(from, off)
		}
		from = msgs[i].queueOffset + 1
	}
}

// gone counts the queue offsets from..to, whose records the read found gone (deleted by
// retention before the queue's min offset caught up, lost in a crash, or damaged), as lost:
// they were not forwarded. Not before the cursor was stored once (a rule new to a queue
// stores its cursor at the queue's first message when it starts: what was deleted before
// that it never had).
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
func (f *queueFwd) trim(msgs []item) []item {
	n, limit := 0, f.batchBytes()
	for i := range msgs {
		n += msgs[i].bodyLen
		if i > 0 && n > limit {
			return msgs[:i]
		}
	}
	return msgs
}

// forward sends msgs (of f.buf) upstream until the upstream acknowledged them or the
// Uplink closes, backing off after each failure, and moves the cursor past what was
// acknowledged.
func (f *queueFwd) forward(ctx context.Context, msgs []item) {
	r, u := f.r, f.r.u
	failed := false
	alone := false // the upstream refused the batch as too large: find the culprit alone
	for len(msgs) > 0 && ctx.Err() == nil {
		if f.state.Load() != fwdBackingOff {
			f.state.Store(fwdDraining)
		}
		batch := msgs
		for i := range batch {
			if batch[i].err != nil {
				batch = batch[:max(i, 1)] // one no batch item carries goes on its own
				break
			}
		}
		if alone {
			batch = batch[:1]
		}
		if failed {
			r.c.resent.Add(int64(len(batch)))
		}
		n, err := f.send(ctx, batch)
		if n > 0 {
			last := &msgs[n-1]
			bytes := 0
			for i := range msgs[:n] {
				bytes += msgs[i].bodyLen
			}
			r.c.forwarded.Add(int64(n))
			r.c.forwardedBytes.Add(int64(bytes))
			r.c.batches.Add(1)
			f.advance(last.queueOffset + 1)
			f.floor.Store(last.pos + int64(last.size))
			msgs = msgs[n:]
			if len(msgs) > 0 {
				f.floor.Store(msgs[0].pos)
				f.oldest.Store(msgs[0].storeTime)
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
			f.reject(&msgs[0], err)
			msgs = msgs[1:]
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

// reject skips m, which the upstream refuses (or no request could carry) as too large.
func (f *queueFwd) reject(m *item, err error) {
	r := f.r
	r.c.rejected.Add(1)
	r.u.lg.Error("uplink: upstream refuses a message as too large: skipped", "rule", r.cfg.Name, "queue", f.queue,
		"offset", m.queueOffset, "bytes", m.bodyLen, "err", err)
	f.advance(m.queueOffset + 1)
}

// send sends msgs (of f.buf, all laid out) to the upstream queue of the local queue, after
// the higher priorities' batches and within the rate limits. It returns how many of msgs
// (a prefix) the upstream acknowledged.
func (f *queueFwd) send(ctx context.Context, msgs []item) (int, error) {
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
		for i := range msgs {
			m, err := f.message(&msgs[i])
			if err != nil {
				return i, err
			}
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
	for i := range msgs {
		bytes += msgs[i].bodyLen
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
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	stubs := f.stubsFor(len(msgs))
	items := f.buf.bytesOf(msgs)
	if r.cfg.Compress && hub && !r.noZstd.Load() {
		_, err := c.SendBatchWith(sctx, stubs, sel, remoting.SendBatchZstd, func(dst []byte, _ []*mq.Message) ([]byte, error) {
			return zbatch.AppendItems(dst, items)
		})
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
	// The request gets its own copy of the items: f.buf is reused by the next read, and
	// a request given up on may still be on its way out.
	_, err = c.SendBatchWith(sctx, stubs, sel, remoting.SendBatchMessage, func(dst []byte, _ []*mq.Message) ([]byte, error) {
		return append(dst, items...), nil
	})
	f.release(fl, err == nil)
	if err != nil {
		if errors.Is(err, mq.ErrMessageTooLarge) { // one at a time, so that only the culprit is skipped
			return f.sendEach(ctx, p, msgs, sel)
		}
		return 0, err
	}
	return len(msgs), nil
}

// stubsFor returns n messages of the upstream topic for a batch send whose items are laid
// out already: the client takes the topic and the number of results from them.
func (f *queueFwd) stubsFor(n int) []*mq.Message {
	if len(f.stubs) < n {
		f.stubs = make([]mq.Message, n)
		f.ptrs = make([]*mq.Message, n)
		for i := range f.stubs {
			f.ptrs[i] = &f.stubs[i]
		}
	}
	for i := range n {
		f.stubs[i] = mq.Message{Topic: f.up}
	}
	return f.ptrs[:n]
}

// message returns the message of m's batch item, to send on its own, its body its own copy.
func (f *queueFwd) message(m *item) (*mq.Message, error) {
	if m.alone != nil {
		return m.alone, nil
	}
	msgs, err := remoting.DecodeBatch(f.buf.raw[m.start:m.end])
	if err != nil || len(msgs) != 1 { // laid out by us: never
		return nil, fmt.Errorf("uplink: batch item of offset %d: %d messages, %w", m.queueOffset, len(msgs), err)
	}
	msgs[0].Topic = f.up
	msgs[0].Body = bytes.Clone(msgs[0].Body)
	return msgs[0], nil
}

// sendEach sends msgs one by one (paced already).
func (f *queueFwd) sendEach(ctx context.Context, p *producer.Producer, msgs []item, sel mq.QueueSelector) (int, error) {
	for i := range msgs {
		m, err := f.message(&msgs[i])
		if err != nil {
			return i, err
		}
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
