package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// child is an edgemq process: this test binary started with EDGEMQ_TEST_CHILD (TestMain).
type child struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{} // closed once the process exited
}

// lockedBuffer collects what a process writes to a pipe.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startChild starts edgemq args in a child process, with env added to its environment,
// through EDGEMQ_TEST_EXEC_WRAPPER (qemu-user for cross-architecture runs) when set.
func startChild(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	if w := os.Getenv("EDGEMQ_TEST_EXEC_WRAPPER"); w != "" {
		cmd = exec.Command(w, append([]string{exe}, args...)...)
	}
	c := &child{t: t, cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Env = append(append(os.Environ(), "EDGEMQ_TEST_CHILD=1"), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// waitFor waits until what the child wrote to w matches re.
func (c *child) waitFor(w *lockedBuffer, re string, timeout time.Duration) {
	c.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for !rx.MatchString(w.String()) {
		select {
		case <-c.done:
			c.t.Fatalf("edgemq %v exited before printing %q\nstdout:\n%s\nstderr:\n%s", c.cmd.Args, re, c.stdout, c.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("edgemq %v did not print %q in %v\nstdout:\n%s\nstderr:\n%s", c.cmd.Args[1:], re, timeout, c.stdout, c.stderr)
		}
	}
}

func (c *child) interrupt() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		c.t.Fatal(err)
	}
}

// exit waits for the child to exit and returns its exit code.
func (c *child) exit(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
		return c.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		c.t.Fatalf("edgemq %v still runs %v later\nstdout:\n%s\nstderr:\n%s", c.cmd.Args[1:], timeout, c.stdout, c.stderr)
		return -1
	}
}

// sumOffsets returns the sum of group's consumer offsets on topic, failing the test if a
// queue has none.
func sumOffsets(t *testing.T, dir, group, topic string) int64 {
	t.Helper()
	var lags []lagJSON
	mustJSON(t, &lags, "offset", "show", "-data", dir, "-group", group, "-topic", topic)
	var sum int64
	for _, l := range lags {
		if l.ConsumerOffset == nil {
			t.Fatalf("group %s has no offset on queue %d of %s: %+v", group, l.QueueID, topic, lags)
		}
		sum += *l.ConsumerOffset
	}
	return sum
}

// TestInterruptStopsDemoCleanly: Ctrl-C during demo stops it cleanly: it prints its summary
// and lag, the groups' offsets are on disk (the broker persists them only at Close here),
// and it exits 130.
func TestInterruptStopsDemoCleanly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := startChild(t, nil, "demo", "-data", dir, "-messages", "100000000", "-flush", "async",
		"-broker.offset_persist_interval", "1h")
	c.waitFor(c.stderr, `received [1-9]`, 60*time.Second)
	c.interrupt()
	if code := c.exit(60 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	out := c.stdout.String()
	for _, want := range []string{"interrupted: the figures cover what was done", "produced  ", "latency ", "lag of group demo-orderly"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if errOut := c.stderr.String(); !strings.Contains(errOut, "stopping cleanly") {
		t.Errorf("stderr:\n%s", errOut)
	}
	for _, g := range []string{"demo", "demo-orderly"} {
		if n := sumOffsets(t, dir, g, "Telemetry"); n == 0 {
			t.Errorf("group %s saved no progress", g)
		}
	}
}

// TestInterruptStopsConsumeFollow: consume -f follows past -wait until Ctrl-C, then saves
// the offsets of what it printed and exits 130.
func TestInterruptStopsConsumeFollow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two", "three")
	c := startChild(t, nil, "consume", "-data", dir, "-topic", "T", "-group", "g", "-f", "-wait", "100ms")
	c.waitFor(c.stdout, `(?s)(offset=.*){3}`, 30*time.Second)
	select {
	case <-c.done:
		t.Fatalf("consume -f stopped without an interrupt\n%s", c.stderr)
	case <-time.After(500 * time.Millisecond):
	}
	c.interrupt()
	if code := c.exit(30 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, c.stderr)
	}
	if errOut := c.stderr.String(); !strings.Contains(errOut, "3 messages") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if n := sumOffsets(t, dir, "g", "T"); n != 3 {
		t.Errorf("offsets saved: %d messages consumed, want 3", n)
	}
}

// TestSecondInterruptQuitsAtOnce: a second Ctrl-C ends the process while its clean
// shutdown hangs.
func TestSecondInterruptQuitsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one")
	c := startChild(t, []string{"EDGEMQ_TEST_HOLD_STOP=1"}, "consume", "-data", dir, "-topic", "T", "-f")
	c.waitFor(c.stdout, `offset=0`, 30*time.Second)
	c.interrupt()
	c.waitFor(c.stderr, `stopping cleanly`, 10*time.Second)
	c.interrupt()
	if code := c.exit(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	if errOut := c.stderr.String(); !strings.Contains(errOut, "again: quitting now") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
