package main

// EdgeMQ's own client (edge/producer and consumer.PushConsumer over edge/remoting.Client)
// on the same workloads as rocketmq-client-go, with the client's CPU and allocations per
// message; and the in-process figures (consumer over *edge.Broker in this process) that
// the client over TCP is held against.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// Topics of our client's workloads.
const (
	topicOursConsume = "nb_ours_c"
	topicOursLat     = "nb_ours_lat"
)

// clientMeter measures this process's CPU time and heap allocations over a span: the
// client's own cost, since the broker is another process.
type clientMeter struct {
	cpu    time.Duration
	allocs uint64
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func meterClient() clientMeter {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return clientMeter{cpu: selfCPU(), allocs: ms.Mallocs}
}

// since returns the CPU time and allocations since m.
func (m clientMeter) since() (time.Duration, uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return selfCPU() - m.cpu, ms.Mallocs - m.allocs
}

func dialOurs(ctx context.Context, ns string) (*remoting.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := remoting.Dial(dctx, ns, &remoting.Options{RouteRefresh: time.Second})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return c, nil
}

// oursSend is goSend with our producer: p.clients clients (a connection each) × p.inflight
// goroutines of sync Send.
func oursSend(ctx context.Context, b *broker, p params, m metrics) error {
	prods := make([]*producer.Producer, p.clients)
	for i := range prods {
		c, err := dialOurs(ctx, b.ns)
		if err != nil {
			return err
		}
		defer c.Close()
		pr, err := producer.New(c, &producer.Options{SendTimeout: 10 * time.Second})
		if err != nil {
			return err
		}
		defer pr.Close()
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
					_, err := pr.Send(ctx, &mq.Message{Topic: topicSend, Body: body}, nil)
					if err != nil {
						fails.add(err)
						time.Sleep(failPause)
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
	ccpu, allocs := cm.since()
	stop.Store(true)
	wg.Wait()
	if n == 0 {
		return fmt.Errorf("send: nothing acknowledged: %v", fails.err())
	}
	if f > 0 {
		p.note(fmt.Sprintf("ours_send: %d sends failed in the measured phase, first: %v", f, fails.err()))
	}
	m["ours_send_failed"] = float64(f)
	m["ours_send_rate"] = float64(n) / wall.Seconds()
	m["ours_send_cpu_us"] = perMsg(used, n)
	m["ours_send_client_cpu_us"] = perMsg(ccpu, n)
	m["ours_send_allocs"] = float64(allocs) / float64(n)
	return nil
}

// consumeOptions are our push consumer's for the consume workloads: pull batch 32 and
// consume batch 1, as rocketmq-client-go's defaults.
func consumeOptions(group string) *consumer.Options {
	return &consumer.Options{Group: group, FromWhere: consumer.ConsumeFromFirstOffset, PullBatchSize: 32, ConsumeMessageBatchMaxSize: 1}
}

// consumeAll starts a push consumer of topic over cb and waits until it received want
// messages; it returns the wall time from Start and the client meter's figures.
func consumeAll(cb consumer.Broker, group, topic string, want int64) (wall, cpu time.Duration, allocs uint64, err error) {
	var got atomic.Int64
	all := make(chan struct{})
	pc, err := consumer.NewPushConsumer(cb, consumeOptions(group))
	if err != nil {
		return 0, 0, 0, err
	}
	err = pc.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		if v := got.Add(int64(len(msgs))); v >= want && v-int64(len(msgs)) < want {
			close(all)
		}
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		return 0, 0, 0, err
	}
	cm := meterClient()
	t0 := time.Now()
	if err := pc.Start(); err != nil {
		return 0, 0, 0, fmt.Errorf("start consumer: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pc.Shutdown(ctx)
	}()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		return 0, 0, 0, fmt.Errorf("consume: %d of %d messages in 5 minutes", got.Load(), want)
	}
	wall = time.Since(t0)
	cpu, allocs = cm.since()
	return wall, cpu, allocs, nil
}

// oursConsume is goConsume with our push consumer, on its own topic.
func oursConsume(ctx context.Context, b *broker, p params, m metrics) error {
	if err := prefill(ctx, b, topicOursConsume, p); err != nil {
		return err
	}
	c, err := dialOurs(ctx, b.ns)
	if err != nil {
		return err
	}
	defer c.Close()
	cpu := meterCPU(b.pids()...)
	wall, ccpu, allocs, err := consumeAll(c, "nb_ours_consume_g", topicOursConsume, int64(p.consumeN))
	if err != nil {
		return err
	}
	used, _ := cpu.used()
	n := int64(p.consumeN)
	m["ours_consume_rate"] = float64(n) / wall.Seconds()
	m["ours_consume_cpu_us"] = perMsg(used, n)
	m["ours_consume_client_cpu_us"] = perMsg(ccpu, n)
	m["ours_consume_allocs"] = float64(allocs) / float64(n)
	return nil
}

// oursLatency is goLatency with our producer (SendAsync, at most p.latWindow in flight) and
// our push consumer.
func oursLatency(ctx context.Context, b *broker, p params, m metrics) error {
	c, err := dialOurs(ctx, b.ns)
	if err != nil {
		return err
	}
	defer c.Close()
	pr, err := producer.New(c, nil)
	if err != nil {
		return err
	}
	defer pr.Close()
	r, err := latencyRun(c, pr, topicOursLat, p)
	if err != nil {
		return err
	}
	for k, v := range r {
		m["ours_"+k] = v
	}
	return nil
}

// sender is what latencyRun sends with: our producer, over the network or in-process.
type sender interface {
	Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error)
	SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error
}

// latencyRun paces p.latWarm+p.latN async sends at p.latRate to topic and measures each
// message's time from send to the consumer's listener; figures lat_p50_us ... lat_rate.
func latencyRun(cb consumer.Broker, s sender, topic string, p params) (metrics, error) {
	ctx := context.Background()
	total := p.latWarm + p.latN
	lats := make([]time.Duration, p.latN)
	base := time.Now()
	var got atomic.Int64
	var probeGot atomic.Bool
	const probeID = ^uint64(0)
	pc, err := consumer.NewPushConsumer(cb, &consumer.Options{Group: "nb_ours_lat_g", FromWhere: consumer.ConsumeFromFirstOffset})
	if err != nil {
		return nil, err
	}
	err = pc.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
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
	}))
	if err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("start consumer: %w", err)
	}
	stopConsumer := sync.OnceFunc(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pc.Shutdown(sctx)
	})
	defer stopConsumer()
	probe := make([]byte, max(p.size, 16))
	binary.LittleEndian.PutUint64(probe, probeID)
	for deadline := time.Now().Add(60 * time.Second); !probeGot.Load(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, errors.New("latency: the consumer received nothing in 60 s")
		}
		if _, err := s.Send(ctx, &mq.Message{Topic: topic, Body: probe}, nil); err != nil {
			return nil, fmt.Errorf("latency probe: %w", err)
		}
	}
	var fails failures
	var acked atomic.Int64
	window := make(chan struct{}, p.latWindow)
	interval := time.Second / time.Duration(p.latRate)
	start := time.Now()
	late := 0
	for i := range total {
		next := start.Add(time.Duration(i) * interval)
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		} else if -w > 2*time.Millisecond && i >= p.latWarm {
			late++
		}
		window <- struct{}{}
		body := make([]byte, max(p.size, 16))
		binary.LittleEndian.PutUint64(body, uint64(i))
		binary.LittleEndian.PutUint64(body[8:], uint64(time.Since(base)))
		err := s.SendAsync(ctx, &mq.Message{Topic: topic, Body: body}, nil, func(_ mq.SendResult, err error) {
			<-window
			if err != nil {
				fails.add(err)
				return
			}
			acked.Add(1)
		})
		if err != nil {
			<-window
			return nil, fmt.Errorf("latency send: %w", err)
		}
	}
	sendWall := time.Since(start)
	for range p.latWindow {
		window <- struct{}{}
	}
	for deadline := time.Now().Add(60 * time.Second); got.Load() < acked.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("latency: received %d of %d acknowledged messages 60 s after the last send", got.Load(), acked.Load())
		}
	}
	stopConsumer()
	lats = slices.DeleteFunc(lats, func(d time.Duration) bool { return d == 0 })
	if len(lats) == 0 {
		return nil, errors.New("latency: no measured message was received")
	}
	slices.Sort(lats)
	q := func(f float64) float64 {
		return float64(lats[min(int(f*float64(len(lats))), len(lats)-1)].Microseconds())
	}
	return metrics{
		"lat_p50_us": q(0.5), "lat_p99_us": q(0.99), "lat_p999_us": q(0.999), "lat_max_us": float64(lats[len(lats)-1].Microseconds()),
		"lat_rate": float64(total) / sendWall.Seconds(), "lat_late": float64(late), "lat_failed": float64(fails.n.Load()),
	}, nil
}

