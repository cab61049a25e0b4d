package consumer

import (
	"context"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// The consumer's mechanism tests run against the in-process broker and, through the one
// seam below, a second time against the same broker served by edge/remoting/server on
// loopback and reached by edge/remoting.Client, the way `edgemq serve` and a remote
// consumer meet. A test opts in with overNet; its broker comes from testBroker as always,
// and consumerBroker (which startConsumer calls) hands the consumer a network client of
// it in the "net" variant. Sends and inspections stay in-process: what is under test is
// the consumer over the wire.
//
// Which tests do not run over the network, and why:
//   - tests in a synctest bubble: the fake clock does not move while a goroutine waits on
//     a socket, so a bubble cannot hold a TCP server and client;
//   - tests that wrap the broker (gates, failing SendBack, no piggyback) or a typed-nil
//     broker: they test the consumer's reaction to one broker call, which a wrapper of
//     the client would test the same way;
//   - tests of options, process queues, offset stores and strategies: no broker calls.
var netFlag = flag.String("net", "cheap", "consumer tests over TCP through edge/remoting/server: "+
	"off, cheap (only tests that are quick over the network) or all")

// netTests holds the names of the "net" subtests overNet runs.
var netTests sync.Map

// overNet runs f against the in-process broker (subtest "local") and, if -net selects
// it, against the broker over TCP (subtest "net"). cheap says the network run takes
// about as long as the local one, so that `go test` runs it by default.
func overNet(t *testing.T, cheap bool, f func(t *testing.T)) {
	t.Run("local", f)
	switch *netFlag {
	case "all":
	case "cheap":
		if !cheap {
			return
		}
	default:
		return
	}
	t.Run("net", func(t *testing.T) {
		netTests.Store(t.Name(), true)
		t.Cleanup(func() { netTests.Delete(t.Name()) })
		f(t)
	})
}

// isNet reports whether t is a "net" variant of overNet or a subtest of one.
func isNet(t testing.TB) bool {
	name := t.Name()
	for {
		if _, ok := netTests.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// servers holds the server of each broker of a "net" test.
var (
	serversMu sync.Mutex
	servers   = map[*edge.Broker]*server.Server{}
)

// consumerBroker returns the broker a consumer under test uses: b itself, or, in a "net"
// test when b is an *edge.Broker, a new network client of b's server on loopback (one
// server per broker, started on first use). Each call dials its own client, as each
// consumer process would; t.Cleanup closes it.
func consumerBroker(t testing.TB, b Broker) Broker {
	t.Helper()
	eb, ok := b.(*edge.Broker)
	if !ok || eb == nil || !isNet(t) {
		return b
	}
	return dialBroker(t, serverOf(t, eb).Addr().String())
}

// serverOf returns b's server, starting it on a loopback port if b has none.
func serverOf(t testing.TB, b *edge.Broker) *server.Server {
	t.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	if s, ok := servers[b]; ok {
		return s
	}
	s, err := server.Start(b, server.Options{Listen: "127.0.0.1:0", VIPListen: "off"})
	if err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	servers[b] = s
	t.Cleanup(func() {
		serversMu.Lock()
		delete(servers, b)
		serversMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// dialBroker returns a client of the server at addr with intervals fit for tests;
// t.Cleanup closes it.
func dialBroker(t testing.TB, addr string) *remoting.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := remoting.Dial(ctx, addr, &remoting.Options{
		ReconnectMin:      20 * time.Millisecond,
		ReconnectMax:      200 * time.Millisecond,
		RouteRefresh:      time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("remoting.Dial(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
