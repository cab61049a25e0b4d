package edge

import (
	"context"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestTopicDurability: a topic's durability survives a reopen, and decides when a send
// returns: before the fsync for an async topic in a sync store, after it for the others.
func TestTopicDurability(t *testing.T) {
	dir := t.TempDir()
	o := &Options{Store: &store.Options{FlushInterval: time.Hour, MetaNoSync: true}}
	b := openBrokerAt(t, dir, o)
	if err := b.CreateTopic(TopicConfig{Name: "Telemetry", Durability: store.DurabilityAsync}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(TopicConfig{Name: "Alarms"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := b.Send(ctx, &mq.Message{Topic: "Telemetry", Body: []byte("21.5")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := b.st.Log().Durable(); d > r.CommitLogOffset {
		t.Fatalf("a send to an async topic returned at durable %d, past its record at %d: it waited for an fsync", d, r.CommitLogOffset)
	}
	r, err = b.Send(ctx, &mq.Message{Topic: "Alarms", Body: []byte("fire")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := b.st.Log().Durable(); d <= r.CommitLogOffset {
		t.Fatalf("a send to a default topic in a sync store returned at durable %d, not past its record at %d", d, r.CommitLogOffset)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBrokerAt(t, dir, o)
	for name, want := range map[string]store.Durability{"Telemetry": store.DurabilityAsync, "Alarms": store.DurabilityDefault} {
		if cfg, err := b.Topic(name); err != nil || cfg.Durability != want {
			t.Errorf("topic %s after reopen: %+v, %v; want durability %v", name, cfg, err, want)
		}
	}
	if err := b.CreateTopic(TopicConfig{Name: "Bad", Durability: 7}); err == nil {
		t.Error("CreateTopic with durability 7: no error")
	}
}
