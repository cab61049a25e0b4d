package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// Broker is what a producer needs of a broker: *edge.Broker in-process and
// *remoting.Client over the network satisfy it. A selector's index points into the
// topic's route's write queues (mq.TopicRoute.WriteQueues); a nil selector lets the
// broker choose round robin.
type Broker interface {
	Route(ctx context.Context, topic string) (mq.TopicRoute, error)
	Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error)
	SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error
	SendBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector) ([]mq.SendResult, error)
}

// OnewaySender is a Broker that can send without any answer (the network client: RocketMQ's
// oneway request). SendOneway uses it when the Broker has it.
type OnewaySender interface {
	SendOneway(ctx context.Context, m *mq.Message, sel mq.QueueSelector) error
}

// uniqSender is a Broker that takes a message's unique id apart from the message, and
// bounds a send by a timeout without a context of its own (the network client: see
// remoting.Client.SendUniq): a sync send through it copies neither the message nor its
// properties, and its attempts make no context (see uniqAsyncSender for async sends).
type uniqSender interface {
	SendUniq(ctx context.Context, m *mq.Message, sel mq.QueueSelector, uniq string, timeout time.Duration) (mq.SendResult, error)
}

// ErrClosed is returned by sends after Close, and given to the done functions of async
// sends whose retry Close cut short.
var ErrClosed = errors.New("producer: closed")

// Options configures a Producer. A zero field takes its default.
type Options struct {
	// RetryTimes is how often a failed sync, async or batch send is tried again, on
	// another broker's queue when the topic has one (with a selector, the queue it
	// chooses). Default 2 (three attempts); negative: no retry. Errors that another
	// attempt cannot cure (a bad message or topic, a message too large, ctx ended) are not
	// retried. A retried send may store the message twice (the first attempt may have
	// been stored before its answer was lost): delivery is at least once.
	RetryTimes int
	// SendTimeout bounds each attempt whose ctx has no earlier deadline. Default 3 s.
	SendTimeout time.Duration
	// MaxMessageSize refuses, before sending, a body (a batch: the sum of its bodies) over
	// this many bytes with mq.ErrMessageTooLarge. Default 4 MiB, RocketMQ's.
	MaxMessageSize int
	// Logger receives retries. Default: discard.
	Logger *slog.Logger
}

// DefaultOptions are the defaults of Options.
var DefaultOptions = Options{RetryTimes: 2, SendTimeout: 3 * time.Second, MaxMessageSize: 4 << 20}

// Producer sends messages through a Broker. It is safe for concurrent use.
//
// Its goroutines: one per async send being retried, which ends with the retry; Close
// waits for them.
type Producer struct {
	b    Broker
	opts Options
	ids  *uniqIDs
	wg   sync.WaitGroup // async retries

	mu     sync.Mutex                // guards closed and rr
	closed bool                      // Close was called
	rr     map[string]*atomic.Uint32 // round-robin counters by topic
}

// New returns a producer over b.
func New(b Broker, opts *Options) (*Producer, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil broker", mq.ErrInvalidArgument)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.RetryTimes == 0 {
		o.RetryTimes = DefaultOptions.RetryTimes
	}
	o.RetryTimes = max(o.RetryTimes, 0)
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultOptions.SendTimeout
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultOptions.MaxMessageSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Producer{b: b, opts: o, ids: newUniqIDs(), rr: map[string]*atomic.Uint32{}}, nil
}

// Close makes later sends fail with ErrClosed and waits for async sends being retried.
func (p *Producer) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Producer) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// NewUniqID returns a new unique message id, as the producer gives each message.
func (p *Producer) NewUniqID() string { return p.ids.next() }

// prepare returns a copy of m that has a unique id, and checks its size.
func (p *Producer) prepare(m *mq.Message) (*mq.Message, error) {
	uniq, err := p.check(m)
	if err != nil {
		return nil, err
	}
	cp := *m
	if uniq != "" {
		cp.Properties = make(map[string]string, len(m.Properties)+1)
		maps.Copy(cp.Properties, m.Properties)
		cp.Properties[mq.PropertyUniqKey] = uniq
	}
	return &cp, nil
}

