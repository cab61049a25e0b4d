package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store/commitlog"
)

const demoDoc = `
The demo opens a broker on the data dir (making it if needed), creates -topic if it does not
exist, starts two push consumers (group -group, concurrent, and group -group-orderly,
orderly), produces -messages messages from -producers goroutines, and reports throughput,
end-to-end latency percentiles, whether any queue was seen out of order, and each group's
lag. Run it again: the data and the groups' offsets are still there, and each run counts
only its own messages.

Ctrl-C stops it cleanly: producers stop, the consumers shut down and save their offsets,
and the summary covers what was done. A second Ctrl-C quits at once.

Examples:
  edgemq demo
  edgemq demo -flush async -messages 1000000 -body 1024`

// demoCommand produces telemetry from a few goroutines into an embedded broker and consumes
// it with two push consumers, a concurrent and an orderly one (each its own group); then it
// reports throughput, end-to-end latency percentiles, order, and each group's lag.
func demoCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	producers := fs.Int("producers", 4, "producer goroutines")
	messages := fs.Int("messages", 200_000, "messages to produce in all")
	body := fs.Int("body", 100, "body `bytes` (at least 16)")
	topic := fs.String("topic", "Telemetry", "`topic` to produce to and consume")
	queues := fs.Int("queues", 4, "queues of the topic, if it is created and broker.default_queues is not set")
	flush := fs.String("flush", "", "flush policy, sync or async (default: store.flush, else sync)")
	group := fs.String("group", "demo", "consumer `group` of the concurrent consumer; the orderly one's is group-orderly")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, errOut io.Writer) error {
		if len(args) > 0 {
			return usageError("demo takes no arguments besides its flags, got %q", args)
		}
		if *producers < 1 || *messages < 1 || *body < 16 || *queues < 1 {
			return usageError("-producers, -messages and -queues must be positive, -body at least 16")
		}
		c, err := load()
		if err != nil {
			return err
		}
		if *flush != "" {
			m, err := commitlog.ParseFlushMode(*flush)
			if err != nil {
				return usageError("-flush: %v", err)
			}
			c.store.Flush = m
		}
		if c.broker.DefaultQueues == 0 {
			c.broker.DefaultQueues = int32(*queues)
		}
		b, err := c.openBroker(create)
		if err != nil {
			return err
		}
		defer b.Close()
		return runDemo(ctx, b, out, errOut, demoConfig{producers: *producers, messages: *messages, body: *body,
			topic: *topic, group: *group, flush: c.store.Flush, json: *jsonOut})
	}
}

type demoConfig struct {
	producers, messages, body int
	topic, group              string
	flush                     commitlog.FlushMode
	json                      bool
}

// demoJSON is what demo -json prints.
type demoJSON struct {
	Interrupted bool   `json:"interrupted,omitempty"`
	Topic       string `json:"topic"`
	Flush       string `json:"flush"`
	Produced    int64  `json:"produced"`
	// SendSeconds is how long the producers took; ElapsedSeconds until both groups had
	// every message (or the interrupt).
	SendSeconds        float64 `json:"sendSeconds"`
	ElapsedSeconds     float64 `json:"elapsedSeconds"`
	ConsumedConcurrent int64   `json:"consumedConcurrent"`
	ConsumedOrderly    int64   `json:"consumedOrderly"`
	// Latency is from send to the concurrent listener, in microseconds.
	Latency    map[string]float64   `json:"latencyMicros"`
	OutOfOrder int                  `json:"outOfOrder"`
	Lag        map[string][]lagJSON `json:"lag"`
}

