package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
)

// Server serves RocketMQ's remoting protocol over TCP for one *edge.Broker: the name-server
// requests and the broker requests on one address, and the same on the VIP address.
//
// Goroutines, all stopped and waited for by Shutdown and Close: one accept loop per
// listener; per connection, its reader (which owns the connection and hands sends to the
// broker itself, in arrival order), its writer, and one goroutine per other request being
// handled (at most Options.MaxInFlight), except pulls that wait for messages: those park in
// the server's pull workers, goroutines kept for the next parked pull (at most one per pull
// parked at once; each ends after 30 s without one); a pull that a send of its own
// connection wakes is answered by that connection's reader, in the write of the send's
// reply. Change notifications
// (NOTIFY_CONSUMER_IDS_CHANGED) are queued by the broker's notifier goroutines, which the
// broker owns.
type Server struct {
	b    *edge.Broker
	opts Options
	lg   *slog.Logger

	ln, vip net.Listener
	mainTCP *net.TCPAddr // the bound main address (for the port of advertised routes)

	// ctx is the parent of every connection's context; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// pulls ends parked pulls; Shutdown cancels it, and they are answered PULL_NOT_FOUND
	// (Close too, once the connections are closed: no answer gets out).
	pulls     context.Context
	stopPulls context.CancelFunc

	closing atomic.Bool  // Shutdown or Close began: accept nothing, read nothing more
	opaque  atomic.Int32 // numbers the requests the server sends clients
	// reqBytes counts the bytes of the requests being handled, all connections together;
	// past maxReqBytes a request is answered SYSTEM_BUSY (unless none is in flight).
	reqBytes    atomic.Int64
	maxReqBytes int64
	started     time.Time // when Start returned, for runtime info

	stats serverStats // counters behind Stats (stats.go)

	mu      sync.Mutex                    // guards conns and clients
	conns   map[*conn]struct{}            // open connections
	clients map[string]map[*conn]struct{} // client id -> the connections it heartbeats on
	accepts sync.WaitGroup                // the accept loops
	wg      sync.WaitGroup                // connections (each waits for its own goroutines)

	// pullPool hands parked pulls to idle pull workers (parkPull); pullWorkers counts the
	// workers, which end once pulls is done.
	pullPool    pullPool
	pullWorkers sync.WaitGroup
	once        sync.Once // closes the listeners
	lnErr       error     // from closing the listeners
}

// Start validates opts, binds Listen (and the VIP address unless off), and serves b in
// goroutines of its own until Shutdown or Close. It does not close b. Errors: ErrOptions
// (wrapped, naming the option), and the listeners' bind errors.
func Start(b *edge.Broker, opts Options) (*Server, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", ErrOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("server: listen: %w", err)
	}
	var vip net.Listener
	if addr := vipAddress(o, ln.Addr()); addr != "" {
		if vip, err = net.Listen("tcp", addr); err != nil {
			ln.Close()
			return nil, fmt.Errorf("server: listen VIP: %w", err)
		}
	}
	s := newServer(b, o)
	s.ln, s.vip = tlsListener(ln, o), vip
	if vip != nil {
		s.vip = tlsListener(vip, o)
	}
	s.mainTCP, _ = ln.Addr().(*net.TCPAddr)
	b.SetTransactionChecker(s.checkTransaction)
	s.accepts.Add(1)
	go s.acceptLoop(s.ln, false)
	if s.vip != nil {
		s.accepts.Add(1)
		go s.acceptLoop(s.vip, true)
	}
	args := []any{"addr", ln.Addr().String()}
	if s.vip != nil {
		args = append(args, "vip", s.vip.Addr().String())
	}
	s.lg.Info("remoting server listening", args...)
	return s, nil
}

