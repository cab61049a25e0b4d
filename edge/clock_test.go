package edge

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestClock: with Options.Now given, messages carry its time as their store time, and
// retention by age deletes by it: three simulated days pass in no time.
func TestClock(t *testing.T) {
	const seg = 256 << 10
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(start.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	b := openBroker(t, &Options{Now: clock, MaxMessageSize: 4 << 10, Store: &store.Options{SegmentSize: seg,
		MaxMessageSize: 4 << 10, MaxAge: 48 * time.Hour, MaxUsedRatio: -1, MetaNoSync: true}})
	ctx := context.Background()
	body := bytes.Repeat([]byte("c"), 1000)
	for i := range 1200 { // about 5 segments, one simulated hour apart each 250 messages
		now.Store(start.Add(time.Duration(i/250) * time.Hour).UnixNano())
		if _, err := b.Send(ctx, &mq.Message{Topic: "T", Body: body}, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
	}
	q := mq.MessageQueue{Topic: "T", BrokerName: b.Options().BrokerName, QueueID: 0}
	res, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Offset: 0, MaxMsgs: 1, Filter: "*"})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pull: %v, %d messages", err, len(res.Messages))
	}
	if got := res.Messages[0].StoreTime; got != start.UnixMilli() {
		t.Fatalf("store time %v, want the clock's %v", time.UnixMilli(got).UTC(), start)
	}
	b.st.Log().Retain()
	if m, _ := b.MinOffset(ctx, q); m != 0 {
		t.Fatalf("min offset %d after retention at hour 4 of a 48 h max age, want 0", m)
	}
	now.Store(start.Add(72 * time.Hour).UnixNano())
	b.st.Log().Retain()
	if m, _ := b.MinOffset(ctx, q); m == 0 {
		t.Fatal("nothing deleted after three simulated days with a 48 h max age")
	}
}
