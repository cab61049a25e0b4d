//go:build !jetstreamonly

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// consumeTopic is the EdgeMQ topic of the push-consume runs: j.Queues queues.
const consumeTopic = "bench-consume"

// edgeMQConsume pre-fills j.Queues queues with j.N messages (async flush, SendBatch of 64 per
// queue in turn), then times a PushConsumer with a no-op listener from Start until every
// message is consumed: the committed offset of every queue has reached its end. The
// listener does nothing, not even count; the consumer's own stats give the count.
func edgeMQConsume(ctx context.Context, j job, dir string) (result, error) {
	var res result
	b, err := openEdgeMQ(j, dir)
	if err != nil {
		return res, err
	}
	defer b.Close()
	queues := int32(max(j.Queues, 1))
	if err := b.CreateTopic(edge.TopicConfig{Name: consumeTopic, ReadQueues: queues, WriteQueues: queues}); err != nil {
		return res, err
	}
	body := make([]byte, j.Size)
	batch := make([]*mq.Message, 64)
	for k, sent := int32(0), int64(0); sent < j.N; k, sent = k+1, sent+int64(len(batch)) {
		batch = batch[:min(int64(len(batch)), j.N-sent)]
		for i := range batch {
			batch[i] = &mq.Message{Topic: consumeTopic, Body: body}
		}
		if _, err := b.SendBatch(ctx, batch, mq.QueueIndex(int(k%queues))); err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
	}
	maxOffsets := func() (int64, error) {
		var sum int64
		for q := range queues {
			n, err := b.MaxOffset(ctx, mq.MessageQueue{Topic: consumeTopic, QueueID: q})
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		n, err := maxOffsets()
		if err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
		if n >= j.N {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("pre-fill: queues hold %d of %d messages after 30 s", n, j.N)
		}
	}

	pc, err := consumer.NewPushConsumer(b, &consumer.Options{
		Group:                      group,
		FromWhere:                  consumer.ConsumeFromFirstOffset,
		ConsumeMessageBatchMaxSize: max(j.Batch, 1),
	})
	if err != nil {
		return res, err
	}
	var listener consumer.Listener = consumer.ConcurrentListener(func(context.Context, []*consumer.Message, *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		return consumer.ConsumeSuccess, nil
	})
	if j.Orderly {
		listener = consumer.OrderlyListener(func(context.Context, []*consumer.Message, *consumer.OrderlyContext) (consumer.ConsumeOrderlyStatus, error) {
			return consumer.OrderlySuccess, nil
		})
	}
	if err := pc.Subscribe(consumeTopic, "*", listener); err != nil {
		return res, err
	}
	// done: every queue is assigned and its consumed offset is at its end, which with
	// offsets at the smallest message in flight means every message was consumed.
	done := func() bool {
		st := pc.Stats()
		n := 0
		for mq, lag := range st.Lag {
			if mq.Topic != consumeTopic {
				continue
			}
			if lag != 0 {
				return false
			}
			n++
		}
		return n == int(queues)
	}
	sp, err := begin(j.Profile)
	if err != nil {
		return res, err
	}
	if err := pc.Start(); err != nil {
		sp.end()
		return res, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Microsecond)
	}
	d := sp.end()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	shutErr := pc.Shutdown(sctx)
	// Counters settle in runs and may trail the offsets by the last millisecond's calls;
	// after Shutdown they are complete.
	st := pc.Stats().Topics[consumeTopic]
	res.Msgs, res.Seconds = st.ConsumeOK, d.Seconds()
	res.Note = fmt.Sprintf("%d listener calls, %d messages consumed (%d beyond N: redeliveries), %d pulls, %d flow-control pauses",
		st.Consumes, st.ConsumeOK, max(st.ConsumeOK-j.N, 0), st.Pulls, st.FlowControls)
	if st.ConsumeOK < j.N {
		return res, fmt.Errorf("consumed %d of %d messages in %s", st.ConsumeOK, j.N, d.Round(time.Millisecond))
	}
	res.Msgs = j.N
	return res, shutErr
}

// edgeMQPushLatency is the latency workload through a concurrent PushConsumer (default
// options: pulls of 32 held at the broker, listener batches of 1 on the worker pool) on the
// one-queue topic.
func edgeMQPushLatency(ctx context.Context, j job, dir string) (result, error) {
	b, err := openEdgeMQ(j, dir)
	if err != nil {
		return result{}, err
	}
	defer b.Close()
	p := newProbe(j)
	pc, err := consumer.NewPushConsumer(b, &consumer.Options{Group: group, FromWhere: consumer.ConsumeFromFirstOffset})
	if err != nil {
		return result{}, err
	}
	err = pc.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		now := p.now()
		for _, m := range msgs {
			p.recv(m.Body, now)
		}
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		return result{}, err
	}
	if err := pc.Start(); err != nil {
		return result{}, err
	}
	// The first rebalance runs at Start; wait for the queue's pull loop to park at the broker.
	for deadline := time.Now().Add(10 * time.Second); len(pc.Stats().Lag) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	res, err := p.run(j, func(body []byte) error {
		_, err := b.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
		return err
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if serr := pc.Shutdown(sctx); err == nil {
		err = serr
	}
	return res, err
}
