// Command netbench drives EdgeMQ (edgemq serve) and Apache RocketMQ 5.x (name server + broker)
// over loopback with the same clients and prints a side-by-side table with ratios and the
// targets of the network-benchmark issue; and nats-server with JetStream, driven by nats.go,
// against edgemq serve driven by EdgeMQ's own client (jetstream.go).
//
// Each broker runs alone, in a fresh data dir, started for each run and stopped after it:
// edgemq serve with -store.flush async, Apache RocketMQ with ASYNC_FLUSH, edgemq serve with
// -store.flush sync, Apache RocketMQ with SYNC_FLUSH (scripts/interop/rocketmq.sh starts it).
// On each, in turn:
//
//   - start to first ack: from spawning the broker (for RocketMQ: rocketmq.sh start, so the
//     name-server JVM, the broker JVM and the broker's registration) until a
//     rocketmq-client-go producer, sending every millisecond from just before the spawn, gets
//     its first SEND_OK (the topic is auto-created by that send);
//   - warm-up, unmeasured: -broker-warmup of sends and consumes with both Go clients on
//     their own topic, so that a JVM broker is measured with its hot paths compiled
//     (warmup.go);
//   - send: -clients rocketmq-client-go producers (one connection each), each with -inflight
//     goroutines calling SendSync with a -size body in a loop, so clients×inflight sends in
//     flight; msgs/s over -send-time after -send-warmup;
//   - consume: -consume-n messages pre-filled (batch sends), then a rocketmq-client-go push
//     consumer (from the first offset, client defaults: pull batch 32, consume batch 1)
//     timed from Start until it has received them all; the clients' table gives their
//     steady rate too, from the first message received to the last (the start left out,
//     as the best window of RocketMQ's benchmark Consumer leaves it out);
//   - latency: one producer paced at -lat-rate msgs/s with SendAsync, a push consumer; the body
//     carries the send time; receive minus send (p50/p99/p99.9/max) of -lat-n messages after
//     -lat-warmup;
//   - Apache RocketMQ's own benchmark tools (rocketmq-example, -java): its Producer
//     (-java-threads threads of sync sends of -size bytes) and its Consumer (push consumer,
//     20 consume threads) over -java-consume-n pre-filled messages, run for -java-time and
//     -java-consume-time;
//     their rate is their own printed rate over 10 one-second snapshots ("Send TPS", "TPS"),
//     printed every second (-ri 1000): the best window.
//
// For each workload it takes the broker's CPU time (utime+stime from /proc/PID/stat, for
// RocketMQ broker and name server together) before and after and divides by the messages,
// and the broker process's peak RSS (VmHWM, reset between workloads through clear_refs).
// RocketMQ's name server is reported on its own.
//
// EdgeMQ's own client (edge/producer, consumer.PushConsumer over edge/remoting) runs the
// send, consume and latency workloads too, against both brokers, so that the brokers'
// difference shows where the client costs little.
//
// -placements unpinned,pinned runs every broker a second time in each round pinned to its own
// CPUs (-pin-broker, default the second half: one of two) with this process, its clients and
// the Java tools on the others (-pin-clients, the first half), each Go process with as many
// processors as CPUs; the in-process run keeps every CPU. A last table gives each side its
// better placement for each compared figure, with the other beside it (see pin.go).
//
// -repeat N runs every broker N times, in turn, and reports each figure's median with its
// range; the Java tools run in the first -java-rounds rounds only (default 1). -load runs the load test instead (see load.go).
//
// Run from scripts/netbench: go run . [-h for flags]; netbench.sh starts and stops a broker by
// hand.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// run is one run of one broker.
type run struct {
	Kind  string
	M     metrics
	Notes []string
	Err   string
}

