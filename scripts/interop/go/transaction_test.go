package interop

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Transactional messages with the Go client's TransactionProducer. SendMessageInTransaction
// sends a half message (TRAN_MSG=true, sysFlag 4, the producer group in PGROUP) with SendSync,
// calls the listener's ExecuteLocalTransaction, then ends the transaction with
// END_TRANSACTION (request 37) sent oneway, so its result is never seen: a commit shows only
// as the message reaching consumers. A half message left open (UnkonwnState) is checked by
// the broker: CHECK_TRANSACTION_STATE (request 39, oneway, the half message in the body), on a
// connection that a heartbeat registered for the producer group; the client hands it to
// CheckLocalTransaction when the message's PGROUP is its own group, and answers with
// END_TRANSACTION (fromTransactionCheck=true), oneway, to the connection the check came on.
//
// The brokers are run with a 1 s transaction timeout and 1 s check interval (run.sh:
// -broker.transaction_timeout 1s -broker.transaction_check_interval 1s for edgemq serve,
// transactionTimeOut=1000 and transactionCheckInterval=1000 in rocketmq.sh's broker.conf);
// with the brokers' defaults (a first check 6 s after the send at the soonest; RocketMQ 5
// looks for due checks every 30 s, EdgeMQ checks again 60 s later) the check-back test fits in
// its 60 s bound only if the first check is sent and answered.

// outcomeProp is the user property that tells txListener.ExecuteLocalTransaction how to end a
// message's transaction: one of the outcomes below.
const outcomeProp = "outcome"

var outcomes = map[string]primitive.LocalTransactionState{
	"commit":   primitive.CommitMessageState,
	"rollback": primitive.RollbackMessageState,
	"unknown":  primitive.UnkonwnState,
}

// txListener is a TransactionListener. ExecuteLocalTransaction answers what the message's
// outcomeProp names; CheckLocalTransaction records the check and answers onCheck.
type txListener struct {
	onCheck primitive.LocalTransactionState

	mu     sync.Mutex
	checks []txCheck
}

// txCheck is one CheckLocalTransaction call.
type txCheck struct {
	msg *primitive.MessageExt
	at  time.Time
}

func newTxListener(onCheck primitive.LocalTransactionState) *txListener {
	return &txListener{onCheck: onCheck}
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if s, ok := outcomes[m.GetProperty(outcomeProp)]; ok {
		return s
	}
	return primitive.RollbackMessageState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checks = append(l.checks, txCheck{msg: m, at: time.Now()})
	l.mu.Unlock()
	return l.onCheck
}

func (l *txListener) checksSoFar() []txCheck {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]txCheck(nil), l.checks...)
}

// checksOf returns the checks of the transaction of message id (its UNIQ_KEY).
func (l *txListener) checksOf(id string) []txCheck {
	var out []txCheck
	for _, c := range l.checksSoFar() {
		if c.msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex) == id {
			out = append(out, c)
		}
	}
	return out
}

// describeChecks lists checks for a failure message or a log line.
func describeChecks(cs []txCheck) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n\t%s topic=%s TRANSACTION_CHECK_TIMES=%q body=%s", c.msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex),
			c.msg.Topic, c.msg.GetProperty(primitive.PropertyTranscationCheckTimes), abbrev(c.msg.Body))
	}
	return b.String()
}

