package uplink

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestOverflow: with the upstream down and the log over its byte quota, a RejectNew rule
// keeps every message it has not forwarded from retention, and forwards them all once the
// upstream is up, after which retention deletes them; a DropOldest rule lets retention
// delete them and counts those it could not forward as lost.
func TestOverflow(t *testing.T) {
	for _, policy := range []Overflow{RejectNew, DropOldest} {
		t.Run(policy.String(), func(t *testing.T) {
			const seg, total = 256 << 10, 1000
			local := openLocal(t, t.TempDir(), &store.Options{SegmentSize: seg, MaxMessageSize: 4 << 10,
				MaxBytes: 2 * seg, MaxAge: -1, MaxUsedRatio: -1, RetentionInterval: 20 * time.Millisecond})
			if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
				t.Fatal(err)
			}
			ln := freeListener(t)
			addr := ln.Addr().String()
			ln.Close() // the upstream is down until the hub starts there
			u := startUplink(t, local, Options{ScanInterval: 100 * time.Millisecond, Up: []UpRule{{Name: "r", Topics: []string{"T"}, Overflow: policy,
				Upstream: Upstream{Addrs: addr, Kind: KindEdgeMQ}}}})
			ctx := context.Background()
			body := bytes.Repeat([]byte("o"), 1000)
			for i := range total {
				m := &mq.Message{Topic: "T", Body: body, Keys: fmt.Sprint(i)}
				if _, err := local.Send(ctx, m, mq.QueueIndex(i%2)); err != nil {
					t.Fatal(err)
				}
			}
			q0 := mq.MessageQueue{Topic: "T", BrokerName: "gw1", QueueID: 0}
			minOff := func() int64 { m, _ := local.MinOffset(ctx, q0); return m }
			if policy == DropOldest {
				waitFor(t, 10*time.Second, "retention to delete", func() bool { return minOff() > 0 })
			} else {
				time.Sleep(200 * time.Millisecond) // ten retention passes
				if m := minOff(); m != 0 {
					t.Fatalf("retention deleted up to offset %d of what was not forwarded", m)
				}
			}
			// A DropOldest forwarder that read again after retention deleted its next
			// messages counted them lost already.
			if s := u.Stats().Up[0]; s.State != BackingOff || s.Backlog+s.Lost != total || s.LastError == "" || s.OldestAge <= 0 {
				t.Fatalf("upstream down: stats %+v, want backing off with %d backlog and lost, an error and an age", s, total)
			}
			h := &hub{t: t, dir: t.TempDir()}
			h.start(addr)
			t.Cleanup(h.stop)
			waitFor(t, 30*time.Second, "backlog drained", func() bool { return u.Stats().Up[0].Backlog == 0 })
			s := u.Stats().Up[0]
			up := count(t, h.b, "T")
			switch policy {
			case RejectNew:
				if up != total || s.Lost != 0 || s.Forwarded != total {
					t.Fatalf("upstream has %d, stats %+v: want all %d, none lost", up, s, total)
				}
				waitFor(t, 10*time.Second, "retention once forwarded", func() bool { return minOff() > 0 })
			case DropOldest:
				if s.Lost == 0 || s.Forwarded+s.Lost != total || up != s.Forwarded {
					t.Fatalf("upstream has %d, stats %+v: want lost > 0, forwarded + lost = %d", up, s, total)
				}
			}
		})
	}
}

// TestRetentionHeldBeforeStart: a broker opened with the uplink's RetentionHolds keeps
// what a RejectNew rule has not forwarded from retention before the uplink starts: with
// the uplink not running and the log over its byte quota, retention deletes only what was
// forwarded, and once the uplink runs again every message reaches the upstream, after
// which retention deletes by its quota.
func TestRetentionHeldBeforeStart(t *testing.T) {
	const seg, first, total = 256 << 10, 300, 1500
	so := func() *store.Options {
		return &store.Options{SegmentSize: seg, MaxMessageSize: 4 << 10, MaxBytes: 2 * seg, MaxAge: -1, MaxUsedRatio: -1,
			RetentionInterval: 20 * time.Millisecond, MetaNoSync: true}
	}
	h := startHub(t, "")
	uo := Options{ScanInterval: 100 * time.Millisecond, Up: []UpRule{{Name: "r", Topics: []string{"T"},
		Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}}
	dir := t.TempDir()
	ctx := context.Background()
	body := bytes.Repeat([]byte("o"), 1000)
	send := func(b *edge.Broker, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := b.Send(ctx, &mq.Message{Topic: "T", Body: body, Keys: fmt.Sprint(i)}, mq.QueueIndex(i%2)); err != nil {
				t.Fatal(err)
			}
		}
	}

	local := openLocal(t, dir, so())
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	send(local, 0, first)
	u := startUplink(t, local, uo)
	waitFor(t, 10*time.Second, "the first messages forwarded", func() bool { return u.Stats().Up[0].Forwarded == first })
	u.Close()
	local.Close()

	// Reopened with the holds, the uplink not started: retention runs over the quota.
	bo := brokerOptions(t, "gw1", so())
	bo.RetentionHolds = uo.RetentionHolds("gw1")
	local, err := edge.Open(dir, bo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	send(local, first, total)
	minOff := func(q int32) int64 {
		m, _ := local.MinOffset(ctx, mq.MessageQueue{Topic: "T", BrokerName: "gw1", QueueID: q})
		return m
	}
	waitFor(t, 10*time.Second, "retention to delete what was forwarded", func() bool { return minOff(0) > 0 })
	for q := range int32(2) {
		if m := minOff(q); m > first/2 {
			t.Fatalf("queue %d: retention deleted up to offset %d before the uplink started; forwarded up to %d", q, m, first/2)
		}
	}

	u = startUplink(t, local, uo)
	waitFor(t, 30*time.Second, "the rest forwarded", func() bool { return u.Stats().Up[0].Forwarded >= total-first })
	keys := map[string]bool{}
	for _, ms := range readAll(t, h.b, "T") {
		for _, m := range ms {
			keys[m.Keys] = true
		}
	}
	if s := u.Stats().Up[0]; len(keys) != total || s.Lost != 0 {
		t.Fatalf("upstream has %d of %d messages, stats %+v: want all, none lost", len(keys), total, s)
	}
	// The uplink took the hold over: forwarded, the messages go by the quota.
	waitFor(t, 10*time.Second, "retention once forwarded", func() bool { return minOff(0) > first })
}
