package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// The transaction tests run in synctest bubbles: a check due at d happens at d exactly.

// checkLog records the checks a broker asks for; answer, if set, answers each (from a
// goroutine of its own, as a producer's answer comes over the network).
type checkLog struct {
	mu     sync.Mutex
	checks []TransactionCheck
	answer func(TransactionCheck)
}

func (l *checkLog) ask(ck TransactionCheck) bool {
	l.mu.Lock()
	l.checks = append(l.checks, ck)
	answer := l.answer
	l.mu.Unlock()
	if answer != nil {
		go answer(ck)
	}
	return true
}

func (l *checkLog) list() []TransactionCheck {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]TransactionCheck(nil), l.checks...)
}

// sendHalf sends a transaction's half message of producer group pg to (topic, queue).
func sendHalf(t testing.TB, b *Broker, pg, topic string, queue int32, body, uniq string) mq.SendResult {
	t.Helper()
	m := &mq.Message{Topic: topic, Tags: "tx", Keys: "k-" + uniq, Body: []byte(body), Properties: map[string]string{
		mq.PropertyTransactionPrepared: "true", mq.PropertyProducerGroup: pg, mq.PropertyUniqKey: uniq, "user": "v-" + uniq}}
	res, err := b.Send(context.Background(), m, mq.QueueIndex(int(queue)))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func endTx(t testing.TB, b *Broker, pg string, res mq.SendResult, o TxOutcome) {
	t.Helper()
	if err := b.EndTransaction(context.Background(), EndTransaction{ProducerGroup: pg, HalfOffset: res.QueueOffset,
		CommitLogOffset: res.CommitLogOffset, Outcome: o}); err != nil {
		t.Fatalf("EndTransaction(%v): %v", o, err)
	}
}

func TestTransactionCommitDeliversOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		res := sendHalf(t, b, "pg", "T", 1, "hello", "U1")
		if res.Queue.Topic != "T" || res.Queue.QueueID != 1 || res.QueueOffset != 0 || res.UniqID != "U1" {
			t.Fatalf("send result %+v: want queue T/1, the half message's offset 0, its unique id", res)
		}
		schedHas(t, b, "T", 1, 0)
		schedHas(t, b, mq.TransHalfTopic, 0, 1)
		if st, err := b.TransactionStats(); err != nil || st != (TransactionStats{Open: 1}) {
			t.Fatalf("TransactionStats %+v, %v: want one open", st, err)
		}
		endTx(t, b, "pg", res, TxUnknown) // changes nothing
		schedHas(t, b, "T", 1, 0)
		endTx(t, b, "pg", res, TxCommit)
		schedHas(t, b, "T", 1, 1)
		got := schedRead(t, b, "T", 1)[0]
		if string(got.Body) != "hello" || got.Tags != "tx" || got.Keys != "k-U1" || got.Properties["user"] != "v-U1" ||
			got.Properties[mq.PropertyUniqKey] != "U1" || got.Properties[mq.PropertyProducerGroup] != "pg" {
			t.Fatalf("delivered %+v: want the half message's body, tags, keys and properties", got)
		}
		for _, p := range []string{mq.PropertyRealTopic, mq.PropertyRealQueueID} {
			if _, ok := got.Properties[p]; ok {
				t.Fatalf("delivered message keeps %s: %v", p, got.Properties)
			}
		}
		if got.Properties[mq.PropertyTransactionPrepared] != "true" {
			t.Fatalf("delivered message without %s=true (Java's consumers read the transaction id only then): %v", mq.PropertyTransactionPrepared, got.Properties)
		}
		// Ended once: a second commit, or a rollback, changes nothing.
		endTx(t, b, "pg", res, TxCommit)
		endTx(t, b, "pg", res, TxRollback)
		schedHas(t, b, "T", 1, 1)
		schedHas(t, b, mq.TransOpTopic, 0, 1)
		if st, err := b.TransactionStats(); err != nil || st != (TransactionStats{Committed: 1}) {
			t.Fatalf("TransactionStats %+v, %v: want one committed, none open", st, err)
		}
	})
}

func TestTransactionRollbackDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ck := &checkLog{}
		b := schedBroker(t, "", nil)
		b.SetTransactionChecker(ck.ask)
		res := sendHalf(t, b, "pg", "T", 0, "no", "U1")
		endTx(t, b, "pg", res, TxRollback)
		endTx(t, b, "pg", res, TxCommit) // ended already
		time.Sleep(10 * time.Minute)
		schedHas(t, b, "T", 0, 0)
		schedHas(t, b, mq.TransOpTopic, 0, 1)
		if n := len(ck.list()); n != 0 {
			t.Fatalf("%d checks of a transaction rolled back", n)
		}
	})
}

