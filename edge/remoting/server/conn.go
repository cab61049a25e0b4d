package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/internal/rawsock"
)

// outSlack is how many frames beyond MaxInFlight replies a connection's write queue holds:
// SYSTEM_BUSY replies and change notifications.
const outSlack = 64

// readBufSize is the read buffer of a connection while it has bytes to read: a few frames
// of the usual size; a larger frame is read straight into its own memory.
const readBufSize = 8 << 10

// maxWriteBatch is how many bytes of queued frames the writer gathers into one write.
const maxWriteBatch = 256 << 10

// maxPooledWrite is the largest write buffer kept for reuse; bodyInline is the largest
// reply body copied into it: a larger one is written from its own memory (writev).
const (
	maxPooledWrite = 1 << 20
	bodyInline     = 4 << 10
)

// keepQueue is the largest write queue a connection keeps between bursts, in frames.
const keepQueue = 64

// conn is one client connection. Its reader (serve) owns it: it reads frames, hands sends
// to the broker in arrival order (their replies come when the store acknowledges them),
// answers pulls that need not wait for messages itself, hands the others to the server's
// pull workers (which park them in the broker, no goroutine held while they wait; a parked
// pull woken while the reader goes through what it read is the reader's: runWoken) and
// starts a goroutine per other request; when reading ends (the client closed, an error, idle, or the server stopping)
// it waits for them and for the writer, closes the socket and unregisters the clients
// that heartbeat on it.
type conn struct {
	s      *Server
	nc     net.Conn
	wr     *rawsock.Conn // nc's writes; only one write runs at a time (writing)
	vip    bool
	remote string
	host   netip.AddrPort // the store host of the message ids it is told (storeHost)
	born   netip.AddrPort // the client's address, the born host of its messages
	maxMsg int            // the broker's largest message body

	ctx    context.Context // the requests' context: ends once they are answered, or at Close
	cancel context.CancelFunc
	// pulls is the context of parked pulls: it ends with ctx, and when reading ends because
	// the client left (nobody waits for their answer). Other requests already read are
	// still carried out: a client's last commit of its offsets comes just before it closes.
	pulls     context.Context
	stopPulls context.CancelFunc
	// parked is the context a pull waits for messages in: pulls, ended also by the server's
	// Shutdown (Server.pulls), made once for the connection's parked pulls rather than for
	// each; unpark releases it.
	parked context.Context
	unpark func()

	wmu   sync.Mutex // guards queue, spare, dead, writing, rest and restHeld
	queue []outFrame // frames for the writer, bounded by maxQueue (see queueFrame)
	spare []outFrame // the writer's last batch, emptied, for the next queue
	dead  bool       // the writer failed: nothing more is written
	// writing: a write to the socket is under way, the writer's or one written inline
	// (answerNow, releaseReplies), or rest waits for the writer
	writing bool
	// rest is what a write inline left unwritten when the socket had no room within
	// inlineWriteWait: the writer writes it before anything queued; restHeld counts the
	// answers in it that hold a place in flight.
	rest     []byte
	restHeld int32

	kick  chan struct{} // capacity 1: the queue has frames
	room  chan struct{} // capacity 1: the writer took frames (the reader waits on it)
	stop  chan struct{} // closed by serve once no handler runs: the writer drains and exits
	died  chan struct{} // closed when dead is set
	wdone chan struct{} // closed when the writer returns

	// inflight counts requests read and not yet answered: handled, or their reply not yet
	// written (so that the write queue stays bounded when a client does not read).
	inflight atomic.Int32
	handlers sync.WaitGroup // request goroutines and sends the store has not acknowledged

	stopped atomic.Bool // stopReading was called: a read error is the server's doing
	// held: the reader is going through the frames it has read; frames queued meanwhile do
	// not kick the writer, and the reader writes them itself once its buffer is drained
	// (releaseReplies): one write for the answers to requests read together, and none of
	// the writer's wake-ups for a lone request's.
	held atomic.Bool

	// While held, a pull of this connection that the broker wakes (most often by a send
	// the reader just stored) waits in woken for the reader, which answers it before it
	// writes what it holds (runWoken): the send's reply and the pull's answer go in one
	// write, and the pull costs no hand-off to a pull worker. Guarded by jmu.
	jmu     sync.Mutex
	collect bool       // the reader holds: woken pulls wait for it
	woken   []*pullJob // pulls woken while collect, for the reader

	mu      sync.Mutex          // guards the fields below
	clients map[string]struct{} // client ids that heartbeat here
	lang    remoting.LanguageCode
	version int16 // language and version of the last heartbeat
	// streams holds the streamed pulls parked or streaming, by opaque, for END_PULL_STREAM
	// (watchStream).
	streams map[int32]*streamWatch
}

