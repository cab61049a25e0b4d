package server

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// RocketMQ's message sysflag bits the server reads.
const (
	sysFlagCompressed     = 0x1
	sysFlagTxPrepared     = 0x4
	sysFlagCompressionTyp = 7 << 8
)

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
	body := req.Body
	if h.SysFlag&sysFlagCompressed != 0 {
		if body, err = inflate(body, s.b.Options().MaxMessageSize); err != nil {
			return req.Reply(remoting.MessageIllegal, err.Error())
		}
	}
	var sel mq.QueueSelector
	if h.QueueID >= 0 { // RocketMQ's brokers choose for a negative one
		sel = mq.QueueIndex(int(h.QueueID))
	}
	origin := edge.Origin{BornTime: max(h.BornTimestamp, 0), BornHost: remoteAddrPort(c.nc), ReconsumeTimes: max(h.ReconsumeTimes, 0)}
	var results []mq.SendResult
	if req.Code == remoting.SendBatchMessage || h.Batch {
		msgs, err := decodeBatch(body)
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
		setProperties(m, parseProperties(h.Properties))
		res, err := s.b.SendFrom(c.ctx, m, sel, origin)
		if err != nil {
			return errReply(req, err)
		}
		results = []mq.SendResult{res}
	}
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.OffsetMsgID()
	}
	rh := remoting.SendResponseHeader{MsgID: strings.Join(ids, ","), QueueID: results[0].Queue.QueueID,
		QueueOffset: results[0].QueueOffset, Region: msgRegion, TraceOn: true}
	if len(results) == 1 {
		rh.TransactionID = results[0].UniqID
	}
	resp := req.Reply(remoting.Success, "")
	resp.Ext = rh.Ext()
	return resp
}

// setProperties gives m the properties of a message on the wire: TAGS and KEYS become its
// Tags and Keys, the rest its Properties.
func setProperties(m *mq.Message, props map[string]string) {
	if t, ok := props["TAGS"]; ok {
		m.Tags = t
		delete(props, "TAGS")
	}
	if k, ok := props["KEYS"]; ok {
		m.Keys = k
		delete(props, "KEYS")
	}
	if len(props) > 0 {
		m.Properties = props
	}
}

// errInflate is a compressed body that does not inflate, or inflates past the limit.
var errInflate = errors.New("server: compressed body")

// inflate returns the zlib-compressed body inflated, refusing more than limit bytes.
func inflate(body []byte, limit int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInflate, err)
	}
	defer zr.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInflate, err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: inflates to more than %d bytes", errInflate, limit)
	}
	return out.Bytes(), nil
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