// newTxProducer starts a transaction producer of group "interop_p_"+group with its own client
// instance (the client hands checks to the first producer of the instance only); t's cleanup
// shuts it down. It returns the producer and when it started.
func newTxProducer(t *testing.T, group string, l *txListener) (rocketmq.TransactionProducer, time.Time) {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNsResolver(resolver()),
		producer.WithGroupName("interop_p_"+group),
		producer.WithInstanceName(instanceName("tp")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("new transaction producer: %v", err)
	}
	at := time.Now()
	if err := p.Start(); err != nil {
		t.Fatalf("start transaction producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p, at
}

// sendTx sends m with SendMessageInTransaction and fails t on an error or a send status other
// than SendOK; SYSTEM_BUSY (code 2) is retried as sendSync does. The listener's
// ExecuteLocalTransaction runs only after a send that succeeded.
func sendTx(t *testing.T, p rocketmq.TransactionProducer, m *primitive.Message) *primitive.TransactionSendResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := p.SendMessageInTransaction(ctx, m)
		cancel()
		if err != nil && attempt < 5 && strings.HasPrefix(err.Error(), "CODE: 2,") {
			t.Logf("SendMessageInTransaction to %s: %v; again", m.Topic, err)
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond) // back off from a busy broker
			continue
		}
		if err != nil {
			t.Fatalf("SendMessageInTransaction to %s: %v", m.Topic, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("SendMessageInTransaction to %s: status %d, want SendOK", m.Topic, res.Status)
		}
		if id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex); res.MsgID != id {
			t.Errorf("TransactionSendResult.MsgID = %q, want the UNIQ_KEY %q", res.MsgID, id)
		}
		if res.OffsetMsgID == "" {
			t.Errorf("TransactionSendResult.OffsetMsgID is empty (the half message's offset msg id, which END_TRANSACTION names)")
		}
		return res
	}
}

// txMsg builds a message for a transaction with the given outcome (outcomeProp); props lists
// its user properties, outcomeProp included.
func txMsg(topic string, body []byte, tag string, keys []string, outcome string, props userProps) (*primitive.Message, userProps) {
	all := userProps{outcomeProp: outcome}
	for k, v := range props {
		all[k] = v
	}
	return newMsg(topic, body, tag, keys, all), all
}

// checkNotHalf fails t when a delivered message still carries the half message's REAL_TOPIC
// or REAL_QID. TRAN_MSG is not checked: Apache RocketMQ delivers committed messages with
// TRAN_MSG=true (its EndTransactionProcessor removes the property after it encoded the
// properties), which the Go consumer takes only as a reason to set TransactionId.
func checkNotHalf(t *testing.T, g *primitive.MessageExt) {
	t.Helper()
	for _, k := range []string{primitive.PropertyRealTopic, primitive.PropertyRealQueueId} {
		if v := g.GetProperty(k); v != "" {
			t.Errorf("message %s delivered with the half message's %s=%q", g.MsgId, k, v)
		}
	}
}

// TestTransactionCommit sends three messages in transactions (a text body, one of every byte
// value, and 64 KiB, which the Go producer sends zlib-compressed) whose local transaction
// commits: each send result says CommitMessageState, and a push consumer reading the topic
// from the first offset receives each message exactly once, byte for byte, with its tag, keys,
// flag and user properties, in its real topic (no REAL_TOPIC or REAL_QID left), its MsgId the
// send result's MsgID.
func TestTransactionCommit(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("txcommit")
	l := newTxListener(primitive.CommitMessageState) // a check (none is expected) commits too
	p, _ := newTxProducer(t, group, l)
	var want []sent
	for _, m := range sample(topic, "txcommit") {
		m.WithProperty(outcomeProp, "commit")
		props := userProps{outcomeProp: "commit", "mode": m.GetProperty("mode"), "index": m.GetProperty("index"),
			"unicode": m.GetProperty("unicode")}
		at := time.Now()
		res := sendTx(t, p, m)
		if res.State != primitive.CommitMessageState {
			t.Errorf("message %s: TransactionSendResult.State = %d, want CommitMessageState (%d)", res.MsgID, res.State, primitive.CommitMessageState)
		}
		want = append(want, sent{msg: m, id: res.MsgID, props: props, at: at})
	}
	for _, g := range readBack(t, group, topic, want) {
		checkNotHalf(t, g.msg)
	}
	if cs := l.checksSoFar(); len(cs) > 0 {
		t.Logf("the broker checked %d committed transactions (harmless: the answer is commit again):%s", len(cs), describeChecks(cs))
	}
}

