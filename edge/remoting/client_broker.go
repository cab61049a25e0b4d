package remoting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// maxPullBatch is the most messages one pull may ask for, as the in-process broker.
const maxPullBatch = 1024

// minPullHold is the shortest hold a suspended pull asks for: a ctx ending sooner makes
// the pull not suspend at all.
const minPullHold = 500 * time.Millisecond

// Pull reads a queue from an offset at the master of its broker (PULL_MESSAGE). With
// req.Suspend the broker holds the request while nothing is there, up to req.MaxWait
// (Options.DefaultPullHold when 0, shortened to end before ctx does); the request waits
// for the reply that long plus Options.PullTimeoutMargin. req.Filter, when set, travels as
// the pull's subscription and is applied again to the messages received (a broker
// filters by tag hash); empty, the broker filters by the group's heartbeat subscription.
// Compressed bodies are inflated; every message gets the queue's broker name. The
// messages are the caller's to keep: their bodies share the reply's buffer, which the
// client neither reuses nor changes.
func (c *Client) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	var pl pullCall
	if err := c.preparePull(ctx, req, &pl); err != nil {
		return mq.PullResult{}, err
	}
	addr, err := c.brokerAddr(ctx, pl.req.Queue)
	if err != nil {
		return mq.PullResult{}, err
	}
	pl.name(c, addr, nil)
	resp, err := c.invoke(ctx, addr, pl.cmd, pl.timeout)
	if err != nil {
		return mq.PullResult{}, err
	}
	return c.pullResult(&pl, resp)
}

// PullAsync is Pull with its result handed to done, and it never waits for the network:
// when the queue's broker address is not known yet or its connection is not open, it
// returns mq.ErrWouldBlock (Pull looks the route up and connects). It returns once the
// request is queued; an error returned means done is never called, and nil that done is
// called exactly once with a result that has no More: with the reply, the connection's
// failure, the request's timeout (the hold plus Options.PullTimeoutMargin), or ctx's end.
// done runs on the connection's reader goroutine (or a timer's, or ctx's AfterFunc) and
// must not block; requests it sends on the same connection are written together once the
// reader has handled the replies it has read, in one write and with no hand-off to another
// goroutine.
//
// A suspended pull with req.PushMsgs > 0 asks the broker to stream (an EdgeMQ broker
// does; Apache RocketMQ's answers once): done then gets each answer but the last with
// More set, one call at a time, before the last; each answer restarts the timeout.
func (c *Client) PullAsync(ctx context.Context, req mq.PullRequest, done func(mq.PullResult, error)) error {
	if done == nil {
		return fmt.Errorf("%w: PullAsync without a callback", mq.ErrInvalidArgument)
	}
	a := getAsyncPull()
	if err := c.preparePull(ctx, req, &a.pl); err != nil {
		a.recycle()
		return err
	}
	addr, ok := c.knownBroker(a.pl.req.Queue.BrokerName)
	if !ok {
		a.recycle()
		return fmt.Errorf("%w: no address known yet for broker %q", mq.ErrWouldBlock, req.Queue.BrokerName)
	}
	cc := c.liveConn(addr)
	if cc == nil {
		a.recycle()
		return fmt.Errorf("%w: no open connection to %s", mq.ErrWouldBlock, addr)
	}
	if req.PushMsgs > 0 && a.pl.h.SysFlag&PullSuspend != 0 {
		a.pl.h.PushMsgs = int32(min(req.PushMsgs, math.MaxInt32))
		a.pl.h.PushBytes = max(req.PushBytes, 0)
		a.more = a.streamedFn
	}
	a.pl.name(c, addr, &a.cmd)
	a.cl, a.user = c, done
	return cc.pullAsync(ctx, a)
}

// asyncPull is a pull of PullAsync in flight: its request, its pending call and what
// reads its reply. It is reused (asyncPulls) once nothing can reach it any more: its
// request written, its reply or failure handed out, and neither its timer's function nor
// its ctx's AfterFunc started (callRefs).
type asyncPull struct {
	asyncCall  // its finisher is finished
	cl         *Client
	pl         pullCall
	cmd        Command
	user       func(mq.PullResult, error)
	ctx        context.Context // the call's, when it can end
	stopCtx    func() bool     // ends the ctx's AfterFunc (ctxEnded); nil when ctx never ends
	ctxEnded   func()          // a.fail with ctx's error, bound once
	streamedFn func(*Command)  // a.streamed, bound once
}

var asyncPulls sync.Pool

