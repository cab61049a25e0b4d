package main

// EdgeMQ's own client (edge/producer and consumer.PushConsumer over edge/remoting.Client)
// on the same workloads as rocketmq-client-go, with the client's CPU and allocations per
// message; and the in-process figures (consumer over *edge.Broker in this process) that
// the client over TCP is held against.

import (
	"context"
	"fmt"
	"os"
	"runtime"
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
	sends, done, err := oursSenders(ctx, b, p.clients, topicSend, make([]byte, p.size))
	defer done()
	if err != nil {
		return err
	}
	return sendPhase(b, p, m, "ours_send", sends)
}

// oursSenders makes n of our producers, each over a client of its own (a connection), each
// a function that sends body to topic with Send; done closes those made, also after an
// error.
func oursSenders(ctx context.Context, b *broker, n int, topic string, body []byte) (sends []func() error, done func(), err error) {
	var closers []func()
	done = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	for range n {
		c, err := dialOurs(ctx, b.ns)
		if err != nil {
			return nil, done, err
		}
		closers = append(closers, func() { c.Close() })
		pr, err := producer.New(c, &producer.Options{SendTimeout: 10 * time.Second})
		if err != nil {
			return nil, done, err
		}
		closers = append(closers, func() { pr.Close() })
		sends = append(sends, func() error {
			_, err := pr.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
			return err
		})
	}
	return sends, done, nil
}

// consumeOptions are our push consumer's for the consume workloads: pull batch 32 and
// consume batch 1, as rocketmq-client-go's defaults.
func consumeOptions(group string) *consumer.Options {
	return &consumer.Options{Group: group, FromWhere: consumer.ConsumeFromFirstOffset, PullBatchSize: 32, ConsumeMessageBatchMaxSize: 1}
}

// oursPushConsumer starts our push consumer of topic over cb with opts, calling recv with
// each delivery.
func oursPushConsumer(cb consumer.Broker, opts *consumer.Options, topic string, recv func([]*consumer.Message)) (stop func(), err error) {
	pc, err := consumer.NewPushConsumer(cb, opts)
	if err != nil {
		return nil, err
	}
	err = pc.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		recv(msgs)
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		return nil, err
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("start consumer: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pc.Shutdown(ctx)
	}, nil
}

// oursConsumeClient is consumeRun's consumer: ours over cb, with consumeOptions.
func oursConsumeClient(cb consumer.Broker, group, topic string) consumeClient {
	return func(got func(int)) (func(), error) {
		return oursPushConsumer(cb, consumeOptions(group), topic, func(msgs []*consumer.Message) { got(len(msgs)) })
	}
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
	return consumeRun(b, int64(p.consumeN), oursConsumeClient(c, "nb_ours_consume_g", topicOursConsume), m, "ours_consume")
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
	return latencyRun(ctx, b, oursLatClient(c, pr), topicOursLat, p, m, "ours_lat")
}

// oursLatClient is latencyRun's client: our push consumer over cb (client defaults) and
// our producer pr.
func oursLatClient(cb consumer.Broker, pr *producer.Producer) latClient {
	return latClient{
		consume: func(topic string, recv func([]byte)) (func(), error) {
			opts := &consumer.Options{Group: "nb_ours_lat_g", FromWhere: consumer.ConsumeFromFirstOffset}
			return oursPushConsumer(cb, opts, topic, func(msgs []*consumer.Message) {
				for _, msg := range msgs {
					recv(msg.Body)
				}
			})
		},
		send: func(ctx context.Context, topic string, body []byte) error {
			_, err := pr.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
			return err
		},
		sendAsync: func(ctx context.Context, topic string, body []byte, done func(error)) error {
			return pr.SendAsync(ctx, &mq.Message{Topic: topic, Body: body}, nil, func(_ mq.SendResult, err error) { done(err) })
		},
	}
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
	if err := consumeRun(nil, int64(p.consumeN), oursConsumeClient(b, "nb_ours_consume_g", topicOursConsume), m, "inproc_consume"); err != nil {
		return nil, err
	}
	pr, err := producer.New(b, nil)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	if err := latencyRun(ctx, nil, oursLatClient(b, pr), topicOursLat, p, m, "inproc_lat"); err != nil {
		return nil, err
	}
	return m, nil
}
