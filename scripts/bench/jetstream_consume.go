//go:build !edgemqonly

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consume is the JetStream peer of the push-consume workload: it pre-fills the stream with
// j.N messages and times a pull consumer's Fetch(j.Batch) loop over them, with AckNone; with
// j.Ack, AckExplicit and msg.Ack() per message; with j.AckAll too, AckAll and one Ack() of
// each batch's last message (cumulative, as EdgeMQ commits an offset). Acks are
// fire-and-forget publishes; the connection is flushed at the end so they reached the server.
// It is pull's loop with a configurable batch: -js-fetch (default 1000, the fastest of
// 32/128/500/1000/2000 here, see BENCHMARKS.md).
func (r *jsRun) consume(ctx context.Context, j job) (result, error) {
	var res result
	if err := r.prefill(ctx, j); err != nil {
		return res, err
	}
	cfg := jetstream.ConsumerConfig{Durable: "bench", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy}
	if j.Ack {
		cfg.AckPolicy = jetstream.AckExplicitPolicy
		cfg.MaxAckPending = -1 // no cap: the fetch loop is not held back by its own acks
		if j.AckAll {
			cfg.AckPolicy = jetstream.AckAllPolicy
		}
	}
	cons, err := r.js.CreateConsumer(ctx, streamName, cfg)
	if err != nil {
		return res, err
	}
	batch := max(j.Batch, 1)
	sp, err := begin(j.Profile)
	if err != nil {
		return res, err
	}
	var got int64
	for got < j.N {
		mb, err := cons.Fetch(batch, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			sp.end()
			return res, err
		}
		var last jetstream.Msg
		for m := range mb.Messages() {
			got++
			last = m
			if j.Ack && !j.AckAll {
				if err := m.Ack(); err != nil {
					sp.end()
					return res, err
				}
			}
		}
		if j.AckAll && last != nil { // acknowledges the whole batch
			if err := last.Ack(); err != nil {
				sp.end()
				return res, err
			}
		}
		if err := mb.Error(); err != nil {
			sp.end()
			return res, fmt.Errorf("fetch after %d messages: %w", got, err)
		}
	}
	if j.Ack {
		err = r.nc.Flush()
	}
	d := sp.end()
	res.Msgs, res.Seconds = got, d.Seconds()
	return res, err
}
