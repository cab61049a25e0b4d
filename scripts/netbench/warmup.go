package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
)

// topicWarm is the warm-up's topic.
const topicWarm = "nb_warm"

// warmUp loads broker b, unmeasured, for d before its first measured workload: half of
// p.clients producers of ours and half of rocketmq-client-go (at least one each), each with
// p.inflight goroutines calling a sync send in a loop on topicWarm, while our push
// consumer and a rocketmq-client-go one (two groups) read it. A JVM broker compiles its hot
// paths over its first tens of seconds of load: pinned to one CPU, where the compiler
// threads take the CPU the broker needs, RocketMQ's broker answered our client's sends at
// 15 k msgs/s two seconds after it started and at 46-48 k after 40-60 s of sends. Measured
// cold, it would be compared in its worst mode. Every broker gets the same warm-up. It
// returns the sends acknowledged.
func warmUp(ctx context.Context, b *broker, p params, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, nil
	}
	c, err := dialOurs(ctx, b.ns)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var read atomic.Int64
	stopOurs, err := oursPushConsumer(c, &consumer.Options{Group: "nb_warm_ours_g", FromWhere: consumer.ConsumeFromFirstOffset},
		topicWarm, func(msgs []*consumer.Message) { read.Add(int64(len(msgs))) })
	if err != nil {
		return 0, fmt.Errorf("warm-up consumer: %w", err)
	}
	defer stopOurs()
	stopGo, err := goPushConsumer(b.ns, "nb_warm_go_g", topicWarm, func(msgs []*primitive.MessageExt) { read.Add(int64(len(msgs))) })
	if err != nil {
		return 0, fmt.Errorf("warm-up rocketmq-client-go consumer: %w", err)
	}
	defer stopGo()

	body := make([]byte, p.size)
	ours := max(p.clients/2, 1)
	var sends []func() error
	for range ours {
		oc, err := dialOurs(ctx, b.ns)
		if err != nil {
			return 0, err
		}
		defer oc.Close()
		pr, err := producer.New(oc, &producer.Options{SendTimeout: 10 * time.Second})
		if err != nil {
			return 0, err
		}
		defer pr.Close()
		sends = append(sends, func() error {
			_, err := pr.Send(ctx, &mq.Message{Topic: topicWarm, Body: body}, nil)
			return err
		})
	}
	for range max(p.clients-ours, 1) {
		gp, err := newProducer(b.ns, 2)
		if err != nil {
			return 0, err
		}
		defer gp.Shutdown()
		sends = append(sends, func() error {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := gp.SendSync(sctx, primitive.NewMessage(topicWarm, body))
			return err
		})
	}
	var (
		acked atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for _, send := range sends {
		for range p.inflight {
			wg.Go(func() {
				for !stop.Load() && ctx.Err() == nil {
					if err := send(); err != nil {
						time.Sleep(failPause)
						continue
					}
					acked.Add(1)
				}
			})
		}
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	stop.Store(true)
	wg.Wait()
	if acked.Load() == 0 {
		return 0, fmt.Errorf("warm-up: no send acknowledged in %s", d)
	}
	return acked.Load(), ctx.Err()
}
