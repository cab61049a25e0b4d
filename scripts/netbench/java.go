package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// javaTool runs one of Apache RocketMQ's own benchmark tools from rocketmq-example
// (org.apache.rocketmq.example.benchmark.Producer or Consumer) against b for d, then kills
// it. Both print a rate every 10 s over a sliding window of the last 10 one-second
// snapshots ("Send TPS: N" / "TPS: N"); javaTool records each such line with the time it
// came and the broker's CPU time then.
type tpsLine struct {
	at        time.Time
	tps       float64
	cpu       time.Duration // the broker's, at the line
	clientCPU time.Duration // the Java tool's, at the line
	text      string
}

var (
	sendTPS    = regexp.MustCompile(`Send TPS: (\d+)`)
	consumeTPS = regexp.MustCompile(`\bTPS: (\d+)`)
	// javaWindow is the tools' window: 10 snapshots a second apart; with -ri 1000 they print
	// every second.
	javaWindow = 10
	sendFailed = regexp.MustCompile(`Send Failed: (\d+) Response Failed: (\d+)`)
)

func javaTool(ctx context.Context, b *broker, javaCP, class string, d time.Duration, re *regexp.Regexp, args ...string) ([]tpsLine, error) {
	home := filepath.Join(b.dir, "javahome")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	all := append([]string{"-Xms512m", "-Xmx512m", "-Duser.home=" + home, "-cp", javaCP,
		"org.apache.rocketmq.example.benchmark." + class, "-n", b.ns}, args...)
	cmd := exec.CommandContext(cctx, "java", all...)
	logf, err := os.Create(filepath.Join(b.dir, "java-"+class+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("java %s: %w", class, err)
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		// The first line is the start: no rate, the broker's CPU time then.
		lines = []tpsLine{{at: time.Now(), tps: -1, cpu: meterCPU(b.pids()...).start}}
	)
	wg.Go(func() {
		sc := bufio.NewScanner(io.TeeReader(out, logf))
		for sc.Scan() {
			mm := re.FindStringSubmatch(sc.Text())
			if mm == nil {
				continue
			}
			tps, _ := strconv.ParseFloat(mm[1], 64)
			var cpu time.Duration
			for _, p := range b.pids() {
				if c, err := cpuTime(p); err == nil {
					cpu += c
				}
			}
			ccpu, _ := cpuTime(cmd.Process.Pid) // the Java client's own
			mu.Lock()
			lines = append(lines, tpsLine{at: time.Now(), tps: tps, cpu: cpu, clientCPU: ccpu, text: sc.Text()})
			mu.Unlock()
		}
	})
	err = cmd.Wait()
	wg.Wait()
	if len(lines) == 1 {
		return nil, fmt.Errorf("java %s printed no rate in %v (%v); see %s", class, d, err, logf.Name())
	}
	return lines, nil
}

// javaRate picks the line with the highest rate and returns its rate and the broker's and
// the Java client's CPU per message over its window (the tools print every second, with -ri 1000, the rate over the
// last 10 one-second snapshots: the span since the line 10 before, or since the tool started),
// and whether the last line fell below half the best.
func javaRate(lines []tpsLine) (rate, cpuUS, clientUS float64, drained bool) {
	best := 1
	for i := 2; i < len(lines); i++ {
		if lines[i].tps > lines[best].tps {
			best = i
		}
	}
	l, prev := lines[best], lines[max(best-javaWindow, 0)]
	if l.tps > 0 {
		msgs := l.tps * l.at.Sub(prev.at).Seconds()
		cpuUS = float64((l.cpu - prev.cpu).Microseconds()) / msgs
		if prev.clientCPU > 0 { // the first line has none: the window started with the JVM
			clientUS = float64((l.clientCPU - prev.clientCPU).Microseconds()) / msgs
		}
	}
	last := lines[len(lines)-1]
	return l.tps, cpuUS, clientUS, last.tps < l.tps/2
}

// javaSend runs the benchmark Producer: threads sync-sending 100-byte messages (its own
// loop, its default of 64 threads unless set) to topicJava.
func javaSend(ctx context.Context, b *broker, javaCP string, threads int, size int, d time.Duration, m metrics) error {
	lines, err := javaTool(ctx, b, javaCP, "Producer", d, sendTPS,
		"-t", topicJava, "-s", strconv.Itoa(size), "-w", strconv.Itoa(threads), "-ri", "1000")
	if err != nil {
		return err
	}
	m["java_send_rate"], m["java_send_cpu_us"], m["java_send_client_cpu_us"], _ = javaRate(lines)
	if m["java_send_client_cpu_us"] == 0 {
		delete(m, "java_send_client_cpu_us")
	}
	// The Producer's failure counts are totals since it started.
	if mm := sendFailed.FindStringSubmatch(lines[len(lines)-1].text); mm != nil {
		f1, _ := strconv.ParseFloat(mm[1], 64)
		f2, _ := strconv.ParseFloat(mm[2], 64)
		m["java_send_failed"] = f1 + f2
	}
	return nil
}

// javaGroup is the consumer group of RocketMQ's benchmark Consumer.
const javaGroup = "nb_java_g"

// startGroupAtZero stores offset 0 for group on every queue of topic, through our client (a
// heartbeat makes the group on a RocketMQ broker, which takes offsets of known groups only).
// RocketMQ's benchmark Consumer consumes from the last offset when its group has none, and
// a RocketMQ broker answers a new group's offset query with 0 only while the queue's first
// message is in the page cache (mincore): without this, the Consumer sometimes found the
// pre-filled backlog behind it and consumed nothing.
func startGroupAtZero(ctx context.Context, b *broker, topic, group string) error {
	c, err := dialOurs(ctx, b.ns)
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id := fmt.Sprintf("netbench-offsets@%d", os.Getpid())
	hb := mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{{Group: group, Model: mq.Clustering,
		ConsumeType: mq.ConsumePassively, Subscriptions: []mq.Subscription{{Topic: topic, Expression: "*"}}}}}
	if err := c.Heartbeat(cctx, hb); err != nil {
		return fmt.Errorf("heartbeat of group %s: %w", group, err)
	}
	r, err := c.Route(cctx, topic)
	if err != nil {
		return fmt.Errorf("route of %s: %w", topic, err)
	}
	for _, q := range r.ReadQueues() {
		if err := c.CommitOffset(cctx, group, q, 0); err != nil {
			return fmt.Errorf("offset 0 of group %s on %v: %w", group, q, err)
		}
	}
	if err := c.Unregister(cctx, id, group); err != nil {
		return fmt.Errorf("unregister from group %s: %w", group, err)
	}
	return nil
}

