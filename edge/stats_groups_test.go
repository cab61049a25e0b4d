package edge

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestGroupTopics: each group and topic with a committed offset is listed once, sorted,
// though no consumer of the group ever sent a heartbeat.
func TestGroupTopics(t *testing.T) {
	b := openBroker(t, &Options{DefaultQueues: 2})
	ctx := context.Background()
	for _, topic := range []string{"A", "B"} {
		if _, err := b.Send(ctx, &mq.Message{Topic: topic, Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		group, topic string
		queue        int32
	}{{"g2", "A", 0}, {"g1", "B", 1}, {"g1", "A", 0}, {"g1", "A", 1}} {
		if err := b.CommitOffset(ctx, c.group, mq.MessageQueue{Topic: c.topic, QueueID: c.queue}, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.GroupTopics()
	if err != nil {
		t.Fatal(err)
	}
	want := []GroupTopic{{"g1", "A"}, {"g1", "B"}, {"g2", "A"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	b.Close()
	if _, err := b.GroupTopics(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
}
