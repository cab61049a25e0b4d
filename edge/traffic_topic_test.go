package edge

import (
	"context"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestTopicStatsOut: a topic's out counters sum what every group pulled from it; another
// topic's stay apart.
func TestTopicStatsOut(t *testing.T) {
	b := openBroker(t, &Options{DefaultQueues: 1})
	ctx := context.Background()
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
	if got, want := b.TopicStats("B"), (TopicStats{MessagesIn: 2, BytesIn: 8, MessagesOut: 4, BytesOut: 16}); got != want {
		t.Errorf("B: got %+v, want %+v", got, want)
	}
	if got, want := b.TopicStats("A"), (TopicStats{MessagesIn: 1, BytesIn: 4}); got != want {
		t.Errorf("A: got %+v, want %+v", got, want)
	}
}
