// Command bench runs the same workloads on EdgeMQ (in-process edge.Broker) and on an embedded
// NATS JetStream server (in-process connection, file storage) and prints a side-by-side
// table with ratios and the targets of the peer-benchmark issue.
//
// Every workload of every side runs in its own child process (the -child flag), so that each
// peak RSS (VmHWM) belongs to one run. The children are binaries of this package built at
// start for each side (build tags edgemqonly and jetstreamonly), so that a run's RSS holds
// only its own broker's code; -combined runs them all in this binary instead. Workloads:
//
//   - send: msgs/s from 1 producer and from -producers goroutines, 100 B and 1 KiB bodies;
//     EdgeMQ async flush vs JetStream's default (fsync every 2 min), EdgeMQ sync flush (the
//     default) vs JetStream with SyncAlways. One producer sends one at a time (EdgeMQ
//     Broker.Send in a loop, JetStream js.Publish, which waits for each ack); its concurrent
//     producers use js.PublishAsync with at most -window acks outstanding. A pipelined run,
//     async and durable, has one producer, and then -producers goroutines, with up to
//     -window sends in flight in all on both sides, each side's best mode for senders that
//     need not wait: EdgeMQ Broker.SendAsync, JetStream js.PublishAsync. Disk bytes per
//     message are measured after the run, once the broker or server is shut down.
//   - pull: msgs/s of batches of 32 over a pre-filled queue: Broker.Pull (Filter "*", MaxMsgs
//     32, without and with CommitOffset) vs a JetStream pull consumer's Fetch(32) (AckNone,
//     and AckExplicit with msg.Ack() per message).
//   - latency: a producer paced at -lat-rate msgs/s stamps the send time into the body; one
//     consumer (EdgeMQ long-poll Pull with Suspend; JetStream pull Consume, or a push
//     consumer) records receive-minus-send for each message. A "floor" run does the same with
//     no broker (two channel hops) to show what the harness and machine allow.
//   - consume: msgs/s of a consumer.PushConsumer with a no-op listener over -consume-n
//     messages pre-filled into -consume-queues queues (async flush), from Start until every
//     queue's consumed offset is at its end: concurrent with ConsumeMessageBatchMaxSize 1
//     (the default) and 32, and orderly. JetStream's peer is a pull consumer's
//     Fetch(-js-fetch) loop over the same number of messages: AckNone, AckAll with one Ack()
//     per batch, and AckExplicit with Ack() per message.
//   - latency through the PushConsumer: the latency workload with a concurrent PushConsumer
//     (default options) receiving, next to JetStream's pull consumer Consume().
//
// The machine's noise moves a run by 15-20 %: -repeat N runs every job N times, the two
// sides of a workload in turn, and reports each job's median run with the range of the N.
//
// Run from scripts/bench: go run . [-h for flags].
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	sideEdgeMQ   = "edgemq"
	sideJS       = "jetstream"
	sideFloor    = "floor" // latency only: no broker, two channel hops
	workSend     = "send"
	workPull     = "pull"
	workLatency  = "latency"
	workConsume  = "consume"
	consumerPull = "consume" // JetStream pull consumer, Consume callback
	consumerPush = "push"    // JetStream push consumer
	// consumerPushConsumer is EdgeMQ's consumer.PushConsumer (latency).
	consumerPushConsumer = "pushconsumer"
)

// topic is the EdgeMQ topic (one queue) and the JetStream subject of every run.
const topic = "bench"

// job is one run of one workload on one side, executed in a child process.
type job struct {
	Side      string
	Work      string
	Durable   bool // send: EdgeMQ sync flush / JetStream SyncAlways
	Size      int  // body bytes
	Producers int
	Pipelined bool          // send: up to Window sends in flight in all (EdgeMQ SendAsync, JS PublishAsync)
	Window    int           // JetStream: max outstanding async publishes
	N         int64         // send: message cap; pull: messages; latency: measured messages
	Time      time.Duration // send: time cap
	Ack       bool          // pull, consume: EdgeMQ CommitOffset / JetStream AckExplicit
	Consumer  string        // latency: JetStream consumerPull or consumerPush; EdgeMQ consumerPushConsumer or ""
	Queues    int           // consume, EdgeMQ: queues of the topic
	Batch     int           // consume: EdgeMQ ConsumeMessageBatchMaxSize, JetStream Fetch batch
	Orderly   bool          // consume, EdgeMQ: an orderly listener
	AckAll    bool          // consume, JetStream with Ack: AckAll, one Ack() per batch
	Rate      int           // latency: msgs/s
	Warmup    int           // latency: messages sent before the measured ones
	Dir       string        // parent of the run's temp data dir
	Profile   string        // CPU profile of the measured phase, if set
}

