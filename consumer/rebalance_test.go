package consumer

import (
	"context"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
)

func queuesOf(pc *PushConsumer, topic string) map[int32]bool {
	out := map[int32]bool{}
	for _, queue := range pc.assigned() {
		if queue.Topic == topic {
			out[queue.QueueID] = true
		}
	}
	return out
}

// TestRebalanceJoinLeave: a second member takes half of the queues (no queue consumed by
// both once settled), every message is consumed at least once, and when it leaves the
// first member takes all queues again.
func TestRebalanceJoinLeave(t *testing.T) { overNet(t, true, testRebalanceJoinLeave) }

func testRebalanceJoinLeave(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	sendN(t, b, "T", "a", 40, nil)
	all := newCounter()
	c1 := startConsumer(t, b, fastOptions(t, "g"), "T", all.listener())
	waitFor(t, 30*time.Second, "c1 owns 4 queues", func() bool { return len(queuesOf(c1, "T")) == 4 })
	c2 := startConsumer(t, b, fastOptions(t, "g"), "T", all.listener())
	waitFor(t, 30*time.Second, "queues split 2/2", func() bool {
		q1, q2 := queuesOf(c1, "T"), queuesOf(c2, "T")
		for q := range q1 {
			if q2[q] {
				return false
			}
		}
		return len(q1) == 2 && len(q2) == 2
	})
	sendN(t, b, "T", "b", 40, nil)
	waitFor(t, 30*time.Second, "all messages", func() bool { return all.distinct() == 80 })
	shutdown(t, c2)
	waitFor(t, 30*time.Second, "c1 owns 4 queues again", func() bool { return len(queuesOf(c1, "T")) == 4 })
	sendN(t, b, "T", "c", 40, nil)
	waitFor(t, 30*time.Second, "all messages after leave", func() bool { return all.distinct() == 120 })
}

// TestBroadcasting: every member gets every message, offsets are kept in a local file, and
// a restarted member resumes from it.
func TestBroadcasting(t *testing.T) { synctest.Test(t, testBroadcasting) }

func testBroadcasting(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	var cs [2]*counter
	var pcs [2]*PushConsumer
	dirs := [2]string{t.TempDir(), t.TempDir()}
	options := func(i int) *Options {
		o := bubbleOptions(t, "g")
		o.Model = mq.Broadcasting
		o.ClientID = "c" + string(rune('0'+i))
		o.OffsetDir = dirs[i]
		return o
	}
	for i := range pcs {
		cs[i] = newCounter()
		pcs[i] = startConsumer(t, b, options(i), "T", cs[i].listener())
	}
	time.Sleep(time.Second)
	for i, pc := range pcs {
		if n := len(queuesOf(pc, "T")); n != 2 {
			t.Fatalf("member %d has %d queues, want all 2", i, n)
		}
	}
	sendN(t, b, "T", "m", 30, nil)
	time.Sleep(time.Second)
	for i := range cs {
		if n := cs[i].distinct(); n != 30 {
			t.Fatalf("member %d consumed %d messages, want every one of 30", i, n)
		}
	}
	shutdown(t, pcs[0])
	matches, _ := filepath.Glob(filepath.Join(dirs[0], "*", "*", "offsets.json"))
	if len(matches) != 1 {
		t.Fatalf("offset files %v", matches)
	}
	if data, err := os.ReadFile(matches[0]); err != nil || len(data) == 0 {
		t.Fatalf("offset file: %v", err)
	}
	sendN(t, b, "T", "n", 10, nil)
	again := newCounter()
	startConsumer(t, b, options(0), "T", again.listener())
	time.Sleep(time.Minute)
	if again.distinct() != 10 || again.total() != 10 {
		t.Fatalf("restarted member consumed %d messages, %d distinct; want only the 10 new ones", again.total(), again.distinct())
	}
}

// TestBroadcastingDefaultClientID: a broadcasting consumer given no client id keeps its
// local offsets under one that is the same in every run: a new consumer of the group on the
// same OffsetDir, also without a client id, resumes where the last one stopped.
func TestBroadcastingDefaultClientID(t *testing.T) { synctest.Test(t, testBroadcastingDefaultClientID) }

func testBroadcastingDefaultClientID(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	sendN(t, b, "T", "a", 20, nil)
	dir := t.TempDir()
	options := func() *Options {
		o := bubbleOptions(t, "g")
		o.Model = mq.Broadcasting
		o.OffsetDir = dir
		return o
	}
	first := newCounter()
	pc := startConsumer(t, b, options(), "T", first.listener())
	time.Sleep(time.Minute)
	if first.distinct() != 20 || first.total() != 20 {
		t.Fatalf("first consumer: %d messages, %d distinct; want 20", first.total(), first.distinct())
	}
	shutdown(t, pc)

	sendN(t, b, "T", "b", 10, nil)
	again := newCounter()
	startConsumer(t, b, options(), "T", again.listener())
	time.Sleep(time.Minute)
	if again.total() != 10 {
		t.Fatalf("second consumer: %d messages, want only the 10 sent since the first stopped", again.total())
	}
	for _, body := range bodies("b", 10) {
		if again.get(body) != 1 {
			t.Fatalf("second consumer: %s consumed %d times, want 1", body, again.get(body))
		}
	}
}