func TestEndTransactionRefusesWhatIsNotItsHalfMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		res := sendHalf(t, b, "pg", "T", 0, "x", "U1")
		plain, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("plain")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, c := range []struct {
			name string
			e    EndTransaction
			want error
		}{
			{"another group", EndTransaction{ProducerGroup: "other", HalfOffset: res.QueueOffset, CommitLogOffset: res.CommitLogOffset, Outcome: TxCommit}, mq.ErrInvalidArgument},
			{"another half offset", EndTransaction{ProducerGroup: "pg", HalfOffset: 5, CommitLogOffset: res.CommitLogOffset, Outcome: TxCommit}, mq.ErrInvalidArgument},
			{"a plain message", EndTransaction{ProducerGroup: "pg", HalfOffset: 0, CommitLogOffset: plain.CommitLogOffset, Outcome: TxCommit}, mq.ErrInvalidArgument},
			{"no message there", EndTransaction{ProducerGroup: "pg", HalfOffset: 0, CommitLogOffset: 1 << 40, Outcome: TxCommit}, mq.ErrMessageNotFound},
			{"inside the half message", EndTransaction{ProducerGroup: "pg", HalfOffset: 0, CommitLogOffset: res.CommitLogOffset + 3, Outcome: TxCommit}, mq.ErrMessageNotFound},
			{"negative offset", EndTransaction{ProducerGroup: "pg", HalfOffset: -1, CommitLogOffset: res.CommitLogOffset, Outcome: TxCommit}, mq.ErrInvalidArgument},
			{"unknown outcome", EndTransaction{ProducerGroup: "pg", HalfOffset: 0, CommitLogOffset: res.CommitLogOffset, Outcome: 9}, mq.ErrInvalidArgument},
		} {
			if err := b.EndTransaction(ctx, c.e); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if err := b.EndTransaction(nil, EndTransaction{ProducerGroup: "pg", CommitLogOffset: res.CommitLogOffset, Outcome: TxCommit}); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("nil ctx: %v, want ErrInvalidArgument", err)
		}
		schedHas(t, b, "T", 0, 1) // only the plain message
		endTx(t, b, "pg", res, TxCommit)
		schedHas(t, b, "T", 0, 2)
		// A half message needs its producer group, and cannot be in a batch.
		if _, err := b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x"), Properties: map[string]string{mq.PropertyTransactionPrepared: "true"}}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("half message without a group: %v, want ErrInvalidArgument", err)
		}
		half := &mq.Message{Topic: "T", Body: []byte("x"), Properties: map[string]string{mq.PropertyTransactionPrepared: "true", mq.PropertyProducerGroup: "pg"}}
		if _, err := b.SendBatch(ctx, []*mq.Message{half}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("batch of a half message: %v, want ErrInvalidArgument", err)
		}
		items := []BatchItem{{Body: []byte("x"), Properties: []byte("TRAN_MSG\x01true\x02PGROUP\x01pg\x02")}}
		errc := make(chan error, 1)
		if err := b.SendBatchItemsAsyncFrom(ctx, "T", items, nil, Origin{}, func(_ []mq.SendResult, err error) { errc <- err }); err == nil {
			err = <-errc
			if !errors.Is(err, mq.ErrInvalidArgument) {
				t.Errorf("batch items with a half message: %v, want ErrInvalidArgument", err)
			}
		} else if !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("batch items with a half message: %v, want ErrInvalidArgument", err)
		}
		schedHas(t, b, mq.TransHalfTopic, 0, 1)
	})
}

// An open transaction is checked TransactionTimeout after it was stored, then every
// TransactionCheckInterval, TransactionCheckMax times; then it is discarded.
func TestOpenTransactionCheckedThenDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ck := &checkLog{}
		b := schedBroker(t, "", &Options{TransactionTimeout: 2 * time.Second, TransactionCheckInterval: 10 * time.Second, TransactionCheckMax: 3})
		b.SetTransactionChecker(ck.ask)
		res := sendHalf(t, b, "pg", "T", 2, "body", "U1")
		time.Sleep(1999 * time.Millisecond)
		synctest.Wait()
		if n := len(ck.list()); n != 0 {
			t.Fatalf("checked %d times before TransactionTimeout", n)
		}
		for i := 1; i <= 3; i++ {
			time.Sleep(time.Millisecond)
			synctest.Wait()
			checks := ck.list()
			if len(checks) != i {
				t.Fatalf("at %v: %d checks, want %d", time.Since(bubbleStart), len(checks), i)
			}
			c := checks[i-1]
			if c.Group != "pg" || c.HalfOffset != res.QueueOffset || c.CommitLogOffset != res.CommitLogOffset || c.Check != int32(i) ||
				c.TransactionID != "U1" || c.Message.Topic != "T" || c.Message.QueueID != 2 || string(c.Message.Body) != "body" ||
				c.Message.Properties["user"] != "v-U1" {
				t.Fatalf("check %d: %+v", i, c)
			}
			// Another transaction, begun and ended meanwhile, wakes the checker early: no
			// check of this one is due.
			time.Sleep(5 * time.Second)
			endTx(t, b, "pg", sendHalf(t, b, "pg", "T", 0, "other", fmt.Sprint("O", i)), TxRollback)
			synctest.Wait()
			if n := len(ck.list()); n != i {
				t.Fatalf("at %v: %d checks, want %d", time.Since(bubbleStart), n, i)
			}
			time.Sleep(5*time.Second - time.Millisecond)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		schedHas(t, b, mq.TransOpTopic, 0, 4) // the other three, and this one discarded
		time.Sleep(time.Hour)
		if n := len(ck.list()); n != 3 {
			t.Fatalf("%d checks after the last one, want 3", n)
		}
		schedHas(t, b, "T", 2, 0)
		endTx(t, b, "pg", res, TxCommit) // too late: it ended
		schedHas(t, b, "T", 2, 0)
		if st, err := b.TransactionStats(); err != nil || st != (TransactionStats{RolledBack: 3, Discarded: 1, Checks: 3}) {
			t.Fatalf("TransactionStats %+v, %v: want 3 rolled back, 1 discarded, 3 checks, none open", st, err)
		}
	})
}

