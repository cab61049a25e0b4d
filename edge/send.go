package edge

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/klauspost/compress/zstd"
)

// Send stores m on a write queue of its topic chosen by sel (round robin when nil) and
// returns where. With the sync flush policy (the store's default) it returns once the message
// is on disk, unless the topic's Durability says otherwise (TopicConfig.Durability). A
// message with a delay level (mq.Message.SetDelayLevel) is held in the schedule topic and
// delivered to its topic and queue when due.
//
// A send to a group's retry topic (what a client does when its send-back failed) stores the
// mq.PropertyReconsumeTime property as the message's reconsume count, and goes to the
// group's dead-letter topic instead once that count exceeds mq.PropertyMaxReconsumeTimes
// (Options.MaxReconsumeTimes when the message has none).
//
// m is not changed; the broker keeps no reference to it after Send returns. Errors:
// ErrClosed, ctx.Err(), and (wrapped) mq.ErrInvalidArgument (a nil ctx or message, a bad
// delay level, reconsume count or maximum), mq.ErrInvalidTopic (a bad or reserved name),
// mq.ErrTopicNotExist (auto-creation off), mq.ErrNoPermission, mq.ErrInvalidQueue (a
// selector's index out of range), mq.ErrMessageTooLarge (a body over
// Options.MaxMessageSize, or properties over the store's limit). Nothing is stored on error,
// and a topic is made (auto-creation) only for a send the broker accepts: the store may still
// refuse it (properties over its limit, a full disk), leaving the topic made.
func (b *Broker) Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error) {
	return b.SendFrom(ctx, m, sel, Origin{})
}

// Origin is what a remote producer tells about the messages it sends, which a network
// server passes on: when and where they were made, and how often they were consumed
// before (a client whose send-back failed sends the message to the group's retry topic
// itself). The zero Origin is a message made by the broker's own program, now.
type Origin struct {
	// BornTime is when the producer made the message, unix ms; 0 means the store time.
	BornTime int64
	// BornHost is the producer's address (the connection's remote address); zero: none.
	BornHost netip.AddrPort
	// ReconsumeTimes is the message's reconsume count. Sent to a retry topic without the
	// mq.PropertyReconsumeTime property, it counts as that property would: past the
	// message's maximum the message goes to the dead-letter topic. Must not be negative.
	ReconsumeTimes int32
}

// SendFrom is Send for a message that came from elsewhere: the stored message carries o's
// born time, born host and reconsume count, which consumers receive. Errors as Send's, and
// mq.ErrInvalidArgument for a negative o.ReconsumeTimes or BornTime.
func (b *Broker) SendFrom(ctx context.Context, m *mq.Message, sel mq.QueueSelector, o Origin) (mq.SendResult, error) {
	var s store.Message
	tp, err := b.prepareSend(ctx, m, sel, &o, &s)
	if err != nil {
		return mq.SendResult{}, err
	}
	if err := b.appendSends([]*store.Message{&s}); err != nil {
		return mq.SendResult{}, appendErr(err)
	}
	tp.in.add(1, int64(len(m.Body)))
	return b.result(&s), nil
}

// SendAsync stores m as Send does without waiting for the fsync that covers it (RocketMQ's
// send with a SendCallback): done is called with the result once Send would have returned,
// so that one goroutine can keep many sends in flight, and they share fsyncs (group commit).
// Errors found before the message is handed to the store (those of Send, and for a send
// written at once the store's for a closed broker or a full disk) are returned and done is
// not called. Otherwise done is called exactly once:
//   - when the send waits for an fsync, from the store's acknowledgement goroutine, in the
//     order the messages were stored; with an error if the fsync failed (the message was
//     written, its durability is unknown);
//   - when it waits for none (the store's async flush policy, or a topic of durability
//     async), once written: before SendAsync returns while sends come slowly; while they
//     come fast (about 100,000 a second or more) or earlier ones are still being written,
//     from a goroutine of the broker that writes them in batches, so that the caller
//     prepares its next sends meanwhile. A store error then reaches done (nothing of the
//     batch was stored).
//
// A goroutine's sends are stored in the order it made them, whichever way they went.
// done must not block; m's body and properties must not be changed until done is called.
func (b *Broker) SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error {
	return b.sendAsync(ctx, m, sel, Origin{}, done, true)
}