// newServer returns a server of b without listeners: o has its defaults.
func newServer(b *edge.Broker, o Options) *Server {
	s := &Server{b: b, opts: o, lg: o.Logger, conns: map[*conn]struct{}{}, clients: map[string]map[*conn]struct{}{},
		started: time.Now(), maxReqBytes: max(maxRequestBytes, int64(o.MaxFrameSize))}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.pulls, s.stopPulls = context.WithCancel(context.Background())
	return s
}

// maxRequestBytes bounds the memory of the requests being handled, all connections
// together (MaxInFlight per connection alone would allow MaxConns × MaxInFlight frames).
const maxRequestBytes = 256 << 20

// requestOverhead is what a request costs besides its body: its header, decoded.
const requestOverhead = 512

// Addr returns the bound main address (with the port chosen when Listen's was 0).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// VIPAddr returns the bound VIP address, or nil when it is off.
func (s *Server) VIPAddr() net.Addr {
	if s.vip == nil {
		return nil
	}
	return s.vip.Addr()
}

// Conns returns the number of open client connections, both addresses together.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// acceptLoop accepts connections until its listener closes.
func (s *Server) acceptLoop(ln net.Listener, vip bool) {
	defer s.accepts.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and such: wait a little, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.lg.Warn("accept failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		s.admit(nc, vip)
	}
}

// admit starts serving nc, or closes it when the server is full or closing.
func (s *Server) admit(nc net.Conn, vip bool) {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.opts.MaxConns {
		n := len(s.conns)
		s.mu.Unlock()
		s.lg.Warn("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "open", n, "max", s.opts.MaxConns)
		nc.Close()
		return
	}
	c := newConn(s, nc, vip)
	s.conns[c] = struct{}{}
	s.stats.accepted.Add(1)
	s.wg.Add(1)
	s.mu.Unlock()
	go c.serve()
}

// closeListeners stops accepting, once.
func (s *Server) closeListeners() error {
	s.once.Do(func() {
		s.closing.Store(true)
		var errs []error
		for _, ln := range []net.Listener{s.ln, s.vip} {
			if ln != nil {
				errs = append(errs, ln.Close())
			}
		}
		s.lnErr = errors.Join(errs...)
	})
	s.accepts.Wait()
	return s.lnErr
}

// Shutdown stops the server gracefully: it stops accepting, answers parked pulls
// (PULL_NOT_FOUND at the request's offset, so that clients pull again elsewhere or later),
// stops reading requests, waits for the requests being handled and their replies to be
// written, then closes the connections, unregistering their clients from the broker. If ctx
// ends first, it closes everything at once (as Close) and returns ctx.Err(). It does not
// close the broker.
func (s *Server) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	lnErr := s.closeListeners()
	s.stopPulls()
	s.mu.Lock()
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		s.pullWorkers.Wait()
		s.lg.Info("remoting server stopped")
		return lnErr
	case <-ctx.Done():
		s.lg.Warn("remoting server stop timed out: closing connections", "err", ctx.Err())
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once, abandoning requests in flight
// (parked pulls get no answer), and waits for the server's goroutines. It does not close
// the broker.
func (s *Server) Close() error {
	s.b.SetTransactionChecker(nil)
	err := s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close() // first: nothing more is written
	}
	s.mu.Unlock()
	s.cancel()
	s.stopPulls()
	s.wg.Wait()
	s.pullWorkers.Wait()
	s.lg.Debug("remoting server closed")
	return err
}

// addClient records that client id heartbeats on c.
func (s *Server) addClient(id string, c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.clients[id]
	if !ok {
		cs = map[*conn]struct{}{}
		s.clients[id] = cs
	}
	cs[c] = struct{}{}
}

// removeClients forgets that ids heartbeat on c and returns those that heartbeat on no
// other connection: the clients that left with it.
func (s *Server) removeClients(c *conn, ids []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for _, id := range ids {
		cs := s.clients[id]
		delete(cs, c)
		if len(cs) == 0 {
			delete(s.clients, id)
			gone = append(gone, id)
		}
	}
	return gone
}

// removeConn forgets c, the last thing its reader does.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}
