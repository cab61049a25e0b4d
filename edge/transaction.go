package edge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// Transactions, as RocketMQ's transactional messages. A producer sends a transaction's half
// message (mq.PropertyTransactionPrepared "true", its producer group in
// mq.PropertyProducerGroup): the broker stores it in mq.TransHalfTopic, out of consumers'
// sight, with its real topic and queue in REAL_TOPIC and REAL_QID, and answers as for any
// send (the result's queue offset is the half message's, which ends the transaction). The
// producer then ends the transaction (EndTransaction): a commit stores the message again in
// its real topic and queue, where consumers receive it (still marked TRAN_MSG, as RocketMQ
// delivers it); a rollback leaves it. Either way an
// op record in mq.TransOpTopic (its body the half message's queue offset) marks the
// transaction ended. A half message not ended TransactionTimeout after it was stored is
// checked: the broker asks its producer group for the outcome (through the checker a network
// server installs, SetTransactionChecker), again every TransactionCheckInterval, at most
// TransactionCheckMax times; a transaction still not ended TransactionCheckInterval after its
// last check is discarded as rolled back (logged, with its op record). A transaction is ended
// once: a second commit or rollback of it is ignored.
//
// One goroutine (txnService.run) reads the op records and walks the half topic from the
// first half message not known to be ended. How far it got, the half topic's offset below
// which every transaction ended and the op topic's offset from which the ends past it are
// read again at the next open, are the offsets of group mq.TransCheckGroup, written after the
// records they cover are flushed. Check counts live in memory: after a restart a
// transaction is checked up to TransactionCheckMax times again.

// TxOutcome is how a producer ends a transaction.
type TxOutcome int8

const (
	// TxUnknown leaves the transaction open: the broker checks it later.
	TxUnknown TxOutcome = iota
	// TxCommit delivers the half message to its real topic and queue.
	TxCommit
	// TxRollback discards the half message.
	TxRollback
)

func (o TxOutcome) String() string {
	switch o {
	case TxUnknown:
		return "unknown"
	case TxCommit:
		return "commit"
	case TxRollback:
		return "rollback"
	}
	return "TxOutcome(" + strconv.Itoa(int(o)) + ")"
}

// EndTransaction is a producer's end of a transaction (RocketMQ's END_TRANSACTION).
type EndTransaction struct {
	// ProducerGroup must be the half message's.
	ProducerGroup string
	// HalfOffset is the half message's queue offset (its send result's QueueOffset;
	// RocketMQ's tranStateTableOffset), and CommitLogOffset its commit-log offset (from
	// its offset message id): both must match the half message.
	HalfOffset      int64
	CommitLogOffset int64
	Outcome         TxOutcome
	// FromCheck says the producer answers a check.
	FromCheck bool
}

// TransactionCheck is the broker's question to a producer group about a transaction whose
// outcome it was not told (RocketMQ's CHECK_TRANSACTION_STATE).
type TransactionCheck struct {
	// Group is the producer group (the half message's mq.PropertyProducerGroup).
	Group string
	// Message is the half message as its producer sent it: its real topic and queue, its
	// body, its properties; CommitLogOffset is the half message's, QueueOffset its offset
	// in the half topic.
	Message mq.MessageExt
	// HalfOffset and CommitLogOffset are what the producer's EndTransaction names.
	HalfOffset, CommitLogOffset int64
	// TransactionID is the message's unique id (its UNIQ_KEY property, else its offset
	// message id).
	TransactionID string
	// Check counts the checks of this transaction, from 1.
	Check int32
}

// errBadHalf marks a half message that cannot be delivered: no or a bad REAL_TOPIC or
// REAL_QID.
var errBadHalf = errors.New("edge: transaction's half message has no valid real topic or queue")

const (
	// txnBatch is the most half or op records read at once.
	txnBatch = 32
	// txnScanLimit bounds the half messages one round looks at.
	txnScanLimit = 4096
	// txnRetryDelay is how long the checker waits after a read or write error.
	txnRetryDelay = time.Second
	// txnOpTag tags the op records, as RocketMQ's ("d": removed).
	txnOpTag = "d"
)

// txnCheck is how often a half message was checked and when the next check is due (unix
// ms).
type txnCheck struct {
	count int32
	next  int64
}