// TestRebalanceOnMembershipChange: the members of a group rebalance as soon as the broker
// reports a change, long before RebalanceInterval: when a member joins, when one leaves, and
// when one that crashed is dropped for missing heartbeats (120 s).
func TestRebalanceOnMembershipChange(t *testing.T) {
	synctest.Test(t, testRebalanceOnMembershipChange)
}

func testRebalanceOnMembershipChange(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	start := func(id string) *PushConsumer {
		o := bubbleOptions(t, "g")
		o.ClientID = id
		o.RebalanceInterval = time.Hour
		return startConsumer(t, b, o, "T", newCounter().listener())
	}
	owns := func(pc *PushConsumer, want ...int32) bool {
		got := queuesOf(pc, "T")
		if len(got) != len(want) {
			return false
		}
		for _, q := range want {
			if !got[q] {
				return false
			}
		}
		return true
	}
	check := func(when string, pc *PushConsumer, want ...int32) {
		t.Helper()
		if !owns(pc, want...) {
			t.Fatalf("%s: %s owns queues %v of T, want %v", when, pc.opts.ClientID, queuesOf(pc, "T"), want)
		}
	}
	a := start("a")
	time.Sleep(time.Second)
	check("alone", a, 0, 1, 2, 3)

	c := start("c")
	time.Sleep(time.Second)
	check("c joined", a, 0, 1)
	check("c joined", c, 2, 3)
	shutdown(t, c)
	time.Sleep(time.Second)
	check("c left", a, 0, 1, 2, 3)

	c = start("c")
	time.Sleep(time.Second)
	check("c joined again", a, 0, 1)
	c.crash()
	time.Sleep(time.Minute)
	check("c crashed a minute ago", a, 0, 1)
	time.Sleep(edge.DefaultOptions.HeartbeatTimeout + edge.DefaultOptions.HeartbeatCheckInterval)
	check("c dropped", a, 0, 1, 2, 3)
}

// noPiggyback is a Broker that drops the offsets pulls carry, so that only the consumer's
// explicit commits reach it.
type noPiggyback struct{ *edge.Broker }

func (p noPiggyback) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	req.CommitOffset = 0
	return p.Broker.Pull(ctx, req)
}

// TestHandOverNoDuplicates: the next owner of a queue starts where the last one stopped,
// which has consumed everything but committed nothing yet (PersistInterval is an hour, and
// pulls carry no offsets): a member that leaves with Shutdown persists its offsets before
// it leaves the group, whose other members then take its queues; concurrently and in order.
// In order, a member that joins gets its queues only once their old owner has let them go,
// which persists their offsets and unlocks them, so it starts where the old owner stopped
// too. (Concurrently, the joining member may read a queue's offset before the old owner
// persists it: what was consumed since its last commit is consumed again.)
func TestHandOverNoDuplicates(t *testing.T) { eachKind(t, testHandOverNoDuplicates) }

func testHandOverNoDuplicates(t *testing.T, orderly bool) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	log := newClientLog()
	start := func(id string) *PushConsumer {
		o := bubbleOptions(t, "g")
		o.ClientID = id
		o.PersistInterval = time.Hour
		l := listenerOf(orderly, func(msgs []*Message) bool {
			log.add(id, msgs)
			return true
		})
		return startConsumer(t, noPiggyback{b}, o, "T", l)
	}
	want := map[string]string{}
	// send sends 5 messages to each queue, which owners[queue] should consume.
	send := func(batch string, owners ...string) {
		for q := range 4 {
			prefix := fmt.Sprintf("q%d-%s", q, batch)
			sendN(t, b, "T", prefix, 5, mq.QueueIndex(q))
			for _, body := range bodies(prefix, 5) {
				want[body] = owners[q]
			}
		}
	}
	if orderly {
		send("a", "a", "a", "a", "a")
	}
	start("a")
	time.Sleep(time.Second)
	log.check(t, "a alone", want)

	bc := start("b")
	time.Sleep(time.Minute) // an orderly member retries a queue still locked at its next rebalance (20 s)
	if got := queuesOf(bc, "T"); len(got) != 2 || !got[2] || !got[3] {
		t.Fatalf("b owns queues %v, want 2 and 3", got)
	}
	log.check(t, "b joined", want)
	send("b", "a", "a", "b", "b")
	time.Sleep(time.Second)
	log.check(t, "a and b", want)

	shutdown(t, bc)
	time.Sleep(time.Second)
	send("c", "a", "a", "a", "a")
	time.Sleep(time.Second)
	log.check(t, "b left", want)
}
