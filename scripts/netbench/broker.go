package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kind is one broker under test: EdgeMQ (edgemq serve), Apache RocketMQ (name server +
// broker) or NATS JetStream (nats-server), with async or sync flush.
type kind struct {
	Name      string
	RocketMQ  bool
	JetStream bool
	Sync      bool
}

func (k kind) flush() string {
	switch {
	case k.RocketMQ && k.Sync:
		return "SYNC_FLUSH"
	case k.RocketMQ:
		return "ASYNC_FLUSH"
	case k.Sync:
		return "sync"
	}
	return "async"
}

var kinds = []kind{
	{Name: "edgemq-async"},
	{Name: "rocketmq-async", RocketMQ: true},
	{Name: "jetstream-async", JetStream: true},
	{Name: "edgemq-sync", Sync: true},
	{Name: "rocketmq-sync", RocketMQ: true, Sync: true},
	{Name: "jetstream-sync", JetStream: true, Sync: true},
}

// kindNamed returns the kind of kinds named name (a name of the list above).
func kindNamed(name string) kind {
	i := slices.IndexFunc(kinds, func(k kind) bool { return k.Name == name })
	if i < 0 {
		panic("netbench: no broker kind " + name) // a name in the code, not input
	}
	return kinds[i]
}

// config is what starting a broker needs.
type config struct {
	dir        string // parent of the fresh data dirs
	edgemqBin  string
	natsBin    string // nats-server
	rmqScript  string // scripts/interop/rocketmq.sh
	rmqCP      string // resolved classpath of the RocketMQ servers, copied into each data dir
	rmqHeap    string
	edgemqPort int
	rmqNSPort  int
	rmqBrPort  int
	natsPort   int
	maxConns   int
	edgemqArgs []string // more flags for edgemq serve
	pinBroker  string   // CPUs of the brokers (taskset list), or none
	keep       bool
}

// broker is a running broker.
type broker struct {
	kind       kind
	dir        string
	ns         string // name-server address the clients use
	brokerAddr string // where topics are created
	pid        int    // the broker process (edgemq serve, nats-server, or RocketMQ's BrokerStartup JVM)
	nsPid      int    // RocketMQ's name-server JVM; 0 for the others
	cmd        *exec.Cmd
	exited     chan error // edgemq serve and nats-server: the result of cmd.Wait
	// listenAfter is the time from the spawn until the broker's port accepted a connection.
	listenAfter time.Duration
}

// dialLoop takes the time and from then on dials addr every millisecond until a connection
// is accepted or timeout passes; it sends the time taken (0 on timeout).
func dialLoop(addr string, timeout time.Duration) chan time.Duration {
	done := make(chan time.Duration, 1)
	t0 := time.Now()
	go func() {
		for time.Since(t0) < timeout {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				d := time.Since(t0)
				c.Close()
				done <- d
				return
			}
			time.Sleep(time.Millisecond) // retry poll: the broker is starting
		}
		done <- 0
	}()
	return done
}

// pids returns the broker's processes: for RocketMQ the broker and the name server.
func (b *broker) pids() []int {
	if b.nsPid != 0 {
		return []int{b.pid, b.nsPid}
	}
	return []int{b.pid}
}

