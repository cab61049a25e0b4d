package consumer

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// TopicStats are a consumer's counters for one topic since Start (RocketMQ's
// ConsumerStatsManager figures, as totals with their averages and rates).
type TopicStats struct {
	Pulls          int64         // pulls that found messages
	PullMsgs       int64         // messages pulled
	PullRT         time.Duration // mean round trip of a pull that found messages
	PullTPS        float64       // messages pulled per second since Start
	Consumes       int64         // listener calls
	ConsumeRT      time.Duration // mean listener call
	ConsumeOK      int64         // messages consumed
	ConsumeFailed  int64         // messages that failed (sent back or consumed again)
	ConsumeOKTPS   float64       // per second since Start
	ConsumeFailTPS float64       // per second since Start
	FlowControls   int64         // pulls held back by flow control
}

// Stats is a snapshot of a consumer's statistics.
type Stats struct {
	Group  string
	Topics map[string]TopicStats // by queue topic (retried messages count under the retry topic)
	// Lag is, per assigned queue, the broker's max offset minus the consumed offset.
	Lag map[mq.MessageQueue]int64
}

type topicCounters struct {
	pulls, pullMsgs, consumes, ok, failed, flow int64
	pullRT, consumeRT                           time.Duration
}

type statsTable struct {
	mu sync.Mutex
	m  map[string]*topicCounters
}

func newStatsTable() *statsTable { return &statsTable{m: map[string]*topicCounters{}} }

func (s *statsTable) get(topic string) *topicCounters {
	c, ok := s.m[topic]
	if !ok {
		c = &topicCounters{}
		s.m[topic] = c
	}
	return c
}

func (s *statsTable) pulled(topic string, rt time.Duration, n int) {
	s.mu.Lock()
	c := s.get(topic)
	c.pulls++
	c.pullMsgs += int64(n)
	c.pullRT += rt
	s.mu.Unlock()
}

func (s *statsTable) flowControl(topic string) {
	s.mu.Lock()
	s.get(topic).flow++
	s.mu.Unlock()
}

func (s *statsTable) consumed(topic string, rt time.Duration) {
	s.mu.Lock()
	c := s.get(topic)
	c.consumes++
	c.consumeRT += rt
	s.mu.Unlock()
}

func (s *statsTable) consumeResult(topic string, ok, failed int) {
	s.mu.Lock()
	c := s.get(topic)
	c.ok += int64(ok)
	c.failed += int64(failed)
	s.mu.Unlock()
}

// consumeTally adds up consecutive listener calls on one queue, to be recorded under one
// lock (tally).
type consumeTally struct {
	consumes, ok, failed int64
	rt                   time.Duration
}

// tally records t (listener calls, their time and results) and zeroes it.
func (s *statsTable) tally(topic string, t *consumeTally) {
	if *t == (consumeTally{}) {
		return
	}
	s.mu.Lock()
	c := s.get(topic)
	c.consumes += t.consumes
	c.consumeRT += t.rt
	c.ok += t.ok
	c.failed += t.failed
	s.mu.Unlock()
	*t = consumeTally{}
}

// Stats returns the consumer's counters per topic and its lag per assigned queue. Listener
// calls are counted in runs, at least every millisecond (settleInterval) and when a pulled
// batch's calls end, so the counters may trail the committed offsets (and Lag) by the calls
// of the last millisecond; after Shutdown they are complete.
func (pc *PushConsumer) Stats() Stats {
	st := Stats{Group: pc.opts.Group, Topics: map[string]TopicStats{}, Lag: map[mq.MessageQueue]int64{}}
	secs := time.Now().Sub(pc.started).Seconds()
	if secs <= 0 {
		secs = 1
	}
	pc.stats.mu.Lock()
	for topic, c := range maps.All(pc.stats.m) {
		ts := TopicStats{Pulls: c.pulls, PullMsgs: c.pullMsgs, Consumes: c.consumes, ConsumeOK: c.ok,
			ConsumeFailed: c.failed, FlowControls: c.flow,
			PullTPS: float64(c.pullMsgs) / secs, ConsumeOKTPS: float64(c.ok) / secs, ConsumeFailTPS: float64(c.failed) / secs}
		if c.pulls > 0 {
			ts.PullRT = c.pullRT / time.Duration(c.pulls)
		}
		if c.consumes > 0 {
			ts.ConsumeRT = c.consumeRT / time.Duration(c.consumes)
		}
		st.Topics[topic] = ts
	}
	pc.stats.mu.Unlock()
	if pc.offsets == nil {
		return st
	}
	ctx, cancel := pc.opts.callCtx(context.Background()) // Stats works after Shutdown too
	defer cancel()
	for _, queue := range pc.assigned() {
		maxOff, err := pc.b.MaxOffset(ctx, queue)
		if err != nil {
			continue
		}
		off, err := pc.offsets.Read(ctx, queue, readMemoryThenStore)
		if err != nil || off < 0 {
			off = 0
		}
		st.Lag[queue] = max(maxOff-off, 0)
	}
	return st
}
