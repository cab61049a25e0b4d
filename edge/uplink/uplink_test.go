package uplink

import (
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// checkSame checks that the hub's topic up holds the local topic's messages, queue by
// queue in the same order, each with its UNIQ_KEY (or the local offset message id),
// keys, tags, properties and body, and returns how many messages upstream repeat one
// before them in their queue (a batch sent again after its answer was lost); it fails if
// there are more than maxDups.
func checkSame(t *testing.T, local *edge.Broker, topic string, hub *edge.Broker, up string, maxDups int) int {
	t.Helper()
	return checkQueues(t, readAll(t, local, topic), readAll(t, hub, up), maxDups)
}

// checkForwarded fails t unless g, read upstream from queue q, is the local message w as
// forwarded: its id (UNIQ_KEY, or w's offset id when w had none), keys, tags, seq property
// and body.
func checkForwarded[Q ~int | ~int32](t *testing.T, q Q, w, g *mq.MessageExt) {
	t.Helper()
	id := g.Properties[mq.PropertyUniqKey]
	uniq := w.Properties[mq.PropertyUniqKey]
	if uniq == "" {
		uniq = w.OffsetMsgID()
	}
	if id != uniq || g.Keys != w.Keys || g.Tags != w.Tags ||
		g.Properties["seq"] != w.Properties["seq"] || string(g.Body) != string(w.Body) {
		t.Fatalf("queue %d, local offset %d, upstream offset %d:\ngot  uniq %s keys %q tags %q seq %s body %q\nwant uniq %s keys %q tags %q seq %s body %q",
			q, w.QueueOffset, g.QueueOffset, id, g.Keys, g.Tags, g.Properties["seq"], g.Body,
			uniq, w.Keys, w.Tags, w.Properties["seq"], w.Body)
	}
}

// checkQueues is checkSame of messages read already, by queue id.
func checkQueues(t *testing.T, want, got map[int32][]mq.MessageExt, maxDups int) int {
	t.Helper()
	dups := 0
	for q, gs := range got {
		ws := want[q]
		seen := map[string]bool{}
		i := 0
		for j := range gs {
			g := &gs[j]
			id := g.Properties[mq.PropertyUniqKey]
			if seen[id] {
				dups++
				continue
			}
			seen[id] = true
			if i >= len(ws) {
				t.Fatalf("queue %d: upstream offset %d (uniq %s, seq %s) is none of the %d local messages", q, g.QueueOffset, id, g.Properties["seq"], len(ws))
			}
			w := &ws[i]
			i++
			checkForwarded(t, q, w, g)
		}
		if i != len(ws) {
			t.Fatalf("queue %d: %d local messages, %d of them upstream", q, len(ws), i)
		}
	}
	for q, ws := range want {
		if _, ok := got[q]; !ok && len(ws) > 0 {
			t.Fatalf("local queue %d: none of its %d messages upstream", q, len(ws))
		}
	}
	if dups > maxDups {
		t.Fatalf("%d messages stored twice, at most %d expected", dups, maxDups)
	}
	return dups
}

// TestForwardToHub: messages stored before and during forwarding reach the hub's topic
// named by the template, queue for queue in order, with their ids, keys, tags and
// properties; the stats say all went and nothing is left.
func TestForwardToHub(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	h := startHub(t, "")
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "gw1-T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	sendN(t, local, "T", 0, 1000)
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r1", Topics: []string{"T"}, TopicTemplate: "{gateway}-{topic}",
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}, BatchSize: 50}}})
	sendN(t, local, "T", 1000, 1000)
	waitFor(t, 30*time.Second, "2000 messages upstream", func() bool { return count(t, h.b, "gw1-T") >= 2000 })
	checkSame(t, local, "T", h.b, "gw1-T", 0)
	waitFor(t, 5*time.Second, "connected, no backlog", func() bool {
		s := u.Stats().Up[0]
		return s.State == Connected && s.Backlog == 0
	})
	s := u.Stats().Up[0]
	if s.Forwarded != 2000 || s.Queues != 4 || s.Lost != 0 || s.Resent != 0 || s.OldestAge != 0 {
		t.Fatalf("stats %+v: want 2000 forwarded from 4 queues, none lost or resent", s)
	}
}

