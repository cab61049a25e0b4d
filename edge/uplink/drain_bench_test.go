package uplink

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store"
)

// telemetryBody returns the i-th body of a gateway's telemetry: 100 bytes of JSON with a
// few numeric fields that drift as sensors' do.
func telemetryBody(rng *rand.Rand, i int) []byte {
	b := fmt.Appendf(nil, `{"ts":%d,"dev":"gw-17","temp":%.2f,"hum":%.1f,"pres":%.2f,"bat":%.2f,"seq":%d}`,
		1764633600000+int64(i)*100+rng.Int64N(20), 18+rng.Float64()*8, 40+rng.Float64()*20,
		1000+rng.Float64()*30, 3.5+rng.Float64()*0.7, i)
	for len(b) < 100 { // pad the JSON to 100 bytes
		b = append(b[:len(b)-1], ' ', '}')
	}
	return b[:100]
}

// fillTelemetry stores n telemetry messages in topic T of b, round robin over its queues,
// through a producer (each gets a UNIQ_KEY as from a client), in batches.
func fillTelemetry(tb testing.TB, b *edge.Broker, n int) {
	tb.Helper()
	p, err := producer.New(b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := 0; i < n; {
		batch := make([]*mq.Message, 0, 256)
		for ; i < n && len(batch) < cap(batch); i++ {
			batch = append(batch, &mq.Message{Topic: "T", Tags: "telemetry", Body: telemetryBody(rng, i)})
		}
		if _, err := p.SendBatch(ctx, batch, nil); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchBroker opens a broker for the drain benchmarks: the store's defaults (sync
// flush), 1 GiB segments' worth of room in 64 MiB segments.
func benchBroker(tb testing.TB, name string) *edge.Broker {
	tb.Helper()
	b, err := edge.Open(tb.TempDir(), &edge.Options{BrokerName: name, Store: &store.Options{SegmentSize: 64 << 20}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// countingRelay forwards TCP connections to target and counts the bytes each way.
type countingRelay struct {
	ln       net.Listener
	target   string
	up, down atomic.Int64 // client to server, server to client
	wg       sync.WaitGroup
}

func startRelay(tb testing.TB, target string) *countingRelay {
	tb.Helper()
	r := &countingRelay{ln: freeListener(tb), target: target}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.wg.Add(2)
			pipe := func(dst, src net.Conn, n *atomic.Int64) {
				defer r.wg.Done()
				defer src.Close()
				defer dst.Close()
				buf := make([]byte, 64<<10)
				for {
					k, err := src.Read(buf)
					n.Add(int64(k)) // counted before it is passed on
					if _, werr := dst.Write(buf[:k]); werr != nil || err != nil {
						return
					}
				}
			}
			go pipe(s, c, &r.up)
			go pipe(c, s, &r.down)
		}
	}()
	tb.Cleanup(func() { r.ln.Close(); r.wg.Wait() })
	return r
}

// drainModes are the ways a rule sends: plain batches, zstd batches to a hub, zlib bodies
// one by one (a rule with Compress to RocketMQ; the hub answers as RocketMQ would).
// The zlib mode, a request and an fsync per message, drains at most 20,000.
var drainModes = []struct {
	name     string
	compress bool
	kind     Kind
	most     int
}{
	{"plain", false, KindEdgeMQ, 0},
	{"zstd", true, KindEdgeMQ, 0},
	{"zlib", true, KindRocketMQ, 20_000},
}

// BenchmarkDrain drains a backlog of b.N telemetry messages (100-byte JSON) in 4 local
// queues to an EdgeMQ hub on loopback, in batches of 1024, and reports msgs/s and the
// process's CPU time per message (uplink, both brokers and the hub's server together: the
// drain rate a machine with C idle cores would reach is about C×1e9/cpu-ns/msg), and the
// bytes on the wire per message (both directions: requests, replies, routes), counted by a
// relay the hub advertises. Run with -benchtime 1000000x for a backlog of a million. The
// drain rate is msgs/s (ns/op of the zlib mode is over its 20,000 only).
func BenchmarkDrain(b *testing.B) {
	for _, m := range drainModes {
		b.Run(m.name, func(b *testing.B) {
			local := benchBroker(b, "gw1")
			hb := benchBroker(b, "hub")
			for _, br := range []*edge.Broker{local, hb} {
				if err := br.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
					b.Fatal(err)
				}
			}
			ln := freeListener(b)
			addr := ln.Addr().String()
			ln.Close()
			relay := startRelay(b, addr)
			srv, err := server.Start(hb, server.Options{Listen: addr, VIPListen: "off", Advertise: relay.ln.Addr().String()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { srv.Close() })
			n := b.N
			if m.most > 0 {
				n = min(n, m.most)
			}
			fillTelemetry(b, local, n)
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			u, err := Start(local, &Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: 1024, Compress: m.compress,
				CompressOver: 64, Upstream: Upstream{Addrs: relay.ln.Addr().String(), Kind: m.kind}}}})
			if err != nil {
				b.Fatal(err)
			}
			for u.rules[0].c.forwarded.Load() < int64(n) { // not Stats, which costs CPU the drain would get
				time.Sleep(time.Millisecond)
			}
			el, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			u.Close()
			b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/msg")
			b.ReportMetric(float64(relay.up.Load()+relay.down.Load())/float64(n), "wire-B/msg")
			b.ReportMetric(float64(relay.up.Load())/float64(n), "up-B/msg")
			if got := count(b, hb, "T"); got != int64(n) {
				b.Fatalf("hub holds %d, want %d", got, n)
			}
		})
	}
}

// cpuTime returns the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hubEnv, set in its environment, makes a test binary run TestDrainHub as the hub of
// BenchmarkDrainSides.
const hubEnv = "EDGEMQ_DRAIN_HUB"

// hubProfileEnv names a file for BenchmarkDrainSides's hub process to write its CPU
// profile to (the mode's name appended), if set.
const hubProfileEnv = "EDGEMQ_DRAIN_HUB_PROFILE"

// TestDrainHub is the hub process of BenchmarkDrainSides (skipped unless hubEnv is set): a
// broker with topic T (4 queues) and its server on loopback. It prints "addr <host:port>",
// then answers each line on its stdin with "cpu <its CPU ns> <messages in T>", and ends
// when its stdin closes.
func TestDrainHub(t *testing.T) {
	if os.Getenv(hubEnv) == "" {
		t.Skip("the hub process of BenchmarkDrainSides")
	}
	hb := benchBroker(t, "hub")
	if err := hb.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(hb, server.Options{Listen: "127.0.0.1:0", VIPListen: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fmt.Printf("addr %s\n", srv.Addr())
	for sc := bufio.NewScanner(os.Stdin); sc.Scan(); {
		fmt.Printf("cpu %d %d\n", cpuTime().Nanoseconds(), count(t, hb, "T"))
	}
}

// BenchmarkDrainSides is BenchmarkDrain's plain and zstd modes with the hub in a process
// of its own (this binary running TestDrainHub), so that each side's CPU time per message
// is measured apart: gw-cpu-ns/msg is the uplink's and the local broker's, hub-cpu-ns/msg
// the hub's (its server and broker). Run with -benchtime 1000000x for a backlog of a
// million; with EDGEMQ_DRAIN_HUB_PROFILE=file the hub writes its CPU profile to file.<mode>
// (-cpuprofile profiles the gateway).
func BenchmarkDrainSides(b *testing.B) {
	for _, m := range drainModes[:2] {
		b.Run(m.name, func(b *testing.B) {
			args := []string{"-test.run", "^TestDrainHub$"}
			if p := os.Getenv(hubProfileEnv); p != "" {
				args = append(args, "-test.cpuprofile", p+"."+m.name)
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), hubEnv+"=1")
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { in.Close(); cmd.Wait() })
			lines := bufio.NewScanner(out)
			var addr string
			for addr == "" && lines.Scan() {
				addr, _ = strings.CutPrefix(lines.Text(), "addr ")
			}
			if addr == "" {
				b.Fatalf("the hub process said no address: %v", lines.Err())
			}
			ask := func() (cpu time.Duration, stored int64) {
				fmt.Fprintln(in)
				for lines.Scan() {
					var ns int64
					if _, err := fmt.Sscanf(lines.Text(), "cpu %d %d", &ns, &stored); err == nil {
						return time.Duration(ns), stored
					}
				}
				b.Fatalf("the hub process ended: %v", lines.Err())
				return 0, 0
			}
			local := benchBroker(b, "gw1")
			if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
				b.Fatal(err)
			}
			n := b.N
			fillTelemetry(b, local, n)
			b.ResetTimer()
			hub0, _ := ask()
			start, cpu0 := time.Now(), cpuTime()
			u, err := Start(local, &Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, BatchSize: 1024, Compress: m.compress,
				CompressOver: 64, Upstream: Upstream{Addrs: addr, Kind: m.kind}}}})
			if err != nil {
				b.Fatal(err)
			}
			for u.rules[0].c.forwarded.Load() < int64(n) {
				time.Sleep(time.Millisecond)
			}
			el, cpu := time.Since(start), cpuTime()-cpu0
			hub1, stored := ask()
			b.StopTimer()
			u.Close()
			b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "gw-cpu-ns/msg")
			b.ReportMetric(float64((hub1-hub0).Nanoseconds())/float64(n), "hub-cpu-ns/msg")
			if stored != int64(n) {
				b.Fatalf("hub holds %d, want %d", stored, n)
			}
		})
	}
}
