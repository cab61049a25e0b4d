package edge

import (
	"bytes"
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

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

// TestRetentionHoldsFromOpen: a forwarder named in Options.RetentionHolds keeps what it has
// not sent from retention from the open on, before it runs: its topics' messages from its
// stored cursors on (from the first message of a queue it has no cursor for), and those
// stored after the open; another topic's queue and what was sent go. Once released,
// retention deletes by its quota alone.
func TestRetentionHoldsFromOpen(t *testing.T) {
	const seg = 256 << 10
	dir := t.TempDir()
	opts := func(holds ...RetentionHold) *Options {
		return &Options{MaxMessageSize: 4 << 10, RetentionHolds: holds, Store: &store.Options{SegmentSize: seg,
			MaxMessageSize: 4 << 10, MaxBytes: 2 * seg, MaxAge: -1, MaxUsedRatio: -1, MetaNoSync: true}}
	}
	ctx := context.Background()
	body := bytes.Repeat([]byte("h"), 1000)
	send := func(b *Broker, topic string, n int) {
		t.Helper()
		for range n {
			if _, err := b.Send(ctx, &mq.Message{Topic: topic, Body: body}, mq.QueueIndex(0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := openBrokerAt(t, dir, opts())
	send(b, "T", 600)
	send(b, "U", 10) // matched, no cursor: held from its first message
	send(b, "Other", 600)
	if err := b.PutForwardCursors([]ForwardCursor{{Name: "r", Topic: "T", QueueID: 0, Offset: 300, Updated: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	match := func(topic string) bool { return topic == "T" || topic == "U" }
	b = openBrokerAt(t, dir, opts(RetentionHold{Name: "r", Match: match}))
	send(b, "Other", 600) // over the quota
	minOf := func(topic string) int64 {
		m, err := b.MinOffset(ctx, mq.MessageQueue{Topic: topic, BrokerName: b.Options().BrokerName, QueueID: 0})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	b.st.Log().Retain()
	if m := minOf("U"); m != 0 {
		t.Fatalf("held from the open: U's min offset %d, want 0 (no cursor: all unsent)", m)
	}
	if m := minOf("T"); m > 300 {
		t.Fatalf("held from the open: T's min offset %d, want at most its cursor 300", m)
	}
	b.ReleaseRetentionHold("r")
	b.ReleaseRetentionHold("r")
	b.st.Log().Retain()
	if m := minOf("Other"); m <= 600 {
		t.Fatalf("released: Other's min offset %d, want past 600 (the quota)", m)
	}
	if _, err := Open(t.TempDir(), &Options{RetentionHolds: []RetentionHold{{Name: "r"}}}); err == nil {
		t.Fatal("Open with a hold without Match: no error")
	}
}