// SendAsyncFrom is SendAsync for a message that came from elsewhere, as SendFrom is
// Send's. A network server that calls it for each send of a connection in arrival order
// stores them in that order, and answers each from done. Unlike SendAsync's, a send that
// waits for no fsync is always written, and done called, before it returns: a server
// answers the sends it read together in one write.
func (b *Broker) SendAsyncFrom(ctx context.Context, m *mq.Message, sel mq.QueueSelector, o Origin, done func(mq.SendResult, error)) error {
	return b.sendAsync(ctx, m, sel, o, done, false)
}

// sendAsync is SendAsyncFrom; pipe lets it hand a send that waits for no fsync to the pipe
// (SendAsync's callers), else such a send is written before it returns (a network server's,
// which answers the sends of a connection read together in one write).
func (b *Broker) sendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, o Origin, done func(mq.SendResult, error), pipe bool) error {
	if done == nil {
		return fmt.Errorf("%w: SendAsync needs a done function", mq.ErrInvalidArgument)
	}
	var s store.Message
	tp, err := b.prepareSend(ctx, m, sel, &o, &s)
	if err != nil {
		return err
	}
	lazy := !b.waitsForFsync(s.Durability)
	piped := lazy && pipe && b.pipe.handOff()
	if lazy && !piped {
		// Acknowledged once written: done runs now, as after Send, without the state of a
		// send in flight (a pooled asyncSend and the store's callback).
		if err := b.appendSends([]*store.Message{&s}); err != nil {
			return appendErr(err)
		}
		tp.in.add(1, int64(len(m.Body)))
		done(b.result(&s), nil)
		return nil
	}
	op := asyncSends.Get().(*asyncSend)
	if op.complete == nil {
		op.complete = op.finish
	}
	op.s = s
	op.b, op.tp, op.bytes, op.done = b, tp, int64(len(m.Body)), done
	if piped {
		if !b.pipe.put(op) {
			op.release()
			return ErrClosed
		}
		return nil
	}
	if err = b.appendSendsAsync(op.ptr0(), op.complete); err != nil {
		op.release()
	}
	return appendErr(err)
}

// waitsForFsync reports whether a send of durability d is acknowledged only once an fsync
// covers it.
func (b *Broker) waitsForFsync(d store.Durability) bool {
	switch d {
	case store.DurabilitySync:
		return true
	case store.DurabilityAsync:
		return false
	}
	return b.syncFlush
}

// asyncSend is a SendAsync in flight, with the stored copy of its message. They are pooled,
// each with its complete method value made once, so that a send in flight allocates nothing
// of its own.
type asyncSend struct {
	b        *Broker
	tp       *topic
	s        store.Message     // what is stored; the store fills in its placement
	ptr      [1]*store.Message // &s, as the batch AppendAsync takes: not allocated per send
	bytes    int64             // the caller's body size, for the topic's counters
	done     func(mq.SendResult, error)
	complete func(error) // op.finish, bound once
	// A send of SendEncodedAsyncFrom: s's encoded properties, the properties read to
	// encode them, and its UNIQ_KEY (s has no properties map to read it from).
	enc   []byte
	props []store.Property
	uniq  string
}

var asyncSends = sync.Pool{New: func() any { return new(asyncSend) }}

// ptr0 returns op's message as the store's batch appends take it.
func (op *asyncSend) ptr0() []*store.Message {
	op.ptr[0] = &op.s
	return op.ptr[:]
}

// finish reports the store's outcome to the caller's done function and returns op to the
// pool: the store calls it exactly once.
func (op *asyncSend) finish(err error) {
	var res mq.SendResult
	if err == nil {
		op.tp.in.add(1, op.bytes)
		res = op.b.result(&op.s)
		if op.uniq != "" {
			res.UniqID = op.uniq
		}
	}
	done := op.done
	op.release()
	done(res, err)
}

// release clears op, so that the pool holds no message, and puts it back.
func (op *asyncSend) release() {
	op.b, op.tp, op.done, op.s, op.ptr[0], op.uniq = nil, nil, nil, store.Message{}, nil, ""
	clear(op.props)
	if cap(op.enc) > maxKeptEncBytes || cap(op.props) > maxKeptItems {
		op.enc, op.props = nil, nil // a rare large one is left to the GC
	}
	op.enc, op.props = op.enc[:0], op.props[:0]
	asyncSends.Put(op)
}