// inProcess runs the consume and latency workloads with the consumer and producer over an
// *edge.Broker in this process (store flush flush, a fresh dir under dir): the figures our
// client over TCP is held against.
func inProcess(dir, flush string, p params) (metrics, error) {
	d, err := os.MkdirTemp(dir, "netbench-inproc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(d)
	fm := commitlog.FlushAsync
	if flush == "sync" {
		fm = commitlog.FlushSync
	}
	b, err := edge.Open(d, &edge.Options{Store: &store.Options{Flush: fm}})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	for _, t := range []string{topicOursConsume, topicOursLat} {
		if err := b.CreateTopic(edge.TopicConfig{Name: t, ReadQueues: topicQueues, WriteQueues: topicQueues}); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	body := make([]byte, p.size)
	batch := make([]*mq.Message, p.prefillBat)
	for i := range batch {
		batch[i] = &mq.Message{Topic: topicOursConsume, Body: body}
	}
	for n := 0; n < p.consumeN; n += len(batch) {
		if _, err := b.SendBatch(ctx, batch[:min(len(batch), p.consumeN-n)], nil); err != nil {
			return nil, fmt.Errorf("in-process prefill: %w", err)
		}
	}
	m := metrics{}
	wall, ccpu, allocs, err := consumeAll(b, "nb_ours_consume_g", topicOursConsume, int64(p.consumeN))
	if err != nil {
		return nil, err
	}
	n := int64(p.consumeN)
	m["inproc_consume_rate"] = float64(n) / wall.Seconds()
	m["inproc_consume_cpu_us"] = perMsg(ccpu, n)
	m["inproc_consume_allocs"] = float64(allocs) / float64(n)
	pr, err := producer.New(b, nil)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	r, err := latencyRun(b, pr, topicOursLat, p)
	if err != nil {
		return nil, err
	}
	for k, v := range r {
		m["inproc_"+k] = v
	}
	return m, nil
}
