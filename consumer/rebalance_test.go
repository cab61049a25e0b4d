package consumer

import (
	"github.com/edgemq/edgemq/edge/mq"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
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
func TestRebalanceJoinLeave(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 4)
	sendN(t, b, "T", "a", 40, nil)
	all := newCounter()
	c1 := startConsumer(t, b, fastOptions(t, "g"), "T", all.listener())
	waitFor(t, 5*time.Second, "c1 owns 4 queues", func() bool { return len(queuesOf(c1, "T")) == 4 })
	c2 := startConsumer(t, b, fastOptions(t, "g"), "T", all.listener())
	waitFor(t, 5*time.Second, "queues split 2/2", func() bool {
		q1, q2 := queuesOf(c1, "T"), queuesOf(c2, "T")
		for q := range q1 {
			if q2[q] {
				return false
			}
		}
		return len(q1) == 2 && len(q2) == 2
	})
	sendN(t, b, "T", "b", 40, nil)
	waitFor(t, 10*time.Second, "all messages", func() bool { return all.distinct() == 80 })
	shutdown(t, c2)
	waitFor(t, 5*time.Second, "c1 owns 4 queues again", func() bool { return len(queuesOf(c1, "T")) == 4 })
	sendN(t, b, "T", "c", 40, nil)
	waitFor(t, 10*time.Second, "all messages after leave", func() bool { return all.distinct() == 120 })
}

// TestBroadcasting: every member gets every message, offsets are kept in a local file, and
// a restarted member resumes from it.
func TestBroadcasting(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	var cs [2]*counter
	var pcs [2]*PushConsumer
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for i := range pcs {
		o := fastOptions(t, "g")
		o.Model = mq.Broadcasting
		o.ClientID = "c" + string(rune('0'+i))
		o.OffsetDir = dirs[i]
		cs[i] = newCounter()
		pcs[i] = startConsumer(t, b, o, "T", cs[i].listener())
	}
	for _, pc := range pcs {
		waitFor(t, 5*time.Second, "all queues", func() bool { return len(queuesOf(pc, "T")) == 2 })
	}
	sendN(t, b, "T", "m", 30, nil)
	for i := range cs {
		waitFor(t, 10*time.Second, "every message at every member", func() bool { return cs[i].distinct() == 30 })
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
	o := fastOptions(t, "g")
	o.Model = mq.Broadcasting
	o.ClientID = "c0"
	o.OffsetDir = dirs[0]
	o.FromWhere = ConsumeFromFirstOffset
	again := newCounter()
	startConsumer(t, b, o, "T", again.listener())
	waitFor(t, 10*time.Second, "new messages after restart", func() bool { return again.distinct() == 10 })
	time.Sleep(100 * time.Millisecond)
	if n := again.total(); n != 10 {
		t.Fatalf("restarted member consumed %d messages, want only the 10 new ones", n)
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
