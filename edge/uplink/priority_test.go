package uplink

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestAlarmOvertakesTelemetry: under a shared bandwidth cap, with a backlog of telemetry
// that takes seconds to drain, a burst of alarms of a higher-priority rule goes up ahead of
// it: while the alarms drain, at most the telemetry batches in flight go.
func TestAlarmOvertakesTelemetry(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	h := startHub(t, "")
	ctx := context.Background()
	body := bytes.Repeat([]byte("t"), 1000)
	const telemetry, alarms = 600, 100 // at 100 KB/s: 6 s and 1 s
	send := func(topic string, n int) {
		for range n {
			if _, err := local.Send(ctx, &mq.Message{Topic: topic, Body: body}, mq.QueueIndex(0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("telemetry", telemetry)
	up := Upstream{Addrs: h.addr, Kind: KindEdgeMQ}
	u := startUplink(t, local, Options{RateLimit: 100_000, ScanInterval: 50 * time.Millisecond, Up: []UpRule{
		{Name: "telemetry", Topics: []string{"telemetry"}, Upstream: up, BatchSize: 10},
		{Name: "alarms", Topics: []string{"alarm"}, Upstream: up, Priority: 10, BatchSize: 10},
	}})
	waitFor(t, 10*time.Second, "telemetry flowing", func() bool { return u.Stats().Up[0].Forwarded > 0 })
	send("alarm", alarms)
	// From the alarms' first batch on (before it, how soon the rule sees them depends on
	// the machine: under emulation, hundreds of milliseconds).
	waitFor(t, 10*time.Second, "the alarms' first batch", func() bool { return u.Stats().Up[1].Forwarded > 0 })
	before := u.Stats().Up[0].Forwarded
	waitFor(t, 20*time.Second, "the alarms upstream", func() bool { return count(t, h.b, "alarm") == alarms })
	if n := u.Stats().Up[0].Forwarded - before; n > 30 {
		t.Fatalf("%d telemetry messages went while %d alarms waited", n, alarms)
	}
	waitFor(t, 30*time.Second, "telemetry drained", func() bool { return count(t, h.b, "telemetry") == telemetry })
}

// TestIdleAlarmRuleHoldsNoOneUp: a high-priority rule that has sent what it had and waits
// for more does not hold a lower priority's backlog back meanwhile.
func TestIdleAlarmRuleHoldsNoOneUp(t *testing.T) {
	local := openLocal(t, t.TempDir(), nil)
	h := startHub(t, "")
	ctx := context.Background()
	up := Upstream{Addrs: h.addr, Kind: KindEdgeMQ}
	u := startUplink(t, local, Options{ScanInterval: 50 * time.Millisecond, Up: []UpRule{
		{Name: "telemetry", Topics: []string{"telemetry"}, Upstream: up, BatchSize: 10},
		{Name: "alarms", Topics: []string{"alarm"}, Upstream: up, Priority: 10},
	}})
	if _, err := local.Send(ctx, &mq.Message{Topic: "alarm", Body: []byte("a")}, mq.QueueIndex(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the alarm upstream", func() bool { return u.Stats().Up[1].Forwarded == 1 })
	for range 100 {
		if _, err := local.Send(ctx, &mq.Message{Topic: "telemetry", Body: []byte("t")}, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
	}
	// Well under the 5 s an idle forwarder waits for new messages before it looks again.
	waitFor(t, 2*time.Second, "telemetry upstream", func() bool { return count(t, h.b, "telemetry") == 100 })
}
