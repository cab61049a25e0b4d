package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMain runs the binary's main instead of the tests when EDGEMQ_TEST_CHILD is set: the
// signal tests start this test binary as a real edgemq process. EDGEMQ_TEST_HOLD_STOP makes
// its clean shutdown after an interrupt hang, as a stuck one would.
func TestMain(m *testing.M) {
	if os.Getenv("EDGEMQ_TEST_CHILD") == "1" {
		if os.Getenv("EDGEMQ_TEST_HOLD_STOP") == "1" {
			stopping = func() { time.Sleep(time.Minute) }
		}
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	// The tests name their data dir or server themselves.
	os.Unsetenv(serverEnv)
	os.Exit(m.Run())
}

// edgemq runs the command line and returns its exit code, stdout and stderr.
func edgemq(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun runs the command line and fails the test unless it exits 0; it returns stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := edgemq(t, args...)
	if code != 0 {
		t.Fatalf("edgemq %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// mustJSON runs the command line with -json and decodes its output into v.
func mustJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := mustRun(t, append(args, "-json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("edgemq %s -json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// opensDataDir reports whether c works on a data dir: whether it has the config flags.
func opensDataDir(c *command) bool {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.setup == nil {
		return false
	}
	c.setup(fs)
	return fs.Lookup("data") != nil
}

func TestHelpListsEveryCommand(t *testing.T) {
	code, out, _ := edgemq(t, "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(out, "  "+c.name) {
			t.Errorf("help does not list %q", c.name)
		}
		if c.setup == nil {
			continue
		}
		code, out, _ := edgemq(t, "help", c.name)
		if code != 0 || !strings.Contains(out, "Usage: edgemq "+c.name) {
			t.Errorf("help %s: exit %d, output %q", c.name, code, out)
		}
		if opensDataDir(&c) && !strings.Contains(out, "-data") {
			t.Errorf("help %s lacks -data", c.name)
		}
		for _, v := range c.verbs {
			if !strings.Contains(out, "  "+v.name+" ") {
				t.Errorf("help %s lacks its verb %s", c.name, v.name)
			}
		}
		// Every flag of the command is in its help, with its usage.
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			name, _ := flag.UnquoteUsage(f)
			if !strings.Contains(out, "  -"+f.Name) || !strings.Contains(out, strings.Fields(name + " " + f.Usage)[0]) {
				t.Errorf("help %s lacks -%s", c.name, f.Name)
			}
		})
		// -h and --help print the same, on stdout, and exit 0.
		for _, h := range []string{"-h", "--help"} {
			if code, hout, _ := edgemq(t, c.name, h); code != 0 || hout != out {
				t.Errorf("%s %s: exit %d, output differs from help %s", c.name, h, code, c.name)
			}
		}
	}
	if code, _, _ := edgemq(t, "frobnicate"); code != 2 {
		t.Fatalf("unknown command exited %d, want 2", code)
	}
	if code, _, _ := edgemq(t); code != 2 {
		t.Fatalf("no command exited %d, want 2", code)
	}
	if code, _, _ := edgemq(t, "help", "frobnicate"); code != 2 {
		t.Fatalf("help of an unknown command exited %d, want 2", code)
	}
}

// TestErrorsAndExitCodes: a failure prints one line "edgemq <command>: <error>" and exits 1;
// a usage error exits 2, pointing at the help, without printing every flag.
func TestErrorsAndExitCodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "topic", "create", "-data", dir, "-name", "T")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stats", "-data", dir + "-missing"}, 1, "edgemq stats: no data dir at " + dir + "-missing"},
		{[]string{"topic", "create", "-data", dir, "-name", "bad name"}, 1, "edgemq topic: "},
		{[]string{"topic", "create", "-data", dir, "-name", "T"}, 1, "edgemq topic: edge: topic exists"},
		{[]string{"topic", "update", "-data", dir, "-name", "U", "-read", "2"}, 1, `edgemq topic: topic "U" does not exist`},
		{[]string{"topic", "list", "-bogus"}, 2, "edgemq topic: flag provided but not defined: -bogus\nRun 'edgemq help topic'"},
		{[]string{"topic", "-data", dir}, 2, "edgemq topic: want a verb: list, create, update, delete"},
		{[]string{"topic", "lsit", "-data", dir}, 2, `edgemq topic: unknown verb "lsit"`},
		{[]string{"topic", "list", "extra", "-data", dir}, 2, `takes no arguments besides its flags, got ["extra"]`},
		{[]string{"offset", "reset", "-data", dir, "-group", "g", "-topic", "T", "-to", "yesterday"}, 2, `edgemq offset: -to "yesterday"`},
		{[]string{"send", "-data", dir}, 2, "edgemq send: -topic is required"},
		{[]string{"consume", "-data", dir, "-topic", "T", "-filter", "a ||"}, 2, "edgemq consume: -filter"},
		{[]string{"stats", "-store.flush", "fsync"}, 2, `edgemq stats: invalid value "fsync" for flag -store.flush: want sync or async`},
	} {
		code, out, errOut := edgemq(t, tc.args...)
		if code != tc.code || !strings.HasPrefix(errOut, tc.want) && !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d, stderr with %q", tc.args, code, errOut, tc.code, tc.want)
		}
		if out != "" || strings.Contains(errOut, "goroutine ") || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: stdout %q, stderr %q: want one error line (and a hint to the help)", tc.args, out, errOut)
		}
	}
	if err := safely(func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "internal error: boom") {
		t.Errorf("a panic: got %v", err)
	}
}