// outFrame is a frame for the writer: a command, or a send's outcome to answer.
type outFrame struct {
	cmd  *remoting.Command
	sent *sendAck
	body *[]byte // cmd's body, from pullBodies: put back once written
	held bool    // the answer to a request counted in inflight: the writer releases it
}

func newConn(s *Server, nc net.Conn, vip bool) *conn {
	c := &conn{s: s, nc: nc, vip: vip, remote: nc.RemoteAddr().String(), born: remoteAddrPort(nc),
		kick:    make(chan struct{}, 1),
		room:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		died:    make(chan struct{}),
		wdone:   make(chan struct{}),
		clients: map[string]struct{}{}}
	c.host = s.storeHost(c)
	c.wr = rawsock.New(nc)
	c.maxMsg = s.b.Options().MaxMessageSize
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.pulls, c.stopPulls = context.WithCancel(c.ctx)
	var cancel context.CancelFunc
	c.parked, cancel = context.WithCancel(c.pulls)
	stop := context.AfterFunc(s.pulls, cancel)
	c.unpark = func() { stop(); cancel() }
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
	c.unpark()
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
	// (data to a closed socket) cannot drop them from the receive buffer. The reader
	// never waits for messages or on the writer but for room to answer SYSTEM_BUSY: a
	// pull that finds messages it answers itself, one that must wait goes to a pull
	// worker (parkPull), which parks it in the broker. The answers queued while it goes through what it read it writes
	// itself before it reads again (held). An idle connection holds no read buffer
	// (connReader).
	cr := newConnReader(c.nc)
	defer cr.release()
	cr.drained = c.releaseReplies
	defer c.releaseReplies()
	r := remoting.NewReader(cr, c.s.opts.MaxFrameSize)
	r.LazyExt = true // a send's or a pull's header is read without a map
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
		if !c.held.Load() {
			c.jmu.Lock()
			c.collect = true
			c.jmu.Unlock()
			c.held.Store(true)
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
				if !c.queueFrame(outFrame{cmd: cmd.Reply(remoting.SystemBusy, busy)}, true) {
					return nil
				}
			}
			continue
		}
		c.inflight.Add(1)
		c.s.reqBytes.Add(size)
		c.handlers.Add(1)
		if isSend(cmd.Code) {
			c.s.dispatchSend(c, cmd, size) // in arrival order
			continue
		}
		if cmd.Code == remoting.UpdateConsumerOffset {
			// In arrival order too, and cheap (the broker keeps offsets in memory): a
			// consumer's commits on one connection never move its offset back.
			c.handle(cmd, size)
			continue
		}
		if isPull(cmd.Code) {
			// A pull that finds messages (or an error) is answered here, without a
			// goroutine: a consumer pulls each queue again only once answered, so the
			// hand-offs are its round trip. One that must wait goes to a pull worker, which
			// parks it in the broker.
			var st pullStream
			if !c.pullNow(cmd, size, &st) {
				c.s.parkPull(newPullJob(c, cmd, size, st))
			}
			continue
		}
		go c.handle(cmd, size)
	}
}