// getAsyncPull returns an asyncPull ready for a call: from asyncPulls, or new with its
// (stopped) timer.
func getAsyncPull() *asyncPull {
	if a, ok := asyncPulls.Get().(*asyncPull); ok {
		return a
	}
	a := &asyncPull{}
	a.init(a.finished)
	a.ctxEnded = func() { a.fail(a.ctx.Err()) }
	a.streamedFn = a.streamed
	a.hold = true
	return a
}

// recycle clears a's call and keeps a for another.
func (a *asyncPull) recycle() {
	a.cl, a.conn, a.user, a.ctx, a.stopCtx, a.more = nil, nil, nil, nil, nil, nil
	a.pl = pullCall{}
	a.cmd = Command{}
	asyncPulls.Put(a)
}

// streamed hands an answer of a streamed pull that is not its last (More) to its caller,
// on the reader goroutine, which took the call out of its connection's pending table
// meanwhile (a timeout or ctx's end then finds nothing to fail: only the reader hands out
// the call's results), and puts it back for the next answer. A reply that does not read
// ends the call with its error.
func (a *asyncPull) streamed(resp *Command) {
	res, err := a.cl.pullResult(&a.pl, resp)
	if err != nil {
		a.finishedWith(mq.PullResult{}, err)
		return
	}
	res.More = true
	a.user(res, nil)
	a.timer.Reset(a.pl.timeout)
	if err := a.conn.add(a.opaque, &a.pendingCall); err != nil {
		a.finishedWith(mq.PullResult{}, requestError(PullMessage, a.pl.addr, err))
		return
	}
	if a.ctx != nil && a.ctx.Err() != nil { // it ended meanwhile, and its AfterFunc found nothing
		a.fail(a.ctx.Err())
	}
}

// finished hands the call's result to its caller; whoever removed the call from its
// connection's pending table calls it, once.
func (a *asyncPull) finished(resp *Command, err error) {
	var res mq.PullResult
	if err != nil {
		if a.more != nil && a.conn.streams.Load() {
			a.endStream()
		}
		err = requestError(PullMessage, a.pl.addr, err)
	} else {
		res, err = a.cl.pullResult(&a.pl, resp)
	}
	a.finishedWith(res, err)
}

// endStream tells the broker that nobody reads the answers of a's streamed pull any more,
// which ended on the client with no last answer (ctx's end, its timeout): an EdgeMQ broker
// would answer it on as messages arrive, up to its budget (EndPullStream). It is sent only
// on a connection whose broker said it streams, in its reply to a heartbeat, or streamed a
// pull (clientConn.streams): Apache RocketMQ's does not know the code. Best effort: on a
// connection that failed there is nothing to end.
func (a *asyncPull) endStream() {
	cmd := NewRequest(EndPullStream, EndPullStreamHeader{Opaque: a.opaque}.Ext(), nil)
	_ = a.conn.oneway(context.Background(), cmd)
}

// finishedWith is finished's end: it hands the call's last result to its caller and lets
// the call go.
func (a *asyncPull) finishedWith(res mq.PullResult, err error) {
	a.refs.reusable = a.timer.Stop()
	if a.stopCtx != nil && !a.stopCtx() {
		a.refs.reusable = false
	}
	a.user(res, err)
	if a.refs.release() {
		a.recycle()
	}
}

// pullFilter is a pull's TAG expression, parsed, with its canonical form as a pull
// request's subscription carries it.
type pullFilter struct {
	f    *mq.TagFilter
	expr string
}

// pullFilters caches the parsed TAG expressions of a client's pulls: a consumer pulls with
// the same few (its subscriptions) again and again. It keeps up to maxPullFilters of them;
// past that, expressions are parsed on every pull.
type pullFilters struct {
	m sync.Map // expression → *pullFilter
	n atomic.Int32
}

const maxPullFilters = 256

// get returns expr parsed.
func (pf *pullFilters) get(expr string) (*pullFilter, error) {
	if v, ok := pf.m.Load(expr); ok {
		return v.(*pullFilter), nil
	}
	f, err := mq.ParseTagFilter(expr)
	if err != nil {
		return nil, err
	}
	p := &pullFilter{f: f, expr: f.String()}
	if pf.n.Load() < maxPullFilters {
		if v, loaded := pf.m.LoadOrStore(expr, p); loaded {
			return v.(*pullFilter), nil
		}
		pf.n.Add(1)
	}
	return p, nil
}