// startBroker starts k in a fresh data dir and measures the time from spawning it to the first
// acknowledged send, which a client sends, looping, from just before the spawn:
// rocketmq-client-go's (firstAck) to EdgeMQ and RocketMQ, nats.go's (natsFirstAck, which
// creates the stream first) to nats-server. For RocketMQ the spawn is of rocketmq.sh start,
// which starts the name-server JVM, then the broker JVM, and waits for the broker to register;
// the time includes all of it.
func startBroker(ctx context.Context, k kind, c config) (*broker, time.Duration, error) {
	dir, err := os.MkdirTemp(c.dir, "netbench-"+k.Name+"-")
	if err != nil {
		return nil, 0, err
	}
	b := &broker{kind: k, dir: dir}
	if k.JetStream {
		addr := "127.0.0.1:" + strconv.Itoa(c.natsPort)
		b.ns, b.brokerAddr = addr, addr
		conf, err := natsConfig(dir, addr, k.Sync, c.maxConns)
		if err != nil {
			return nil, 0, err
		}
		b.cmd = pinned(c.pinBroker, c.natsBin, "-c", conf)
		return b.spawn(c, natsFirstAck(ctx, addr, 30*time.Second))
	}
	if !k.RocketMQ {
		addr := "127.0.0.1:" + strconv.Itoa(c.edgemqPort)
		b.ns, b.brokerAddr = addr, addr
		b.cmd = pinned(c.pinBroker, c.edgemqBin, "serve", "-data", filepath.Join(dir, "data"),
			"-server.listen", addr, "-store.flush", k.flush(),
			"-server.max_conns", strconv.Itoa(c.maxConns), "-log_level", "warn",
			// No HTTP listener: its default port would collide with other runs.
			"-http.listen", "off",
			// A new group with no offset (the Java benchmark Consumer consumes from the last
			// offset) reads a queue from its start as RocketMQ does while the queue's first
			// message is in memory, however long the pre-fill took.
			"-broker.new_queue_window", "1h")
		b.cmd.Args = append(b.cmd.Args, c.edgemqArgs...)
		return b.spawn(c, firstAck(ctx, b.ns, 30*time.Second))
	}
	if err := os.WriteFile(filepath.Join(dir, "classpath"), []byte(c.rmqCP), 0o644); err != nil {
		return nil, 0, err
	}
	b.ns = "127.0.0.1:" + strconv.Itoa(c.rmqNSPort)
	b.brokerAddr = "127.0.0.1:" + strconv.Itoa(c.rmqBrPort)
	cmd := pinned(c.pinBroker, c.rmqScript, "start", dir) // its JVMs inherit the CPUs
	cmd.Env = append(os.Environ(),
		"RMQ_NAMESRV_PORT="+strconv.Itoa(c.rmqNSPort), "RMQ_BROKER_PORT="+strconv.Itoa(c.rmqBrPort),
		"RMQ_FLUSH_DISK_TYPE="+k.flush(), "RMQ_HEAP="+c.rmqHeap)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	ackDone := firstAck(ctx, b.ns, 300*time.Second)
	listening := dialLoop(b.brokerAddr, 300*time.Second)
	runErr := cmd.Run()
	pidOf := func(name string) int {
		s, _ := os.ReadFile(filepath.Join(dir, name+".pid"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(s)))
		return n
	}
	b.pid, b.nsPid = pidOf("broker"), pidOf("namesrv")
	r := <-ackDone
	b.listenAfter = <-listening
	if runErr != nil {
		b.stop(c)
		return nil, 0, fmt.Errorf("%s: rocketmq.sh start: %w: %s", k.Name, runErr, lastLines(errb.String(), 10))
	}
	if r.err != nil {
		b.stop(c)
		return nil, 0, fmt.Errorf("%s: first send: %w", k.Name, r.err)
	}
	return b, r.took, nil
}

// spawn starts b.cmd (edgemq serve or nats-server), its output into log in b.dir, while
// ackDone's client, started just before, sends until it gets an acknowledgement; it returns
// the time to that first acknowledgement.
func (b *broker) spawn(c config, ackDone chan ackResult) (*broker, time.Duration, error) {
	logf, err := os.Create(filepath.Join(b.dir, "broker.log"))
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	listening := dialLoop(b.ns, 30*time.Second)
	if err := b.cmd.Start(); err != nil {
		return nil, 0, err
	}
	b.pid = b.cmd.Process.Pid
	b.exited = make(chan error, 1)
	go func() { b.exited <- b.cmd.Wait() }()
	r := <-ackDone
	if r.err != nil {
		b.stop(c)
		return nil, 0, fmt.Errorf("%s: first send: %w", b.kind.Name, r.err)
	}
	b.listenAfter = <-listening
	return b, r.took, nil
}

// stop stops the broker (TERM, then KILL) and, unless c.keep, removes its data dir.
func (b *broker) stop(c config) error {
	var err error
	if b.kind.RocketMQ {
		cmd := exec.Command(c.rmqScript, "stop", b.dir)
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("rocketmq.sh stop: %w: %s", e, lastLines(string(out), 5))
		}
	} else if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case e := <-b.exited:
			var ee *exec.ExitError
			if e != nil && !errors.As(e, &ee) {
				err = e
			} else if e != nil {
				err = fmt.Errorf("%s exited: %w", b.kind.Name, e)
			}
		case <-time.After(30 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
			err = fmt.Errorf("%s did not stop in 30 s; killed", b.kind.Name)
		}
	}
	if !c.keep {
		os.RemoveAll(b.dir)
	}
	return err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