// pullNow answers the pull req of size bytes if it need not wait for messages, and says
// whether it did; else the pull is for handlePull.
func (c *conn) pullNow(req *remoting.Command, size int64, st *pullStream) bool {
	var body *[]byte
	resp, wait := c.s.guard(c, req, func() (resp *remoting.Command, wait bool) {
		if resp := c.s.authorize(c, req); resp != nil {
			return resp, false
		}
		resp, body, wait = c.s.pullAt(c, req, pullTry, st, nil)
		return resp, wait
	})
	if wait {
		c.watchStream(req, st)
		return false
	}
	if st.more { // answered, and parked to be answered again
		c.watchStream(req, st)
		c.answerPart(req, resp, body)
		return false
	}
	c.s.reqBytes.Add(-size)
	if !c.answerNow(req, resp, body, true) {
		c.answer(req, resp, body) // held: written when the reader's buffer is drained
	}
	c.handlers.Done()
	return true
}

// answerNow writes resp, the answer to req (body: its pooled body, or nil), itself when
// nothing is queued for the writer and nobody writes, and reports whether it did (else the
// caller queues it): a pull's answer then costs no hand-off to the writer. A failed write
// fails the connection, as the writer's does. held: the answer is req's last, which
// releases req's place in flight once written.
func (c *conn) answerNow(req, resp *remoting.Command, body *[]byte, held bool) bool {
	if resp == nil || req.IsOneway() || !c.inlineWrites() {
		return false
	}
	c.wmu.Lock()
	if c.dead || len(c.queue) > 0 || c.writing {
		c.wmu.Unlock()
		return false
	}
	c.writing = true
	c.wmu.Unlock()
	c.s.stats.replies.add(resp.Code)
	frames := [1]outFrame{{cmd: resp, body: body, held: held}}
	rest, err := c.writeFrames(frames[:], inlineWriteWait)
	n := int32(0)
	if held {
		n = 1
	}
	c.wroteInline(n, rest, err)
	return true
}

// answerPart writes or queues resp, an answer to the streamed pull req that is not its
// last: req keeps its place in flight.
func (c *conn) answerPart(req, resp *remoting.Command, body *[]byte) {
	if !c.answerNow(req, resp, body, false) {
		c.queueFrame(outFrame{cmd: resp, body: body}, false)
	}
}

// inlineWriteWait is how long a write inline (by the reader or a pull worker) waits for
// room in the socket: past it the writer writes the rest, so that neither the reader, which
// must read on to the connection's cap in flight, nor a pull worker, which serves every
// connection's parked pulls, waits on a client that does not read.
const inlineWriteWait = time.Millisecond

// inlineWrites reports whether answers may be written inline. Not over TLS: a TLS write
// cut short by its deadline cannot be resumed, so only the writer writes, with the whole
// WriteTimeout.
func (c *conn) inlineWrites() bool { return c.s.opts.TLS == nil }

// wroteInline ends a write inline of answers, held of them with a place in flight, that
// left rest unwritten or failed with err, and kicks the writer when it has work: rest, or
// frames queued meanwhile (the writer, kicked by them, found the write under way). With
// rest, writing stays set until the writer has written it.
func (c *conn) wroteInline(held int32, rest []byte, err error) {
	if rest != nil {
		c.wmu.Lock()
		c.rest, c.restHeld = rest, held
		c.wmu.Unlock()
		c.kickWriter()
		return
	}
	c.inflight.Add(-held)
	if err != nil {
		c.writeFailed(err)
	}
	c.wmu.Lock()
	c.writing = false
	more := len(c.queue) > 0
	c.wmu.Unlock()
	if more {
		c.kickWriter()
	}
}