// A check's answer ends the transaction, and no check follows.
func TestCheckAnswerEndsTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ck := &checkLog{}
		b := schedBroker(t, "", &Options{TransactionTimeout: time.Second, TransactionCheckInterval: 5 * time.Second})
		ck.answer = func(c TransactionCheck) {
			if err := b.EndTransaction(context.Background(), EndTransaction{ProducerGroup: c.Group, HalfOffset: c.HalfOffset,
				CommitLogOffset: c.CommitLogOffset, Outcome: TxCommit, FromCheck: true}); err != nil {
				t.Errorf("answer: %v", err)
			}
		}
		b.SetTransactionChecker(ck.ask)
		sendHalf(t, b, "pg", "T", 0, "late", "U1")
		time.Sleep(2 * time.Second)
		schedHas(t, b, "T", 0, 1)
		time.Sleep(time.Minute)
		if n := len(ck.list()); n != 1 {
			t.Fatalf("%d checks, want 1", n)
		}
	})
}

// What ended stays ended across a reopen, and what is open is checked again.
func TestTransactionsAcrossReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		o := &Options{TransactionTimeout: time.Second, TransactionCheckInterval: time.Minute}
		b := schedBroker(t, dir, o)
		first := sendHalf(t, b, "pg", "T", 0, "a", "U1")
		second := sendHalf(t, b, "pg", "T", 0, "b", "U2")
		third := sendHalf(t, b, "pg", "T", 0, "c", "U3")
		endTx(t, b, "pg", first, TxCommit)
		endTx(t, b, "pg", third, TxRollback) // ended past an open one: read again from its op record
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		ck := &checkLog{}
		b = schedBroker(t, dir, o)
		b.SetTransactionChecker(ck.ask)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		checks := ck.list()
		if len(checks) != 1 || checks[0].HalfOffset != second.QueueOffset {
			t.Fatalf("checks after the reopen: %+v, want one, of the open transaction (half offset %d)", checks, second.QueueOffset)
		}
		endTx(t, b, "pg", second, TxCommit)
		endTx(t, b, "pg", first, TxCommit) // ended before the reopen
		schedHas(t, b, "T", 0, 2)
		if got := schedRead(t, b, "T", 0); string(got[0].Body) != "a" || string(got[1].Body) != "b" {
			t.Fatalf("delivered %q, %q", got[0].Body, got[1].Body)
		}
		// Everything ended: the progress moves past all three and survives another reopen.
		time.Sleep(time.Minute)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = schedBroker(t, dir, o)
		if half, _ := b.offsets.get(txnHalfKey); half != 3 {
			t.Fatalf("half topic progress %d after everything ended, want 3", half)
		}
		if gts, err := b.GroupTopics(); err != nil || len(gts) != 0 {
			t.Fatalf("GroupTopics %v, %v: the checker's progress is no consumer group's", gts, err)
		}
		b.SetTransactionChecker(ck.ask)
		time.Sleep(time.Hour)
		if n := len(ck.list()); n != 1 {
			t.Fatalf("%d checks in all, want 1", n)
		}
	})
}

// A committed message keeps its TRAN_MSG mark: sent back for a retry, or sent to a retry
// topic by a consumer whose send-back failed, it is a retry like any other, not a half
// message.
func TestCommittedMessageRetriesAsAnyOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		endTx(t, b, "pg", sendHalf(t, b, "pg", "T", 0, "retry me", "U1"), TxCommit)
		got := schedRead(t, b, "T", 0)[0]
		ctx := context.Background()
		if err := b.SendBack(ctx, mq.SendBackRequest{Group: "g", CommitLogOffset: got.Pos, DelayLevel: -1}); err != nil {
			t.Fatal(err)
		}
		schedHas(t, b, mq.DLQTopic("g"), 0, 1)
		m := &mq.Message{Topic: mq.RetryTopic("g"), Body: []byte("fallback"), Properties: map[string]string{
			mq.PropertyTransactionPrepared: "true", mq.PropertyProducerGroup: "pg", mq.PropertyReconsumeTime: "1", mq.PropertyDelayLevel: "1"}}
		if _, err := b.Send(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		schedHas(t, b, mq.TransHalfTopic, 0, 1) // the first half message only
	})
}
