package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// heartbeat answers HEART_BEAT: the broker registers the client's groups. The client is
// then told of changes to its consumer groups over this connection
// (NOTIFY_CONSUMER_IDS_CHANGED), and leaves its groups when its last connection closes.
func (s *Server) heartbeat(c *conn, req *remoting.Command) *remoting.Command {
	hb, err := remoting.DecodeHeartbeat(req.Body)
	if err != nil {
		return errReply(req, err)
	}
	hb.OnChange = func(group string) {
		n := remoting.NewRequest(remoting.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": group}, nil)
		n.Flag = remoting.FlagOneway
		n.Opaque = c.s.opaque.Add(1)
		c.notify(n)
	}
	hb.OnReset = func(group, topic string, offs map[mq.MessageQueue]int64) {
		rh := remoting.ResetOffsetHeader{Topic: topic, Group: group, Timestamp: time.Now().UnixMilli(), IsForce: true, QueueID: -1, Offset: -1}
		n := remoting.NewRequest(remoting.ResetConsumerClientOffset, rh.Ext(), offsetTableBody(offs))
		n.Flag = remoting.FlagOneway
		n.Opaque = c.s.opaque.Add(1)
		c.notify(n)
	}
	if err := s.b.Heartbeat(c.ctx, hb); err != nil {
		return errReply(req, err)
	}
	c.addClient(hb.ClientID, req)
	resp := req.Reply(remoting.Success, "")
	if !s.opts.NoStreamPulls {
		resp.Ext = map[string]string{remoting.ExtStreams: "1"} // END_PULL_STREAM is welcome
	}
	return resp
}

// unregister answers UNREGISTER_CLIENT: the client leaves the named groups, or all its
// groups when none is named.
func (s *Server) unregister(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseUnregisterHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	var groups []string
	for _, g := range []string{h.ProducerGroup, h.ConsumerGroup} {
		if g != "" {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		groups = []string{""}
	}
	for _, g := range groups {
		if err := s.b.Unregister(c.ctx, h.ClientID, g); err != nil {
			return errReply(req, err)
		}
	}
	return req.Reply(remoting.Success, "")
}

// consumerList answers GET_CONSUMER_LIST_BY_GROUP. As RocketMQ's broker, a group without
// members, or unknown, is SYSTEM_ERROR.
func (s *Server) consumerList(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseConsumerListHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	group := h.ConsumerGroup
	ids, err := s.b.ConsumerIDs(c.ctx, "", group)
	if err != nil && !errors.Is(err, mq.ErrGroupNotExist) {
		return errReply(req, err)
	}
	if len(ids) == 0 {
		return req.Reply(remoting.SystemError, fmt.Sprintf("no consumer for this group, %s", group))
	}
	resp := req.Reply(remoting.Success, "")
	resp.Body = remoting.EncodeConsumerList(ids)
	return resp
}

// lockQueues returns the queues of a lock request as the broker names them: this broker's,
// whatever name the client gives it.
func lockQueues(r remoting.LockRequest) []mq.MessageQueue {
	qs := make([]mq.MessageQueue, len(r.Queues))
	for i, q := range r.Queues {
		qs[i] = mq.MessageQueue{Topic: q.Topic, QueueID: q.QueueID}
	}
	return qs
}

// lock answers LOCK_BATCH_MQ with the queues granted, named as the client named them.
func (s *Server) lock(c *conn, req *remoting.Command) *remoting.Command {
	lr, err := remoting.DecodeLockRequest(req.Body)
	if err != nil {
		return errReply(req, err)
	}
	got, err := s.b.LockQueues(c.ctx, lr.ConsumerGroup, lr.ClientID, lockQueues(lr))
	if err != nil {
		return errReply(req, err)
	}
	granted := make([]mq.MessageQueue, 0, len(got))
	for _, q := range got {
		for _, w := range lr.Queues {
			if w.Topic == q.Topic && w.QueueID == q.QueueID {
				granted = append(granted, w)
				break
			}
		}
	}
	resp := req.Reply(remoting.Success, "")
	resp.Body = remoting.EncodeLockReply(granted)
	return resp
}

// unlock answers UNLOCK_BATCH_MQ.
func (s *Server) unlock(c *conn, req *remoting.Command) *remoting.Command {
	lr, err := remoting.DecodeLockRequest(req.Body)
	if err != nil {
		return errReply(req, err)
	}
	if err := s.b.UnlockQueues(c.ctx, lr.ConsumerGroup, lr.ClientID, lockQueues(lr)); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}
