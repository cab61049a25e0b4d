package server

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
)

// maxPullMsgs is the most messages the broker returns to one pull.
const maxPullMsgs = 1024

// isPull says that code is a pull, which the reader answers itself when it need not wait
// (pullNow).
func isPull(code int16) bool {
	return code == remoting.PullMessage || code == remoting.LitePullMessage
}

// pullMode is how far pullAt goes.
type pullMode int

const (
	pullWait      pullMode = iota // long poll when nothing is there, in this goroutine
	pullTry                       // never wait: report that the pull would
	pullPark                      // park a pull that pullTry found waiting in the broker, to be woken (its commit is made)
	pullAfterWake                 // read a pull the broker woke, without waiting
)

// pull answers PULL_MESSAGE and LITE_PULL_MESSAGE with the broker's Pull, long polling up
// to the request's suspend time. A pull parked when the server shuts down is answered
// PULL_NOT_FOUND at its own offset, so that the client pulls again.
func (s *Server) pull(c *conn, req *remoting.Command) *remoting.Command {
	resp, _, _ := s.pullAt(c, req, pullWait, nil, nil) // its body is left to the collector
	return resp
}

// pullStream is what a streamed pull (remoting.PullHeader.PushMsgs) carries from one of
// its answers to the next: it is answered again, from where its last answer ended, each
// time messages arrive, until its budget is spent or it waits its suspend time for one.
// The consumer sends no pull meanwhile, so that a message stored while the last answer is
// on its way finds the pull parked, as a pushed message would, not a round trip away.
type pullStream struct {
	on    bool  // answered once already: answer from next, within the budget
	next  int64 // the offset its next answer starts at
	msgs  int64 // messages it may still be answered with
	bytes int64 // body bytes it may still be answered with
	more  bool  // the last answer was not its last: it is to be parked again
	asked bool  // the pull asks to stream (pullAt found it may)
	// ctx is what the stream parks in once the connection watches it (conn.watchStream):
	// ended by END_PULL_STREAM, by the connection's end and by Shutdown.
	ctx   context.Context
	watch *streamWatch
}

// stream counts an answer of n messages and nb body bytes, that ends before next, into st
// and reports whether the pull is to be answered again.
func (st *pullStream) stream(h *remoting.PullHeader, n, nb, next int64) bool {
	if !st.on {
		st.on, st.msgs, st.bytes = true, int64(h.PushMsgs), h.PushBytes
		if st.bytes <= 0 {
			st.bytes = math.MaxInt64
		}
	}
	st.msgs -= n
	st.bytes -= nb
	st.next = next
	return st.msgs > 0 && st.bytes > 0
}

