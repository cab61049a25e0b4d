package edge

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// TopicStats counts what producers sent to a topic, and what consumer groups pulled from it
// (all groups together), since the broker opened.
type TopicStats struct {
	MessagesIn  int64
	BytesIn     int64
	MessagesOut int64
	BytesOut    int64
}

// GroupStats counts what a consumer group pulled since the broker opened.
type GroupStats struct {
	MessagesOut int64
	BytesOut    int64
}

// QueueLag is how far a group is behind on one queue.
type QueueLag struct {
	QueueID        int32
	MaxOffset      int64 // next offset to be written
	ConsumerOffset int64 // the group's committed offset (-1: none)
	Lag            int64 // messages not yet consumed
}

type counters struct{ n, bytes atomic.Int64 }

type statsTable struct {
	topics    sync.Map // string -> *counters
	groups    sync.Map // string -> *counters
	topicsOut sync.Map // string -> *counters
}

func counter(m *sync.Map, k string) *counters {
	if c, ok := m.Load(k); ok {
		return c.(*counters)
	}
	c, _ := m.LoadOrStore(k, new(counters))
	return c.(*counters)
}

func (c *counters) load() (n, bytes int64) { return c.n.Load(), c.bytes.Load() }

func (c *counters) add(n, bytes int64) {
	c.n.Add(n)
	c.bytes.Add(bytes)
}

func (s *statsTable) in(topic string, n, bytes int64) { counter(&s.topics, topic).add(n, bytes) }

func (s *statsTable) out(group, topic string, n, bytes int64) {
	counter(&s.groups, group).add(n, bytes)
	counter(&s.topicsOut, topic).add(n, bytes)
}

// TopicStats returns the send and pull counters of topic: zero for a topic never sent to
// nor pulled from. They stay readable after Close.
func (b *Broker) TopicStats(topic string) TopicStats {
	var s TopicStats
	if b == nil {
		return s
	}
	if c, ok := b.stats.topics.Load(topic); ok {
		s.MessagesIn, s.BytesIn = c.(*counters).load()
	}
	if c, ok := b.stats.topicsOut.Load(topic); ok {
		s.MessagesOut, s.BytesOut = c.(*counters).load()
	}
	return s
}

// GroupStats returns the pull counters of group: zero for a group that never pulled a
// message. They stay readable after Close.
func (b *Broker) GroupStats(group string) GroupStats {
	if b == nil {
		return GroupStats{}
	}
	c, ok := b.stats.groups.Load(group)
	if !ok {
		return GroupStats{}
	}
	n, bytes := c.(*counters).load()
	return GroupStats{MessagesOut: n, BytesOut: bytes}
}

// Lag returns group's lag on each read queue of topic: messages stored but not yet consumed.
// Errors: ErrClosed, mq.ErrInvalidArgument for a bad group name (see mq.ValidateGroup),
// mq.ErrTopicNotExist.
func (b *Broker) Lag(group, topic string) ([]QueueLag, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return nil, err
	}
	tp, err := b.checkQueue(mq.MessageQueue{Topic: topic})
	if err != nil {
		return nil, err
	}
	out := make([]QueueLag, 0, tp.cfg.ReadQueues)
	for q := int32(0); q < tp.cfg.ReadQueues; q++ {
		l := QueueLag{QueueID: q, MaxOffset: b.st.MaxOffset(topic, q), ConsumerOffset: -1}
		from := b.st.MinOffset(topic, q)
		if off, ok := b.offsets.get(offsetKey{group, topic, q}); ok {
			l.ConsumerOffset = off
			from = max(off, from)
		}
		l.Lag = max(0, l.MaxOffset-from)
		out = append(out, l)
	}
	return out, nil
}

// QueueInfo describes one queue of a topic: the offsets it holds.
type QueueInfo struct {
	Topic     string
	QueueID   int32
	MinOffset int64 // first offset still stored
	MaxOffset int64 // next offset to be written
}

// Queues lists the queues of topic that hold or held messages, or of every topic when topic
// is "", sorted by topic then queue id. System topics are included. Errors: ErrClosed.
func (b *Broker) Queues(topic string) ([]QueueInfo, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	qs := b.st.Queues(topic)
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = QueueInfo{Topic: q.Topic, QueueID: q.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset}
	}
	slices.SortFunc(out, func(a, b QueueInfo) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	return out, nil
}

// StoreStats describes the commit log under the broker.
type StoreStats struct {
	// SegmentBytes is the size of the commit log's segment files on disk.
	SegmentBytes int64
	// MinPos and MaxPos bound the commit-log offsets of the messages still stored.
	MinPos, MaxPos int64
	// DurablePos: every message below it is on disk.
	DurablePos int64
	// DispatchedPos: every message below it is in its consume queue, where consumers find
	// it. MaxPos-DurablePos is the flush lag, DurablePos-DispatchedPos the dispatch lag.
	DispatchedPos int64
	// Fsyncs is the latency of the commit log's fsyncs since the broker opened.
	Fsyncs commitlog.FsyncHistogram
	// SegmentsDeleted and BytesDeleted count the commit log's segment files deleted since
	// the broker opened, by retention or to make room on a full disk.
	SegmentsDeleted, BytesDeleted int64
	// Recovery says what the store's recovery cut when the broker opened, after a crash or
	// power cut: records and bytes of the commit log, the .broken files that keep them
	// (made, deleted, left), and consume-queue entries.
	Recovery store.RecoveryStats
}

// StoreStats returns the state of the commit log. Errors: ErrClosed.
func (b *Broker) StoreStats() (StoreStats, error) {
	if err := b.check(); err != nil {
		return StoreStats{}, err
	}
	l := b.st.Log()
	ls := l.Stats()
	// Each position read before the one it trails: a later read is only larger.
	dispatched := b.st.DispatchedPos()
	durable := l.Durable()
	return StoreStats{SegmentBytes: l.Size(), MinPos: l.MinPos(), MaxPos: l.Written(), DurablePos: durable,
		DispatchedPos: dispatched, Fsyncs: ls.Fsyncs, SegmentsDeleted: ls.SegmentsDeleted, BytesDeleted: ls.BytesDeleted,
		Recovery: b.st.Recovery()}, nil
}

// TrafficStats sums the counters of every topic and every group since the broker opened.
type TrafficStats struct {
	MessagesIn, BytesIn   int64 // sent to any topic (TopicStats)
	MessagesOut, BytesOut int64 // pulled by any group (GroupStats)
}

// TrafficStats returns the sums of the send and pull counters. They stay readable after
// Close.
func (b *Broker) TrafficStats() TrafficStats {
	var s TrafficStats
	if b == nil {
		return s
	}
	b.stats.topics.Range(func(_, c any) bool {
		n, bytes := c.(*counters).load()
		s.MessagesIn, s.BytesIn = s.MessagesIn+n, s.BytesIn+bytes
		return true
	})
	b.stats.groups.Range(func(_, c any) bool {
		n, bytes := c.(*counters).load()
		s.MessagesOut, s.BytesOut = s.MessagesOut+n, s.BytesOut+bytes
		return true
	})
	return s
}