// prepareSend checks a send of m, chooses its topic and queue and fills s with the copy to
// store. Nothing is changed on error.
func (b *Broker) prepareSend(ctx context.Context, m *mq.Message, sel mq.QueueSelector, o *Origin, s *store.Message) (*topic, error) {
	if err := b.checkCtx(ctx); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", mq.ErrInvalidArgument)
	}
	if err := checkOrigin(o); err != nil {
		return nil, err
	}
	if err := b.checkMessage(m, o); err != nil {
		return nil, err
	}
	tp, q, err := b.sendQueue(m, sel)
	if err != nil {
		return nil, err
	}
	storeCopy(m, q, s)
	s.Durability = tp.cfg.Durability
	o.apply(s)
	if isHalf(s.Topic, s.Properties) {
		return tp, b.prepareHalf(s)
	}
	return tp, b.prepare(s)
}

// isHalf reports whether a message sent to topic with props is a transaction's half
// message: marked so (mq.PropertyTransactionPrepared), and not sent to a retry topic. A
// committed message keeps the mark, as RocketMQ delivers it, and a consumer whose send-back
// failed sends it to its group's retry topic itself.
func isHalf(topic string, props map[string]string) bool {
	return props[mq.PropertyTransactionPrepared] == "true" && !mq.IsRetryTopic(topic)
}

func checkOrigin(o *Origin) error {
	if o.ReconsumeTimes < 0 || o.BornTime < 0 {
		return fmt.Errorf("%w: origin with reconsume times %d, born time %d", mq.ErrInvalidArgument, o.ReconsumeTimes, o.BornTime)
	}
	return nil
}

// apply gives s, a message about to be prepared, what o says of it. A reconsume count sent
// to a retry topic without its property is given the property, which prepareRetry reads.
func (o *Origin) apply(s *store.Message) {
	s.BornTime, s.BornHost, s.ReconsumeTimes = o.BornTime, o.BornHost, o.ReconsumeTimes
	if o.ReconsumeTimes > 0 && mq.IsRetryTopic(s.Topic) {
		if _, ok := s.Properties[mq.PropertyReconsumeTime]; !ok {
			s.Properties = maps.Clone(s.Properties)
			if s.Properties == nil {
				s.Properties = map[string]string{}
			}
			s.Properties[mq.PropertyReconsumeTime] = strconv.Itoa(int(o.ReconsumeTimes))
		}
	}
}

// result reports where s, a stored message, is: a transaction's half message, in its real
// topic's queue at its offset in the half topic (which its producer names when it ends the
// transaction), as RocketMQ's brokers answer.
func (b *Broker) result(s *store.Message) mq.SendResult {
	if s.Topic == mq.TransHalfTopic {
		if q, err := strconv.ParseInt(s.Properties[mq.PropertyRealQueueID], 10, 32); err == nil {
			r := b.plainResult(s)
			r.Queue.Topic, r.Queue.QueueID = s.Properties[mq.PropertyRealTopic], int32(q)
			return r
		}
	}
	return b.plainResult(s)
}

func (b *Broker) plainResult(s *store.Message) mq.SendResult {
	return mq.SendResult{
		Queue:       mq.MessageQueue{Topic: s.Topic, BrokerName: b.opts.BrokerName, QueueID: s.QueueID},
		QueueOffset: s.QueueOffset, CommitLogOffset: s.Pos, StoreHost: b.opts.StoreHost,
		UniqID: s.Properties[mq.PropertyUniqKey],
	}
}

// sendQueue returns the topic a send of m (the first message of a batch) writes to and the
// queue it goes to: the one sel chooses, else the next by round robin. A topic that does not
// exist is made, when it may be, only once the queue is chosen, so that a refused send makes
// none. The name is validated when the topic is made, never again.
func (b *Broker) sendQueue(m *mq.Message, sel mq.QueueSelector) (*topic, int32, error) {
	return b.sendQueueAt(m, sel, -1)
}

