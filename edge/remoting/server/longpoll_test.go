package server

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// The long-polling tests run in a synctest bubble over net.Pipe connections (in-memory,
// so that a goroutine waiting on one is durably blocked): the fake clock runs the holds.

// TestLongPollAnsweredBySend: a pull that finds nothing parks, and a send to its queue
// answers it at once with the message.
func TestLongPollAnsweredBySend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{})
		c := pipeClient(t, s)
		start := time.Now()
		ch := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, 20000, "*"), nil))
		synctest.Wait()
		select {
		case r := <-ch:
			t.Fatalf("pull answered %d before any message", r.Code)
		default:
		}
		time.Sleep(time.Second)
		p := pipeClient(t, s)
		p.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("hello"))
		r := c.wait(ch)
		if r.Code != remoting.Success || time.Since(start) != time.Second {
			t.Fatalf("parked pull: code %d after %v, want 0 after 1s", r.Code, time.Since(start))
		}
		if recs := decodeRecords(t, r.Body); len(recs) != 1 || recs[0].body != "hello" || r.Ext["nextBeginOffset"] != "1" {
			t.Fatalf("parked pull got %v, next %s", recs, r.Ext["nextBeginOffset"])
		}
	})
}

// TestParkedPullsReuseWorkers: pulls parked one after another, each answered by a send,
// park in one pull worker, which ends after pullWorkerIdle without one, and when the
// server shuts down.
func TestParkedPullsReuseWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{})
		c, p := pipeClient(t, s), pipeClient(t, s)
		cycle := func(off int64) {
			ch := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, off, pullSuspend|pullSubscription, 20000, "*"), nil))
			synctest.Wait() // parked
			p.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("m"))
			if r := c.wait(ch); r.Code != remoting.Success {
				t.Fatalf("pull at %d answered %d", off, r.Code)
			}
			synctest.Wait() // the worker waits for the next
		}
		for off := range int64(20) {
			cycle(off)
		}
		if n := s.stats.pullWorkersGo.Load(); n != 1 {
			t.Fatalf("20 parked pulls one after another started %d pull workers, want 1", n)
		}
		if n := s.Stats().PullWorkers; n != 1 {
			t.Fatalf("%d pull workers alive, want 1", n)
		}
		time.Sleep(pullWorkerIdle)
		synctest.Wait() // the idle worker ended
		if n := s.Stats().PullWorkers; n != 0 {
			t.Fatalf("%d pull workers alive after their idle time, want 0", n)
		}
		cycle(20)
		if n := s.stats.pullWorkersGo.Load(); n != 2 {
			t.Fatalf("a pull parked after the worker idled out: %d workers started, want 2", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		// Shutdown returns once the workers ended, without waiting for their idle time:
		// the bubble's end checks that no goroutine is left.
		if d := time.Since(start); d != 0 {
			t.Fatalf("Shutdown took %v with an idle pull worker", d)
		}
	})
}

// TestOwnSendAnswersParkedPullInline: a send that wakes a pull parked by its own
// connection has the pull answered by the connection's reader, before it writes the send's
// reply, not by a pull worker; a send from another connection wakes it to a pull worker.
// Async flush: the send wakes the pull as the reader stores it (with sync flush the
// store's flush does, once the message is on disk).
func TestOwnSendAnswersParkedPullInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, &edge.Options{Store: &store.Options{SegmentSize: 4 << 20, MaxMessageSize: testMaxMessage,
			QueueSegmentEntries: 1024, MetaNoSync: true, Flush: commitlog.FlushAsync}})
		s := pipeServer(t, b, Options{})
		c, p := pipeClient(t, s), pipeClient(t, s)
		pull := func(off int64) chan *remoting.Command {
			ch := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, off, pullSuspend|pullSubscription, 20000, "*"), nil))
			synctest.Wait() // parked
			return ch
		}
		ch := pull(0)
		sent := c.write(remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte("own")))
		if r := c.wait(sent); r.Code != remoting.Success {
			t.Fatalf("send answered %d", r.Code)
		}
		r := c.wait(ch)
		if recs := decodeRecords(t, r.Body); r.Code != remoting.Success || len(recs) != 1 || recs[0].body != "own" {
			t.Fatalf("parked pull answered %d with %v", r.Code, recs)
		}
		if n := s.Stats().PullsAnsweredInline; n != 1 {
			t.Fatalf("a pull woken by its own connection's send: %d answered by the reader, want 1", n)
		}
		ch = pull(1)
		p.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("other"))
		if r := c.wait(ch); r.Code != remoting.Success {
			t.Fatalf("parked pull answered %d", r.Code)
		}
		if n := s.Stats().PullsAnsweredInline; n != 1 {
			t.Fatalf("a pull woken by another connection's send: %d answered by a reader, want 1 (the first)", n)
		}
	})
}

