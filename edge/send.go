package edge

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// SendResult says where a message was stored.
type SendResult struct {
	// Topic, QueueID and QueueOffset say where the message is stored now: for a delayed
	// message, its level's queue of ScheduleTopic until it is due.
	Topic       string
	QueueID     int32
	QueueOffset int64
	Pos         int64 // commitlog position: a stable id of the stored copy

	host netip.AddrPort // the broker's StoreHost, for MsgID
}

// MsgID returns RocketMQ's offsetMsgId of the stored copy: the store host and the commitlog
// position, as MessageID makes it. It is computed on each call, so that a send whose caller
// does not need the id does not allocate one.
func (r SendResult) MsgID() string { return MessageID(r.host, r.Pos) }

// Send stores m on a write queue of its topic chosen by sel (round robin when nil) and
// returns where. With the sync flush policy (the store's default) it returns once the message
// is on disk. Pulls see it once the store has dispatched it to its queue, normally
// microseconds later; a suspended pull waiting on the queue is woken by it. A message with a delay level is held in the schedule topic and delivered to its
// topic and queue when due. Errors: ErrInvalidTopic, ErrTopicNotExist (auto-creation off),
// ErrNoPermission, ErrInvalidQueue, ErrMessageTooLarge, ErrInvalidArgument; nothing is
// stored on error.
func (b *Broker) Send(ctx context.Context, m *Message, sel QueueSelector) (SendResult, error) {
	tp, s, q, err := b.prepareSend(ctx, m, sel)
	if err != nil {
		return SendResult{}, err
	}
	if s != nil {
		res, err := b.store([]*Message{s}, []*Message{m})
		if err != nil {
			return SendResult{}, err
		}
		return res[0], nil
	}
	// Stored as it is: the store fills in m's placement (as store does from a copy), and an
	// error leaves m as it was.
	saved := *m
	m.QueueID = q
	if err := b.st.Append([]*Message{m}); err != nil {
		*m = saved
		return SendResult{}, err
	}
	tp.in.add(1, int64(len(m.Body)))
	return b.result(m), nil
}

// SendAsync stores m as Send does without waiting for the fsync that covers it (RocketMQ's
// send with a SendCallback): done is called with the result once Send would have returned,
// so that one goroutine can keep many sends in flight, and they share fsyncs (group commit).
// Errors found before the message is written (those of Send, and the store's for a closed
// broker or a full disk) are returned, m is left as it was, and done is not called.
// Otherwise done is called exactly once: with the store's async flush policy before
// SendAsync returns, else from the store's acknowledgement goroutine, in the order the
// messages were stored; with an error if the fsync failed (the message was written, its
// durability is unknown). done must not block; m must not be changed until done is called.
func (b *Broker) SendAsync(ctx context.Context, m *Message, sel QueueSelector, done func(SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendAsync needs a done function", ErrInvalidArgument)
	}
	tp, s, q, err := b.prepareSend(ctx, m, sel)
	if err != nil {
		return err
	}
	saved := *m
	if s == nil { // stored as it is, as in Send
		s = m
		m.QueueID = q
	}
	op := asyncSends.Get().(*asyncSend)
	if op.complete == nil {
		op.complete = op.finish
	}
	op.b, op.tp, op.s, op.m, op.done = b, tp, s, m, done
	if err = b.st.AppendAsync([]*Message{s}, op.complete); err != nil {
		op.release()
		*m = saved
	}
	return err
}

// asyncSend is a SendAsync in flight. They are pooled, each with its complete method
// value made once, so that a send in flight allocates nothing of its own.
type asyncSend struct {
	b        *Broker
	tp       *topic
	s, m     *Message // the stored copy and the caller's message (the same without a copy)
	done     func(SendResult, error)
	complete func(error) // op.finish, bound once
}

var asyncSends = sync.Pool{New: func() any { return new(asyncSend) }}

