package remoting

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// autoCreateQueues caps the queues of a topic created by its first send, as RocketMQ's
// clients do (defaultTopicQueueNums).
const autoCreateQueues = 4

// sendBodies pools batch request bodies; one over maxPooledBody is left to the GC.
var sendBodies = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 1 << 20

// sendPlan is where a send goes: the queue, its broker's address, and whether the topic
// has no route yet and is created by the send from the template topic (TBW102).
type sendPlan struct {
	queue mq.MessageQueue
	addr  string
	auto  bool
}

// plan chooses the queue of a send of m: sel's index into the topic's write queues
// (mq.TopicRoute.WriteQueues), or round robin when sel is nil. A topic without a route
// goes to a queue of the template topic's route, capped at 4 queues per broker, which a
// broker that creates topics on first send accepts. A route not in the cache is looked up
// by deadline, when it is not zero, as well as by ctx.
func (c *Client) plan(ctx context.Context, m *mq.Message, sel mq.QueueSelector, deadline time.Time) (sendPlan, error) {
	if ctx == nil {
		return sendPlan{}, fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
	}
	if m == nil {
		return sendPlan{}, fmt.Errorf("%w: nil message", mq.ErrInvalidArgument)
	}
	if err := mq.ValidateSubscribedTopic(m.Topic); err != nil {
		return sendPlan{}, err
	}
	wt := c.cachedWriteTargets(m.Topic)
	var err error
	if wt == nil {
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		wt, err = c.writeTargets(ctx, m.Topic)
	}
	auto := false
	if errors.Is(err, mq.ErrTopicNotExist) && !mq.IsSystemTopic(m.Topic) {
		tr, terr := c.Route(ctx, mq.DefaultTopic)
		if terr != nil {
			return sendPlan{}, err // the topic's own error says more
		}
		for i := range tr.Queues {
			tr.Queues[i].WriteQueues = min(tr.Queues[i].WriteQueues, autoCreateQueues)
			tr.Queues[i].ReadQueues = min(tr.Queues[i].ReadQueues, autoCreateQueues)
		}
		wt, err, auto = newWriteTargets(&tr), nil, true
		c.mu.Lock()
		c.learnBrokersLocked(tr.Brokers)
		c.mu.Unlock()
	}
	if err != nil {
		return sendPlan{}, err
	}
	qs := wt.queues
	if len(qs) == 0 {
		return sendPlan{}, fmt.Errorf("%w: topic %q has no writable queue", mq.ErrNoPermission, m.Topic)
	}
	var i int
	if sel == nil {
		i = int(c.roundRobin(m.Topic).Add(1)-1) % len(qs)
	} else {
		i = mq.SelectQueue(sel, len(qs), m)
		if i < 0 || i >= len(qs) {
			return sendPlan{}, fmt.Errorf("%w: selector chose queue %d of %d", mq.ErrInvalidQueue, i, len(qs))
		}
	}
	q := qs[i]
	q.Topic = m.Topic
	return sendPlan{queue: q, addr: wt.addrs[i], auto: auto}, nil
}

func (c *Client) roundRobin(topic string) *atomic.Uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.rr[topic]
	if n == nil {
		n = new(atomic.Uint32)
		c.rr[topic] = n
	}
	return n
}

// sendReq is a send request with its header, made (or taken from sendReqs) together.
type sendReq struct {
	h   SendHeader
	cmd Command
}

// sendReqs keeps the requests of sync and oneway sends between sends: a request is written
// into its connection's buffer before the call returns, and nothing keeps it after.
var sendReqs = sync.Pool{New: func() any { return new(sendReq) }}

// putSendReq clears r (it must not keep a message's body) and keeps it for another send.
func putSendReq(r *sendReq) {
	*r = sendReq{}
	sendReqs.Put(r)
}

