package edge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// The properties of a batch item as they travel: name\x01value\x02 repeated, the message's
// tags and keys among them under these names.
const (
	itemNameSep  = '\x01'
	itemEntrySep = '\x02'
	itemTags     = "TAGS"
	itemKeys     = "KEYS"
)

// BatchItem is one message of a batch send as a producer lays it out on the wire (RocketMQ's
// batch item): its flag, its body, and its properties as they travel, name\x01value\x02
// repeated, the tags and keys among them as TAGS and KEYS.
type BatchItem struct {
	Flag       int32
	Body       []byte
	Properties []byte
}

// SendBatchItemsAsyncFrom is SendBatchAsyncFrom for the messages of topic that items hold,
// as a network server reads a batch send: it stores what SendBatchAsyncFrom stores for
// those messages, byte for byte, with its checks, results and errors, but without making a
// message and a properties map of each item; their properties go into the records as they
// are. The properties are read as RocketMQ's clients read them: TAGS and KEYS are the tags
// and keys, an entry without exactly one \x01 is skipped, and of a name given twice the
// last value counts. sel is applied to the first item's message. The broker keeps no
// reference to items once it returns, but the bytes they point to must not change until
// done is called. An empty batch stores nothing and calls done with no results.
func (b *Broker) SendBatchItemsAsyncFrom(ctx context.Context, topic string, items []BatchItem, sel mq.QueueSelector, o Origin, done func([]mq.SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendBatchItemsAsyncFrom needs a done function", mq.ErrInvalidArgument)
	}
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if err := checkOrigin(&o); err != nil {
		return err
	}
	if len(items) == 0 {
		done(nil, nil)
		return nil
	}
	ib := itemBatches.Get().(*itemBatch)
	if ib.complete == nil {
		ib.complete = ib.finish
	}
	ok, err := ib.prepare(b, topic, items, sel, &o)
	if err != nil || !ok {
		ib.release()
		if err != nil {
			return err
		}
		// A delay level or a retry topic: what the broker does with those reads the
		// message's properties map.
		msgs := make([]*mq.Message, len(items))
		for i := range items {
			msgs[i] = itemMessage(topic, &items[i])
		}
		return b.SendBatchAsyncFrom(ctx, msgs, sel, o, done)
	}
	ib.done = done
	if err := b.appendSendsAsync(ib.ptrs, ib.complete); err != nil {
		ib.release()
		return appendErr(err)
	}
	return nil
}

// SendEncodedAsyncFrom is SendAsyncFrom for a message as a network server reads a send:
// its topic, flag and body, and its properties as they travel (name\x01value\x02 repeated,
// its tags and keys among them as TAGS and KEYS, read as SendBatchItemsAsyncFrom reads a
// batch item's). It stores what SendAsyncFrom stores for that message, byte for byte, with
// its checks, results and errors, but without making the message's properties map: they go
// into the record as they are. queueID is the write queue's index, or negative for round
// robin. The bytes of body must not change until done is called.
func (b *Broker) SendEncodedAsyncFrom(ctx context.Context, topic string, flag int32, body []byte, props string, queueID int32, o Origin, done func(mq.SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendEncodedAsyncFrom needs a done function", mq.ErrInvalidArgument)
	}
	if mq.IsRetryTopic(topic) {
		return b.sendItemMessage(ctx, topic, flag, body, props, queueID, o, done)
	}
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if err := checkOrigin(&o); err != nil {
		return err
	}
	if err := b.checkBodySize(len(body)); err != nil {
		return err
	}
	op := asyncSends.Get().(*asyncSend)
	p := readItemProps(props, op.props[:0])
	op.props = p.props
	if p.slow { // a delay level or a transaction's mark: the message path reads them
		op.release()
		return b.sendItemMessage(ctx, topic, flag, body, props, queueID, o, done)
	}
	tp, q, err := b.sendQueueAt(&mq.Message{Topic: topic}, nil, queueID)
	if err != nil {
		op.release()
		return err
	}
	s := &op.s
	op.enc = itemRecord(s, topic, flag, body, &p, &o, op.enc[:0])
	s.QueueID, s.Durability = q, tp.cfg.Durability
	b.compress(s) // neither retried nor delayed: what prepare does is only this
	if !b.waitsForFsync(s.Durability) {
		// Acknowledged once written, as SendAsyncFrom's.
		err := b.appendSends(op.ptr0())
		if err == nil {
			tp.in.add(1, int64(len(body)))
			res := b.result(s)
			res.UniqID = p.uniq
			op.release()
			done(res, nil)
			return nil
		}
		op.release()
		return appendErr(err)
	}
	if op.complete == nil {
		op.complete = op.finish
	}
	op.b, op.tp, op.bytes, op.done, op.uniq = b, tp, int64(len(body)), done, p.uniq
	if err = b.appendSendsAsync(op.ptr0(), op.complete); err != nil {
		op.release()
	}
	return appendErr(err)
}

