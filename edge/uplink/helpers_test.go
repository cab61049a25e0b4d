package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store"
)

// testLogger writes to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// brokerOptions are small, fast settings; so may be nil.
func brokerOptions(t testing.TB, name string, so *store.Options) *edge.Options {
	if so == nil {
		so = &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 4096}
	}
	so.MetaNoSync = true
	return &edge.Options{Store: so, BrokerName: name, MaxMessageSize: 64 << 10, Logger: testLogger(t)}
}

// storeOpts returns so(), or nil for a nil so.
func storeOpts(so func() *store.Options) *store.Options {
	if so == nil {
		return nil
	}
	return so()
}

// openLocal opens the edge broker whose topics go up, in dir; t.Cleanup closes it.
func openLocal(t testing.TB, dir string, so *store.Options) *edge.Broker {
	t.Helper()
	b, err := edge.Open(dir, brokerOptions(t, "gw1", so))
	if err != nil {
		t.Fatalf("edge.Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// hub is an EdgeMQ serving as upstream on loopback.
type hub struct {
	t         testing.TB
	dir       string
	advertise string
	acl       *server.ACL           // nil: no ACL
	so        func() *store.Options // the hub's store settings; nil: brokerOptions'
	b         *edge.Broker
	srv       *server.Server
	addr      string // the server's address
}

// startHub opens a hub broker and serves it on a free loopback port; with advertise (a
// proxy's address) given, its routes advertise it, so that every connection goes through
// the proxy. t.Cleanup stops it.
func startHub(t testing.TB, advertise string) *hub {
	t.Helper()
	return startHubStore(t, advertise, nil)
}

// startHubStore is startHub with the hub's store settings made by so (nil: brokerOptions').
func startHubStore(t testing.TB, advertise string, so func() *store.Options) *hub {
	t.Helper()
	h := &hub{t: t, dir: t.TempDir(), advertise: advertise, so: so}
	h.start("127.0.0.1:0")
	t.Cleanup(h.stop)
	return h
}

func (h *hub) start(listen string) {
	h.t.Helper()
	b, err := edge.Open(h.dir, brokerOptions(h.t, "hub", storeOpts(h.so)))
	if err != nil {
		h.t.Fatalf("edge.Open hub: %v", err)
	}
	srv, err := server.Start(b, server.Options{Listen: listen, VIPListen: "off", Advertise: h.advertise, ACL: h.acl, Logger: testLogger(h.t)})
	if err != nil {
		b.Close()
		h.t.Fatalf("server.Start: %v", err)
	}
	h.b, h.srv, h.addr = b, srv, srv.Addr().String()
}

// stop stops the hub; again, it does nothing.
func (h *hub) stop() {
	if h.srv == nil {
		return
	}
	h.srv.Close()
	h.b.Close()
	h.srv = nil
}

// restart stops the hub and starts it again on its address, with its data.
func (h *hub) restart() {
	h.t.Helper()
	h.stop()
	h.start(h.addr)
}

// freeListener returns a loopback listener for a proxy.
func freeListener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// puller reads a queue: *edge.Broker and *remoting.Client.
type puller interface {
	Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error)
}

// readAll returns every message of topic on b, by queue, in queue order.
func readAll(t testing.TB, b *edge.Broker, topic string) map[int32][]mq.MessageExt {
	t.Helper()
	tc, err := b.Topic(topic)
	if err != nil {
		return map[int32][]mq.MessageExt{}
	}
	var qs []mq.MessageQueue
	for q := range tc.ReadQueues {
		qs = append(qs, mq.MessageQueue{Topic: topic, BrokerName: b.Options().BrokerName, QueueID: q})
	}
	return readQueues(t, b, qs)
}

// readQueues returns every message of the queues qs, by queue id, in queue order.
func readQueues(t testing.TB, p puller, qs []mq.MessageQueue) map[int32][]mq.MessageExt {
	t.Helper()
	ctx := context.Background()
	out := map[int32][]mq.MessageExt{}
	for _, q := range qs {
		for off := int64(0); ; {
			res, err := p.Pull(ctx, mqPull(q, off))
			if err != nil {
				t.Fatalf("pull %v: %v", q, err)
			}
			if len(res.Messages) == 0 {
				break
			}
			out[q.QueueID] = append(out[q.QueueID], res.Messages...)
			off = res.NextBeginOffset
		}
	}
	return out
}

func mqPull(q mq.MessageQueue, off int64) mq.PullRequest {
	return mq.PullRequest{Group: "CHECK", Queue: q, Offset: off, MaxMsgs: 32, Filter: "*"}
}

// count returns the number of messages of topic on b.
func count(t testing.TB, b *edge.Broker, topic string) int64 {
	t.Helper()
	qs, err := b.Queues(topic)
	if err != nil {
		return 0
	}
	var n int64
	for _, q := range qs {
		n += q.MaxOffset - q.MinOffset
	}
	return n
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startUplink starts an Uplink over b; t.Cleanup closes it (before the broker).
func startUplink(t testing.TB, b *edge.Broker, o Options) *Uplink {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	if o.BackoffMin == 0 {
		o.BackoffMin, o.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	u, err := Start(b, &o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// sendN sends n messages to topic: the i-th with key k<i>, tag t<i%3>, property seq=i and a
// body naming i, to the queue of i's sharding key (a shard of 8).
func sendN(t testing.TB, b *edge.Broker, topic string, from, n int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		m := &mq.Message{Topic: topic, Tags: fmt.Sprintf("t%d", i%3), Keys: fmt.Sprintf("k%d", i),
			Properties: map[string]string{"seq": fmt.Sprint(i), "shard": fmt.Sprint(i % 8)}, Body: []byte(fmt.Sprintf("message %d", i))}
		if i%2 == 0 {
			m.Properties[mq.PropertyUniqKey] = fmt.Sprintf("UNIQ%028d", i)
		}
		if _, err := b.Send(ctx, m, mq.ShardingKey(fmt.Sprint(i%8))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