// kickWriter tells the writer to look at the queue.
func (c *conn) kickWriter() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// handlePull carries on the pull j that pullNow found waiting, or answered as the first of
// a stream (j.st), or that the broker woke: it parks it in the broker to wait for messages
// (PullViewsOrPark), no goroutine held, or reads it again once woken, and answers it; a
// stream's pull is parked again after each answer but its last. The pull worker writes an
// answer itself when nothing is queued and nobody writes: a message's way from its send to
// a consumer parked on its queue then has no hand-off to the writer. Once j is parked,
// nothing here touches it: its wake may run it on another worker at once.
func (c *conn) handlePull(j *pullJob) {
	req := j.req
	for {
		mode := pullPark
		if j.woken {
			mode, j.woken = pullAfterWake, false
		}
		var body *[]byte
		var parked bool
		resp, _ := c.s.guard(c, req, func() (resp *remoting.Command, wait bool) {
			resp, body, parked = c.s.pullAt(c, req, mode, &j.st, j.wake)
			return resp, false
		})
		if parked {
			return
		}
		if j.st.more {
			c.answerPart(req, resp, body)
			continue
		}
		if !c.answerNow(req, resp, body, true) {
			c.answer(req, resp, body)
		}
		c.unwatchStream(req, &j.st)
		c.s.reqBytes.Add(-j.size)
		c.handlers.Done()
		return
	}
}

// streamWatch ends a streamed pull that END_PULL_STREAM names.
type streamWatch struct{ cancel context.CancelFunc }

// watchStream gives the pull req, about to park, its own context if it asks to stream
// (st.asked), so that END_PULL_STREAM can end it (endStream): a consumer that dropped the
// queue reads none of its answers. The reader calls it before it reads on, so an
// END_PULL_STREAM sent after the pull finds it.
func (c *conn) watchStream(req *remoting.Command, st *pullStream) {
	if !st.asked || st.watch != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.parked)
	st.ctx, st.watch = ctx, &streamWatch{cancel: cancel}
	c.mu.Lock()
	if c.streams == nil {
		c.streams = map[int32]*streamWatch{}
	}
	c.streams[req.Opaque] = st.watch
	c.mu.Unlock()
}

// unwatchStream forgets the stream of req once it has given its last answer.
func (c *conn) unwatchStream(req *remoting.Command, st *pullStream) {
	if st.watch == nil {
		return
	}
	c.mu.Lock()
	if c.streams[req.Opaque] == st.watch {
		delete(c.streams, req.Opaque)
	}
	c.mu.Unlock()
	st.watch.cancel()
}

// endStream ends the streamed pull of opaque, if it is parked or streaming: its pull
// worker answers it PULL_NOT_FOUND at once (pullAt).
func (c *conn) endStream(opaque int32) {
	c.mu.Lock()
	w := c.streams[opaque]
	delete(c.streams, opaque)
	c.mu.Unlock()
	if w != nil {
		w.cancel()
	}
}

// handle answers one request of size bytes.
func (c *conn) handle(req *remoting.Command, size int64) {
	defer c.handlers.Done()
	defer c.s.reqBytes.Add(-size)
	resp := c.s.dispatch(c, req)
	c.answer(req, resp, nil)
}

// answer queues resp, the answer to req (nil: none; body: its pooled body, or nil), and
// releases req's place in flight once it is written. It never waits.
func (c *conn) answer(req, resp *remoting.Command, body *[]byte) {
	if resp == nil || req.IsOneway() {
		putPullBody(body)
		c.inflight.Add(-1)
		return
	}
	c.queueFrame(outFrame{cmd: resp, body: body, held: true}, false)
}

// maxQueue is how many frames the write queue holds before the reader waits and
// notifications are dropped; answers to requests in flight always go in.
func (c *conn) maxQueue() int { return c.s.opts.MaxInFlight + outSlack }

