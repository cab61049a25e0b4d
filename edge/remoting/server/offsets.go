package server

import (
	"strconv"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// offsetReply answers req with an "offset" field.
func offsetReply(req *remoting.Command, off int64) *remoting.Command {
	resp := req.Reply(remoting.Success, "")
	resp.Ext = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return resp
}

// queueFields reads a request's topic and queueId.
func queueFields(f *fields) mq.MessageQueue {
	return mq.MessageQueue{Topic: f.str(true, "topic"), QueueID: f.int32(true, "queueId")}
}

// queryOffset answers QUERY_CONSUMER_OFFSET: the group's offset, or QUERY_NOT_FOUND.
func (s *Server) queryOffset(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	group := f.str(true, "consumerGroup")
	q := queueFields(&f)
	if f.err != nil {
		return errReply(req, f.err)
	}
	off, err := s.b.QueryOffset(c.ctx, group, q)
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// updateOffset answers UPDATE_CONSUMER_OFFSET.
func (s *Server) updateOffset(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	group := f.str(true, "consumerGroup")
	q := queueFields(&f)
	off := f.int64(true, "commitOffset")
	if f.err != nil {
		return errReply(req, f.err)
	}
	if err := s.b.CommitOffset(c.ctx, group, q, off); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// maxOffset answers GET_MAX_OFFSET.
func (s *Server) maxOffset(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	q := queueFields(&f)
	if f.err != nil {
		return errReply(req, f.err)
	}
	off, err := s.b.MaxOffset(c.ctx, q)
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// minOffset answers GET_MIN_OFFSET.
func (s *Server) minOffset(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	q := queueFields(&f)
	if f.err != nil {
		return errReply(req, f.err)
	}
	off, err := s.b.MinOffset(c.ctx, q)
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}

// searchOffset answers SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after
// the time.
func (s *Server) searchOffset(c *conn, req *remoting.Command) *remoting.Command {
	f := fields{ext: req.Ext}
	q := queueFields(&f)
	ts := f.int64(true, "timestamp")
	if f.err != nil {
		return errReply(req, f.err)
	}
	off, err := s.b.SearchOffset(c.ctx, q, time.UnixMilli(ts))
	if err != nil {
		return errReply(req, err)
	}
	return offsetReply(req, off)
}