// itemRecord fills s with what is stored of a message of topic sent as flag, body and the
// properties p read of it, from origin o, its queue and durability aside; its properties
// are encoded onto enc, which it returns.
func itemRecord(s *store.Message, topic string, flag int32, body []byte, p *itemProps, o *Origin, enc []byte) []byte {
	start := len(enc)
	enc = store.AppendProperties(enc, p.props)
	*s = store.Message{Topic: topic, Flag: flag, Tags: p.tags, Keys: p.keys, Body: body,
		BornTime: o.BornTime, BornHost: o.BornHost, ReconsumeTimes: o.ReconsumeTimes}
	if len(enc) > start {
		s.EncodedProperties = enc[start:len(enc):len(enc)]
	}
	return enc
}

// sendItemMessage sends, through SendAsyncFrom, the message that SendEncodedAsyncFrom
// was given in parts.
func (b *Broker) sendItemMessage(ctx context.Context, topic string, flag int32, body []byte, props string, queueID int32, o Origin, done func(mq.SendResult, error)) error {
	var sel mq.QueueSelector
	if queueID >= 0 {
		sel = mq.QueueIndex(int(queueID))
	}
	return b.SendAsyncFrom(ctx, itemMessage(topic, &BatchItem{Flag: flag, Body: body, Properties: []byte(props)}), sel, o, done)
}

// itemBatch is a SendBatchItemsAsyncFrom in flight: the copies to store, their UNIQ_KEYs
// (for the results), their encoded properties and the size of their bodies. They are
// pooled, each with its complete method value made once, so that a batch reuses the
// buffers of one before.
type itemBatch struct {
	b        *Broker
	tp       *topic
	stored   []store.Message
	ptrs     []*store.Message // &stored[i], as AppendAsync takes them
	uniq     []string
	enc      []byte // the encoded properties of stored, back to back
	props    []store.Property
	bytes    int64
	done     func([]mq.SendResult, error)
	complete func(error) // ib.finish, bound once
}

var itemBatches = sync.Pool{New: func() any { return new(itemBatch) }}

// Bounds of what a pooled itemBatch keeps: a rare huge batch is left to the GC.
const (
	maxKeptItems    = 4096
	maxKeptEncBytes = 1 << 20
)

// finish reports the store's outcome to done and returns ib to the pool: the store calls it
// exactly once.
func (ib *itemBatch) finish(err error) {
	done := ib.done
	if err != nil {
		ib.release()
		done(nil, err)
		return
	}
	ib.tp.in.add(int64(len(ib.stored)), ib.bytes)
	res := ib.b.results(ib.stored)
	for i, u := range ib.uniq {
		res[i].UniqID = u
	}
	ib.release()
	done(res, nil)
}

// release clears ib, so that the pool holds no message, and puts it back.
func (ib *itemBatch) release() {
	clear(ib.stored)
	clear(ib.ptrs)
	clear(ib.uniq)
	clear(ib.props)
	ib.b, ib.tp, ib.done, ib.bytes = nil, nil, nil, 0
	if cap(ib.stored) > maxKeptItems || cap(ib.enc) > maxKeptEncBytes || cap(ib.props) > maxKeptItems {
		return
	}
	ib.stored, ib.ptrs, ib.uniq, ib.enc, ib.props = ib.stored[:0], ib.ptrs[:0], ib.uniq[:0], ib.enc[:0], ib.props[:0]
	itemBatches.Put(ib)
}

