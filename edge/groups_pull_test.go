package edge

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"slices"
	"testing"
	"time"
)

// TestPullUsesHeartbeatSubscription: a pull without a filter, as RocketMQ's Go push consumer
// sends, is filtered by the group's heartbeat subscription, and fails without one.
func TestPullUsesHeartbeatSubscription(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"A", "B", "C", "A", "B"} {
		if _, err := b.Send(ctx, &mq.Message{Topic: "T", Tags: tag, Body: []byte(tag)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The store indexes messages asynchronously: wait until all five are in the queue.
	deadline := time.Now().Add(5 * time.Second)
	for b.st.MaxOffset("T", 0) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("queue T/0 has %d messages, want 5", b.st.MaxOffset("T", 0))
		}
		time.Sleep(time.Millisecond)
	}
	req := mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: 0}, Offset: 0}

	if _, err := b.Pull(ctx, req); !errors.Is(err, mq.ErrSubscriptionNotExist) {
		t.Fatalf("Pull before any heartbeat: err = %v, want mq.ErrSubscriptionNotExist", err)
	}
	// A subscription to another topic is not one to T.
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "c", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("U", "*", 1))}})
	if _, err := b.Pull(ctx, req); !errors.Is(err, mq.ErrSubscriptionNotExist) {
		t.Fatalf("Pull without a subscription to T: err = %v, want mq.ErrSubscriptionNotExist", err)
	}

	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "c", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "A || C", 1))}})
	res, err := b.Pull(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, m := range res.Messages {
		tags = append(tags, m.Tags)
	}
	if res.Status != mq.PullFound || !slices.Equal(tags, []string{"A", "C", "A"}) {
		t.Fatalf("Pull with the heartbeat subscription: %v %v, want FOUND [A C A]", res.Status, tags)
	}
	// A filter in the request wins over the subscription.
	req.Filter = "B"
	res, err = b.Pull(ctx, req)
	if err != nil || len(res.Messages) != 2 || res.Messages[0].Tags != "B" {
		t.Fatalf("Pull with filter B: %+v, %v", res, err)
	}
	// Once the member is gone, so is the subscription.
	if err := b.Unregister(context.Background(), "c", ""); err != nil {
		t.Fatal(err)
	}
	req.Filter = ""
	if _, err := b.Pull(ctx, req); !errors.Is(err, mq.ErrSubscriptionNotExist) {
		t.Fatalf("Pull after the member left: err = %v, want mq.ErrSubscriptionNotExist", err)
	}
}
