package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testMaxMessage is the test broker's largest body.
const testMaxMessage = 64 << 10

// openBroker opens a broker in a temp dir with small store settings; t.Cleanup closes it.
func openBroker(t testing.TB, o *edge.Options) *edge.Broker {
	t.Helper()
	var opts edge.Options
	if o != nil {
		opts = *o
	}
	if opts.Store == nil {
		opts.Store = &store.Options{SegmentSize: 4 << 20, MaxMessageSize: testMaxMessage, QueueSegmentEntries: 1024, MetaNoSync: true}
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = testMaxMessage
	}
	b, err := edge.Open(t.TempDir(), &opts)
	if err != nil {
		t.Fatalf("edge.Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// openBrokerT is openBroker with topic T of one queue made.
func openBrokerT(t testing.TB, o *edge.Options) *edge.Broker {
	t.Helper()
	b := openBroker(t, o)
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	return b
}

// startServer starts a server of b on 127.0.0.1:0 (VIP off unless o says otherwise);
// t.Cleanup closes it, before the broker.
func startServer(t testing.TB, b *edge.Broker, o Options) *Server {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.VIPListen == "" {
		o.VIPListen = vipOff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := Start(b, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testLogWriter writes log lines to the test's log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// logCounter counts log records by message.
type logCounter struct {
	h  slog.Handler
	mu sync.Mutex
	n  map[string]int
}

func newLogCounter(t testing.TB) *logCounter {
	return &logCounter{h: slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}), n: map[string]int{}}
}

func (c *logCounter) logger() *slog.Logger { return slog.New(countHandler{c, c.h}) }

func (c *logCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

type countHandler struct {
	c *logCounter
	slog.Handler
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.mu.Lock()
	h.c.n[r.Message]++
	h.c.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countHandler{h.c, h.Handler.WithAttrs(as)}
}
func (h countHandler) WithGroup(n string) slog.Handler {
	return countHandler{h.c, h.Handler.WithGroup(n)}
}

// client is a small remoting client for tests: requests with their own opaques, replies
// matched to them, and the server's requests (notifications) collected.
type client struct {
	t      testing.TB
	nc     net.Conn
	wmu    sync.Mutex // serializes writes
	mu     sync.Mutex // guards pending, opaque
	opaque int32
	pend   map[int32]chan *remoting.Command
	notes  chan *remoting.Command
	done   chan struct{} // closed when the reader returns
	err    error         // the reader's error, once done
}

func dial(t testing.TB, addr net.Addr) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("dial %v: %v", addr, err)
	}
	return newClient(t, nc)
}

// newClient runs a client on nc; t.Cleanup closes it.
func newClient(t testing.TB, nc net.Conn) *client {
	c := &client{t: t, nc: nc, pend: map[int32]chan *remoting.Command{}, notes: make(chan *remoting.Command, 64), done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	return c
}

// pipeServer returns a server of b without listeners, for tests in a synctest bubble,
// whose clients connect with pipeClient; t.Cleanup closes it.
func pipeServer(t testing.TB, b *edge.Broker, o Options) *Server {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(b, o)
	t.Cleanup(func() { s.Close() })
	return s
}

// pipeClient connects a client to s over a net.Pipe.
func pipeClient(t testing.TB, s *Server) *client {
	a, b := net.Pipe()
	s.admit(b, false)
	return newClient(t, a)
}

func (c *client) read() {
	defer close(c.done)
	r := remoting.NewReader(c.nc, 0)
	for {
		cmd, err := r.Read()
		if err != nil {
			c.err = err
			return
		}
		if !cmd.IsResponse() {
			select {
			case c.notes <- cmd:
			default:
			}
			continue
		}
		c.mu.Lock()
		ch := c.pend[cmd.Opaque]
		delete(c.pend, cmd.Opaque)
		c.mu.Unlock()
		if ch != nil {
			ch <- cmd
		}
	}
}

func (c *client) close() {
	c.nc.Close()
	<-c.done
}

// write sends cmd with a fresh opaque and returns the channel its reply comes on.
func (c *client) write(cmd *remoting.Command) chan *remoting.Command {
	c.t.Helper()
	ch := make(chan *remoting.Command, 1)
	c.mu.Lock()
	c.opaque++
	cmd.Opaque = c.opaque
	c.pend[cmd.Opaque] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := cmd.WriteTo(c.nc); err != nil {
		c.t.Fatalf("write code %d: %v", cmd.Code, err)
	}
	return ch
}

// wait returns the reply on ch, failing the test after a minute or if the connection closes.
func (c *client) wait(ch chan *remoting.Command) *remoting.Command {
	c.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-c.done:
		select {
		case r := <-ch:
			return r
		default:
		}
		c.t.Fatalf("connection closed waiting for a reply: %v", c.err)
	case <-time.After(time.Minute):
		c.t.Fatal("no reply in a minute")
	}
	return nil
}

// call sends a request and returns its reply.
func (c *client) call(code int16, ext map[string]string, body []byte) *remoting.Command {
	c.t.Helper()
	return c.wait(c.write(remoting.NewRequest(code, ext, body)))
}

// mustCall is call, failing the test unless the reply has code want.
func (c *client) mustCall(want int16, code int16, ext map[string]string, body []byte) *remoting.Command {
	c.t.Helper()
	r := c.call(code, ext, body)
	if r.Code != want {
		c.t.Fatalf("request %d %v: reply %d %q, want %d", code, ext, r.Code, r.Remark, want)
	}
	return r
}

// closed reports whether the server closed the connection within 10 s.
func (c *client) closed() bool {
	select {
	case <-c.done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// heartbeatBody is a Go client's heartbeat of one consumer group subscribed to topic.
func heartbeatBody(clientID, group, topic, expr string) []byte {
	return []byte(`{"clientID":"` + clientID + `","producerDataSet":[],"consumerDataSet":[{"groupName":"` + group +
		`","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","unitMode":false,` +
		`"subscriptionDataSet":[{"classFilterMode":false,"topic":"` + topic + `","subString":"` + expr + `","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}]}]}`)
}

// sendExt is a SEND_MESSAGE_V2 header for topic, queue q (-1: any).
func sendExt(topic string, q int, props string) map[string]string {
	return map[string]string{"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(q), "f": "0",
		"g": "1700000000000", "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
}

// pullExt is a PULL_MESSAGE header.
func pullHeader(group, topic string, q int, offset int64, sysFlag int, suspendMs int64, sub string) map[string]string {
	return map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32", "sysFlag": strconv.Itoa(sysFlag),
		"commitOffset": "0", "suspendTimeoutMillis": strconv.FormatInt(suspendMs, 10), "subscription": sub,
		"subVersion": "0", "expressionType": "TAG"}
}

// record is what a test reads of a V1 message record.
type record struct {
	queueID                int32
	queueOffset, commitLog int64
	bornTime               int64
	bornHost               string
	reconsumeTimes         int32
	topic                  string
	body                   string
	props                  map[string]string
}

// decodeRecords reads the V1 records of a pull body.
func decodeRecords(t testing.TB, b []byte) []record {
	t.Helper()
	msgs, err := remoting.DecodeMessages(b)
	if err != nil {
		t.Fatalf("decode records: %v", err)
	}
	out := make([]record, len(msgs))
	for i, m := range msgs {
		props := maps.Clone(m.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if m.Tags != "" {
			props["TAGS"] = m.Tags
		}
		if m.Keys != "" {
			props["KEYS"] = m.Keys
		}
		out[i] = record{queueID: m.QueueID, queueOffset: m.QueueOffset, commitLog: m.CommitLogOffset, bornTime: m.BornTime,
			bornHost: m.BornHost.String(), reconsumeTimes: m.ReconsumeTimes, topic: m.Topic, body: string(m.Body), props: props}
	}
	return out
}

// errIs reports whether err is one of targets.
func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

var _ = io.EOF
var _ = mq.ErrTopicNotExist

// Pull sysflag bits, as ints for pullHeader.
const (
	pullCommitOffset = int(remoting.PullCommitOffset)
	pullSuspend      = int(remoting.PullSuspend)
	pullSubscription = int(remoting.PullSubscription)
)
