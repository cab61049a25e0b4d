package main

import (
	"fmt"
	"io"
	"strings"
)

// Targets of the peer-benchmark issue (2-core machine).
const (
	targetAsyncSend   = 8.0   // EdgeMQ async send of 100 B ≥ 8× JetStream default
	targetDurableSend = 25.0  // EdgeMQ sync-flush send of 100 B ≥ 25× JetStream SyncAlways
	targetP99Nanos    = 100e3 // EdgeMQ end-to-end p99 ≤ 100 µs
	targetRSSRatio    = 1.0 / 3

	// Targets of the consumer issue (§11).
	targetConsumeRate  = 1e6   // concurrent push-consume of 100 B ≥ 1,000,000 msgs/s
	targetPushP99Nanos = 150e3 // end-to-end p99 through the PushConsumer ≤ 150 µs
)

// row is one workload on both sides.
type row struct {
	emq, js       job
	emqRes, jsRes *result
}

func (r row) label() string {
	j := r.emq
	switch j.Work {
	case workSend:
		p := "1 producer"
		if j.Producers > 1 {
			p = fmt.Sprintf("%d producers", j.Producers)
		}
		if j.Pipelined && j.Durable {
			return fmt.Sprintf("send %s, %s, ≤ %d in flight: EdgeMQ SendAsync, sync flush vs JS PublishAsync, SyncAlways", sizeName(j.Size), p, j.Window)
		}
		if j.Pipelined {
			return fmt.Sprintf("send %s, %s, ≤ %d in flight: EdgeMQ SendAsync, async flush vs JS PublishAsync, default", sizeName(j.Size), p, j.Window)
		}
		if j.Producers == 1 {
			p = "1 producer, one at a time"
		}
		if j.Durable {
			return fmt.Sprintf("send %s, %s: EdgeMQ sync flush vs JS SyncAlways", sizeName(j.Size), p)
		}
		return fmt.Sprintf("send %s, %s: EdgeMQ async flush vs JS default", sizeName(j.Size), p)
	case workPull:
		if j.Ack {
			return fmt.Sprintf("pull %s, batch 32: EdgeMQ CommitOffset vs JS AckExplicit+Ack()", sizeName(j.Size))
		}
		return fmt.Sprintf("pull %s, batch 32: EdgeMQ no commit vs JS AckNone", sizeName(j.Size))
	case workConsume:
		kind := fmt.Sprintf("concurrent, batch %d", j.Batch)
		if j.Orderly {
			kind = fmt.Sprintf("orderly, batch %d", j.Batch)
		}
		acks := "AckNone"
		switch {
		case r.js.AckAll:
			acks = "AckAll, Ack() per batch"
		case r.js.Ack:
			acks = "AckExplicit+Ack() per msg"
		}
		return fmt.Sprintf("consume %s ×%s, %d queues: EdgeMQ PushConsumer %s, no-op listener vs JS Fetch(%d) %s",
			sizeName(j.Size), thousands(float64(j.N)), j.Queues, kind, r.js.Batch, acks)
	case workLatency:
		if j.Consumer == consumerPushConsumer {
			return fmt.Sprintf("latency %s @ %d/s: EdgeMQ PushConsumer (concurrent, batch 1) vs JS pull consumer Consume()", sizeName(j.Size), j.Rate)
		}
		if j.Side == sideFloor {
			return fmt.Sprintf("floor %s @ %d/s: same pacing and probe, no broker, 2 channel hops (in the EdgeMQ column)", sizeName(j.Size), j.Rate)
		}
		c := "pull consumer Consume()"
		if r.js.Consumer == consumerPush {
			c = "push consumer"
		}
		return fmt.Sprintf("latency %s @ %d/s: EdgeMQ long-poll Pull vs JS %s", sizeName(j.Size), j.Rate, c)
	}
	return r.emq.name()
}

func ok(r *result) bool { return r != nil && r.Err == "" }

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

