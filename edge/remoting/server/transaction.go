package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// endTransaction answers END_TRANSACTION (37, oneway from RocketMQ's clients): the producer
// commits, rolls back or leaves open the transaction of a half message; the broker decides
// (edge.Broker.EndTransaction). With the ACL on, the account needs PUB on the transaction's
// topic. A request that expects an answer gets SUCCESS, or the error's code.
func (s *Server) endTransaction(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseEndTransactionHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	if s.opts.ACL != nil {
		// Ending a transaction publishes (or drops) a message of its topic: the account
		// needs PUB there, as for the half message's send.
		if m, err := s.b.ViewMessage(c.ctx, h.CommitLogOffset); err == nil && m.Topic == mq.TransHalfTopic {
			if resp := s.authorizeFor(c, req, []resource{topicResource(m.Properties[mq.PropertyRealTopic], permPub)}); resp != nil {
				return resp
			}
		}
	}
	e := edge.EndTransaction{ProducerGroup: h.ProducerGroup, HalfOffset: h.TranStateTableOffset,
		CommitLogOffset: h.CommitLogOffset, FromCheck: h.FromTransactionCheck}
	switch h.CommitOrRollback {
	case remoting.TransactionNotType:
		e.Outcome = edge.TxUnknown
	case remoting.TransactionCommitType:
		e.Outcome = edge.TxCommit
	case remoting.TransactionRollbackType:
		e.Outcome = edge.TxRollback
	default:
		s.lg.Warn("end of a transaction with an unknown outcome", "remote", c.remote, "commitOrRollback", h.CommitOrRollback)
		return req.Reply(remoting.SystemError, fmt.Sprintf("server: commitOrRollback %d is none of 0, 8, 12", h.CommitOrRollback))
	}
	if err := s.b.EndTransaction(c.ctx, e); err != nil {
		s.lg.Warn("end of a transaction refused", "remote", c.remote, "group", h.ProducerGroup,
			"half_offset", h.TranStateTableOffset, "outcome", e.Outcome, "err", err)
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// checkTransaction asks a producer of ck's group, on one of its connections, for the outcome
// of ck's transaction: CHECK_TRANSACTION_STATE (39, oneway), the half message as a V1 record
// in its body, as RocketMQ's brokers ask. Successive checks of a transaction go to the
// group's connections in turn, so that one producer that does not answer (alive, but stuck)
// does not take every check. It reports whether a producer of the group is connected.
func (s *Server) checkTransaction(ck edge.TransactionCheck) bool {
	var conns []*conn
	for _, id := range s.b.Producers(ck.Group) {
		cs := s.connsOf(id)
		slices.SortFunc(cs, func(a, b *conn) int { return strings.Compare(a.remote, b.remote) })
		conns = append(conns, cs...)
	}
	if len(conns) == 0 {
		return false
	}
	c := conns[int(max(ck.Check-1, 0))%len(conns)]
	m := ck.Message
	h := remoting.CheckTransactionStateHeader{Topic: m.Topic, TranStateTableOffset: ck.HalfOffset,
		CommitLogOffset: ck.CommitLogOffset, MsgID: ck.TransactionID, TransactionID: ck.TransactionID,
		OffsetMsgID: mq.OffsetMsgID(s.storeHost(c), ck.CommitLogOffset), BrokerName: s.b.Options().BrokerName}
	n := remoting.NewRequest(remoting.CheckTransactionState, h.Ext(), s.appendRecords(c, nil, []mq.MessageExt{m}))
	n.Flag = remoting.FlagOneway
	n.Opaque = s.opaque.Add(1)
	c.notify(n)
	return true
}
