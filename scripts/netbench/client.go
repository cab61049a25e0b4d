package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Topics of a run; every run has a fresh broker, so the names repeat.
const (
	topicFirst       = "nb_first" // auto-created by the first send
	topicSend        = "nb_send"
	topicConsume     = "nb_consume"
	topicLat         = "nb_lat"
	topicJava        = "nb_java"
	topicJavaConsume = "nb_java_c"
	topicQueues      = 4
)

var instanceSeq atomic.Int64

// instance returns a client instance name unique in this process: every producer and
// consumer gets its own client, and so its own connection.
func instance(what string) string {
	return fmt.Sprintf("nb-%s-%d", what, instanceSeq.Add(1))
}

func resolver(ns string) primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{ns})
}

func newProducer(ns string, retries int) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(resolver(ns)),
		producer.WithGroupName("nb_producer"),
		producer.WithInstanceName(instance("p")),
		producer.WithRetry(retries),
		producer.WithSendMsgTimeout(10*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	return p, nil
}

type ackResult struct {
	took time.Duration
	err  error
}

// firstAck makes a producer, takes the time, and from then on sends one message to
// topicFirst (auto-created) every millisecond until one is acknowledged or timeout passes.
// The caller spawns the broker right after it returns.
func firstAck(ctx context.Context, ns string, timeout time.Duration) chan ackResult {
	done := make(chan ackResult, 1)
	p, err := newProducer(ns, 0)
	if err != nil {
		done <- ackResult{err: err}
		return done
	}
	t0 := time.Now()
	go func() {
		defer p.Shutdown()
		var last error
		for time.Since(t0) < timeout {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := p.SendSync(sctx, primitive.NewMessage(topicFirst, make([]byte, 100)))
			cancel()
			if err == nil && r.Status == primitive.SendOK {
				done <- ackResult{took: time.Since(t0)}
				return
			}
			if err == nil {
				err = fmt.Errorf("send status %d", r.Status)
			}
			last = err
			select {
			case <-ctx.Done():
				done <- ackResult{err: ctx.Err()}
				return
			case <-time.After(time.Millisecond): // retry poll: the broker is starting
			}
		}
		done <- ackResult{err: fmt.Errorf("no acknowledged send in %v: %w", timeout, last)}
	}()
	return done
}