// buildSend builds the SEND_MESSAGE_V2 request of m to p into r; uniq, when not empty, is
// the message's UNIQ_KEY property (see uniqOf).
func (c *Client) buildSend(m *mq.Message, uniq string, p sendPlan, r *sendReq) {
	r.h = SendHeader{ProducerGroup: c.opts.ProducerGroup, Topic: m.Topic, DefaultTopic: mq.DefaultTopic,
		DefaultTopicQueueNums: autoCreateQueues, QueueID: p.queue.QueueID, BornTimestamp: time.Now().UnixMilli(),
		Flag: m.Flag, Properties: formatProperties(m, uniq), MaxReconsumeTimes: -1, BrokerName: p.queue.BrokerName}
	h := &r.h
	if mq.IsRetryTopic(m.Topic) { // a consumer's own retry after a failed send-back
		if n, err := strconv.ParseInt(m.Properties[mq.PropertyReconsumeTime], 10, 32); err == nil && n >= 0 {
			h.ReconsumeTimes = int32(n)
		}
		if n, err := strconv.ParseInt(m.Properties[mq.PropertyMaxReconsumeTimes], 10, 32); err == nil && n >= 0 {
			h.MaxReconsumeTimes = int32(n)
		}
	}
	body := m.Body
	if c.opts.CompressOver > 0 && len(body) >= c.opts.CompressOver {
		var buf bytes.Buffer
		zw := zlibWriters.Get().(*zlib.Writer)
		zw.Reset(&buf)
		zw.Write(body) // a bytes.Buffer takes every write
		zw.Close()
		zlibWriters.Put(zw)
		if buf.Len() < len(body) {
			body = buf.Bytes()
			h.SysFlag |= SysFlagCompressed | compressionZlib<<sysFlagCompressionShift
		}
	}
	c.sendV2Into(SendMessageV2, h, body, &r.cmd)
}

// sendV2Request returns a send request of code with h's one-letter header (see sendV2Into).
func (c *Client) sendV2Request(code int16, h *SendHeader, body []byte) *Command {
	r := new(Command)
	c.sendV2Into(code, h, body, r)
	return r
}

// sendV2Into makes r a send request of code with h's one-letter header: written straight
// into the frame, or, when requests are signed (the signature covers the Ext map), as a map.
func (c *Client) sendV2Into(code int16, h *SendHeader, body []byte, r *Command) {
	if !c.opts.Credentials.IsZero() {
		*r = Command{Code: code, Language: LanguageGo, Version: Version, Ext: h.ExtV2(), Body: body, Serialize: JSON}
		return
	}
	*r = Command{Code: code, Language: LanguageGo, Version: Version, Header: (*sendHeaderV2)(h), Body: body, Serialize: JSON}
}

// zlibWriters keeps zlib writers between compressed sends: a new one allocates and clears
// about a megabyte of tables, far more than compressing a body costs.
var zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}

// sendResults reads a send reply into out: one result per message sent (a batch's, in
// order), the i-th with uniq(i) as its UniqID. FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and
// SLAVE_NOT_AVAILABLE mean the message is stored but not yet as durable as the broker is
// configured to make it: they count as success.
func (c *Client) sendResults(p sendPlan, req *Command, resp *Command, out []mq.SendResult, uniq func(i int) string) error {
	switch resp.Code {
	case Success:
	case FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable:
		c.lg.Warn("remoting client: message stored, not flushed", "addr", p.addr, "code", resp.Code, "remark", resp.Remark)
	default:
		return c.answerError(p.addr, req.Code, resp, p.queue.Topic)
	}
	h, err := resp.ParseSendResponseHeader()
	if err != nil {
		return fmt.Errorf("remoting: send reply from %s: %w", p.addr, err)
	}
	if p.auto {
		c.mu.Lock()
		delete(c.routes, p.queue.Topic) // created: its own route is fetched next
		c.mu.Unlock()
	}
	ids := h.MsgID // the messages' offset message ids, comma separated
	for i := range out {
		r := mq.SendResult{Queue: p.queue, QueueOffset: h.QueueOffset + int64(i), UniqID: uniq(i)}
		r.Queue.QueueID = h.QueueID
		if ids != "" {
			var id string
			id, ids, _ = strings.Cut(ids, ",")
			if host, pos, err := mq.ParseOffsetMsgID(strings.TrimSpace(id)); err == nil {
				r.StoreHost, r.CommitLogOffset = host, pos
			}
		}
		out[i] = r
	}
	return nil
}

// sendResult reads the reply to a send of one message, whose unique id is uniq.
func (c *Client) sendResult(p sendPlan, req *Command, resp *Command, uniq string) (mq.SendResult, error) {
	var out [1]mq.SendResult
	err := c.sendResults(p, req, resp, out[:], func(int) string { return uniq })
	return out[0], err
}

// uniqOf returns the unique id a send of m carries: m's UNIQ_KEY property, else uniq.
func uniqOf(m *mq.Message, uniq string) string {
	if u := m.Properties[mq.PropertyUniqKey]; u != "" {
		return u
	}
	return uniq
}