// TestFlagsAfterTheVerb: flags may come before or after a verb, or both.
func TestFlagsAfterTheVerb(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "topic", "create", "-name", "A", "-data", dir)
	mustRun(t, "topic", "-data", dir, "create", "-name", "B")
	mustRun(t, "topic", "-data", dir, "-name", "C", "create")
	for _, args := range [][]string{
		{"topic", "list", "-data", dir},
		{"topic", "-data", dir, "list"},
	} {
		if out := mustRun(t, args...); !strings.Contains(out, "A ") || !strings.Contains(out, "B ") || !strings.Contains(out, "C ") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
	mustRun(t, "send", "-data", dir, "-topic", "A", "x")
	mustRun(t, "consume", "-data", dir, "-topic", "A", "-group", "g", "-wait", "100ms")
	a := mustRun(t, "offset", "show", "-group", "g", "-topic", "A", "-data", dir)
	b := mustRun(t, "offset", "-group", "g", "show", "-topic", "A", "-data", dir)
	if a != b || !strings.Contains(a, "g      A") {
		t.Errorf("offset show, flags after and around the verb:\n%s\n%s", a, b)
	}
}

func TestAdminVerbsOnADataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	run := func(args ...string) string {
		t.Helper()
		return mustRun(t, append(args, "-data", dir)...)
	}
	run("topic", "create", "-name", "Orders", "-read", "2", "-write", "2")
	if out := run("topic", "list"); !strings.Contains(out, "Orders") {
		t.Fatalf("topic list:\n%s", out)
	}
	out := run("send", "-topic", "Orders", "-tags", "new", "-queue", "1", "first", "second")
	if strings.Count(out, "queue=1") != 2 || !strings.Contains(out, "offset=1") {
		t.Fatalf("send:\n%s", out)
	}
	out = run("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms")
	if !strings.Contains(out, "first") || !strings.Contains(out, "second") || !strings.Contains(out, `tags="new"`) {
		t.Fatalf("consume:\n%s", out)
	}
	// The group's offsets were committed: consuming again prints nothing.
	if out := run("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms"); strings.Contains(out, "first") {
		t.Fatalf("second consume got old messages:\n%s", out)
	}
	if out := run("offset", "show", "-group", "billing", "-topic", "Orders"); !strings.Contains(out, "CONSUMER OFFSET") {
		t.Fatalf("offset show:\n%s", out)
	}
	run("offset", "reset", "-group", "billing", "-topic", "Orders", "-to", "first")
	if out := run("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms"); !strings.Contains(out, "first") {
		t.Fatalf("consume after reset to first:\n%s", out)
	}
	// -n stops after that many messages, and commits only those.
	run("offset", "reset", "-group", "billing", "-topic", "Orders", "-to", "first")
	if out := run("consume", "-topic", "Orders", "-group", "billing", "-n", "1"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "first") {
		t.Fatalf("consume -n 1:\n%s", out)
	}
	if out := run("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "second") {
		t.Fatalf("consume after -n 1:\n%s", out)
	}
	if out := run("stats"); !strings.Contains(out, "Orders") || !strings.Contains(out, "MiB of segments") {
		t.Fatalf("stats:\n%s", out)
	}
	if out := run("verify"); !strings.Contains(out, "ok") || !strings.Contains(out, "2 records") {
		t.Fatalf("verify:\n%s", out)
	}
	run("topic", "delete", "-name", "Orders")
	if out := run("topic", "list"); strings.Contains(out, "Orders") {
		t.Fatalf("topic list after delete:\n%s", out)
	}
}