// createTopics creates the run's topics with topicQueues read and write queues on the broker
// and waits until the name server routes each.
func createTopics(ctx context.Context, b *broker, topics ...string) error {
	a, err := admin.NewAdmin(admin.WithResolver(resolver(b.ns)))
	if err != nil {
		return fmt.Errorf("new admin: %w", err)
	}
	defer a.Close()
	for _, t := range topics {
		if err := a.CreateTopic(ctx, admin.WithTopicCreate(t), admin.WithBrokerAddrCreate(b.brokerAddr),
			admin.WithReadQueueNums(topicQueues), admin.WithWriteQueueNums(topicQueues)); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	for _, t := range topics {
		deadline := time.Now().Add(60 * time.Second)
		for {
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			mqs, err := a.FetchPublishMessageQueues(qctx, t)
			cancel()
			if err == nil && len(mqs) >= topicQueues {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("topic %s has no route after 60 s: %v", t, err)
			}
			time.Sleep(500 * time.Millisecond) // retry poll: the route reaches the name server on the broker's schedule
		}
	}
	return nil
}

// params are the workload settings, the same for every broker.
type params struct {
	size       int           // body bytes
	clients    int           // send: producer clients (connections)
	inflight   int           // send: SendSync goroutines per client
	sendWarm   time.Duration // send: unmeasured lead-in
	sendTime   time.Duration // send: measured phase
	consumeN   int           // consume: messages pre-filled and consumed
	prefillBat int           // consume: messages per batch send of the pre-fill
	latRate    int           // latency: msgs/s
	latN       int           // latency: measured messages
	latWarm    int           // latency: messages before the measured ones
	latWindow  int           // latency: most SendAsync calls in flight
	note       func(string)  // records a remark on the run
}

// goSend runs p.clients producers with p.inflight goroutines each calling SendSync in a loop
// on topicSend, and measures the acknowledged sends and the broker's CPU over p.sendTime after
// p.sendWarm.
func goSend(ctx context.Context, b *broker, p params, m metrics) error {
	prods := make([]rocketmq.Producer, p.clients)
	for i := range prods {
		pr, err := newProducer(b.ns, 2)
		if err != nil {
			return err
		}
		defer pr.Shutdown()
		prods[i] = pr
	}
	body := make([]byte, p.size)
	var (
		acked atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
		fails failures
	)
	for _, pr := range prods {
		for range p.inflight {
			wg.Go(func() {
				for !stop.Load() {
					sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					r, err := pr.SendSync(sctx, primitive.NewMessage(topicSend, body))
					cancel()
					if err == nil && r.Status != primitive.SendOK {
						err = fmt.Errorf("send status %d", r.Status)
					}
					if err != nil {
						fails.add(err)
						time.Sleep(failPause) // back off as the RocketMQ benchmark tools do
						continue
					}
					acked.Add(1)
				}
			})
		}
	}
	time.Sleep(p.sendWarm)
	n0, f0 := acked.Load(), fails.n.Load()
	cpu := meterCPU(b.pids()...)
	cm := meterClient()
	time.Sleep(p.sendTime)
	n, f := acked.Load()-n0, fails.n.Load()-f0
	used, wall := cpu.used()
	ccpu, _ := cm.since()
	stop.Store(true)
	wg.Wait()
	if n == 0 {
		return fmt.Errorf("send: nothing acknowledged: %v", fails.err())
	}
	if f > 0 {
		p.note(fmt.Sprintf("go_send: %d sends failed in the measured phase, first: %v", f, fails.err()))
	}
	m["go_send_failed"] = float64(f)
	m["go_send_rate"] = float64(n) / wall.Seconds()
	m["go_send_cpu_us"] = perMsg(used, n)
	m["go_send_client_cpu_us"] = perMsg(ccpu, n)
	return nil
}

// failPause is how long a sender waits after a failed send before the next.
const failPause = 100 * time.Millisecond

// failures counts failed sends and keeps the first error.
type failures struct {
	n     atomic.Int64
	first atomic.Pointer[error]
}

func (f *failures) add(err error) {
	f.n.Add(1)
	f.first.CompareAndSwap(nil, &err)
}

func (f *failures) err() error {
	if e := f.first.Load(); e != nil {
		return *e
	}
	return nil
}

func perMsg(cpu time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

// goConsume pre-fills topicConsume with p.consumeN messages (batch sends of p.prefillBat
// from p.clients producers) and then times a push consumer (consume from the first offset,
// client defaults otherwise: pull batch 32, consume batch 1) from Start until it has received
// them all, with the broker's CPU over the same span.
func goConsume(ctx context.Context, b *broker, p params, m metrics) error {
	if err := prefill(ctx, b, topicConsume, p); err != nil {
		return err
	}
	var got atomic.Int64
	all := make(chan struct{})
	want := int64(p.consumeN)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver(b.ns)),
		consumer.WithGroupName("nb_consume_g"),
		consumer.WithInstance(instance("c")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return fmt.Errorf("new consumer: %w", err)
	}
	if err := c.Subscribe(topicConsume, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		// Exactly one callback crosses want.
		if v := got.Add(int64(len(msgs))); v >= want && v-int64(len(msgs)) < want {
			close(all)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	cpu := meterCPU(b.pids()...)
	cm := meterClient()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start consumer: %w", err)
	}
	defer c.Shutdown()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("consume: %d of %d messages in 5 minutes", got.Load(), want)
	}
	used, wall := cpu.used()
	ccpu, _ := cm.since()
	m["go_consume_client_cpu_us"] = perMsg(ccpu, want)
	m["go_consume_rate"] = float64(want) / wall.Seconds()
	m["go_consume_cpu_us"] = perMsg(used, want)
	return nil
}

// prefill sends p.consumeN messages of p.size bytes to topic in batches of p.prefillBat.
func prefill(ctx context.Context, b *broker, topic string, p params) error {
	var (
		claimed atomic.Int64
		gaveUp  atomic.Bool
		wg      sync.WaitGroup
		fails   failures
	)
	body := make([]byte, p.size)
	for range p.clients {
		pr, err := newProducer(b.ns, 2)
		if err != nil {
			return err
		}
		defer pr.Shutdown()
		for range p.inflight {
			wg.Go(func() {
				for {
					end := claimed.Add(int64(p.prefillBat))
					start := end - int64(p.prefillBat)
					if start >= int64(p.consumeN) {
						return
					}
					msgs := make([]*primitive.Message, min(end, int64(p.consumeN))-start)
					for i := range msgs {
						msgs[i] = primitive.NewMessage(topic, body)
					}
					for try := 0; ; try++ {
						sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
						_, err := pr.SendSync(sctx, msgs...)
						cancel()
						if err == nil {
							break
						}
						fails.add(err)
						if try == 20 || gaveUp.Load() {
							gaveUp.Store(true)
							claimed.Store(int64(p.consumeN))
							return
						}
						time.Sleep(failPause) // back off: the broker is busy
					}
				}
			})
		}
	}
	wg.Wait()
	if gaveUp.Load() {
		return fmt.Errorf("pre-fill %s: a batch failed 21 times: %v", topic, fails.err())
	}
	if n := fails.n.Load(); n > 0 {
		p.note(fmt.Sprintf("pre-fill %s: %d batch sends failed and were sent again (a failed batch may also have been stored), first: %v", topic, n, fails.err()))
	}
	return nil
}

// goLatency runs a push consumer on topicLat and one producer whose SendAsync calls are paced
// at p.latRate msgs/s, at most p.latWindow in flight (a full window delays the next send,
// which counts as late); each body carries its index and send time, and the consumer records
// receive minus send. The first p.latWarm messages are not counted.
func goLatency(ctx context.Context, b *broker, p params, m metrics) error {
	total := p.latWarm + p.latN
	lats := make([]time.Duration, p.latN)
	base := time.Now()
	var got atomic.Int64
	var probeGot atomic.Bool
	const probeID = ^uint64(0)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver(b.ns)),
		consumer.WithGroupName("nb_lat_g"),
		consumer.WithInstance(instance("c")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return fmt.Errorf("new consumer: %w", err)
	}
	if err := c.Subscribe(topicLat, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Since(base)
		for _, msg := range msgs {
			if len(msg.Body) < 16 {
				continue
			}
			if binary.LittleEndian.Uint64(msg.Body) == probeID {
				probeGot.Store(true)
				continue
			}
			i := int(binary.LittleEndian.Uint64(msg.Body))
			if k := i - p.latWarm; k >= 0 && k < len(lats) {
				lats[k] = now - time.Duration(binary.LittleEndian.Uint64(msg.Body[8:]))
			}
			got.Add(1)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("start consumer: %w", err)
	}
	stopConsumer := sync.OnceFunc(func() { _ = c.Shutdown() })
	defer stopConsumer()
	pr, err := newProducer(b.ns, 2)
	if err != nil {
		return err
	}
	defer pr.Shutdown()
	// Wait until the consumer owns the queues: a probe message comes back.
	probeDeadline := time.Now().Add(60 * time.Second)
	probe := make([]byte, max(p.size, 16))
	binary.LittleEndian.PutUint64(probe, probeID)
	var fails failures
	var acked atomic.Int64
	window := make(chan struct{}, p.latWindow)
	send := func(i int) error {
		window <- struct{}{}
		body := make([]byte, max(p.size, 16))
		binary.LittleEndian.PutUint64(body, uint64(i))
		binary.LittleEndian.PutUint64(body[8:], uint64(time.Since(base)))
		err := pr.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			<-window
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("send status %d", r.Status)
			}
			if err != nil {
				fails.add(err)
				return
			}
			acked.Add(1)
		}, primitive.NewMessage(topicLat, body))
		if err != nil {
			<-window
		}
		return err
	}
	// Probes go one by one until one is received, so that the paced messages do not queue
	// behind the consumer's first rebalance.
	for !probeGot.Load() {
		if time.Now().After(probeDeadline) {
			return errors.New("latency: the consumer received nothing in 60 s")
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := pr.SendSync(sctx, primitive.NewMessage(topicLat, probe))
		cancel()
		if err != nil {
			return fmt.Errorf("latency probe: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // poll for the consumer's first receipt
	}
	interval := time.Second / time.Duration(p.latRate)
	var cpu *cpuMeter
	start := time.Now()
	late := 0
	for i := range total {
		if i == p.latWarm {
			cpu = meterCPU(b.pids()...)
		}
		next := start.Add(time.Duration(i) * interval)
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		} else if -w > 2*time.Millisecond && i >= p.latWarm {
			late++
		}
		if err := send(i); err != nil {
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
	used, _ := cpu.used()
	if f := fails.n.Load(); f > 0 {
		p.note(fmt.Sprintf("lat: %d of %d sends failed (not in the figures), first: %v", f, total, fails.err()))
	}
	m["lat_failed"] = float64(fails.n.Load())
	stopConsumer() // no callback writes lats from here on
	// A message whose send failed has no latency.
	lats = slices.DeleteFunc(lats, func(d time.Duration) bool { return d == 0 })
	if len(lats) == 0 {
		return errors.New("latency: no measured message was received")
	}
	slices.Sort(lats)
	q := func(f float64) float64 {
		return float64(lats[min(int(f*float64(len(lats))), len(lats)-1)].Microseconds())
	}
	m["lat_p50_us"], m["lat_p99_us"], m["lat_p999_us"], m["lat_max_us"] = q(0.5), q(0.99), q(0.999), float64(lats[len(lats)-1].Microseconds())
	m["lat_rate"] = float64(total) / sendWall.Seconds()
	m["lat_late"] = float64(late)
	m["lat_cpu_us"] = perMsg(used, int64(len(lats)))
	return nil
}

// metrics are the figures of one run of one broker, by name.
type metrics map[string]float64

func (m metrics) String() string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	s := ""
	for _, k := range keys {
		s += k + "=" + strconv.FormatFloat(m[k], 'f', -1, 64) + " "
	}
	return s
}