// queueFrame queues f for the writer. With wait (the reader's SYSTEM_BUSY replies) it waits
// while the queue is full; without, it never waits: an answer's room is its place in
// flight. It reports false when the connection can no longer be written (f is dropped).
func (c *conn) queueFrame(f outFrame, wait bool) bool {
	for {
		c.wmu.Lock()
		if c.dead {
			c.wmu.Unlock()
			if f.held {
				c.inflight.Add(-1)
			}
			return false
		}
		if !wait || len(c.queue) < c.maxQueue() {
			if c.queue == nil && c.spare != nil {
				c.queue, c.spare = c.spare, nil
			}
			// Counted before a writer can take it: a client that has its answer sees it
			// in the stats. A send's reply is counted when made.
			if f.cmd != nil && f.cmd.IsResponse() {
				c.s.stats.replies.add(f.cmd.Code)
			}
			c.queue = append(c.queue, f)
			c.wmu.Unlock()
			if !c.held.Load() { // read after the append: see releaseReplies
				c.kickWriter()
			}
			return true
		}
		c.wmu.Unlock()
		c.kickWriter() // the reader waits for room: what it held goes now
		select {
		case <-c.room:
		case <-c.died:
			return false
		}
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
	c.wmu.Lock()
	full := len(c.queue) >= c.maxQueue()
	c.wmu.Unlock()
	if full {
		c.s.lg.Debug("notification dropped: write queue full", "remote", c.remote, "code", cmd.Code)
		return
	}
	c.queueFrame(outFrame{cmd: cmd}, false)
}

// writeLoop writes queued frames, all that are queued at once in as few writes as
// maxWriteBatch allows, each write bounded by WriteTimeout. It returns once serve closes
// stop and the queue is empty, or on a write error, after which it closes the socket (the
// reader then returns too). Between bursts it holds no write buffer.
func (c *conn) writeLoop() {
	defer close(c.wdone)
	for {
		c.wmu.Lock()
		if rest, held := c.rest, c.restHeld; rest != nil {
			c.rest, c.restHeld = nil, 0
			c.wmu.Unlock()
			if c.writeRest(rest, held) != nil {
				return
			}
			continue
		}
		var batch []outFrame
		// Taken only when it holds frames (an empty queue taken on a stale kick would be
		// dropped); and not while an answer is written inline: it kicks when done.
		if !c.writing && len(c.queue) > 0 {
			batch = c.queue
			c.queue = nil
			c.writing = true
		}
		c.wmu.Unlock()
		if len(batch) == 0 {
			select {
			case <-c.kick:
				continue
			case <-c.stop:
				c.wmu.Lock()
				left := len(c.queue) > 0 || c.rest != nil
				c.wmu.Unlock()
				if !left {
					return
				}
				continue
			}
		}
		select {
		case c.room <- struct{}{}:
		default:
		}
		if _, err := c.writeBatch(batch, c.s.opts.WriteTimeout); err != nil {
			return
		}
	}
}

// writeBatch writes batch, a queue taken with writing set, waiting up to wait for room in
// the socket, releases the answers' places in flight and ends the write. It returns the
// write's error, after which the connection is dead, or handed when a write inline left
// the rest to the writer (kicked, and then owning the write). It reports nothing about frames
// queued meanwhile: the caller looks.
func (c *conn) writeBatch(batch []outFrame, wait time.Duration) (handed bool, err error) {
	rest, err := c.writeFrames(batch, wait)
	held := int32(0)
	for _, f := range batch {
		if f.held {
			held++
		}
	}
	clear(batch)
	if rest != nil {
		c.wroteInline(held, rest, nil)
		return true, nil
	}
	c.inflight.Add(-held)
	if err != nil {
		c.writeFailed(err)
		return false, err
	}
	c.wmu.Lock()
	c.writing = false
	if cap(batch) <= keepQueue {
		c.spare = batch[:0]
	}
	c.wmu.Unlock()
	return false, nil
}

// writeRest writes what a write inline left (rest, taken with writing still set) with the
// whole WriteTimeout, and ends the write; it returns the write's error.
func (c *conn) writeRest(rest []byte, held int32) error {
	bufs := net.Buffers{rest}
	err := c.write(&bufs, c.s.opts.WriteTimeout)
	c.inflight.Add(-held)
	if err != nil {
		c.writeFailed(err)
		return err
	}
	c.wmu.Lock()
	c.writing = false
	c.wmu.Unlock()
	return nil
}

// releaseReplies ends the reader's hold (see held) once it has handled every frame it has
// read, before it reads again: it writes what is queued itself when nobody writes (an
// answer the writer is writing leaves the rest to the writer, which looks at the queue
// after each write). held is cleared before the queue is looked at, and queueFrame reads
// it after appending: a frame is either seen here or kicks the writer.
func (c *conn) releaseReplies() {
	if !c.held.Load() {
		return
	}
	c.runWoken()
	c.held.Store(false)
	if !c.inlineWrites() {
		c.kickWriter()
		return
	}
	c.wmu.Lock()
	if c.dead || c.writing || len(c.queue) == 0 {
		c.wmu.Unlock()
		return
	}
	for range releaseWrites {
		batch := c.queue
		c.queue = nil
		c.writing = true
		c.wmu.Unlock()
		if handed, err := c.writeBatch(batch, inlineWriteWait); err != nil || handed {
			return // handed: the writer, kicked, writes the rest
		}
		c.wmu.Lock()
		if c.dead || c.writing || len(c.queue) == 0 {
			c.wmu.Unlock()
			return
		}
	}
	c.wmu.Unlock()
	c.kickWriter()
}

// runWoken ends the reader's collecting of woken pulls and answers those it collected
// (handlePull): their answers join the ones held, or are written at once when none are.
func (c *conn) runWoken() {
	c.jmu.Lock()
	jobs := c.woken
	c.woken = nil
	c.collect = false
	c.jmu.Unlock()
	for i, j := range jobs {
		jobs[i] = nil
		c.s.stats.pullsByReader.Add(1)
		c.handlePull(j)
	}
	if cap(jobs) <= maxKeptWoken {
		c.jmu.Lock()
		if c.woken == nil {
			c.woken = jobs[:0]
		}
		c.jmu.Unlock()
	}
}

// maxKeptWoken bounds the room for woken pulls a connection keeps between its reader's
// bursts.
const maxKeptWoken = 64

// releaseWrites is how many writes releaseReplies makes at most: answers queued during
// its write (a parked pull's, woken by a send it read) go in the next, without a wake-up
// of the writer; past that the writer takes over, and the reader reads on.
const releaseWrites = 3

// writeFailed logs err, marks the connection dead and closes its socket.
func (c *conn) writeFailed(err error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.lg.Warn("connection closed: slow reader", "remote", c.remote, "write_timeout", c.s.opts.WriteTimeout)
	case errors.Is(err, net.ErrClosed):
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		// The client closed with replies on their way (Go clients' oneway requests are
		// answered): its business.
		c.s.lg.Debug("connection closed by the client before its replies", "remote", c.remote, "err", err)
	default:
		c.s.lg.Info("connection closed: write error", "remote", c.remote, "err", err)
	}
	c.wmu.Lock()
	c.dead = true
	left := c.queue
	c.queue, c.spare = nil, nil
	c.inflight.Add(-c.restHeld)
	c.rest, c.restHeld = nil, 0
	c.wmu.Unlock()
	for _, f := range left {
		if f.held {
			c.inflight.Add(-1)
		}
	}
	close(c.died)
	c.nc.Close()
}

