//go:build !edgemqonly

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const streamName = "BENCH"

// jsRun is an embedded JetStream server with an in-process client connection and a file
// stream on subject topic.
type jsRun struct {
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	asyncErr atomic.Int64 // failed async publishes
}

// startJetStream starts a server storing in dir, with SyncAlways for durable jobs, and
// creates the stream.
func startJetStream(ctx context.Context, j job, dir string) (*jsRun, error) {
	opts := &server.Options{
		ServerName: "bench",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: j.Durable, // the `sync_interval: always` config setting
		NoLog:      true,
		NoSigs:     true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server not ready after 10 s")
	}
	r := &jsRun{srv: srv}
	if r.nc, err = nats.Connect("", nats.InProcessServer(srv)); err != nil {
		r.close()
		return nil, err
	}
	r.js, err = jetstream.New(r.nc,
		jetstream.WithPublishAsyncMaxPending(j.Window),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { r.asyncErr.Add(1) }))
	if err != nil {
		r.close()
		return nil, err
	}
	r.stream, err = r.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     streamName,
		Subjects: []string{topic},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// close closes the connection and shuts the server down, waiting for it.
func (r *jsRun) close() {
	if r.nc != nil {
		r.nc.Close()
		r.nc = nil
	}
	if r.srv != nil {
		r.srv.Shutdown()
		r.srv.WaitForShutdown()
		r.srv = nil
	}
}

// stored returns the number of messages in the stream.
func (r *jsRun) stored(ctx context.Context) (int64, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

// publishAsync publishes body from producers goroutines with js.PublishAsync until n
// messages or d, waits for every ack and returns the acknowledged count and the time taken.
func (r *jsRun) publishAsync(producers int, n int64, d time.Duration, profile string, body []byte) (int64, time.Duration, error) {
	before := r.asyncErr.Load()
	flush := func() error {
		select {
		case <-r.js.PublishAsyncComplete():
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("%d async publishes still pending after 1 min", r.js.PublishAsyncPending())
		}
	}
	sent, el, err := driveThen(producers, n, d, profile, func() error {
		_, err := r.js.PublishAsync(topic, body, jetstream.WithStallWait(time.Minute))
		return err
	}, flush)
	return sent - (r.asyncErr.Load() - before), el, err
}

func runJetStream(ctx context.Context, j job, dir string) (result, error) {
	var res result
	r, err := startJetStream(ctx, j, dir)
	if err != nil {
		return res, err
	}
	defer r.close()
	switch j.Work {
	case workSend:
		body := make([]byte, j.Size)
		const warmup = 1000
		for range warmup {
			if _, err := r.js.Publish(ctx, topic, body); err != nil {
				return res, err
			}
		}
		var (
			n int64
			d time.Duration
		)
		if j.Producers == 1 && !j.Pipelined {
			n, d, err = drive(1, j.N, j.Time, j.Profile, func() error {
				_, err := r.js.Publish(ctx, topic, body)
				return err
			})
		} else {
			n, d, err = r.publishAsync(j.Producers, j.N, j.Time, j.Profile, body)
		}
		res.Msgs, res.Seconds = n, d.Seconds()
		if err != nil {
			return res, err
		}
		if res.Stored, err = r.stored(ctx); err != nil {
			return res, err
		}
		r.close()
		return res, measureDisk(&res, dir)
	case workPull:
		return r.pull(ctx, j)
	case workLatency:
		return r.latency(ctx, j)
	case workConsume:
		return r.consume(ctx, j)
	}
	return res, fmt.Errorf("unknown workload %q", j.Work)
}

// prefill publishes j.N messages of j.Size bytes and checks the stream holds them.
func (r *jsRun) prefill(ctx context.Context, j job) error {
	body := make([]byte, j.Size)
	if _, _, err := r.publishAsync(1, j.N, time.Hour, "", body); err != nil {
		return fmt.Errorf("pre-fill: %w", err)
	}
	if n, err := r.stored(ctx); err != nil || n != j.N {
		return fmt.Errorf("pre-fill: stream holds %d of %d messages (%v)", n, j.N, err)
	}
	return nil
}

// pull pre-fills the stream and times Fetch(32) over it.
func (r *jsRun) pull(ctx context.Context, j job) (result, error) {
	var res result
	if err := r.prefill(ctx, j); err != nil {
		return res, err
	}
	cfg := jetstream.ConsumerConfig{Durable: "bench", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy}
	if j.Ack {
		cfg.AckPolicy = jetstream.AckExplicitPolicy
	}
	cons, err := r.js.CreateConsumer(ctx, streamName, cfg)
	if err != nil {
		return res, err
	}
	sp, err := begin(j.Profile)
	if err != nil {
		return res, err
	}
	var got int64
	for got < j.N {
		batch, err := cons.Fetch(32, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			sp.end()
			return res, err
		}
		for m := range batch.Messages() {
			got++
			if j.Ack {
				if err := m.Ack(); err != nil {
					sp.end()
					return res, err
				}
			}
		}
		if err := batch.Error(); err != nil {
			sp.end()
			return res, fmt.Errorf("fetch after %d messages: %w", got, err)
		}
	}
	if j.Ack {
		err = r.nc.Flush() // the acks reached the server
	}
	d := sp.end()
	res.Msgs, res.Seconds = got, d.Seconds()
	return res, err
}

// latency times paced js.Publish calls to a consumer receiving through Consume.
func (r *jsRun) latency(ctx context.Context, j job) (result, error) {
	p := newProbe(j)
	handler := func(m jetstream.Msg) { p.recv(m.Data(), p.now()) }
	var (
		cc  jetstream.ConsumeContext
		err error
	)
	switch j.Consumer {
	case consumerPush:
		var pc jetstream.PushConsumer
		pc, err = r.js.CreatePushConsumer(ctx, streamName, jetstream.ConsumerConfig{
			DeliverSubject: nats.NewInbox(), AckPolicy: jetstream.AckNonePolicy,
		})
		if err == nil {
			cc, err = pc.Consume(handler)
		}
	default:
		var c jetstream.Consumer
		c, err = r.js.CreateConsumer(ctx, streamName, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
		if err == nil {
			cc, err = c.Consume(handler)
		}
	}
	if err != nil {
		return result{}, err
	}
	defer cc.Stop()
	return p.run(j, func(b []byte) error {
		_, err := r.js.Publish(ctx, topic, b)
		return err
	})
}