// txnService holds what the broker knows of open transactions.
type txnService struct {
	b    *Broker
	kick chan struct{} // capacity 1: a half message arrived, or a transaction ended

	mu sync.Mutex
	// ended holds the transactions at or past halfNext known to be ended: half queue
	// offset → op queue offset of its op record (-1 while EndTransaction stores it).
	ended    map[int64]int64
	checks   map[int64]*txnCheck // by half queue offset
	checker  func(TransactionCheck) bool
	halfNext int64 // every transaction of a half message below it ended
	opNext   int64 // the next op record to read

	savedHalf, savedOp int64 // what the offsets table holds
	lastPersist        time.Time

	committed, rolledBack, discarded, checked atomic.Int64
}

// TransactionStats counts transactions since the broker opened.
type TransactionStats struct {
	// Open is how many transactions' half messages are stored without a known end: sent
	// and not yet committed, rolled back or discarded (an end is known to the count once
	// the checker has read it, within moments).
	Open int64
	// Committed, RolledBack and Discarded count the ends: by their producers, and after
	// the last check.
	Committed, RolledBack, Discarded int64
	// Checks counts the checks asked of producer groups (or due with no checker set).
	Checks int64
}

// TransactionStats returns the transaction counters. Errors: ErrClosed.
func (b *Broker) TransactionStats() (TransactionStats, error) {
	if err := b.check(); err != nil {
		return TransactionStats{}, err
	}
	t := b.txn
	st := TransactionStats{Committed: t.committed.Load(), RolledBack: t.rolledBack.Load(),
		Discarded: t.discarded.Load(), Checks: t.checked.Load()}
	stored := b.st.MaxOffset(mq.TransHalfTopic, 0)
	t.mu.Lock()
	st.Open = max(0, stored-t.halfNext-int64(len(t.ended)))
	t.mu.Unlock()
	return st, nil
}

var (
	txnHalfKey = offsetKey{group: mq.TransCheckGroup, topic: mq.TransHalfTopic}
	txnOpKey   = offsetKey{group: mq.TransCheckGroup, topic: mq.TransOpTopic}
)

func newTxnService(b *Broker) *txnService {
	t := &txnService{b: b, kick: make(chan struct{}, 1), ended: map[int64]int64{}, checks: map[int64]*txnCheck{},
		lastPersist: time.Now()}
	t.halfNext, _ = b.offsets.get(txnHalfKey)
	t.opNext, _ = b.offsets.get(txnOpKey)
	t.savedHalf, t.savedOp = t.halfNext, t.opNext
	return t
}

// SetTransactionChecker installs fn, which the broker calls to ask a producer group about a
// transaction whose outcome it was not told; fn reports whether it could ask (a producer of
// the group is connected). It is called from one goroutine and must not block. nil removes
// it: checks then only count towards TransactionCheckMax.
func (b *Broker) SetTransactionChecker(fn func(TransactionCheck) bool) {
	if b.check() != nil {
		return
	}
	b.txn.mu.Lock()
	b.txn.checker = fn
	b.txn.mu.Unlock()
}

// arrive is told of every record stored in the half topic. It never blocks.
func (t *txnService) arrive() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// prepareHalf turns s, a transaction's half message bound for its topic and queue, into what
// is stored: the same message in the half topic, its real topic and queue in properties.
func (b *Broker) prepareHalf(s *store.Message) error {
	g := s.Properties[mq.PropertyProducerGroup]
	if err := mq.ValidateProducerGroup(g); err != nil {
		return fmt.Errorf("%w: a transaction's half message needs its producer group in %s: %v", mq.ErrInvalidArgument, mq.PropertyProducerGroup, err)
	}
	if mq.IsSystemTopic(s.Topic) {
		return fmt.Errorf("%w: a transaction's message cannot go to system topic %q", mq.ErrInvalidArgument, s.Topic)
	}
	s.Properties = maps.Clone(s.Properties)
	s.Properties[mq.PropertyRealTopic] = s.Topic
	s.Properties[mq.PropertyRealQueueID] = strconv.Itoa(int(s.QueueID))
	s.Topic, s.QueueID = mq.TransHalfTopic, 0
	if s.BornTime == 0 { // else the delivered copy would show the commit's time
		s.BornTime = b.opts.Now().UnixMilli()
	}
	if _, err := b.topics.ensure(mq.TransHalfTopic); err != nil {
		return err
	}
	b.compress(s)
	return nil
}

