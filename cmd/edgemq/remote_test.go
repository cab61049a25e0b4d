package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// normalize blanks what differs between a run in-process and one over TCP and between two
// runs: message ids (they name the broker's address), the commit log's positions and sizes
// (a message sent over TCP carries a client's properties), times.
func normalizeRemote(s string) string {
	for _, r := range []struct{ re, with string }{
		{`[0-9A-F]{32}`, "MSGID"},
		{`commitlog: .*`, "commitlog: ..."},
		{`"(segmentBytes|minPos|maxPos|durablePos|commitLogOffset|bornTime|storeTime)": ?("[^"]*"|\d+)`, `"$1": X`},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// TestCommandsAgainstServer runs each command against a served data dir (-server) and the
// same commands on a data dir in-process: their output is the same, modulo message ids and
// commit-log positions.
func TestCommandsAgainstServer(t *testing.T) {
	served := filepath.Join(t.TempDir(), "served")
	mustRun(t, "topic", "create", "-data", served, "-name", "Seed")
	_, addr := startServe(t, nil, "-data", served)
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, "topic", "create", "-data", local, "-name", "Seed")

	steps := [][]string{
		{"topic", "create", "-name", "Orders", "-read", "4", "-write", "4", "-order"},
		{"topic", "create", "-name", "Telemetry", "-perm", "rw"},
		{"topic", "update", "-name", "Orders", "-read", "2"},
		{"topic", "list"},
		{"topic", "list", "-json"},
		{"send", "-topic", "Orders", "-sharding_key", "order-42", "-tags", "new", "-message_keys", "k1 k2", "one", "two", "three"},
		{"send", "-topic", "Telemetry", "-queue", "1", "-json", "x", "y"},
		{"send", "-topic", "Fresh", "-create", "-queue", "0", "z"},
		{"consume", "-topic", "Orders", "-group", "billing", "-n", "3", "-wait", "10s"},
		{"consume", "-topic", "Telemetry", "-group", "billing", "-n", "1", "-wait", "10s", "-json"},
		{"offset", "show", "-group", "billing", "-topic", "Orders"},
		{"offset", "show", "-group", "billing", "-topic", "Telemetry", "-json"},
		{"offset", "show"},
		{"topic", "list", "-all"},
		{"offset", "reset", "-group", "billing", "-topic", "Orders", "-to", "first"},
		{"offset", "reset", "-group", "billing", "-topic", "Telemetry", "-to", "last", "-json"},
		{"offset", "reset", "-group", "billing", "-topic", "Orders", "-to", "2020-01-01T00:00:00Z"},
		{"consume", "-topic", "Orders", "-group", "billing", "-n", "3", "-wait", "10s"},
		{"stats"},
		{"stats", "-topic", "Orders"},
		{"stats", "-topic", "Telemetry", "-group", "billing"},
		{"stats", "-json"},
		{"topic", "delete", "-name", "Fresh"},
		{"topic", "list"},
	}
	for _, s := range steps {
		name := strings.Join(s, " ")
		rc, rout, rerr := edgemq(t, append(s, "-server", addr)...)
		lc, lout, lerr := edgemq(t, append(s, "-data", local)...)
		if rc != 0 || lc != 0 {
			t.Fatalf("%s: exit %d -server, %d -data\n%s%s\n%s%s", name, rc, lc, rout, rerr, lout, lerr)
		}
		if normalizeRemote(rout) != normalizeRemote(lout) {
			t.Errorf("%s: -server printed\n%s\n-data printed\n%s", name, rout, lout)
		}
		if rerr != lerr {
			t.Errorf("%s: stderr -server %q, -data %q", name, rerr, lerr)
		}
	}
	// The errors a user sees are the same too.
	for _, s := range [][]string{
		{"topic", "create", "-name", "Orders"},
		{"topic", "update", "-name", "Nope", "-read", "2"},
		{"send", "-topic", "Nope", "x"},
		{"consume", "-topic", "Nope"},
		{"offset", "show", "-group", "g", "-topic", "Nope"},
		{"stats", "-topic", "Nope"},
	} {
		name := strings.Join(s, " ")
		rc, _, rerr := edgemq(t, append(s, "-server", addr)...)
		lc, _, lerr := edgemq(t, append(s, "-data", local)...)
		if rc != 1 || lc != 1 || rerr != lerr {
			t.Errorf("%s: -server exit %d %q, -data exit %d %q", name, rc, rerr, lc, lerr)
		}
	}
}

// TestServerFromEnvironment: EDGEMQ_SERVER is -server's default; an explicit -data wins
// over it, and -server with -data is a usage error.
func TestServerFromEnvironment(t *testing.T) {
	served := filepath.Join(t.TempDir(), "served")
	mustRun(t, "topic", "create", "-data", served, "-name", "Remote")
	_, addr := startServe(t, nil, "-data", served)
	local := filepath.Join(t.TempDir(), "local")
	mustRun(t, "topic", "create", "-data", local, "-name", "Local")

	t.Setenv(serverEnv, addr)
	if out := mustRun(t, "topic", "list"); !strings.Contains(out, "Remote") {
		t.Errorf("topic list with $%s:\n%s", serverEnv, out)
	}
	if out := mustRun(t, "topic", "list", "-data", local); !strings.Contains(out, "Local") || strings.Contains(out, "Remote") {
		t.Errorf("topic list -data with $%s:\n%s", serverEnv, out)
	}
	if code, _, errOut := edgemq(t, "topic", "list", "-data", local, "-server", addr); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("-server and -data: exit %d %q", code, errOut)
	}
}

