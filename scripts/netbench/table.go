package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Targets of the network-benchmark issue (2-core machine), EdgeMQ against Apache RocketMQ on
// the same client and flush mode.
const (
	targetRate      = 3.0      // send and consume msgs/s ≥ 3×
	targetP99       = 1.0 / 3  // e2e p99 at 10,000 msgs/s ≤ ⅓
	targetRSS       = 1.0 / 20 // broker RSS ≤ 1/20
	targetFirstAck  = 50.0     // ms from process start to the first acknowledged send
	ratioNone       = 0
	ratioAtLeast    = 1
	ratioAtMost     = 2
	absoluteAtMost  = 3
	unitRate        = "msgs/s"
	unitMicros      = "µs"
	unitMiB         = "MiB"
	unitMillis      = "ms"
	unitMicrosPerMs = "µs/msg"
)

// line is one row of the table: a figure of every run.
type line struct {
	label  string
	keys   []string // figures shown in the cell, joined by " / "
	cmp    string   // the figure compared (default keys[0])
	unit   string
	target float64
	kind   int // ratioNone, ratioAtLeast (EdgeMQ/RocketMQ ≥ target), ratioAtMost, absoluteAtMost (EdgeMQ ≤ target)
}

func printTable(w io.Writer, runs []run, p params, javaThreads int, heap string, java bool) {
	by := map[string][]run{}
	for _, r := range runs {
		by[r.Kind] = append(by[r.Kind], r)
	}
	lines := []line{
		{label: "start to first acknowledged send (RocketMQ: name server + broker JVMs, registration)", keys: []string{"first_ack_ms"}, unit: unitMillis, target: targetFirstAck, kind: absoluteAtMost},
		{label: "↳ start to the broker port accepting connections", keys: []string{"listen_ms"}, unit: unitMillis},
		{label: fmt.Sprintf("send %s, rocketmq-client-go: %d clients × %d SendSync in flight", sizeName(p.size), p.clients, p.inflight), keys: []string{"go_send_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"go_send_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ failed sends in the measured phase (broker busy; not counted)", keys: []string{"go_send_failed"}, unit: "msgs"},
		{label: fmt.Sprintf("consume %s ×%d pre-filled, rocketmq-client-go push consumer (pull batch 32, consume batch 1)", sizeName(p.size), p.consumeN), keys: []string{"go_consume_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"go_consume_cpu_us"}, unit: unitMicrosPerMs},
		{label: fmt.Sprintf("e2e latency p50 / p99 / p99.9 / max, p99 compared, @ %d msgs/s, rocketmq-client-go SendAsync (≤ %d in flight) → push consumer", p.latRate, p.latWindow), keys: []string{"lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us"}, cmp: "lat_p99_us", unit: unitMicros, target: targetP99, kind: ratioAtMost},
		{label: "↳ achieved send rate / sends > 2 ms behind schedule / failed sends", keys: []string{"lat_rate", "lat_late", "lat_failed"}, unit: unitRate},
		{label: "↳ broker CPU per message", keys: []string{"lat_cpu_us"}, unit: unitMicrosPerMs},
	}
	if java {
		lines = append(lines,
			line{label: fmt.Sprintf("send %s, RocketMQ benchmark Producer (rocketmq-example 5.5.0): %d threads × sync send", sizeName(p.size), javaThreads), keys: []string{"java_send_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
			line{label: "↳ broker CPU per message", keys: []string{"java_send_cpu_us"}, unit: unitMicrosPerMs},
			line{label: "↳ failed sends, whole run (the tool pauses 3 s after a broker error)", keys: []string{"java_send_failed"}, unit: "msgs"},
			line{label: "consume, RocketMQ benchmark Consumer (push, 20 threads, from the last offset), best 10 s window", keys: []string{"java_consume_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
			line{label: "↳ broker CPU per message", keys: []string{"java_consume_cpu_us"}, unit: unitMicrosPerMs},
		)
	}
	lines = append(lines,
		line{label: fmt.Sprintf("broker peak RSS, all workloads (VmHWM; RocketMQ broker JVM, heap %s)", heap), keys: []string{"rss_peak_mib"}, unit: unitMiB, target: targetRSS, kind: ratioAtMost},
		line{label: "↳ idle after start", keys: []string{"rss_idle_mib"}, unit: unitMiB},
		line{label: "↳ send / consume / latency workloads", keys: []string{"rss_go_send_mib", "rss_go_consume_mib", "rss_lat_mib"}, unit: unitMiB},
		line{label: "↳ RocketMQ name server JVM (not in the ratio)", keys: []string{"ns_rss_peak_mib"}, unit: unitMiB},
	)

	for _, pair := range [][2]string{{"edgemq-async", "rocketmq-async"}, {"edgemq-sync", "rocketmq-sync"}} {
		if by[pair[0]] == nil && by[pair[1]] == nil {
			continue
		}
		title := "async flush: edgemq serve -store.flush async vs RocketMQ ASYNC_FLUSH"
		if strings.HasSuffix(pair[0], "sync") && !strings.HasSuffix(pair[0], "async") {
			title = "sync flush: edgemq serve -store.flush sync vs RocketMQ SYNC_FLUSH"
		}
		fmt.Fprintf(w, "\n## %s\n\n", title)
		fmt.Fprintf(w, "| workload | unit | EdgeMQ | RocketMQ | EdgeMQ / RocketMQ | target | verdict |\n|---|---|---:|---:|---:|---|---|\n")
		for _, l := range lines {
			e, r := cell(by[pair[0]], l), cell(by[pair[1]], l)
			if e == "" && r == "" {
				continue
			}
			key := l.cmp
			if key == "" {
				key = l.keys[0]
			}
			em, eok := med(by[pair[0]], key)
			rm, rok := med(by[pair[1]], key)
			ratio, target, verdict := "", "", ""
			if eok && rok && rm > 0 {
				ratio = fmt.Sprintf("%.3g", em/rm)
			}
			switch l.kind {
			case ratioAtLeast:
				target = fmt.Sprintf("≥ %g", l.target)
				if ratio != "" {
					verdict = pass(em/rm >= l.target)
				}
			case ratioAtMost:
				target = fmt.Sprintf("≤ %.3g", l.target)
				if ratio != "" {
					verdict = pass(em/rm <= l.target)
				}
			case absoluteAtMost:
				target = fmt.Sprintf("EdgeMQ ≤ %g %s", l.target, l.unit)
				if eok {
					verdict = pass(em <= l.target)
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", l.label, l.unit, e, r, ratio, target, verdict)
		}
	}
	var notes []string
	for _, r := range runs {
		for _, n := range r.Notes {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Kind, n))
		}
		if r.Err != "" {
			notes = append(notes, fmt.Sprintf("- %s: ERROR %s", r.Kind, r.Err))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNotes and errors:\n%s\n", strings.Join(notes, "\n"))
	}
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// med returns the median of key over the runs that have it (the lower middle of an even
// count).
func med(runs []run, key string) (float64, bool) {
	v := values(runs, key)
	if len(v) == 0 {
		return 0, false
	}
	return v[(len(v)-1)/2], true
}

func values(runs []run, key string) []float64 {
	var v []float64
	for _, r := range runs {
		if x, ok := r.M[key]; ok {
			v = append(v, x)
		}
	}
	slices.Sort(v)
	return v
}

// cell shows the medians of l's keys, and the range of the first when there are several runs.
func cell(runs []run, l line) string {
	var parts []string
	for _, k := range l.keys {
		m, ok := med(runs, k)
		if !ok {
			parts = append(parts, "—")
			continue
		}
		parts = append(parts, num(m))
	}
	if !slices.ContainsFunc(parts, func(s string) bool { return s != "—" }) {
		return ""
	}
	s := strings.Join(parts, " / ")
	key := l.cmp
	if key == "" {
		key = l.keys[0]
	}
	if v := values(runs, key); len(v) > 1 {
		s += fmt.Sprintf(" (median of %d: %s–%s)", len(v), num(v[0]), num(v[len(v)-1]))
	}
	return s
}

// num formats x with three significant digits below 1,000 and as a grouped integer above.
func num(x float64) string {
	if math.Abs(x) < 1000 {
		return fmt.Sprintf("%.3g", x)
	}
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

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}
