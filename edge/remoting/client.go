package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// Options configures a Client. A zero field takes its default.
type Options struct {
	// RequestTimeout bounds a request whose ctx has no earlier deadline. Default 3 s.
	RequestTimeout time.Duration
	// PullTimeoutMargin is how much longer than its hold a suspended pull waits for its
	// reply: the broker answers a held pull at the end of the hold, or up to one check
	// interval (5 s) later. Default 10 s.
	PullTimeoutMargin time.Duration
	// DefaultPullHold is the hold of a suspended pull that names none. Default 15 s.
	DefaultPullHold time.Duration
	// DialTimeout bounds a connection attempt. Default 3 s.
	DialTimeout time.Duration
	// WriteTimeout bounds one write of the frames queued on a connection; a connection
	// that cannot take them in this time is closed. Default 10 s.
	WriteTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the backoff after a failed connection attempt:
	// for that long, requests to the address fail at once with mq.ErrUnavailable; each
	// further failure doubles it. Defaults 100 ms and 5 s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// RouteRefresh is how often the routes of the topics in use are fetched again from the
	// name server (and how old a cached route may be). Default 30 s.
	RouteRefresh time.Duration
	// HeartbeatInterval is how often the client repeats the heartbeats it was given to
	// every broker it knows. Default 30 s.
	HeartbeatInterval time.Duration
	// MaxFrameSize is the largest frame read; default DefaultMaxFrameSize.
	MaxFrameSize int
	// MaxMessageSize bounds an inflated message body. Default 16 MiB.
	MaxMessageSize int
	// CompressOver compresses (zlib) the body of a single send of at least this many bytes,
	// as RocketMQ's clients do. Default 4 KiB; negative: never.
	CompressOver int
	// ProducerGroup is the producer group sends name. Default "DEFAULT_PRODUCER".
	ProducerGroup string
	// Logger receives connection events. Default: discard.
	Logger *slog.Logger
	// Credentials, when they have an access key, sign every request for RocketMQ's plain
	// ACL (as its clients' AclClientRPCHook), against EdgeMQ with an ACL and Apache
	// RocketMQ alike. Default: requests go unsigned.
	Credentials Credentials
	// JSONHeaders sends request headers as JSON, the encoding RocketMQ's clients use unless
	// told otherwise. Default false: the binary ROCKETMQ encoding, which every RocketMQ
	// 4.x and 5.x broker and EdgeMQ read, and answer in, at less cost than JSON (Apache
	// RocketMQ's broker decodes a JSON send header with a JSON parser; RocketMQ's own
	// benchmark producer switches to the binary encoding for that reason).
	JSONHeaders bool
	// TLS, when not nil, makes every connection TLS from its first byte (RocketMQ's
	// clients' tls.enable). Without a ServerName, the host of the address dialed is
	// verified, unless InsecureSkipVerify. Default nil: plain TCP.
	TLS *tls.Config
}