func main() {
	var (
		repeat     = flag.Int("repeat", 1, "run every broker this many times, in turn, and report medians with their range")
		brokersF   = flag.String("brokers", "edgemq-async,rocketmq-async,jetstream-async,edgemq-sync,rocketmq-sync,jetstream-sync", "brokers to run, comma separated (jetstream-*: nats-server with JetStream, its default sync every 2 minutes or sync_interval always)")
		dir        = flag.String("dir", os.TempDir(), "parent of the fresh data dirs")
		src        = flag.String("src", "../..", "the EdgeMQ source tree, to build edgemq from")
		edgemqBin  = flag.String("edgemq", "", "an edgemq binary to run (default: go build ./cmd/edgemq from -src)")
		natsBin    = flag.String("nats-server", "", "a nats-server binary to run (default: go build github.com/nats-io/nats-server/v2 in -nats-src)")
		natsSrc    = flag.String("nats-src", "../bench", "the Go module to build nats-server in (its go.mod gives the version: scripts/bench, the in-process comparison's)")
		natsPort   = flag.Int("nats-port", 18422, "nats-server port")
		edgemqArgs = flag.String("edgemq-args", "", "more flags for edgemq serve, space separated (after the benchmark's own, so they win: \"-store.write_buffer 1048576\")")
		rmqScript  = flag.String("rocketmq-sh", "../interop/rocketmq.sh", "scripts/interop/rocketmq.sh")
		rmqHeap    = flag.String("rmq-heap", "256m", "RocketMQ broker heap and direct-memory cap (RMQ_HEAP)")
		edgemqPort = flag.Int("edgemq-port", 18876, "edgemq serve port (and port-2 for its VIP channel)")
		rmqNS      = flag.Int("rmq-namesrv-port", 18976, "RocketMQ name-server port")
		rmqBroker  = flag.Int("rmq-broker-port", 20911, "RocketMQ broker port (port-2 and port+1 must be free too)")
		size       = flag.Int("size", 100, "body bytes")
		clients    = flag.Int("clients", 4, "send: producer clients (connections)")
		inflight   = flag.Int("inflight", 16, "send: SendSync goroutines per producer client")
		brokerWarm = flag.Duration("broker-warmup", 40*time.Second, "each broker, after its start is timed and before its first workload: unmeasured sends and consumes with ours and rocketmq-client-go, so that a JVM broker has compiled its hot paths (0: off)")
		sendWarm   = flag.Duration("send-warmup", 2*time.Second, "send: unmeasured lead-in")
		sendTime   = flag.Duration("send-time", 5*time.Second, "send: measured phase")
		consumeN   = flag.Int("consume-n", 500_000, "consume: messages pre-filled and consumed")
		prefillBat = flag.Int("prefill-batch", 32, "consume: messages per batch send of the pre-fill")
		latRate    = flag.Int("lat-rate", 10_000, "latency: msgs/s")
		latN       = flag.Int("lat-n", 50_000, "latency: measured messages")
		latWarm    = flag.Int("lat-warmup", 5_000, "latency: messages before the measured ones")
		latWindow  = flag.Int("lat-window", 128, "latency: most SendAsync calls in flight (edgemq serve answers SYSTEM_BUSY past server.max_inflight, 256, on one connection)")
		javaOn     = flag.Bool("java", true, "also run Apache RocketMQ's benchmark Producer and Consumer (rocketmq-example, resolved with mvn)")
		javaThr    = flag.Int("java-threads", 64, "java Producer: send threads (its -w)")
		javaTime   = flag.Duration("java-time", 30*time.Second, "java Producer: how long it runs (its rate is over 10 s windows, printed every second)")
		javaCTime  = flag.Duration("java-consume-time", 60*time.Second, "java Consumer: how long it runs (its rate is over 10 s windows, printed every second; its JVM warms up for 15-20 s of consuming first)")
		javaN      = flag.Int("java-consume-n", 8_000_000, "java Consumer: messages pre-filled (they must outlast its JVM's warm-up and then its 10 s window)")
		javaRounds = flag.Int("java-rounds", 1, "run the Java tools in the first this many rounds of -repeat only (they take two thirds of a round)")
		workloads  = flag.String("workloads", "go_send,go_consume,lat,ours_send,ours_consume,ours_lat,floor_lat,java_send,java_consume,nats_send,nats_consume,nats_lat,nats_lat_push", "workloads to run, comma separated (nats_* run on jetstream-* only, floor_lat, the latency workload over a bare TCP echo process placed as the broker, on edgemq-* only, the others on edgemq-* and rocketmq-* only)")
		echoServe  = flag.String(echoServeFlag, "", "run as the floor_lat workload's echo process on this address (started by netbench itself)")
		placeF     = flag.String("placements", "unpinned", "placements of the broker and the clients to run, comma separated: unpinned (the kernel places every thread on any CPU), pinned (the broker on -pin-broker, this process with its clients on -pin-clients); with both, each round runs every broker in each, and a table gives each side its better placement")
		pinCl      = flag.String("pin-clients", "", "pinned placement: this process (the Go clients and the Java tools) runs on these CPUs (taskset list; default the first half), with as many Go processors; the in-process run keeps every CPU")
		pinBr      = flag.String("pin-broker", "", "pinned placement: each broker (edgemq serve; RocketMQ's name server and broker) runs on these CPUs (taskset list; default the second half)")
		inproc     = flag.Bool("inproc", true, "also run our consumer and producer over an in-process broker (the figure ours_consume and ours_lat are held against)")
		keep       = flag.Bool("keep", false, "keep the data dirs and logs")
		jsonOut    = flag.String("json", "", "also write every run's figures to this file")
		traceOut   = flag.String("trace", "", "write a runtime/trace of this process (the Go clients) over each measured send, consume and latency phase into this directory (they cost the client CPU: not for the figures)")
		profOut    = flag.String("cpuprofile", "", "write a CPU profile of this process (the Go clients) over each measured send, consume and latency phase into this directory (it costs the client CPU: not for the figures)")
		memOut     = flag.String("memprofile", "", "write this process's allocation profile (the Go clients; every allocation sampled) at the end of each measured send, consume and latency phase into this directory: cumulative since the process started, so run one workload to read one; sampling every allocation slows the clients: not for the figures")
		load       = flag.Bool("load", false, "run the load test against edgemq serve instead (see -load-*)")
		loadDur    = flag.Duration("load-duration", 10*time.Minute, "load: how long the producers send")
		loadConns  = flag.Int("load-conns", 1000, "load: client connections in all (producers + consumers + idle ones)")
		loadProd   = flag.Int("load-producers", 200, "load: producer clients")
		loadCons   = flag.Int("load-consumers", 200, "load: consumer clients (one group)")
		loadRate   = flag.Int("load-rate", 50, "load: msgs/s of each producer")
		loadFlush  = flag.String("load-flush", "sync", "load: edgemq serve -store.flush")
		uplinkOn   = flag.Bool("uplink", false, "run the uplink benchmark instead: drain a gateway's backlog to edgemq serve and to RocketMQ (see uplink.go)")
		uplinkN    = flag.Int("uplink-n", 1_000_000, "uplink: messages in the backlog")
	)
	flag.Parse()
	if *echoServe != "" {
		if err := serveEcho(*echoServe); err != nil {
			fatalf("echo: %v", err)
		}
		return
	}
	rlog.SetLogLevel("fatal")
	traceDir = *traceOut
	profDir = *profOut
	memDir = *memOut
	if memDir != "" {
		runtime.MemProfileRate = 1
	}
	ctx := context.Background()

	tmp, err := os.MkdirTemp(*dir, "netbench-bin-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(tmp)
	if *edgemqBin == "" {
		*edgemqBin = filepath.Join(tmp, "edgemq")
		cmd := exec.Command("go", "build", "-o", *edgemqBin, "./cmd/edgemq")
		cmd.Dir = *src
		if out, err := cmd.CombinedOutput(); err != nil {
			fatalf("build edgemq in %s: %v: %s", *src, err, out)
		}
	}
	var places []string
	for pl := range strings.SplitSeq(*placeF, ",") {
		pl = strings.TrimSpace(pl)
		if pl != placeUnpinned && pl != placePinned {
			fatalf("unknown placement %q", pl)
		}
		places = append(places, pl)
	}
	n := cpus()
	if *pinCl == "" {
		*pinCl = cpuRange(0, max(n/2, 1)-1)
	}
	if *pinBr == "" {
		*pinBr = cpuRange(min(n/2, n-1), n-1)
	}
	for _, l := range []string{*pinCl, *pinBr} {
		if _, err := cpuCount(l); err != nil {
			fatalf("%v", err)
		}
	}
	c := config{dir: *dir, edgemqBin: *edgemqBin, rmqHeap: *rmqHeap, edgemqPort: *edgemqPort,
		rmqNSPort: *rmqNS, rmqBrPort: *rmqBroker, natsPort: *natsPort, maxConns: 4096, edgemqArgs: strings.Fields(*edgemqArgs), keep: *keep}
	if c.rmqScript, err = filepath.Abs(*rmqScript); err != nil {
		fatalf("%v", err)
	}

	if *load {
		code := runLoad(ctx, c, loadParams{duration: *loadDur, conns: *loadConns, producers: *loadProd,
			consumers: *loadCons, rate: *loadRate, flush: *loadFlush, size: *size})
		os.RemoveAll(tmp)
		os.Exit(code)
	}

	if *uplinkOn {
		c.rmqCP = rocketmqClasspath(c.rmqScript, tmp)
		javaCP := javaClasspath(*javaOn, tmp)
		code := runUplink(ctx, c, *uplinkN, javaCP, *javaThr, *javaTime)
		os.RemoveAll(tmp)
		os.Exit(code)
	}

	var todo []kind
	for name := range strings.SplitSeq(*brokersF, ",") {
		i := slices.IndexFunc(kinds, func(k kind) bool { return k.Name == strings.TrimSpace(name) })
		if i < 0 {
			fatalf("unknown broker %q", name)
		}
		todo = append(todo, kinds[i])
	}
	if slices.ContainsFunc(todo, func(k kind) bool { return k.RocketMQ }) {
		c.rmqCP = rocketmqClasspath(c.rmqScript, tmp)
	}
	if slices.ContainsFunc(todo, func(k kind) bool { return k.JetStream }) {
		c.natsBin = *natsBin
		if c.natsBin == "" {
			c.natsBin = filepath.Join(tmp, "nats-server")
			cmd := exec.Command("go", "build", "-o", c.natsBin, "github.com/nats-io/nats-server/v2")
			cmd.Dir = *natsSrc
			if out, err := cmd.CombinedOutput(); err != nil {
				fatalf("build nats-server in %s: %v: %s", *natsSrc, err, out)
			}
		}
	}
	javaCP := javaClasspath(*javaOn, tmp)
	p := params{size: *size, clients: *clients, inflight: *inflight, brokerWarm: *brokerWarm, sendWarm: *sendWarm, sendTime: *sendTime,
		consumeN: *consumeN, prefillBat: *prefillBat, latRate: *latRate, latN: *latN, latWarm: *latWarm, latWindow: *latWindow}

	fmt.Printf("# EdgeMQ vs Apache RocketMQ and NATS JetStream over loopback\n\n%s\n\n", machine())
	start := time.Now()
	var runs []run
	if *inproc {
		fmt.Fprintf(os.Stderr, "== in-process\n")
		r := run{Kind: "in-process", M: metrics{}}
		ip := p
		ip.note = func(s string) { r.Notes = append(r.Notes, s) }
		if m, err := inProcess(*dir, "async", ip); err != nil {
			r.Err = err.Error()
		} else {
			r.M = m
		}
		fmt.Fprintf(os.Stderr, "   %s\n", r.M)
		runs = append(runs, r)
	}
	if slices.Contains(places, placePinned) {
		fmt.Printf("Pinned placement: the brokers on CPUs %s, this process with the clients on CPUs %s; the in-process run on every CPU.\n\n", *pinBr, *pinCl)
	}
	placed := placeUnpinned
	for i := range *repeat {
		for _, pl := range places {
			if pl != placed {
				list := *pinCl
				if pl == placeUnpinned {
					list = cpuRange(0, n-1)
				}
				if err := pinSelf(list); err != nil {
					fatalf("place the clients: %v", err)
				}
				placed = pl
			}
			c := c
			if pl == placePinned {
				c.pinBroker = *pinBr
			}
			for _, k := range todo {
				fmt.Fprintf(os.Stderr, "== %s %s (run %d of %d)\n", k.Name, pl, i+1, *repeat)
				cp := javaCP
				if i >= *javaRounds {
					cp = ""
				}
				r := runOne(ctx, k, c, p, strings.Split(*workloads, ","), cp, *javaThr, *javaTime, *javaCTime, *javaN)
				if pl == placePinned {
					r.Kind += pinnedSuffix
				}
				fmt.Fprintf(os.Stderr, "   %s\n", r.M)
				for _, n := range r.Notes {
					fmt.Fprintf(os.Stderr, "   note: %s\n", n)
				}
				if r.Err != "" {
					fmt.Fprintf(os.Stderr, "   ERROR: %s\n", r.Err)
				}
				runs = append(runs, r)
			}
		}
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(runs, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "netbench: %v\n", err)
		}
	}
	lines := tableLines(p, *javaThr, *rmqHeap, javaCP != "")
	unpinned, pinned := byPlacement(runs)
	if len(unpinned) > 0 {
		printTable(os.Stdout, unpinned, lines, "")
	}
	if len(pinned) > 0 {
		printTable(os.Stdout, pinned, lines, fmt.Sprintf(", pinned (brokers on CPUs %s, clients on CPUs %s)", *pinBr, *pinCl))
	}
	if len(unpinned) > 0 && len(pinned) > 0 {
		printBest(os.Stdout, unpinned, pinned, lines)
	}
	if len(unpinned) > 0 {
		printJetStreamTable(os.Stdout, unpinned, p, "")
	}
	if len(pinned) > 0 {
		printJetStreamTable(os.Stdout, pinned, p, fmt.Sprintf(", pinned (brokers on CPUs %s, clients on CPUs %s)", *pinBr, *pinCl))
	}
	printClientTable(os.Stdout, runs, p)
	fmt.Printf("\nTotal wall time %s; %s\n", time.Since(start).Round(time.Second), machine())
}

