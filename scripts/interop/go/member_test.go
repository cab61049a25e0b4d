package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// A child process is the test binary run again with childRoleEnv set: TestMain then runs
// runChild instead of the tests. It starts one push consumer, prints a line per delivery on
// stdout and stops when its stdin closes.
const (
	childRoleEnv  = "INTEROP_CHILD"       // role; "push" is the only one
	childTopicEnv = "INTEROP_CHILD_TOPIC" // topic to subscribe to
	childGroupEnv = "INTEROP_CHILD_GROUP" // consumer group
	childModelEnv = "INTEROP_CHILD_MODEL" // "clustering", "broadcasting" or "orderly" (clustering)

	childPrefix   = "INTEROP "      // marks the child's own stdout lines
	childLifetime = 3 * time.Minute // a child left behind stops by itself
)

// runChild is a consumer group member in its own process. Its stdout lines:
// "INTEROP READY", "INTEROP MSG <msgId> <queueId> <queueOffset> <reconsumeTimes> <topic> <hex body>",
// "INTEROP FAIL <error>" and "INTEROP BYE".
func runChild(role string) int {
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(childPrefix+format+"\n", args...)
	}
	if role != "push" || namesrv == "" {
		say("FAIL role %q, %s %q", role, namesrvEnv, namesrv)
		return 2
	}
	opts := []consumer.Option{consumer.WithConsumerModel(consumer.Clustering)}
	switch os.Getenv(childModelEnv) {
	case "broadcasting":
		opts = []consumer.Option{consumer.WithConsumerModel(consumer.BroadCasting)}
	case "orderly":
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	c, err := startPushConsumer(os.Getenv(childGroupEnv), os.Getenv(childTopicEnv),
		consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				body := hex.EncodeToString(m.Body)
				if body == "" {
					body = "-"
				}
				say("MSG %s %d %d %d %s %s", m.MsgId, m.Queue.QueueId, m.QueueOffset, m.ReconsumeTimes, m.Topic, body)
			}
			return consumer.ConsumeSuccess, nil
		}, opts...)
	if err != nil {
		say("FAIL %v", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	say("READY")
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-stdinClosed:
	case <-time.After(childLifetime):
	}
	_ = c.Shutdown()
	say("BYE")
	return 0
}

// member is a child process in a consumer group.
type member struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{} // closed on READY
	done   chan struct{} // closed when stdout ends
	mu     sync.Mutex
	failed string       // the FAIL line, if any
	stderr lockedBuffer // the child's client log (warn level and up)
	once   sync.Once    // stop runs once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startMember starts a child consumer of topic in group and feeds its deliveries into col under
// name. It returns once the child's consumer has started; t's cleanup stops the child.
func startMember(t *testing.T, name, group, topic, model string, col *collector) *member {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"=push", childTopicEnv+"="+topic,
		childGroupEnv+"="+group, childModelEnv+"="+model, namesrvEnv+"="+namesrv)
	m := &member{name: name, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &m.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if m.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start member %s: %v", name, err)
	}
	go m.read(stdout, col) // ends when the child exits and stdout closes
	t.Cleanup(func() { m.stop(t) })
	select {
	case <-m.ready:
		return m
	case <-m.done:
		t.Fatalf("member %s exited before it was ready: %s\nstderr:\n%s", name, m.failure(), m.stderr.String())
	case <-time.After(startTimeout + 15*time.Second):
		t.Fatalf("member %s not ready after %v\nstderr:\n%s", name, startTimeout+15*time.Second, m.stderr.String())
	}
	return nil
}

func (m *member) failure() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

func (m *member) read(stdout io.Reader, col *collector) {
	defer close(m.done)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), childPrefix)
		if !ok {
			continue
		}
		f := strings.Fields(line)
		switch {
		case f[0] == "READY":
			close(m.ready)
		case f[0] == "FAIL":
			m.mu.Lock()
			m.failed = line
			m.mu.Unlock()
		case f[0] == "MSG" && len(f) == 7:
			q, _ := strconv.Atoi(f[2])
			off, _ := strconv.ParseInt(f[3], 10, 64)
			rt, _ := strconv.Atoi(f[4])
			body, _ := hex.DecodeString(strings.TrimPrefix(f[6], "-"))
			msg := &primitive.MessageExt{MsgId: f[1], QueueOffset: off, ReconsumeTimes: int32(rt),
				Message: primitive.Message{Topic: f[5], Body: body, Queue: &primitive.MessageQueue{Topic: f[5], QueueId: q}}}
			col.add(m.name, msg)
		}
	}
}

// stop closes the child's stdin, which makes it shut its consumer down (committing offsets) and
// exit; a child that has not exited after 30 s is killed.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.once.Do(func() { m.stopOnce(t) })
}

func (m *member) stopOnce(t *testing.T) {
	t.Helper()
	_ = m.stdin.Close()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Errorf("member %s did not exit 30s after its stdin closed; killing it", m.name)
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	if err := m.cmd.Wait(); err != nil {
		t.Errorf("member %s: %v\nstderr:\n%s", m.name, err, m.stderr.String())
	}
}
