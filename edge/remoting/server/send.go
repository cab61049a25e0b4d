package server

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"unsafe"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
)

// sysFlagTxPrepared marks a transaction's half message (RocketMQ's
// TRANSACTION_PREPARED_TYPE); its clients also set the TRAN_MSG property.
const sysFlagTxPrepared = 0x4

// msgRegion is what RocketMQ's brokers answer as a send's MSG_REGION by default.
const msgRegion = "DefaultRegion"

// isSend reports whether code is a send the reader hands to dispatchSend.
func isSend(code int16) bool {
	return code == remoting.SendMessage || code == remoting.SendMessageV2 || code == remoting.SendBatchMessage ||
		code == remoting.SendBatchZstd
}

// sendAck is a send handed to the broker, and its outcome once the store acknowledges it.
type sendAck struct {
	c       *conn
	req     *remoting.Command
	size    int64  // the request's bytes, held until the store acknowledges it
	topic   string // the topic the producer sent to
	queueID int32  // the queue it chose, or -1
	one     mq.SendResult
	batch   []mq.SendResult // a batch's results; nil for one message
	err     error
	reply   remoting.SendResponseHeader // the answer's header, written by sendReply
	resp    remoting.Command            // the answer, made by sendReply

	// done and doneBatch bound once, for the life of the pooled sendAck.
	doneFn      func(mq.SendResult, error)
	doneBatchFn func([]mq.SendResult, error)
}

// sendAcks pools sendAcks: one a send otherwise, the largest allocation of a send's path.
var sendAcks = sync.Pool{New: func() any { return new(sendAck) }}

// newSendAck returns a cleared sendAck from the pool.
func newSendAck(c *conn, req *remoting.Command, size int64, topic string, queueID int32) *sendAck {
	a := sendAcks.Get().(*sendAck)
	if a.doneFn == nil { // new
		a.doneFn, a.doneBatchFn = a.done, a.doneBatch
	}
	a.c, a.req, a.size, a.topic, a.queueID = c, req, size, topic, queueID
	return a
}

// release clears a, so that the pool holds no request, result or connection, and puts it
// back. It is called once a's answer is encoded (or, for a one-way send, once
// acknowledged): nothing refers to a after that.
func (a *sendAck) release() {
	*a = sendAck{doneFn: a.doneFn, doneBatchFn: a.doneBatchFn}
	sendAcks.Put(a)
}

// done is the broker's acknowledgement of a single message.
func (a *sendAck) done(res mq.SendResult, err error) {
	a.one, a.err = res, err
	a.finish()
}

// doneBatch is the broker's acknowledgement of a batch.
func (a *sendAck) doneBatch(res []mq.SendResult, err error) {
	a.batch, a.err = res, err
	a.finish()
}

// finish queues the answer for the writer, which encodes it (the store's acknowledgement
// goroutine only hands it over, and never waits).
func (a *sendAck) finish() {
	c := a.c
	c.s.reqBytes.Add(-a.size)
	a.req.Body = nil // stored: the answer needs only the header
	if a.req.IsOneway() {
		c.inflight.Add(-1)
		a.release()
	} else {
		c.queueFrame(outFrame{sent: a, held: true}, false) // a dead connection drops it
	}
	c.handlers.Done()
}

