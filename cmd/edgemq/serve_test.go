package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
)

// startServe starts edgemq serve on dir in a child process, on a free port of 127.0.0.1
// without the VIP address, and returns it with the address its startup line reports.
func startServe(t *testing.T, env []string, args ...string) (*child, string) {
	t.Helper()
	args = append(append([]string{"serve"}, args...), "-server.listen", "127.0.0.1:0", "-server.vip_listen", "off",
		"-http.listen", "127.0.0.1:0")
	c := startChild(t, env, args...)
	return c, c.servingAddr()
}

// servingAddr waits for the child's startup line and returns the address it reports.
func (c *child) servingAddr() string {
	c.t.Helper()
	re := `(?m)^INFO serving.* listen=(127\.0\.0\.1:\d+) `
	c.waitFor(c.stderr, re, 60*time.Second)
	return regexp.MustCompile(re).FindStringSubmatch(c.stderr.String())[1]
}

func (c *child) signal(s syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(s); err != nil {
		c.t.Fatal(err)
	}
}

// client is a connection to a served broker that speaks the remoting protocol.
type client struct {
	t      *testing.T
	nc     net.Conn
	r      *remoting.Reader
	opaque int32
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: remoting.NewReader(nc, remoting.DefaultMaxFrameSize)}
}

// send writes a request and returns its opaque.
func (c *client) send(code int16, ext map[string]string, body []byte) int32 {
	c.t.Helper()
	req := remoting.NewRequest(code, ext, body)
	c.opaque++
	req.Opaque = c.opaque
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := req.WriteTo(c.nc); err != nil {
		c.t.Fatal(err)
	}
	return req.Opaque
}

// reply reads the reply to the request of opaque, waiting at most wait.
func (c *client) reply(opaque int32, wait time.Duration) *remoting.Command {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(wait))
	resp, err := c.r.Read()
	if err != nil {
		c.t.Fatalf("reading the reply to request %d: %v", opaque, err)
	}
	if !resp.IsResponse() || resp.Opaque != opaque {
		c.t.Fatalf("got %+v, want the reply to request %d", resp, opaque)
	}
	return resp
}

// call sends a request and returns its reply, failing the test unless it is SUCCESS.
func (c *client) call(code int16, ext map[string]string) *remoting.Command {
	c.t.Helper()
	resp := c.reply(c.send(code, ext, nil), 10*time.Second)
	if resp.Code != remoting.Success {
		c.t.Fatalf("request %d %v: reply code %d %q", code, ext, resp.Code, resp.Remark)
	}
	return resp
}

// notifySocket listens as systemd does for a Type=notify unit's messages and returns the
// socket's path, for NOTIFY_SOCKET, and its connection.
func notifySocket(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return path, nc
}

// notified reads the next message sent to the notify socket.
func notified(t *testing.T, nc *net.UnixConn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 4096)
	n, err := nc.Read(buf)
	if err != nil {
		t.Fatalf("no message to NOTIFY_SOCKET: %v", err)
	}
	return string(buf[:n])
}

// TestServeAnswersAndStopsCleanly: edgemq serve answers RocketMQ requests; on SIGTERM it
// answers a parked pull, persists the offsets committed over the wire (only a clean stop
// writes them here: offset_persist_interval is an hour), closes the store and exits 0
// within shutdown_timeout; it tells systemd when it is ready and when it stops.
func TestServeAnswersAndStopsCleanly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two", "three")
	mustRun(t, "topic", "create", "-data", dir, "-name", "Idle")
	sock, notify := notifySocket(t)
	c, addr := startServe(t, []string{"NOTIFY_SOCKET=" + sock}, "-data", dir,
		"-broker.offset_persist_interval", "1h", "-server.shutdown_timeout", "5s")
	if msg := notified(t, notify); !strings.HasPrefix(msg, "READY=1\n") || !strings.Contains(msg, addr) {
		t.Errorf("notified %q, want READY=1 and the address %s", msg, addr)
	}
	line := regexp.MustCompile(`(?m)^INFO serving.*$`).FindString(c.stderr.String())
	for _, want := range []string{"data_dir=" + dir, "topics=", "recovery_warnings=0", "took="} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %q: %s", want, line)
		}
	}

	cl := dial(t, addr)
	route := cl.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"})
	if !strings.Contains(string(route.Body), `"brokerDatas"`) {
		t.Errorf("route of T: %s", route.Body)
	}
	cl.call(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "billing", "topic": "T", "queueId": "0", "commitOffset": "2"})
	// A pull of an empty queue parks (long polling) until the stop answers it. sysFlag 6:
	// suspend, and the subscription is in the request (no heartbeat gave the group one).
	pull := cl.send(remoting.PullMessage, map[string]string{
		"consumerGroup": "billing", "topic": "Idle", "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "60000",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG"}, nil)
	// Requests are read in order: once a later one is answered, the server has the pull.
	if resp := cl.reply(cl.send(remoting.GetRouteInfoByTopic, map[string]string{"topic": "Idle"}, nil), 10*time.Second); resp.Code != remoting.Success {
		t.Fatalf("route of Idle: %d %q", resp.Code, resp.Remark)
	}

	stop := time.Now()
	c.signal(syscall.SIGTERM)
	if resp := cl.reply(pull, 10*time.Second); resp.Code != remoting.PullNotFound {
		t.Errorf("the parked pull got %d %q, want PULL_NOT_FOUND", resp.Code, resp.Remark)
	}
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, c.stderr)
	}
	if took := time.Since(stop); took > 5*time.Second {
		t.Errorf("stopping took %v, more than shutdown_timeout", took)
	}
	errOut := c.stderr.String()
	if strings.Contains(errOut, "after shutdown_timeout") || !regexp.MustCompile(`(?m)^INFO stopped took=`).MatchString(errOut) {
		t.Errorf("stderr:\n%s", errOut)
	}
	msg := notified(t, notify)
	for strings.HasPrefix(msg, "STATUS=") { // a periodic status update, sent before the stop
		msg = notified(t, notify)
	}
	if msg != "STOPPING=1" {
		t.Errorf("notified %q, want STOPPING=1", msg)
	}
	var lags []lagJSON
	mustJSON(t, &lags, "offset", "show", "-data", dir, "-group", "billing", "-topic", "T")
	if len(lags) == 0 || lags[0].QueueID != 0 || lags[0].ConsumerOffset == nil || *lags[0].ConsumerOffset != 2 {
		t.Fatalf("offsets after the stop: %+v, want 2 on queue 0", lags)
	}
}