// name is a short, file-name-safe label of the job.
func (j job) name() string {
	parts := []string{j.Side, j.Work}
	switch j.Work {
	case workSend:
		parts = append(parts, map[bool]string{false: "async", true: "durable"}[j.Durable], sizeName(j.Size), "p"+strconv.Itoa(j.Producers))
		if j.Pipelined {
			parts = append(parts, "w"+strconv.Itoa(j.Window))
		}
	case workPull:
		parts = append(parts, sizeName(j.Size), map[bool]string{false: "noack", true: "ack"}[j.Ack])
	case workLatency:
		if j.Consumer != "" {
			parts = append(parts, j.Consumer)
		}
	case workConsume:
		parts = append(parts, sizeName(j.Size))
		switch {
		case j.Side == sideJS:
			ack := map[bool]string{false: "noack", true: "ack"}[j.Ack]
			if j.Ack && j.AckAll {
				ack = "ackall"
			}
			parts = append(parts, "fetch"+strconv.Itoa(j.Batch), ack)
		case j.Orderly:
			parts = append(parts, "orderly", "b"+strconv.Itoa(j.Batch))
		default:
			parts = append(parts, "concurrent", "b"+strconv.Itoa(j.Batch))
		}
	}
	return strings.Join(parts, "-")
}

func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// result is what a child reports, as JSON on its last line of stdout.
type result struct {
	Job      string
	Msgs     int64   // messages the measured phase completed
	Stored   int64   // messages in the store when disk usage was taken
	Seconds  float64 // measured phase
	Rate     float64 // Msgs/Seconds
	PeakKiB  int64   // VmHWM of the child
	AnonKiB  int64   // peak RssAnon, sampled every 50 ms
	FileKiB  int64   // peak RssFile (mmap'd and other file pages), sampled every 50 ms
	DiskLog  int64   // logical bytes of the data dir after the run (send only)
	DiskPhys int64   // allocated bytes of the data dir after the run (send only)
	// DiskUsed is the bytes holding data (send only): for EdgeMQ the log up to its end, the
	// queue entries and the other files, without the preallocated rest of the active segment
	// and queue files; for JetStream (append-only files) DiskLog.
	DiskUsed int64
	// RecordBytes is the commitlog record of one message (EdgeMQ send only): with the
	// 20-byte consume-queue entry, the marginal disk cost of a message, as segments are
	// preallocated.
	RecordBytes int64
	Lat         dist // latency: receive minus send
	Pace        dist // latency: lateness of sends against their schedule
	Call        dist // latency: duration of the producer's send call
	Note        string
	Err         string
	// Of -repeat runs (set by the parent on the median run it reports): how many there
	// were and the least and most of the metric that chose the median (Rate, or Lat.P99).
	Runs     int     `json:"-"`
	Min, Max float64 `json:"-"`
}

// key is the metric by which runs of a job are ranked: the p99 of a latency run, else the
// rate.
func (r result) key() float64 {
	if r.Lat.N > 0 {
		return float64(r.Lat.P99)
	}
	return r.Rate
}

// median returns the median of the runs of one job (the lower middle one of an even count)
// by key, with the count and range of the runs; a failed run is reported as the job's result.
func median(rs []result) result {
	for _, r := range rs {
		if r.Err != "" {
			return r
		}
	}
	sorted := slices.SortedFunc(slices.Values(rs), func(a, b result) int { return cmp.Compare(a.key(), b.key()) })
	m := sorted[(len(sorted)-1)/2]
	m.Runs, m.Min, m.Max = len(rs), sorted[0].key(), sorted[len(sorted)-1].key()
	return m
}

