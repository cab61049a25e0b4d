package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// TestServeForwardsUp: serve with an up rule (given as a flag) forwards a topic's stored
// messages to a hub, under the template's name, and stops cleanly; restarted, it sends
// nothing twice. A down rule mirrors a hub topic into the data dir.
func TestServeForwardsUp(t *testing.T) {
	hb, srv := startHub(t, nil)
	upstreamCount := func() int64 {
		qs, err := hb.Queues("gw-T")
		if err != nil {
			return 0
		}
		var n int64
		for _, q := range qs {
			n += q.MaxOffset
		}
		return n
	}
	waitCount := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for upstreamCount() < want {
			if time.Now().After(deadline) {
				t.Fatalf("hub has %d messages, want %d", upstreamCount(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	for _, body := range []string{"c1", "c2"} {
		if _, err := hb.Send(context.Background(), &mq.Message{Topic: "C", Body: []byte(body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two", "three")
	rule := `[{name = "r1", topics = ["T"], upstream = "` + srv.Addr().String() + `", kind = "edgemq", topic_template = "{gateway}-{topic}"}]`
	downRule := `[{name = "d1", topic = "C", upstream = "` + srv.Addr().String() + `", kind = "edgemq", local_topic = "C-local"}]`
	c, addr := startServe(t, nil, "-data", dir, "-uplink.up", rule, "-uplink.gateway", "gw", "-uplink.down", downRule)
	if !strings.Contains(c.stderr.String(), "uplink_rules=2") {
		t.Errorf("startup line does not count the rule:\n%s", c.stderr)
	}
	waitCount(3)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(mustRun(t, "topic", "list", "-server", addr), "C-local") { // made by the first mirrored batch
		if time.Now().After(deadline) {
			t.Fatal("C-local not made")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, c.stderr)
	}
	mustRun(t, "send", "-data", dir, "-topic", "T", "four")
	c, _ = startServe(t, nil, "-data", dir, "-uplink.up", rule, "-uplink.gateway", "gw")
	waitCount(4)
	time.Sleep(200 * time.Millisecond) // a second copy would come now
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, c.stderr)
	}
	if n := upstreamCount(); n != 4 {
		t.Fatalf("hub has %d messages after a restart, want 4", n)
	}
	res, err := hb.Pull(context.Background(), mq.PullRequest{Group: "G", Queue: mq.MessageQueue{Topic: "gw-T", BrokerName: hb.Options().BrokerName},
		Filter: "*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Messages {
		if m.Properties[mq.PropertyUniqKey] == "" {
			t.Errorf("message %q upstream without UNIQ_KEY", m.Body)
		}
	}
	lb, err := edge.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	qs, err := lb.Queues("C-local")
	var n int64
	for _, q := range qs {
		n += q.MaxOffset
	}
	if err != nil || n != 2 {
		t.Fatalf("mirrored topic C-local has %d messages (%v), want 2", n, err)
	}
}

// TestServeRefusesBadUpRule: a rule that cannot work stops serve from starting, naming it.
func TestServeRefusesBadUpRule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := startChild(t, nil, "serve", "-data", dir, "-server.listen", "127.0.0.1:0", "-server.vip_listen", "off",
		"-uplink.up", `[{name = "r1", topics = ["T"], upstream = "nowhere"}]`)
	if code := c.exit(30 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, c.stderr)
	}
	if !strings.Contains(c.stderr.String(), `uplink: invalid rule: up rule 1 (\"r1\"): upstream addrs`) {
		t.Fatalf("stderr does not name the rule:\n%s", c.stderr)
	}
}

// TestREADMEUplink: the README's uplink example is a valid config whose rules Start takes.
func TestREADMEUplink(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Forward to an upstream broker.*?```toml\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("README has no uplink example")
	}
	c := newConfig()
	if err := parseConfig(c, m[1], "README.md"); err != nil {
		t.Fatal(err)
	}
	if len(c.uplink.Up) != 2 || len(c.uplink.Down) != 1 {
		t.Fatalf("README example: %d up and %d down rules, want 2 and 1", len(c.uplink.Up), len(c.uplink.Down))
	}
	if err := c.uplink.Validate("edgemq"); err != nil {
		t.Fatal(err)
	}
}

// startHub opens a broker in a temporary dir and serves it on a free loopback port, as an
// upstream for uplink rules; t.Cleanup stops both. lg may be nil.
func startHub(t *testing.T, lg *slog.Logger) (*edge.Broker, *server.Server) {
	t.Helper()
	hb, err := edge.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	srv, err := server.Start(hb, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return hb, srv
}