// TestReadOnlyCommandsNeedADataDir: a command other than demo, send -create and topic
// create fails on a missing data dir, saying so, and creates nothing: no folder, no 64 MiB
// segment. In an existing folder that holds no store it creates nothing either.
func TestReadOnlyCommandsNeedADataDir(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "data")
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"stats"}, {"topic", "list"}, {"offset", "show"}, {"verify"},
		{"offset", "reset", "-group", "g", "-topic", "T", "-to", "first"},
		{"topic", "update", "-name", "T", "-read", "2"}, {"topic", "delete", "-name", "T"},
		{"consume", "-topic", "T"}, {"send", "-topic", "T", "x"},
	} {
		code, _, errOut := edgemq(t, append(args, "-data", missing)...)
		if code != 1 || !strings.Contains(errOut, "no data dir at "+missing) {
			t.Errorf("%v on a missing dir: exit %d, %q", args, code, errOut)
		}
		code, _, errOut = edgemq(t, append(args, "-data", empty)...)
		if code != 1 || !strings.Contains(errOut, "not an EdgeMQ data dir") {
			t.Errorf("%v on an empty dir: exit %d, %q", args, code, errOut)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Fatalf("%v created %s", args, missing)
		}
		if names, _ := os.ReadDir(empty); len(names) > 0 {
			t.Fatalf("%v wrote %v into %s", args, names, empty)
		}
	}
}

// TestReadOnlyCommandsKeepRetentionOff: the commands that only look at a store never run
// retention, which could delete segments.
func TestReadOnlyCommandsKeepRetentionOff(t *testing.T) {
	c := newConfig()
	c.dataDir = t.TempDir()
	c.store.MaxAge, c.store.MaxBytes, c.store.MaxUsedRatio = time.Hour, 1<<30, 0.5
	os.WriteFile(filepath.Join(c.dataDir, "meta.db"), nil, 0o644)
	if err := c.prepare(readOnly); err != nil {
		t.Fatal(err)
	}
	if c.store.MaxAge >= 0 || c.store.MaxBytes != 0 || c.store.MaxUsedRatio >= 0 {
		t.Fatalf("read-only: max_age %v, max_bytes %d, max_used_ratio %v: want all off", c.store.MaxAge, c.store.MaxBytes, c.store.MaxUsedRatio)
	}
}

// TestTopicUpdateChangesOnlyTheFieldsGiven: an update keeps every setting it is not given.
func TestTopicUpdateChangesOnlyTheFieldsGiven(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "topic", "create", "-data", dir, "-name", "O", "-read", "8", "-write", "8", "-order")
	check := func(step string, want topicJSON) {
		t.Helper()
		var got []topicJSON
		mustJSON(t, &got, "topic", "list", "-data", dir)
		if len(got) != 1 || got[0] != want {
			t.Fatalf("after %s: got %+v, want %+v", step, got, want)
		}
	}
	check("create", topicJSON{Name: "O", ReadQueues: 8, WriteQueues: 8, Perm: "rw", Order: true, Durability: "default"})
	mustRun(t, "topic", "update", "-data", dir, "-name", "O", "-read", "4")
	check("-read 4", topicJSON{Name: "O", ReadQueues: 4, WriteQueues: 8, Perm: "rw", Order: true, Durability: "default"})
	mustRun(t, "topic", "update", "-data", dir, "-name", "O", "-durability", "async")
	check("-durability async", topicJSON{Name: "O", ReadQueues: 4, WriteQueues: 8, Perm: "rw", Order: true, Durability: "async"})
	mustRun(t, "topic", "update", "-data", dir, "-name", "O", "-perm", "r")
	check("-perm r", topicJSON{Name: "O", ReadQueues: 4, WriteQueues: 8, Perm: "r", Order: true, Durability: "async"})
	mustRun(t, "topic", "update", "-data", dir, "-name", "O", "-order=false", "-write", "2")
	check("-order=false -write 2", topicJSON{Name: "O", ReadQueues: 4, WriteQueues: 2, Perm: "r", Order: false, Durability: "async"})
	mustRun(t, "topic", "update", "-data", dir, "-name", "O", "-durability", "default")
	check("-durability default", topicJSON{Name: "O", ReadQueues: 4, WriteQueues: 2, Perm: "r", Order: false, Durability: "default"})
	if code, _, errOut := edgemq(t, "topic", "update", "-data", dir, "-name", "O", "-durability", "eventually"); code == 0 || !strings.Contains(errOut, "-durability") {
		t.Fatalf("-durability eventually: exit %d %q", code, errOut)
	}
}