// TestTransactionRollback sends two messages in transactions whose local transaction rolls
// back (send results say RollbackMessageState), then a committed sentinel. A push consumer
// reading the topic from the first offset gets the sentinel once; 3 s later it still has no
// rolled-back message.
func TestTransactionRollback(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("txrollback")
	l := newTxListener(primitive.RollbackMessageState) // a check (none is expected) rolls back too
	p, _ := newTxProducer(t, group, l)
	var rolledBack []string
	for i, body := range []string{"rolled back #0", "rolled back #1 \x00\x01\x02"} {
		m, _ := txMsg(topic, []byte(body), "TagRollback", []string{fmt.Sprint("rollback-", i)}, "rollback", nil)
		res := sendTx(t, p, m)
		if res.State != primitive.RollbackMessageState {
			t.Errorf("message %s: TransactionSendResult.State = %d, want RollbackMessageState (%d)", res.MsgID, res.State, primitive.RollbackMessageState)
		}
		rolledBack = append(rolledBack, res.MsgID)
	}
	sm, sprops := txMsg(topic, []byte("committed sentinel"), "TagSentinel", []string{"sentinel"}, "commit", userProps{"role": "sentinel"})
	sres := sendTx(t, p, sm)
	if sres.State != primitive.CommitMessageState {
		t.Errorf("sentinel: TransactionSendResult.State = %d, want CommitMessageState (%d)", sres.State, primitive.CommitMessageState)
	}
	sentinel := sent{msg: sm, id: sres.MsgID, props: sprops}

	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("c"))
	if gs, ok := col.waitIDs(readBackTimeout, []string{sentinel.id}); !ok {
		t.Fatalf("the committed sentinel never arrived within %v; got:%s", readBackTimeout, describe(gs))
	}
	gs := col.settle(3 * time.Second)
	idx := byID(gs)
	for _, id := range rolledBack {
		if d := idx[id]; len(d) > 0 {
			t.Errorf("rolled-back message %s was delivered %d times:%s", id, len(d), describe(d))
		}
	}
	if d := idx[sentinel.id]; len(d) != 1 {
		t.Errorf("the sentinel was delivered %d times, want once:%s", len(d), describe(d))
	} else {
		checkDelivered(t, sentinel, d[0].msg)
		checkNotHalf(t, d[0].msg)
	}
	if len(gs) != 1 {
		t.Errorf("got %d deliveries, want only the sentinel:%s", len(gs), describe(gs))
	}
	if cs := l.checksSoFar(); len(cs) > 0 {
		t.Logf("the broker checked %d ended transactions (harmless: the answer is rollback again):%s", len(cs), describeChecks(cs))
	}
}

// checkBackTimeout bounds how long TestTransactionCheck waits for a message whose transaction
// is ended only when the broker checks it.
const checkBackTimeout = 60 * time.Second

