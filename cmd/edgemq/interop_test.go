package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCommandsInterop runs the commands against the cluster whose name server
// INTEROP_NAMESRV names (Apache RocketMQ from scripts/interop/rocketmq.sh, or edgemq
// serve): topics, sends, a consume, offsets shown and reset, stats and a short bench.
func TestCommandsInterop(t *testing.T) {
	ns := os.Getenv("INTEROP_NAMESRV")
	if ns == "" {
		t.Skip("INTEROP_NAMESRV not set")
	}
	topic := fmt.Sprintf("CliInterop%d", time.Now().UnixNano()%1e9)
	group := topic + "Group"
	run := func(args ...string) string {
		t.Helper()
		return mustRun(t, append(args, "-server", ns)...)
	}
	run("topic", "create", "-name", topic, "-read", "2", "-write", "2")
	defer run("topic", "delete", "-name", topic)
	if out := run("topic", "list"); !regexp.MustCompile(`(?m)^` + topic + ` +2 +2 +rw +- +0$`).MatchString(out) {
		t.Fatalf("topic list:\n%s", out)
	}
	// The broker's own topics are hidden without -all.
	if out := run("topic", "list"); strings.Contains(out, "TBW102") || strings.Contains(out, "rmq_sys_") || strings.Contains(out, "%RETRY%") {
		t.Errorf("topic list shows system topics:\n%s", out)
	}
	out := run("send", "-topic", topic, "-queue", "1", "-tags", "t", "one", "two", "three")
	if strings.Count(out, "queue=1") != 3 || !strings.Contains(out, "offset=2") {
		t.Fatalf("send:\n%s", out)
	}
	out = run("consume", "-topic", topic, "-group", group, "-n", "3", "-wait", "10s")
	if !regexp.MustCompile(`(?s)offset=0 tags="t".*one.*two.*three`).MatchString(out) {
		t.Fatalf("consume:\n%s", out)
	}
	if out := run("offset", "show", "-group", group, "-topic", topic); !regexp.MustCompile(`(?m)^` + group + ` +` + topic + ` +1 +0 +3 +3 +0$`).MatchString(out) {
		t.Errorf("offset show after consume:\n%s", out)
	}
	if out := run("offset", "reset", "-group", group, "-topic", topic, "-to", "first"); !regexp.MustCompile(`(?m) 1 +0 +3 +0 +3$`).MatchString(out) {
		t.Errorf("offset reset -to first:\n%s", out)
	}
	if out := run("offset", "reset", "-group", group, "-topic", topic, "-to", "last"); !regexp.MustCompile(`(?m) 1 +0 +3 +3 +0$`).MatchString(out) {
		t.Errorf("offset reset -to last:\n%s", out)
	}
	if out := run("stats", "-topic", topic); !regexp.MustCompile(`(?m)^` + topic + ` +1 +0 +3 +3$`).MatchString(out) {
		t.Errorf("stats -topic:\n%s", out)
	}
	var rep benchJSON
	mustJSON(t, &rep, "bench", "-server", ns, "-topic", topic, "-n", "200", "-producers", "2")
	if rep.Sent != 200 || rep.Consumed != 200 || rep.SendErrors != 0 {
		t.Errorf("bench: %+v", rep)
	}
}
