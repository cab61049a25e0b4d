package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// RocketMQ's pull sysflag bits.
const (
	pullCommitOffset = 0x1
	pullSuspend      = 0x2
	pullSubscription = 0x4
)

// maxPullMsgs is the most messages the broker returns to one pull.
const maxPullMsgs = 1024

// pull answers PULL_MESSAGE and LITE_PULL_MESSAGE with the broker's Pull, long polling up
// to the request's suspend time. A pull parked when the server shuts down is answered
// PULL_NOT_FOUND at its own offset, so that the client pulls again.
func (s *Server) pull(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	group := f.str(true, "consumerGroup")
	topic := f.str(true, "topic")
	queueID := f.int32(true, "queueId")
	offset := f.int64(true, "queueOffset")
	maxMsgs := f.int32(false, "maxMsgNums")
	sysFlag := f.int32(false, "sysFlag")
	commit := f.int64(false, "commitOffset")
	suspendMs := f.int64(false, "suspendTimeoutMillis")
	subscription := f.str(false, "subscription")
	exprType := f.str(false, "expressionType")
	if f.err != nil {
		return errReply(req, f.err)
	}
	if exprType != "" && exprType != "TAG" {
		return req.Reply(remoting.SystemError, "server: only TAG filter expressions are supported, not "+exprType)
	}
	pr := mq.PullRequest{
		Group:   group,
		Queue:   mq.MessageQueue{Topic: topic, QueueID: queueID},
		Offset:  offset,
		MaxMsgs: int(min(maxMsgs, maxPullMsgs)),
		Suspend: sysFlag&pullSuspend != 0,
	}
	if pr.MaxMsgs <= 0 {
		pr.MaxMsgs = 1 // RocketMQ reads at least one message
	}
	if sysFlag&pullSubscription != 0 {
		pr.Filter = subscription
		if pr.Filter == "" {
			pr.Filter = "*"
		}
	}
	if sysFlag&pullCommitOffset != 0 && commit > 0 {
		pr.CommitOffset = commit
	}
	if pr.Suspend && suspendMs > 0 {
		pr.MaxWait = time.Duration(suspendMs) * time.Millisecond
	}
	ctx := c.ctx
	if pr.Suspend {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(c.ctx)
		defer cancel()
		stop := context.AfterFunc(s.pulls, cancel)
		defer stop()
	}
	res, err := s.b.Pull(ctx, pr)
	if err != nil {
		if s.pulls.Err() != nil && errors.Is(err, context.Canceled) && c.ctx.Err() == nil {
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
	resp.Ext = pullExt(res.NextBeginOffset, res.MinOffset, res.MaxOffset)
	if code == remoting.Success {
		var body []byte
		for i := range res.Messages {
			body = appendMessageExt(body, &res.Messages[i])
		}
		resp.Body = body
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
	resp.Ext = pullExt(pr.Offset, minOff, maxOff)
	return resp
}

func pullExt(next, minOff, maxOff int64) map[string]string {
	return map[string]string{
		"suggestWhichBrokerId": "0",
		"nextBeginOffset":      strconv.FormatInt(next, 10),
		"minOffset":            strconv.FormatInt(minOff, 10),
		"maxOffset":            strconv.FormatInt(maxOff, 10),
	}
}