// pullAt is pull in mode. With pullTry a pull that would wait for messages is not
// answered: it returns nil and true (wait), and the request is to be carried on with
// pullPark, which parks it in the broker (nil and true again) with wake as its wake-up
// (PullViewsOrPark), unless messages came meanwhile; once woken it is read with
// pullAfterWake. Nothing of the pull may be touched once it is parked: its wake may run at
// once. A reply with messages has a body from pullBodies: body, when not nil, holds
// it, for the writer to put back once the reply is written (putPullBody). st, when not
// nil, is the pull's stream: a suspended PULL_MESSAGE that asks to stream and is answered
// with messages sets st.more when it is to be answered again (its reply then says More),
// and is read from where st says.
func (s *Server) pullAt(c *conn, req *remoting.Command, mode pullMode, st *pullStream, wake func()) (_ *remoting.Command, body *[]byte, wait bool) {
	if st != nil {
		st.more = false
	}
	h, err := req.ParsePullHeader()
	if err != nil {
		return errReply(req, err), nil, false
	}
	if h.ExpressionType != "" && h.ExpressionType != "TAG" {
		return req.Reply(remoting.SystemError, "server: only TAG filter expressions are supported, not "+h.ExpressionType), nil, false
	}
	pr := mq.PullRequest{
		Group:   h.ConsumerGroup,
		Queue:   mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID},
		Offset:  h.QueueOffset,
		MaxMsgs: int(min(h.MaxMsgNums, maxPullMsgs)),
		Suspend: h.SysFlag&remoting.PullSuspend != 0,
	}
	if pr.MaxMsgs <= 0 {
		pr.MaxMsgs = 1 // RocketMQ reads at least one message
	}
	if h.SysFlag&remoting.PullSubscription != 0 {
		pr.Filter = h.Subscription
		if pr.Filter == "" {
			pr.Filter = "*"
		}
	}
	if h.SysFlag&remoting.PullCommitOffset != 0 && h.CommitOffset > 0 && (mode == pullWait || mode == pullTry) {
		pr.CommitOffset = h.CommitOffset
	}
	if pr.Suspend && h.SuspendTimeoutMillis > 0 {
		pr.MaxWait = time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
	}
	if st != nil && !(pr.Suspend && h.PushMsgs > 0 && req.Code == remoting.PullMessage && !s.opts.NoStreamPulls) {
		st = nil // not streamed
	}
	if st != nil {
		st.asked = true
	}
	if st != nil && st.on {
		pr.Offset = st.next
		pr.MaxMsgs = int(min(int64(pr.MaxMsgs), st.msgs))
		pr.CommitOffset = 0 // made with its first answer
	}
	suspend := pr.Suspend
	if mode == pullTry || mode == pullAfterWake {
		pr.Suspend = false
	}
	ctx := c.pulls
	if pr.Suspend {
		ctx = c.parked // ended by Shutdown too
		if st != nil && st.ctx != nil {
			ctx = st.ctx // and by END_PULL_STREAM
		}
	}
	if mode == pullAfterWake && suspend {
		// Woken by its context's end rather than by a message or its wait running out?
		if resp := s.pullCut(c, req, pr, st); resp != nil {
			return resp, nil, false
		}
	}
	// The reply's records are encoded straight from the store as the broker finds them, into
	// a pooled buffer: at full speed a pull's reply was most of the bytes the server
	// allocated.
	var props []remoting.Property
	var n, nb int64 // messages and body bytes answered
	visit := func(v *store.View) {
		n++
		nb += int64(len(v.Body))
		if body == nil {
			body = pullBodies.Get().(*[]byte)
			// Room for the records there are, up to the batch, not for a full batch: a
			// consumer that keeps up finds one or two.
			k := int64(pr.MaxMsgs)
			if maxOff, err := s.b.MaxOffset(ctx, pr.Queue); err == nil {
				k = min(max(maxOff-v.QueueOffset, 1), k)
			}
			n := viewSize(v)
			if room := max(min(int(k)*n, maxFirstBody), n); cap(*body) < room {
				*body = make([]byte, 0, room)
			}
		}
		*body = s.appendView(*body, v, c.host, &props)
	}
	var res mq.PullResult
	if mode == pullPark {
		var parked bool
		if res, parked, err = s.b.PullViewsOrPark(ctx, pr, visit, wake); parked {
			return nil, nil, true // j is the broker's until wake
		}
	} else {
		res, err = s.b.PullViews(ctx, pr, visit)
	}
	if err != nil {
		putPullBody(body)
		if errors.Is(err, context.Canceled) {
			if resp := s.pullCut(c, req, pr, st); resp != nil {
				return resp, nil, false
			}
		}
		return errReply(req, err), nil, false
	}
	if mode == pullTry && suspend && res.Status == mq.PullNoNewMsg {
		putPullBody(body)
		return nil, nil, true
	}
	var code int16
	switch res.Status {
	case mq.PullFound:
		code = remoting.Success
	case mq.PullNoNewMsg:
		code = remoting.PullNotFound
	case mq.PullNoMatchedMsg:
		code = remoting.PullRetryImmediately
	default:
		code = remoting.PullOffsetMoved
	}
	resp := req.Reply(code, "")
	rh := pullReplyHeader(res.NextBeginOffset, res.MinOffset, res.MaxOffset)
	resp.Header = rh
	if st != nil && code == remoting.Success {
		rh.More = st.stream(&h, n, nb, res.NextBeginOffset)
		st.more = rh.More
	}
	if code != remoting.Success || body == nil {
		putPullBody(body)
		return resp, nil, false
	}
	resp.Body = *body
	return resp, body, false
}

// endPullStream answers END_PULL_STREAM: the connection's streamed pull it names, parked
// or streaming, is answered at once with PULL_NOT_FOUND and streams no more. Sent oneway,
// it gets no reply; otherwise SUCCESS, whether or not that pull was still streaming.
func (s *Server) endPullStream(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseEndPullStreamHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	c.endStream(h.Opaque)
	return req.Reply(remoting.Success, "")
}

// pullBodies holds the buffers of pulls' replies once written.
var pullBodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody is the largest reply body kept for reuse: a pull of large messages once
// does not pin its memory.
const maxPooledBody = maxFirstBody

// putPullBody puts a pull reply's body back in pullBodies (nil: nothing). Nothing may read
// the body after: the reply is written, or will never be.
func putPullBody(body *[]byte) {
	if body == nil || cap(*body) > maxPooledBody {
		return
	}
	*body = (*body)[:0]
	pullBodies.Put(body)
}