// runOne starts broker k, runs every workload on it and stops it. A workload that fails is
// noted and the next one runs.
func runOne(ctx context.Context, k kind, c config, p params, only []string, javaCP string, javaThreads int, javaTime, javaCTime time.Duration, javaN int) run {
	r := run{Kind: k.Name, M: metrics{}}
	b, took, err := startBroker(ctx, k, c)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.M["first_ack_ms"] = float64(took.Microseconds()) / 1e3
	r.M["listen_ms"] = float64(b.listenAfter.Microseconds()) / 1e3
	defer func() {
		if err := b.stop(c); err != nil {
			r.Notes = append(r.Notes, "stop: "+err.Error())
		}
	}()
	if k.JetStream {
		err = createStreams(ctx, b, topicSend, topicNatsConsume, topicNatsLat, topicNatsLatPush, topicWarm)
	} else {
		topics := []string{topicSend, topicConsume, topicLat, topicOursConsume, topicOursLat, topicWarm}
		if javaCP != "" {
			topics = append(topics, topicJava, topicJavaConsume)
		}
		err = createTopics(ctx, b, topics...)
	}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	if st, err := status(b.pid); err == nil {
		r.M["rss_idle_mib"] = float64(st["VmRSS"]) / 1024
	}
	p.note = func(s string) { r.Notes = append(r.Notes, s) }
	warm := warmUp
	if k.JetStream {
		warm = natsWarmUp
	}
	if n, err := warm(ctx, b, p, p.brokerWarm); err != nil {
		r.Notes = append(r.Notes, "warm-up: "+err.Error())
	} else if n > 0 {
		r.M["warmup_msgs"] = float64(n)
	}
	phase := func(name string, f func() error) {
		if !slices.Contains(only, name) {
			return
		}
		resetPeak(b.pid)
		if err := f(); err != nil {
			r.Notes = append(r.Notes, name+": "+err.Error())
			return
		}
		if st, err := status(b.pid); err == nil {
			r.M["rss_"+name+"_mib"] = float64(st["VmHWM"]) / 1024
			r.M["rss_peak_mib"] = max(r.M["rss_peak_mib"], float64(st["VmHWM"])/1024)
		}
	}
	if k.JetStream {
		phase("nats_send", func() error { return natsSend(ctx, b, p, r.M) })
		phase("nats_consume", func() error { return natsConsume(ctx, b, p, r.M) })
		phase("nats_lat", func() error { return natsLatency(ctx, b, p, r.M, false) })
		phase("nats_lat_push", func() error { return natsLatency(ctx, b, p, r.M, true) })
		peakOf(r.M, "nats")
		return r
	}
	phase("go_send", func() error { return goSend(ctx, b, p, r.M) })
	phase("go_consume", func() error { return goConsume(ctx, b, p, r.M) })
	phase("lat", func() error { return goLatency(ctx, b, p, r.M) })
	phase("ours_send", func() error { return oursSend(ctx, b, p, r.M) })
	phase("ours_consume", func() error { return oursConsume(ctx, b, p, r.M) })
	phase("ours_lat", func() error { return oursLatency(ctx, b, p, r.M) })
	if !k.RocketMQ {
		phase("floor_lat", func() error { return floorLatency(ctx, c, p, r.M) })
	}
	if javaCP != "" {
		phase("java_send", func() error { return javaSend(ctx, b, javaCP, javaThreads, p.size, javaTime, r.M) })
		phase("java_consume", func() error {
			note, err := javaConsume(ctx, b, javaCP, p, javaN, javaCTime, r.M)
			if note != "" {
				r.Notes = append(r.Notes, note)
			}
			return err
		})
	}
	peakOf(r.M, "ours")
	if b.nsPid != 0 {
		if st, err := status(b.nsPid); err == nil {
			r.M["ns_rss_peak_mib"] = float64(st["VmHWM"]) / 1024
		}
	}
	return r
}