// TestCursorSurvivesRestart: after the uplink and the broker restart, forwarding resumes at
// the stored cursors: nothing is sent twice, and what was stored while down goes up; the
// hub creates the topic on first send.
func TestCursorSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := startHub(t, "")
	local := openLocal(t, dir, nil)
	rule := Options{Up: []UpRule{{Name: "r1", Topics: []string{"T*"}, Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}}
	sendN(t, local, "T1", 0, 300)
	u := startUplink(t, local, rule)
	// Wait for the answers, not for the hub's count: the hub stores a batch before its
	// answer moves the cursor, and a Close in between sends that batch again.
	waitFor(t, 30*time.Second, "300 forwarded", func() bool { s := u.Stats().Up[0]; return s.Forwarded >= 300 && s.Backlog == 0 })
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if err := u.Close(); err != ErrClosed {
		t.Fatalf("second Close: got %v, want ErrClosed", err)
	}
	local.Close()
	local = openLocal(t, dir, nil)
	sendN(t, local, "T1", 300, 200)
	cs, err := local.ForwardCursors("r1")
	if err != nil || len(cs) == 0 {
		t.Fatalf("stored cursors %v, %v", cs, err)
	}
	u = startUplink(t, local, rule)
	waitFor(t, 30*time.Second, "500 upstream", func() bool { return count(t, h.b, "T1") >= 500 })
	waitFor(t, 5*time.Second, "no backlog", func() bool { return u.Stats().Up[0].Backlog == 0 })
	if n := count(t, h.b, "T1"); n != 500 {
		t.Fatalf("upstream has %d messages, want 500 (nothing twice)", n)
	}
	if s := u.Stats().Up[0]; s.Forwarded != 200 {
		t.Fatalf("after restart forwarded %d, want 200", s.Forwarded)
	}
	checkSame(t, local, "T1", h.b, "T1", 0)
}

// TestRulesValidated: Start refuses rules that cannot work, naming what is wrong, and
// takes an unreachable upstream.
func TestRulesValidated(t *testing.T) {
	b := openLocal(t, t.TempDir(), nil)
	good := UpRule{Name: "r", Topics: []string{"T"}, Upstream: Upstream{Addrs: "127.0.0.1:1"}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
	}{
		{"empty name", func(o *Options) { o.Up[0].Name = "" }},
		{"bad name", func(o *Options) { o.Up[0].Name = "a b" }},
		{"no topics", func(o *Options) { o.Up[0].Topics = nil }},
		{"bad topic", func(o *Options) { o.Up[0].Topics = []string{"a/b"} }},
		{"star inside", func(o *Options) { o.Up[0].Topics = []string{"a*b*"} }},
		{"system topic", func(o *Options) { o.Up[0].Topics = []string{"%RETRY%g"} }},
		{"no addrs", func(o *Options) { o.Up[0].Upstream.Addrs = "" }},
		{"addr without port", func(o *Options) { o.Up[0].Upstream.Addrs = "10.0.0.1" }},
		{"kind", func(o *Options) { o.Up[0].Upstream.Kind = "kafka" }},
		{"access key alone", func(o *Options) { o.Up[0].Upstream.AccessKey = "gw" }},
		{"secret key alone", func(o *Options) { o.Up[0].Upstream.SecretKey = "s3cret" }},
		{"down: no addrs", func(o *Options) { o.Down = []DownRule{{Name: "d", Topic: "T"}} }},
		{"down: kind", func(o *Options) {
			o.Down = []DownRule{{Name: "d", Topic: "T", Upstream: Upstream{Addrs: "127.0.0.1:1", Kind: "nats"}}}
		}},
		{"down: secret key alone", func(o *Options) {
			o.Down = []DownRule{{Name: "d", Topic: "T", Upstream: Upstream{Addrs: "127.0.0.1:1", SecretKey: "s"}}}
		}},
		{"template placeholder", func(o *Options) { o.Up[0].TopicTemplate = "{host}-{topic}" }},
		{"template merges", func(o *Options) { o.Up[0].TopicTemplate = "all"; o.Up[0].Topics = []string{"A", "B"} }},
		{"template makes a bad name", func(o *Options) { o.Up[0].TopicTemplate = "{topic}.x" }},
		{"batch size", func(o *Options) { o.Up[0].BatchSize = 2000 }},
		{"negative rate", func(o *Options) { o.Up[0].RateLimit = -1 }},
		{"overflow", func(o *Options) { o.Up[0].Overflow = 7 }},
		{"same name twice", func(o *Options) { o.Up = append(o.Up, o.Up[0]) }},
		{"gateway", func(o *Options) { o.Gateway = "g w" }},
		{"backoff", func(o *Options) { o.BackoffMin, o.BackoffMax = time.Second, time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Up: []UpRule{good}}
			tc.edit(&o)
			u, err := Start(b, &o)
			if err == nil {
				u.Close()
				t.Fatalf("Start: no error")
			}
			if !errorsIs(err, ErrInvalidRule) {
				t.Fatalf("Start: got %v, want ErrInvalidRule", err)
			}
		})
	}
	u, err := Start(b, &Options{Up: []UpRule{good}})
	if err != nil {
		t.Fatalf("Start with an unreachable upstream: %v", err)
	}
	u.Close()
	if _, err := ParseOverflow("drop_oldest"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseOverflow("drop"); err == nil {
		t.Fatal("ParseOverflow(drop): no error")
	}
}
