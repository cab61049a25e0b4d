package edge

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// errBadScheduled marks a message of the schedule topic that cannot be delivered: no or a
// bad REAL_TOPIC or REAL_QID. The scheduler logs and skips it.
var errBadScheduled = errors.New("edge: scheduled message has no valid real topic or queue")

const (
	// scheduleBatch is the most messages read from one level per round.
	scheduleBatch = 32
	// scheduleRetryDelay is how long the scheduler waits after a read or write error.
	scheduleRetryDelay = time.Second
)

// scheduler delivers delayed messages (RocketMQ's ScheduleMessageService). A delayed message
// waits in queue level-1 of mq.ScheduleTopic; it is due DelayLevels[level-1] after it was stored
// there. Within a level messages are in due order, so each level is a FIFO and only its head
// needs watching. One goroutine (run) serves every level: it sleeps until the earliest head
// is due, an arrival, or Close; then it stores every due message again in its real topic and
// queue, in due order across levels, and moves the level's progress (the next queue offset to
// deliver) past it. Progress is written to the meta store at most every
// OffsetPersistInterval and on Close, always after the deliveries it covers are durable: a
// crash repeats a few deliveries and loses none.
//
// The level state is owned by run; newScheduler fills it before run starts and close reads
// it after run returned.
type scheduler struct {
	b      *Broker
	kick   chan struct{} // capacity 1: a message arrived in the schedule topic
	levels []*delayLevel

	lastPersist time.Time
}

// delayLevel is the state of one level's queue.
type delayLevel struct {
	level int32 // 1-based
	delay int64 // ms
	next  int64 // next queue offset to deliver
	saved int64 // next as stored in the meta store
	// headOff is the offset of the first message found not yet due (-1: unknown), due at
	// headDue (unix ms). It stands while next == headOff: nothing before it is left.
	headOff, headDue int64
}

func (l *delayLevel) queue() int32 { return l.level - 1 }

// scheduled is a due message on its way to its real topic.
type scheduled struct {
	lv  *delayLevel
	off int64 // queue offset in the schedule topic
	due int64
	m   *store.Message // the schedule copy
}

func newScheduler(b *Broker) (*scheduler, error) {
	progress, err := b.meta.DelayProgress()
	if err != nil {
		return nil, fmt.Errorf("edge: load delay progress: %w", err)
	}
	n := int32(len(b.opts.DelayLevels))
	levels := n
	for _, q := range b.st.Queues(mq.ScheduleTopic) {
		if q.QueueID >= levels {
			levels = q.QueueID + 1
		}
	}
	if levels > n {
		// Left by a configuration with more levels: deliver them after the longest delay
		// rather than never.
		b.lg.Warn("schedule topic has queues beyond the configured delay levels: they get the last level's delay",
			"levels", n, "queues", levels)
	}
	// Progress writes are counted from the open.
	s := &scheduler{b: b, kick: make(chan struct{}, 1), lastPersist: time.Now()}
	for l := int32(1); l <= levels; l++ {
		d := b.opts.DelayLevels[min(l, n)-1]
		lv := &delayLevel{level: l, delay: d.Milliseconds(), headOff: -1}
		lv.next, lv.saved = progress[l], progress[l] // 0 if none is stored
		s.levels = append(s.levels, lv)
	}
	return s, nil
}