// EndTransaction ends the transaction whose half message e names: a commit stores the
// message in its real topic and queue (as a send would: with its delay level, if any, and
// its topic's durability), a rollback drops it; TxUnknown changes nothing (the broker checks
// the transaction later). A transaction already ended is left as it ended. Errors:
// ErrClosed, ctx.Err(), mq.ErrInvalidArgument (a field out of range, or not the half
// message's), mq.ErrMessageNotFound (no half message there), and the store's.
func (b *Broker) EndTransaction(ctx context.Context, e EndTransaction) error {
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	switch {
	case e.Outcome != TxUnknown && e.Outcome != TxCommit && e.Outcome != TxRollback:
		return fmt.Errorf("%w: transaction outcome %d", mq.ErrInvalidArgument, e.Outcome)
	case e.HalfOffset < 0 || e.CommitLogOffset < 0:
		return fmt.Errorf("%w: half message at queue offset %d, commit-log offset %d", mq.ErrInvalidArgument, e.HalfOffset, e.CommitLogOffset)
	}
	if e.Outcome == TxUnknown {
		return nil
	}
	m, err := b.readMessage(e.CommitLogOffset)
	if err != nil {
		return err
	}
	switch {
	case m.Topic != mq.TransHalfTopic:
		return fmt.Errorf("%w: commit-log offset %d holds no transaction's half message", mq.ErrInvalidArgument, e.CommitLogOffset)
	case m.QueueOffset != e.HalfOffset:
		return fmt.Errorf("%w: the half message at commit-log offset %d has queue offset %d, not %d", mq.ErrInvalidArgument, e.CommitLogOffset, m.QueueOffset, e.HalfOffset)
	case m.Properties[mq.PropertyProducerGroup] != e.ProducerGroup:
		return fmt.Errorf("%w: the half message at commit-log offset %d is producer group %q's, not %q", mq.ErrInvalidArgument, e.CommitLogOffset, m.Properties[mq.PropertyProducerGroup], e.ProducerGroup)
	}
	t := b.txn
	if !t.claim(e.HalfOffset) {
		return nil // ended already, or being ended
	}
	if e.Outcome == TxCommit {
		if err := b.deliverHalf(m); err != nil {
			t.unclaim(e.HalfOffset)
			return err
		}
		t.committed.Add(1)
	} else {
		t.rolledBack.Add(1)
	}
	t.end(e.HalfOffset, b.storeOp(e.HalfOffset))
	return nil
}

// claim marks the transaction of the half message at off as being ended; false if it ended
// already or is being ended.
func (t *txnService) claim(off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.ended[off]; ok || off < t.halfNext {
		return false
	}
	t.ended[off] = -1
	return true
}

func (t *txnService) unclaim(off int64) {
	t.mu.Lock()
	delete(t.ended, off)
	t.mu.Unlock()
}

// end records that the transaction of the half message at off ended, its op record at op
// (-1: none stored: it is read from no op record, and after a restart the transaction may
// be checked again).
func (t *txnService) end(off, op int64) {
	t.mu.Lock()
	if off >= t.halfNext {
		t.ended[off] = max(op, -2) // -2: ended, no op record
	}
	delete(t.checks, off)
	t.mu.Unlock()
	t.arrive()
}

// storeOp stores the op record of the half message at off and returns its queue offset, or
// -2 if it could not be stored (logged).
func (b *Broker) storeOp(off int64) int64 {
	if _, err := b.topics.ensure(mq.TransOpTopic); err != nil {
		b.lg.Error("transaction ended, its op record not stored: it may be checked again after a restart", "half_offset", off, "err", err)
		return -2
	}
	op := &store.Message{Topic: mq.TransOpTopic, Tags: txnOpTag, Body: strconv.AppendInt(nil, off, 10),
		BornTime: b.opts.Now().UnixMilli()}
	if err := b.st.Append([]*store.Message{op}); err != nil {
		b.lg.Error("transaction ended, its op record not stored: it may be checked again after a restart", "half_offset", off, "err", err)
		return -2
	}
	return op.QueueOffset
}

// deliverHalf stores the committed half message m in its real topic and queue.
func (b *Broker) deliverHalf(m *store.Message) error {
	rt := m.Properties[mq.PropertyRealTopic]
	if rt == "" || mq.IsSystemTopic(rt) {
		return fmt.Errorf("%w: REAL_TOPIC %q", errBadHalf, rt)
	}
	q, err := strconv.ParseInt(m.Properties[mq.PropertyRealQueueID], 10, 32)
	if err != nil || q < 0 {
		return fmt.Errorf("%w: REAL_QID %q", errBadHalf, m.Properties[mq.PropertyRealQueueID])
	}
	tp, qid, err := b.realQueue(rt, q, errBadHalf, "committed")
	if err != nil {
		return err
	}
	c := *m
	c.Topic, c.QueueID = rt, qid
	c.QueueOffset, c.StoreTime, c.Pos, c.Size = 0, 0, 0, 0
	c.Durability = tp.cfg.Durability
	// The delivered message keeps TRAN_MSG, as RocketMQ's brokers store it: a Java consumer
	// reads its transaction id only from a message so marked.
	c.Properties = maps.Clone(m.Properties)
	delete(c.Properties, mq.PropertyRealTopic)
	delete(c.Properties, mq.PropertyRealQueueID)
	if err := b.prepare(&c); err != nil {
		return err
	}
	if err := b.st.Append([]*store.Message{&c}); err != nil {
		return appendErr(err)
	}
	return nil // counted in the topic's stats when its half message was sent
}