// javaConsume pre-fills topicJavaConsume with p.consumeN-style n messages and runs the
// benchmark Consumer (push consumer, its default 20 consume threads, group without suffix)
// on it for d.
func javaConsume(ctx context.Context, b *broker, javaCP string, p params, n int, d time.Duration, m metrics) (note string, err error) {
	pp := p
	pp.consumeN = n
	if err := prefill(ctx, b, topicJavaConsume, pp); err != nil {
		return "", err
	}
	if err := startGroupAtZero(ctx, b, topicJavaConsume, javaGroup); err != nil {
		return "", err
	}
	lines, err := javaTool(ctx, b, javaCP, "Consumer", d, consumeTPS,
		"-t", topicJavaConsume, "-g", javaGroup, "-p", "false", "-ri", "1000")
	if err != nil {
		return "", err
	}
	var drained bool
	m["java_consume_rate"], m["java_consume_cpu_us"], m["java_consume_client_cpu_us"], drained = javaRate(lines)
	if m["java_consume_client_cpu_us"] == 0 {
		delete(m, "java_consume_client_cpu_us") // its best window began with the JVM: unknown
	}
	first := slices.IndexFunc(lines[1:], func(l tpsLine) bool { return l.tps > 0 })
	if first < 0 {
		// Nothing consumed in its whole run (RocketMQ's broker once started the new group
		// at the queue's end): no figure, rather than a rate of 0.
		delete(m, "java_consume_rate")
		delete(m, "java_consume_cpu_us")
		delete(m, "java_consume_client_cpu_us")
		return fmt.Sprintf("java Consumer: %d rate lines, none above 0: it consumed nothing of the %d pre-filled messages (no figure)", len(lines)-1, n), nil
	}
	note = fmt.Sprintf("java Consumer: %d rate lines (1 s apart, 10 s windows), the first non-zero %d s after the first line, best %.0f, last %.0f",
		len(lines)-1, first, m["java_consume_rate"], lines[len(lines)-1].tps)
	if r := m["java_consume_rate"]; r > 0 && float64(n)/r < 15 {
		note += fmt.Sprintf(" (the backlog lasts %.1f s at the best rate, too short for a window past the JVM's warm-up: the rate is underestimated; raise -java-consume-n)", float64(n)/r)
	} else if drained {
		note += " (drained before the end)"
	}
	return note, nil
}
