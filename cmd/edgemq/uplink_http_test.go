package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/uplink"
)

// TestUplinkMetricsAndStatus: with an uplink forwarding to a hub (one rule that reaches
// it, one that cannot, one down rule mirroring a hub topic), /metrics and /api/status give
// each rule's state, backlog and totals as Stats does.
func TestUplinkMetricsAndStatus(t *testing.T) {
	m := startMonitored(t, true)
	hb, hub := startHub(t, m.lg)
	ctx := context.Background()
	for _, body := range []string{"c1", "c2"} {
		if _, err := hb.Send(ctx, &mq.Message{Topic: "C", Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := m.b.Send(ctx, &mq.Message{Topic: "T", Body: []byte{'a' + byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	hubUp := uplink.Upstream{Addrs: hub.Addr().String(), Kind: uplink.KindEdgeMQ}
	u, err := uplink.Start(m.b, &uplink.Options{
		Up: []uplink.UpRule{{Name: "r1", Topics: []string{"T"}, Upstream: hubUp},
			{Name: "r2", Topics: []string{"T"}, Upstream: uplink.Upstream{Addrs: "127.0.0.1:1", Kind: uplink.KindEdgeMQ}}},
		Down:       []uplink.DownRule{{Name: "d1", Topic: "C", Upstream: hubUp, LocalTopic: "C-local"}},
		BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: m.lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	m.mon.setUplink(u)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := u.Stats()
		if s.Up[0].Forwarded == 5 && s.Up[0].Backlog == 0 && s.Up[1].Failures > 0 && s.Up[1].Backlog == 5 && s.Down[0].Received == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uplink did not settle: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// r2's failures and the ages grow meanwhile: a scraped value lies between the
	// Stats taken before and after the scrape.
	before := u.Stats()
	_, body, _ := m.get(t, "/metrics")
	_, js, _ := m.get(t, "/api/status")
	after := u.Stats()
	p, err := parseExposition(body)
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	between := func(what string, got float64, a, b float64) {
		t.Helper()
		if got < min(a, b) || got > max(a, b) {
			t.Errorf("%s: got %v, want %v..%v", what, got, a, b)
		}
	}
	find := func(fam string, labels ...string) (float64, bool) {
	next:
		for _, s := range p.samples[fam] {
			for i := 0; i+1 < len(labels); i += 2 {
				if s.labels[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return s.value, true
		}
		return 0, false
	}
	value := func(fam string, labels ...string) float64 {
		t.Helper()
		v, ok := find(fam, labels...)
		if !ok {
			t.Errorf("no sample of %s with %v", fam, labels)
		}
		return v
	}
	for fam, typ := range map[string]string{"edgemq_uplink_state": "gauge", "edgemq_uplink_failures_total": "counter",
		"edgemq_uplink_backlog_messages": "gauge", "edgemq_uplink_backlog_bytes": "gauge", "edgemq_uplink_oldest_age_seconds": "gauge",
		"edgemq_uplink_forwarded_messages_total": "counter", "edgemq_uplink_forwarded_bytes_total": "counter",
		"edgemq_uplink_batches_total": "counter", "edgemq_uplink_resent_messages_total": "counter",
		"edgemq_uplink_lost_messages_total": "counter", "edgemq_uplink_rejected_messages_total": "counter",
		"edgemq_uplink_lag_messages": "gauge", "edgemq_uplink_received_messages_total": "counter"} {
		if p.types[fam] != typ || p.help[fam] == "" {
			t.Errorf("family %s: type %q help %q, want %s with help", fam, p.types[fam], p.help[fam], typ)
		}
	}
	states := func(rule, dir string, a, b uplink.State) {
		t.Helper()
		var sum float64
		cur := ""
		for _, s := range uplinkStates {
			v := value("edgemq_uplink_state", "rule", rule, "direction", dir, "state", s.String())
			sum += v
			if v == 1 {
				cur = s.String()
			}
		}
		if sum != 1 || cur != a.String() && cur != b.String() {
			t.Errorf("%s rule %s: state %q (samples summing to %v), want %v or %v", dir, rule, cur, sum, a, b)
		}
	}
	for i, r := range before.Up {
		r2 := after.Up[i]
		states(r.Name, "up", r.State, r2.State)
		between(r.Name+" failures", value("edgemq_uplink_failures_total", "rule", r.Name, "direction", "up"), float64(r.Failures), float64(r2.Failures))
		for _, c := range []struct {
			fam  string
			a, b float64
		}{
			{"edgemq_uplink_backlog_messages", float64(r.Backlog), float64(r2.Backlog)},
			{"edgemq_uplink_backlog_bytes", float64(r.BacklogBytes), float64(r2.BacklogBytes)},
			{"edgemq_uplink_oldest_age_seconds", r.OldestAge.Seconds(), r2.OldestAge.Seconds()},
			{"edgemq_uplink_forwarded_messages_total", float64(r.Forwarded), float64(r2.Forwarded)},
			{"edgemq_uplink_forwarded_bytes_total", float64(r.ForwardedBytes), float64(r2.ForwardedBytes)},
			{"edgemq_uplink_batches_total", float64(r.Batches), float64(r2.Batches)},
			{"edgemq_uplink_resent_messages_total", float64(r.Resent), float64(r2.Resent)},
			{"edgemq_uplink_lost_messages_total", float64(r.Lost), float64(r2.Lost)},
			{"edgemq_uplink_rejected_messages_total", float64(r.Rejected), float64(r2.Rejected)},
		} {
			between(r.Name+" "+c.fam, value(c.fam, "rule", r.Name), c.a, c.b)
		}
		if _, ok := find("edgemq_uplink_lag_messages", "rule", r.Name); ok {
			t.Errorf("up rule %s has a lag sample", r.Name)
		}
	}
	if got := value("edgemq_uplink_forwarded_messages_total", "rule", "r1"); got != 5 {
		t.Errorf("r1 forwarded %v, want 5", got)
	}
	if got := value("edgemq_uplink_backlog_messages", "rule", "r2"); got != 5 || value("edgemq_uplink_state", "rule", "r2", "state", "backing_off") != 1 {
		t.Errorf("r2 backlog %v, want 5, backing off", got)
	}
	for i, d := range before.Down {
		d2 := after.Down[i]
		states(d.Name, "down", d.State, d2.State)
		between(d.Name+" failures", value("edgemq_uplink_failures_total", "rule", d.Name, "direction", "down"), float64(d.Failures), float64(d2.Failures))
		between(d.Name+" lag", value("edgemq_uplink_lag_messages", "rule", d.Name), float64(d.Lag), float64(d2.Lag))
		between(d.Name+" received", value("edgemq_uplink_received_messages_total", "rule", d.Name), float64(d.Received), float64(d2.Received))
		if _, ok := find("edgemq_uplink_backlog_messages", "rule", d.Name); ok {
			t.Errorf("down rule %s has a backlog sample", d.Name)
		}
	}

	var st statusJSON
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Uplink.Configured || len(st.Uplink.Rules) != 3 {
		t.Fatalf("uplink status %+v, want 3 rules", st.Uplink)
	}
	for i, r := range before.Up {
		r2, got := after.Up[i], st.Uplink.Rules[i]
		if got.Name != r.Name || got.Direction != "up" || got.Upstream != r.Upstream || got.Lag != nil ||
			got.State != r.State.String() && got.State != r2.State.String() {
			t.Errorf("rule %d: %+v, want %+v", i, got, r)
		}
		between(r.Name+" backlog", float64(got.Backlog), float64(r.Backlog), float64(r2.Backlog))
		between(r.Name+" backlog bytes", float64(got.BacklogBytes), float64(r.BacklogBytes), float64(r2.BacklogBytes))
		between(r.Name+" oldest age", got.OldestAgeSeconds, r.OldestAge.Seconds(), r2.OldestAge.Seconds())
		between(r.Name+" forwarded", float64(got.Forwarded), float64(r.Forwarded), float64(r2.Forwarded))
		between(r.Name+" failures", float64(got.Failures), float64(r.Failures), float64(r2.Failures))
	}
	if r := st.Uplink.Rules[1]; r.Backlog != 5 || r.State != "backing_off" || r.LastError == "" {
		t.Errorf("r2: %+v, want a backlog of 5, backing off, with its last error", r)
	}
	d, d2, got := before.Down[0], after.Down[0], st.Uplink.Rules[2]
	if got.Name != "d1" || got.Direction != "down" || got.Upstream != d.Upstream || got.Lag == nil || got.Forwarded != 2 ||
		got.State != d.State.String() && got.State != d2.State.String() {
		t.Errorf("down rule: %+v, want %+v", got, d)
	} else {
		between("d1 lag", float64(*got.Lag), float64(d.Lag), float64(d2.Lag))
	}
}

// TestServeUplinkStatus: serve with an up rule reports it on /api/status and /metrics.
func TestServeUplinkStatus(t *testing.T) {
	_, hub := startHub(t, nil)
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two")
	rule := `[{name = "r1", topics = ["T"], upstream = "` + hub.Addr().String() + `", kind = "edgemq"}]`
	c, _ := startServe(t, nil, "-data", dir, "-uplink.up", rule)
	base := "http://" + regexp.MustCompile(` http=(127\.0\.0\.1:\d+)`).FindStringSubmatch(c.stderr.String())[1]
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st statusJSON
		if err := json.Unmarshal([]byte(get("/api/status")), &st); err != nil {
			t.Fatal(err)
		}
		if u := st.Uplink; u.Configured && len(u.Rules) == 1 && u.Rules[0].Name == "r1" && u.Rules[0].Forwarded == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uplink status %+v, want r1 with 2 forwarded", st.Uplink)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body := get("/metrics"); !strings.Contains(body, `edgemq_uplink_forwarded_messages_total{rule="r1"} 2`+"\n") {
		t.Errorf("metrics lack r1's forwarded messages:\n%s", body)
	}
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, c.stderr)
	}
}
