package edge

import (
	"context"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestTrafficStats: the sums count the sends to every topic and the pulls of every group,
// and stay readable after Close.
func TestTrafficStats(t *testing.T) {
	b := openBroker(t, &Options{DefaultQueues: 1})
	ctx := context.Background()
	if got := b.TrafficStats(); got != (TrafficStats{}) {
		t.Fatalf("a new broker: %+v", got)
	}
	for _, topic := range []string{"A", "B", "B"} {
		if _, err := b.Send(ctx, &mq.Message{Topic: topic, Body: []byte("four")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"g1", "g2"} {
		res, err := b.Pull(ctx, mq.PullRequest{Group: g, Queue: mq.MessageQueue{Topic: "B"}, Filter: "*", MaxMsgs: 32})
		if err != nil || len(res.Messages) != 2 {
			t.Fatalf("pull of %s: %d messages, %v", g, len(res.Messages), err)
		}
	}
	want := TrafficStats{MessagesIn: 3, BytesIn: 12, MessagesOut: 4, BytesOut: 16}
	if got := b.TrafficStats(); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	b.Close()
	if got := b.TrafficStats(); got != want {
		t.Fatalf("after Close: %+v, want %+v", got, want)
	}
	if got := (*Broker)(nil).TrafficStats(); got != (TrafficStats{}) {
		t.Fatalf("nil broker: %+v", got)
	}
}
