package main

// The measured phases every client's workloads share: a send loop, a consume to the last
// message and a paced latency run, each driven through a few functions of the client, so
// that rocketmq-client-go, our client over TCP and our client in-process are measured
// alike.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/pace"
)

// traceDir, when set (-trace), is where each measured phase writes a runtime/trace of this
// process, the client's: <prefix>-<n>.trace; profDir (-cpuprofile) where it writes a CPU
// profile of it: <prefix>-<n>.pprof; memDir (-memprofile) where it writes this process's
// allocation profile at the phase's end: <prefix>-<n>.allocs.
var (
	traceDir string
	profDir  string
	memDir   string
	traceN   atomic.Int64
)

// startTrace starts a runtime/trace and a CPU profile of the phase named prefix, each when
// its directory is set; the function it returns stops them.
func startTrace(prefix string) func() {
	n := traceN.Add(1)
	stopTrace := startFile(traceDir, fmt.Sprintf("%s-%d.trace", prefix, n), "trace", trace.Start, trace.Stop)
	stopProf := startFile(profDir, fmt.Sprintf("%s-%d.pprof", prefix, n), "cpuprofile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	return func() {
		stopTrace()
		stopProf()
		startFile(memDir, fmt.Sprintf("%s-%d.allocs", prefix, n), "memprofile", func(w io.Writer) error {
			return pprof.Lookup("allocs").WriteTo(w, 0)
		}, func() {})()
	}
}

// startFile creates dir/name and starts writing what start writes into it; the function it
// returns stops that (stop) and closes the file. With dir empty, or after an error (printed
// as what's), it does nothing.
func startFile(dir, name, what string, start func(io.Writer) error, stop func()) func() {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "netbench: %s: %v\n", what, err)
		return func() {}
	}
	if err := start(f); err != nil {
		fmt.Fprintf(os.Stderr, "netbench: %s: %v\n", what, err)
		f.Close()
		return func() {}
	}
	return func() {
		stop()
		f.Close()
	}
}

// phase meters a measured phase: the broker's CPU time (its processes; none in-process)
// and this process's CPU time and heap allocations, the client's.
type phase struct {
	broker *cpuMeter // nil in-process
	client clientMeter
	t0     time.Time
}

// startPhase starts metering; b is nil in-process.
func startPhase(b *broker) phase {
	ph := phase{client: meterClient(), t0: time.Now()}
	if b != nil {
		ph.broker = meterCPU(b.pids()...)
	}
	return ph
}

// end records the figures of n messages under prefix: prefix_rate (msgs/s over the wall
// time since startPhase), prefix_cpu_us (the broker's CPU per message),
// prefix_client_cpu_us and prefix_allocs (this process's CPU and allocations per message).
func (ph phase) end(m metrics, prefix string, n int64) {
	wall := time.Since(ph.t0)
	ccpu, allocs := ph.client.since()
	if ph.broker != nil {
		used, _ := ph.broker.used()
		m[prefix+"_cpu_us"] = perMsg(used, n)
	}
	if n > 0 {
		m[prefix+"_rate"] = float64(n) / wall.Seconds()
		m[prefix+"_allocs"] = float64(allocs) / float64(n)
	}
	m[prefix+"_client_cpu_us"] = perMsg(ccpu, n)
}

// senders runs inflight goroutines per function of a set of sends, each calling its function
// (a sync send of one message) in a loop until halt, counting the acknowledged and the
// failed sends; a sender pauses failPause after a failure.
type senders struct {
	acked atomic.Int64
	fails failures
	stop  atomic.Bool
	wg    sync.WaitGroup
}

func startSenders(sends []func() error, inflight int) *senders {
	s := &senders{}
	for _, send := range sends {
		for range inflight {
			s.wg.Go(func() {
				for !s.stop.Load() {
					if err := send(); err != nil {
						s.fails.add(err)
						time.Sleep(failPause) // back off as the RocketMQ benchmark tools do
						continue
					}
					s.acked.Add(1)
				}
			})
		}
	}
	return s
}

// halt stops the senders and waits for their sends in flight.
func (s *senders) halt() {
	s.stop.Store(true)
	s.wg.Wait()
}