// pullCut answers a parked pull whose wait was cut short, by Shutdown or by END_PULL_STREAM
// (st's context), PULL_NOT_FOUND; nil when neither cut it, or when the client is gone (its
// connection's pulls ended: nobody reads the answer).
func (s *Server) pullCut(c *conn, req *remoting.Command, pr mq.PullRequest, st *pullStream) *remoting.Command {
	switch {
	case c.pulls.Err() != nil:
		return nil
	case s.pulls.Err() != nil:
		return s.pullNotFound(req, pr, "server: shutting down")
	case st != nil && st.ctx != nil && st.ctx.Err() != nil:
		s.stats.streamsEnded.Add(1)
		return s.pullNotFound(req, pr, "server: stream ended by the client")
	}
	return nil
}

// pullNotFound answers a pull cut short (by Shutdown, or END_PULL_STREAM) with remark:
// nothing new, continue at the same offset.
func (s *Server) pullNotFound(req *remoting.Command, pr mq.PullRequest, remark string) *remoting.Command {
	ctx := context.Background()
	minOff, _ := s.b.MinOffset(ctx, pr.Queue)
	maxOff, _ := s.b.MaxOffset(ctx, pr.Queue)
	resp := req.Reply(remoting.PullNotFound, remark)
	resp.Header = pullReplyHeader(pr.Offset, minOff, maxOff)
	return resp
}

// pullReplyHeader is a pull reply's header: always the four fields, broker 0 (the master).
func pullReplyHeader(next, minOff, maxOff int64) *remoting.PullResponseHeader {
	return &remoting.PullResponseHeader{NextBeginOffset: next, MinOffset: minOff, MaxOffset: maxOff}
}

// recordOverhead is a V1 record's bytes besides its body, topic and properties, with IPv6
// hosts (the most it can be).
const recordOverhead = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 20 + 8 + 20 + 4 + 8 + 4 + 1 + 2

// maxFirstBody bounds the room a pull's body is first given for the records to come (the
// store's default bound of a pull's bytes): larger records grow it as they come.
const maxFirstBody = 256 << 10

// viewSize is about the bytes of v's record: a pull's body is sized from its first one.
func viewSize(v *store.View) int {
	return recordOverhead + len(v.Body) + len(v.Topic) + len(v.Tags) + len(v.Keys) + 2*(len("TAGS")+2) +
		v.NumProperties()*32
}

// appendView appends v as a V1 record, its store host host (the address the client knows
// this broker by, so that the offset message ids clients derive lead back here); props is
// scratch space for its properties. A message that has no V1 record (a topic over 255
// bytes, properties over 32 KiB: the broker does not store such) is left out and logged,
// so that the client reads on past it.
func (s *Server) appendView(dst []byte, v *store.View, host netip.AddrPort, props *[]remoting.Property) []byte {
	*props = (*props)[:0]
	for k, val := range v.Properties {
		*props = append(*props, remoting.Property{Key: k, Value: val})
	}
	// The strings alias the store's bytes only while the record is encoded, which copies them.
	m := mq.MessageExt{
		Message: mq.Message{Topic: viewString(v.Topic), Flag: v.Flag, Tags: viewString(v.Tags), Keys: viewString(v.Keys), Body: v.Body},
		QueueID: v.QueueID, QueueOffset: v.QueueOffset, SysFlag: v.SysFlag, BornTime: v.BornTime, BornHost: v.BornHost,
		StoreTime: v.StoreTime, StoreHost: host, ReconsumeTimes: v.ReconsumeTimes, CommitLogOffset: v.Pos, StoreSize: v.Size,
	}
	out, err := remoting.AppendMessageExtProps(dst, &m, *props)
	if err != nil {
		s.lg.Error("message left out of a reply", "topic", string(v.Topic), "queue", v.QueueID,
			"offset", v.QueueOffset, "err", err)
	}
	return out
}

// viewString is b as a string without a copy, for the span of a call that does not keep it.
func viewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendRecords appends msgs as V1 records for c, their store host the address c knows
// this broker by; a message that has no V1 record is left out and logged, as in
// appendView.
func (s *Server) appendRecords(c *conn, dst []byte, msgs []mq.MessageExt) []byte {
	host := s.storeHost(c)
	for i := range msgs {
		var err error
		msgs[i].StoreHost = host
		if dst, err = remoting.AppendMessageExt(dst, &msgs[i]); err != nil {
			s.lg.Error("message left out of a reply", "topic", msgs[i].Topic, "queue", msgs[i].QueueID,
				"offset", msgs[i].QueueOffset, "err", err)
		}
	}
	return dst
}