func runDemo(ctx context.Context, b *edge.Broker, out, errOut io.Writer, dc demoConfig) error {
	run := rand.Uint64() // tells this run's messages from those of earlier runs in the dir
	orderlyGroup := dc.group + "-orderly"
	if !dc.json {
		fmt.Fprintf(out, "EdgeMQ demo: %d producers send %d messages of %d bytes to %q (%s flush);\n"+
			"push consumers: group %q concurrent, group %q orderly\n",
			dc.producers, dc.messages, dc.body, dc.topic, dc.flush, dc.group, orderlyGroup)
	}

	if _, err := b.Topic(dc.topic); errors.Is(err, mq.ErrTopicNotExist) {
		if err := b.CreateTopic(edge.TopicConfig{Name: dc.topic}); err != nil {
			return err
		}
	}
	cfg, err := b.Topic(dc.topic)
	if err != nil {
		return err
	}

	var received, ordered atomic.Int64
	var latMu sync.Mutex
	lat := make([]time.Duration, 0, dc.messages)
	concurrent, err := consumer.NewPushConsumer(b, &consumer.Options{Group: dc.group, ConsumeMessageBatchMaxSize: 32,
		ConsumeGoroutinesMin: 4, ConsumeGoroutinesMax: 8, RebalanceInterval: time.Second})
	if err != nil {
		return err
	}
	err = concurrent.Subscribe(dc.topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		now := time.Now()
		latMu.Lock()
		for _, m := range msgs {
			if len(m.Body) >= 16 && binary.BigEndian.Uint64(m.Body) == run {
				lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(m.Body[8:])))))
				received.Add(1)
			}
		}
		latMu.Unlock()
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		return err
	}
	orderly, err := consumer.NewPushConsumer(b, &consumer.Options{Group: orderlyGroup, ConsumeMessageBatchMaxSize: 32, RebalanceInterval: time.Second})
	if err != nil {
		return err
	}
	var orderMu sync.Mutex
	lastOffset := map[int32]int64{}
	outOfOrder := 0
	err = orderly.Subscribe(dc.topic, "*", consumer.OrderlyListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.OrderlyContext) (consumer.ConsumeOrderlyStatus, error) {
		orderMu.Lock()
		defer orderMu.Unlock()
		for _, m := range msgs {
			if last, ok := lastOffset[m.QueueID]; ok && m.QueueOffset <= last {
				outOfOrder++
			}
			lastOffset[m.QueueID] = m.QueueOffset
			if len(m.Body) >= 16 && binary.BigEndian.Uint64(m.Body) == run {
				ordered.Add(1)
			}
		}
		return consumer.OrderlySuccess, nil
	}))
	if err != nil {
		return err
	}
	consumers := []*consumer.PushConsumer{concurrent, orderly}
	// shutdown stops the consumers, which commit their offsets to the broker (which writes
	// them to disk at Close); a second call does nothing.
	stopped := false
	shutdown := func() error {
		if stopped {
			return nil
		}
		stopped = true
		var errs []error
		for _, c := range consumers {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs = append(errs, c.Shutdown(sctx))
			scancel()
		}
		return errors.Join(errs...)
	}
	defer shutdown()
	for _, c := range consumers {
		if err := c.Start(); err != nil {
			return err
		}
	}
	// A new group starts at the end of each queue: produce once every queue is assigned.
	ready := time.NewTimer(15 * time.Second)
	defer ready.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for len(concurrent.Stats().Lag) < int(cfg.ReadQueues) || len(orderly.Stats().Lag) < int(cfg.ReadQueues) {
		select {
		case <-ctx.Done():
			return shutdown()
		case <-ready.C:
			return fmt.Errorf("consumers were not assigned the topic's %d queues within 15 s", cfg.ReadQueues)
		case <-poll.C:
		}
	}

	var sent atomic.Int64
	errc := make(chan error, dc.producers)
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	start := time.Now()
	var pwg sync.WaitGroup
	for p := 0; p < dc.producers; p++ {
		n := dc.messages / dc.producers
		if p < dc.messages%dc.producers {
			n++
		}
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			payload := make([]byte, dc.body)
			for i := range payload[16:] {
				payload[16+i] = byte('a' + (p+i)%26)
			}
			for i := 0; i < n && pctx.Err() == nil; i++ {
				m := &mq.Message{Topic: dc.topic, Tags: "temp", Keys: fmt.Sprintf("sensor-%d", p), Body: slices.Clone(payload)}
				binary.BigEndian.PutUint64(m.Body, run)
				binary.BigEndian.PutUint64(m.Body[8:], uint64(time.Now().UnixNano()))
				if _, err := b.Send(pctx, m, nil); err != nil {
					if pctx.Err() == nil {
						errc <- fmt.Errorf("send: %w", err)
					}
					return
				}
				sent.Add(1)
			}
		}()
	}
	// The producers stop on an interrupt or an error; wait for them on every return.
	defer pwg.Wait()
	defer stopProducers()

	progress := newProgress(errOut, int64(dc.messages))
	sendDone := make(chan struct{})
	go func() { pwg.Wait(); close(sendDone) }()
	var sendTime time.Duration
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Time{}
	total := int64(dc.messages)
	interrupted := false
