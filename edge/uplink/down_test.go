package uplink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// TestDownMirrorsOnce: a down rule stores an upstream topic's messages locally, queue for
// queue in order with their ids, keys, tags and properties, and commits the group's offset
// upstream; restarted with its cursors rolled back, as by a crash after a local store and
// before the cursor moved, it stores none of them twice.
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

	// As if it had crashed after storing the later batches and before their cursors moved.
	if err := local.PutForwardCursors(early); err != nil {
		t.Fatal(err)
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