// sendPhase runs p.inflight goroutines per function of sends (startSenders) and measures
// the acknowledged sends over p.sendTime after p.sendWarm: figures prefix_rate, _cpu_us,
// _client_cpu_us, _allocs and _failed.
func sendPhase(b *broker, p params, m metrics, prefix string, sends []func() error) error {
	ss := startSenders(sends, p.inflight)
	acked, fails := &ss.acked, &ss.fails
	time.Sleep(p.sendWarm)
	n0, f0 := acked.Load(), fails.n.Load()
	stopTrace := startTrace(prefix)
	ph := startPhase(b)
	time.Sleep(p.sendTime)
	n, f := acked.Load()-n0, fails.n.Load()-f0
	ph.end(m, prefix, n)
	stopTrace()
	ss.halt()
	if n == 0 {
		return fmt.Errorf("send: nothing acknowledged: %v", fails.err())
	}
	if f > 0 {
		p.note(fmt.Sprintf("%s: %d sends failed in the measured phase, first: %v", prefix, f, fails.err()))
	}
	m[prefix+"_failed"] = float64(f)
	return nil
}

// consumeClient starts a push consumer that calls got with the number of messages of each
// delivery; stop shuts it down.
type consumeClient func(got func(n int)) (stop func(), err error)

// consumeRun times a consumer from its start until it has received want messages: figures
// prefix_rate, _cpu_us, _client_cpu_us and _allocs (b nil: in-process, no broker figure).
func consumeRun(b *broker, want int64, start consumeClient, m metrics, prefix string) error {
	var got, firstAt, firstN atomic.Int64
	all := make(chan struct{})
	stopTrace := startTrace(prefix)
	defer stopTrace()
	ph := startPhase(b)
	stop, err := start(func(n int) {
		v := got.Add(int64(n))
		if v == int64(n) { // the first delivery
			firstAt.Store(int64(time.Since(ph.t0)))
			firstN.Store(int64(n))
		}
		// Exactly one delivery crosses want.
		if v >= want && v-int64(n) < want {
			close(all)
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("consume: %d of %d messages in 5 minutes", got.Load(), want)
	}
	ph.end(m, prefix, want)
	// The steady rate leaves out the start (connections, route, rebalance, first pulls), as
	// RocketMQ's benchmark Consumer's best window does.
	if first, rest := time.Duration(firstAt.Load()), want-firstN.Load(); rest > 0 {
		if d := time.Since(ph.t0) - first; d > 0 {
			m[prefix+"_steady_rate"] = float64(rest) / d.Seconds()
		}
		m[prefix+"_start_ms"] = float64(first) / float64(time.Millisecond)
	}
	return nil
}

// latClient is what a latency run drives: a push consumer of topic that hands each body
// it receives to recv, and a producer's sync and async sends of one body to topic.
type latClient struct {
	consume   func(topic string, recv func(body []byte)) (stop func(), err error)
	send      func(ctx context.Context, topic string, body []byte) error
	sendAsync func(ctx context.Context, topic string, body []byte, done func(error)) error
}

// latencyRun starts lc's consumer, waits until a probe message comes back (so that the
// paced messages do not queue behind its first rebalance), then paces p.latWarm+p.latN
// async sends at p.latRate msgs/s, at most p.latWindow in flight (a full window delays the
// next send, which counts as late); each body carries its index and send time, and the
// consumer records receive minus send. Figures, under prefix: _p50_us, _p99_us, _p999_us,
// _max_us of the p.latN measured messages, _rate (sends/s achieved), _late (sends over
// 2 ms behind schedule), _failed, and _cpu_us (the broker's CPU per measured message; not
// in-process, b nil).
func latencyRun(ctx context.Context, b *broker, lc latClient, topic string, p params, m metrics, prefix string) error {
	total := p.latWarm + p.latN
	lats := make([]time.Duration, p.latN)
	base := time.Now()
	var got atomic.Int64
	var probeGot atomic.Bool
	const probeID = ^uint64(0)
	stop, err := lc.consume(topic, func(body []byte) {
		if len(body) < 16 {
			return
		}
		if binary.LittleEndian.Uint64(body) == probeID {
			probeGot.Store(true)
			return
		}
		i := int(binary.LittleEndian.Uint64(body))
		if k := i - p.latWarm; k >= 0 && k < len(lats) {
			lats[k] = time.Since(base) - time.Duration(binary.LittleEndian.Uint64(body[8:]))
		}
		got.Add(1)
	})
	if err != nil {
		return err
	}
	stopConsumer := sync.OnceFunc(stop)
	defer stopConsumer()
	probe := make([]byte, max(p.size, 16))
	binary.LittleEndian.PutUint64(probe, probeID)
	for deadline := time.Now().Add(60 * time.Second); !probeGot.Load(); time.Sleep(100 * time.Millisecond) { // poll for the first receipt
		if time.Now().After(deadline) {
			return errors.New("latency: the consumer received nothing in 60 s")
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := lc.send(sctx, topic, probe)
		cancel()
		if err != nil {
			return fmt.Errorf("latency probe: %w", err)
		}
	}
	var fails failures
	var acked atomic.Int64
	window := make(chan struct{}, p.latWindow)
	interval := time.Second / time.Duration(p.latRate)
	var ph phase
	stopTrace := func() {}
	defer func() { stopTrace() }()
	pc := pace.New() // time.Sleep would send in bursts (see package pace)
	defer pc.Close()
	lags := make([]time.Duration, 0, p.latN)
	start := time.Now()
	late := 0
	for i := range total {
		if i == p.latWarm {
			stopTrace = sync.OnceFunc(startTrace(prefix))
			ph = startPhase(b)
		}
		next := start.Add(time.Duration(i) * interval)
		pc.Wait(ctx, next)
		if i >= p.latWarm {
			lag := time.Since(next)
			lags = append(lags, lag)
			if lag > 2*time.Millisecond {
				late++
			}
		}
		window <- struct{}{}
		body := make([]byte, max(p.size, 16))
		binary.LittleEndian.PutUint64(body, uint64(i))
		binary.LittleEndian.PutUint64(body[8:], uint64(time.Since(base)))
		err := lc.sendAsync(ctx, topic, body, func(err error) {
			<-window
			if err != nil {
				fails.add(err)
				return
			}
			acked.Add(1)
		})
		if err != nil {
			<-window
			return fmt.Errorf("latency send: %w", err)
		}
	}
	sendWall := time.Since(start)
	for range p.latWindow { // every callback has run
		window <- struct{}{}
	}
	for deadline := time.Now().Add(60 * time.Second); got.Load() < acked.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("latency: received %d of %d acknowledged messages 60 s after the last send (%d sends failed, first: %v)",
				got.Load(), acked.Load(), fails.n.Load(), fails.err())
		}
	}
	var brokerCPU time.Duration
	if ph.broker != nil {
		brokerCPU, _ = ph.broker.used()
	}
	clientCPU, _ := ph.client.since()
	stopTrace()
	stopConsumer() // no callback writes lats from here on
	if f := fails.n.Load(); f > 0 {
		p.note(fmt.Sprintf("%s: %d of %d sends failed (not in the figures), first: %v", prefix, f, total, fails.err()))
	}
	// A message whose send failed has no latency.
	lats = slices.DeleteFunc(lats, func(d time.Duration) bool { return d == 0 })
	if len(lats) == 0 {
		return errors.New("latency: no measured message was received")
	}
	slices.Sort(lats)
	q := func(f float64) float64 {
		return float64(lats[min(int(f*float64(len(lats))), len(lats)-1)].Microseconds())
	}
	m[prefix+"_p50_us"], m[prefix+"_p99_us"], m[prefix+"_p999_us"] = q(0.5), q(0.99), q(0.999)
	m[prefix+"_max_us"] = float64(lats[len(lats)-1].Microseconds())
	m[prefix+"_rate"] = float64(total) / sendWall.Seconds()
	m[prefix+"_late"] = float64(late)
	if len(lags) > 0 {
		slices.Sort(lags)
		m[prefix+"_lag_p50_us"] = float64(lags[len(lags)/2].Microseconds())
		m[prefix+"_lag_p99_us"] = float64(lags[min(len(lags)*99/100, len(lags)-1)].Microseconds())
	}
	m[prefix+"_failed"] = float64(fails.n.Load())
	if ph.broker != nil {
		m[prefix+"_cpu_us"] = perMsg(brokerCPU, int64(len(lats)))
	}
	m[prefix+"_client_cpu_us"] = perMsg(clientCPU, int64(len(lats)))
	return nil
}