// Send sends m (SEND_MESSAGE_V2) to a queue of its topic's route chosen by sel (an index
// into the route's write queues), or round robin when sel is nil, and waits for the
// broker's answer. A topic without a route is sent as RocketMQ's clients do, for the
// broker to create it from the template topic. Bodies of at least Options.CompressOver
// bytes travel compressed. m is not changed. It makes one attempt: retrying on another
// queue is the producer's business.
func (c *Client) Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error) {
	return c.SendUniq(ctx, m, sel, "", 0)
}

// SendUniq is Send for a producer that gives every message a unique id and bounds each
// attempt: unless m has a UNIQ_KEY property, uniq (when not empty) travels as that property
// and is the result's UniqID, without a copy of m or of its properties; and timeout, when
// positive, bounds the send (its route lookup and connection included) as a deadline of
// ctx would, without a context of its own.
func (c *Client) SendUniq(ctx context.Context, m *mq.Message, sel mq.QueueSelector, uniq string, timeout time.Duration) (mq.SendResult, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	p, err := c.plan(ctx, m, sel, deadline)
	if err != nil {
		return mq.SendResult{}, err
	}
	uniq = uniqOf(m, uniq)
	r := sendReqs.Get().(*sendReq)
	defer putSendReq(r)
	c.buildSend(m, uniq, p, r)
	reqTimeout := c.opts.RequestTimeout
	if timeout > 0 {
		reqTimeout = min(reqTimeout, time.Until(deadline))
	}
	resp, err := c.invoke(ctx, p.addr, &r.cmd, reqTimeout)
	if err != nil {
		return mq.SendResult{}, err
	}
	return c.sendResult(p, &r.cmd, resp, uniq)
}

// SendAsync sends m as Send does, returning once the request is queued on its connection
// (which writes it together with the others queued; m may change after): done gets the
// result when the broker answers, or the error (the connection's failure, or
// context.DeadlineExceeded after Options.RequestTimeout, or ctx's deadline when sooner).
// Errors before the request is queued are returned, and done is not called. done runs on
// a connection's goroutine: it must not block. ctx bounds the routing and the connection;
// ending it later does not cancel the wait for the answer.
func (c *Client) SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error {
	return c.SendAsyncUniq(ctx, m, sel, "", done)
}

// SendAsyncUniq is SendAsync for a producer that gives every message a unique id: unless
// m has a UNIQ_KEY property, uniq (when not empty) travels as that property and is the
// result's UniqID, without a copy of m or of its properties.
func (c *Client) SendAsyncUniq(ctx context.Context, m *mq.Message, sel mq.QueueSelector, uniq string, done func(mq.SendResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: SendAsync needs a done function", mq.ErrInvalidArgument)
	}
	p, err := c.plan(ctx, m, sel, time.Time{})
	if err != nil {
		return err
	}
	timeout := c.opts.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	cc, err := c.conn(ctx, p.addr)
	if err != nil {
		return err
	}
	a := getAsyncSend()
	a.cl, a.plan, a.uniq, a.user = c, p, uniqOf(m, uniq), done
	c.buildSend(m, a.uniq, p, &a.req)
	return cc.sendAsync(ctx, a, timeout)
}

// asyncSend is a send of SendAsync in flight: its request, its pending call and what reads
// its reply. It is reused (asyncSends) once nothing can reach it any more: its request
// written, its reply or failure handed out, and its timer's function not started
// (callRefs).
type asyncSend struct {
	asyncCall // its finisher is finished
	cl        *Client
	plan      sendPlan
	uniq      string
	req       sendReq
	user      func(mq.SendResult, error)
}

var asyncSends sync.Pool

// getAsyncSend returns an asyncSend ready for a call: from asyncSends, or new with its
// (stopped) timer.
func getAsyncSend() *asyncSend {
	if a, ok := asyncSends.Get().(*asyncSend); ok {
		return a
	}
	a := &asyncSend{}
	a.init(a.finished)
	return a
}

// recycle clears a's call and keeps a for another.
func (a *asyncSend) recycle() {
	a.cl, a.conn, a.user = nil, nil, nil
	a.plan, a.uniq = sendPlan{}, ""
	a.req = sendReq{}
	asyncSends.Put(a)
}

// finished hands the send's result to its caller; whoever removed the call from its
// connection's pending table calls it, once.
func (a *asyncSend) finished(resp *Command, err error) {
	a.refs.reusable = a.timer.Stop()
	var res mq.SendResult
	if err != nil {
		err = requestError(a.req.cmd.Code, a.plan.addr, err)
	} else if res, err = a.cl.sendResult(a.plan, &a.req.cmd, resp, a.uniq); err == nil && resp.Code == Success {
		resp.keepNothing() // the result holds no string of the reply
	}
	a.user(res, err)
	if a.refs.release() {
		a.recycle()
	}
}

