package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting/internal/rawsock"
)

// clientConn is one TCP connection of a Client to a name server or broker address, with
// many requests in flight: each request gets an Opaque, and its reply, read by the
// connection's reader goroutine, is handed to whoever waits for that Opaque. Requests are
// queued for the connection's writer goroutine, which writes everything queued in one
// write: many requests in flight cost a few writes, not one each, and a caller never waits
// for the socket. A pull that finds nothing queued and nobody writing is the exception: its
// caller writes it (see write).
//
// Its goroutines, both started by Client.conn: the reader (readLoop), which returns when the
// socket fails or is closed and then fails every request still waiting; and the writer
// (writeLoop), which returns after a failed write (closing the socket, so that the reader
// returns too) or once close or the reader's end stopped it, having written what was
// queued.
type clientConn struct {
	cl   *Client
	addr string
	nc   net.Conn
	raw  *rawsock.Conn // nc's reads and writes (see package rawsock): one write at a time (writing)

	wmu     sync.Mutex    // guards the write fields below
	writing bool          // a write to nc is under way: the writer's, or a caller's (see write)
	wbuf    []byte        // frames queued for the writer
	spare   []byte        // the buffer of the last write, for reuse
	werr    error         // sticky: the write that failed, or the connection closed
	closing bool          // close was called: the writer's last write has a short deadline
	held    bool          // the reader is handing out pull replies: it writes what they queue (see holdWrites)
	kick    chan struct{} // capacity 1: wbuf has frames
	quit    chan struct{} // closed by stopWriter: write what is queued, then return
	stopped sync.Once     // closes quit

	mu      sync.Mutex             // guards pending and err
	pending map[int32]*pendingCall // requests waiting for their reply, by Opaque
	err     error                  // sticky: the connection is dead, why
	closed  atomic.Bool            // close was called
	// streams is set once the broker said it streams pulls (ExtStreams in its reply to a
	// heartbeat) or answered a pull with More: a streamed pull that ends on the client is
	// then ended at the broker too (EndPullStream).
	streams atomic.Bool
}

// pendingCall is a request waiting for its reply. finish is called exactly once, by
// whoever removes it from the pending table: the reader with the reply, the connection's
// death with its error, or the waiter giving up.
type pendingCall struct {
	done func(*Command, error) // async calls: gets the reply or the failure
	ch   chan callResult       // sync calls (done nil): gets the reply or the failure
	hold bool                  // async pulls: the reader holds writes while done runs
	// more, when set (a streamed pull), gets the replies that say More instead of finish,
	// from the reader, which has taken the call out of the pending table; it puts the call
	// back, or finishes it.
	more func(*Command)
}

// finish hands the call its reply or failure.
func (p *pendingCall) finish(resp *Command, err error) {
	if p.done != nil {
		p.done(resp, err)
		return
	}
	p.ch <- callResult{resp, err}
}

// callTimers keeps the timers of sync calls between calls (a stopped timer's channel holds
// no stale tick).
var callTimers sync.Pool

