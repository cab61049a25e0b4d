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

// tableLines returns the rows of the EdgeMQ against RocketMQ tables.
func tableLines(p params, javaThreads int, heap string, java bool) []line {
	lines := []line{
		{label: "start to first acknowledged send (RocketMQ: name server + broker JVMs, registration)", keys: []string{"first_ack_ms"}, unit: unitMillis, target: targetFirstAck, kind: absoluteAtMost},
		{label: "↳ start to the broker port accepting connections", keys: []string{"listen_ms"}, unit: unitMillis},
		{label: fmt.Sprintf("send %s, rocketmq-client-go: %d clients × %d SendSync in flight", sizeName(p.size), p.clients, p.inflight), keys: []string{"go_send_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"go_send_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process)", keys: []string{"go_send_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ failed sends in the measured phase (broker busy; not counted)", keys: []string{"go_send_failed"}, unit: "msgs"},
		{label: fmt.Sprintf("send %s, EdgeMQ's client (edge/producer over edge/remoting): %d clients × %d sync Send in flight", sizeName(p.size), p.clients, p.inflight), keys: []string{"ours_send_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"ours_send_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process)", keys: []string{"ours_send_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ failed sends in the measured phase (broker busy; not counted)", keys: []string{"ours_send_failed"}, unit: "msgs"},
		{label: fmt.Sprintf("consume %s ×%d pre-filled, rocketmq-client-go push consumer (pull batch 32, consume batch 1)", sizeName(p.size), p.consumeN), keys: []string{"go_consume_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"go_consume_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process)", keys: []string{"go_consume_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: fmt.Sprintf("consume %s ×%d pre-filled, EdgeMQ's push consumer (consumer.PushConsumer over edge/remoting; pull batch 32, consume batch 1)", sizeName(p.size), p.consumeN), keys: []string{"ours_consume_rate"}, unit: unitRate, target: targetRate, kind: ratioAtLeast},
		{label: "↳ broker CPU per message", keys: []string{"ours_consume_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process)", keys: []string{"ours_consume_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: fmt.Sprintf("e2e latency p50 / p99 / p99.9 / max, p99 compared, @ %d msgs/s, rocketmq-client-go SendAsync (≤ %d in flight) → push consumer", p.latRate, p.latWindow), keys: []string{"lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us"}, cmp: "lat_p99_us", unit: unitMicros, target: targetP99, kind: ratioAtMost},
		{label: "↳ achieved send rate / sends > 2 ms behind schedule / failed sends", keys: []string{"lat_rate", "lat_late", "lat_failed"}, unit: unitRate},
		{label: "↳ sends' start behind schedule p50 / p99", keys: []string{"lat_lag_p50_us", "lat_lag_p99_us"}, unit: unitMicros},
		{label: "↳ broker CPU per message", keys: []string{"lat_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process: producer and consumer)", keys: []string{"lat_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: fmt.Sprintf("e2e latency p50 / p99 / p99.9 / max, p99 compared, @ %d msgs/s, EdgeMQ's producer SendAsync (≤ %d in flight) → its push consumer", p.latRate, p.latWindow), keys: []string{"ours_lat_p50_us", "ours_lat_p99_us", "ours_lat_p999_us", "ours_lat_max_us"}, cmp: "ours_lat_p99_us", unit: unitMicros, target: targetP99, kind: ratioAtMost},
		{label: "↳ achieved send rate / sends > 2 ms behind schedule / failed sends", keys: []string{"ours_lat_rate", "ours_lat_late", "ours_lat_failed"}, unit: unitRate},
		{label: "↳ sends' start behind schedule p50 / p99", keys: []string{"ours_lat_lag_p50_us", "ours_lat_lag_p99_us"}, unit: unitMicros},
		{label: "↳ broker CPU per message", keys: []string{"ours_lat_cpu_us"}, unit: unitMicrosPerMs},
		{label: "↳ client CPU per message (the benchmark process: producer and consumer)", keys: []string{"ours_lat_client_cpu_us"}, unit: unitMicrosPerMs},
		{label: floorLabel, keys: []string{"floor_lat_p50_us", "floor_lat_p99_us", "floor_lat_p999_us", "floor_lat_max_us"}, cmp: "floor_lat_p99_us", unit: unitMicros},
		{label: floorEchoCPULabel, keys: []string{"floor_lat_cpu_us"}, unit: unitMicrosPerMs},
		{label: floorClientCPULabel, keys: []string{"floor_lat_client_cpu_us"}, unit: unitMicrosPerMs},
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
	return lines
}

// printTable prints EdgeMQ against RocketMQ, one table per flush mode, from runs of one
// placement (their kinds without the placement's suffix); title names the placement.
func printTable(w io.Writer, runs []run, lines []line, title string) {
	by := byKind(runs)
	for _, pair := range [][2]string{{"edgemq-async", "rocketmq-async"}, {"edgemq-sync", "rocketmq-sync"}} {
		if by[pair[0]] == nil && by[pair[1]] == nil {
			continue
		}
		head := "async flush: edgemq serve -store.flush async vs RocketMQ ASYNC_FLUSH"
		if strings.HasSuffix(pair[0], "sync") && !strings.HasSuffix(pair[0], "async") {
			head = "sync flush: edgemq serve -store.flush sync vs RocketMQ SYNC_FLUSH"
		}
		fmt.Fprintf(w, "\n## %s%s\n\n", head, title)
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
			ratio, target, verdict := l.judge(em, rm, eok, rok)
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

// judge returns the ratio of EdgeMQ's figure em to RocketMQ's rm, the target and the verdict
// of row l; eok and rok say which figures there are.
func (l line) judge(em, rm float64, eok, rok bool) (ratio, target, verdict string) {
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
	return ratio, target, verdict
}

// byKind groups runs by their kind.
func byKind(runs []run) map[string][]run {
	by := map[string][]run{}
	for _, r := range runs {
		by[r.Kind] = append(by[r.Kind], r)
	}
	return by
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

// printClientTable prints, for each broker run, the clients side by side on the same
// broker: ours (edge/producer and consumer over edge/remoting), rocketmq-client-go and
// RocketMQ's Java benchmark tools; then our client over TCP against edgemq serve held
// against the same client in-process.
func printClientTable(w io.Writer, runs []run, p params) {
	by := map[string][]run{}
	var kindsSeen []string
	for _, r := range runs {
		if by[r.Kind] == nil {
			kindsSeen = append(kindsSeen, r.Kind)
		}
		by[r.Kind] = append(by[r.Kind], r)
	}
	type row struct {
		label            string
		ours, goc, javac string // keys; "" for none
		unit             string
	}
	rows := []row{
		{fmt.Sprintf("send %s, sync sends in flight (ours and Go: %d clients × %d; Java: its threads)", sizeName(p.size), p.clients, p.inflight), "ours_send_rate", "go_send_rate", "java_send_rate", unitRate},
		{"↳ client CPU per message", "ours_send_client_cpu_us", "go_send_client_cpu_us", "java_send_client_cpu_us", unitMicrosPerMs},
		{"↳ broker CPU per message", "ours_send_cpu_us", "go_send_cpu_us", "java_send_cpu_us", unitMicrosPerMs},
		{"↳ client heap allocations per message", "ours_send_allocs", "go_send_allocs", "", "allocs"},
		{fmt.Sprintf("consume %s ×%d pre-filled, push consumer, steady rate (ours and Go: from the first message received to the last; Java: its best 10 s window)", sizeName(p.size), p.consumeN), "ours_consume_steady_rate", "go_consume_steady_rate", "java_consume_rate", unitRate},
		{"↳ start to the first message received", "ours_consume_start_ms", "go_consume_start_ms", "", unitMillis},
		{"↳ client CPU per message", "ours_consume_client_cpu_us", "go_consume_client_cpu_us", "java_consume_client_cpu_us", unitMicrosPerMs},
		{"↳ broker CPU per message", "ours_consume_cpu_us", "go_consume_cpu_us", "java_consume_cpu_us", unitMicrosPerMs},
		{"↳ client heap allocations per message", "ours_consume_allocs", "go_consume_allocs", "", "allocs"},
		{fmt.Sprintf("e2e latency p50 / p99 @ %d msgs/s, async sends → push consumer", p.latRate), "ours_lat_p99_us", "lat_p99_us", "", unitMicros},
	}
	val := func(rs []run, key string) string {
		if key == "" {
			return ""
		}
		return cell(rs, line{keys: []string{key}})
	}
	for _, k := range kindsSeen {
		if k == "in-process" || strings.HasPrefix(k, "jetstream") {
			continue
		}
		fmt.Fprintf(w, "\n## clients against %s\n\n| workload | unit | ours | rocketmq-client-go | Java | ours / best other |\n|---|---|---:|---:|---:|---:|\n", k)
		for _, r := range rows {
			o, g, j := val(by[k], r.ours), val(by[k], r.goc), val(by[k], r.javac)
			if strings.HasPrefix(r.label, "e2e") {
				o = val(by[k], "ours_lat_p50_us") + " / " + o
				g = val(by[k], "lat_p50_us") + " / " + g
			}
			if strings.Trim(o+g+j, " /") == "" {
				continue
			}
			ratio := ""
			if om, ok := med(by[k], r.ours); ok && om > 0 {
				best, seen := 0.0, false
				for _, key := range []string{r.goc, r.javac} {
					if v, ok := med(by[k], key); ok && key != "" && v > 0 {
						higherBetter := r.unit == unitRate
						if !seen || (higherBetter && v > best) || (!higherBetter && v < best) {
							best, seen = v, true
						}
					}
				}
				if seen {
					ratio = fmt.Sprintf("%.3g", om/best)
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.label, r.unit, o, g, j, ratio)
		}
	}
	in := by["in-process"]
	if in == nil {
		return
	}
	fmt.Fprintf(w, "\n## our client over TCP (edgemq serve, async flush) vs in-process (*edge.Broker, async flush)\n\n")
	fmt.Fprintf(w, "| figure | unit | over TCP | in-process | TCP / in-process | target | verdict |\n|---|---|---:|---:|---:|---|---|\n")
	for _, place := range []string{"", pinnedSuffix} {
		tcp := by["edgemq-async"+place]
		if tcp == nil {
			tcp = by["edgemq-sync"+place]
		}
		if tcp == nil {
			continue
		}
		where := ""
		if place != "" {
			where = ", pinned"
		}
		if t, ok := med(tcp, "ours_consume_rate"); ok {
			i, _ := med(in, "inproc_consume_rate")
			fmt.Fprintf(w, "| consume %s ×%d, push consumer%s | %s | %s | %s | %.3g | ≥ 0.5 | %s |\n", sizeName(p.size), p.consumeN, where, unitRate,
				val(tcp, "ours_consume_rate"), val(in, "inproc_consume_rate"), t/i, pass(i > 0 && t/i >= 0.5))
		}
		if t, ok := med(tcp, "ours_lat_p99_us"); ok {
			fmt.Fprintf(w, "| e2e p99 @ %d msgs/s%s | %s | %s | %s | | ≤ 300 µs over TCP | %s |\n", p.latRate, where, unitMicros,
				val(tcp, "ours_lat_p99_us"), val(in, "inproc_lat_p99_us"), pass(t <= 300))
		}
		fmt.Fprintf(w, "| client CPU per consumed message%s | %s | %s | %s | | | |\n", where, unitMicrosPerMs, val(tcp, "ours_consume_client_cpu_us"), val(in, "inproc_consume_client_cpu_us"))
		fmt.Fprintf(w, "| heap allocations per consumed message%s | allocs | %s | %s | | | |\n", where, val(tcp, "ours_consume_allocs"), val(in, "inproc_consume_allocs"))
	}
}