// finish reports the store's outcome to the caller's done function and returns op to the
// pool: the store calls it exactly once.
func (op *asyncSend) finish(err error) {
	b, tp, s, m, done := op.b, op.tp, op.s, op.m, op.done
	op.release()
	if err != nil {
		done(SendResult{}, err)
		return
	}
	tp.in.add(1, int64(len(m.Body)))
	done(b.report(s, m), nil)
}

// release clears op, so that the pool holds no message, and puts it back.
func (op *asyncSend) release() {
	op.b, op.tp, op.s, op.m, op.done = nil, nil, nil, nil, nil
	asyncSends.Put(op)
}

// prepareSend checks a send of m and chooses its topic tp and queue q; s is the copy to
// store, or nil when m is stored as it is (see prepare). Nothing is changed on error.
func (b *Broker) prepareSend(ctx context.Context, m *Message, sel QueueSelector) (tp *topic, s *Message, q int32, err error) {
	tp, err = b.sendTopic(ctx, m.Topic)
	if err != nil {
		return nil, nil, 0, err
	}
	if q, err = b.chooseQueue(tp, m, sel); err != nil {
		return nil, nil, 0, err
	}
	if err := b.checkBody(m); err != nil {
		return nil, nil, 0, err
	}
	s, err = b.prepare(m, q)
	return tp, s, q, err
}

// report copies the placement of s, the stored copy of o, into o (or not, for a delayed
// message's queue fields, which would name the schedule queue) and returns the result of o.
func (b *Broker) report(s, o *Message) SendResult {
	if s.Topic == o.Topic {
		o.QueueID, o.QueueOffset = s.QueueID, s.QueueOffset
	}
	o.StoreTime, o.Pos, o.Size = s.StoreTime, s.Pos, s.Size
	return b.result(s)
}

// result reports where s, a stored message, is.
func (b *Broker) result(s *Message) SendResult {
	return SendResult{host: b.opts.StoreHost, Topic: s.Topic, QueueID: s.QueueID, QueueOffset: s.QueueOffset, Pos: s.Pos}
}

// validateSendTopic admits user topics and retry topics: RocketMQ clients whose send-back
// fails send the message to %RETRY%<group> themselves.
func validateSendTopic(name string) error {
	if strings.HasPrefix(name, RetryPrefix) && len(name) > len(RetryPrefix) {
		return validateName(name, maxSystemTopicLen)
	}
	return ValidateTopic(name)
}

// sendTopic returns the topic a send to name writes to, created if auto-creation is on.
func (b *Broker) sendTopic(ctx context.Context, name string) (*topic, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tp, ok := b.topics.get(name)
	if !ok || !tp.sendable {
		if err := validateSendTopic(name); err != nil {
			return nil, err
		}
		var err error
		if tp, err = b.topics.ensure(name); err != nil {
			return nil, err
		}
	}
	if tp.cfg.Perm&PermWrite == 0 {
		return nil, fmt.Errorf("%w: topic %q is not writable", ErrNoPermission, name)
	}
	return tp, nil
}

func (b *Broker) checkBody(m *Message) error {
	if len(m.Body) > b.opts.MaxMessageSize {
		return fmt.Errorf("%w: body of %d bytes, max %d", ErrMessageTooLarge, len(m.Body), b.opts.MaxMessageSize)
	}
	return nil
}

// SendBatch stores msgs, all of one topic, contiguously on one queue, in order. The queue is
// chosen once, by sel applied to the first message (round robin when nil).
func (b *Broker) SendBatch(ctx context.Context, msgs []*Message, sel QueueSelector) ([]SendResult, error) {
	if len(msgs) == 0 {
		if err := b.check(); err != nil {
			return nil, err
		}
		return nil, ctx.Err()
	}
	name := msgs[0].Topic
	tp, err := b.sendTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	q, err := b.chooseQueue(tp, msgs[0], sel)
	if err != nil {
		return nil, err
	}
	stored := make([]*Message, len(msgs))
	for i, m := range msgs {
		if m.Topic != name {
			return nil, fmt.Errorf("%w: a batch holds one topic, got %q and %q", ErrInvalidArgument, name, m.Topic)
		}
		if err := b.checkBody(m); err != nil {
			return nil, err
		}
		s, err := b.prepare(m, q)
		if err != nil {
			return nil, err
		}
		if s == nil {
			c := *m
			c.QueueID = q
			s = &c
		}
		stored[i] = s
	}
	return b.store(stored, msgs)
}

