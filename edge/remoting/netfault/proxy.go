package netfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by calls on a Proxy after Close.
var ErrClosed = errors.New("netfault: proxy closed")

// Options configures a Proxy. A nil *Options or a zero field takes its default.
type Options struct {
	// Listener is where clients connect. Default: a new TCP listener on 127.0.0.1:0.
	// The proxy closes it on Close.
	Listener net.Listener
	// Dial connects to the upstream for each accepted connection. Default: a TCP dial
	// of the upstream address with a 3 s timeout.
	Dial func(ctx context.Context) (net.Conn, error)
	// BufferSize is the most bytes one read forwards at once. Default 32 KiB.
	BufferSize int
	// Latency holds every byte, in each direction of each connection, for this long after
	// the proxy read it before it is forwarded (one-way delay: a round trip through the
	// proxy takes twice Latency more). Bytes keep their order and the throughput stays
	// that of the link: the proxy goes on reading while earlier bytes wait, up to
	// LatencyReads reads per direction. A stall or throttle applies after the delay.
	// Default 0: no delay.
	Latency time.Duration
	// LatencyReads bounds the reads that wait out Latency in one direction; a full delay
	// line stops reading (back pressure on the sender). Default 4096.
	LatencyReads int
}

// Proxy is a TCP proxy between clients and one upstream that injects faults on command.
// Its methods are safe for concurrent use.
//
// A Proxy owns these goroutines: one accept loop, two pumps per open connection (one
// each way) and, after StartFaults, one fault scheduler. Close stops all of them and
// waits for them.
type Proxy struct {
	ln        net.Listener
	dial      func(ctx context.Context) (net.Conn, error)
	bufSize   int
	latency   time.Duration
	lineReads int

	ctx    context.Context // ends at Close: bounds upstream dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop, pumps, scheduler

	dropArmed atomic.Bool // DropNextReply is waiting for a request
	accepted  atomic.Int64
	dropped   atomic.Int64 // replies dropped

	mu         sync.Mutex
	closed     bool
	links      map[*link]struct{}
	stallUntil time.Time
	rate       int // bytes per second per direction; 0: unlimited
	schedStop  chan struct{}
	faults     []Fault
}

// New starts a proxy to upstream ("host:port"; unused when opts.Dial is set).
func New(upstream string, opts *Options) (*Proxy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Dial == nil {
		if upstream == "" {
			return nil, errors.New("netfault: no upstream address")
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		o.Dial = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", upstream) }
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 32 << 10
	}
	if o.Latency < 0 {
		return nil, fmt.Errorf("netfault: negative latency %v", o.Latency)
	}
	if o.LatencyReads <= 0 {
		o.LatencyReads = 4096
	}
	if o.Listener == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("netfault: listen: %w", err)
		}
		o.Listener = ln
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:        o.Listener,
		dial:      o.Dial,
		bufSize:   o.BufferSize,
		latency:   o.Latency,
		lineReads: o.LatencyReads,
		ctx:       ctx,
		cancel:    cancel,
		links:     map[*link]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients connect to, as "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Conns returns the number of connections open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Accepted returns the number of client connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// RepliesDropped returns how many times an armed DropNextReply has closed a connection
// at the upstream's reply.
func (p *Proxy) RepliesDropped() int64 { return p.dropped.Load() }

// Cut closes every open connection, both its client and its upstream side. The proxy
// goes on accepting new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// Stall stops forwarding in both directions, on open and new connections, for d from
// now (or until an earlier stall's end, if that is later). Bytes read meanwhile wait in
// the proxy and are forwarded when the stall ends. A d <= 0 ends a stall now.
func (p *Proxy) Stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d <= 0 {
		p.stallUntil = time.Time{}
		return
	}
	if until := time.Now().Add(d); until.After(p.stallUntil) {
		p.stallUntil = until
	}
}

// Throttle limits forwarding to bytesPerSecond in each direction of each connection;
// 0 or less removes the limit.
func (p *Proxy) Throttle(bytesPerSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = max(bytesPerSecond, 0)
}

// DropNextReply arms a lost reply: the next bytes a client sends on any connection are
// forwarded to the upstream, and that connection is then closed at the first byte the
// upstream sends back, before it reaches the client. The request (or, if the client
// pipelines, all requests written so far on that connection) took effect upstream; the
// reply is lost and the client sees the connection close.
func (p *Proxy) DropNextReply() { p.dropArmed.Store(true) }

