package main

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/uplink"
)

// web holds the status page: plain HTML, CSS and JavaScript, served as they are.
//
//go:embed web
var web embed.FS

// webFS is web's folder web/, the root of the page's files.
func webFS() http.FileSystem {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded folder exists: a broken build
	}
	return http.FS(sub)
}

// statusJSON is what GET /api/status returns; the status page shows it.
type statusJSON struct {
	Version       string  `json:"version"`
	Time          string  `json:"time"` // RFC 3339, when the status was taken
	UptimeSeconds float64 `json:"uptimeSeconds"`
	// State is "recovering" (the store opens), "serving" or "stopping".
	State string `json:"state"`
	Ready bool   `json:"ready"`
	// Health is "ok", or why the store's health check fails.
	Health      string `json:"health"`
	Listen      string `json:"listen,omitempty"` // the remoting server's address
	Connections int    `json:"connections"`
	// RateWindowSeconds is the time over which the rates are measured (up to 10s).
	RateWindowSeconds float64          `json:"rateWindowSeconds"`
	Topics            []topicStatus    `json:"topics"`
	Groups            []groupStatus    `json:"groups"`
	Store             *storeStatus     `json:"store,omitempty"`
	Disk              *diskStatus      `json:"disk,omitempty"`
	RecentErrors      []logEntry       `json:"recentErrors"`
	WarningsSeen      int64            `json:"warningsSeen"` // warnings and errors logged since start
	Uplink            uplinkStatusJSON `json:"uplink"`
}

type topicStatus struct {
	Name        string  `json:"name"`
	Queues      int32   `json:"queues"`
	Stored      int64   `json:"stored"` // messages in its queues (max less min offset)
	MessagesIn  int64   `json:"messagesIn"`
	MessagesOut int64   `json:"messagesOut"`
	BytesIn     int64   `json:"bytesIn"`
	BytesOut    int64   `json:"bytesOut"`
	InRate      float64 `json:"inRate"`  // messages per second
	OutRate     float64 `json:"outRate"` // messages per second
}

type groupStatus struct {
	Name        string          `json:"name"`
	Lag         int64           `json:"lag"` // on every topic together
	MessagesOut int64           `json:"messagesOut"`
	OutRate     float64         `json:"outRate"`
	Topics      []groupTopicLag `json:"topics"`
}

type groupTopicLag struct {
	Topic string `json:"topic"`
	Lag   int64  `json:"lag"`
}

type storeStatus struct {
	CommitlogBytes   int64   `json:"commitlogBytes"`
	FlushLagBytes    int64   `json:"flushLagBytes"`
	DispatchLagBytes int64   `json:"dispatchLagBytes"`
	Fsyncs           int64   `json:"fsyncs"`
	FsyncAvgSeconds  float64 `json:"fsyncAvgSeconds"`
	SegmentsDeleted  int64   `json:"segmentsDeleted"`
}

type diskStatus struct {
	Dir        string `json:"dir"`
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
	UsedBytes  uint64 `json:"usedBytes"`
}

// uplinkStatusJSON is the uplink's part of the status: its rules, up rules first.
type uplinkStatusJSON struct {
	Configured bool               `json:"configured"`
	Note       string             `json:"note,omitempty"`
	Rules      []uplinkRuleStatus `json:"rules"`
}

// uplinkRuleStatus is one rule's state, backlog and totals since start.
type uplinkRuleStatus struct {
	Name      string `json:"name"`
	Direction string `json:"direction"` // "up" or "down"
	Upstream  string `json:"upstream"`
	// State is "idle", "connected", "draining" or "backing_off".
	State string `json:"state"`
	// Backlog, BacklogBytes and OldestAgeSeconds are an up rule's messages not yet
	// acknowledged upstream, the commit log bytes from the oldest to the log's end, and how
	// long ago the oldest was stored; 0 for a down rule.
	Backlog          int64   `json:"backlog"`
	BacklogBytes     int64   `json:"backlogBytes"`
	OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
	// Forwarded counts an up rule's messages acknowledged upstream, or a down rule's
	// messages stored locally.
	Forwarded int64  `json:"forwarded"`
	Failures  int64  `json:"failures"`
	LastError string `json:"lastError,omitempty"`
	// Lag is a down rule's upstream messages not yet stored locally.
	Lag *int64 `json:"lag,omitempty"`
}

// uplinkStatus returns the status of u's rules; u nil is no uplink.
func uplinkStatus(u *uplink.Uplink) uplinkStatusJSON {
	if u == nil {
		return uplinkStatusJSON{Note: "no uplink configured", Rules: []uplinkRuleStatus{}}
	}
	st := u.Stats()
	out := uplinkStatusJSON{Configured: true, Rules: make([]uplinkRuleStatus, 0, len(st.Up)+len(st.Down))}
	for _, r := range st.Up {
		out.Rules = append(out.Rules, uplinkRuleStatus{Name: r.Name, Direction: "up", Upstream: r.Upstream, State: r.State.String(),
			Backlog: r.Backlog, BacklogBytes: r.BacklogBytes, OldestAgeSeconds: r.OldestAge.Seconds(), Forwarded: r.Forwarded,
			Failures: r.Failures, LastError: r.LastError})
	}
	for _, d := range st.Down {
		lag := d.Lag
		out.Rules = append(out.Rules, uplinkRuleStatus{Name: d.Name, Direction: "down", Upstream: d.Upstream, State: d.State.String(),
			Forwarded: d.Received, Failures: d.Failures, LastError: d.LastError, Lag: &lag})
	}
	return out
}

// handleStatus answers GET /api/status.
func (m *monitor) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, m.status(r.Context()))
}

