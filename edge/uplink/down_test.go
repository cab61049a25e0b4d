package uplink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// TestDownMirrorsOnce: a down rule stores an upstream topic's messages locally, queue for
// queue in order with their ids, keys, tags and properties, and commits the group's offset
// upstream; restarted with its cursors and the group's offsets rolled back, as by a crash
// after a local store and before the cursor moved, it stores none of them twice.
func TestDownMirrorsOnce(t *testing.T) {
	h := startHub(t, "")
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "cmd", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	sendUniq(t, h.b, "cmd", 0, 500)
	local := openLocal(t, t.TempDir(), nil)
	opts := Options{Down: []DownRule{{Name: "d", Topic: "cmd", LocalTopic: "cmd-local", BatchSize: 16,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}}
	u := startUplink(t, local, opts)
	waitFor(t, 30*time.Second, "250 stored locally", func() bool { return u.Stats().Down[0].Received >= 250 })
	early, err := local.ForwardCursors("down:d")
	if err != nil || len(early) == 0 {
		t.Fatalf("cursors %v, %v", early, err)
	}
	sendUniq(t, h.b, "cmd", 500, 500)
	waitFor(t, 30*time.Second, "1000 stored locally", func() bool {
		s := u.Stats().Down[0]
		return s.Received == 1000 && s.Lag == 0
	})
	if s := u.Stats().Down[0]; s.State != Connected || s.Queues != 4 {
		t.Fatalf("stats %+v: want connected, 4 queues", s)
	}
	u.Close()
	checkQueues(t, readAll(t, h.b, "cmd"), readAll(t, local, "cmd-local"), 0)
	committed, err := h.b.QueryOffset(context.Background(), "gw1_d", mq.MessageQueue{Topic: "cmd", BrokerName: "hub", QueueID: 0})
	if err != nil || committed <= 0 {
		t.Fatalf("group offset upstream %d, %v: want the mirrored position", committed, err)
	}

	// As if it had crashed after storing the later batches and before their cursors moved
	// and the group's offsets were committed.
	if err := local.PutForwardCursors(early); err != nil {
		t.Fatal(err)
	}
	for _, c := range early {
		if c.Topic == "cmd@hub" {
			if err := h.b.CommitOffset(context.Background(), "gw1_d", mq.MessageQueue{Topic: "cmd", BrokerName: "hub", QueueID: c.QueueID}, c.Offset); err != nil {
				t.Fatal(err)
			}
		}
	}
	u = startUplink(t, local, opts)
	sendUniq(t, h.b, "cmd", 1000, 100)
	waitFor(t, 30*time.Second, "100 more stored locally", func() bool {
		s := u.Stats().Down[0]
		return s.Queues == 4 && s.Lag == 0 && count(t, local, "cmd-local") >= 1100
	})
	time.Sleep(100 * time.Millisecond)
	if s := u.Stats().Down[0]; s.Received != 100 {
		t.Fatalf("after the restart %d stored, want 100", s.Received)
	}
	checkQueues(t, readAll(t, h.b, "cmd"), readAll(t, local, "cmd-local"), 0)
}

// sendUniq sends n messages as sendN does, every one with a UNIQ_KEY: a message without one
// gets its offset message id, which names the store host as its reader sees it.
func sendUniq(t testing.TB, b *edge.Broker, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		m := &mq.Message{Topic: topic, Tags: fmt.Sprintf("t%d", i%3), Keys: fmt.Sprintf("k%d", i),
			Properties: map[string]string{"seq": fmt.Sprint(i), mq.PropertyUniqKey: fmt.Sprintf("UNIQ%028d", i)},
			Body:       []byte(fmt.Sprintf("message %d", i))}
		if _, err := b.Send(context.Background(), m, mq.ShardingKey(fmt.Sprint(i%8))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestDownSharesGroup: two gateways with the same down rule and group divide the upstream
// queues between them (two each of four), and every upstream message lands in exactly one
// of them; a gateway that stops hands its queues to the other, one that starts again takes
// its share back, messages flowing all along: none is lost, and any stored twice (a batch
// in flight at a handover) are counted and few.
func TestDownSharesGroup(t *testing.T) {
	const batch = 16
	h := startHub(t, "")
	if err := h.b.CreateTopic(edge.TopicConfig{Name: "cmd", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	gw := []*edge.Broker{openLocal(t, t.TempDir(), nil), nil}
	var err error
	if gw[1], err = edge.Open(t.TempDir(), brokerOptions(t, "gw2", nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw[1].Close() })
	opts := Options{ScanInterval: time.Second, Down: []DownRule{{Name: "d", Topic: "cmd", Group: "shared", BatchSize: batch,
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}}
	us := []*Uplink{startUplink(t, gw[0], opts), startUplink(t, gw[1], opts)}
	held := func(i int) int { return us[i].Stats().Down[0].Queues }
	waitFor(t, 10*time.Second, "the queues divided two and two", func() bool { return held(0) == 2 && held(1) == 2 })

	received := func() map[string]int { return storedKeys(t, "cmd", gw...) }
	sendUniq(t, h.b, "cmd", 0, 1000)
	checkOnce(t, received, 1000, 0)
	if a, b := count(t, gw[0], "cmd"), count(t, gw[1], "cmd"); a == 0 || b == 0 {
		t.Fatalf("gateways stored %d and %d: want both a share", a, b)
	}

	// Gateway 2 stops while messages arrive: gateway 1 takes all four queues.
	sending := sendSlowly(t, h.b, "cmd", 1000, 2000)
	waitFor(t, 10*time.Second, "gateway 2 at work", func() bool { return len(received()) > 1100 })
	us[1].Close()
	waitFor(t, 10*time.Second, "gateway 1 holding all four queues", func() bool { return held(0) == 4 })
	// Its mirrors stopped cleanly: taken again, they need not look for a crash's batch.
	cs, err := gw[1].ForwardCursors("down:d")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if strings.HasSuffix(c.Topic, "#local") && c.Offset != stoppedCleanly {
			t.Fatalf("gateway 2 closed: cursor %+v, want its local end marked stopped cleanly", c)
		}
	}
	if err := <-sending; err != nil {
		t.Fatal(err)
	}
	checkOnce(t, received, 2000, 2*batch)

	// It starts again while messages arrive: the queues are divided again.
	sending = sendSlowly(t, h.b, "cmd", 2000, 3000)
	us[1] = startUplink(t, gw[1], opts)
	waitFor(t, 10*time.Second, "the queues divided again", func() bool { return held(0) == 2 && held(1) == 2 })
	if err := <-sending; err != nil {
		t.Fatal(err)
	}
	checkOnce(t, received, 3000, 4*batch)
}

// sendSlowly sends messages from..to-1 as sendUniq does, 50 at a time with a pause between,
// from a goroutine; the channel gets the first error, or nil when all are sent.
func sendSlowly(t testing.TB, b *edge.Broker, topic string, from, to int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := from; i < to; i++ {
			m := &mq.Message{Topic: topic, Keys: fmt.Sprintf("k%d", i), Body: []byte(fmt.Sprintf("message %d", i)),
				Properties: map[string]string{mq.PropertyUniqKey: fmt.Sprintf("UNIQ%028d", i)}}
			if _, err := b.Send(context.Background(), m, mq.ShardingKey(fmt.Sprint(i%8))); err != nil {
				done <- fmt.Errorf("send %d: %w", i, err)
				return
			}
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		done <- nil
	}()
	return done
}

// storedKeys counts the messages of topic stored on the brokers bs, by key.
func storedKeys(t testing.TB, topic string, bs ...*edge.Broker) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, b := range bs {
		for _, ms := range readAll(t, b, topic) {
			for _, m := range ms {
				n[m.Keys]++
			}
		}
	}
	return n
}

// checkOnce waits until received (counts by key) has sent keys, and fails t if more than
// maxDup messages were received more than once.
func checkOnce(t testing.TB, received func() map[string]int, sent, maxDup int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d messages received", sent), func() bool { return len(received()) == sent })
	dup := 0
	for _, n := range received() {
		dup += n - 1
	}
	if dup > maxDup {
		t.Fatalf("%d messages received twice, want at most %d (the batches in flight)", dup, maxDup)
	}
	t.Logf("%d sent, %d received twice", sent, dup)
}
