package main

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/edgemq/edgemq/consumer"
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
	stopOurs, err := oursPushConsumer(c, &consumer.Options{Group: "nb_warm_ours_g", FromWhere: consumer.ConsumeFromFirstOffset},
		topicWarm, func([]*consumer.Message) {})
	if err != nil {
		return 0, fmt.Errorf("warm-up consumer: %w", err)
	}
	defer stopOurs()
	stopGo, err := goPushConsumer(b.ns, "nb_warm_go_g", topicWarm, func([]*primitive.MessageExt) {})
	if err != nil {
		return 0, fmt.Errorf("warm-up rocketmq-client-go consumer: %w", err)
	}
	defer stopGo()

	body := make([]byte, p.size)
	ours := max(p.clients/2, 1)
	oursSends, oursDone, err := oursSenders(ctx, b, ours, topicWarm, body)
	defer oursDone()
	if err != nil {
		return 0, err
	}
	goSends, goDone, err := goSenders(ctx, b, max(p.clients-ours, 1), topicWarm, body)
	defer goDone()
	if err != nil {
		return 0, err
	}
	return sendFor(ctx, append(oursSends, goSends...), p.inflight, d)
}

// sendFor runs inflight goroutines per function of sends (startSenders) for d, unmeasured,
// and returns the sends acknowledged: an error if none was.
func sendFor(ctx context.Context, sends []func() error, inflight int, d time.Duration) (int64, error) {
	ss := startSenders(sends, inflight)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	ss.halt()
	if ss.acked.Load() == 0 {
		return 0, fmt.Errorf("warm-up: no send acknowledged in %s: %v", d, ss.fails.err())
	}
	return ss.acked.Load(), ctx.Err()
}