// store appends prepared messages and reports to the originals.
func (b *Broker) store(stored, orig []*Message) ([]SendResult, error) {
	if err := b.st.Append(stored); err != nil {
		return nil, err
	}
	res := make([]SendResult, len(stored))
	var bytes int64
	for i, s := range stored {
		res[i] = b.report(s, orig[i])
		bytes += int64(len(orig[i].Body))
	}
	b.stats.in(orig[0].Topic, int64(len(orig)), bytes)
	return res, nil
}

func (b *Broker) chooseQueue(tp *topic, m *Message, sel QueueSelector) (int32, error) {
	n := tp.cfg.WriteQueues
	if n <= 0 {
		return 0, fmt.Errorf("%w: topic %q has no write queues", ErrNoPermission, tp.cfg.Name)
	}
	var q int32
	if sel == nil {
		q = int32((tp.rr.Add(1) - 1) % uint32(n))
	} else {
		// sel gets a copy: m itself, passed to a function value, would escape, and every
		// caller's message would move to the heap, with a selector or without.
		c := *m
		q = sel(n, &c)
	}
	if q < 0 || q >= n {
		return 0, fmt.Errorf("%w: queue %d of topic %q, which has %d write queues", ErrInvalidQueue, q, tp.cfg.Name, n)
	}
	return q, nil
}

// prepare returns the copy of m to store on queue q when it must differ from m beyond its
// queue id: compressed when large, moved to the schedule topic when delayed. It returns nil
// when m can be stored as it is. m itself is not changed.
func (b *Broker) prepare(m *Message, q int32) (*Message, error) {
	level, err := DelayLevel(m)
	if err != nil {
		return nil, err
	}
	compress := b.opts.CompressOver > 0 && len(m.Body) > b.opts.CompressOver && m.SysFlag&SysFlagCompressed == 0
	if level <= 0 && !compress {
		return nil, nil
	}
	s := *m
	s.QueueID = q
	if level > 0 {
		level = min(level, len(b.opts.DelayLevels))
		s.Properties = maps.Clone(m.Properties)
		s.Properties[PropertyDelayLevel] = strconv.Itoa(level)
		s.Properties[PropertyRealTopic] = m.Topic
		s.Properties[PropertyRealQueueID] = strconv.Itoa(int(q))
		s.Topic = ScheduleTopic
		s.QueueID = int32(level - 1)
		if s.BornTime == 0 { // else delivery would show the schedule copy's store time
			s.BornTime = b.clock.Now().UnixMilli()
		}
		if _, err := b.topics.ensure(ScheduleTopic); err != nil {
			return nil, err
		}
	}
	if compress {
		s.Body = b.zenc.EncodeAll(m.Body, make([]byte, 0, len(m.Body)/2))
		s.SysFlag |= SysFlagCompressed | sysFlagZstd
	}
	return &s, nil
}

// decompress restores the body of a message the broker compressed.
func (b *Broker) decompress(m *Message) error {
	if m.SysFlag&SysFlagCompressed == 0 || m.SysFlag&sysFlagCompressMs != sysFlagZstd {
		return nil
	}
	body, err := b.zdec.DecodeAll(m.Body, nil)
	if err != nil {
		return fmt.Errorf("edge: decompress message at %d: %w", m.Pos, err)
	}
	m.Body = body
	m.SysFlag &^= SysFlagCompressed | sysFlagCompressMs
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