// prepare checks a batch of items of topic and fills ib with what to store, its properties
// encoded; ok is false (and nothing is done) for a batch the map path must store: one to a
// retry topic, or with an item that has a delay level property.
func (ib *itemBatch) prepare(b *Broker, topic string, items []BatchItem, sel mq.QueueSelector, o *Origin) (ok bool, err error) {
	if mq.IsRetryTopic(topic) {
		return false, nil
	}
	// One string holds every item's properties: the tags, keys and UNIQ_KEYs are parts of it.
	n := 0
	for i := range items {
		n += len(items[i].Properties)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := range items {
		sb.Write(items[i].Properties)
	}
	all := sb.String()
	ib.b = b
	ib.stored = slices.Grow(ib.stored[:0], len(items))[:len(items)]
	ib.ptrs = slices.Grow(ib.ptrs[:0], len(items))[:len(items)]
	ib.uniq = slices.Grow(ib.uniq[:0], len(items))[:len(items)]
	// Each record's properties take at most their length as sent and 4 bytes of count.
	ib.enc = slices.Grow(ib.enc[:0], n+4*len(items))
	at := 0
	for i := range items {
		it := &items[i]
		if err := b.checkBodySize(len(it.Body)); err != nil {
			return false, err
		}
		p := readItemProps(all[at:at+len(it.Properties)], ib.props[:0])
		ib.props = p.props[:0] // grown for the next
		at += len(it.Properties)
		if p.slow {
			return false, nil
		}
		s := &ib.stored[i]
		ib.enc = itemRecord(s, topic, it.Flag, it.Body, &p, o, ib.enc)
		ib.ptrs[i] = s
		ib.uniq[i] = p.uniq
		ib.bytes += int64(len(it.Body))
	}
	first := &mq.Message{Topic: topic}
	if sel != nil {
		first = itemMessage(topic, &items[0])
	}
	tp, q, err := b.sendQueue(first, sel)
	if err != nil {
		return false, err
	}
	for i := range ib.stored {
		s := &ib.stored[i]
		s.QueueID, s.Durability = q, tp.cfg.Durability
		b.compress(s) // neither retried nor delayed: what prepare does is only this
	}
	ib.tp = tp
	return true, nil
}

// itemProps is what readItemProps read of a batch item's properties.
type itemProps struct {
	tags, keys string
	uniq       string           // the UNIQ_KEY property's value
	props      []store.Property // the others, in key order, each key once
	slow       bool             // a delay level or transaction property is among them: the message path handles it
}

// readItemProps reads a batch item's properties p as RocketMQ's clients (and
// remoting.SetMessageProperties) read them: TAGS and KEYS go to tags and keys, the others
// are appended to props in key order, an entry without exactly one \x01 is skipped, and of
// a name given twice the last value counts. The strings are parts of p.
func readItemProps(p string, props []store.Property) itemProps {
	var r itemProps
	for p != "" {
		var entry string
		entry, p, _ = strings.Cut(p, string(itemEntrySep))
		name, value, ok := strings.Cut(entry, string(itemNameSep))
		if !ok || strings.IndexByte(value, itemNameSep) >= 0 {
			continue
		}
		switch name {
		case itemTags:
			r.tags = value
		case itemKeys:
			r.keys = value
		default:
			props = append(props, store.Property{Key: name, Value: value})
		}
	}
	// Sorted stably, so that of equal keys the last given is the last of its run.
	if len(props) <= 16 {
		for i := 1; i < len(props); i++ {
			for j := i; j > 0 && props[j-1].Key > props[j].Key; j-- {
				props[j-1], props[j] = props[j], props[j-1]
			}
		}
	} else {
		slices.SortStableFunc(props, func(a, b store.Property) int { return strings.Compare(a.Key, b.Key) })
	}
	w := 0
	for i := range props {
		if i+1 < len(props) && props[i+1].Key == props[i].Key {
			continue
		}
		switch props[i].Key {
		case mq.PropertyUniqKey:
			r.uniq = props[i].Value
		case mq.PropertyDelayLevel, mq.PropertyTransactionPrepared:
			r.slow = true // the message path delays the one and refuses the other
		}
		props[w] = props[i]
		w++
	}
	r.props = props[:w]
	return r
}

// itemMessage returns the message of topic that it holds, as remoting.DecodeBatch makes it.
func itemMessage(topic string, it *BatchItem) *mq.Message {
	m := &mq.Message{Topic: topic, Flag: it.Flag}
	if len(it.Body) > 0 {
		m.Body = it.Body
	}
	var arr [16]store.Property
	p := readItemProps(string(it.Properties), arr[:0])
	m.Tags, m.Keys = p.tags, p.keys
	if len(p.props) > 0 {
		m.Properties = make(map[string]string, len(p.props))
		for _, kv := range p.props {
			m.Properties[kv.Key] = kv.Value
		}
	}
	return m
}