func printTables(w io.Writer, rows []row) {
	fmt.Fprintf(w, "\n## Throughput (msgs/s)\n\n")
	fmt.Fprintf(w, "| workload | EdgeMQ | JetStream | EdgeMQ / JS | target | verdict |\n|---|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		if r.emq.Work == workLatency || (r.emqRes == nil && r.jsRes == nil) {
			continue
		}
		ratio, target, v := "", "", ""
		if ok(r.emqRes) && ok(r.jsRes) && r.jsRes.Rate > 0 {
			x := r.emqRes.Rate / r.jsRes.Rate
			ratio = fmt.Sprintf("%.2f×", x)
			if r.emq.Work == workSend && r.emq.Size == 100 {
				t := targetAsyncSend
				if r.emq.Durable {
					t = targetDurableSend
				}
				target, v = fmt.Sprintf("≥ %g×", t), verdict(x >= t)
			}
		}
		if r.emq.Work == workConsume && !r.emq.Orderly && r.emq.Size == 100 && ok(r.emqRes) {
			target, v = "EdgeMQ ≥ "+thousands(targetConsumeRate)+"/s", verdict(r.emqRes.Rate >= targetConsumeRate)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.label(), rate(r.emqRes), rate(r.jsRes), ratio, target, v)
	}

	fmt.Fprintf(w, "\n## End-to-end latency (receive − send, one process; µs)\n\n")
	fmt.Fprintf(w, "| workload | EdgeMQ p50 / p99 / p99.9 / max | JetStream p50 / p99 / p99.9 / max | JS p99 / EdgeMQ p99 | target | verdict |\n|---|---|---|---:|---|---|\n")
	for _, r := range rows {
		if r.emq.Work != workLatency || (r.emqRes == nil && r.jsRes == nil) {
			continue
		}
		ratio, v, target := "", "", "EdgeMQ p99 ≤ 100 µs"
		limit := targetP99Nanos
		if r.emq.Consumer == consumerPushConsumer {
			target, limit = "EdgeMQ p99 ≤ 150 µs", targetPushP99Nanos
		}
		if r.emq.Side == sideFloor {
			target = ""
		} else if ok(r.emqRes) && r.emqRes.Lat.N > 0 {
			v = verdict(float64(r.emqRes.Lat.P99) <= limit)
			if ok(r.jsRes) && r.jsRes.Lat.N > 0 {
				ratio = fmt.Sprintf("%.1f×", float64(r.jsRes.Lat.P99)/float64(r.emqRes.Lat.P99))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.label(), lat(r.emqRes, latDist), lat(r.jsRes, latDist), ratio, target, v)
		fmt.Fprintf(w, "| ↳ producer's send call (EdgeMQ Send, JS js.Publish) | %s | %s | | | |\n", lat(r.emqRes, callDist), lat(r.jsRes, callDist))
		fmt.Fprintf(w, "| ↳ producer lateness vs schedule (pacing jitter) | %s | %s | | | |\n", lat(r.emqRes, paceDist), lat(r.jsRes, paceDist))
	}

	fmt.Fprintf(w, "\n## Peak RSS (VmHWM of each run's own process) and disk per message\n\n")
	fmt.Fprintf(w, "| run | EdgeMQ MiB (peak anon + peak file) | JetStream MiB (peak anon + peak file) | EdgeMQ / JS | target ≤ 0.33 | anon only: EdgeMQ / JS | EdgeMQ disk B/msg in use / allocated | JS disk B/msg in use / allocated |\n|---|---:|---:|---:|---|---:|---|---|\n")
	for _, r := range rows {
		if r.emq.Side == sideFloor || (r.emqRes == nil && r.jsRes == nil) {
			continue
		}
		ratio, anon, v := "", "", ""
		if ok(r.emqRes) && ok(r.jsRes) && r.jsRes.PeakKiB > 0 && r.jsRes.AnonKiB > 0 {
			x := float64(r.emqRes.PeakKiB) / float64(r.jsRes.PeakKiB)
			ratio, v = fmt.Sprintf("%.2f", x), verdict(x <= targetRSSRatio)
			anon = fmt.Sprintf("%.2f", float64(r.emqRes.AnonKiB)/float64(r.jsRes.AnonKiB))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.label(), mib(r.emqRes), mib(r.jsRes), ratio, v, anon, disk(r.emqRes), disk(r.jsRes))
	}
	var errs []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, res := range []*result{r.emqRes, r.jsRes} {
			if res != nil && (res.Err != "" || res.Note != "") && !seen[res.Job] {
				seen[res.Job] = true
				errs = append(errs, fmt.Sprintf("- %s: %s", res.Job, strings.TrimSpace(res.Err+" "+res.Note)))
			}
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nNotes and errors:\n%s\n", strings.Join(errs, "\n"))
	}
}

func rate(r *result) string {
	switch {
	case r == nil:
		return "—"
	case r.Err != "":
		return "error"
	}
	s := fmt.Sprintf("%s (%s in %.1fs)", thousands(r.Rate), thousands(float64(r.Msgs)), r.Seconds)
	if r.Runs > 1 {
		s += fmt.Sprintf(", median of %d: %s–%s", r.Runs, thousands(r.Min), thousands(r.Max))
	}
	return s
}

// Distributions of a latency result.
const (
	latDist = iota
	callDist
	paceDist
)

func lat(r *result, which int) string {
	switch {
	case r == nil:
		return "—"
	case r.Err != "":
		return "error"
	}
	d := [...]dist{latDist: r.Lat, callDist: r.Call, paceDist: r.Pace}[which]
	if d.N == 0 {
		return "—"
	}
	s := fmt.Sprintf("%s / %s / %s / %s", us(d.P50), us(d.P99), us(d.P999), us(d.Max))
	if which == latDist && r.Runs > 1 {
		s += fmt.Sprintf(" (median p99 of %d: %s–%s)", r.Runs, us(int64(r.Min)), us(int64(r.Max)))
	}
	return s
}

func us(ns int64) string {
	return fmt.Sprintf("%.0f", float64(ns)/1e3)
}

func mib(r *result) string {
	if !ok(r) {
		return "—"
	}
	return fmt.Sprintf("%.1f (%.0f anon + %.0f file)", float64(r.PeakKiB)/1024, float64(r.AnonKiB)/1024, float64(r.FileKiB)/1024)
}

func disk(r *result) string {
	if !ok(r) || r.Stored == 0 || r.DiskLog == 0 {
		return ""
	}
	used := r.DiskUsed
	if used == 0 {
		used = r.DiskLog
	}
	s := fmt.Sprintf("%.0f / %.0f", float64(used)/float64(r.Stored), float64(r.DiskPhys)/float64(r.Stored))
	if r.RecordBytes > 0 {
		s += fmt.Sprintf(" (record %d + queue entry 20)", r.RecordBytes)
	}
	return s
}

// thousands formats x rounded to an integer with comma separators: 1,234,567.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