// sendQueueAt is sendQueue choosing the write queue at index at, when not negative, as
// mq.QueueIndex(at) would, without a selector's copy of m.
func (b *Broker) sendQueueAt(m *mq.Message, sel mq.QueueSelector, at int32) (*topic, int32, error) {
	tp, ok := b.topics.get(m.Topic)
	var cfg TopicConfig
	sendable := ok && tp.sendable
	if !ok {
		var err error
		if cfg, err = b.topics.configFor(m.Topic); err != nil {
			return nil, 0, err
		}
		sendable = isSendable(m.Topic)
	} else {
		cfg = tp.cfg
	}
	if err := checkWritable(cfg, sendable); err != nil {
		return nil, 0, err
	}
	q := int32(-1)
	if at >= 0 {
		if at >= cfg.WriteQueues {
			return nil, 0, fmt.Errorf("%w: queue index %d of topic %q, which has %d write queues", mq.ErrInvalidQueue, at, cfg.Name, cfg.WriteQueues)
		}
		q = at
	} else if sel != nil {
		i := mq.SelectQueue(sel, int(cfg.WriteQueues), m)
		if i < 0 || i >= int(cfg.WriteQueues) {
			return nil, 0, fmt.Errorf("%w: queue index %d of topic %q, which has %d write queues", mq.ErrInvalidQueue, i, cfg.Name, cfg.WriteQueues)
		}
		q = int32(i)
	}
	if !ok {
		var err error
		if tp, err = b.topics.ensure(m.Topic); err != nil {
			return nil, 0, err
		}
		if tp.cfg != cfg { // made meanwhile, otherwise
			if err := checkWritable(tp.cfg, tp.sendable); err != nil {
				return nil, 0, err
			}
			if q >= tp.cfg.WriteQueues {
				return nil, 0, fmt.Errorf("%w: queue %d of topic %q, which has %d write queues", mq.ErrInvalidQueue, q, cfg.Name, tp.cfg.WriteQueues)
			}
		}
	}
	if q < 0 {
		q = int32((tp.rr.Add(1) - 1) % uint32(tp.cfg.WriteQueues))
	}
	return tp, q, nil
}

// checkWritable refuses a send to a topic producers may not write; sendable is
// isSendable(cfg.Name).
func checkWritable(cfg TopicConfig, sendable bool) error {
	switch {
	case !sendable:
		return fmt.Errorf("%w: %q is reserved", mq.ErrInvalidTopic, cfg.Name)
	case cfg.Perm&mq.PermWrite == 0:
		return fmt.Errorf("%w: topic %q is not writable", mq.ErrNoPermission, cfg.Name)
	case cfg.WriteQueues <= 0:
		return fmt.Errorf("%w: topic %q has no write queues", mq.ErrNoPermission, cfg.Name)
	}
	return nil
}

// checkMessage checks what of m the broker reads before storing it: its body size, its
// delay level, and on a retry topic its reconsume counts.
func (b *Broker) checkMessage(m *mq.Message, o *Origin) error {
	if err := b.checkBodySize(len(m.Body)); err != nil {
		return err
	}
	if _, err := delayOf(m.Properties); err != nil {
		return err
	}
	if mq.IsRetryTopic(m.Topic) {
		if _, _, _, err := b.reconsumeCounts(m.Properties, o.ReconsumeTimes); err != nil {
			return err
		}
	}
	return nil
}

// checkBodySize refuses a body of n bytes over Options.MaxMessageSize.
func (b *Broker) checkBodySize(n int) error {
	if n > b.opts.MaxMessageSize {
		return fmt.Errorf("%w: body of %d bytes, max %d", mq.ErrMessageTooLarge, n, b.opts.MaxMessageSize)
	}
	return nil
}

// SendBatch stores msgs, all of one topic, contiguously on one queue, in order. The queue is
// chosen once, by sel applied to the first message (round robin when nil). An empty batch
// stores nothing and returns no results and no error. Errors as Send's; a nil message, or
// messages of different topics, are mq.ErrInvalidArgument. Nothing is stored on error.
func (b *Broker) SendBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector) ([]mq.SendResult, error) {
	return b.SendBatchFrom(ctx, msgs, sel, Origin{})
}

// SendBatchFrom is SendBatch for messages that came from elsewhere: each stored message
// carries o's born time, born host and reconsume count (see SendFrom).
func (b *Broker) SendBatchFrom(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector, o Origin) ([]mq.SendResult, error) {
	tp, stored, bytes, err := b.prepareBatch(ctx, msgs, sel, &o)
	if err != nil || len(stored) == 0 {
		return nil, err
	}
	if err := b.appendSends(storePtrs(stored)); err != nil {
		return nil, appendErr(err)
	}
	tp.in.add(int64(len(msgs)), bytes)
	return b.results(stored), nil
}