// pullCall is a pull request ready to go, with what reading its reply needs.
type pullCall struct {
	req     mq.PullRequest
	filter  *pullFilter
	h       PullHeader
	cmd     *Command
	timeout time.Duration
	addr    string
}

// preparePull checks req and builds its request into pl, all but the broker's name.
func (c *Client) preparePull(ctx context.Context, req mq.PullRequest, pl *pullCall) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", mq.ErrInvalidArgument)
	}
	maxMsgs := req.MaxMsgs
	if maxMsgs == 0 {
		maxMsgs = 32
	}
	switch {
	case maxMsgs < 0 || maxMsgs > maxPullBatch:
		return fmt.Errorf("%w: pull of %d messages, 1..%d", mq.ErrInvalidArgument, req.MaxMsgs, maxPullBatch)
	case req.Offset < 0:
		return fmt.Errorf("%w: pull from offset %d", mq.ErrInvalidArgument, req.Offset)
	case req.MaxWait < 0:
		return fmt.Errorf("%w: pull MaxWait %v", mq.ErrInvalidArgument, req.MaxWait)
	}
	if req.Filter != "" {
		pf, err := c.filters.get(req.Filter)
		if err != nil {
			return err
		}
		pl.filter = pf
	}
	pl.req = req
	pl.h = PullHeader{ConsumerGroup: req.Group, Topic: req.Queue.Topic, QueueID: req.Queue.QueueID, QueueOffset: req.Offset,
		MaxMsgNums: int32(maxMsgs), ExpressionType: ExpressionTag}
	h := &pl.h
	if req.CommitOffset > 0 {
		h.SysFlag |= PullCommitOffset
		h.CommitOffset = req.CommitOffset
	}
	if pl.filter != nil {
		h.SysFlag |= PullSubscription
		h.Subscription = pl.filter.expr
	}
	pl.timeout = c.opts.RequestTimeout
	if req.Suspend {
		hold := req.MaxWait
		if hold <= 0 {
			hold = c.opts.DefaultPullHold
		}
		if dl, ok := ctx.Deadline(); ok {
			hold = min(hold, time.Until(dl)-time.Second) // answered before ctx ends
		}
		if hold >= minPullHold {
			h.SysFlag |= PullSuspend
			h.SuspendTimeoutMillis = hold.Milliseconds()
			pl.timeout = hold + c.opts.PullTimeoutMargin
		}
	}
	return nil
}

// name completes pl for the broker at addr: the queue's broker name, when the caller left
// it empty, and the request, in cmd if not nil.
func (pl *pullCall) name(c *Client, addr string, cmd *Command) {
	pl.addr = addr
	if pl.req.Queue.BrokerName == "" {
		pl.req.Queue.BrokerName = c.brokerName(addr)
	}
	pl.h.BrokerName = pl.req.Queue.BrokerName
	var ext map[string]string
	if !c.opts.Credentials.IsZero() { // the signature covers the Ext map
		ext = pl.h.Ext()
	}
	if cmd == nil {
		cmd = NewRequest(PullMessage, ext, nil)
	} else {
		*cmd = Command{Code: PullMessage, Language: LanguageGo, Version: Version, Ext: ext, Serialize: JSON}
	}
	if ext == nil {
		cmd.Header = &pl.h
	}
	pl.cmd = cmd
}

// pullResult reads the reply of pl.
func (c *Client) pullResult(pl *pullCall, resp *Command) (mq.PullResult, error) {
	var res mq.PullResult
	addr := pl.addr
	switch resp.Code {
	case Success:
		res.Status = mq.PullFound
	case PullNotFound:
		res.Status = mq.PullNoNewMsg
	case PullRetryImmediately:
		res.Status = mq.PullNoMatchedMsg
	case PullOffsetMoved:
		res.Status = mq.PullOffsetIllegal
	default:
		return res, c.answerError(addr, PullMessage, resp, pl.req.Queue.Topic)
	}
	rh, err := resp.ParsePullResponseHeader()
	if err != nil {
		return mq.PullResult{}, fmt.Errorf("remoting: pull reply from %s: %w", addr, err)
	}
	res.NextBeginOffset, res.MinOffset, res.MaxOffset = rh.NextBeginOffset, rh.MinOffset, rh.MaxOffset
	if res.Status != mq.PullFound {
		return res, nil
	}
	msgs, err := decodeMessages(resp.Body, true) // a reply's body: nothing writes it
	if err != nil {
		return mq.PullResult{}, fmt.Errorf("remoting: pull reply from %s: %w", addr, err)
	}
	kept := msgs[:0]
	for i := range msgs {
		m := &msgs[i]
		if pl.filter != nil && !pl.filter.f.Match(m.Tags) {
			continue
		}
		if err := DecompressBody(m, c.opts.MaxMessageSize); err != nil {
			return mq.PullResult{}, fmt.Errorf("remoting: pull reply from %s: message at offset %d: %w", addr, m.QueueOffset, err)
		}
		m.BrokerName = pl.req.Queue.BrokerName
		if len(kept) == i { // nothing dropped so far: m is in place
			kept = kept[:i+1]
		} else {
			kept = append(kept, *m)
		}
	}
	if len(kept) == 0 {
		res.Status = mq.PullNoMatchedMsg
		return res, nil
	}
	res.Messages = kept
	return res, nil
}