// check checks m's size and returns the unique id to give it: "" when it has one.
func (p *Producer) check(m *mq.Message) (uniq string, err error) {
	if m == nil {
		return "", fmt.Errorf("%w: nil message", mq.ErrInvalidArgument)
	}
	if len(m.Body) > p.opts.MaxMessageSize {
		return "", fmt.Errorf("%w: body of %d bytes, at most %d", mq.ErrMessageTooLarge, len(m.Body), p.opts.MaxMessageSize)
	}
	if m.Properties[mq.PropertyUniqKey] == "" {
		uniq = p.ids.next()
	}
	return uniq, nil
}

// writeQueueAppender is a Broker that lists a topic's write queues (as Route followed by
// mq.TopicRoute.WriteQueues) into a caller's buffer without copying its whole route, as
// the remoting client does.
type writeQueueAppender interface {
	AppendWriteQueues(ctx context.Context, dst []mq.MessageQueue, topic string) ([]mq.MessageQueue, error)
}

// queueBufs keeps the buffers choose lists write queues into.
var queueBufs = sync.Pool{New: func() any { return new([]mq.MessageQueue) }}

// choice is the queue of one attempt: a selector for the broker, and the broker it
// points at ("" when unknown).
type choice struct {
	sel    mq.QueueSelector
	broker string
}

// choose picks the queue of an attempt: sel when given; else the next queue round robin
// of the topic's write queues that is not on the broker avoid, if there is one.
func (p *Producer) choose(ctx context.Context, topic string, sel mq.QueueSelector, avoid string) (choice, error) {
	if sel != nil {
		return choice{sel: sel}, nil
	}
	var qs []mq.MessageQueue
	var err error
	if wq, ok := p.b.(writeQueueAppender); ok {
		bp := queueBufs.Get().(*[]mq.MessageQueue)
		qs, err = wq.AppendWriteQueues(ctx, (*bp)[:0], topic)
		defer func() {
			clear(qs)
			*bp = qs[:0]
			queueBufs.Put(bp)
		}()
	} else {
		var r mq.TopicRoute
		if r, err = p.b.Route(ctx, topic); err == nil {
			qs = r.WriteQueues()
		}
	}
	if errors.Is(err, mq.ErrTopicNotExist) {
		return choice{}, nil // the broker may create it on this send: let it choose
	}
	if err != nil {
		return choice{}, err
	}
	if len(qs) == 0 {
		return choice{}, nil // the broker says why
	}
	p.mu.Lock()
	n := p.rr[topic]
	if n == nil {
		n = new(atomic.Uint32)
		p.rr[topic] = n
	}
	p.mu.Unlock()
	start := int(n.Add(1) - 1)
	idx := start % len(qs)
	for j := range qs {
		if i := (start + j) % len(qs); qs[i].BrokerName != avoid {
			idx = i
			break
		}
	}
	return choice{sel: mq.QueueIndex(idx), broker: qs[idx].BrokerName}, nil
}

// retryable reports whether another attempt may succeed where err failed.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, final := range []error{mq.ErrInvalidArgument, mq.ErrInvalidTopic, mq.ErrMessageTooLarge, ErrClosed} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}

// attempt bounds ctx by the send timeout.
func (p *Producer) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= p.opts.SendTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.opts.SendTimeout)
}

// Send sends m and waits for the broker's answer: to the queue sel chooses among the
// topic's write queues (mq.QueueIndex, mq.ShardingKey for ordered messages), or round
// robin when sel is nil; a failed attempt is retried (Options.RetryTimes), round robin on
// another broker's queue when there is one. m is not changed: the message sent is a copy
// with a unique id (the result's UniqID) unless m has one.
func (p *Producer) Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error) {
	if p.isClosed() {
		return mq.SendResult{}, ErrClosed
	}
	if us, ok := p.b.(uniqSender); ok {
		uniq, err := p.check(m)
		if err != nil {
			return mq.SendResult{}, err
		}
		// m is read by each attempt while Send runs; it bounds each attempt itself.
		return withRetries(ctx, p, m.Topic, sel, false, func(ctx context.Context, sel mq.QueueSelector) (mq.SendResult, error) {
			return us.SendUniq(ctx, m, sel, uniq, p.opts.SendTimeout)
		})
	}
	msg, err := p.prepare(m)
	if err != nil {
		return mq.SendResult{}, err
	}
	return withRetries(ctx, p, msg.Topic, sel, true, func(ctx context.Context, sel mq.QueueSelector) (mq.SendResult, error) {
		return p.b.Send(ctx, msg, sel)
	})
}

