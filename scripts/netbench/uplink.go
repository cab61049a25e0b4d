package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/uplink"
	"github.com/edgemq/edgemq/store"
)

// The uplink benchmark (-uplink): a gateway's backlog of -uplink-n telemetry messages
// (100-byte JSON, a few drifting numeric fields, each with a producer's UNIQ_KEY) in 4 local
// queues of an edge.Broker opened in this process (the store's defaults: sync flush) is
// drained by an uplink rule (batches of 1024, one in flight per queue) to
//
//   - edgemq serve (sync flush, its default) as hub: plain batches, then zstd batches
//     (compress = true), each from a fresh local store and hub;
//   - Apache RocketMQ 5.5.0 (ASYNC_FLUSH, its default): plain batches, beside RocketMQ's
//     own benchmark Producer (rocketmq-example 5.5.0: -java-threads threads of sync sends of
//     100-byte messages, its best 10 s window) against the same broker, run first.
//
// The drain rate is from the uplink's start to the last acknowledged batch; the CPU times
// are this process's (uplink and local broker) and the broker's, per message.

// uplinkTopic is the local and upstream topic of the uplink benchmark.
const uplinkTopic = "nb_uplink"

// uplinkRun is one drain.
type uplinkRun struct {
	target, mode      string
	rate              float64 // msgs/s
	localUS, brokerUS float64 // CPU µs per message: this process, the upstream broker
	javaRate, javaCPU float64 // RocketMQ's Producer against the same broker, 0 if not run
	err               string
}

func runUplink(ctx context.Context, c config, n int, javaCP string, javaThreads int, javaTime time.Duration) int {
	fmt.Printf("# The uplink: drain of %d telemetry messages over loopback\n\n%s\n\n", n, machine())
	var runs []uplinkRun
	for _, t := range []struct {
		k     kind
		modes []string
	}{
		{kindNamed("edgemq-sync"), []string{"plain", "zstd"}},
		{kindNamed("rocketmq-async"), []string{"plain"}},
	} {
		for _, mode := range t.modes {
			fmt.Fprintf(os.Stderr, "== uplink to %s, %s\n", t.k.Name, mode)
			r := uplinkRun{target: t.k.Name, mode: mode}
			b, _, err := startBroker(ctx, t.k, c)
			if err != nil {
				r.err = err.Error()
				runs = append(runs, r)
				continue
			}
			if t.k.RocketMQ && javaCP != "" {
				m := metrics{}
				if err := javaSend(ctx, b, javaCP, javaThreads, 100, javaTime, m); err != nil {
					r.err = "java Producer: " + err.Error()
				}
				r.javaRate, r.javaCPU = m["java_send_rate"], m["java_send_cpu_us"]
			}
			if err := drain(ctx, b, n, mode, &r); err != nil && r.err == "" {
				r.err = err.Error()
			}
			if err := b.stop(c); err != nil {
				fmt.Fprintf(os.Stderr, "   stop: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "   %+v\n", r)
			runs = append(runs, r)
		}
	}
	fmt.Printf("| upstream | batches | drain msgs/s | uplink + local broker CPU µs/msg | upstream broker CPU µs/msg | RocketMQ's Java Producer msgs/s (%d threads, sync sends) | uplink / Java Producer |\n", javaThreads)
	fmt.Printf("|---|---|---|---|---|---|---|\n")
	code := 0
	for _, r := range runs {
		if r.err != "" {
			code = 1
			fmt.Printf("| %s | %s | ERROR: %s | | | | |\n", r.target, r.mode, r.err)
			continue
		}
		java, ratio := "", ""
		if r.javaRate > 0 {
			java, ratio = fmt.Sprintf("%.0f", r.javaRate), fmt.Sprintf("%.0f %%", 100*r.rate/r.javaRate)
		}
		fmt.Printf("| %s | %s | %.0f | %.1f | %.1f | %s | %s |\n", r.target, r.mode, r.rate, r.localUS, r.brokerUS, java, ratio)
	}
	fmt.Printf("\n%s\n", machine())
	return code
}

// drain fills a fresh local broker with n telemetry messages and times an uplink rule
// forwarding them all to b.
func drain(ctx context.Context, b *broker, n int, mode string, r *uplinkRun) error {
	dir, err := os.MkdirTemp(b.dir, "gateway-")
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := edge.Open(filepath.Join(dir, "data"), &edge.Options{BrokerName: "gw1", Logger: quiet,
		Store: &store.Options{SegmentSize: 256 << 20}})
	if err != nil {
		return err
	}
	defer local.Close()
	if err := local.CreateTopic(edge.TopicConfig{Name: uplinkTopic, ReadQueues: 4, WriteQueues: 4}); err != nil {
		return err
	}
	if err := fillTelemetry(ctx, local, n); err != nil {
		return err
	}
	kind := uplink.KindEdgeMQ
	if b.kind.RocketMQ {
		kind = uplink.KindRocketMQ
	}
	brokerCPU := meterCPU(b.pids()...)
	start, cpu0 := time.Now(), selfCPU()
	u, err := uplink.Start(local, &uplink.Options{Logger: quiet, Up: []uplink.UpRule{{Name: "bench", Topics: []string{uplinkTopic},
		BatchSize: 1024, Compress: mode == "zstd", Upstream: uplink.Upstream{Addrs: b.ns, Kind: kind}}}})
	if err != nil {
		return err
	}
	defer u.Close()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		s := u.Stats().Up[0]
		if s.Forwarded >= int64(n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d forwarded in 10 minutes; last error %q", s.Forwarded, n, s.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
	el, cpu := time.Since(start), selfCPU()-cpu0
	bcpu, _ := brokerCPU.used()
	r.rate = float64(n) / el.Seconds()
	r.localUS = float64(cpu.Microseconds()) / float64(n)
	r.brokerUS = float64(bcpu.Microseconds()) / float64(n)
	return nil
}

// fillTelemetry stores n telemetry messages in uplinkTopic of b, round robin over its
// queues, through a producer (so each has a UNIQ_KEY as from a client), in batches.
func fillTelemetry(ctx context.Context, b *edge.Broker, n int) error {
	p, err := producer.New(b, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; {
		batch := make([]*mq.Message, 0, 256)
		for ; i < n && len(batch) < cap(batch); i++ {
			batch = append(batch, &mq.Message{Topic: uplinkTopic, Tags: "telemetry", Body: telemetryBody(rng, i)})
		}
		if _, err := p.SendBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	return b.Sync()
}

// telemetryBody is the i-th body of a gateway's telemetry: 100 bytes of JSON with a few
// numeric fields that drift as sensors' do (the same as edge/uplink's BenchmarkDrain).
func telemetryBody(rng *rand.Rand, i int) []byte {
	b := fmt.Appendf(nil, `{"ts":%d,"dev":"gw-17","temp":%.2f,"hum":%.1f,"pres":%.2f,"bat":%.2f,"seq":%d}`,
		1764633600000+int64(i)*100+rng.Int64N(20), 18+rng.Float64()*8, 40+rng.Float64()*20,
		1000+rng.Float64()*30, 3.5+rng.Float64()*0.7, i)
	for len(b) < 100 {
		b = append(b[:len(b)-1], ' ', '}')
	}
	return b[:100]
}