// Close stops the proxy: it closes its listener and every connection, stops the fault
// scheduler and waits for its goroutines. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.schedStop != nil {
		close(p.schedStop)
		p.schedStop = nil
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// A listener that fails for another reason is done: the proxy stops
			// accepting, and Close still cleans up.
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// serve dials the upstream for client c and starts the link's pumps.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	up, err := p.dial(p.ctx)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, up: up, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	if p.latency > 0 {
		p.wg.Add(4)
		p.mu.Unlock()
		reqs, replies := make(chan delayed, p.lineReads), make(chan delayed, p.lineReads)
		go p.delayRead(l, c, reqs)
		go p.delayWrite(l, up, reqs, true)
		go p.delayRead(l, up, replies)
		go p.delayWrite(l, c, replies, false)
		return
	}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pump(l, c, up, true)
	go p.pump(l, up, c, false)
}

// link is one proxied connection: a client side and an upstream side.
type link struct {
	client, up net.Conn
	done       chan struct{} // closed by close
	once       sync.Once

	mu        sync.Mutex // orders an armed request's write before the reply's check
	dropReply bool       // close at the next upstream byte
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.up.Close()
	})
}

// pump forwards src to dst until either fails or the link closes; request is true for
// the client→upstream direction.
func (p *Proxy) pump(l *link, src, dst net.Conn, request bool) {
	defer p.wg.Done()
	defer p.unlink(l)
	defer l.close()
	buf := make([]byte, p.bufSize)
	for {
		n, err := src.Read(buf)
		if !p.send(l, dst, buf[:n], request) {
			return
		}
		if err != nil {
			return // io.EOF included: a half-close ends the link, as a cut would
		}
	}
}

// send forwards b to dst in steps of at most chunk bytes, each after any stall and its
// time under a throttle. It reports false when the link is done.
func (p *Proxy) send(l *link, dst net.Conn, b []byte, request bool) bool {
	for len(b) > 0 {
		k := min(len(b), p.chunk())
		if !p.wait(l) || !p.throttle(l, k) || !p.forward(l, dst, b[:k], request) {
			return false
		}
		b = b[k:]
	}
	return true
}

// delayed is what one read of a delayed direction got, and when it may go on.
type delayed struct {
	due time.Time
	b   []byte
}

// delayRead reads src into line, stamping each read with the time it may be forwarded,
// until src fails (io.EOF included) or the link closes; it then closes line.
func (p *Proxy) delayRead(l *link, src net.Conn, line chan<- delayed) {
	defer p.wg.Done()
	defer close(line)
	buf := make([]byte, p.bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d := delayed{due: time.Now().Add(p.latency), b: bytes.Clone(buf[:n])}
			select {
			case line <- d:
			case <-l.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// delayWrite forwards what line holds to dst, each read once it is due, until line closes
// (then the link closes, as pump closes it at a half-close) or the link closes.
func (p *Proxy) delayWrite(l *link, dst net.Conn, line <-chan delayed, request bool) {
	defer p.wg.Done()
	defer p.unlink(l)
	defer l.close()
	for d := range line {
		if wait := time.Until(d.due); wait > 0 && !sleep(l, wait) {
			return
		}
		if !p.send(l, dst, d.b, request) {
			return
		}
	}
}

func (p *Proxy) unlink(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// forward writes b to dst, applying an armed DropNextReply. It reports false when the
// link is done.
func (p *Proxy) forward(l *link, dst net.Conn, b []byte, request bool) bool {
	if request {
		if p.dropArmed.CompareAndSwap(true, false) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, err := dst.Write(b); err != nil {
				return false
			}
			l.dropReply = true
			return true
		}
		_, err := dst.Write(b)
		return err == nil
	}
	l.mu.Lock()
	drop := l.dropReply
	l.mu.Unlock()
	if drop {
		p.dropped.Add(1)
		return false // the reply's bytes go nowhere; the deferred close cuts the link
	}
	_, err := dst.Write(b)
	return err == nil
}

// chunk returns how many bytes one write may forward: all, or a twentieth of a second's
// worth under a throttle, so that a slow link still moves in small steps.
func (p *Proxy) chunk() int {
	p.mu.Lock()
	rate := p.rate
	p.mu.Unlock()
	if rate > 0 {
		return max(1, min(p.bufSize, rate/20))
	}
	return p.bufSize
}

// wait blocks while the proxy is stalled; it reports false if the link closed meanwhile.
func (p *Proxy) wait(l *link) bool {
	for {
		p.mu.Lock()
		d := time.Until(p.stallUntil)
		p.mu.Unlock()
		if d <= 0 {
			return true
		}
		if !sleep(l, d) {
			return false
		}
	}
}

// throttle sleeps as long as n bytes take at the current rate, before they are forwarded.
func (p *Proxy) throttle(l *link, n int) bool {
	p.mu.Lock()
	rate := p.rate
	p.mu.Unlock()
	if rate <= 0 {
		return true
	}
	return sleep(l, time.Duration(int64(n)*int64(time.Second)/int64(rate)))
}

// sleep waits d or until l closes, reporting false in the second case.
func sleep(l *link, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}