// TestParkedPullsHoldNoGoroutine: pulls parked in the broker (PullViewsOrPark) hold no
// pull worker: 200 pulls parked at once, on 200 topics, are carried by a few workers, which
// are idle while the pulls wait, and no other goroutine is left per pull; each is answered
// when its message arrives.
func TestParkedPullsHoldNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{MaxInFlight: 1000})
		c, p := pipeClient(t, s), pipeClient(t, s)
		const n = 200
		topic := func(i int) string { return "T" + strconv.Itoa(i) }
		for i := range n {
			p.mustCall(remoting.Success, remoting.SendMessageV2, sendExt(topic(i), 0, ""), []byte("m"))
		}
		synctest.Wait()
		before := runtime.NumGoroutine()
		var parked []chan *remoting.Command
		for i := range n {
			parked = append(parked, c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", topic(i), 0, 1, pullSuspend|pullSubscription, 20000, "*"), nil)))
		}
		synctest.Wait() // all parked
		// The workers that carried the pulls to the broker are idle, holding none of them
		// (as many as pulls were handed over at once: more on a slow or busy machine, as
		// under qemu, up to one a pull); nothing else grew.
		s.pullPool.mu.Lock()
		idle := len(s.pullPool.idle)
		s.pullPool.mu.Unlock()
		if grew := runtime.NumGoroutine() - before; grew-idle > 10 {
			t.Fatalf("%d pulls parked: %d more goroutines, %d of them idle pull workers", n, grew, idle)
		}
		for i := range n {
			p.mustCall(remoting.Success, remoting.SendMessageV2, sendExt(topic(i), 0, ""), []byte("m"))
			if r := c.wait(parked[i]); r.Code != remoting.Success {
				t.Fatalf("parked pull %d answered %d", i, r.Code)
			}
		}
	})
}

// TestPullPoolLastIdleFirst: the pull pool hands a pull to the worker that went idle last,
// so that after a burst of pulls woken at once the burst's extra workers stay idle and end
// after pullWorkerIdle (handed out oldest first, each would get a pull before its idle time
// ran out at any steady rate); a worker whose idle time ran out leaves, unless taken.
func TestPullPoolLastIdleFirst(t *testing.T) {
	var p pullPool
	a, b, c := &pullWorkerSlot{}, &pullWorkerSlot{}, &pullWorkerSlot{}
	p.put(a)
	p.put(b)
	p.put(c)
	if w := p.take(); w != c {
		t.Fatalf("took %p, want the last idle %p", w, c)
	}
	if !p.leave(a) {
		t.Fatal("the longest idle worker could not leave")
	}
	if w := p.take(); w != b {
		t.Fatalf("took %p, want %p", w, b)
	}
	if p.leave(b) {
		t.Fatal("a worker taken could leave")
	}
	if w := p.take(); w != nil {
		t.Fatalf("took %p from an empty pool", w)
	}
}

// TestLongPollBoundedBySuspend: a parked pull with nothing arriving is answered
// PULL_NOT_FOUND when the request's suspend time runs out, not before; a pull without the
// suspend bit is answered at once.
func TestLongPollBoundedBySuspend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{})
		c := pipeClient(t, s)
		for _, suspend := range []int64{3000, 12000} {
			start := time.Now()
			r := c.mustCall(remoting.PullNotFound, remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, suspend, "*"), nil)
			if got := time.Since(start); got != time.Duration(suspend)*time.Millisecond {
				t.Errorf("suspend %d ms: answered after %v", suspend, got)
			}
			if r.Ext["nextBeginOffset"] != "0" {
				t.Errorf("nextBeginOffset %q, want 0", r.Ext["nextBeginOffset"])
			}
		}
		start := time.Now()
		c.mustCall(remoting.PullNotFound, remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 20000, "*"), nil)
		if got := time.Since(start); got != 0 {
			t.Errorf("a pull without the suspend bit waited %v", got)
		}
	})
}

