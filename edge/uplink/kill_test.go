package uplink

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// TestForwardSurvivesSIGKILL: a process forwarding to the hub is killed (SIGKILL) three
// times mid-forward; after the last, forwarding resumes from the stored cursors: every
// message arrives, in order per queue, and at most one batch per queue per kill twice.
func TestForwardSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	h := startHub(t, "")
	local := openLocal(t, dir, nil)
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	const total, batch, kills = 4000, 20, 3
	sendN(t, local, "T", 0, total)
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= kills; k++ {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestForwardKillChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "UPLINK_KILL_DIR="+dir, "UPLINK_KILL_HUB="+h.addr, fmt.Sprintf("UPLINK_KILL_BATCH=%d", batch))
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
		target := int64(k * total / (kills + 1))
		waitFor(t, 60*time.Second, fmt.Sprintf("%d upstream", target), func() bool { return count(t, h.b, "T") >= target })
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		t.Logf("kill %d at %d messages upstream", k, count(t, h.b, "T"))
	}
	local = openLocal(t, dir, nil)
	u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: batch,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
	waitFor(t, 60*time.Second, "backlog drained", func() bool { s := u.Stats().Up[0]; return s.Queues == 4 && s.Backlog == 0 })
	dups := checkSame(t, local, "T", h.b, "T", kills*4*batch)
	t.Logf("%d duplicates after %d kills", dups, kills)
}

// TestForwardKillChild is the child of TestForwardSurvivesSIGKILL: it forwards until killed.
func TestForwardKillChild(t *testing.T) {
	dir := os.Getenv("UPLINK_KILL_DIR")
	if dir == "" {
		t.Skip("child process of TestForwardSurvivesSIGKILL")
	}
	var batch int
	fmt.Sscan(os.Getenv("UPLINK_KILL_BATCH"), &batch)
	b, err := edge.Open(dir, brokerOptions(t, "gw1", nil))
	if err != nil {
		fmt.Println("OPENFAIL", err)
		os.Exit(3)
	}
	_, err = Start(b, &Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: batch,
		Upstream: Upstream{Addrs: os.Getenv("UPLINK_KILL_HUB"), Kind: KindEdgeMQ}}}})
	if err != nil {
		fmt.Println("STARTFAIL", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	select {}
}