// DefaultOptions are the defaults of Options.
var DefaultOptions = Options{
	RequestTimeout:    3 * time.Second,
	PullTimeoutMargin: 10 * time.Second,
	DefaultPullHold:   15 * time.Second,
	DialTimeout:       3 * time.Second,
	WriteTimeout:      10 * time.Second,
	ReconnectMin:      100 * time.Millisecond,
	ReconnectMax:      5 * time.Second,
	RouteRefresh:      30 * time.Second,
	HeartbeatInterval: 30 * time.Second,
	MaxFrameSize:      DefaultMaxFrameSize,
	MaxMessageSize:    16 << 20,
	CompressOver:      4 << 10,
	ProducerGroup:     "DEFAULT_PRODUCER",
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	for _, f := range []struct{ v, d *time.Duration }{
		{&r.RequestTimeout, &d.RequestTimeout}, {&r.PullTimeoutMargin, &d.PullTimeoutMargin},
		{&r.DefaultPullHold, &d.DefaultPullHold}, {&r.DialTimeout, &d.DialTimeout},
		{&r.WriteTimeout, &d.WriteTimeout}, {&r.ReconnectMin, &d.ReconnectMin}, {&r.ReconnectMax, &d.ReconnectMax},
		{&r.RouteRefresh, &d.RouteRefresh}, {&r.HeartbeatInterval, &d.HeartbeatInterval},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if r.ReconnectMax < r.ReconnectMin {
		r.ReconnectMax = r.ReconnectMin
	}
	if r.MaxFrameSize <= 0 {
		r.MaxFrameSize = d.MaxFrameSize
	}
	if r.MaxMessageSize <= 0 {
		r.MaxMessageSize = d.MaxMessageSize
	}
	if r.CompressOver == 0 {
		r.CompressOver = d.CompressOver
	}
	if r.ProducerGroup == "" {
		r.ProducerGroup = d.ProducerGroup
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r
}

// Client is a RocketMQ remoting client of a cluster: it asks name servers for topic routes
// and sends each request about a queue to the master of the queue's broker, over one
// connection per address that carries many requests at once. It works against EdgeMQ
// (whose one address is both name server and broker) and Apache RocketMQ 4.x and 5.x.
//
// It satisfies the broker interface of package consumer, so that a PushConsumer or a
// PullConsumer runs over it as over the in-process broker, and the producer package's;
// with PullAsync it is also the consumer's AsyncPuller, whose pulls a PushConsumer chains
// on the connection's reader.
// Errors that brokers answer wrap package mq's errors (see CodeError); a broker that
// cannot be reached is mq.ErrUnavailable; a request that outlives its ctx, or
// Options.RequestTimeout when ctx has no earlier deadline, returns ctx's error
// (context.DeadlineExceeded).
//
// Its goroutines: one reader and one writer per connection, which end when the connection
// does, and
// the maintenance loop, which refreshes routes every Options.RouteRefresh and repeats
// heartbeats every Options.HeartbeatInterval; Close stops them all and waits for them.
type Client struct {
	opts      Options
	lg        *slog.Logger
	namesrvs  []string
	nsNext    atomic.Uint32 // the name server tried first, round robin
	opaque    atomic.Int32
	wg        sync.WaitGroup
	ctx       context.Context // ends at Close: bounds the client's own requests
	cancel    context.CancelFunc
	closeOnce sync.Once
	filters   pullFilters // the TAG expressions pulled with, parsed

	mu        sync.Mutex                // guards the fields below
	closed    bool                      // Close was called
	conns     map[string]*clientConn    // live connections by address
	dialing   map[string]*dialState     // connection attempts and backoff by address
	connected map[string]bool           // addresses connected to before
	routes    map[string]*cachedRoute   // topic routes by topic
	brokers   map[string]string         // master address by broker name, from every route
	hbs       map[string]mq.Heartbeat   // the last heartbeat of each client id
	rr        map[string]*atomic.Uint32 // round-robin counters of sends, by topic
}

// cachedRoute is a topic's route and when it was fetched.
type cachedRoute struct {
	route   mq.TopicRoute
	fetched time.Time
	stale   bool          // a request to one of its brokers failed: fetch it again before use
	targets *writeTargets // of route, once a send needed them
}

// dialState is an address's connection attempt in progress, or its backoff after one
// failed.
type dialState struct {
	wait    chan struct{} // closed when the attempt in progress ends
	err     error         // of the last failed attempt
	retryAt time.Time     // no new attempt before this
	backoff time.Duration // the next backoff
}

// Dial returns a client of the cluster whose name servers are at addrs: "ip:port", or
// several separated by ';' (or ','). It connects to one of them, bounded by ctx, and
// fails with an error wrapping mq.ErrUnavailable if none can be reached.
func Dial(ctx context.Context, addrs string, opts *Options) (*Client, error) {
	var list []string
	for _, a := range strings.FieldsFunc(addrs, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%w: name server address %q: %v", mq.ErrInvalidArgument, a, err)
		}
		list = append(list, a)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: no name server address", mq.ErrInvalidArgument)
	}
	o := opts.withDefaults()
	c := &Client{opts: o, lg: o.Logger, namesrvs: list,
		conns: map[string]*clientConn{}, dialing: map[string]*dialState{}, connected: map[string]bool{}, routes: map[string]*cachedRoute{},
		brokers: map[string]string{}, hbs: map[string]mq.Heartbeat{}, rr: map[string]*atomic.Uint32{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.nsNext.Store(rand.Uint32())
	var errs []error
	for i := range list {
		addr := list[(int(c.nsNext.Load())+i)%len(list)]
		if _, err := c.conn(ctx, addr); err != nil {
			errs = append(errs, err)
			continue
		}
		c.wg.Add(1)
		go c.maintain()
		return c, nil
	}
	c.Close()
	return nil, fmt.Errorf("remoting: dial %s: %w", addrs, errors.Join(errs...))
}

// Close closes every connection, failing the requests in flight with ErrClientClosed's
// cause, stops the client's goroutines and waits for them. Later calls return
// ErrClientClosed.
func (c *Client) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.mu.Lock()
		c.closed = true
		conns := c.conns
		c.conns = map[string]*clientConn{}
		c.mu.Unlock()
		c.cancel()
		for _, cc := range conns {
			cc.close()
		}
		c.wg.Wait()
	})
	if !first {
		return ErrClientClosed
	}
	return nil
}