// SendBatchAsyncFrom is SendBatchFrom as SendAsyncFrom is SendFrom: done is called with the
// batch's results once SendBatchFrom would have returned (see SendAsync). An empty batch
// stores nothing and calls done with no results.
func (b *Broker) SendBatchAsyncFrom(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector, o Origin, done func([]mq.SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendBatchAsyncFrom needs a done function", mq.ErrInvalidArgument)
	}
	tp, stored, bytes, err := b.prepareBatch(ctx, msgs, sel, &o)
	if err != nil {
		return err
	}
	if len(stored) == 0 {
		done(nil, nil)
		return nil
	}
	return appendErr(b.appendSendsAsync(storePtrs(stored), func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		tp.in.add(int64(len(stored)), bytes)
		done(b.results(stored), nil)
	}))
}

// prepareBatch checks a batch and returns its topic, the copies to store and the size of
// its bodies; an empty batch has none and no error.
func (b *Broker) prepareBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector, o *Origin) (*topic, []store.Message, int64, error) {
	if err := b.checkCtx(ctx); err != nil {
		return nil, nil, 0, err
	}
	if err := checkOrigin(o); err != nil {
		return nil, nil, 0, err
	}
	if len(msgs) == 0 {
		return nil, nil, 0, nil
	}
	for i, m := range msgs {
		switch {
		case m == nil:
			return nil, nil, 0, fmt.Errorf("%w: message %d of the batch is nil", mq.ErrInvalidArgument, i)
		case m.Topic != msgs[0].Topic:
			return nil, nil, 0, fmt.Errorf("%w: a batch holds one topic, got %q and %q", mq.ErrInvalidArgument, msgs[0].Topic, m.Topic)
		case isHalf(m.Topic, m.Properties):
			return nil, nil, 0, fmt.Errorf("%w: message %d of the batch is a transaction's half message: a batch cannot hold one", mq.ErrInvalidArgument, i)
		}
		if err := b.checkMessage(m, o); err != nil {
			return nil, nil, 0, err
		}
	}
	tp, q, err := b.sendQueue(msgs[0], sel)
	if err != nil {
		return nil, nil, 0, err
	}
	stored := make([]store.Message, len(msgs))
	var bytes int64
	for i, m := range msgs {
		storeCopy(m, q, &stored[i])
		stored[i].Durability = tp.cfg.Durability
		o.apply(&stored[i])
		if err := b.prepare(&stored[i]); err != nil {
			return nil, nil, 0, err
		}
		bytes += int64(len(m.Body))
	}
	return tp, stored, bytes, nil
}

// storePtrs returns pointers to the messages of stored.
func storePtrs(stored []store.Message) []*store.Message {
	ptrs := make([]*store.Message, len(stored))
	for i := range stored {
		ptrs[i] = &stored[i]
	}
	return ptrs
}

// results reports where the stored messages are.
func (b *Broker) results(stored []store.Message) []mq.SendResult {
	res := make([]mq.SendResult, len(stored))
	for i := range stored {
		res[i] = b.result(&stored[i])
	}
	return res
}

// prepare turns s, a copy of a message bound for its topic and queue, into what is stored:
// a retry message carries its reconsume count, and past its limit goes to the dead-letter
// topic; a delayed message goes to the schedule topic; a large body is compressed. The
// properties map is copied before it is changed: the caller's stays as it was.
func (b *Broker) prepare(s *store.Message) error {
	if mq.IsRetryTopic(s.Topic) {
		if err := b.prepareRetry(s); err != nil {
			return err
		}
	}
	level, err := delayOf(s.Properties)
	if err != nil {
		return err
	}
	if level > 0 {
		level = min(level, len(b.opts.DelayLevels))
		s.Properties = maps.Clone(s.Properties)
		s.Properties[mq.PropertyDelayLevel] = strconv.Itoa(level)
		s.Properties[mq.PropertyRealTopic] = s.Topic
		s.Properties[mq.PropertyRealQueueID] = strconv.Itoa(int(s.QueueID))
		s.Topic = mq.ScheduleTopic
		s.QueueID = int32(level - 1)
		if s.BornTime == 0 { // else delivery would show the schedule copy's store time
			s.BornTime = b.opts.Now().UnixMilli()
		}
		if _, err := b.topics.ensure(mq.ScheduleTopic); err != nil {
			return err
		}
	}
	b.compress(s)
	return nil
}