// SendOneway sends m as Send does, marked oneway: the broker stores it and answers
// nothing, so neither success nor failure is known. It returns once the request is
// queued on its connection; closing the client writes what is queued first.
func (c *Client) SendOneway(ctx context.Context, m *mq.Message, sel mq.QueueSelector) error {
	p, err := c.plan(ctx, m, sel, time.Time{})
	if err != nil {
		return err
	}
	ctx, cancel := timeoutCtx(ctx, c.opts.RequestTimeout)
	defer cancel()
	cc, err := c.conn(ctx, p.addr)
	if err != nil {
		return err
	}
	r := sendReqs.Get().(*sendReq)
	defer putSendReq(r)
	c.buildSend(m, "", p, r)
	return cc.oneway(ctx, &r.cmd)
}

// SendBatch sends msgs, all of one topic, in one request (SEND_BATCH_MESSAGE) to one
// queue, chosen by sel applied to the first message (round robin when nil); the broker
// stores them on consecutive offsets. An empty batch sends nothing. Batches travel
// uncompressed, as RocketMQ's clients send them.
func (c *Client) SendBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector) ([]mq.SendResult, error) {
	return c.sendBatch(ctx, msgs, sel, SendBatchMessage, AppendBatch)
}

// SendBatchWith sends msgs as SendBatch does, in a request of code whose body encode makes
// from them: for SEND_BATCH_ZSTD (SendBatchZstd, EdgeMQ's own request code), zbatch.Append,
// the batch compressed whole with zstd. Only an EdgeMQ broker takes that: any other broker,
// or an EdgeMQ with it turned off, refuses it with REQUEST_CODE_NOT_SUPPORTED, an error
// wrapping errors.ErrUnsupported, and stores nothing; send the batch with SendBatch then.
// The broker answers only the first message's offset message id: the results after the
// first have their queue offsets and store host, but no commit-log offset. encode appends
// the body to dst and returns it; the client reuses the returned slice's memory for later
// batches once the call returns, so encode must not keep it.
func (c *Client) SendBatchWith(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector, code int16,
	encode func(dst []byte, msgs []*mq.Message) ([]byte, error)) ([]mq.SendResult, error) {
	if encode == nil {
		return nil, fmt.Errorf("%w: SendBatchWith without an encoder", mq.ErrInvalidArgument)
	}
	return c.sendBatch(ctx, msgs, sel, code, encode)
}

// sendBatch sends msgs in one request of code whose body encode makes.
func (c *Client) sendBatch(ctx context.Context, msgs []*mq.Message, sel mq.QueueSelector, code int16,
	encode func(dst []byte, msgs []*mq.Message) ([]byte, error)) ([]mq.SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i, m := range msgs {
		switch {
		case m == nil:
			return nil, fmt.Errorf("%w: message %d of the batch is nil", mq.ErrInvalidArgument, i)
		case m.Topic != msgs[0].Topic:
			return nil, fmt.Errorf("%w: a batch holds one topic, got %q and %q", mq.ErrInvalidArgument, msgs[0].Topic, m.Topic)
		}
	}
	p, err := c.plan(ctx, msgs[0], sel, time.Time{})
	if err != nil {
		return nil, err
	}
	// The body is written to the connection's buffer before invoke returns: its memory
	// serves the next batch.
	bp := sendBodies.Get().(*[]byte)
	body, err := encode((*bp)[:0], msgs)
	defer func() {
		if cap(body) <= maxPooledBody {
			*bp = body[:0]
		}
		sendBodies.Put(bp)
	}()
	if err != nil {
		return nil, err
	}
	h := SendHeader{ProducerGroup: c.opts.ProducerGroup, Topic: msgs[0].Topic, DefaultTopic: mq.DefaultTopic,
		DefaultTopicQueueNums: autoCreateQueues, QueueID: p.queue.QueueID, BornTimestamp: time.Now().UnixMilli(),
		MaxReconsumeTimes: -1, Batch: true, BrokerName: p.queue.BrokerName}
	req := c.sendV2Request(code, &h, body)
	resp, err := c.invoke(ctx, p.addr, req, c.opts.RequestTimeout)
	if err != nil {
		return nil, err
	}
	out := make([]mq.SendResult, len(msgs))
	if err := c.sendResults(p, req, resp, out, func(i int) string { return msgs[i].Properties[mq.PropertyUniqKey] }); err != nil {
		return nil, err
	}
	return out, nil
}