// send answers SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and SEND_BATCH_ZSTD (a
// batch compressed whole, inflated here to at most MaxFrameSize bytes, then taken as
// SEND_BATCH_MESSAGE's): the broker stores the message (or the batch's, in one queue),
// stamped with the producer's born time and the connection's remote address. The reader
// calls it for each send in arrival order, so that a connection's sends are stored in that
// order; it returns once the broker has taken the send, and the answer is queued when the
// store acknowledges it. An answer it returns (a refused send) is the reply to queue at
// once; accepted reports that the broker took it.
func (s *Server) send(c *conn, req *remoting.Command, size int64) (reply *remoting.Command, accepted bool) {
	if req.Code == remoting.SendBatchZstd && s.opts.NoZstdBatch {
		return req.Reply(remoting.RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", req.Code)), false
	}
	h, err := req.ParseSendHeader()
	if err != nil {
		return errReply(req, err), false
	}
	// The broker takes bodies as they are; a compressed one is inflated here, no larger
	// than the broker would take it.
	mx := mq.MessageExt{Message: mq.Message{Body: req.Body}, SysFlag: h.SysFlag}
	if err := remoting.DecompressBody(&mx, c.maxMsg); err != nil {
		return req.Reply(remoting.MessageIllegal, err.Error()), false
	}
	body := mx.Body
	if req.Code == remoting.SendBatchZstd {
		// Inflated no larger than a frame: the most a plain batch can carry.
		if body, err = zbatch.Decode(body, s.opts.MaxFrameSize); err != nil {
			return req.Reply(remoting.MessageIllegal, err.Error()), false
		}
	}
	var sel mq.QueueSelector
	if h.QueueID >= 0 { // RocketMQ's brokers choose for a negative one
		sel = mq.QueueIndex(int(h.QueueID))
	}
	origin := edge.Origin{BornTime: max(h.BornTimestamp, 0), BornHost: c.born, ReconsumeTimes: max(h.ReconsumeTimes, 0)}
	batch := req.Code == remoting.SendBatchMessage || req.Code == remoting.SendBatchZstd || h.Batch
	if batch && h.SysFlag&sysFlagTxPrepared != 0 {
		return req.Reply(remoting.MessageIllegal, "server: a batch cannot hold a transaction's half messages"), false
	}
	a := newSendAck(c, req, size, h.Topic, h.QueueID)
	if batch {
		// The items go to the broker as they are: it stores their properties without
		// making messages and maps of them.
		sc := batchScratches.Get().(*batchScratch)
		var derr error
		if sc.wire, derr = remoting.DecodeBatchItems(sc.wire[:0], body); derr != nil {
			sc.release()
			a.release()
			return req.Reply(remoting.MessageIllegal, derr.Error()), false
		}
		if len(sc.wire) == 0 {
			sc.release()
			a.release()
			return req.Reply(remoting.MessageIllegal, "server: empty batch"), false
		}
		for _, it := range sc.wire {
			sc.items = append(sc.items, edge.BatchItem(it))
		}
		err = s.b.SendBatchItemsAsyncFrom(c.ctx, h.Topic, sc.items, sel, origin, a.doneBatchFn)
		sc.release()
	} else if h.SysFlag&sysFlagTxPrepared == 0 {
		// The properties go to the broker as they came: it stores them without making a
		// message and a map of them (it makes them itself for a delay level or a retry).
		err = s.b.SendEncodedAsyncFrom(c.ctx, h.Topic, h.Flag, body, h.Properties, h.QueueID, origin, a.doneFn)
	} else { // a half message: the broker holds it until its transaction ends
		m := &mq.Message{Topic: h.Topic, Flag: h.Flag, Body: body}
		remoting.SetMessageProperties(m, h.Properties)
		m.SetProperty(mq.PropertyTransactionPrepared, "true")
		if m.Properties[mq.PropertyProducerGroup] == "" {
			m.SetProperty(mq.PropertyProducerGroup, h.ProducerGroup)
		}
		err = s.b.SendAsyncFrom(c.ctx, m, sel, origin, a.doneFn)
	}
	if err != nil {
		a.release() // the broker refused it: done is not called
		return errReply(req, err), false
	}
	return nil, true
}

// batchScratch is what the batch path of send reuses: the items of a batch as read off
// the wire, and as handed to the broker (which keeps neither slice).
type batchScratch struct {
	wire  []remoting.BatchItem
	items []edge.BatchItem
}

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

// maxKeptItems bounds the items a pooled batchScratch keeps room for.
const maxKeptItems = 4096

// release clears sc, so that the pool holds no request's bytes, and puts it back.
func (sc *batchScratch) release() {
	clear(sc.wire)
	clear(sc.items)
	sc.wire, sc.items = sc.wire[:0], sc.items[:0]
	if cap(sc.wire) > maxKeptItems || cap(sc.items) > maxKeptItems {
		return
	}
	batchScratches.Put(sc)
}

// sendReply is the answer to an acknowledged send.
func (s *Server) sendReply(c *conn, a *sendAck) *remoting.Command {
	req := a.req
	if a.err != nil {
		return errReply(req, a.err)
	}
	results := a.batch
	if results == nil {
		results = []mq.SendResult{a.one}
	}
	var msgID string
	if len(results) == 1 || req.Code == remoting.SendBatchZstd { // its reply carries the first id only
		msgID = mq.OffsetMsgID(c.host, results[0].CommitLogOffset)
	} else {
		msgID = offsetMsgIDs(c.host, results)
	}
	rh := &a.reply
	*rh = remoting.SendResponseHeader{MsgID: msgID, QueueID: results[0].Queue.QueueID,
		QueueOffset: results[0].QueueOffset, Region: msgRegion, TraceOn: true}
	if results[0].Queue.Topic == mq.ScheduleTopic && a.topic != mq.ScheduleTopic && a.queueID >= 0 {
		// A delayed message waits in the schedule topic; as RocketMQ's brokers, tell the
		// client the queue it will be delivered to (the offset is the schedule queue's).
		rh.QueueID = a.queueID
	}
	if len(results) == 1 {
		rh.TransactionID = results[0].UniqID
	}
	a.resp = *req.Reply(remoting.Success, "")
	a.resp.Header = rh
	return &a.resp
}

// offsetMsgIDs returns the offset message ids of results, comma-separated (what
// mq.OffsetMsgID gives for each), in one allocation.
func offsetMsgIDs(host netip.AddrPort, results []mq.SendResult) string {
	const hexdig = "0123456789ABCDEF"
	prefix := mq.OffsetMsgID(host, 0) // the host's part, then 16 digits of offset
	prefix = prefix[:len(prefix)-16]
	b := make([]byte, 0, len(results)*(len(prefix)+17))
	for i, r := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, prefix...)
		for shift := 60; shift >= 0; shift -= 4 {
			b = append(b, hexdig[uint64(r.CommitLogOffset)>>shift&15])
		}
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
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
	h, err := remoting.ParseSendBackHeader(req.Fields())
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
