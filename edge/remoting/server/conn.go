package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/edge/remoting"
)

// outSlack is how many frames beyond MaxInFlight replies a connection's write queue holds:
// SYSTEM_BUSY replies and change notifications.
const outSlack = 64

// readBufSize is the read buffer of a connection.
const readBufSize = 64 << 10

// maxWriteBatch is how many bytes of queued frames the writer gathers into one write.
const maxWriteBatch = 256 << 10

// conn is one client connection. Its reader (serve) owns it: it reads frames, starts a
// goroutine per request, and when reading ends (the client closed, an error, idle, or the
// server stopping) it waits for them and for the writer, closes the socket and unregisters
// the clients that heartbeat on it.
type conn struct {
	s      *Server
	nc     net.Conn
	vip    bool
	remote string

	ctx    context.Context // the requests' context: ends once they are answered, or at Close
	cancel context.CancelFunc
	// pulls is the context of parked pulls: it ends with ctx, and when reading ends because
	// the client left (nobody waits for their answer). Other requests already read are
	// still carried out: a client's last commit of its offsets comes just before it closes.
	pulls     context.Context
	stopPulls context.CancelFunc

	out   chan *remoting.Command // frames for the writer; bounded
	stop  chan struct{}          // closed by serve once no handler runs: the writer drains and exits
	dead  chan struct{}          // closed by the writer when it fails: nothing more is written
	wdone chan struct{}          // closed when the writer returns

	inflight atomic.Int32   // requests being handled
	handlers sync.WaitGroup // their goroutines

	stopped atomic.Bool // stopReading was called: a read error is the server's doing

	mu      sync.Mutex          // guards the fields below
	clients map[string]struct{} // client ids that heartbeat here
	lang    remoting.LanguageCode
	version int16 // language and version of the last heartbeat
}

func newConn(s *Server, nc net.Conn, vip bool) *conn {
	c := &conn{s: s, nc: nc, vip: vip, remote: nc.RemoteAddr().String(),
		out:     make(chan *remoting.Command, s.opts.MaxInFlight+outSlack),
		stop:    make(chan struct{}),
		dead:    make(chan struct{}),
		wdone:   make(chan struct{}),
		clients: map[string]struct{}{}}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.pulls, c.stopPulls = context.WithCancel(c.ctx)
	return c
}

// stopReading makes the reader return at once (Shutdown): requests already read are still
// handled and answered.
func (c *conn) stopReading() {
	c.stopped.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

// serve runs the connection; it owns the writer and the request goroutines.
func (c *conn) serve() {
	defer c.s.wg.Done()
	lg := c.s.lg
	lg.Debug("connection opened", "remote", c.remote, "vip", c.vip)
	go c.writeLoop()
	err := c.readLoop()
	graceful := c.stopped.Load() && !errors.Is(c.ctx.Err(), context.Canceled)
	switch {
	case graceful:
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		lg.Debug("connection closed", "remote", c.remote)
	case errors.Is(err, os.ErrDeadlineExceeded):
		lg.Info("connection closed: idle", "remote", c.remote, "idle_timeout", c.s.opts.IdleTimeout)
	case errors.Is(err, remoting.ErrFrameTooLarge):
		lg.Warn("connection closed: frame too large", "remote", c.remote, "max", c.s.opts.MaxFrameSize, "err", err)
	case errors.Is(err, remoting.ErrMalformed), errors.Is(err, io.ErrUnexpectedEOF):
		lg.Warn("connection closed: malformed frame", "remote", c.remote, "err", err)
	default:
		lg.Info("connection closed: read error", "remote", c.remote, "err", err)
	}
	if !graceful {
		c.stopPulls() // the client is gone: nobody waits for a parked pull
	}
	c.handlers.Wait()
	close(c.stop)
	<-c.wdone
	c.cancel()
	c.nc.Close()
	c.mu.Lock()
	ids := make([]string, 0, len(c.clients))
	for id := range c.clients {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range c.s.removeClients(c, ids) {
		// The broker tells the rest of the client's groups (RocketMQ's Go client never
		// unregisters: a closed socket is how it leaves). The client's queue locks stay
		// until they expire: a cut connection may leave a live client consuming them.
		if err := c.s.b.Disconnect(context.Background(), id); err != nil {
			lg.Debug("unregister client", "client", id, "err", err)
		}
	}
	c.s.removeConn(c)
}

// readLoop reads requests until the connection fails or idles out.
func (c *conn) readLoop() error {
	// Read what the socket holds at once, as Netty does: frames a client sent just before
	// it closed are in hand before the replies to the first ones reach it, so its reset
	// (data to a closed socket) cannot drop them from the receive buffer.
	r := remoting.NewReader(bufio.NewReaderSize(c.nc, readBufSize), c.s.opts.MaxFrameSize)
	for {
		if c.stopped.Load() {
			return nil
		}
		if err := c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IdleTimeout)); err != nil {
			return err
		}
		if c.stopped.Load() { // stopReading ran between the check and the deadline
			return nil
		}
		cmd, err := r.Read()
		if err != nil {
			if c.stopped.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return err
		}
		if cmd.IsResponse() {
			continue // a client's answer to a notification: nothing waits for it
		}
		c.s.stats.requests.add(cmd.Code)
		size := int64(len(cmd.Body)) + requestOverhead
		busy := ""
		switch held := c.s.reqBytes.Load(); {
		case int(c.inflight.Load()) >= c.s.opts.MaxInFlight:
			busy = "server: too many requests in flight on this connection"
		case held > 0 && held+size > c.s.maxReqBytes:
			busy = "server: too many request bytes in flight"
		}
		if busy != "" {
			c.s.lg.Warn("request refused: busy", "remote", c.remote, "code", cmd.Code, "why", busy)
			if !cmd.IsOneway() {
				if !c.send(cmd.Reply(remoting.SystemBusy, busy)) {
					return nil
				}
			}
			continue
		}
		c.inflight.Add(1)
		c.s.reqBytes.Add(size)
		c.handlers.Add(1)
		go c.handle(cmd, size)
	}
}

