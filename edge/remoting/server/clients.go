package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// notifyOpaque numbers the requests the server sends to clients.
var notifyOpaque atomic.Int32

// heartbeat answers HEART_BEAT: the broker registers the client's groups. The client is
// then told of changes to its consumer groups over this connection
// (NOTIFY_CONSUMER_IDS_CHANGED), and leaves its groups when its last connection closes.
func (s *Server) heartbeat(c *conn, req *remoting.Command) *remoting.Command {
	hb, err := decodeHeartbeat(req.Body)
	if err != nil {
		return errReply(req, err)
	}
	hb.OnChange = func(group string) {
		n := remoting.NewRequest(remoting.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": group}, nil)
		n.Flag = remoting.FlagOneway
		n.Opaque = notifyOpaque.Add(1)
		c.notify(n)
	}
	if err := s.b.Heartbeat(c.ctx, hb); err != nil {
		return errReply(req, err)
	}
	c.addClient(hb.ClientID, req)
	return req.Reply(remoting.Success, "")
}

// unregister answers UNREGISTER_CLIENT: the client leaves the named groups, or all its
// groups when none is named.
func (s *Server) unregister(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseUnregisterHeader(req.Ext)
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
	h, err := remoting.ParseConsumerListHeader(req.Ext)
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
	body, _ := json.Marshal(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	resp := req.Reply(remoting.Success, "")
	resp.Body = body
	return resp
}

// lockBody is LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's request body.
type lockBody struct {
	ConsumerGroup string      `json:"consumerGroup"`
	ClientID      string      `json:"clientId"`
	MQSet         []wireQueue `json:"mqSet"`
}

type wireQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

func (l *lockBody) queues() []mq.MessageQueue {
	qs := make([]mq.MessageQueue, len(l.MQSet))
	for i, q := range l.MQSet {
		qs[i] = mq.MessageQueue{Topic: q.Topic, QueueID: q.QueueID} // this broker, whatever its name
	}
	return qs
}

// lock answers LOCK_BATCH_MQ with the queues granted.
func (s *Server) lock(c *conn, req *remoting.Command) *remoting.Command {
	var lb lockBody
	if err := json.Unmarshal(req.Body, &lb); err != nil {
		return req.Reply(remoting.InvalidParameter, "server: lock body: "+err.Error())
	}
	got, err := s.b.LockQueues(c.ctx, lb.ConsumerGroup, lb.ClientID, lb.queues())
	if err != nil {
		return errReply(req, err)
	}
	out := struct {
		LockOKMQSet []wireQueue `json:"lockOKMQSet"`
	}{LockOKMQSet: []wireQueue{}}
	for _, q := range got {
		for _, w := range lb.MQSet { // answer with the names the client gave
			if w.Topic == q.Topic && w.QueueID == q.QueueID {
				out.LockOKMQSet = append(out.LockOKMQSet, w)
				break
			}
		}
	}
	body, _ := json.Marshal(out)
	resp := req.Reply(remoting.Success, "")
	resp.Body = body
	return resp
}

// unlock answers UNLOCK_BATCH_MQ.
func (s *Server) unlock(c *conn, req *remoting.Command) *remoting.Command {
	var lb lockBody
	if err := json.Unmarshal(req.Body, &lb); err != nil {
		return req.Reply(remoting.InvalidParameter, "server: unlock body: "+err.Error())
	}
	if err := s.b.UnlockQueues(c.ctx, lb.ConsumerGroup, lb.ClientID, lb.queues()); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}