// withRetries makes a synchronous send with send, on the queue sel chooses (round robin
// when nil) for each attempt, and tries again (Options.RetryTimes) after a retryable
// failure, on another broker's queue when the topic has one. Each attempt is bounded by
// Options.SendTimeout: by a context of its own when bound is set, else by send itself.
func withRetries[T any](ctx context.Context, p *Producer, topic string, sel mq.QueueSelector, bound bool,
	send func(context.Context, mq.QueueSelector) (T, error)) (T, error) {
	var zero T
	var last error
	avoid := ""
	for i := 0; i <= p.opts.RetryTimes; i++ {
		ch, err := p.choose(ctx, topic, sel, avoid)
		if err == nil {
			var res T
			if bound {
				actx, cancel := p.attempt(ctx)
				res, err = send(actx, ch.sel)
				cancel()
			} else {
				res, err = send(ctx, ch.sel)
			}
			if err == nil {
				return res, nil
			}
			avoid = ch.broker
		}
		last = err
		if !retryable(ctx, err) {
			break
		}
		p.opts.Logger.Debug("producer: send failed, retrying", "topic", topic, "attempt", i+1, "err", err)
	}
	return zero, last
}

// SendAsync sends m as Send does without waiting for the answer: done is called once with
// the result or the last error, from a goroutine of the broker, of its connection or of
// the producer's (a retry); it must not block. An error found before the first attempt is
// sent is returned, and done is not called. ctx bounds the first attempt's routing and
// write; retries are bounded by Options.SendTimeout each.
func (p *Producer) SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendAsync needs a done function", mq.ErrInvalidArgument)
	}
	if p.isClosed() {
		return ErrClosed
	}
	a := getAsyncSend()
	a.p, a.ctx, a.sel, a.attempt, a.done = p, ctx, sel, 1, done
	if us, ok := p.b.(uniqAsyncSender); ok {
		uniq, err := p.check(m)
		if err != nil {
			a.recycle()
			return err
		}
		// A retry reads the message after SendAsync returned, when the caller may change
		// m and its properties: it sends a copy, the unique id apart.
		a.own = *m
		if len(m.Properties) > 0 {
			a.own.Properties = maps.Clone(m.Properties)
		}
		a.msg, a.us, a.uniq = &a.own, us, uniq
	} else {
		msg, err := p.prepare(m)
		if err != nil {
			a.recycle()
			return err
		}
		a.msg = msg
	}
	ch, err := p.choose(ctx, a.msg.Topic, sel, "")
	if err != nil {
		a.recycle()
		return err
	}
	a.broker = ch.broker
	if err := a.send(ctx, ch.sel); err != nil {
		a.recycle() // done is not called
		return err
	}
	return nil
}

// uniqAsyncSender is uniqSender's async side (remoting.Client.SendAsyncUniq): an async send
// through it copies the message (for retries) but not to add its unique id.
type uniqAsyncSender interface {
	SendAsyncUniq(ctx context.Context, m *mq.Message, sel mq.QueueSelector, uniq string, done func(mq.SendResult, error)) error
}

// asyncSend is an async send and its attempts, one at a time. They are pooled, each with
// its finished method value made once: an async send's own state allocates nothing. One
// goes back to the pool once its done function was called, or its send failed before any
// was (then done never is): the brokers read a message no more once they answered it.
type asyncSend struct {
	p       *Producer
	ctx     context.Context // the caller's: retries' parent, without its cancellation
	msg     *mq.Message     // what each attempt sends
	own     mq.Message      // msg when the broker takes the unique id apart
	us      uniqAsyncSender // nil: attempts go through the Broker's SendAsync
	uniq    string
	sel     mq.QueueSelector // the caller's
	broker  string           // the broker of the attempt in flight
	attempt int
	done    func(mq.SendResult, error)
	fn      func(mq.SendResult, error) // finished, bound once
}

