package server

import (
	"context"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// producerHeartbeat is a heartbeat of one producer group.
func producerHeartbeat(clientID, group string) []byte {
	return []byte(`{"clientID":"` + clientID + `","producerDataSet":[{"groupName":"` + group + `"}],"consumerDataSet":[]}`)
}

// TestTransactionOverTheWire is a transaction as RocketMQ's producers run it: a half
// message (sysFlag 4, TRAN_MSG and PGROUP), held from consumers; an END_TRANSACTION of
// outcome unknown (oneway, as the clients send it) changes nothing; the broker then asks
// the producer's connection (CHECK_TRANSACTION_STATE, oneway, the half message as a record
// of its real topic and queue); the producer's answer, a commit naming what the check
// named, delivers it. A rollback drops another.
func TestTransactionOverTheWire(t *testing.T) {
	b := openBroker(t, &edge.Options{TransactionTimeout: 200 * time.Millisecond, TransactionCheckInterval: time.Hour})
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	c.mustCall(remoting.Success, remoting.HeartBeat, nil, producerHeartbeat("p1", "pg"))
	half := func(body, uniq string) *remoting.SendResponseHeader {
		e := sendExt("T", 1, "TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01"+uniq+"\x02")
		e["f"] = "4"
		r := c.mustCall(remoting.Success, remoting.SendMessageV2, e, []byte(body))
		h, err := remoting.ParseSendResponseHeader(r.Ext)
		if err != nil {
			t.Fatal(err)
		}
		if h.QueueID != 1 {
			t.Fatalf("half message answered for queue %d, want its real queue 1", h.QueueID)
		}
		return &h
	}
	end := func(h *remoting.SendResponseHeader, outcome int32, fromCheck bool) {
		_, off, err := mq.ParseOffsetMsgID(h.MsgID)
		if err != nil {
			t.Fatal(err)
		}
		eh := remoting.EndTransactionHeader{ProducerGroup: "pg", TranStateTableOffset: h.QueueOffset, CommitLogOffset: off,
			CommitOrRollback: outcome, FromTransactionCheck: fromCheck, MsgID: h.MsgID}
		req := remoting.NewRequest(remoting.EndTransaction, eh.Ext(), nil)
		req.Flag = remoting.FlagOneway
		c.write(req)
	}
	queued := func(topic string, q int32) int64 {
		n, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: topic, QueueID: q})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	committed := half("commit me", "U1")
	rolledBack := half("drop me", "U2")
	end(rolledBack, remoting.TransactionRollbackType, false)
	end(committed, remoting.TransactionNotType, false)
	n := waitNote(t, c)
	if n.Code != remoting.CheckTransactionState || !n.IsOneway() {
		t.Fatalf("broker sent code %d oneway %v, want a oneway CHECK_TRANSACTION_STATE", n.Code, n.IsOneway())
	}
	ch, err := remoting.ParseCheckTransactionStateHeader(n.Ext)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := remoting.DecodeMessages(n.Body)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("check's body: %d messages, %v", len(msgs), err)
	}
	m := msgs[0]
	if ch.TranStateTableOffset != committed.QueueOffset || ch.TransactionID != "U1" || ch.Topic != "T" ||
		m.Topic != "T" || m.QueueID != 1 || string(m.Body) != "commit me" || m.Properties[mq.PropertyProducerGroup] != "pg" ||
		m.CommitLogOffset != ch.CommitLogOffset || ch.OffsetMsgID != committed.MsgID {
		t.Fatalf("check %+v of message %+v: want the open transaction's half message in T/1", ch, m)
	}
	if got := queued("T", 1); got != 0 {
		t.Fatalf("T/1 holds %d messages before the commit", got)
	}
	// The producer answers the check as the clients do: with what the check named.
	eh := remoting.EndTransactionHeader{ProducerGroup: "pg", TranStateTableOffset: ch.TranStateTableOffset,
		CommitLogOffset: ch.CommitLogOffset, CommitOrRollback: remoting.TransactionCommitType, FromTransactionCheck: true,
		MsgID: ch.MsgID, TransactionID: ch.TransactionID}
	c.mustCall(remoting.Success, remoting.EndTransaction, eh.Ext(), nil) // answered when not oneway
	if got := queued("T", 1); got != 1 {
		t.Fatalf("T/1 holds %d messages after the commit, want 1", got)
	}
	res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: 1}, MaxMsgs: 8, Filter: "*"})
	if err != nil || len(res.Messages) != 1 || string(res.Messages[0].Body) != "commit me" || res.Messages[0].MsgID() != "U1" {
		t.Fatalf("pull of T/1: %+v, %v", res, err)
	}
	// A commit of what is not a half message of the group is refused.
	eh.ProducerGroup = "other"
	if r := c.call(remoting.EndTransaction, eh.Ext(), nil); r.Code == remoting.Success {
		t.Fatalf("another group's end answered %d", r.Code)
	}
	eh.ProducerGroup, eh.CommitOrRollback = "pg", 5
	if r := c.call(remoting.EndTransaction, eh.Ext(), nil); r.Code != remoting.SystemError {
		t.Fatalf("an end of outcome 5 answered %d, want %d", r.Code, remoting.SystemError)
	}
	if got := queued(mq.TransOpTopic, 0); got != 2 {
		t.Fatalf("%d op records, want 2: the rollback and the commit", got)
	}
}

// TestTransactionChecksTakeTurns: with two producers of the group connected, the checks of
// one transaction go to each in turn, so that a producer that does not answer does not take
// them all.
func TestTransactionChecksTakeTurns(t *testing.T) {
	b := openBroker(t, &edge.Options{TransactionTimeout: 100 * time.Millisecond, TransactionCheckInterval: 300 * time.Millisecond})
	s := startServer(t, b, Options{})
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	c1.mustCall(remoting.Success, remoting.HeartBeat, nil, producerHeartbeat("p1", "pg"))
	c2.mustCall(remoting.Success, remoting.HeartBeat, nil, producerHeartbeat("p2", "pg"))
	e := sendExt("T", 0, "TRAN_MSG\x01true\x02PGROUP\x01pg\x02")
	e["f"] = "4"
	c1.mustCall(remoting.Success, remoting.SendMessageV2, e, []byte("open"))
	for i, c := range []*client{c1, c2, c1} {
		if n := waitNote(t, c); n.Code != remoting.CheckTransactionState {
			t.Fatalf("check %d: code %d", i+1, n.Code)
		}
	}
	select {
	case n := <-c2.notes:
		t.Fatalf("p2 got a second check (code %d) before p1's second", n.Code)
	default:
	}
}