// writeBufs pools write buffers, so that an idle connection holds none.
var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

// writeFrames encodes and writes frames: small ones gathered into one buffer, a large
// reply body written from its own memory (one writev for the lot), each write waiting up to
// wait for room in the socket. A write inline (wait below WriteTimeout) that runs out of
// wait returns the rest, unwritten, for the writer, and no error.
func (c *conn) writeFrames(frames []outFrame, wait time.Duration) (rest []byte, err error) {
	bp := writeBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	var segs net.Buffers  // what is encoded and not yet written: parts of buf and large bodies
	mark, pending := 0, 0 // buf[mark:] is not in segs yet; pending counts the bytes of both
	for i, f := range frames {
		cmd := c.frameCmd(f)
		n := len(buf)
		if len(cmd.Body) > bodyInline {
			var head bool
			if buf, head = c.appendFrame(buf, cmd, true); head {
				segs = append(segs, buf[mark:], cmd.Body)
				mark = len(buf)
				pending += len(cmd.Body)
			}
		} else {
			buf, _ = c.appendFrame(buf, cmd, false)
		}
		f.releaseSent()
		if pending += len(buf) - n; pending >= maxWriteBatch {
			out := append(segs, buf[mark:])
			if err = c.write(&out, wait); err != nil {
				rest = c.cutShort(out, frames[i+1:], wait, err)
				break
			}
			buf, segs, mark, pending = buf[:0], segs[:0], 0, 0
		}
	}
	if err == nil && pending > 0 {
		out := append(segs, buf[mark:])
		if err = c.write(&out, wait); err != nil {
			rest = c.cutShort(out, nil, wait, err)
		}
	}
	if cap(buf) <= maxPooledWrite { // a large reply once does not pin its memory
		*bp = buf[:0]
		writeBufs.Put(bp)
	}
	// Every frame is written, copied into rest, or dropped with the connection: nothing
	// reads their bodies any more.
	for _, f := range frames {
		putPullBody(f.body)
	}
	if rest != nil {
		err = nil
	}
	return rest, err
}