func main() {
	var (
		child     = flag.String("child", "", "internal: run one job (JSON) and print its result")
		sendN     = flag.Int64("send-n", 5_000_000, "send: at most this many messages per run")
		sendTime  = flag.Duration("send-time", 3*time.Second, "send: at most this long per run")
		producers = flag.Int("producers", 64, "send: concurrent producer goroutines")
		window    = flag.Int("window", 1024, "JetStream: max outstanding js.PublishAsync acks (concurrent send and pre-fill)")
		sizes     = flag.String("sizes", "100,1024", "send: body sizes in bytes, comma separated")
		pullN     = flag.Int64("pull-n", 500_000, "pull: messages pre-filled and pulled")
		pullSize  = flag.Int("pull-size", 100, "pull: body bytes")
		latN      = flag.Int("lat-n", 50_000, "latency: measured messages")
		latWarm   = flag.Int("lat-warmup", 2_000, "latency: messages sent and ignored before the measured ones")
		latRate   = flag.Int("lat-rate", 10_000, "latency: producer rate, msgs/s")
		latSize   = flag.Int("lat-size", 100, "latency: body bytes (at least 16)")
		dir       = flag.String("dir", os.TempDir(), "parent of the temp data dirs")
		profile   = flag.String("cpuprofile", "", "write a CPU profile of each run's measured phase into this dir")
		consumeN  = flag.Int64("consume-n", 1_000_000, "consume: messages pre-filled and consumed")
		consumeQ  = flag.Int("consume-queues", 4, "consume, EdgeMQ: queues of the topic")
		jsFetch   = flag.Int("js-fetch", 1000, "consume, JetStream: Fetch batch size")
		only      = flag.String("only", "", "run only jobs whose name matches this regexp (e.g. 'send-async-100B')")
		src       = flag.String("src", ".", "this package's source dir, to build the per-side child binaries from")
		repeat    = flag.Int("repeat", 1, "run every job this many times, the two sides in turn, and report each job's median run (by rate, or by p99 for latency) with the range of the runs")
		combined  = flag.Bool("combined", false, "run every job in this binary, which links both brokers, instead of per-side child binaries (no Go toolchain needed; each run's RSS then includes the other broker's code and data pages)")
	)
	flag.Parse()
	if *child != "" {
		os.Exit(runChild(*child))
	}
	var sz []int
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("bad -sizes %q", *sizes)
		}
		sz = append(sz, n)
	}
	if *latSize < 16 {
		fatalf("-lat-size must be at least 16")
	}
	if *repeat < 1 {
		fatalf("-repeat must be at least 1")
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fatalf("bad -only: %v", err)
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			fatalf("%v", err)
		}
	}
	base := job{Window: *window, Dir: *dir}
	var rows []row
	for _, durable := range []bool{false, true} {
		for _, size := range sz {
			for _, p := range []int{1, *producers} {
				j := base
				j.Work, j.Durable, j.Size, j.Producers, j.N, j.Time = workSend, durable, size, p, *sendN, *sendTime
				rows = append(rows, pair(j))
			}
			// A window of sends in flight, from one producer and from the concurrent ones:
			// each side's best mode for senders that need not wait (EdgeMQ SendAsync,
			// JetStream PublishAsync), the same window.
			for _, p := range []int{1, *producers} {
				j := base
				j.Work, j.Durable, j.Size, j.Producers, j.Pipelined, j.N, j.Time = workSend, durable, size, p, true, *sendN, *sendTime
				rows = append(rows, pair(j))
			}
		}
	}
	for _, ack := range []bool{false, true} {
		j := base
		j.Work, j.Size, j.N, j.Ack = workPull, *pullSize, *pullN, ack
		rows = append(rows, pair(j))
	}
	for _, c := range []string{consumerPull, consumerPush} {
		j := base
		j.Work, j.Size, j.N, j.Rate, j.Warmup, j.Consumer = workLatency, *latSize, int64(*latN), *latRate, *latWarm, c
		rows = append(rows, pair(j))
	}
	for _, c := range []struct {
		batch           int
		orderly         bool
		jsAck, jsAckAll bool
	}{
		{1, false, true, true}, {32, false, true, true}, {1, true, true, true},
		{1, false, false, false}, {32, false, false, false}, {1, false, true, false},
	} {
		j := base
		j.Work, j.Size, j.N, j.Queues = workConsume, *pullSize, *consumeN, *consumeQ
		e, s := j, j
		e.Side, e.Batch, e.Orderly = sideEdgeMQ, c.batch, c.orderly
		s.Side, s.Batch, s.Ack, s.AckAll, s.Queues = sideJS, *jsFetch, c.jsAck, c.jsAckAll, 0
		rows = append(rows, row{emq: e, js: s})
	}
	{
		j := base
		j.Work, j.Size, j.N, j.Rate, j.Warmup = workLatency, *latSize, int64(*latN), *latRate, *latWarm
		e, s := j, j
		e.Side, e.Consumer = sideEdgeMQ, consumerPushConsumer
		s.Side, s.Consumer = sideJS, consumerPull
		rows = append(rows, row{emq: e, js: s})
	}
	floor := base
	floor.Side, floor.Work, floor.Size, floor.N, floor.Rate, floor.Warmup = sideFloor, workLatency, *latSize, int64(*latN), *latRate, *latWarm
	rows = append(rows, row{emq: floor})

	children := map[string]string{}
	if !*combined {
		tmp, err := os.MkdirTemp(*dir, "edgemq-bench-bin-")
		if err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(tmp)
		if children, err = childBinaries(*src, tmp); err != nil {
			os.RemoveAll(tmp)
			fatalf("%v (run from scripts/bench, set -src, or use -combined)", err)
		}
	}
	fmt.Printf("# EdgeMQ vs embedded NATS JetStream\n\n%s\n\n", machine(*dir))
	start := time.Now()
	done := map[string]result{} // results by job name: EdgeMQ latency runs once for two rows
	for i := range rows {
		r := &rows[i]
		var todo []*job
		for _, j := range []*job{&r.emq, &r.js} {
			if j.Side == "" || !re.MatchString(j.name()) {
				continue
			}
			if _, ok := done[j.name()]; ok {
				continue
			}
			if *profile != "" {
				j.Profile = filepath.Join(*profile, j.name()+".pprof")
			}
			todo = append(todo, j)
		}
		runs := map[string][]result{}
		for range *repeat { // the sides in turn, so that a slow spell of the machine hits both
			for _, j := range todo {
				res := spawn(*j, children[j.Side])
				runs[j.name()] = append(runs[j.name()], res)
				fmt.Fprintf(os.Stderr, "%-40s %s\n", j.name(), res.brief())
			}
		}
		for name, rs := range runs {
			done[name] = median(rs)
		}
		if res, ok := done[r.emq.name()]; ok && r.emq.Side != "" && re.MatchString(r.emq.name()) {
			r.emqRes = &res
		}
		if res, ok := done[r.js.name()]; ok && r.js.Side != "" && re.MatchString(r.js.name()) {
			r.jsRes = &res
		}
	}
	printTables(os.Stdout, rows)
	fmt.Printf("\nTotal wall time %s; %s\n", time.Since(start).Round(time.Second), machine(*dir))
}

