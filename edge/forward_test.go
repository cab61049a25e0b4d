package edge

import (
	"bytes"
	"context"
	"math"
	"sync/atomic"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestHoldRetention: over its byte quota the store deletes old segments, but none at or
// past a forwarder's floor; once released, they go.
func TestHoldRetention(t *testing.T) {
	const seg = 256 << 10
	b := openBroker(t, &Options{MaxMessageSize: 4 << 10, Store: &store.Options{SegmentSize: seg,
		MaxMessageSize: 4 << 10, MaxBytes: 2 * seg, MaxAge: -1, MaxUsedRatio: -1, MetaNoSync: true}})
	ctx := context.Background()
	q := mq.MessageQueue{Topic: "T", BrokerName: b.Options().BrokerName, QueueID: 0}
	var floor atomic.Int64
	floor.Store(b.WritePos())
	release, err := b.HoldRetention(floor.Load)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("h"), 1000)
	var res []mq.SendResult
	for range 1200 {
		r, err := b.Send(ctx, &mq.Message{Topic: "T", Body: body}, mq.QueueIndex(0))
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	b.st.Log().Retain()
	if min, _ := b.MinOffset(ctx, q); min != 0 {
		t.Fatalf("held queue's min offset %d after retention, want 0", min)
	}
	floor.Store(res[600].CommitLogOffset)
	b.st.Log().Retain()
	min, _ := b.MinOffset(ctx, q)
	if min == 0 || min > 600 {
		t.Fatalf("floor at offset 600: min offset %d, want in 1..600", min)
	}
	release()
	release()
	b.st.Log().Retain()
	if after, _ := b.MinOffset(ctx, q); after <= 600 {
		t.Fatalf("released: min offset %d, want past 600", after)
	}
	if _, err := b.HoldRetention(nil); err == nil {
		t.Fatal("HoldRetention(nil): no error")
	}
	if f := b.retentionFloor(); f != math.MaxInt64 {
		t.Fatalf("no holders: floor %d, want none", f)
	}
}