// TestShutdownAnswersParkedPulls: Shutdown answers a parked pull PULL_NOT_FOUND at the
// request's offset, writes the reply, then closes the connection; the broker stays open.
func TestShutdownAnswersParkedPulls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		for range 3 {
			if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("x")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		s := pipeServer(t, b, Options{})
		c := pipeClient(t, s)
		ch := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 3, pullSuspend|pullSubscription, 20000, "*"), nil))
		synctest.Wait()
		start := time.Now()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		r := c.wait(ch)
		if r.Code != remoting.PullNotFound || r.Ext["nextBeginOffset"] != "3" || r.Ext["maxOffset"] != "3" || time.Since(start) != 0 {
			t.Fatalf("parked pull at Shutdown: code %d ext %v after %v; want 19 at 3 at once", r.Code, r.Ext, time.Since(start))
		}
		if !c.closed() {
			t.Fatal("connection open after Shutdown")
		}
		if _, err := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: "T"}); err != nil {
			t.Fatalf("broker after Shutdown: %v", err)
		}
	})
}

// TestShutdownBoundedByContext: a reply that cannot be written (the client reads nothing)
// holds Shutdown only until its ctx ends; then everything is closed at once.
func TestShutdownBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, nil)
		s := pipeServer(t, b, Options{WriteTimeout: time.Minute})
		a, bp := net.Pipe()
		s.admit(bp, false)
		frame, _ := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil).AppendFrame(nil)
		if _, err := a.Write(frame); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("Shutdown returned after %v, want 2s", got)
		}
		if _, err := a.Read(make([]byte, 1)); err == nil {
			t.Error("connection open after Shutdown")
		}
		a.Close()
	})
}

// TestCloseAbandonsParkedPulls: Close ends parked pulls without an answer and returns
// once every goroutine of the server has.
func TestCloseAbandonsParkedPulls(t *testing.T) {
	b := openBrokerT(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	ch := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, 20000, "*"), nil))
	c.mustCall(remoting.Success, remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !c.closed() {
		t.Fatal("connection open after Close")
	}
	select {
	case r := <-ch:
		t.Errorf("parked pull answered %d by Close", r.Code)
	default:
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("the address accepts connections after Close")
	}
}

// TestParkedPullLeavesConnectionServed: a pull that finds messages is answered at once
// and one that must wait parks without holding its connection: pulls of another queue,
// found or parking themselves, and sends on the same connection are answered while it
// waits, and a send to its queue answers it. The commit offset a parked pull carries is
// stored when it arrives.
func TestParkedPullLeavesConnectionServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, nil)
		if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 3, WriteQueues: 3}); err != nil {
			t.Fatal(err)
		}
		s := pipeServer(t, b, Options{})
		c := pipeClient(t, s)
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 1, ""), []byte("one"))
		h := pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription|pullCommitOffset, 20000, "*")
		h["commitOffset"] = "3"
		parked := c.write(remoting.NewRequest(remoting.PullMessage, h, nil))
		parked2 := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 2, 0, pullSuspend|pullSubscription, 20000, "*"), nil))
		synctest.Wait()
		found := c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "T", 1, 0, pullSuspend|pullSubscription, 20000, "*"), nil)
		if recs := decodeRecords(t, found.Body); len(recs) != 1 || recs[0].body != "one" {
			t.Fatalf("found pull got %v", recs)
		}
		if off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 0}); err != nil || off != 3 {
			t.Fatalf("parked pull's commit: offset %d, %v; want 3", off, err)
		}
		select {
		case r := <-parked:
			t.Fatalf("pull of an empty queue answered %d before any message", r.Code)
		case r := <-parked2:
			t.Fatalf("pull of an empty queue answered %d before any message", r.Code)
		default:
		}
		time.Sleep(time.Second)
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("two"))
		r := c.wait(parked)
		if recs := decodeRecords(t, r.Body); r.Code != remoting.Success || len(recs) != 1 || recs[0].body != "two" {
			t.Fatalf("parked pull: code %d, records %v", r.Code, recs)
		}
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 2, ""), []byte("three"))
		if r := c.wait(parked2); r.Code != remoting.Success {
			t.Fatalf("second parked pull: code %d", r.Code)
		}
	})
}