wait:
	for received.Load() < total || ordered.Load() < total {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			interrupted = true
			stopping()
			break wait
		case <-sendDone:
			sendTime = time.Since(start)
			sendDone = nil
			deadline = time.Now().Add(30 * time.Second)
		case <-tick.C:
			progress.show(sent.Load(), min(received.Load(), ordered.Load()))
			if !deadline.IsZero() && time.Now().After(deadline) {
				return fmt.Errorf("30 s after the last send: concurrent group got %d, orderly group %d of %d", received.Load(), ordered.Load(), total)
			}
		}
	}
	elapsed := time.Since(start)
	stopProducers()
	if sendTime == 0 {
		pwg.Wait()
		sendTime = time.Since(start)
	}
	progress.show(sent.Load(), min(received.Load(), ordered.Load()))
	progress.done()
	// Let the consumers commit their offsets before showing lag.
	if err := shutdown(); err != nil {
		return err
	}

	latMu.Lock()
	all := slices.Clone(lat)
	latMu.Unlock()
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	orderMu.Lock()
	ooo := outOfOrder
	orderMu.Unlock()
	rep := demoJSON{Interrupted: interrupted, Topic: dc.topic, Flush: dc.flush.String(), Produced: sent.Load(),
		SendSeconds: sendTime.Seconds(), ElapsedSeconds: elapsed.Seconds(),
		ConsumedConcurrent: received.Load(), ConsumedOrderly: ordered.Load(), OutOfOrder: ooo,
		Latency: map[string]float64{}, Lag: map[string][]lagJSON{}}
	for _, p := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}, {"max", 1}} {
		rep.Latency[p.name] = float64(pct(p.p)) / float64(time.Microsecond)
	}
	for _, g := range []string{dc.group, orderlyGroup} {
		lags, err := groupLag(context.Background(), localTarget{b}, g, dc.topic)
		if err != nil {
			return err
		}
		rep.Lag[g] = lags
	}
	if dc.json {
		return writeJSON(out, rep)
	}
	if interrupted {
		fmt.Fprintln(out, "\ninterrupted: the figures cover what was done until then")
	}
	rate := func(n int64, d time.Duration) string { return humanCount(int64(float64(n) / max(d.Seconds(), 1e-9))) }
	fmt.Fprintf(out, "\nproduced  %d messages in %s: %s msgs/s\n", sent.Load(), humanDuration(sendTime), rate(sent.Load(), sendTime))
	fmt.Fprintf(out, "consumed  %d messages (concurrent) and %d (orderly) in %s: %s msgs/s per group\n",
		received.Load(), ordered.Load(), humanDuration(elapsed), rate(min(received.Load(), ordered.Load()), elapsed))
	fmt.Fprintf(out, "latency   send to concurrent listener: p50 %s  p99 %s  p99.9 %s  max %s\n",
		humanDuration(pct(0.50)), humanDuration(pct(0.99)), humanDuration(pct(0.999)), humanDuration(pct(1)))
	fmt.Fprintf(out, "order     orderly group saw %d messages out of queue order\n", ooo)
	for _, g := range []string{dc.group, orderlyGroup} {
		fmt.Fprintln(out, "\nlag of group", g)
		if err := printLags(out, rep.Lag[g], false); err != nil {
			return err
		}
	}
	return nil
}

// progress draws a bar on a terminal, or a line a second elsewhere.
type progress struct {
	w     io.Writer
	total int64
	tty   bool
	last  time.Time
}

func newProgress(w io.Writer, total int64) *progress {
	p := &progress{w: w, total: total}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		p.tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return p
}

func (p *progress) show(sent, received int64) {
	if !p.tty {
		if time.Since(p.last) < time.Second {
			return
		}
		p.last = time.Now()
		fmt.Fprintf(p.w, "sent %d, received %d of %d\n", sent, received, p.total)
		return
	}
	const width = 40
	fill := int(received * width / max(p.total, 1))
	fmt.Fprintf(p.w, "\r[%s%s] sent %d  received %d / %d ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), sent, received, p.total)
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