// TestServeSecondSignalQuitsAtOnce: a second SIGINT ends serve while its clean stop hangs,
// with exit code 130; the data dir opens again.
func TestServeSecondSignalQuitsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one")
	c, addr := startServe(t, []string{"EDGEMQ_TEST_HOLD_STOP=1"}, "-data", dir)
	dial(t, addr).call(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "1"})
	c.interrupt()
	c.waitFor(c.stderr, `(?m)^INFO stopping cleanly; signal again to quit at once signal=SIGINT$`, 10*time.Second)
	c.interrupt()
	if code := c.exit(5 * time.Second); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, c.stderr)
	}
	if errOut := c.stderr.String(); !regexp.MustCompile(`(?m)^WARN quitting now`).MatchString(errOut) {
		t.Errorf("stderr:\n%s", errOut)
	}
	if code, out, errOut := edgemq(t, "verify", "-data", dir); code != 0 {
		t.Fatalf("verify after the second signal: exit %d\n%s%s", code, out, errOut)
	}
	mustRun(t, "stats", "-data", dir)
}

// TestServeFailsToStart: what keeps serve from starting exits 1 with one error line that
// names the cause: a bad config key or value (its key), an address in use, a data dir held
// by another process. A bad flag is a usage error.
func TestServeFailsToStart(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad value", []string{"-config", file("v.toml", "[server]\nmax_conns = 0\n")}, 1,
			"v.toml:2: server.max_conns = 0: want more than 0"},
		{"unknown key", []string{"-config", file("k.toml", "[server]\nlistn = \":9876\"\n")}, 1,
			"k.toml:2: unknown key server.listn: did you mean listen?"},
		{"bad address", []string{"-config", file("a.toml", "[server]\nlisten = \"9876\"\n")}, 1,
			`a.toml:2: server.listen = "9876": want host:port`},
		{"frames smaller than messages", []string{"-data", data, "-server.max_frame_size", "1MiB", "-broker.max_message_size", "1MiB"}, 1,
			"server.max_frame_size 1MiB cannot carry a message of broker.max_message_size 1MiB: make it at least 64KiB larger"},
		{"bad flag", []string{"-server.idle_timeout", "forever"}, 2,
			`invalid value "forever" for flag -server.idle_timeout`},
		{"address in use", []string{"-data", data, "-server.listen", busy.Addr().String(), "-server.vip_listen", "off", "-http.listen", "off"}, 1,
			"address already in use: another process has that address; choose one with -server.listen"},
		{"http address in use", []string{"-data", data, "-server.listen", "127.0.0.1:0", "-server.vip_listen", "off", "-http.listen", busy.Addr().String()}, 1,
			"address already in use: choose another with -http.listen, or -http.listen off"},
		{"an argument", []string{"-data", data, "now"}, 2, `serve takes no arguments besides its flags, got ["now"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := edgemq(t, append([]string{"serve"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want %d; stderr %q lacks %q", code, tc.code, errOut, tc.want)
			}
		})
	}

	// The address in use did not keep the data dir: it opens again, and serve fails on a
	// data dir another process holds, naming it.
	b, err := edge.Open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	code, _, errOut := edgemq(t, "serve", "-data", data, "-server.listen", "127.0.0.1:0", "-server.vip_listen", "off", "-http.listen", "off")
	if want := "pid " + strconv.Itoa(os.Getpid()); code != 1 || !strings.Contains(errOut, "open data dir "+data) || !strings.Contains(errOut, want) {
		t.Fatalf("serve on a held data dir: exit %d, stderr %q, want %q", code, errOut, want)
	}
}

// TestREADMEDaemon: the command lines of the README's daemon section run edgemq serve, which
// (on a free port, in a copy of configs/) answers a client and stops cleanly on SIGTERM; its
// config example is a valid file.
func TestREADMEDaemon(t *testing.T) {
	lines := readmeBlock(t, "## Run it as a daemon", "```sh")
	example := readmeBlock(t, "## Run it as a daemon", "```toml")
	if err := parseConfig(newConfig(), []byte(strings.Join(example, "\n")), "README.md"); err != nil {
		t.Fatalf("the README's config: %v", err)
	}
	cfg, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if err := os.Mkdir("configs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("configs/edgemq.toml", cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range lines {
		args, err := shellWords(l)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if len(args) == 0 {
			continue
		}
		if len(args) < 2 || args[0] != "edgemq" || args[1] != "serve" {
			t.Fatalf("README line %q does not run edgemq serve", l)
		}
		n++
		c, addr := startServe(t, nil, args[2:]...)
		dial(t, addr).call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"})
		c.signal(syscall.SIGTERM)
		if code := c.exit(30 * time.Second); code != 0 {
			t.Fatalf("README: %s: exit %d after SIGTERM\n%s", l, code, c.stderr)
		}
	}
	if n == 0 {
		t.Fatal("the README's daemon section runs no edgemq serve")
	}
	if _, err := os.Stat("data/meta.db"); err != nil {
		t.Fatalf("serve made no data dir in ./data: %v", err)
	}
}

