package remoting_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/netfault"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store"
	"go.uber.org/goleak"
)

// The client serves both the consumer and the producer.
var (
	_ consumer.Broker       = (*remoting.Client)(nil)
	_ producer.Broker       = (*remoting.Client)(nil)
	_ producer.OnewaySender = (*remoting.Client)(nil)
	_ producer.Broker       = (*edge.Broker)(nil)
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLogWriter writes log lines to the test's log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testBroker is a broker in dir with a server on listen ("127.0.0.1:0" for any port).
type testBroker struct {
	t    testing.TB
	dir  string
	b    *edge.Broker
	srv  *server.Server
	addr string
}

// brokerOptions are the test brokers': small store, short delay levels and check
// intervals.
func brokerOptions() *edge.Options {
	return &edge.Options{
		Store:             &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true},
		MaxMessageSize:    64 << 10,
		DelayLevels:       []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		HoldCheckInterval: time.Second,
	}
}

// startBroker opens a broker in dir (a new temp dir when "") and serves it on listen;
// t.Cleanup stops both.
func startBroker(t testing.TB, dir, listen string) *testBroker {
	t.Helper()
	return startBrokerOpts(t, dir, listen, brokerOptions())
}

// startBrokerOpts is startBroker with the broker's options o.
func startBrokerOpts(t testing.TB, dir, listen string, o *edge.Options) *testBroker {
	t.Helper()
	return startBrokerWith(t, dir, listen, o, server.Options{})
}

// startBrokerWith is startBrokerOpts with the server's options so (its listen addresses
// and logger set here).
func startBrokerWith(t testing.TB, dir, listen string, o *edge.Options, so server.Options) *testBroker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	b, err := edge.Open(dir, o)
	if err != nil {
		t.Fatalf("edge.Open: %v", err)
	}
	so.Listen, so.VIPListen, so.Logger = listen, "off", testLogger(t)
	srv, err := server.Start(b, so)
	if err != nil {
		b.Close()
		t.Fatalf("server.Start: %v", err)
	}
	tb := &testBroker{t: t, dir: dir, b: b, srv: srv, addr: srv.Addr().String()}
	t.Cleanup(tb.stop)
	return tb
}

// stop closes the server, then the broker; again, it does nothing.
func (tb *testBroker) stop() {
	if tb.srv == nil {
		return
	}
	tb.srv.Close()
	tb.b.Close()
	tb.srv, tb.b = nil, nil
}

// createTopic makes a topic with n queues.
func (tb *testBroker) createTopic(name string, n int32) {
	tb.t.Helper()
	if err := tb.b.CreateTopic(edge.TopicConfig{Name: name, ReadQueues: n, WriteQueues: n}); err != nil {
		tb.t.Fatalf("CreateTopic(%s): %v", name, err)
	}
}

// proxied serves tb's broker on a second server that advertises a fault-injecting proxy's
// address, so that every request of a client of the proxy goes through it; t.Cleanup
// closes both.
func proxied(t testing.TB, tb *testBroker) *netfault.Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(tb.b, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Advertise: ln.Addr().String(), Logger: testLogger(t)})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	px, err := netfault.New(srv.Addr().String(), &netfault.Options{Listener: ln})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px
}

// dial returns a client of addr; t.Cleanup closes it.
func dial(t testing.TB, addr string, o *remoting.Options) *remoting.Client {
	t.Helper()
	var opts remoting.Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := remoting.Dial(ctx, addr, &opts)
	if err != nil {
		t.Fatalf("Dial(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT returns a context bounded by d; t.Cleanup cancels it.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// silentListener accepts connections and holds them open, never answering: a peer that does
// not speak. t.Cleanup closes it and its connections.
func silentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