// compress compresses the body of s, a message about to be stored, if it is over
// Options.CompressOver and not compressed already.
func (b *Broker) compress(s *store.Message) {
	if b.opts.CompressOver > 0 && len(s.Body) > b.opts.CompressOver && s.SysFlag&mq.SysFlagCompressed == 0 {
		s.Body = b.zenc.EncodeAll(s.Body, make([]byte, 0, len(s.Body)/2))
		s.SysFlag |= mq.SysFlagCompressed | sysFlagZstd
	}
}

// prepareRetry handles a message a client sends to a retry topic itself (its send-back
// failed), as RocketMQ's handleRetryAndDLQ: the mq.PropertyReconsumeTime property becomes
// the message's reconsume count, and a message reconsumed more than its maximum
// (mq.PropertyMaxReconsumeTimes, else Options.MaxReconsumeTimes) goes to the group's
// dead-letter topic, undelayed.
func (b *Broker) prepareRetry(s *store.Message) error {
	n, maxTimes, ok, err := b.reconsumeCounts(s.Properties, 0)
	if err != nil || !ok {
		return err
	}
	s.Properties = maps.Clone(s.Properties)
	delete(s.Properties, mq.PropertyReconsumeTime)
	s.ReconsumeTimes = int32(n)
	if n <= maxTimes {
		return nil
	}
	delete(s.Properties, mq.PropertyDelayLevel)
	s.Topic, s.QueueID = mq.DLQTopic(s.Topic[len(mq.RetryPrefix):]), 0
	tp, err := b.topics.ensure(s.Topic)
	if err != nil {
		return err
	}
	if tp.cfg.Perm&mq.PermWrite == 0 {
		return fmt.Errorf("%w: topic %q is not writable", mq.ErrNoPermission, s.Topic)
	}
	return nil
}

// reconsumeCounts reads the reconsume count of a message sent to a retry topic
// (mq.PropertyReconsumeTime, else origin when > 0, its sender's count; ok is false when it
// has neither) and its maximum (mq.PropertyMaxReconsumeTimes, else, or when negative,
// Options.MaxReconsumeTimes).
func (b *Broker) reconsumeCounts(props map[string]string, origin int32) (n, maxTimes int64, ok bool, err error) {
	rt, ok := props[mq.PropertyReconsumeTime]
	switch {
	case ok:
		n, err = strconv.ParseInt(rt, 10, 32)
		if err != nil || n < 0 {
			return 0, 0, false, fmt.Errorf("%w: %s %q", mq.ErrInvalidArgument, mq.PropertyReconsumeTime, rt)
		}
	case origin > 0:
		n = int64(origin)
	default:
		return 0, 0, false, nil
	}
	maxTimes = int64(b.opts.MaxReconsumeTimes)
	if v, ok := props[mq.PropertyMaxReconsumeTimes]; ok {
		mx, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: %s %q", mq.ErrInvalidArgument, mq.PropertyMaxReconsumeTimes, v)
		}
		if mx >= 0 {
			maxTimes = mx
		}
	}
	return n, maxTimes, true, nil
}

// delayOf returns the delay level in props, 0 when none.
func delayOf(props map[string]string) (int, error) {
	m := mq.Message{Properties: props}
	return m.DelayLevel()
}

// decompress restores the body of a message the broker compressed.
func (b *Broker) decompress(m *store.Message) error {
	if m.SysFlag&mq.SysFlagCompressed == 0 || m.SysFlag&sysFlagCompressMs != sysFlagZstd {
		return nil
	}
	body, err := b.zdec.DecodeAll(m.Body, nil)
	if err != nil {
		return fmt.Errorf("edge: decompress message at %d: %w", m.Pos, err)
	}
	m.Body = body
	m.SysFlag &^= mq.SysFlagCompressed | sysFlagCompressMs
	return nil
}

func newZstd() (*zstd.Encoder, *zstd.Decoder, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(4), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		enc.Close()
		return nil, nil, err
	}
	return enc, dec, nil
}