// TestTransactionCheck sends two messages (a text body, and 64 KiB, which the Go producer
// sends zlib-compressed) in transactions whose local transaction answers UnkonwnState, so the
// send results say UnkonwnState and the transactions stay open, and CheckLocalTransaction
// answers CommitMessageState. The broker must check each transaction at least once with the
// half message as sent (its real topic, its body uncompressed by the client, its UNIQ_KEY and
// the producer group in PGROUP), and, after the producer's commit, deliver it once, byte for
// byte, with its tag, keys, user properties and the send result's MsgID, within 60 s. The
// flag may come back 0, which is logged: Apache RocketMQ stores a half message again for every
// check (TransactionalMessageBridge.renewHalfMessageInner), without its flag.
//
// The broker sends checks only on connections a heartbeat registered for the producer group.
// The Go client sends its first heartbeat 1 s after Start, and only to brokers it then knows a
// route to; the next one comes 30 s later. Both brokers count checks they could not send
// towards the most they make (15), so with checks a second apart a producer that missed its
// first heartbeat would see its transactions discarded. The test therefore sends right after
// Start (the send learns the route), and logs if that send took longer than the second.
func TestTransactionCheck(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("txcheck")
	l := newTxListener(primitive.CommitMessageState)
	p, started := newTxProducer(t, group, l)
	large := []byte(strings.Repeat("checked large body | ", 4000))[:64<<10]
	var want []sent
	for i, body := range [][]byte{[]byte("committed when checked \x00\x01\x02"), large} {
		m, props := txMsg(topic, body, "TagCheck", []string{fmt.Sprint("check-", i), "shared key"}, "unknown",
			userProps{"index": fmt.Sprint(i), "unicode": "héllo, 世界"})
		m.Flag = int32(11 + i)
		at := time.Now()
		res := sendTx(t, p, m)
		if res.State != primitive.UnkonwnState {
			t.Errorf("message %s: TransactionSendResult.State = %d, want UnkonwnState (%d)", res.MsgID, res.State, primitive.UnkonwnState)
		}
		want = append(want, sent{msg: m, id: res.MsgID, props: props, at: at})
		if i == 0 {
			if d := time.Since(started); d > 900*time.Millisecond {
				t.Logf("the first send ended %v after Start: the producer's first heartbeat (1 s after Start) may have "+
					"gone before the client knew the broker, and the next comes 30 s later", d)
			}
		}
	}

	col := newCollector()
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("c"))
	gs, ok := col.waitIDs(checkBackTimeout, ids(want))
	if !ok {
		t.Fatalf("after %v, %d of %d messages never arrived: %v; CheckLocalTransaction was called %d times:%s; got:%s",
			checkBackTimeout, len(missing(gs, ids(want))), len(want), missing(gs, ids(want)), len(l.checksSoFar()),
			describeChecks(l.checksSoFar()), describe(gs))
	}
	gs = col.settle(2 * time.Second)
	idx := byID(gs)
	for _, w := range want {
		cs := l.checksOf(w.id)
		if len(cs) == 0 {
			t.Errorf("message %s arrived, but CheckLocalTransaction was never called for it: the broker delivered an open transaction", w.id)
		} else {
			c := cs[0].msg
			if c.Topic != topic {
				t.Errorf("message %s: the check's message has topic %q, want the real topic %q", w.id, c.Topic, topic)
			}
			if !bytes.Equal(c.Body, w.msg.Body) {
				t.Errorf("message %s: the check's message body differs: got %d bytes %s, want %d bytes %s", w.id,
					len(c.Body), abbrev(c.Body), len(w.msg.Body), abbrev(w.msg.Body))
			}
			if g := c.GetProperty(primitive.PropertyProducerGroup); g != "interop_p_"+group {
				t.Errorf("message %s: the check's message has PGROUP %q, want %q", w.id, g, "interop_p_"+group)
			}
			if c.TransactionId != w.id {
				t.Errorf("message %s: the check's message has TransactionId %q, want the UNIQ_KEY", w.id, c.TransactionId)
			}
			t.Logf("message %s: %d checks, the first %v after the send", w.id, len(cs), cs[0].at.Sub(w.at).Round(time.Millisecond))
		}
		d := idx[w.id]
		if len(d) != 1 {
			t.Errorf("message %s delivered %d times, want once:%s", w.id, len(d), describe(d))
		}
		if len(d) > 0 {
			if f := d[0].msg.Flag; f == 0 && w.msg.Flag != 0 {
				t.Logf("message %s: delivered with flag 0, sent with %d (the broker lost it when it stored the half message again for the check)", w.id, w.msg.Flag)
				w.msg.Flag = 0
			}
			checkDelivered(t, w, d[0].msg)
			checkNotHalf(t, d[0].msg)
			t.Logf("message %s arrived %v after its send", w.id, d[0].at.Sub(w.at).Round(time.Millisecond))
		}
	}
	if len(gs) != len(want) {
		t.Errorf("got %d deliveries, want %d:%s", len(gs), len(want), describe(gs))
	}
}
