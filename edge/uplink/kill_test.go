package uplink

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestForwardSurvivesSIGKILL: a process forwarding to the hub is killed (SIGKILL) three
// times mid-forward (20 times at full scale, forwarding 1,000,000 messages); after the
// last, forwarding resumes from the stored cursors: every message arrives, in order per
// queue, and at most one batch per queue per kill twice.
func TestForwardSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	h := startHubStore(t, "", killStore())
	local := openLocal(t, dir, storeOpts(killStore()))
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	total, batch, kills := scaled(4000, 1_000_000), scaled(20, 64), scaled(3, 20)
	sendMany(t, local, "T", 0, total)
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for k := 1; k <= kills; k++ {
		cmd := startKillChild(t, k, "UPLINK_KILL_DIR="+dir, "UPLINK_KILL_HUB="+h.addr, fmt.Sprintf("UPLINK_KILL_BATCH=%d", batch))
		target := int64(k * total / (kills + 1))
		waitFor(t, 300*time.Second, fmt.Sprintf("%d upstream", target), func() bool { return count(t, h.b, "T") >= target })
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		t.Logf("kill %d at %d messages upstream", k, count(t, h.b, "T"))
	}
	local = openLocal(t, dir, storeOpts(killStore()))
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: batch,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
	waitFor(t, 600*time.Second, "backlog drained", func() bool { s := u.Stats().Up[0]; return s.Queues == 4 && s.Backlog == 0 })
	took := time.Since(start)
	dups := checkStream(t, local, "T", h.b, "T", kills*4*batch)
	t.Logf("%d messages forwarded in %v (%.0f/s) through %d kills; %d duplicates (at most %d: a batch per queue per kill)",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), kills, dups, kills*4*batch)
}

// TestForwardKillChild is the child of TestForwardSurvivesSIGKILL and TestDownSurvivesSIGKILL:
// it forwards (or mirrors, with UPLINK_KILL_DOWN) until killed.
func TestForwardKillChild(t *testing.T) {
	dir := os.Getenv("UPLINK_KILL_DIR")
	if dir == "" {
		t.Skip("child process of TestForwardSurvivesSIGKILL")
	}
	var batch int
	fmt.Sscan(os.Getenv("UPLINK_KILL_BATCH"), &batch)
	b, err := edge.Open(dir, brokerOptions(t, "gw1", storeOpts(killStore())))
	if err != nil {
		fmt.Println("OPENFAIL", err)
		os.Exit(3)
	}
	o := Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: batch,
		Upstream: Upstream{Addrs: os.Getenv("UPLINK_KILL_HUB"), Kind: KindEdgeMQ}}}}
	if os.Getenv("UPLINK_KILL_DOWN") != "" {
		o = Options{Down: []DownRule{{Name: "d", Topic: "cmd", BatchSize: batch,
			Upstream: Upstream{Addrs: os.Getenv("UPLINK_KILL_HUB"), Kind: KindEdgeMQ}}}}
	}
	_, err = Start(b, &o)
	if err != nil {
		fmt.Println("STARTFAIL", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	select {}
}

// TestDownSurvivesSIGKILL: a process mirroring a hub topic is killed (SIGKILL) three times
// mid-mirror (20 times at full scale); after each kill, what it stored locally and the
// offsets it committed upstream differ by at most the batch in flight per queue; after the
// last, mirroring resumes: every upstream message is stored locally exactly once, in order
// per queue.
func TestDownSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	h := startHubStore(t, "", killStore())
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "cmd", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	total, kills := scaled(4000, 40_000), scaled(3, 20)
	sendUniq(t, h.b, "cmd", 0, total)
	local := openLocal(t, dir, storeOpts(killStore()))
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
	const batch = 20
	var drift int64 // the most messages stored locally but not committed upstream after a kill
	start := time.Now()
	for k := 1; k <= kills; k++ {
		cmd := startKillChild(t, k, "UPLINK_KILL_DIR="+dir, "UPLINK_KILL_HUB="+h.addr, fmt.Sprintf("UPLINK_KILL_BATCH=%d", batch), "UPLINK_KILL_DOWN=1")
		// The child's progress shows as the group's offsets committed on the hub.
		target := int64(k * total / (kills + 1))
		waitFor(t, 300*time.Second, fmt.Sprintf("%d mirrored", target), func() bool {
			var n int64
			for q := range int32(4) {
				off, _ := h.b.QueryOffset(context.Background(), "gw1_d", mq.MessageQueue{Topic: "cmd", BrokerName: "hub", QueueID: q})
				n += max(off, 0)
			}
			return n >= target
		})
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		// What the child stored and the offsets it committed upstream differ by at most the
		// batch in flight per queue.
		local := openLocal(t, dir, storeOpts(killStore()))
		for q := range int32(4) {
			committed, _ := h.b.QueryOffset(context.Background(), "gw1_d", mq.MessageQueue{Topic: "cmd", BrokerName: "hub", QueueID: q})
			stored, _ := local.MaxOffset(context.Background(), mq.MessageQueue{Topic: "cmd", BrokerName: "gw1", QueueID: q})
			if d := stored - max(committed, 0); d < 0 || d > batch {
				t.Fatalf("kill %d, queue %d: %d stored locally, %d committed upstream: more than a batch (%d) apart", k, q, stored, committed, batch)
			}
			drift = max(drift, stored-max(committed, 0))
		}
		if err := local.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("stored and committed at most %d apart after a kill", drift)
	local = openLocal(t, dir, storeOpts(killStore()))
	u := startUplink(t, local, Options{Down: []DownRule{{Name: "d", Topic: "cmd", BatchSize: batch,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
	waitFor(t, 300*time.Second, "all mirrored", func() bool { return count(t, local, "cmd") >= int64(total) })
	waitFor(t, 10*time.Second, "no lag", func() bool { s := u.Stats().Down[0]; return s.Queues == 4 && s.Lag == 0 })
	checkQueues(t, readAll(t, h.b, "cmd"), readAll(t, local, "cmd"), 0)
	t.Logf("%d upstream messages mirrored through %d kills in %v, each stored locally once", total, kills, time.Since(start).Round(time.Millisecond))
}

// startKillChild starts this test binary as child k running TestForwardKillChild with env
// added to its environment, and waits for its READY line.
func startKillChild(t *testing.T, k int, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestForwardKillChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), env...)
	if fullScale() {
		cmd.Env = append(cmd.Env, "EDGEMQ_UPLINK_FULL=1") // the child opens the store as the parent made it
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "READY" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child %d: %q", k, line)
	}
	return cmd
}

// killStore makes the store settings of the kill tests' brokers, parent's and child's
// alike: nil (brokerOptions') in the small run.
func killStore() func() *store.Options {
	if fullScale() {
		return bulkStore
	}
	return nil
}
