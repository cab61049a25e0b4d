package main

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"golang.org/x/sys/unix"
)

// TestWatchdogInterval: the watchdog pings at half of WATCHDOG_USEC, for this process only
// (WATCHDOG_PID), and not at all without WATCHDOG_USEC or with a malformed one.
func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		err       bool
	}{
		{"", "", 0, false},
		{"30000000", "", 15 * time.Second, false},
		{"30000000", self, 15 * time.Second, false},
		{"30000000", "1", 0, false},
		{"400000", self, 200 * time.Millisecond, false},
		{"soon", "", 0, true},
		{"0", "", 0, true},
		{"-5", self, 0, true},
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		got, err := watchdogInterval()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, %v; want %v, error %v", tc.usec, tc.pid, got, err, tc.want, tc.err)
		}
	}
}

// TestHealthStall: the watchdog's checks give the flusher the check period, and at least two
// async flush intervals, to make progress.
func TestHealthStall(t *testing.T) {
	for _, tc := range []struct {
		period, flush, want time.Duration
	}{
		{15 * time.Second, 0, 15 * time.Second},
		{200 * time.Millisecond, 0, time.Second}, // the default flush interval, 500ms
		{15 * time.Second, time.Minute, 2 * time.Minute},
		{15 * time.Second, time.Second, 15 * time.Second},
	} {
		if got := healthStall(tc.period, edge.Options{Store: &store.Options{FlushInterval: tc.flush}}); got != tc.want {
			t.Errorf("period %v, flush_interval %v: stall %v, want %v", tc.period, tc.flush, got, tc.want)
		}
	}
	if got := healthStall(time.Second, edge.Options{}); got != time.Second {
		t.Errorf("no store options: stall %v, want 1s", got)
	}
}

// notifications collects the messages sent to a notify socket in the background.
func notifications(t *testing.T, nc *net.UnixConn) <-chan string {
	t.Helper()
	ch := make(chan string, 1024)
	go func() {
		defer close(ch)
		buf := make([]byte, 4096)
		for {
			n, err := nc.Read(buf)
			if err != nil {
				return // the socket closed at the end of the test
			}
			ch <- string(buf[:n])
		}
	}()
	return ch
}

// next returns the next message of ch that holds want, failing the test after timeout.
func next(t *testing.T, ch <-chan string, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case msg, ok := <-ch:
			if !ok {
				t.Fatalf("notify socket closed, waiting for %q", want)
			}
			if strings.Contains(msg, want) {
				return msg
			}
		case <-deadline:
			t.Fatalf("no %q sent to NOTIFY_SOCKET in %v", want, timeout)
		}
	}
}

// TestServeWatchdog: under a systemd watchdog (WATCHDOG_USEC), serve sends READY=1 once its
// listener answers, then every half WATCHDOG_USEC a STATUS= line and WATCHDOG=1. Once its
// disk fails (here a file size limit set on the running process makes the next commitlog
// segment impossible to create: sends fail), the store is unhealthy: it says so in its
// STATUS, logs why, and pings no more, so that systemd restarts it.
func TestServeWatchdog(t *testing.T) {
	dir := t.TempDir() + "/data"
	sock, nc := notifySocket(t)
	ch := notifications(t, nc)
	c := startChild(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"}, "serve", "-data", dir,
		"-server.listen", "127.0.0.1:0", "-server.vip_listen", "off", "-http.listen", "127.0.0.1:0",
		"-store.segment_size", "256KiB", "-broker.max_message_size", "32KiB", "-store.queue_segment_entries", "1024")
	ready := next(t, ch, "READY=1", 60*time.Second)
	addr, ok := strings.CutPrefix(ready, "READY=1\nSTATUS=serving on ")
	if !ok {
		t.Fatalf("notified %q", ready)
	}
	cl := dial(t, addr)
	cl.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"})

	status := next(t, ch, "STATUS=serving on "+addr+": ", 10*time.Second)
	for _, want := range []string{" topics, ", " msg/s in, ", " msg/s out, 1 connections, commitlog 256 KiB, disk ", "% used ("} {
		if !strings.Contains(status, want) {
			t.Errorf("STATUS lacks %q: %q", want, status)
		}
	}
	start := time.Now()
	for range 3 {
		next(t, ch, "WATCHDOG=1", 10*time.Second)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("3 pings in %v: faster than every 200ms", took)
	}

	// No file may grow past 128 KiB: the next segment (256 KiB, preallocated) cannot be made.
	lim := unix.Rlimit{Cur: 128 << 10, Max: 128 << 10}
	if err := unix.Prlimit(c.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		t.Skipf("cannot limit the server's file size: %v", err)
	}
	h := remoting.SendHeader{ProducerGroup: "p", Topic: "W", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		BornTimestamp: time.Now().UnixMilli()}
	body := bytes.Repeat([]byte("x"), 30<<10)
	failed := false
	for i := 0; i < 40 && !failed; i++ { // the active segment and the prepared one fill
		resp := cl.reply(cl.send(remoting.SendMessage, h.Ext(), body), 10*time.Second)
		failed = resp.Code != remoting.Success
	}
	if !failed {
		t.Fatal("40 sends of 30KiB succeeded with no file larger than 128KiB")
	}
	next(t, ch, "STATUS=unhealthy: edge: disk failure: ", 10*time.Second)
	c.waitFor(c.stderr, `(?m)^ERROR store unhealthy: no more pings to systemd's watchdog err=.*disk failure`, 10*time.Second)
	quiet := time.After(time.Second) // five periods
	for done := false; !done; {
		select {
		case msg := <-ch:
			if strings.Contains(msg, "WATCHDOG=1") {
				t.Fatalf("pinged the watchdog with a failing disk: %q\n%s", msg, c.stderr)
			}
		case <-quiet:
			done = true
		}
	}
	c.signal(syscall.SIGTERM)
	c.exit(30 * time.Second)
	next(t, ch, "STOPPING=1", 10*time.Second)
	if errOut := c.stderr.String(); strings.Count(errOut, "store unhealthy") != 1 {
		t.Errorf("the failed check is to be logged once:\n%s", errOut)
	}
}