// conn returns the live connection to addr, connecting if there is none. After a failed
// attempt, new ones wait for the backoff: until then the last error is returned at once.
func (c *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClientClosed
		}
		if cc := c.conns[addr]; cc != nil && cc.alive() {
			c.mu.Unlock()
			return cc, nil
		}
		ds := c.dialing[addr]
		if ds != nil && ds.wait != nil { // another caller is connecting: wait for it
			wait := ds.wait
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if ds != nil && time.Now().Before(ds.retryAt) {
			err := ds.err
			c.mu.Unlock()
			return nil, err
		}
		if ds == nil {
			ds = &dialState{backoff: c.opts.ReconnectMin}
			c.dialing[addr] = ds
		}
		ds.wait = make(chan struct{})
		isBroker := c.isBrokerAddrLocked(addr)
		c.mu.Unlock()

		cc, err := dialConn(ctx, c, addr)

		c.mu.Lock()
		close(ds.wait)
		ds.wait = nil
		if err != nil {
			ds.err = fmt.Errorf("%w: connect to %s: %v", mq.ErrUnavailable, addr, err)
			if ctx.Err() == nil { // a caller giving up is no failure of the address
				ds.retryAt = time.Now().Add(ds.backoff)
				ds.backoff = min(2*ds.backoff, c.opts.ReconnectMax)
				c.markStaleLocked(addr)
			}
			c.mu.Unlock()
			c.lg.Debug("remoting client: connect failed", "addr", addr, "err", err)
			return nil, ds.err
		}
		if c.closed {
			c.mu.Unlock()
			cc.nc.Close() // its goroutines never ran
			return nil, ErrClientClosed
		}
		delete(c.dialing, addr)
		c.conns[addr] = cc
		again := c.connected[addr]
		c.connected[addr] = true
		c.wg.Add(2)
		go cc.readLoop()
		go cc.writeLoop()
		c.mu.Unlock()
		if isBroker && again {
			c.goHeartbeatAddr(addr) // a broker that restarted has forgotten us
		}
		return cc, nil
	}
}

// connLost forgets a dead connection.
func (c *Client) connLost(cc *clientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns[cc.addr] == cc {
		delete(c.conns, cc.addr)
	}
	c.markStaleLocked(cc.addr)
}

// markStaleLocked makes the routes naming addr be fetched again before their next use: a
// request to it failed on the network.
func (c *Client) markStaleLocked(addr string) {
	for _, r := range c.routes {
		for _, b := range r.route.Brokers {
			if b.Addrs[mq.MasterID] == addr {
				r.stale = true
			}
		}
	}
}

