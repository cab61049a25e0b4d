package server

import (
	"context"
	"errors"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// maxPullMsgs is the most messages the broker returns to one pull.
const maxPullMsgs = 1024

// pull answers PULL_MESSAGE and LITE_PULL_MESSAGE with the broker's Pull, long polling up
// to the request's suspend time. A pull parked when the server shuts down is answered
// PULL_NOT_FOUND at its own offset, so that the client pulls again.
func (s *Server) pull(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParsePullHeader(req.Ext)
	if err != nil {
		return errReply(req, err)
	}
	if h.ExpressionType != "" && h.ExpressionType != "TAG" {
		return req.Reply(remoting.SystemError, "server: only TAG filter expressions are supported, not "+h.ExpressionType)
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
	if h.SysFlag&remoting.PullCommitOffset != 0 && h.CommitOffset > 0 {
		pr.CommitOffset = h.CommitOffset
	}
	if pr.Suspend && h.SuspendTimeoutMillis > 0 {
		pr.MaxWait = time.Duration(h.SuspendTimeoutMillis) * time.Millisecond
	}
	ctx := c.pulls
	if pr.Suspend {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(c.pulls)
		defer cancel()
		stop := context.AfterFunc(s.pulls, cancel)
		defer stop()
	}
	res, err := s.b.Pull(ctx, pr)
	if err != nil {
		if s.pulls.Err() != nil && errors.Is(err, context.Canceled) && c.pulls.Err() == nil {
			return s.pullNotFound(req, pr)
		}
		return errReply(req, err)
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
	resp.Header = pullReplyHeader(res.NextBeginOffset, res.MinOffset, res.MaxOffset)
	if code == remoting.Success {
		resp.Body = s.appendRecords(c, make([]byte, 0, recordsSize(res.Messages)), res.Messages)
	}
	return resp
}

// pullNotFound answers a pull cut short by Shutdown: nothing new, continue at the same
// offset.
func (s *Server) pullNotFound(req *remoting.Command, pr mq.PullRequest) *remoting.Command {
	ctx := context.Background()
	minOff, _ := s.b.MinOffset(ctx, pr.Queue)
	maxOff, _ := s.b.MaxOffset(ctx, pr.Queue)
	resp := req.Reply(remoting.PullNotFound, "server: shutting down")
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

// recordsSize is the most bytes msgs take as V1 records, so that a pull's body is
// allocated once.
func recordsSize(msgs []mq.MessageExt) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += recordOverhead + len(m.Body) + len(m.Topic) + len(m.Tags) + len(m.Keys) + 2*(len("TAGS")+2)
		for k, v := range m.Properties {
			n += len(k) + len(v) + 2
		}
	}
	return n
}

// appendRecords appends msgs as V1 records for c, their store host the address c knows
// this broker by (so that the offset message ids clients derive lead back here). A message
// that has no V1 record (a topic over 255 bytes, properties over 32 KiB: the broker does
// not store such) is left out and logged, so that the client reads on past it.
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