// TestBadServerAddress: an address that cannot be reached, or is no address, fails with
// exit 1 and a line that says so.
func TestBadServerAddress(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{silentPort(t), "connection refused"},
		{"no-port", "name server address"},
	} {
		for _, args := range [][]string{
			{"topic", "list"}, {"send", "-topic", "T", "x"}, {"consume", "-topic", "T"},
			{"offset", "show"}, {"stats"}, {"bench", "-n", "1"},
		} {
			start := time.Now()
			code, _, errOut := edgemq(t, append(args, "-server", tc.addr)...)
			if code != 1 || !strings.Contains(errOut, "edgemq "+args[0]+": server "+tc.addr) || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v -server %s: exit %d, stderr %q", args, tc.addr, code, errOut)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("%v -server %s took %v", args, tc.addr, d)
			}
		}
	}
}

// TestConsumeServerStreamsUntilInterrupt: consume -f -server prints what is sent while it
// runs, and at SIGINT commits what it printed and exits 130.
func TestConsumeServerStreamsUntilInterrupt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two")
	_, addr := startServe(t, nil, "-data", dir)
	c := startChild(t, nil, "consume", "-server", addr, "-topic", "T", "-group", "g", "-f", "-wait", "100ms")
	c.waitFor(c.stdout, `(?s)one.*two|two.*one`, 30*time.Second)
	// Past -wait it still runs, and prints what comes.
	mustRun(t, "send", "-server", addr, "-topic", "T", "three")
	c.waitFor(c.stdout, `three`, 30*time.Second)
	c.interrupt()
	if code := c.exit(30 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, c.stderr)
	}
	if errOut := c.stderr.String(); !strings.Contains(errOut, "3 messages") {
		t.Errorf("stderr:\n%s", errOut)
	}
	var lags []lagJSON
	mustJSON(t, &lags, "offset", "show", "-server", addr, "-group", "g", "-topic", "T")
	var consumed, lag int64
	for _, l := range lags {
		if l.ConsumerOffset != nil {
			consumed += *l.ConsumerOffset
		}
		lag += l.Lag
	}
	if consumed != 3 || lag != 0 {
		t.Errorf("offsets after the interrupt: %d consumed, lag %d; want 3, 0\n%+v", consumed, lag, lags)
	}
}

