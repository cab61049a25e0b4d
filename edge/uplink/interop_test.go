package uplink

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestForwardToRocketMQInterop forwards a few thousand messages of two topics, one in
// batches and one compressed, and mirrors the first back down with a down rule, to and from
// the cluster whose name server INTEROP_NAMESRV names
// (Apache RocketMQ from scripts/interop/rocketmq.sh, or edgemq serve with INTEROP_TARGET
// edgemq), and reads them back with our client: every message, queue by queue in order,
// with its id, keys, tags, properties and body.
func TestForwardToRocketMQInterop(t *testing.T) {
	ns := os.Getenv("INTEROP_NAMESRV")
	if ns == "" {
		t.Skip("INTEROP_NAMESRV not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := remoting.Dial(ctx, ns, &remoting.Options{RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	suffix := time.Now().UnixNano() % 1e9
	batched, compressed := fmt.Sprintf("UplinkBatch%d", suffix), fmt.Sprintf("UplinkZip%d", suffix)
	for _, topic := range []string{"gw1-" + batched, "gw1-" + compressed} {
		if err := c.CreateTopic(ctx, remoting.TopicConfig{Name: topic, ReadQueues: 4, WriteQueues: 4, Perm: mq.PermRead | mq.PermWrite}); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		defer c.DeleteTopic(context.Background(), topic)
	}
	local := openLocal(t, t.TempDir(), nil)
	for _, topic := range []string{batched, compressed} {
		if err := local.CreateTopic(edge.TopicConfig{Name: topic, ReadQueues: 4, WriteQueues: 4}); err != nil {
			t.Fatal(err)
		}
	}
	const total, zipped = 3000, 300
	sendN(t, local, batched, 0, total)
	big := bytes.Repeat([]byte("compressible "), 200)
	for i := range zipped {
		m := &mq.Message{Topic: compressed, Keys: fmt.Sprintf("z%d", i), Properties: map[string]string{"seq": fmt.Sprint(i)},
			Body: append([]byte(fmt.Sprintf("%d ", i)), big...)}
		if _, err := local.Send(ctx, m, mq.QueueIndex(i%4)); err != nil {
			t.Fatal(err)
		}
	}
	up := Upstream{Addrs: ns, Kind: KindRocketMQ}
	u := startUplink(t, local, Options{Up: []UpRule{
		{Name: "batched", Topics: []string{batched}, TopicTemplate: "{gateway}-{topic}", Upstream: up, BatchSize: 64},
		{Name: "compressed", Topics: []string{compressed}, TopicTemplate: "{gateway}-{topic}", Upstream: up, Compress: true},
	}})
	waitFor(t, 3*time.Minute, "both rules drained", func() bool {
		s := u.Stats()
		return s.Up[0].Forwarded >= total && s.Up[1].Forwarded >= zipped && s.Up[0].Backlog == 0 && s.Up[1].Backlog == 0
	})
	s := u.Stats()
	for _, tc := range []struct{ local, up string }{{batched, "gw1-" + batched}, {compressed, "gw1-" + compressed}} {
		r, err := c.Route(ctx, tc.up)
		if err != nil {
			t.Fatal(err)
		}
		got := readQueues(t, c, r.WriteQueues())
		dups := checkQueues(t, readAll(t, local, tc.local), got, int(s.Up[0].Resent+s.Up[1].Resent))
		t.Logf("%s: %d duplicates", tc.up, dups)
		// RocketMQ stores what was sent: zlib, far smaller than the body. (EdgeMQ inflates
		// on receipt, and stores by its own compress_over.)
		if tc.local == compressed && os.Getenv("INTEROP_TARGET") != "edgemq" {
			for _, ms := range got {
				for _, m := range ms {
					if int(m.StoreSize) >= len(m.Body) {
						t.Fatalf("%s offset %d: stored in %d bytes, body %d: not compressed", tc.up, m.QueueOffset, m.StoreSize, len(m.Body))
					}
				}
			}
		}
	}
	t.Logf("stats: %+v", s.Up)

	// Down: a second gateway mirrors the batched topic back from the upstream, each message
	// once, queue by queue.
	r, err := c.Route(ctx, "gw1-"+batched)
	if err != nil {
		t.Fatal(err)
	}
	upstream := readQueues(t, c, r.ReadQueues())
	mirror := openLocal(t, t.TempDir(), nil)
	m := startUplink(t, mirror, Options{Down: []DownRule{{Name: "mirror", Topic: "gw1-" + batched, LocalTopic: "Mirror",
		Group: fmt.Sprintf("UplinkMirror%d", suffix), Upstream: up}}})
	waitFor(t, 3*time.Minute, "mirrored", func() bool { d := m.Stats().Down[0]; return d.Received >= total && d.Lag == 0 })
	checkQueues(t, upstream, readAll(t, mirror, "Mirror"), 0)
	var committed int64
	for _, q := range r.ReadQueues() {
		off, err := c.QueryOffset(ctx, fmt.Sprintf("UplinkMirror%d", suffix), q)
		if err != nil {
			t.Fatalf("the mirror group's offset of %v: %v", q, err)
		}
		committed += off
	}
	if committed != total {
		t.Fatalf("the mirror group committed %d messages upstream, want %d", committed, total)
	}
	t.Logf("down stats: %+v", m.Stats().Down)
}