// cutShort returns what a write inline that failed with err leaves to the writer: the
// bytes of segs it did not write (copied: they may be the pooled write buffer's) and the
// frames after them, encoded; nil when the write failed otherwise than by running out of
// wait, shorter than WriteTimeout, for room in the socket.
func (c *conn) cutShort(segs net.Buffers, after []outFrame, wait time.Duration, err error) []byte {
	if wait >= c.s.opts.WriteTimeout || !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	var rest []byte
	for _, b := range segs {
		rest = append(rest, b...)
	}
	for _, f := range after {
		rest, _ = c.appendFrame(rest, c.frameCmd(f), false)
		f.releaseSent()
	}
	if rest == nil {
		rest = []byte{} // all of it was written as the wait ran out: the writer ends the write
	}
	return rest
}

// frameCmd returns f's command: for a send's answer, the reply made now from its result
// (and counted).
func (c *conn) frameCmd(f outFrame) *remoting.Command {
	if f.sent == nil {
		return f.cmd
	}
	cmd := c.s.sendReply(c, f.sent)
	c.s.stats.replies.add(cmd.Code)
	return cmd
}

// releaseSent puts a send's answer back in its pool once it is encoded: the reply made
// of it points into it, and nothing reads it after.
func (f outFrame) releaseSent() {
	if f.sent != nil {
		f.sent.release()
	}
}

// write writes bufs (in raw system calls on a socket: see package rawsock), waiting up to wait for room in the socket; on an error bufs holds what
// was not written.
func (c *conn) write(bufs *net.Buffers, wait time.Duration) error {
	c.nc.SetWriteDeadline(time.Now().Add(wait))
	return c.wr.WriteBuffers(bufs)
}

// appendFrame encodes cmd, or with headOnly all of its frame but the body (ok then
// reports that it did). A reply that cannot be encoded (a header over the frame limit)
// becomes a whole SYSTEM_ERROR reply, so that the client is answered.
func (c *conn) appendFrame(buf []byte, cmd *remoting.Command, headOnly bool) (out []byte, ok bool) {
	var err error
	if headOnly {
		out, err = cmd.AppendFrameHead(buf)
	} else {
		out, err = cmd.AppendFrame(buf)
	}
	if err == nil {
		return out, true
	}
	c.s.lg.Error("reply not encodable", "remote", c.remote, "code", cmd.Code, "err", err)
	r := &remoting.Command{Code: remoting.SystemError, Language: cmd.Language, Version: cmd.Version, Opaque: cmd.Opaque,
		Flag: cmd.Flag, Remark: "server: reply not encodable", Serialize: cmd.Serialize}
	out, _ = r.AppendFrame(buf)
	return out, false
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
