package server

import (
	"net"
	"net/netip"
	"strings"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// sysFlagTxPrepared marks a transaction's half message (RocketMQ's
// TRANSACTION_PREPARED_TYPE), which the broker does not take.
const sysFlagTxPrepared = 0x4

// msgRegion is what RocketMQ's brokers answer as a send's MSG_REGION by default.
const msgRegion = "DefaultRegion"

// send answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE: the broker stores the
// message (or the batch's, in one queue), stamped with the producer's born time and the
// connection's remote address.
func (s *Server) send(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseSendHeader(req.Code, req.Ext)
	if err != nil {
		return errReply(req, err)
	}
	if h.SysFlag&sysFlagTxPrepared != 0 {
		return req.Reply(remoting.NoPermission, "server: transactional messages are not supported")
	}
	// The broker takes bodies as they are; a compressed one is inflated here, no larger
	// than the broker would take it.
	mx := mq.MessageExt{Message: mq.Message{Body: req.Body}, SysFlag: h.SysFlag}
	if err := remoting.DecompressBody(&mx, s.b.Options().MaxMessageSize); err != nil {
		return req.Reply(remoting.MessageIllegal, err.Error())
	}
	body := mx.Body
	var sel mq.QueueSelector
	if h.QueueID >= 0 { // RocketMQ's brokers choose for a negative one
		sel = mq.QueueIndex(int(h.QueueID))
	}
	origin := edge.Origin{BornTime: max(h.BornTimestamp, 0), BornHost: remoteAddrPort(c.nc), ReconsumeTimes: max(h.ReconsumeTimes, 0)}
	var results []mq.SendResult
	if req.Code == remoting.SendBatchMessage || h.Batch {
		msgs, err := remoting.DecodeBatch(body)
		if err != nil {
			return req.Reply(remoting.MessageIllegal, err.Error())
		}
		if len(msgs) == 0 {
			return req.Reply(remoting.MessageIllegal, "server: empty batch")
		}
		for _, m := range msgs {
			m.Topic = h.Topic
		}
		if results, err = s.b.SendBatchFrom(c.ctx, msgs, sel, origin); err != nil {
			return errReply(req, err)
		}
	} else {
		m := &mq.Message{Topic: h.Topic, Flag: h.Flag, Body: body}
		remoting.SetMessageProperties(m, h.Properties)
		res, err := s.b.SendFrom(c.ctx, m, sel, origin)
		if err != nil {
			return errReply(req, err)
		}
		results = []mq.SendResult{res}
	}
	host := s.storeHost(c)
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = mq.OffsetMsgID(host, r.CommitLogOffset)
	}
	rh := remoting.SendResponseHeader{MsgID: strings.Join(ids, ","), QueueID: results[0].Queue.QueueID,
		QueueOffset: results[0].QueueOffset, Region: msgRegion, TraceOn: true}
	if results[0].Queue.Topic == mq.ScheduleTopic && h.Topic != mq.ScheduleTopic && h.QueueID >= 0 {
		// A delayed message waits in the schedule topic; as RocketMQ's brokers, tell the
		// client the queue it will be delivered to (the offset is the schedule queue's).
		rh.QueueID = h.QueueID
	}
	if len(results) == 1 {
		rh.TransactionID = results[0].UniqID
	}
	resp := req.Reply(remoting.Success, "")
	resp.Ext = rh.Ext()
	return resp
}

// remoteAddrPort returns the peer's address, or the zero AddrPort for a connection that
// is not TCP.
func remoteAddrPort(nc net.Conn) netip.AddrPort {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// sendBack answers CONSUMER_SEND_MSG_BACK: the broker stores a copy of the message in the
// group's retry or dead-letter topic.
func (s *Server) sendBack(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseSendBackHeader(req.Ext)
	if err != nil {
		return errReply(req, err)
	}
	r := mq.SendBackRequest{Group: h.Group, CommitLogOffset: h.Offset, DelayLevel: h.DelayLevel,
		MaxReconsumeTimes: max(h.MaxReconsumeTimes, 0), OriginMsgID: h.OriginMsgID} // negative: not set
	if err := s.b.SendBack(c.ctx, r); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}
