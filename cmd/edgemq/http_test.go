package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store"
)

// monitored is a broker in a temp dir with its remoting server and a monitor on
// 127.0.0.1:0, as serve wires them.
type monitored struct {
	b    *edge.Broker
	srv  *server.Server
	mon  *monitor
	base string // http://127.0.0.1:port
	lg   *slog.Logger
}

// startMonitored starts a monitor, then the broker and server; serving is left to the test
// unless serve is true.
func startMonitored(t *testing.T, serve bool) *monitored {
	t.Helper()
	recent := newRecentLog(recentErrors)
	lg := slog.New(newRecentHandler(slog.NewTextHandler(io.Discard, nil), recent))
	mon, err := startMonitor("127.0.0.1:0", lg, recent, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.shutdown(context.Background()) })
	b, err := edge.Open(t.TempDir(), &edge.Options{Logger: lg, DefaultQueues: 2, MaxMessageSize: 64 << 10,
		Store: &store.Options{SegmentSize: 4 << 20, QueueSegmentEntries: 1024, MetaNoSync: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv, err := server.Start(b, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := &monitored{b: b, srv: srv, mon: mon, base: "http://" + mon.Addr().String(), lg: lg}
	if serve {
		mon.serving(b, srv)
	}
	return m
}

// get returns the status code and body of GET path.
func (m *monitored) get(t *testing.T, path string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(m.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// traffic sends n messages to each topic and has group g pull from topic pulled, over the
// remoting server: requests and replies to count.
func (m *monitored) traffic(t *testing.T, topics []string, n int, g, pulled string) {
	t.Helper()
	ctx := context.Background()
	c, err := remoting.Dial(ctx, m.srv.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, topic := range topics {
		for i := range n {
			if _, err := c.Send(ctx, &mq.Message{Topic: topic, Body: []byte("body-" + string(rune('a'+i%26)))}, nil); err != nil {
				t.Fatalf("send to %s: %v", topic, err)
			}
		}
	}
	// g reads queue 0 of pulled and commits: the other queue's messages are its lag.
	q := mq.MessageQueue{Topic: pulled, BrokerName: "edgemq", QueueID: 0}
	res, err := m.b.Pull(ctx, mq.PullRequest{Group: g, Queue: q, Filter: "*", MaxMsgs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.b.CommitOffset(ctx, g, q, res.NextBeginOffset); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsScrape: /metrics parses back strictly, names its families by Prometheus's
// conventions, and its numbers are the broker's and the server's, for topic names with
// the odd characters RocketMQ allows.
func TestMetricsScrape(t *testing.T) {
	m := startMonitored(t, true)
	topics := []string{"Orders", "a%b|c-d_e"}
	m.traffic(t, topics, 5, "G|1", "a%b|c-d_e")
	code, body, h := m.get(t, "/metrics")
	if code != 200 || h.Get("Content-Type") != contentType {
		t.Fatalf("GET /metrics: %d, %q", code, h.Get("Content-Type"))
	}
	p, err := parseExposition(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	for name, typ := range p.types {
		if !strings.HasPrefix(name, "edgemq_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "go_") {
			t.Errorf("family %s lacks the edgemq_ prefix", name)
		}
		if p.help[name] == "" {
			t.Errorf("family %s has no help", name)
		}
		if typ == "counter" && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s lacks _total", name)
		}
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		fam := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(name, suf); ok && p.types[f] == "histogram" {
				fam = f
			}
		}
	next:
		for _, s := range p.samples[fam] {
			if s.name != name {
				continue
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if s.labels[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return s.value
		}
		t.Fatalf("no sample of %s with %v\n%s", name, labels, body)
		return 0
	}
	for _, topic := range topics {
		st := m.b.TopicStats(topic)
		if got := value("edgemq_topic_messages_in_total", "topic", topic); got != 5 || float64(st.MessagesIn) != got {
			t.Errorf("%s messages in: got %v, want 5", topic, got)
		}
		if got := value("edgemq_topic_bytes_in_total", "topic", topic); got != float64(st.BytesIn) {
			t.Errorf("%s bytes in: got %v, want %d", topic, got, st.BytesIn)
		}
	}
	lags, err := m.b.Lag("G|1", "a%b|c-d_e")
	if err != nil {
		t.Fatal(err)
	}
	var pulled, lag float64
	for _, l := range lags {
		got := value("edgemq_group_lag_messages", "group", "G|1", "topic", "a%b|c-d_e", "queue", string(rune('0'+l.QueueID)))
		if got != float64(l.Lag) {
			t.Errorf("lag of queue %d: got %v, want %d", l.QueueID, got, l.Lag)
		}
		lag += got
	}
	pulled = value("edgemq_group_messages_out_total", "group", "G|1")
	if lag == 0 || pulled == 0 || lag+pulled != 5 {
		t.Errorf("group G|1: lag %v + pulled %v, want 5 with neither 0", lag, pulled)
	}
	if got := value("edgemq_remoting_requests_total", "code", "310"); got != 10 { // SEND_MESSAGE_V2
		t.Errorf("send requests: got %v, want 10", got)
	}
	if got := value("edgemq_remoting_replies_total", "code", "0"); got < 10 {
		t.Errorf("success replies: got %v, want at least 10", got)
	}
	if got := value("edgemq_store_fsync_duration_seconds_count"); got == 0 || got != value("edgemq_store_fsync_duration_seconds_bucket", "le", "+Inf") {
		t.Errorf("fsync count %v, want > 0 and the +Inf bucket", got)
	}
	if d, _ := m.b.DiskStats(); value("edgemq_disk_total_bytes") != float64(d.TotalBytes) {
		t.Errorf("disk total: got %v, want %d", value("edgemq_disk_total_bytes"), d.TotalBytes)
	}
	for _, fam := range []string{"process_resident_memory_bytes", "go_goroutines", "edgemq_store_flush_lag_bytes",
		"edgemq_store_dispatch_lag_bytes", "edgemq_recovery_cut_records_total", "edgemq_store_retention_deleted_segments_total",
		"edgemq_disk_free_bytes", "edgemq_remoting_connections", "edgemq_remoting_pulls_answered_inline_total",
		"edgemq_remoting_pull_workers", "edgemq_remoting_pull_streams_ended_total"} {
		if len(p.samples[fam]) != 1 {
			t.Errorf("%s: %d samples, want 1", fam, len(p.samples[fam]))
		}
	}
	if value("edgemq_ready") != 1 || value("edgemq_store_healthy") != 1 || value("process_resident_memory_bytes") < 1<<20 {
		t.Errorf("ready %v, healthy %v, rss %v", value("edgemq_ready"), value("edgemq_store_healthy"), value("process_resident_memory_bytes"))
	}
}

// TestProbes: /readyz answers 503 until serving and again once stopping; /healthz answers
// 200 during recovery and while the store is healthy, and 503 with the reason when the
// broker's health check fails (here: the broker is closed).
func TestProbes(t *testing.T) {
	m := startMonitored(t, false)
	if code, body, _ := m.get(t, "/readyz"); code != 503 || !strings.Contains(body, "recovering") {
		t.Errorf("readyz before serving: %d %q, want 503 recovering", code, body)
	}
	if code, body, _ := m.get(t, "/healthz"); code != 200 {
		t.Errorf("healthz while recovering: %d %q, want 200", code, body)
	}
	if code, _, _ := m.get(t, "/metrics"); code != 200 {
		t.Errorf("metrics while recovering: %d, want 200", code)
	}
	m.mon.serving(m.b, m.srv)
	if code, body, _ := m.get(t, "/readyz"); code != 200 {
		t.Errorf("readyz serving: %d %q, want 200", code, body)
	}
	if code, body, _ := m.get(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz serving: %d %q, want 200 ok", code, body)
	}
	m.mon.stopping()
	if code, body, _ := m.get(t, "/readyz"); code != 503 || !strings.Contains(body, "stopping") {
		t.Errorf("readyz stopping: %d %q, want 503 stopping", code, body)
	}
	m.srv.Close()
	m.b.Close()
	if code, body, _ := m.get(t, "/healthz"); code != 503 || !strings.Contains(body, "closed") {
		t.Errorf("healthz on a closed broker: %d %q, want 503 naming it", code, body)
	}
	if code, body, _ := m.get(t, "/api/status"); code != 200 || !strings.Contains(body, `"state": "stopping"`) {
		t.Errorf("status on a closed broker: %d %q", code, body)
	}
}

// TestStatusJSON: /api/status gives each topic's stored messages and counters, each
// group's lag (as stats -group computes it), the disk, and the warnings logged.
func TestStatusJSON(t *testing.T) {
	m := startMonitored(t, true)
	m.traffic(t, []string{"Orders", "Telemetry"}, 4, "billing", "Orders")
	m.lg.Warn("disk is slow", "dir", "/data", "ms", 250)
	m.lg.Info("not kept")
	code, body, h := m.get(t, "/api/status")
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/status: %d, %q", code, h.Get("Content-Type"))
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "serving" || !st.Ready || st.Health != "ok" || st.Listen != m.srv.Addr().String() || st.Uplink.Configured {
		t.Errorf("got state %q ready %v health %q listen %q uplink %+v", st.State, st.Ready, st.Health, st.Listen, st.Uplink)
	}
	if len(st.Topics) != 2 || st.Topics[0].Name != "Orders" || st.Topics[0].Stored != 4 || st.Topics[0].MessagesIn != 4 ||
		st.Topics[1].Name != "Telemetry" || st.Topics[1].MessagesOut != 0 {
		t.Errorf("topics: %+v", st.Topics)
	}
	lags, err := collectLags(context.Background(), localTarget{m.b}, "billing", "Orders", false)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, l := range lags {
		want += l.Lag
	}
	if len(st.Groups) != 1 || st.Groups[0].Name != "billing" || st.Groups[0].Lag != want || want == 0 ||
		st.Groups[0].Lag+st.Groups[0].MessagesOut != 4 {
		t.Errorf("groups: %+v, want billing with lag %d", st.Groups, want)
	}
	if st.Disk == nil || st.Disk.TotalBytes == 0 || st.Store == nil || st.Store.Fsyncs == 0 {
		t.Errorf("disk %+v store %+v", st.Disk, st.Store)
	}
	if len(st.RecentErrors) != 1 || st.RecentErrors[0].Message != "disk is slow" || st.RecentErrors[0].Attrs != "dir=/data ms=250" {
		t.Errorf("recent errors: %+v, want the one warning", st.RecentErrors)
	}
}

// TestStatusPage: / serves the embedded page, which fetches api/status.
func TestStatusPage(t *testing.T) {
	m := startMonitored(t, true)
	code, body, h := m.get(t, "/")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, `fetch("api/status"`) {
		t.Fatalf("GET /: %d %q, body starts %.100q", code, h.Get("Content-Type"), body)
	}
	if code, _, _ := m.get(t, "/nothing-here"); code != 404 {
		t.Errorf("GET /nothing-here: %d, want 404", code)
	}
}

// TestRecentLog: the ring keeps the newest records, newest first, and counts them all.
func TestRecentLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		added int
		want  []string
	}{
		{"none", 3, 0, nil},
		{"fewer than the ring", 3, 2, []string{"m1", "m0"}},
		{"exactly the ring", 3, 3, []string{"m2", "m1", "m0"}},
		{"wrapped", 3, 7, []string{"m6", "m5", "m4"}},
		{"one", 1, 4, []string{"m3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newRecentLog(tc.size)
			for i := range tc.added {
				l.add(logEntry{Message: "m" + string(rune('0'+i))})
			}
			got, total := l.entries()
			var msgs []string
			for _, e := range got {
				msgs = append(msgs, e.Message)
			}
			if strings.Join(msgs, ",") != strings.Join(tc.want, ",") || total != int64(tc.added) {
				t.Fatalf("got %v (%d seen), want %v (%d)", msgs, total, tc.want, tc.added)
			}
		})
	}
}

// TestRecentHandler: warnings and errors are kept with their attributes, groups flattened,
// even when the log level hides them from stderr; lower levels are not kept.
func TestRecentHandler(t *testing.T) {
	l := newRecentLog(10)
	var out strings.Builder
	lg := slog.New(newRecentHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}), l))
	lg = lg.With("component", "store").WithGroup("seg")
	lg.Warn("slow", "n", 1)
	lg.Info("fine")
	lg.Error("failed", slog.Group("x", "y", 2))
	got, _ := l.entries()
	if len(got) != 2 || got[1].Message != "slow" || got[1].Attrs != "component=store seg.n=1" || got[0].Attrs != "component=store seg.x.y=2" {
		t.Fatalf("kept %+v", got)
	}
	if strings.Contains(out.String(), "slow") || !strings.Contains(out.String(), "failed") {
		t.Fatalf("stderr got %q, want the error only", out.String())
	}
}

// TestRates: rates are the counters' growth between the oldest and newest sample kept.
func TestRates(t *testing.T) {
	s := &rateSampler{keep: 3}
	if r, d := s.rates(); r != nil || d != 0 {
		t.Fatalf("no samples: %v %v", r, d)
	}
	t0 := time.Unix(1000, 0)
	s.samples = []rateSample{
		{at: t0, counters: map[string][2]int64{"t/A": {10, 0}}},
		{at: t0.Add(2 * time.Second), counters: map[string][2]int64{"t/A": {30, 4}, "g/G": {0, 8}}},
	}
	r, d := s.rates()
	if d != 2*time.Second || r["t/A"] != (rate{10, 2}) || r["g/G"] != (rate{0, 4}) {
		t.Fatalf("got %v over %v", r, d)
	}
}