// startTimer returns a timer, from callTimers when it has one, that fires after d.
func startTimer(d time.Duration) *time.Timer {
	if t, ok := callTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// stopTimer stops t and keeps it for another call.
func stopTimer(t *time.Timer) {
	t.Stop()
	callTimers.Put(t)
}

// syncCalls keeps the pending calls of sync requests, with their channels, between calls: a
// call is put back once nobody can finish it any more.
var syncCalls = sync.Pool{New: func() any { return &pendingCall{ch: make(chan callResult, 1)} }}

const (
	// readBufferSize is the reader's buffer of a connection's socket.
	readBufferSize = 64 << 10
	// keepWriteBuffer is the largest write buffer a connection keeps for its next write.
	keepWriteBuffer = 256 << 10
	// closeFlushTimeout bounds the write of what is queued when a connection is closed.
	closeFlushTimeout = time.Second
)

// dialConn connects to addr; the caller starts the reader.
func dialConn(ctx context.Context, cl *Client, addr string) (*clientConn, error) {
	d := net.Dialer{Timeout: cl.opts.DialTimeout, KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if cl.opts.TLS != nil {
		if nc, err = clientTLS(ctx, nc, addr, cl.opts.TLS, cl.opts.DialTimeout); err != nil {
			return nil, err
		}
	}
	c := &clientConn{cl: cl, addr: addr, nc: nc, raw: rawsock.New(nc), pending: map[int32]*pendingCall{},
		kick: make(chan struct{}, 1), quit: make(chan struct{})}
	return c, nil
}

// alive reports whether the connection can carry requests.
func (c *clientConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

// close stops the connection: the writer writes what is queued (within
// closeFlushTimeout) and closes the socket; the reader then fails what is pending. Only for
// a connection whose goroutines run.
func (c *clientConn) close() {
	c.closed.Store(true)
	c.wmu.Lock()
	c.closing = true
	c.nc.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	c.wmu.Unlock()
	c.stopWriter()
}

// stopWriter makes the writer write what is queued and return.
func (c *clientConn) stopWriter() { c.stopped.Do(func() { close(c.quit) }) }

// readLoop reads frames until the socket fails: replies go to their callers, requests
// from the broker to handleServerRequest.
func (c *clientConn) readLoop() {
	defer c.cl.wg.Done()
	// Buffered: a reply is one read, and a burst of replies a few, not two each.
	br := bufio.NewReaderSize(c.raw, readBufferSize)
	r := NewReader(br, c.cl.opts.MaxFrameSize)
	r.LazyExt = true  // a send's or a pull's reply is read without a map
	r.reuse = true    // the replies of async calls are released once handled
	r.oneAlloc = true // a reply's header shares its body's allocation
	held := false     // writes are held since an async pull's reply (holdWrites)
	var err error
	for {
		if held && br.Buffered() == 0 { // all read is handled: write before waiting for more
			held = false
			c.releaseWrites()
		}
		// A reply read after waiting is the first of a burst: what its callback writes (an
		// async pull's next pull) goes out right after it, so that the broker works on it
		// while the reader hands out the rest of the burst; the rest is held until the
		// burst is handed out (a write each would cost a system call and a wake-up of the
		// broker each).
		first := br.Buffered() == 0
		var cmd *Command
		cmd, err = r.Read()
		if err != nil {
			if r.err == nil {
				// A frame read whole whose header did not decode: its request, if any,
				// times out; the stream goes on.
				c.cl.lg.Warn("remoting client: malformed frame", "addr", c.addr, "err", err)
				continue
			}
			break
		}
		if cmd.IsResponse() {
			c.mu.Lock()
			p := c.pending[cmd.Opaque]
			delete(c.pending, cmd.Opaque)
			c.mu.Unlock()
			if p != nil {
				if p.hold && !held {
					held = true
					c.holdWrites()
				}
				// An async call's finisher reads its reply and keeps none of it but its
				// body (and the strings made from it); a sync call's caller keeps it.
				async := p.done != nil
				if p.more != nil && cmd.Code == Success && replyMore(cmd) {
					if !c.streams.Load() {
						c.streams.Store(true)
					}
					p.more(cmd)
				} else {
					p.finish(cmd, nil)
				}
				if async {
					r.release(cmd)
				}
				if held && first && br.Buffered() > 0 {
					held = false
					c.releaseWrites()
				}
			}
			continue
		}
		c.handleServerRequest(cmd)
	}
	if held {
		c.releaseWrites()
	}
	if c.closed.Load() {
		err = fmt.Errorf("%w: connection to %s closed", errClientConnClosed, c.addr)
	} else {
		c.cl.lg.Info("remoting client: connection lost", "addr", c.addr, "err", err)
		err = fmt.Errorf("%w: connection to %s lost: %v", errClientConnClosed, c.addr, err)
	}
	c.nc.Close()
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.stopWriter()
	for _, p := range pending {
		p.finish(nil, err)
	}
	c.cl.connLost(c)
}

// handleServerRequest answers a request the broker sent: NOTIFY_CONSUMER_IDS_CHANGED goes
// to the heartbeats' OnChange, RESET_CONSUMER_CLIENT_OFFSET to their OnReset; other
// requests (admin tools asking a client for its running info, say) get
// REQUEST_CODE_NOT_SUPPORTED unless they are oneway.
func (c *clientConn) handleServerRequest(cmd *Command) {
	switch cmd.Code {
	case NotifyConsumerIDsChanged:
		if h, err := ParseConsumerListHeader(cmd.Fields()); err == nil {
			c.cl.notifyChange(h.ConsumerGroup)
		}
		if !cmd.IsOneway() {
			c.write(context.Background(), cmd.Reply(Success, ""))
		}
		return
	case ResetConsumerClientOffset:
		code, remark := Success, ""
		if err := c.cl.notifyReset(cmd); err != nil {
			code, remark = SystemError, err.Error()
			c.cl.opts.Logger.Warn("remoting: offset reset from the broker", "addr", c.addr, "err", err)
		}
		if !cmd.IsOneway() {
			c.write(context.Background(), cmd.Reply(code, remark))
		}
		return
	}
	if !cmd.IsOneway() {
		c.write(context.Background(), cmd.Reply(RequestCodeNotSupported, fmt.Sprintf("request code %d not supported by this client", cmd.Code)))
	}
}

// write queues one frame for the writer, which writes it together with the frames queued
// meanwhile, each write bounded by the client's WriteTimeout (not by a caller's ctx: a
// frame cut short would break the stream for all). It returns once the frame is queued: a
// write that fails later closes the connection, so that the reader fails the requests
// waiting for replies, and later writes return the failure.
func (c *clientConn) write(_ context.Context, cmd *Command) error {
	if !cmd.IsResponse() {
		cmd.Serialize = RocketMQ
		if c.cl.opts.JSONHeaders {
			cmd.Serialize = JSON
		}
	}
	if !cmd.IsResponse() && !c.cl.opts.Credentials.IsZero() {
		signed := *cmd
		signed.Ext = maps.Clone(cmd.Ext)
		c.cl.opts.Credentials.Sign(&signed)
		cmd = &signed
	}
	c.wmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	n := len(c.wbuf)
	var err error
	if c.wbuf, err = cmd.AppendFrame(c.wbuf); err != nil {
		c.wbuf = c.wbuf[:n]
		c.wmu.Unlock()
		return err
	}
	// A pull finding nothing queued and nobody writing is written by its caller: its reply
	// wakes only it (a pull's next pull is issued by the caller its reply woke), so the
	// writer would have nothing to gather with it and its hand-off would cost a wake-up on
	// each pull. (Its caller then waits for the socket, up to WriteTimeout, when the broker
	// does not read: a few hundred bytes, which only a broker that stopped reading with its
	// connection open leaves unsent.) Other requests go through the writer, which gathers the
	// requests of the callers a burst of replies woke into one write.
	if c.held { // the reader writes it (holdWrites)
		c.wmu.Unlock()
		return nil
	}
	if n == 0 && cmd.Code == PullMessage && !c.writing {
		c.writing = true
		c.writeInline(c.cl.opts.WriteTimeout)
		return nil
	}
	c.wmu.Unlock()
	if n == 0 { // else the writer has been kicked and not yet taken the queue
		c.kickWriter()
	}
	return nil
}

// holdWrites makes the frames written from now on wait in the queue, with no kick of the
// writer and no write of a pull by its caller, until releaseWrites. The reader holds them
// while it hands out the replies it has read of async pulls: their callbacks send the
// queues' next pulls, which then go out in one write from the reader, with no hand-off to
// the writer goroutine. Only the reader calls both.
func (c *clientConn) holdWrites() {
	c.wmu.Lock()
	c.held = true
	c.wmu.Unlock()
}

// readerWriteWait is how long the reader waits for room in the socket when it writes the
// frames it held: past it the writer writes the rest, so that the reader, which must read
// the broker's replies for the broker to read on, never waits on its own socket.
const readerWriteWait = time.Millisecond

// releaseWrites ends holdWrites: the reader writes what is queued itself unless a write is
// under way (which takes it when done) or the connection uses TLS (whose writes cannot
// resume after a timeout: the writer takes it).
func (c *clientConn) releaseWrites() {
	c.wmu.Lock()
	c.held = false
	switch {
	case len(c.wbuf) == 0 || c.writing || c.werr != nil:
		c.wmu.Unlock()
	case c.cl.opts.TLS != nil || c.closing:
		c.wmu.Unlock()
		c.kickWriter()
	default:
		c.writing = true
		c.writeInline(readerWriteWait)
	}
}

// writeInline writes what is queued from the caller's goroutine, waiting up to wait for
// the socket; it is called holding wmu, with writing just set, and unlocks wmu. A write cut
// short by wait leaves the rest to the writer, ahead of what was queued meanwhile (a write
// of a whole WriteTimeout that fails closes the connection).
func (c *clientConn) writeInline(wait time.Duration) {
	buf := c.wbuf
	c.wbuf = c.spare[:0]
	c.spare = nil
	if !c.closing {
		c.nc.SetWriteDeadline(time.Now().Add(wait))
	}
	c.wmu.Unlock()
	n, err := c.raw.Write(buf)
	c.wmu.Lock()
	if err != nil && wait < c.cl.opts.WriteTimeout && !c.closing && errors.Is(err, os.ErrDeadlineExceeded) {
		rest := make([]byte, 0, len(buf)-n+len(c.wbuf))
		c.wbuf = append(append(rest, buf[n:]...), c.wbuf...)
		c.writing = false
		c.wmu.Unlock()
		c.kickWriter()
		return
	}
	c.wroteLocked(buf, err)
	// Frames queued meanwhile kicked the writer, which found this write under way; and a
	// writer told to stop waits for it to end.
	more := len(c.wbuf) > 0 || c.werr != nil
	c.wmu.Unlock()
	if err != nil {
		c.nc.Close() // a frame may be half written; the reader fails what waits
	}
	if more {
		c.kickWriter()
	}
}

// wroteLocked records the end of a write of buf that returned err; wmu is held. After a
// failure every later write fails.
func (c *clientConn) wroteLocked(buf []byte, err error) {
	c.writing = false
	if err != nil {
		c.werr = fmt.Errorf("%w: write to %s: %v", mq.ErrUnavailable, c.addr, err)
		c.wbuf = nil
		return
	}
	if cap(buf) <= keepWriteBuffer {
		c.spare = buf
	}
}

// kickWriter tells the writer to look at the queue.
func (c *clientConn) kickWriter() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// writeLoop writes the queued frames, all that are queued in one write, until a write
// fails or stopWriter is called; then it closes the socket. See clientConn.
func (c *clientConn) writeLoop() {
	defer c.cl.wg.Done()
	defer c.nc.Close()
	for {
		c.wmu.Lock()
		var buf []byte
		if !c.writing && !c.held && len(c.wbuf) > 0 {
			// Taken only when it holds frames: an empty buffer taken on a stale kick
			// would be dropped, and the next frames would grow a new one. Not while the
			// reader holds writes: it writes them, or kicks, once it releases them.
			buf = c.wbuf
			c.wbuf = c.spare[:0]
			c.spare = nil
			c.writing = true
			if !c.closing {
				c.nc.SetWriteDeadline(time.Now().Add(c.cl.opts.WriteTimeout))
			}
		}
		c.wmu.Unlock()
		if len(buf) == 0 {
			select {
			case <-c.kick:
				// The callers that woke with this one's reply, or with the replies read
				// together with it, queue their next requests when they run: let them
				// run first, so that one write carries theirs too.
				runtime.Gosched()
				continue
			case <-c.quit:
			}
			c.wmu.Lock()
			c.werr = fmt.Errorf("%w: connection to %s closed", errClientConnClosed, c.addr)
			for c.writing { // a caller's own write: it kicks when done, seeing werr
				c.wmu.Unlock()
				<-c.kick
				c.wmu.Lock()
			}
			buf = c.wbuf
			c.wbuf = nil
			c.wmu.Unlock()
			if len(buf) > 0 {
				c.raw.Write(buf) // best effort: oneway requests queued before close
			}
			return
		}
		_, err := c.raw.Write(buf)
		c.wmu.Lock()
		c.wroteLocked(buf, err)
		c.wmu.Unlock()
		if err != nil {
			return // closing the socket: a frame may be half written
		}
	}
}

// register adds a pending call under a fresh Opaque, set in cmd.
func (c *clientConn) register(cmd *Command, p *pendingCall) error {
	cmd.Opaque = c.cl.opaque.Add(1)
	return c.add(cmd.Opaque, p)
}

// add adds a pending call under opaque.
func (c *clientConn) add(opaque int32, p *pendingCall) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.pending[opaque] = p
	return nil
}

// forget removes the pending call of opaque; false if someone else took it already.
func (c *clientConn) forget(opaque int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[opaque]; !ok {
		return false
	}
	delete(c.pending, opaque)
	return true
}

// call sends cmd and waits for its reply until ctx ends or deadline passes (then the error
// is context.DeadlineExceeded).
func (c *clientConn) call(ctx context.Context, cmd *Command, deadline time.Time) (*Command, error) {
	p := syncCalls.Get().(*pendingCall)
	if err := c.register(cmd, p); err != nil {
		syncCalls.Put(p)
		return nil, err
	}
	var err error
	if err = c.write(ctx, cmd); err == nil {
		var expired <-chan time.Time
		if dl, ok := ctx.Deadline(); !ok || dl.After(deadline) {
			t := startTimer(time.Until(deadline))
			defer stopTimer(t)
			expired = t.C
		}
		select {
		case r := <-p.ch:
			syncCalls.Put(p)
			return r.resp, r.err
		case <-ctx.Done():
			err = ctx.Err()
		case <-expired:
			err = context.DeadlineExceeded
		}
	}
	if !c.forget(cmd.Opaque) {
		r := <-p.ch // the reader finished it meanwhile
		resp, err := r.resp, r.err
		syncCalls.Put(p)
		return resp, err
	}
	syncCalls.Put(p)
	return nil, err
}

type callResult struct {
	resp *Command
	err  error
}

// sendAsync sends a's request and returns once it is queued; a.finished gets the reply,
// the connection's failure, or context.DeadlineExceeded after timeout. It runs on the
// connection's reader goroutine or the timer's. An error returned means it is never
// called (and a is recycled, unless its timer's function started: then it is dropped).
func (c *clientConn) sendAsync(ctx context.Context, a *asyncSend, timeout time.Duration) error {
	// Everything the call's finishers read is set before it is registered, where the
	// reader (its reply, or the connection's death) may take it.
	cmd := &a.req.cmd
	cmd.Opaque = c.cl.opaque.Add(1)
	a.conn, a.opaque = c, cmd.Opaque
	a.refs.hold()
	if err := c.add(a.opaque, &a.pendingCall); err != nil {
		a.recycle()
		return err
	}
	a.timer.Reset(timeout)
	if err := c.write(ctx, cmd); err != nil && c.forget(a.opaque) {
		if a.timer.Stop() {
			a.recycle()
		}
		return err
	}
	// Sent, or failed or timed out meanwhile (finished was called): the connection's
	// death may have finished it while cmd was being written, so a is let go only now.
	if a.refs.release() {
		a.recycle()
	}
	return nil
}

// callRefs counts who may still reach the pooled state of an async call: its issuer, until
// its request is written, and its finisher, until the result is handed out (a connection's
// death can finish a call while its issuer still writes the request). The last to let go
// recycles the state if the finisher found it reusable: no timer function or ctx AfterFunc
// of the call started, or will.
type callRefs struct {
	n        atomic.Int32
	reusable bool // set by the finisher before it lets go
}

// hold counts the issuer and the finisher in, before the call is registered.
func (r *callRefs) hold() { r.n.Store(2); r.reusable = false }

// release lets one go and reports whether the state is to be recycled now.
func (r *callRefs) release() bool { return r.n.Add(-1) == 0 && r.reusable }

// asyncCall is what the pooled async calls (asyncSend, asyncPull) share: their pending
// call, who still holds them, their timeout and where they wait.
type asyncCall struct {
	pendingCall // done is the call's finisher, bound once
	refs        callRefs
	timer       *time.Timer // fails the call at its timeout; stopped by the finisher
	conn        *clientConn
	opaque      int32
}

// init binds the call's finisher and makes its timer, stopped.
func (a *asyncCall) init(finished func(*Command, error)) {
	a.done = finished
	a.timer = time.AfterFunc(time.Hour, func() { a.fail(context.DeadlineExceeded) })
	a.timer.Stop()
}

// fail ends the call with err, unless its reply or another failure ended it first: the
// timer's way, and a ctx's.
func (a *asyncCall) fail(err error) {
	if a.conn.forget(a.opaque) {
		a.done(nil, err)
	}
}

// pullAsync sends a's pull and returns once it is queued; a.finished gets the reply, the
// connection's failure, context.DeadlineExceeded after the pull's timeout, or ctx's error
// when ctx ends first. It runs on the connection's reader goroutine, a timer's or ctx's
// AfterFunc; while it runs on the reader, writes wait for the reader (holdWrites). An
// error returned means it is never called (and a is recycled, unless its timer's function
// or ctx's AfterFunc started: then it is dropped).
func (c *clientConn) pullAsync(ctx context.Context, a *asyncPull) error {
	// Everything the call's finishers read is set before it is registered, where the
	// reader (its reply, or the connection's death) may take it.
	cmd := a.pl.cmd
	cmd.Opaque = c.cl.opaque.Add(1)
	a.conn, a.opaque = c, cmd.Opaque
	if ctx.Done() != nil {
		a.ctx = ctx
		a.stopCtx = context.AfterFunc(ctx, a.ctxEnded)
	}
	a.refs.hold()
	if err := c.add(a.opaque, &a.pendingCall); err != nil {
		if a.stopCtx == nil || a.stopCtx() {
			a.recycle()
		}
		return err
	}
	a.timer.Reset(a.pl.timeout)
	if err := ctx.Err(); err != nil { // ended before it was registered: its AfterFunc found nothing
		a.fail(err)
	} else if err := c.write(ctx, cmd); err != nil && c.forget(a.opaque) {
		if a.timer.Stop() && (a.stopCtx == nil || a.stopCtx()) {
			a.recycle()
		}
		return err
	}
	// Sent, or failed, timed out or ended meanwhile (finished was called): see callRefs.
	if a.refs.release() {
		a.recycle()
	}
	return nil
}

// oneway writes cmd marked oneway: no reply comes.
func (c *clientConn) oneway(ctx context.Context, cmd *Command) error {
	cmd.Flag |= FlagOneway
	cmd.Opaque = c.cl.opaque.Add(1)
	if !c.alive() {
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return err
	}
	return c.write(ctx, cmd)
}