// run is the checker's goroutine; it returns when the broker closes.
func (t *txnService) run() {
	defer t.b.wg.Done()
	var tm *time.Timer
	defer func() {
		if tm != nil {
			tm.Stop()
		}
	}()
	for {
		wake := t.round()
		if t.dirty() {
			if now := time.Now(); !now.Before(t.lastPersist.Add(t.b.opts.OffsetPersistInterval)) {
				t.lastPersist = now
				if err := t.persist(); err != nil {
					t.b.lg.Error("persist transaction progress", "err", err)
				}
			}
			if at := t.lastPersist.Add(t.b.opts.OffsetPersistInterval); t.dirty() && (wake.IsZero() || at.Before(wake)) {
				wake = at
			}
		}
		var tc <-chan time.Time
		if !wake.IsZero() {
			if tm == nil {
				tm = time.NewTimer(time.Until(wake))
			} else {
				tm.Reset(time.Until(wake))
			}
			tc = tm.C
		}
		select {
		case <-t.b.done:
			return
		case <-t.kick:
		case <-tc:
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// round reads new op records, moves halfNext past ended transactions and checks (or
// discards) those due. It returns when to look again (zero: on the next arrival or end).
func (t *txnService) round() (wake time.Time) {
	b := t.b
	if err := t.readOps(); err != nil {
		b.lg.Error("read transaction op records: retrying", "offset", t.opNext, "err", err)
		return time.Now().Add(txnRetryDelay)
	}
	now := b.opts.Now().UnixMilli()
	at := func(ms int64) {
		if w := time.UnixMilli(ms); wake.IsZero() || w.Before(wake) {
			wake = w
		}
	}
	t.mu.Lock()
	off := t.halfNext
	t.mu.Unlock()
	head := true // every transaction below off ended
	for scanned := 0; scanned < txnScanLimit; {
		res, err := b.st.GetMessages(mq.TransHalfTopic, 0, off, txnBatch, nil)
		if err != nil {
			b.lg.Error("read transactions' half messages: retrying", "offset", off, "err", err)
			return time.Now().Add(txnRetryDelay)
		}
		switch res.Status {
		case store.Found:
		case store.OffsetFoundNull: // records gone or damaged: step over them
			t.advance(head, res.NextBeginOffset)
			off = res.NextBeginOffset
			continue
		case store.OffsetTooSmall:
			b.lg.Warn("transactions' half messages deleted by retention before they ended", "from", off, "to", res.NextBeginOffset)
			t.advance(head, res.NextBeginOffset)
			off = res.NextBeginOffset
			continue
		case store.OffsetOverflowBadly:
			b.lg.Warn("transaction progress is past the end of the half topic: moved back", "progress", off, "max", res.NextBeginOffset)
			t.mu.Lock()
			t.halfNext = res.NextBeginOffset
			t.mu.Unlock()
			return wake
		default: // nothing (more)
			return wake
		}
		for i := range res.Messages {
			m := &res.Messages[i]
			scanned++
			t.mu.Lock()
			op, ended := t.ended[m.QueueOffset]
			switch {
			case ended && op != -1 && head:
				delete(t.ended, m.QueueOffset)
				t.halfNext = m.QueueOffset + 1
			case ended:
				head = false
			}
			t.mu.Unlock()
			if ended {
				continue
			}
			head = false
			if due := m.StoreTime + b.opts.TransactionTimeout.Milliseconds(); due > now {
				at(due) // later half messages were stored later
				return wake
			}
			if next := t.check(m, now); next > 0 {
				at(next)
			}
		}
		off = res.NextBeginOffset
	}
	return time.Now() // more to look at
}

// advance moves halfNext to off when every transaction below off ended (head).
func (t *txnService) advance(head bool, off int64) {
	if !head {
		return
	}
	t.mu.Lock()
	if off > t.halfNext {
		t.halfNext = off
		for k := range t.ended {
			if k < off {
				delete(t.ended, k)
			}
		}
	}
	t.mu.Unlock()
}

// check asks about the open transaction of half message m, if a check is due, or discards
// it after its last; it returns when to look at it again (0: never).
func (t *txnService) check(m *store.Message, now int64) int64 {
	b := t.b
	interval := b.opts.TransactionCheckInterval.Milliseconds()
	t.mu.Lock()
	c := t.checks[m.QueueOffset]
	if c == nil {
		c = &txnCheck{}
		t.checks[m.QueueOffset] = c
	}
	if now < c.next {
		t.mu.Unlock()
		return c.next
	}
	if c.count >= b.opts.TransactionCheckMax {
		t.mu.Unlock()
		if !t.claim(m.QueueOffset) {
			return 0
		}
		b.lg.Warn("transaction not ended after its last check: discarded as rolled back",
			"group", m.Properties[mq.PropertyProducerGroup], "topic", m.Properties[mq.PropertyRealTopic],
			"half_offset", m.QueueOffset, "checks", c.count)
		t.discarded.Add(1)
		t.end(m.QueueOffset, b.storeOp(m.QueueOffset))
		return 0
	}
	t.checked.Add(1)
	c.count++
	c.next = now + interval
	n, fn := c.count, t.checker
	t.mu.Unlock()
	if fn != nil {
		ck := TransactionCheck{Group: m.Properties[mq.PropertyProducerGroup], HalfOffset: m.QueueOffset, CommitLogOffset: m.Pos, Check: n}
		hm := *m
		if err := b.decompress(&hm); err != nil {
			b.lg.Warn("transaction check: half message body", "half_offset", m.QueueOffset, "err", err)
		}
		ck.Message = b.ext(&hm)
		ck.Message.Topic = m.Properties[mq.PropertyRealTopic]
		if q, err := strconv.ParseInt(m.Properties[mq.PropertyRealQueueID], 10, 32); err == nil {
			ck.Message.QueueID = int32(q)
		}
		ck.TransactionID = ck.Message.MsgID()
		if !fn(ck) {
			b.lg.Debug("transaction check: no producer of the group connected", "group", ck.Group, "half_offset", m.QueueOffset, "check", n)
		}
	}
	return now + interval
}

// readOps reads the op records from opNext on.
func (t *txnService) readOps() error {
	b := t.b
	for {
		res, err := b.st.GetMessages(mq.TransOpTopic, 0, t.opNext, txnBatch, nil)
		if err != nil {
			return err
		}
		switch res.Status {
		case store.Found:
			t.mu.Lock()
			for i := range res.Messages {
				m := &res.Messages[i]
				off, err := strconv.ParseInt(string(m.Body), 10, 64)
				if err != nil || off < 0 {
					b.lg.Warn("transaction op record without a half message's offset: skipped", "offset", m.QueueOffset)
					continue
				}
				if op, ok := t.ended[off]; off >= t.halfNext && (!ok || op < 0) {
					t.ended[off] = m.QueueOffset
					delete(t.checks, off)
				}
			}
			t.mu.Unlock()
			t.opNext = res.NextBeginOffset
		case store.OffsetFoundNull, store.OffsetTooSmall:
			t.opNext = res.NextBeginOffset
		case store.OffsetOverflowBadly:
			t.opNext = res.NextBeginOffset
			return nil
		default:
			return nil
		}
	}
}

// progress returns what the offsets table should hold: halfNext, and the op offset from
// which every end at or past halfNext is read again.
func (t *txnService) progress() (half, op int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op = t.opNext
	for _, o := range t.ended {
		if o >= 0 && o < op {
			op = o
		}
	}
	return t.halfNext, op
}

func (t *txnService) dirty() bool {
	half, op := t.progress()
	return half != t.savedHalf || op != t.savedOp
}

// persist writes the progress into the offsets table once the records it covers are
// durable.
func (t *txnService) persist() error {
	half, op := t.progress()
	if half == t.savedHalf && op == t.savedOp {
		return nil
	}
	if err := t.b.st.Log().Flush(); err != nil {
		return fmt.Errorf("edge: flush before persisting transaction progress: %w", err)
	}
	t.b.offsets.set(txnHalfKey, half)
	t.b.offsets.set(txnOpKey, op)
	t.savedHalf, t.savedOp = half, op
	return nil
}

// close persists the progress. The broker calls it after run returned, before the offsets
// table's last write.
func (t *txnService) close() error { return t.persist() }