// pair returns the row of j's workload on both sides.
func pair(j job) row {
	e, s := j, j
	e.Side, s.Side = sideEdgeMQ, sideJS
	e.Consumer = ""
	return row{emq: e, js: s}
}

// childTags are the build tags of each side's child binary: each links only its own broker.
var childTags = map[string]string{sideEdgeMQ: "edgemqonly", sideJS: "jetstreamonly", sideFloor: "edgemqonly"}

// childBinaries builds the child binaries of the sides into dir from the package in src and
// returns their paths by side. A run's peak RSS then holds no code or data pages of the other
// broker (in the combined binary, nats-server's alone kept ~11 MiB resident in every run).
func childBinaries(src, dir string) (map[string]string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("build child binaries: %w", err)
	}
	built := map[string]string{}
	out := map[string]string{}
	for side, tag := range childTags {
		if p, ok := built[tag]; ok {
			out[side] = p
			continue
		}
		p := filepath.Join(dir, "bench-"+tag)
		cmd := exec.Command(goTool, "build", "-tags", tag, "-o", p, ".")
		cmd.Dir = src
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s child binary in %s: %w: %s", tag, src, err, strings.TrimSpace(string(b)))
		}
		built[tag], out[side] = p, p
	}
	return out, nil
}

// spawn runs j in a child process of exe (this binary when empty) and returns its result.
func spawn(j job, exe string) result {
	b, _ := json.Marshal(j)
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return result{Job: j.name(), Err: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-child", string(b))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var res result
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		msg := fmt.Sprintf("child: %v; %s", runErr, strings.TrimSpace(errb.String()))
		return result{Job: j.name(), Err: msg}
	}
	return res
}

// runChild runs one job and prints its result as JSON; it returns the exit code.
func runChild(arg string) int {
	var j job
	if err := json.Unmarshal([]byte(arg), &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res := result{Job: j.name()}
	rss := startRSSSampler()
	dir, err := os.MkdirTemp(j.Dir, "edgemq-bench-"+j.name()+"-")
	if err != nil {
		res.Err = err.Error()
	} else {
		ctx := context.Background()
		var r result
		switch j.Side {
		case sideEdgeMQ:
			r, err = runEdgeMQ(ctx, j, dir)
		case sideJS:
			r, err = runJetStream(ctx, j, dir)
		case sideFloor:
			r, err = runFloor(j)
		default:
			err = fmt.Errorf("unknown side %q", j.Side)
		}
		r.Job = res.Job
		res = r
		if err != nil {
			res.Err = err.Error()
		}
		os.RemoveAll(dir)
	}
	if res.Seconds > 0 {
		res.Rate = float64(res.Msgs) / res.Seconds
	}
	res.AnonKiB, res.FileKiB = rss.stop()
	res.PeakKiB = peakRSS()
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return 0
}

// measureDisk fills in the disk usage of dir after a send run.
func measureDisk(res *result, dir string) error {
	l, p, err := diskUsage(dir)
	res.DiskLog, res.DiskPhys = l, p
	return err
}

func (r result) brief() string {
	if r.Err != "" {
		return "ERROR " + r.Err
	}
	s := fmt.Sprintf("%10.0f msgs/s  %8d msgs in %6.2fs  peak %6.1f MiB", r.Rate, r.Msgs, r.Seconds, float64(r.PeakKiB)/1024)
	if r.Lat.N > 0 {
		s += fmt.Sprintf("  p50 %s p99 %s p99.9 %s", us(r.Lat.P50), us(r.Lat.P99), us(r.Lat.P999))
	}
	return s
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(2)
}