// peakOf records rss_<client>_peak_mib, the broker's peak RSS over the send, consume and
// latency workloads of one client (ours or nats; nats has two latency workloads), if any ran.
func peakOf(m metrics, client string) {
	for _, w := range []string{"send", "consume", "lat", "lat_push"} {
		if v, ok := m["rss_"+client+"_"+w+"_mib"]; ok {
			m["rss_"+client+"_peak_mib"] = max(m["rss_"+client+"_peak_mib"], v)
		}
	}
}

// mvnClasspath resolves the dependencies of a pom into a classpath string.
func mvnClasspath(pom, tmp string) (string, error) {
	out := filepath.Join(tmp, strings.ReplaceAll(filepath.Dir(pom), string(filepath.Separator), "_")+".cp")
	cmd := exec.Command("mvn", "-q", "-B", "-f", pom, "dependency:build-classpath", "-Dmdep.outputFile="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mvn -f %s: %w: %s", pom, err, lastLines(string(b), 10))
	}
	b, err := os.ReadFile(out)
	return strings.TrimSpace(string(b)), err
}

func machine() string {
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs, load average %s, %s %s/%s", cpus(), load, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "netbench: "+format+"\n", args...)
	os.Exit(2)
}

// rocketmqClasspath resolves Apache RocketMQ's jars (the pom beside rocketmq.sh) into tmp,
// or ends the run.
func rocketmqClasspath(rmqScript, tmp string) string {
	cp, err := mvnClasspath(filepath.Join(filepath.Dir(rmqScript), "rocketmq", "pom.xml"), tmp)
	if err != nil {
		fatalf("resolve Apache RocketMQ: %v", err)
	}
	return cp
}

// javaClasspath resolves RocketMQ's benchmark tools when on; "" (said on stderr) when they
// cannot be resolved: the run goes on without them.
func javaClasspath(on bool, tmp string) string {
	if !on {
		return ""
	}
	cp, err := mvnClasspath("java/pom.xml", tmp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "netbench: no Java benchmark tools: %v\n", err)
	}
	return cp
}

// cpus is the machine's CPU count (runtime.NumCPU counts only those this process may run on).
func cpus() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, err := cpuCount(strings.TrimSpace(string(b)))
	if err != nil {
		return runtime.NumCPU()
	}
	return n
}