// TestSendNeedsATopicOrCreate: send refuses a topic that does not exist unless -create;
// -sharding_key picks the queue, -message_keys are stored with the message.
func TestSendNeedsATopicOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, _, errOut := edgemq(t, "send", "-data", dir, "-topic", "Typo", "x")
	if code != 1 || !strings.Contains(errOut, "no data dir") {
		t.Fatalf("send to a missing dir: exit %d %q", code, errOut)
	}
	mustRun(t, "send", "-data", dir, "-topic", "Orders", "-create", "x") // makes the dir too
	code, _, errOut = edgemq(t, "send", "-data", dir, "-topic", "Ordres", "x")
	if code != 1 || !strings.Contains(errOut, `topic "Ordres" does not exist`) || !strings.Contains(errOut, "-create") {
		t.Fatalf("send to a missing topic: exit %d %q", code, errOut)
	}
	if out := mustRun(t, "topic", "list", "-data", dir); strings.Contains(out, "Ordres") {
		t.Fatalf("a refused send created its topic:\n%s", out)
	}

	out := mustRun(t, "send", "-data", dir, "-topic", "Orders", "-json", "-sharding_key", "order-42", "-message_keys", "k1 k2", "a", "b", "c")
	var queues []int32
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var s sentJSON
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("send -json line %q: %v", l, err)
		}
		queues = append(queues, s.QueueID)
	}
	if len(queues) != 3 || queues[0] != queues[1] || queues[1] != queues[2] {
		t.Fatalf("one sharding key went to queues %v", queues)
	}
	out = mustRun(t, "consume", "-data", dir, "-topic", "Orders", "-group", "g", "-wait", "200ms")
	if strings.Count(out, `keys="k1 k2"`) != 3 {
		t.Fatalf("consume does not show the message keys:\n%s", out)
	}
}

// TestSendFromStdin sends a line a message.
func TestSendFromStdin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	stdin = strings.NewReader("one\ntwo\nthree\n")
	t.Cleanup(func() { stdin = os.Stdin })
	out := mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "-queue", "0")
	if strings.Count(out, "queue=0") != 3 || !strings.Contains(out, "offset=2") {
		t.Fatalf("send from stdin:\n%s", out)
	}
}