// answerError returns the error of a broker's answer, and makes the route of topic be
// fetched again when the broker says the topic is not there (the route may be old).
func (c *Client) answerError(addr string, request int16, resp *Command, topic string) error {
	err := CodeError(addr, request, resp.Code, resp.Remark)
	if errors.Is(err, mq.ErrTopicNotExist) || errors.Is(err, mq.ErrNoPermission) {
		c.mu.Lock()
		if cr := c.routes[topic]; cr != nil {
			cr.stale = true
		}
		c.mu.Unlock()
	}
	return err
}

// queueRequest sends a request about q to its broker's master and returns the reply,
// whose code must be Success.
func (c *Client) queueRequest(ctx context.Context, q mq.MessageQueue, code int16, ext map[string]string, body []byte) (*Command, error) {
	addr, err := c.brokerAddr(ctx, q)
	if err != nil {
		return nil, err
	}
	req := NewRequest(code, ext, body)
	resp, err := c.invoke(ctx, addr, req, c.opts.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != Success {
		return nil, c.answerError(addr, code, resp, q.Topic)
	}
	return resp, nil
}

// offsetReply reads the offset of a reply.
func offsetReply(resp *Command) (int64, error) {
	h, err := ParseOffsetResponseHeader(resp.Fields())
	if err != nil {
		return 0, fmt.Errorf("remoting: offset reply: %w", err)
	}
	return h.Offset, nil
}

// CommitOffset stores group's offset of q at its broker (UPDATE_CONSUMER_OFFSET).
func (c *Client) CommitOffset(ctx context.Context, group string, q mq.MessageQueue, offset int64) error {
	h := UpdateOffsetHeader{ConsumerGroup: group, Topic: q.Topic, QueueID: q.QueueID, CommitOffset: offset, BrokerName: q.BrokerName}
	_, err := c.queueRequest(ctx, q, UpdateConsumerOffset, h.Ext(), nil)
	return err
}

// QueryOffset returns group's stored offset of q (QUERY_CONSUMER_OFFSET), or an error
// wrapping mq.ErrOffsetNotFound. As RocketMQ's clients, it lets the broker answer 0 for a
// group without an offset on a queue that still holds its first message.
func (c *Client) QueryOffset(ctx context.Context, group string, q mq.MessageQueue) (int64, error) {
	h := QueryOffsetHeader{ConsumerGroup: group, Topic: q.Topic, QueueID: q.QueueID, SetZeroIfNotFound: true, BrokerName: q.BrokerName}
	resp, err := c.queueRequest(ctx, q, QueryConsumerOffset, h.Ext(), nil)
	if err != nil {
		return 0, err
	}
	return offsetReply(resp)
}

// MaxOffset returns the offset after q's last message (GET_MAX_OFFSET).
func (c *Client) MaxOffset(ctx context.Context, q mq.MessageQueue) (int64, error) {
	resp, err := c.queueRequest(ctx, q, GetMaxOffset, GetOffsetHeader{Topic: q.Topic, QueueID: q.QueueID, BrokerName: q.BrokerName}.Ext(), nil)
	if err != nil {
		return 0, err
	}
	return offsetReply(resp)
}

// MinOffset returns the offset of q's first message (GET_MIN_OFFSET).
func (c *Client) MinOffset(ctx context.Context, q mq.MessageQueue) (int64, error) {
	resp, err := c.queueRequest(ctx, q, GetMinOffset, GetOffsetHeader{Topic: q.Topic, QueueID: q.QueueID, BrokerName: q.BrokerName}.Ext(), nil)
	if err != nil {
		return 0, err
	}
	return offsetReply(resp)
}

// SearchOffset returns the offset of q's first message stored at or after at
// (SEARCH_OFFSET_BY_TIMESTAMP, to the millisecond).
func (c *Client) SearchOffset(ctx context.Context, q mq.MessageQueue, at time.Time) (int64, error) {
	h := SearchOffsetHeader{Topic: q.Topic, QueueID: q.QueueID, Timestamp: at.UnixMilli(), BrokerName: q.BrokerName}
	resp, err := c.queueRequest(ctx, q, SearchOffsetByTimestamp, h.Ext(), nil)
	if err != nil {
		return 0, err
	}
	return offsetReply(resp)
}

// ConsumerIDs returns the client ids of group's members, asking a broker of topic
// chosen at random (GET_CONSUMER_LIST_BY_GROUP; any broker known when topic is ""). A
// group without members, which RocketMQ's brokers answer with SYSTEM_ERROR ("no consumer
// for this group"), has none.
func (c *Client) ConsumerIDs(ctx context.Context, topic, group string) ([]string, error) {
	addr, err := c.anyBroker(ctx, topic)
	if err != nil {
		return nil, err
	}
	req := NewRequest(GetConsumerListByGroup, ConsumerListHeader{ConsumerGroup: group}.Ext(), nil)
	resp, err := c.invoke(ctx, addr, req, c.opts.RequestTimeout)
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case Success:
	case SystemError:
		if strings.Contains(resp.Remark, "no consumer") {
			return nil, nil
		}
		return nil, c.answerError(addr, req.Code, resp, topic)
	default:
		return nil, c.answerError(addr, req.Code, resp, topic)
	}
	ids, err := DecodeConsumerList(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("remoting: consumer list from %s: %w", addr, err)
	}
	return ids, nil
}