// isBrokerAddrLocked reports whether addr is the master address of a known broker.
func (c *Client) isBrokerAddrLocked(addr string) bool {
	for _, a := range c.brokers {
		if a == addr {
			return true
		}
	}
	return false
}

// timeoutCtx bounds ctx by d unless it ends sooner.
func timeoutCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// invoke sends req to addr and waits for its reply, bounded by ctx and timeout.
func (c *Client) invoke(ctx context.Context, addr string, req *Command, timeout time.Duration) (*Command, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
	}
	deadline := time.Now().Add(timeout)
	cc := c.liveConn(addr)
	if cc == nil {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		var err error
		cc, err = c.conn(dctx, addr)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	resp, err := cc.call(ctx, req, deadline)
	if err != nil {
		return nil, requestError(req.Code, addr, err)
	}
	return resp, nil
}

// requestError names the request (its code and address) in err when err is its timeout
// or its context's end; any other error (the connection's) already says where it came from.
func requestError(code int16, addr string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("remoting: request %d to %s: %w", code, addr, err)
	}
	return err
}

// liveConn returns the live connection to addr, or nil.
func (c *Client) liveConn(addr string) *clientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[addr]; !c.closed && cc != nil && cc.alive() {
		return cc
	}
	return nil
}

// invokeNamesrv sends req to the name servers in turn until one answers.
func (c *Client) invokeNamesrv(ctx context.Context, req *Command) (*Command, string, error) {
	if ctx == nil {
		return nil, "", fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
	}
	var errs []error
	start := int(c.nsNext.Load())
	for i := range c.namesrvs {
		addr := c.namesrvs[(start+i)%len(c.namesrvs)]
		r := *req
		resp, err := c.invoke(ctx, addr, &r, c.opts.RequestTimeout)
		if err == nil {
			c.nsNext.Store(uint32(start + i))
			return resp, addr, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", errors.Join(errs...)
}

// groupHeartbeats returns the heartbeats with a consumer of group, copied under c.mu, so
// that their callbacks run without it.
func (c *Client) groupHeartbeats(group string) []mq.Heartbeat {
	c.mu.Lock()
	defer c.mu.Unlock()
	var hbs []mq.Heartbeat
	for _, hb := range c.hbs {
		if slices.ContainsFunc(hb.Consumers, func(cd mq.ConsumerData) bool { return cd.Group == group }) {
			hbs = append(hbs, hb)
		}
	}
	return hbs
}

// notifyChange calls the OnChange of every heartbeat with a consumer of group.
func (c *Client) notifyChange(group string) {
	for _, hb := range c.groupHeartbeats(group) {
		if hb.OnChange != nil {
			hb.OnChange(group)
		}
	}
}

// notifyReset reads a RESET_CONSUMER_CLIENT_OFFSET and calls the OnReset of every
// heartbeat with a consumer of its group with the new offsets (each its own copy).
func (c *Client) notifyReset(cmd *Command) error {
	h, err := ParseResetOffsetHeader(cmd.Fields())
	if err != nil {
		return err
	}
	offs := map[mq.MessageQueue]int64{}
	if err := decodeOffsetTable(cmd.Body, offs); err != nil {
		return fmt.Errorf("reset offsets of group %q: %w", h.Group, err)
	}
	for _, hb := range c.groupHeartbeats(h.Group) {
		if hb.OnReset != nil {
			hb.OnReset(h.Group, h.Topic, maps.Clone(offs))
		}
	}
	return nil
}

// maintain refreshes routes and repeats heartbeats until Close.
func (c *Client) maintain() {
	defer c.wg.Done()
	routeT := time.NewTicker(c.opts.RouteRefresh)
	defer routeT.Stop()
	hbT := time.NewTicker(c.opts.HeartbeatInterval)
	defer hbT.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-routeT.C:
			c.refreshRoutes(c.ctx)
		case <-hbT.C:
			c.heartbeatAll(c.ctx)
		}
	}
}