// handle answers one request of size bytes.
func (c *conn) handle(req *remoting.Command, size int64) {
	defer c.handlers.Done()
	defer c.inflight.Add(-1)
	defer c.s.reqBytes.Add(-size)
	resp := c.s.dispatch(c, req)
	if resp != nil && !req.IsOneway() {
		c.send(resp)
	}
}

// send queues a frame for the writer, waiting while the queue is full. It reports false
// when the connection can no longer be written.
func (c *conn) send(cmd *remoting.Command) bool {
	select {
	case c.out <- cmd:
		c.s.stats.replies.add(cmd.Code)
		return true
	case <-c.dead:
		return false
	}
}

// notify queues a frame if there is room: notifications are advice, and a client that does
// not read them loses them rather than holding the broker's notifier.
func (c *conn) notify(cmd *remoting.Command) {
	select {
	case <-c.stop:
		return
	default:
	}
	select {
	case c.out <- cmd:
	default:
		c.s.lg.Debug("notification dropped: write queue full", "remote", c.remote, "code", cmd.Code)
	}
}

// writeLoop writes queued frames, several to a write, each write bounded by WriteTimeout.
// It returns once serve closes stop and the queue is empty, or on a write error, after
// which it closes the socket (the reader then returns too).
func (c *conn) writeLoop() {
	defer close(c.wdone)
	var buf []byte
	for {
		var cmd *remoting.Command
		select {
		case cmd = <-c.out:
		case <-c.stop:
			select {
			case cmd = <-c.out:
			default:
				return
			}
		}
		buf = buf[:0]
		var err error
		for {
			if buf, err = c.appendFrame(buf, cmd); err != nil {
				break
			}
			if len(buf) >= maxWriteBatch {
				break
			}
			select {
			case cmd = <-c.out:
				continue
			default:
			}
			break
		}
		if err == nil {
			c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
			_, err = c.nc.Write(buf)
		}
		if cap(buf) > 4*maxWriteBatch {
			buf = nil // a large reply once does not pin its memory
		}
		if err != nil {
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				c.s.lg.Warn("connection closed: slow reader", "remote", c.remote, "write_timeout", c.s.opts.WriteTimeout)
			case errors.Is(err, net.ErrClosed):
			case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
				// The client closed with replies on their way (Go clients' oneway requests
				// are answered): its business.
				c.s.lg.Debug("connection closed by the client before its replies", "remote", c.remote, "err", err)
			default:
				c.s.lg.Info("connection closed: write error", "remote", c.remote, "err", err)
			}
			close(c.dead)
			c.nc.Close()
			return
		}
	}
}

// appendFrame encodes cmd; a reply that cannot be encoded (a header over the frame limit)
// becomes a SYSTEM_ERROR reply, so that the client is answered.
func (c *conn) appendFrame(buf []byte, cmd *remoting.Command) ([]byte, error) {
	n := len(buf)
	out, err := cmd.AppendFrame(buf)
	if err == nil {
		return out, nil
	}
	c.s.lg.Error("reply not encodable", "remote", c.remote, "code", cmd.Code, "err", err)
	r := &remoting.Command{Code: remoting.SystemError, Language: cmd.Language, Version: cmd.Version, Opaque: cmd.Opaque,
		Flag: cmd.Flag, Remark: "server: reply not encodable", Serialize: cmd.Serialize}
	return r.AppendFrame(buf[:n])
}

// addClient records that client id heartbeats on c, with hb, its heartbeat.
func (c *conn) addClient(id string, hb *remoting.Command) {
	c.mu.Lock()
	_, ok := c.clients[id]
	c.clients[id] = struct{}{}
	c.lang, c.version = hb.Language, hb.Version
	c.mu.Unlock()
	if !ok {
		c.s.addClient(id, c)
	}
}
