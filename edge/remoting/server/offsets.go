package server

import (
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// offsetReply answers req with an "offset" field.
func offsetReply(req *remoting.Command, off int64) *remoting.Command {
	resp := req.Reply(remoting.Success, "")
	resp.Ext = remoting.OffsetResponseHeader{Offset: off}.Ext()
	return resp
}

// The offset requests name the queue by topic and id; the broker name (bname), if any, is
// this broker's, whatever it is called.

// queryOffset answers QUERY_CONSUMER_OFFSET: the group's offset, or QUERY_NOT_FOUND.
func (s *Server) queryOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseQueryOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	off, err := s.b.QueryOffset(c.ctx, h.ConsumerGroup, mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID})
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// updateOffset answers UPDATE_CONSUMER_OFFSET.
func (s *Server) updateOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseUpdateOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	if err := s.b.CommitOffset(c.ctx, h.ConsumerGroup, mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID}, h.CommitOffset); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// maxOffset answers GET_MAX_OFFSET.
func (s *Server) maxOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseGetOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	off, err := s.b.MaxOffset(c.ctx, mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID})
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// minOffset answers GET_MIN_OFFSET.
func (s *Server) minOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseGetOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	off, err := s.b.MinOffset(c.ctx, mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID})
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// searchOffset answers SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after
// the time.
func (s *Server) searchOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseSearchOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	off, err := s.b.SearchOffset(c.ctx, mq.MessageQueue{Topic: h.Topic, QueueID: h.QueueID}, time.UnixMilli(h.Timestamp))
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}
