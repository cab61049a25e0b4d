package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edgemq runs the command line and returns its exit code, stdout and stderr.
func edgemq(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
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
		if c.setup != nil {
			code, out, _ := edgemq(t, "help", c.name)
			if code != 0 || !strings.Contains(out, "Usage: edgemq "+c.name) || !strings.Contains(out, "-data") {
				t.Errorf("help %s: exit %d, output %q", c.name, code, out)
			}
		}
	}
	if code, _, _ := edgemq(t, "frobnicate"); code != 2 {
		t.Fatalf("unknown command exited %d, want 2", code)
	}
	if code, _, _ := edgemq(t); code != 2 {
		t.Fatalf("no command exited %d, want 2", code)
	}
}

func TestAdminVerbsOnADataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, errOut := edgemq(t, append(args[:1:1], append([]string{"-data", dir}, args[1:]...)...)...)
		if code != 0 {
			t.Fatalf("edgemq %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	mustRun("topic", "-name", "Orders", "-read", "2", "-write", "2", "create")
	if out := mustRun("topic", "list"); !strings.Contains(out, "Orders") {
		t.Fatalf("topic list:\n%s", out)
	}
	out := mustRun("send", "-topic", "Orders", "-tags", "new", "-queue", "1", "first", "second")
	if strings.Count(out, "queue=1") != 2 || !strings.Contains(out, "offset=1") {
		t.Fatalf("send:\n%s", out)
	}
	out = mustRun("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms")
	if !strings.Contains(out, "first") || !strings.Contains(out, "second") || !strings.Contains(out, `tags="new"`) {
		t.Fatalf("consume:\n%s", out)
	}
	// The group's offsets were committed: consuming again prints nothing.
	if out := mustRun("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms"); strings.Contains(out, "first") {
		t.Fatalf("second consume got old messages:\n%s", out)
	}
	if out := mustRun("offset", "-group", "billing", "-topic", "Orders", "show"); !strings.Contains(out, "CONSUMER OFFSET") {
		t.Fatalf("offset show:\n%s", out)
	}
	mustRun("offset", "-group", "billing", "-topic", "Orders", "-to", "first", "reset")
	if out := mustRun("consume", "-topic", "Orders", "-group", "billing", "-wait", "300ms"); !strings.Contains(out, "first") {
		t.Fatalf("consume after reset to first:\n%s", out)
	}
	if out := mustRun("stats"); !strings.Contains(out, "Orders") {
		t.Fatalf("stats:\n%s", out)
	}
	if out := mustRun("verify"); !strings.Contains(out, "ok") || !strings.Contains(out, "2 records") {
		t.Fatalf("verify:\n%s", out)
	}
	// Bad input is a usage error, not a crash.
	if code, _, errOut := edgemq(t, "send", "-data", dir); code != 2 || !strings.Contains(errOut, "-topic") {
		t.Fatalf("send without topic: exit %d %q", code, errOut)
	}
	if code, _, errOut := edgemq(t, "topic", "-data", dir, "-name", "bad name", "create"); code != 1 || !strings.Contains(errOut, "invalid topic") {
		t.Fatalf("bad topic name: exit %d %q", code, errOut)
	}
}

func TestVerifyReportsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if code, out, errOut := edgemq(t, "send", "-data", dir, "-topic", "T", "-queue", "0", "hello world, a message to damage"); code != 0 {
		t.Fatalf("send: %s%s", out, errOut)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "commitlog", "*.log"))
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("XX"), 64+20) // inside the first record's body
	f.Close()
	code, out, _ := edgemq(t, "verify", "-data", dir)
	if code != 1 || !strings.Contains(out, "corrupt") {
		t.Fatalf("verify of a damaged store: exit %d\n%s", code, out)
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
}

// TestSendKeepsSendsInFlight: send acknowledges every message once, in the order given, with
// many in flight; -inflight must be positive.
func TestSendKeepsSendsInFlight(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"send", "-data", dir, "-topic", "Bulk", "-queue", "0", "-inflight", "64"}
	const n = 300
	for i := range n {
		args = append(args, fmt.Sprintf("m%d", i))
	}
	code, out, errOut := edgemq(t, args...)
	if code != 0 {
		t.Fatalf("send: exit %d\n%s", code, errOut)
	}
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