// TestJSONOutput: every command that prints data prints JSON with -json.
func TestJSONOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var v struct {
		Version string `json:"version"`
		Go      string `json:"go"`
	}
	mustJSON(t, &v, "version")
	if v.Version != version || v.Go == "" {
		t.Errorf("version -json: %+v", v)
	}
	var sent sentJSON
	out := mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "-queue", "1", "-tags", "a", "-json", "héllo")
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.QueueID != 1 || sent.Topic != "T" || sent.MsgID == "" {
		t.Errorf("send -json: %v %+v", err, sent)
	}
	mustRun(t, "send", "-data", dir, "-topic", "T", "-queue", "1", "-json", "\xff\x00binary")
	var msgs []messageJSON
	out = mustRun(t, "consume", "-data", dir, "-topic", "T", "-group", "g", "-wait", "200ms", "-json")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m messageJSON
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("consume -json line %q: %v", l, err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 2 || msgs[0].Body == nil || *msgs[0].Body != "héllo" || msgs[0].Tags != "a" || msgs[0].MsgID != sent.MsgID ||
		msgs[1].Body != nil || string(msgs[1].BodyBase64) != "\xff\x00binary" || msgs[1].QueueOffset != 1 {
		t.Errorf("consume -json: %+v", msgs)
	}
	var topics []topicJSON
	mustJSON(t, &topics, "topic", "list", "-data", dir)
	if len(topics) != 1 || topics[0].Name != "T" || topics[0].Messages != 2 {
		t.Errorf("topic list -json: %+v", topics)
	}
	var lags []lagJSON
	mustJSON(t, &lags, "offset", "show", "-data", dir, "-group", "g", "-topic", "T")
	if len(lags) != 4 || lags[1].ConsumerOffset == nil || *lags[1].ConsumerOffset != 2 || lags[1].Lag != 0 {
		t.Errorf("offset show -json: %+v", lags)
	}
	mustJSON(t, &lags, "offset", "reset", "-data", dir, "-group", "g", "-topic", "T", "-to", "first")
	if len(lags) != 4 || *lags[1].ConsumerOffset != 0 || lags[1].Lag != 2 {
		t.Errorf("offset reset -json: %+v", lags)
	}
	var st statsJSON
	mustJSON(t, &st, "stats", "-data", dir)
	if len(st.Queues) != 1 || st.Queues[0].Messages != 2 || st.Commitlog.SegmentBytes != 64<<20 {
		t.Errorf("stats -json: %+v", st)
	}
	var vr verifyJSON
	mustJSON(t, &vr, "verify", "-data", dir)
	if !vr.OK || vr.Records != 2 || vr.Messages != 2 {
		t.Errorf("verify -json: %+v", vr)
	}
	var dr demoJSON
	mustJSON(t, &dr, "demo", "-data", dir, "-messages", "200", "-flush", "async")
	if dr.Produced != 200 || dr.ConsumedConcurrent != 200 || dr.ConsumedOrderly != 200 || dr.Latency["p50"] <= 0 || len(dr.Lag["demo"]) != 4 {
		t.Errorf("demo -json: %+v", dr)
	}
}

func TestHumanUnits(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{humanBytes(0), "0 B"},
		{humanBytes(1023), "1023 B"},
		{humanBytes(1024), "1 KiB"},
		{humanBytes(1536), "1.5 KiB"},
		{humanBytes(64 << 20), "64 MiB"},
		{humanBytes(1<<20 - 1), "1 MiB"},
		{humanBytes(123456789), "118 MiB"},
		{humanBytes(5 << 40), "5 TiB"},
		{humanDuration(850), "850ns"},
		{humanDuration(12345 * time.Nanosecond), "12.3µs"},
		{humanDuration(999_600 * time.Nanosecond), "1ms"},
		{humanDuration(1460 * time.Microsecond), "1.46ms"},
		{humanDuration(250 * time.Millisecond), "250ms"},
		{humanDuration(2500 * time.Millisecond), "2.5s"},
		{humanDuration(200 * time.Second), "3m20s"},
		{humanCount(1234567), "1,234,567"},
		{humanCount(-1000), "-1,000"},
		{humanCount(999), "999"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestDemoRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, out, errOut := edgemq(t, "demo", "-data", dir, "-messages", "2000", "-producers", "2", "-flush", "async")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"produced  2000 messages", "consumed  2000 messages (concurrent) and 2000 (orderly)", "p99",
		"saw 0 messages out of queue order", "lag of group demo", "lag of group demo-orderly"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// A second run over the same dir consumes only its own messages.
	if code, out, errOut := edgemq(t, "demo", "-data", dir, "-messages", "500", "-flush", "async"); code != 0 || !strings.Contains(out, "consumed  500 messages (concurrent) and 500 (orderly)") {
		t.Fatalf("second demo: exit %d\n%s%s", code, out, errOut)
	}
	// The consumers' retry topics are system topics: listed with -all only.
	if out := mustRun(t, "topic", "list", "-data", dir); !strings.Contains(out, "Telemetry") || strings.Contains(out, "%RETRY%") {
		t.Errorf("topic list:\n%s", out)
	}
	if out := mustRun(t, "topic", "list", "-data", dir, "-all"); !strings.Contains(out, "%RETRY%demo ") {
		t.Errorf("topic list -all:\n%s", out)
	}
	if out := mustRun(t, "offset", "show", "-data", dir); !strings.Contains(out, "demo-orderly  Telemetry") || strings.Contains(out, "%RETRY%") {
		t.Errorf("offset show:\n%s", out)
	}
	if out := mustRun(t, "stats", "-data", dir); !strings.Contains(out, "Telemetry") || strings.Contains(out, "%RETRY%") {
		t.Errorf("stats:\n%s", out)
	}
}

// TestSendKeepsSendsInFlight: send acknowledges every message once, in the order given, with
// many in flight; -inflight must be positive.
func TestSendKeepsSendsInFlight(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"send", "-data", dir, "-topic", "Bulk", "-create", "-queue", "0", "-inflight", "64"}
	const n = 300
	for i := range n {
		args = append(args, fmt.Sprintf("m%d", i))
	}
	out := mustRun(t, args...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("%d acknowledgements for %d messages", len(lines), n)
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, fmt.Sprintf(" queue=0 offset=%d", i)) {
			t.Fatalf("acknowledgement %d: %q", i, l)
		}
	}
	if code, _, errOut := edgemq(t, "send", "-data", dir, "-topic", "Bulk", "-inflight", "0", "x"); code != 2 || !strings.Contains(errOut, "-inflight") {
		t.Fatalf("-inflight 0: exit %d, %q", code, errOut)
	}
}