// arrive is told of every message stored in the schedule topic (from the store's dispatch,
// see Broker.onArrival). It never blocks.
func (s *scheduler) arrive(store.Arrival) {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run is the scheduler's goroutine; it returns when the broker closes.
func (s *scheduler) run() {
	defer s.b.wg.Done()
	var (
		t   *time.Timer
		tc  <-chan time.Time
		tAt time.Time
	)
	stop := func() {
		if t != nil {
			t.Stop()
		}
		t, tc, tAt = nil, nil, time.Time{}
	}
	defer stop()
	for {
		wake, again := s.round()
		if s.dirty() {
			// Batch progress writes: at most one per OffsetPersistInterval.
			if now := time.Now(); !now.Before(s.lastPersist.Add(s.b.opts.OffsetPersistInterval)) {
				s.lastPersist = now
				if err := s.persist(); err != nil {
					s.b.lg.Error("persist delay progress", "err", err)
				}
			}
			if at := s.lastPersist.Add(s.b.opts.OffsetPersistInterval); s.dirty() && (wake.IsZero() || at.Before(wake)) {
				wake = at
			}
		}
		if again { // more is due: go on unless closing
			select {
			case <-s.b.done:
				return
			default:
				continue
			}
		}
		if !wake.Equal(tAt) {
			stop()
			if !wake.IsZero() {
				t, tAt = time.NewTimer(time.Until(wake)), wake
				tc = t.C
			}
		}
		select {
		case <-s.b.done:
			return
		case <-s.kick:
		case <-tc:
			t, tc, tAt = nil, nil, time.Time{}
		}
	}
}

// round delivers what is due now. It returns when to look again (zero: on the next arrival
// only), or again when due messages are left for another round at once.
func (s *scheduler) round() (wake time.Time, again bool) {
	now := time.Now()
	nowMS := now.UnixMilli()
	var (
		batches   = make([][]scheduled, len(s.levels))
		ends      = make([]int64, len(s.levels))
		cutoff    = int64(1<<63 - 1)
		collected int
		failed    bool
	)
	for i, lv := range s.levels {
		ms, end, more, err := s.collect(lv, nowMS)
		if err != nil {
			s.b.lg.Error("read delayed messages: retrying", "level", lv.level, "offset", lv.next, "err", err)
			failed = true
		}
		batches[i], ends[i] = ms, end
		collected += len(ms)
		if more {
			// Messages of this level past the batch may be due before those of other
			// levels: deliver none due after the batch's last one this round.
			cutoff = min(cutoff, ms[len(ms)-1].due)
			again = true
		}
	}
	// Merge the levels' batches by due time, keeping each level's order.
	var merged []scheduled
	heads := make([]int, len(batches))
	for {
		best := -1
		for i, ms := range batches {
			if h := heads[i]; h < len(ms) && ms[h].due <= cutoff && (best < 0 || ms[h].due < batches[best][heads[best]].due) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		merged = append(merged, batches[best][heads[best]])
		heads[best]++
	}
	done := s.deliver(merged)
	if done < len(merged) {
		failed = true
	}
	handled := make(map[*delayLevel]int, len(s.levels))
	for _, sm := range merged[:done] {
		handled[sm.lv]++
	}
	for i, lv := range s.levels {
		if h := handled[lv]; h < len(batches[i]) {
			lv.next = batches[i][h].off
		} else {
			lv.next = ends[i]
		}
	}
	if failed {
		return now.Add(scheduleRetryDelay), false
	}
	if again || len(merged) < collected {
		return time.Time{}, true
	}
	for _, lv := range s.levels {
		if lv.headOff >= 0 && lv.headOff == lv.next && (wake.IsZero() || lv.headDue < wake.UnixMilli()) {
			wake = time.UnixMilli(lv.headDue)
		}
	}
	return wake, false
}

// collect reads the due messages at the head of lv, at most scheduleBatch. end is the
// level's progress once all of them are delivered; more says the level may hold further due
// messages.
func (s *scheduler) collect(lv *delayLevel, nowMS int64) (ms []scheduled, end int64, more bool, err error) {
	off := lv.next
	if lv.headOff == off && lv.headDue > nowMS {
		return nil, off, false, nil // the head is known and not due
	}
	q := lv.queue()
	for len(ms) < scheduleBatch {
		res, err := s.b.st.GetMessages(mq.ScheduleTopic, q, off, scheduleBatch-len(ms), nil)
		if err != nil {
			return ms, off, false, err
		}
		switch res.Status {
		case store.Found:
			for i := range res.Messages {
				m := &res.Messages[i]
				due := m.StoreTime + lv.delay
				if due > nowMS {
					lv.headOff, lv.headDue = m.QueueOffset, due
					return ms, m.QueueOffset, false, nil
				}
				ms = append(ms, scheduled{lv: lv, off: m.QueueOffset, due: due, m: m})
			}
			off = res.NextBeginOffset
		case store.OffsetFoundNull: // records gone or damaged: step over them
			off = res.NextBeginOffset
		case store.OffsetTooSmall:
			s.b.lg.Warn("delayed messages deleted by retention before they were due", "level", lv.level, "from", off, "to", res.NextBeginOffset)
			off = res.NextBeginOffset
		case store.OffsetOverflowBadly:
			s.b.lg.Warn("delay progress is past the end of its queue: moved back", "level", lv.level, "progress", off, "max", res.NextBeginOffset)
			return ms, res.NextBeginOffset, false, nil
		default: // nothing (more) in the queue
			return ms, off, false, nil
		}
	}
	return ms, off, true, nil
}

// deliver stores the messages in their real topics, in order, and returns how many it
// handled (delivered, or skipped as undeliverable). It stops at the first error that may
// pass, for a retry.
func (s *scheduler) deliver(ms []scheduled) int {
	copies := make([]*store.Message, len(ms))
	for i, sm := range ms {
		c, err := s.unwrap(sm.m)
		switch {
		case errors.Is(err, errBadScheduled) || errors.Is(err, mq.ErrInvalidTopic) || errors.Is(err, mq.ErrTopicNotExist):
			s.b.lg.Error("undeliverable delayed message: dropped", "level", sm.lv.level, "offset", sm.off, "pos", sm.m.Pos, "err", err)
		case err != nil:
			s.b.lg.Error("deliver delayed message: retrying", "level", sm.lv.level, "offset", sm.off, "err", err)
			return s.appendChunks(ms[:i], copies[:i])
		default:
			copies[i] = c
		}
	}
	return s.appendChunks(ms, copies)
}

// appendChunks appends the non-nil copies in batches of bounded size (one fsync each) and
// returns how many messages it handled.
func (s *scheduler) appendChunks(ms []scheduled, copies []*store.Message) int {
	limit := int(min(s.b.st.Log().SegmentSize()/4, 1<<30))
	done := 0
	for done < len(copies) {
		var chunk []*store.Message
		n, bytes := done, 0
		for ; n < len(copies) && (len(chunk) == 0 || bytes+int(ms[n].m.Size) <= limit); n++ {
			if c := copies[n]; c != nil {
				chunk = append(chunk, c)
				bytes += int(ms[n].m.Size)
			}
		}
		if err := s.b.st.Append(chunk); err != nil {
			if !permanentAppendErr(err) {
				s.b.lg.Error("deliver delayed messages: retrying", "err", err)
				return done
			}
			// One bad message fails the batch: find it.
			for ; done < n; done++ {
				if c := copies[done]; c != nil {
					if err := s.b.st.Append([]*store.Message{c}); err != nil {
						if !permanentAppendErr(err) {
							s.b.lg.Error("deliver delayed message: retrying", "err", err)
							return done
						}
						s.b.lg.Error("undeliverable delayed message: dropped", "level", ms[done].lv.level, "offset", ms[done].off, "err", err)
					}
				}
			}
		}
		done = n
	}
	return done
}

func permanentAppendErr(err error) bool {
	return errors.Is(err, store.ErrMessageTooLarge) || errors.Is(err, store.ErrInvalidMessage) || errors.Is(err, commitlog.ErrTooLarge)
}

// unwrap returns the copy of schedule message m to store in its real topic and queue, with
// the scheduling properties removed and everything else kept.
func (s *scheduler) unwrap(m *store.Message) (*store.Message, error) {
	rt := m.Properties[mq.PropertyRealTopic]
	if rt == "" || rt == mq.ScheduleTopic {
		return nil, fmt.Errorf("%w: REAL_TOPIC %q", errBadScheduled, rt)
	}
	qs := m.Properties[mq.PropertyRealQueueID]
	q, err := strconv.ParseInt(qs, 10, 32)
	if err != nil || q < 0 {
		return nil, fmt.Errorf("%w: REAL_QID %q", errBadScheduled, qs)
	}
	_, qid, err := s.b.realQueue(rt, q, errBadScheduled, "delayed")
	if err != nil {
		return nil, err
	}
	c := *m
	c.Topic, c.QueueID = rt, qid
	c.QueueOffset, c.StoreTime, c.Pos, c.Size = 0, 0, 0, 0
	c.Properties = maps.Clone(m.Properties)
	delete(c.Properties, mq.PropertyDelayLevel)
	delete(c.Properties, mq.PropertyRealTopic)
	delete(c.Properties, mq.PropertyRealQueueID)
	return &c, nil
}

// realQueue returns topic rt, made if it may be, and queue q of it, where a held message
// (what: "delayed", "committed") is delivered: another queue if q no longer exists (logged).
// A topic without queues is bad (wrapped in bad).
func (b *Broker) realQueue(rt string, q int64, bad error, what string) (*topic, int32, error) {
	tp, err := b.topics.ensure(rt)
	if err != nil {
		return nil, 0, err
	}
	if n := max(tp.cfg.ReadQueues, tp.cfg.WriteQueues); int32(q) >= n {
		if n <= 0 {
			return nil, 0, fmt.Errorf("%w: topic %q has no queues", bad, rt)
		}
		b.lg.Warn(what+" message's queue no longer exists: delivered to another", "topic", rt, "queue", q, "queues", n)
		q %= int64(n)
	}
	return tp, int32(q), nil
}

func (s *scheduler) dirty() bool {
	for _, lv := range s.levels {
		if lv.next != lv.saved {
			return true
		}
	}
	return false
}

// persist writes the progress of the levels that moved, once the deliveries it covers are
// durable.
func (s *scheduler) persist() error {
	changed := map[int32]int64{}
	for _, lv := range s.levels {
		if lv.next != lv.saved {
			changed[lv.level] = lv.next
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if err := s.b.st.Log().Flush(); err != nil {
		return fmt.Errorf("edge: flush before persisting delay progress: %w", err)
	}
	if err := s.b.meta.SetDelayProgress(changed); err != nil {
		return fmt.Errorf("edge: persist delay progress: %w", err)
	}
	for _, lv := range s.levels {
		if off, ok := changed[lv.level]; ok {
			lv.saved = off
		}
	}
	return nil
}

// close persists the progress. The broker calls it after run returned.
func (s *scheduler) close() error { return s.persist() }