// byBroker groups queues by broker name, keeping their order.
func byBroker(qs []mq.MessageQueue) ([]string, map[string][]mq.MessageQueue) {
	var names []string
	m := map[string][]mq.MessageQueue{}
	for _, q := range qs {
		if _, ok := m[q.BrokerName]; !ok {
			names = append(names, q.BrokerName)
		}
		m[q.BrokerName] = append(m[q.BrokerName], q)
	}
	return names, m
}

// LockQueues locks queues for orderly consumption (LOCK_BATCH_MQ, one request per
// broker) and returns those granted. A broker that cannot be asked grants nothing; the
// call fails only when no broker could be asked.
func (c *Client) LockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) ([]mq.MessageQueue, error) {
	names, groups := byBroker(qs)
	var got []mq.MessageQueue
	var errs []error
	for _, name := range names {
		asked := groups[name]
		body := EncodeLockRequest(LockRequest{ConsumerGroup: group, ClientID: clientID, Queues: asked})
		resp, err := c.queueRequest(ctx, asked[0], LockBatchMQ, nil, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		locked, err := DecodeLockReply(resp.Body)
		if err != nil {
			errs = append(errs, fmt.Errorf("remoting: lock reply of broker %q: %w", name, err))
			continue
		}
		for _, l := range locked { // answer with the queues as asked
			for _, q := range asked {
				if q.Topic == l.Topic && q.QueueID == l.QueueID {
					got = append(got, q)
					break
				}
			}
		}
	}
	if len(errs) == len(names) && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return got, nil
}

// UnlockQueues frees queues locked by clientID (UNLOCK_BATCH_MQ, one request per broker).
func (c *Client) UnlockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) error {
	names, groups := byBroker(qs)
	var errs []error
	for _, name := range names {
		body := EncodeLockRequest(LockRequest{ConsumerGroup: group, ClientID: clientID, Queues: groups[name]})
		if _, err := c.queueRequest(ctx, groups[name][0], UnlockBatchMQ, nil, body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SendBack returns a message that failed to the group's retry (or dead-letter) topic
// (CONSUMER_SEND_MSG_BACK to the master of req.BrokerName, which must be known from a
// route).
func (c *Client) SendBack(ctx context.Context, req mq.SendBackRequest) error {
	h := SendBackHeader{Offset: req.CommitLogOffset, Group: req.Group, DelayLevel: req.DelayLevel,
		OriginMsgID: req.OriginMsgID, MaxReconsumeTimes: -1, BrokerName: req.BrokerName}
	if req.MaxReconsumeTimes > 0 {
		h.MaxReconsumeTimes = req.MaxReconsumeTimes
	}
	_, err := c.queueRequest(ctx, mq.MessageQueue{BrokerName: req.BrokerName}, ConsumerSendMsgBack, h.Ext(), nil)
	return err
}