// TestServeReportsRecovery: the startup line says when opening the store repaired it, and
// counts the warnings that said how.
func TestServeReportsRecovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	pos := writeStore(t, dir, "1MiB", 3, 100)
	flip(t, dir, 1<<20, pos[2]+50) // the last record: a torn tail, cut at open
	c, _ := startServe(t, nil, "-data", dir)
	line := regexp.MustCompile(`(?m)^INFO serving.*$`).FindString(c.stderr.String())
	if !strings.Contains(line, "serving; recovery repaired the store") || !regexp.MustCompile(` recovery_warnings=[1-9]`).MatchString(line) {
		t.Errorf("startup line: %s\nstderr:\n%s", line, c.stderr)
	}
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.stderr)
	}
}

// TestServeShutdownTimeout: a client that sends requests but never reads the replies holds
// its requests in flight; a stop waits shutdown_timeout for them, then closes the connection,
// closes the store cleanly and exits 0, saying so.
func TestServeShutdownTimeout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c, addr := startServe(t, nil, "-data", dir, "-server.shutdown_timeout", "1s", "-server.write_timeout", "1h")
	cl := dial(t, addr)
	// Write until the server reads nothing for 3s: its writer is stuck on replies this
	// client does not read, its request handlers on the writer, its reader on them.
	frame, err := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil).AppendFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := bytes.Repeat(frame, 256)
	pending := batch
	for stalled, i := 0, 0; stalled < 3; i++ {
		cl.nc.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := cl.nc.Write(pending)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && n == 0:
			stalled++
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatal(err)
		default:
			stalled = 0
		}
		if pending = pending[n:]; len(pending) == 0 {
			pending = batch
		}
		if i > 1e5 {
			t.Fatal("the server reads on, with none of its replies read")
		}
	}
	stop := time.Now()
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.stderr)
	}
	if took := time.Since(stop); took < time.Second {
		t.Errorf("stopped after %v, before shutdown_timeout", took)
	}
	errOut := c.stderr.String()
	if !strings.Contains(errOut, "WARN requests still handled after shutdown_timeout: connections closed at once shutdown_timeout=1s") ||
		!regexp.MustCompile(`(?m)^INFO stopped took=`).MatchString(errOut) {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// TestServeLogLevel: log_level holds back the reports below it, serve's own lines too; the
// address is then learnt from the READY message to systemd.
func TestServeLogLevel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	sock, notify := notifySocket(t)
	c := startChild(t, []string{"NOTIFY_SOCKET=" + sock}, "serve", "-data", dir, "-log_level", "warn",
		"-server.listen", "127.0.0.1:0", "-server.vip_listen", "off", "-http.listen", "127.0.0.1:0")
	msg := notified(t, notify)
	addr, ok := strings.CutPrefix(msg, "READY=1\nSTATUS=serving on ")
	if !ok {
		t.Fatalf("notified %q", msg)
	}
	dial(t, addr).call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"})
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.stderr)
	}
	if errOut := c.stderr.String(); errOut != "" {
		t.Errorf("log_level warn, and a clean run wrote:\n%s", errOut)
	}
}