var asyncSends sync.Pool

// getAsyncSend returns a cleared asyncSend, its finished method value bound.
func getAsyncSend() *asyncSend {
	if a, ok := asyncSends.Get().(*asyncSend); ok {
		return a
	}
	a := new(asyncSend)
	a.fn = a.finished
	return a
}

// recycle clears a and puts it back in the pool.
func (a *asyncSend) recycle() {
	*a = asyncSend{fn: a.fn}
	asyncSends.Put(a)
}

// send makes an attempt on the queue sel picks.
func (a *asyncSend) send(ctx context.Context, sel mq.QueueSelector) error {
	if a.us != nil {
		return a.us.SendAsyncUniq(ctx, a.msg, sel, a.uniq, a.fn)
	}
	return a.p.b.SendAsync(ctx, a.msg, sel, a.fn)
}

// finished is an attempt's done function: on a retryable error with attempts left it
// retries in a goroutine of the producer, else it calls done.
func (a *asyncSend) finished(res mq.SendResult, err error) {
	p := a.p
	// The caller's ctx ending does not stop retries: only err decides.
	if err == nil || a.attempt > p.opts.RetryTimes || !retryable(context.Background(), err) {
		a.end(res, err)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		a.end(res, errors.Join(err, ErrClosed))
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		p.opts.Logger.Debug("producer: async send failed, retrying", "topic", a.msg.Topic, "attempt", a.attempt, "err", err)
		actx, cancel := p.attempt(context.WithoutCancel(a.ctx))
		defer cancel()
		ch, cerr := p.choose(actx, a.msg.Topic, a.sel, a.broker)
		if cerr == nil {
			a.attempt++
			a.broker = ch.broker
			cerr = a.send(actx, ch.sel)
		}
		if cerr != nil {
			a.end(mq.SendResult{}, cerr)
		}
	}()
}

// end recycles a and calls its done function: a send is over.
func (a *asyncSend) end(res mq.SendResult, err error) {
	done := a.done
	a.recycle()
	done(res, err)
}

// SendOneway sends m without waiting for any answer (RocketMQ's oneway send): over the
// network nothing comes back, so neither the message's fate nor an error past the write is
// known. It is not retried.
func (p *Producer) SendOneway(ctx context.Context, m *mq.Message, sel mq.QueueSelector) error {
	if p.isClosed() {
		return ErrClosed
	}
	msg, err := p.prepare(m)
	if err != nil {
		return err
	}
	ch, err := p.choose(ctx, msg.Topic, sel, "")
	if err != nil {
		return err
	}
	if o, ok := p.b.(OnewaySender); ok {
		return o.SendOneway(ctx, msg, ch.sel)
	}
	return p.b.SendAsync(ctx, msg, ch.sel, func(mq.SendResult, error) {})
}

// SendBatch sends msgs, all of one topic, to one queue on consecutive offsets, in one
// request: the queue sel chooses for the first message, or round robin. Retries as Send.
// Each message gets its own unique id; msgs are not changed.
func (p *Producer) SendBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector) ([]mq.SendResult, error) {
	if p.isClosed() {
		return nil, ErrClosed
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	batch := make([]*mq.Message, len(msgs))
	total := 0
	for i, m := range msgs {
		cp, err := p.prepare(m)
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		total += len(cp.Body)
		batch[i] = cp
	}
	if total > p.opts.MaxMessageSize {
		return nil, fmt.Errorf("%w: batch of %d body bytes, at most %d", mq.ErrMessageTooLarge, total, p.opts.MaxMessageSize)
	}
	return withRetries(ctx, p, batch[0].Topic, sel, true, func(ctx context.Context, sel mq.QueueSelector) ([]mq.SendResult, error) {
		return p.b.SendBatch(ctx, batch, sel)
	})
}