// TestBenchServer: bench -server sends and consumes -n messages and prints its summary.
func TestBenchServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "topic", "create", "-data", dir, "-name", "Seed")
	_, addr := startServe(t, nil, "-data", dir)
	out := mustRun(t, "bench", "-server", addr, "-n", "300", "-producers", "3", "-queues", "2", "-size", "100", "-duration", "30s")
	for _, want := range []string{"sent      300 messages of 100 B", "consumed  300 messages", "send latency  p50 ", "end-to-end    p50 ", "p99.9 "} {
		if !strings.Contains(out, want) {
			t.Errorf("bench printed no %q:\n%s", want, out)
		}
	}
	// Again, with -json and a rate: the topic exists now; only this run's messages count.
	var rep benchJSON
	mustJSON(t, &rep, "bench", "-server", addr, "-n", "50", "-rate", "500", "-producers", "2")
	if rep.Sent != 50 || rep.Consumed != 50 || rep.SendErrors != 0 || rep.SendLatency["p99"] <= 0 || rep.EndToEndLatency["p50"] <= 0 {
		t.Errorf("bench -json: %+v", rep)
	}
	// 50 messages at 500/s take about 0.1 s: at least most of it.
	if rep.SendSeconds < 0.08 {
		t.Errorf("bench -rate 500 sent 50 messages in %.3fs", rep.SendSeconds)
	}
	if out := mustRun(t, "stats", "-server", addr, "-topic", "EdgeMQBench"); !strings.Contains(out, "EdgeMQBench") {
		t.Errorf("stats after bench:\n%s", out)
	}
}

// TestBenchInProcess: bench -data runs on a data dir; without -server or -data it is a usage
// error.
func TestBenchInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var rep benchJSON
	mustJSON(t, &rep, "bench", "-data", dir, "-n", "100", "-queues", "3")
	if rep.Sent != 100 || rep.Consumed != 100 {
		t.Errorf("bench -data: %+v", rep)
	}
	if code, _, errOut := edgemq(t, "bench", "-n", "1"); code != 2 || !strings.Contains(errOut, "-server") {
		t.Errorf("bench without a target: exit %d %q", code, errOut)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"p99.9"`) {
		t.Errorf("bench -json has no p99.9: %s", b)
	}
}

// silentPort returns an address of 127.0.0.1 where nothing listens: connections to it are
// refused.
func silentPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestResetByCommit: where a server resets offsets only through running consumers
// (Apache RocketMQ answers CONSUMER_NOT_ONLINE), offset reset commits them itself, with the
// same result as the server's reset.
func TestResetByCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "a", "b", "c", "d")
	_, addr := startServe(t, nil, "-data", dir)
	ctx := context.Background()
	tg, err := dialTarget(ctx, addr, newConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	rt := tg.(remoteTarget)
	for _, tc := range []struct {
		where edge.ResetWhere
		at    time.Time
	}{{edge.ResetToLast, time.Time{}}, {edge.ResetToFirst, time.Time{}}, {edge.ResetToLast, time.Time{}},
		{edge.ResetToTimestamp, time.Now().Add(-time.Hour)}, {edge.ResetToLast, time.Time{}}, {edge.ResetToTimestamp, time.Now().Add(time.Hour)}} {
		if err := rt.ResetOffsets(ctx, "g1", "T", tc.where, tc.at); err != nil {
			t.Fatal(err)
		}
		if err := rt.resetByCommit(ctx, "g2", "T", tc.where, tc.at); err != nil {
			t.Fatal(err)
		}
		o1, err := rt.GroupOffsets(ctx, "g1", "T")
		if err != nil {
			t.Fatal(err)
		}
		o2, err := rt.GroupOffsets(ctx, "g2", "T")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(o1, o2) {
			t.Errorf("reset %v %v: the server's %+v, by commit %+v", tc.where, tc.at, o1, o2)
		}
	}
}