// TestSmallSegmentsOpenWithoutTheirConfig: a data dir made with small segments (and a
// max_message_size they hold) opens without its config: the default max_message_size
// shrinks to what its segments hold, for verify and for the broker's commands.
func TestSmallSegmentsOpenWithoutTheirConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-store.segment_size", "1MiB", "-topic", "T", "-create", "hello")
	for _, args := range [][]string{{"verify"}, {"stats"}, {"topic", "list"}, {"send", "-topic", "T", "again"}} {
		mustRun(t, append(args, "-data", dir)...)
	}
	// A size given is kept, and one the segments cannot hold fails, naming it.
	code, _, errOut := edgemq(t, "verify", "-data", dir, "-broker.max_message_size", "4MiB")
	if code != 1 || !strings.Contains(errOut, "MaxMessageSize 4194304") {
		t.Fatalf("verify with a max_message_size too large: exit %d, %q", code, errOut)
	}
	var st statsJSON
	mustJSON(t, &st, "stats", "-data", dir)
	if st.Commitlog.SegmentBytes != 1<<20 {
		t.Fatalf("segments of %d bytes, want 1MiB", st.Commitlog.SegmentBytes)
	}
}

// TestREADMECommands runs the command lines of the README's "The edgemq command" block in
// order in an empty directory: each must succeed. (The demo runs 2000 messages instead of
// its default 200,000, to keep the test short.)
func TestREADMECommands(t *testing.T) {
	lines := readmeBlock(t, "## The edgemq command", "```sh")
	t.Chdir(t.TempDir())
	for _, l := range lines {
		args, err := shellWords(l)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if len(args) == 0 {
			continue
		}
		if args[0] != "edgemq" {
			t.Fatalf("README line %q does not run edgemq", l)
		}
		args = args[1:]
		if args[0] == "demo" {
			args = append(args, "-messages", "2000")
		}
		code, out, errOut := edgemq(t, args...)
		if code != 0 {
			t.Fatalf("README: %s: exit %d\n%s%s", l, code, out, errOut)
		}
	}
	if len(lines) < 8 {
		t.Fatalf("README block has %d lines", len(lines))
	}
}

// readmeBlock returns the lines of the first code block opening with fence after the
// heading, comments cut.
func readmeBlock(t *testing.T, heading, fence string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "\n"+fence+"\n")
	if !ok {
		t.Fatalf("README's %q has no %s block", heading, fence)
	}
	block, _, _ := strings.Cut(rest, "\n```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

// shellWords splits a command line as sh does for words, single and double quotes (without
// escapes inside single quotes, and only \" and \\ inside double ones).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'' && c == '\'', quote == '"' && c == '"':
			quote = 0
		case quote == '"' && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			w.WriteByte(s[i])
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`edgemq send -topic "A B" -tags new '{"id": 42}'`)
	if want := []string{"edgemq", "send", "-topic", "A B", "-tags", "new", `{"id": 42}`}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q %v, want %q", got, err, want)
	}
}
