package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// sendN sends n short messages and returns their ids.
func sendN(t *testing.T, p rocketmq.Producer, topic, label string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = sendSync(t, p, newMsg(topic, []byte(fmt.Sprintf("%s %d", label, i)), label, nil, nil)).MsgID
	}
	return out
}

// deliveredOnce checks that each id in want was delivered exactly once in gs and returns how
// many each member consumed.
func deliveredOnce(t *testing.T, gs []got, want []string, phase string) map[string]int {
	t.Helper()
	idx := byID(gs)
	per := map[string]int{}
	for _, id := range want {
		d := idx[id]
		if len(d) != 1 {
			t.Errorf("%s: message %s delivered %d times, want once:%s", phase, id, len(d), describe(d))
		}
		for _, g := range d {
			per[g.by]++
		}
	}
	return per
}

// only returns the deliveries of ids.
func only(gs []got, ids []string) []got {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []got
	for _, g := range gs {
		if want[g.msg.MsgId] {
			out = append(out, g)
		}
	}
	return out
}

// TestClusteringTwoProcesses runs a clustering group of two members: A in this process and B in
// a child process. It checks that
//   - A alone consumes what was sent before B joined;
//   - once B has joined and the queues are split (a run of 8 messages each consumed exactly
//     once, by both members together; bounded at 90 s), 40 more messages are each consumed
//     exactly once across the two members, and both members consume some;
//   - after B shuts down (committing its offsets), A takes over B's queues (rebalance within the
//     client's 20 s period, sooner on the broker's NOTIFY_CONSUMER_IDS_CHANGED) and consumes
//     every message sent after B left, and nothing consumed before is delivered again.
func TestClusteringTwoProcesses(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("cluster")
	p := newProducer(t, group)
	col := newCollector()

	before := sendN(t, p, topic, "before", 8)
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("A"))
	if gs, ok := col.waitIDs(readBackTimeout, before); !ok {
		t.Fatalf("A alone: messages never arrived: %v; got:%s", missing(gs, before), describe(gs))
	}
	deliveredOnce(t, col.snapshot(), before, "A alone")

	b := startMember(t, "B", group, topic, "clustering", col)

	// Join: trickle messages until the last 8, each at least 1 s old, were consumed once
	// each and by both members.
	var trickle []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		trickle = append(trickle, sendN(t, p, topic, "join", 1)...)
		gs, _ := col.waitFor(300*time.Millisecond, func([]got) bool { return false })
		if splitDone(gs, trickle, 8) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B joined but the queues were not split within 90s: the last 8 messages were not each "+
				"consumed once by A and B together; deliveries of the join phase:%s", describe(only(gs, trickle)))
		}
	}
	if gs, ok := col.waitIDs(readBackTimeout, trickle); !ok {
		t.Fatalf("join phase: messages never arrived: %v", missing(gs, trickle))
	}
	if n := len(only(col.snapshot(), trickle)) - len(trickle); n > 0 {
		t.Logf("join phase: %d redeliveries while the queues moved (allowed: at-least-once)", n)
	}

	steady := sendN(t, p, topic, "steady", 40)
	if gs, ok := col.waitIDs(readBackTimeout, steady); !ok {
		t.Fatalf("steady phase: messages never arrived: %v", missing(gs, steady))
	}
	per := deliveredOnce(t, col.settle(2*time.Second), steady, "steady phase")
	if per["A"] == 0 || per["B"] == 0 {
		t.Errorf("steady phase: A consumed %d, B consumed %d; want both > 0", per["A"], per["B"])
	}
	t.Logf("steady phase: A consumed %d, B consumed %d", per["A"], per["B"])

	b.stop(t)
	seen := len(col.snapshot())
	after := sendN(t, p, topic, "after", 20)
	gs, ok := col.waitIDs(readBackTimeout, after)
	if !ok {
		t.Fatalf("after B left: messages never arrived within %v (A never took B's queues?): %v; deliveries since B left:%s",
			readBackTimeout, missing(gs, after), describe(gs[seen:]))
	}
	gs = col.settle(2 * time.Second)
	per = deliveredOnce(t, gs, after, "after B left")
	if per["A"] != len(after) {
		t.Errorf("after B left: A consumed %d of %d", per["A"], len(after))
	}
	var earlier []string
	earlier = append(append(append(earlier, before...), trickle...), steady...)
	if re := only(gs[seen:], earlier); len(re) > 0 {
		t.Errorf("after B left, %d messages consumed before were delivered again (B's offsets, committed "+
			"with request 15 at its shutdown, were not used):%s", len(re), describe(re))
	}
}

// splitDone reports whether the last n of sent, each sent at least a second ago, were consumed
// exactly once each, and by both members A and B together.
func splitDone(gs []got, sent []string, n int) bool {
	// Messages go out every ~300 ms, so the newest 4 are younger than a second.
	const young = 4
	if len(sent) < n+young {
		return false
	}
	idx := byID(gs)
	by := map[string]bool{}
	for _, id := range sent[len(sent)-n-young : len(sent)-young] {
		d := idx[id]
		if len(d) != 1 {
			return false
		}
		by[d[0].by] = true
	}
	return by["A"] && by["B"]
}

// TestBroadcastingTwoProcesses runs a broadcasting group of two members, A in this process and
// B in a child process, both from the first offset: each must consume every message exactly
// once, those sent before they started and those sent while they run.
func TestBroadcastingTwoProcesses(t *testing.T) {
	needBroker(t)
	t.Parallel()
	topic, group := names("bcast")
	// Broadcasting members keep their offsets in files under the client's local offset
	// directory, one folder per group; remove this group's after both members stopped.
	offsetDir := os.Getenv("rocketmq.client.localOffsetStoreDir")
	if offsetDir == "" {
		offsetDir = filepath.Join(os.Getenv("HOME"), ".rocketmq_client_go")
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(offsetDir, group)) })
	p := newProducer(t, group)
	col := newCollector()

	before := sendN(t, p, topic, "before", 6)
	startPush(t, group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("A"),
		consumer.WithConsumerModel(consumer.BroadCasting))
	startMember(t, "B", group, topic, "broadcasting", col)
	during := sendN(t, p, topic, "during", 6)
	all := append(append([]string(nil), before...), during...)

	gs, ok := col.waitFor(readBackTimeout, func(gs []got) bool {
		return len(missing(by(gs, "A"), all)) == 0 && len(missing(by(gs, "B"), all)) == 0
	})
	if !ok {
		t.Fatalf("after %v: A misses %v, B misses %v", readBackTimeout, missing(by(gs, "A"), all), missing(by(gs, "B"), all))
	}
	gs = col.settle(2 * time.Second)
	for _, name := range []string{"A", "B"} {
		idx := byID(by(gs, name))
		for _, id := range all {
			if len(idx[id]) != 1 {
				t.Errorf("member %s consumed %s %d times, want once", name, id, len(idx[id]))
			}
		}
	}
}

// by returns the deliveries consumed by member name.
func by(gs []got, name string) []got {
	var out []got
	for _, g := range gs {
		if g.by == name {
			out = append(out, g)
		}
	}
	return out
}
