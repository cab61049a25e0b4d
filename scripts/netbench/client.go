package main

import (
	"context"
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
	p, err := newProducer(ns, 0)
	if err != nil {
		done := make(chan ackResult, 1)
		done <- ackResult{err: err}
		return done
	}
	return pollAck(ctx, timeout, p.Shutdown, func() error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		r, err := p.SendSync(sctx, primitive.NewMessage(topicFirst, make([]byte, 100)))
		if err == nil && r.Status != primitive.SendOK {
			err = fmt.Errorf("send status %d", r.Status)
		}
		return err
	})
}

// pollAck takes the time and from then on, in a goroutine, calls try every millisecond until
// it returns nil (an acknowledged send: the time taken is sent) or timeout passes (the last
// error is sent); then it calls cleanup.
func pollAck(ctx context.Context, timeout time.Duration, cleanup func() error, try func() error) chan ackResult {
	done := make(chan ackResult, 1)
	t0 := time.Now()
	go func() {
		defer cleanup()
		var last error
		for time.Since(t0) < timeout {
			if last = try(); last == nil {
				done <- ackResult{took: time.Since(t0)}
				return
			}
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
	brokerWarm time.Duration // each broker: unmeasured load before the first workload (warmUp)
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

// goSend runs p.clients rocketmq-client-go producers with p.inflight goroutines each
// calling SendSync in a loop on topicSend (sendPhase).
func goSend(ctx context.Context, b *broker, p params, m metrics) error {
	sends, done, err := goSenders(ctx, b, p.clients, topicSend, make([]byte, p.size))
	defer done()
	if err != nil {
		return err
	}
	return sendPhase(b, p, m, "go_send", sends)
}

// goSenders makes n rocketmq-client-go producers, each a function that sends body to topic
// with SendSync; done shuts down those made, also after an error.
func goSenders(ctx context.Context, b *broker, n int, topic string, body []byte) (sends []func() error, done func(), err error) {
	var prs []rocketmq.Producer
	done = func() {
		for _, pr := range prs {
			pr.Shutdown()
		}
	}
	for range n {
		pr, err := newProducer(b.ns, 2)
		if err != nil {
			return nil, done, err
		}
		prs = append(prs, pr)
		sends = append(sends, func() error {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			r, err := pr.SendSync(sctx, primitive.NewMessage(topic, body))
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("send status %d", r.Status)
			}
			return err
		})
	}
	return sends, done, nil
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
// from p.clients producers) and then times a rocketmq-client-go push consumer (consume from
// the first offset, client defaults otherwise: pull batch 32, consume batch 1) from Start
// until it has received them all (consumeRun).
func goConsume(ctx context.Context, b *broker, p params, m metrics) error {
	if err := prefill(ctx, b, topicConsume, p); err != nil {
		return err
	}
	return consumeRun(b, int64(p.consumeN), func(got func(int)) (func(), error) {
		return goPushConsumer(b.ns, "nb_consume_g", topicConsume, func(msgs []*primitive.MessageExt) { got(len(msgs)) })
	}, m, "go_consume")
}

// goPushConsumer starts a rocketmq-client-go push consumer of topic in group, from the
// first offset, client defaults otherwise, calling recv with each delivery.
func goPushConsumer(ns, group, topic string, recv func([]*primitive.MessageExt)) (stop func(), err error) {
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver(ns)),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance("c")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		recv(msgs)
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start consumer: %w", err)
	}
	return func() { _ = c.Shutdown() }, nil
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

// goLatency is latencyRun with rocketmq-client-go: a push consumer on topicLat and one
// producer's SendAsync.
func goLatency(ctx context.Context, b *broker, p params, m metrics) error {
	pr, err := newProducer(b.ns, 2)
	if err != nil {
		return err
	}
	defer pr.Shutdown()
	lc := latClient{
		consume: func(topic string, recv func([]byte)) (func(), error) {
			return goPushConsumer(b.ns, "nb_lat_g", topic, func(msgs []*primitive.MessageExt) {
				for _, msg := range msgs {
					recv(msg.Body)
				}
			})
		},
		send: func(ctx context.Context, topic string, body []byte) error {
			r, err := pr.SendSync(ctx, primitive.NewMessage(topic, body))
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("send status %d", r.Status)
			}
			return err
		},
		sendAsync: func(ctx context.Context, topic string, body []byte, done func(error)) error {
			return pr.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				if err == nil && r.Status != primitive.SendOK {
					err = fmt.Errorf("send status %d", r.Status)
				}
				done(err)
			}, primitive.NewMessage(topic, body))
		},
	}
	return latencyRun(ctx, b, lc, topicLat, p, m, "lat")
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