func (m *monitor) status(ctx context.Context) statusJSON {
	now := time.Now()
	st := statusJSON{Version: version, Time: now.UTC().Format(time.RFC3339), UptimeSeconds: now.Sub(m.started).Seconds(),
		State: m.state(), Ready: m.ready.Load(), Health: "ok", Topics: []topicStatus{}, Groups: []groupStatus{},
		Uplink: uplinkStatus(m.uplink.Load())}
	st.RecentErrors, st.WarningsSeen = m.recent.entries()
	if s := m.srv.Load(); s != nil {
		st.Listen, st.Connections = s.Addr().String(), s.Conns()
	}
	b := m.broker.Load()
	if b == nil {
		return st
	}
	if err := b.Health(m.stall); err != nil {
		st.Health = err.Error()
	}
	rates, window := m.rates.rates()
	st.RateWindowSeconds = window.Seconds()
	topics := b.Topics()
	sortTopics(topics)
	stored := map[string]int64{}
	if qs, err := b.Queues(""); err == nil {
		for _, q := range qs {
			stored[q.Topic] += q.MaxOffset - q.MinOffset
		}
	}
	for _, t := range topics {
		if mq.IsSystemTopic(t.Name) {
			continue
		}
		ts := b.TopicStats(t.Name)
		r := rates["t/"+t.Name]
		st.Topics = append(st.Topics, topicStatus{Name: t.Name, Queues: t.WriteQueues, Stored: stored[t.Name],
			MessagesIn: ts.MessagesIn, MessagesOut: ts.MessagesOut, BytesIn: ts.BytesIn, BytesOut: ts.BytesOut,
			InRate: r.in, OutRate: r.out})
	}
	lags := brokerLags(ctx, b)
	for _, g := range lagGroups(b, lags) {
		gs := groupStatus{Name: g, MessagesOut: b.GroupStats(g).MessagesOut, OutRate: rates["g/"+g].out, Topics: []groupTopicLag{}}
		for _, l := range lags {
			if l.Group != g {
				continue
			}
			gs.Lag += l.Lag
			if n := len(gs.Topics); n > 0 && gs.Topics[n-1].Topic == l.Topic {
				gs.Topics[n-1].Lag += l.Lag
			} else {
				gs.Topics = append(gs.Topics, groupTopicLag{Topic: l.Topic, Lag: l.Lag})
			}
		}
		st.Groups = append(st.Groups, gs)
	}
	if ss, err := b.StoreStats(); err == nil {
		s := &storeStatus{CommitlogBytes: ss.SegmentBytes, FlushLagBytes: max(0, ss.MaxPos-ss.DurablePos),
			DispatchLagBytes: max(0, ss.DurablePos-ss.DispatchedPos), Fsyncs: ss.Fsyncs.Count, SegmentsDeleted: ss.SegmentsDeleted}
		if ss.Fsyncs.Count > 0 {
			s.FsyncAvgSeconds = ss.Fsyncs.Sum.Seconds() / float64(ss.Fsyncs.Count)
		}
		st.Store = s
	}
	if d, err := b.DiskStats(); err == nil {
		st.Disk = &diskStatus{Dir: d.Dir, TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes, UsedBytes: d.UsedBytes()}
	}
	return st
}

// rateSampler samples the topics' and groups' message counters every period and keeps the
// samples of the last window, from which rates are measured. Its goroutine is stopped by
// stop.
type rateSampler struct {
	b      *edge.Broker
	period time.Duration
	keep   int // samples kept: window / period + 1

	mu      sync.Mutex // guards samples; a leaf
	samples []rateSample

	done chan struct{}
	wg   sync.WaitGroup
}

type rateSample struct {
	at       time.Time
	counters map[string][2]int64 // "t/topic" or "g/group" -> messages in, out
}

type rate struct{ in, out float64 }

// rateWindow is the time over which the status page's rates are measured, rateEvery how
// often the counters are sampled.
const (
	rateWindow = 10 * time.Second
	rateEvery  = time.Second
)

func startRateSampler(b *edge.Broker, period, window time.Duration) *rateSampler {
	s := &rateSampler{b: b, period: period, keep: int(window/period) + 1, done: make(chan struct{})}
	s.sample()
	s.wg.Add(1)
	go s.run()
	return s
}

func (s *rateSampler) run() {
	defer s.wg.Done()
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *rateSampler) sample() {
	c := map[string][2]int64{}
	for _, t := range s.b.Topics() {
		ts := s.b.TopicStats(t.Name)
		c["t/"+t.Name] = [2]int64{ts.MessagesIn, ts.MessagesOut}
	}
	for _, g := range s.b.Groups() {
		c["g/"+g] = [2]int64{0, s.b.GroupStats(g).MessagesOut}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, rateSample{at: time.Now(), counters: c})
	if len(s.samples) > s.keep {
		s.samples = append(s.samples[:0], s.samples[len(s.samples)-s.keep:]...)
	}
}

// rates returns the messages per second in and out of each counter between the oldest and
// the newest sample, and the time between them (0 and no rates with fewer than 2 samples).
func (s *rateSampler) rates() (map[string]rate, time.Duration) {
	if s == nil {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) < 2 {
		return nil, 0
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	d := last.at.Sub(first.at)
	secs := d.Seconds()
	out := make(map[string]rate, len(last.counters))
	for k, v := range last.counters {
		p := first.counters[k] // zero when the topic or group is new
		out[k] = rate{in: float64(v[0]-p[0]) / secs, out: float64(v[1]-p[1]) / secs}
	}
	return out, d
}

// stop stops the sampler's goroutine and waits for it. A nil sampler does nothing.
func (s *rateSampler) stop() {
	if s == nil {
		return
	}
	close(s.done)
	s.wg.Wait()
}
