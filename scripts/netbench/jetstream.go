package main

// NATS JetStream over loopback: nats-server (built from the module of scripts/bench, the
// in-process comparison's) in a process of its own, driven by its own Go client, nats.go,
// on the workloads our client runs against edgemq serve: sync sends with the same number in
// flight, a consumer over the same pre-filled backlog, and the same paced latency run. Each
// side has its own client in its best mode, so the table holds a broker and its client
// against the other's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Subjects of the JetStream workloads, each the only subject of a stream named as it is in
// upper case (streamOf). The send and warm-up ones are the EdgeMQ topics'.
const (
	topicNatsConsume = "nb_nats_c"
	topicNatsLat     = "nb_nats_lat"
	topicNatsLatPush = "nb_nats_lat_push"
	// natsAckEvery is how many messages the consume workload's AckAll consumer receives per
	// acknowledgement: one per pull batch of our push consumer, which commits an offset.
	natsAckEvery = 32
)

// streamOf names the stream of subject.
func streamOf(subject string) string { return strings.ToUpper(subject) }

// natsConfig writes the nats-server configuration of a run into dir and returns its path:
// listening on addr, JetStream storing under dir/data, with every write synced at once
// (sync_interval: always) when sync, else the server's default (a sync every 2 minutes).
func natsConfig(dir, addr string, sync bool, maxConns int) (string, error) {
	syncLine := ""
	if sync {
		syncLine = "  sync_interval: always\n"
	}
	conf := fmt.Sprintf("listen: %q\nmax_connections: %d\njetstream {\n  store_dir: %q\n%s}\n",
		addr, maxConns, filepath.Join(dir, "data"), syncLine)
	path := filepath.Join(dir, "nats.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// natsConnect connects to the server at addr and opens its JetStream API with opts.
func natsConnect(addr string, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(addr, nats.Name(instance("nats")), nats.Timeout(time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// natsFirstAck is firstAck for nats-server: it takes the time and from then on, every
// millisecond, connects (until connected), creates the stream of topicFirst (until
// created: JetStream stores a subject only in a stream, which EdgeMQ creates with the first
// send) and publishes one message, until one is acknowledged or timeout passes.
func natsFirstAck(ctx context.Context, addr string, timeout time.Duration) chan ackResult {
	var (
		nc      *nats.Conn
		js      jetstream.JetStream
		created bool
	)
	body := make([]byte, 100)
	cleanup := func() error {
		if nc != nil {
			nc.Close()
		}
		return nil
	}
	return pollAck(ctx, timeout, cleanup, func() error {
		if nc == nil {
			c, s, err := natsConnect(addr)
			if err != nil {
				return err
			}
			nc, js = c, s
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if !created {
			if _, err := js.CreateOrUpdateStream(sctx, jetstream.StreamConfig{Name: streamOf(topicFirst),
				Subjects: []string{topicFirst}, Storage: jetstream.FileStorage}); err != nil {
				return fmt.Errorf("create stream: %w", err)
			}
			created = true
		}
		_, err := js.Publish(sctx, topicFirst, body)
		return err
	})
}

// createStreams creates a file stream for each subject (streamOf names it).
func createStreams(ctx context.Context, b *broker, subjects ...string) error {
	nc, js, err := natsConnect(b.ns)
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, s := range subjects {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamOf(s), Subjects: []string{s}, Storage: jetstream.FileStorage}); err != nil {
			return fmt.Errorf("create stream %s: %w", streamOf(s), err)
		}
	}
	return nil
}

// natsSenders is oursSenders with nats.go: n connections, each a function that publishes
// body to subject with js.Publish, which waits for the stream's acknowledgement.
func natsSenders(ctx context.Context, b *broker, n int, subject string, body []byte) (sends []func() error, done func(), err error) {
	var conns []*nats.Conn
	done = func() {
		for _, nc := range conns {
			nc.Close()
		}
	}
	for range n {
		nc, js, err := natsConnect(b.ns)
		if err != nil {
			return nil, done, err
		}
		conns = append(conns, nc)
		sends = append(sends, func() error {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := js.Publish(sctx, subject, body)
			return err
		})
	}
	return sends, done, nil
}

// natsSend is oursSend with nats.go: p.clients connections × p.inflight goroutines of
// js.Publish, on the stream of topicSend.
func natsSend(ctx context.Context, b *broker, p params, m metrics) error {
	sends, done, err := natsSenders(ctx, b, p.clients, topicSend, make([]byte, p.size))
	defer done()
	if err != nil {
		return err
	}
	return sendPhase(b, p, m, "nats_send", sends)
}

// natsWarmUp is warmUp for nats-server: p.clients connections × p.inflight goroutines of
// js.Publish on the warm-up subject for d, read meanwhile by a consumer.
func natsWarmUp(ctx context.Context, b *broker, p params, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, nil
	}
	nc, js, err := natsConnect(b.ns)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	stop, err := natsConsumer(ctx, js, topicWarm, "nb_warm_g", jetstream.AckNonePolicy, false, func(jetstream.Msg) {})
	if err != nil {
		return 0, fmt.Errorf("warm-up consumer: %w", err)
	}
	defer stop()
	sends, done, err := natsSenders(ctx, b, p.clients, topicWarm, make([]byte, p.size))
	defer done()
	if err != nil {
		return 0, err
	}
	return sendFor(ctx, sends, p.inflight, d)
}

// natsConsumer creates a durable consumer of subject's stream from its first message with
// ack policy ack and starts Consume over handle; stop stops it. A pull consumer (push false)
// is nats.go's continuous pull, its defaults: up to 500 messages asked for at a time; a push
// consumer delivers to an inbox of this connection, each message as it is stored.
func natsConsumer(ctx context.Context, js jetstream.JetStream, subject, durable string, ack jetstream.AckPolicy, push bool, handle func(jetstream.Msg)) (stop func(), err error) {
	cfg := jetstream.ConsumerConfig{Durable: durable, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: ack}
	var consume func() (jetstream.ConsumeContext, error)
	if push {
		cfg.DeliverSubject = nats.NewInbox()
		pc, err := js.CreatePushConsumer(ctx, streamOf(subject), cfg)
		if err != nil {
			return nil, fmt.Errorf("create push consumer %s: %w", durable, err)
		}
		consume = func() (jetstream.ConsumeContext, error) { return pc.Consume(handle) }
	} else {
		c, err := js.CreateConsumer(ctx, streamOf(subject), cfg)
		if err != nil {
			return nil, fmt.Errorf("create consumer %s: %w", durable, err)
		}
		consume = func() (jetstream.ConsumeContext, error) { return c.Consume(handle) }
	}
	cc, err := consume()
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	return cc.Stop, nil
}

// natsPrefill publishes p.consumeN messages of p.size bytes to subject (PublishAsync, at
// most 1,024 unacknowledged) and checks that its stream holds them.
func natsPrefill(ctx context.Context, b *broker, subject string, p params) error {
	var failed atomic.Int64
	nc, js, err := natsConnect(b.ns, jetstream.WithPublishAsyncMaxPending(1024),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return err
	}
	defer nc.Close()
	body := make([]byte, p.size)
	for range p.consumeN {
		if _, err := js.PublishAsync(subject, body, jetstream.WithStallWait(time.Minute)); err != nil {
			return fmt.Errorf("pre-fill %s: %w", subject, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("pre-fill %s: %d publishes unacknowledged after 1 min", subject, js.PublishAsyncPending())
	}
	st, err := js.Stream(ctx, streamOf(subject))
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if f := failed.Load(); f > 0 || info.State.Msgs != uint64(p.consumeN) {
		return fmt.Errorf("pre-fill %s: the stream holds %d of %d messages (%d publishes failed)", subject, info.State.Msgs, p.consumeN, f)
	}
	return nil
}

// natsConsume is oursConsume with nats.go: p.consumeN messages pre-filled, then two durable
// consumers over them in turn, each timed from its creation to its last message:
// nats_consume with AckNone (nothing stored of its progress: JetStream's fastest), and
// nats_consume_ack with AckAll, one acknowledgement per natsAckEvery messages (progress
// stored as our push consumer stores it, by a cumulative offset).
func natsConsume(ctx context.Context, b *broker, p params, m metrics) error {
	if err := natsPrefill(ctx, b, topicNatsConsume, p); err != nil {
		return err
	}
	nc, js, err := natsConnect(b.ns)
	if err != nil {
		return err
	}
	defer nc.Close()
	want := int64(p.consumeN)
	client := func(durable string, ack jetstream.AckPolicy) consumeClient {
		return func(got func(int)) (func(), error) {
			var n int64
			return natsConsumer(ctx, js, topicNatsConsume, durable, ack, false, func(msg jetstream.Msg) {
				n++ // Consume calls its handler from one goroutine
				if ack == jetstream.AckAllPolicy && (n%natsAckEvery == 0 || n == want) {
					if err := msg.Ack(); err != nil {
						p.note(fmt.Sprintf("nats_consume_ack: ack: %v", err))
					}
				}
				got(1)
			})
		}
	}
	if err := consumeRun(b, want, client("nb_nats_none", jetstream.AckNonePolicy), m, "nats_consume"); err != nil {
		return err
	}
	return consumeRun(b, want, client("nb_nats_ackall", jetstream.AckAllPolicy), m, "nats_consume_ack")
}

// natsLatency is oursLatency with nats.go: js.PublishMsgAsync (latencyRun keeps at most
// p.latWindow unacknowledged) and a consumer with AckNone: with push false a pull consumer
// through Consume (nats_lat), with push true a push consumer, which the server sends each
// message to as it is stored, with no pull requests (nats_lat_push), each on a stream of its
// own.
func natsLatency(ctx context.Context, b *broker, p params, m metrics, push bool) error {
	var (
		mu      sync.Mutex
		pending = map[*nats.Msg]func(error){}
	)
	// resolve calls the done function of a publish once its acknowledgement or error came.
	resolve := func(msg *nats.Msg, err error) {
		mu.Lock()
		done := pending[msg]
		delete(pending, msg)
		mu.Unlock()
		if done != nil {
			done(err)
		}
	}
	nc, js, err := natsConnect(b.ns,
		jetstream.WithPublishAsyncMaxPending(max(p.latWindow, 1)),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, msg *nats.Msg, _ *jetstream.PubAck) { resolve(msg, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) {
			if err == nil {
				err = errors.New("publish failed")
			}
			resolve(msg, err)
		}))
	if err != nil {
		return err
	}
	defer nc.Close()
	lc := latClient{
		consume: func(subject string, recv func([]byte)) (func(), error) {
			return natsConsumer(ctx, js, subject, "nb_nats_lat_g", jetstream.AckNonePolicy, push, func(msg jetstream.Msg) { recv(msg.Data()) })
		},
		send: func(ctx context.Context, subject string, body []byte) error {
			_, err := js.Publish(ctx, subject, body)
			return err
		},
		sendAsync: func(_ context.Context, subject string, body []byte, done func(error)) error {
			msg := &nats.Msg{Subject: subject, Data: body}
			mu.Lock()
			pending[msg] = done
			mu.Unlock()
			if _, err := js.PublishMsgAsync(msg); err != nil {
				mu.Lock()
				delete(pending, msg)
				mu.Unlock()
				return err
			}
			return nil
		},
	}
	if push {
		return latencyRun(ctx, b, lc, topicNatsLatPush, p, m, "nats_lat_push")
	}
	return latencyRun(ctx, b, lc, topicNatsLat, p, m, "nats_lat")
}

// peerLine is a row of the EdgeMQ against JetStream tables: EdgeMQ's figures (its own
// client against edgemq serve) and JetStream's (nats.go against nats-server), the one at
// index cmp of each compared.
type peerLine struct {
	label        string
	unit         string
	edgemq, jets []string
	cmp          int
}

// jetStreamLines returns the rows of the EdgeMQ against JetStream tables.
func jetStreamLines(p params) []peerLine {
	lat := func(prefix string) []string {
		return []string{prefix + "_p50_us", prefix + "_p99_us", prefix + "_p999_us", prefix + "_max_us"}
	}
	return []peerLine{
		{label: "start to first acknowledged send (JetStream: connect, create the stream, publish)", unit: unitMillis, edgemq: []string{"first_ack_ms"}, jets: []string{"first_ack_ms"}},
		{label: "↳ start to the port accepting connections", unit: unitMillis, edgemq: []string{"listen_ms"}, jets: []string{"listen_ms"}},
		{label: fmt.Sprintf("send %s, %d connections × %d sync sends in flight (EdgeMQ: producer Send; JetStream: js.Publish)", sizeName(p.size), p.clients, p.inflight), unit: unitRate, edgemq: []string{"ours_send_rate"}, jets: []string{"nats_send_rate"}},
		{label: "↳ broker CPU per message", unit: unitMicrosPerMs, edgemq: []string{"ours_send_cpu_us"}, jets: []string{"nats_send_cpu_us"}},
		{label: "↳ client CPU per message (the benchmark process)", unit: unitMicrosPerMs, edgemq: []string{"ours_send_client_cpu_us"}, jets: []string{"nats_send_client_cpu_us"}},
		{label: fmt.Sprintf("consume %s ×%d pre-filled, progress stored (EdgeMQ: push consumer, pull batch 32, consume batch 1, offsets committed; JetStream: Consume(), AckAll, one ack per %d)", sizeName(p.size), p.consumeN, natsAckEvery), unit: unitRate, edgemq: []string{"ours_consume_rate"}, jets: []string{"nats_consume_ack_rate"}},
		{label: "↳ broker CPU per message", unit: unitMicrosPerMs, edgemq: []string{"ours_consume_cpu_us"}, jets: []string{"nats_consume_ack_cpu_us"}},
		{label: "↳ client CPU per message (the benchmark process)", unit: unitMicrosPerMs, edgemq: []string{"ours_consume_client_cpu_us"}, jets: []string{"nats_consume_ack_client_cpu_us"}},
		{label: "↳ JetStream with AckNone (no progress stored, its fastest) / its broker CPU per message", unit: unitRate, edgemq: []string{"ours_consume_rate"}, jets: []string{"nats_consume_rate", "nats_consume_cpu_us"}},
		{label: fmt.Sprintf("e2e latency p50 / p99 / p99.9 / max, p99 compared, @ %d msgs/s, async sends (≤ %d in flight) → consumer (EdgeMQ: push consumer; JetStream: Consume(), AckNone)", p.latRate, p.latWindow), unit: unitMicros, edgemq: lat("ours_lat"), jets: lat("nats_lat"), cmp: 1},
		{label: "↳ achieved send rate / sends > 2 ms behind schedule / failed sends", unit: unitRate, edgemq: []string{"ours_lat_rate", "ours_lat_late", "ours_lat_failed"}, jets: []string{"nats_lat_rate", "nats_lat_late", "nats_lat_failed"}},
		{label: "↳ broker CPU per message", unit: unitMicrosPerMs, edgemq: []string{"ours_lat_cpu_us"}, jets: []string{"nats_lat_cpu_us"}},
		{label: "↳ client CPU per message (the benchmark process: producer and consumer)", unit: unitMicrosPerMs, edgemq: []string{"ours_lat_client_cpu_us"}, jets: []string{"nats_lat_client_cpu_us"}},
		{label: "↳ JetStream with a push consumer (AckNone; the server sends each message as it is stored, no pull requests): p50 / p99 / p99.9 / max", unit: unitMicros, edgemq: lat("ours_lat"), jets: lat("nats_lat_push"), cmp: 1},
		{label: "↳↳ its achieved send rate / sends > 2 ms behind schedule / failed sends", unit: unitRate, edgemq: []string{"ours_lat_rate", "ours_lat_late", "ours_lat_failed"}, jets: []string{"nats_lat_push_rate", "nats_lat_push_late", "nats_lat_push_failed"}},
		{label: "↳↳ its broker CPU per message", unit: unitMicrosPerMs, edgemq: []string{"ours_lat_cpu_us"}, jets: []string{"nats_lat_push_cpu_us"}},
		{label: "↳↳ its client CPU per message", unit: unitMicrosPerMs, edgemq: []string{"ours_lat_client_cpu_us"}, jets: []string{"nats_lat_push_client_cpu_us"}},
		{label: floorLabel, unit: unitMicros, edgemq: lat("floor_lat"), cmp: 1},
		{label: floorEchoCPULabel, unit: unitMicrosPerMs, edgemq: []string{"floor_lat_cpu_us"}},
		{label: floorClientCPULabel, unit: unitMicrosPerMs, edgemq: []string{"floor_lat_client_cpu_us"}},
		{label: "broker peak RSS over these send, consume and latency workloads (VmHWM)", unit: unitMiB, edgemq: []string{"rss_ours_peak_mib"}, jets: []string{"rss_nats_peak_mib"}},
		{label: "↳ idle after start", unit: unitMiB, edgemq: []string{"rss_idle_mib"}, jets: []string{"rss_idle_mib"}},
	}
}

// printJetStreamTable prints EdgeMQ (edgemq serve and its client) against JetStream
// (nats-server and nats.go), one table per flush mode, from runs of one placement; title
// names the placement.
func printJetStreamTable(w io.Writer, runs []run, p params, title string) {
	by := byKind(runs)
	for _, pair := range [][2]string{{"edgemq-async", "jetstream-async"}, {"edgemq-sync", "jetstream-sync"}} {
		if by[pair[1]] == nil {
			continue
		}
		head := "async flush: edgemq serve -store.flush async vs nats-server with JetStream's default (a sync every 2 minutes)"
		if pair[0] == "edgemq-sync" {
			head = "sync flush: edgemq serve -store.flush sync vs nats-server with JetStream's sync_interval: always"
		}
		fmt.Fprintf(w, "\n## %s%s\n\n", head, title)
		fmt.Fprintf(w, "Each broker with its own Go client over loopback. EdgeMQ / JetStream above 1 is EdgeMQ ahead on a rate, below 1 on a time, CPU or memory.\n\n")
		fmt.Fprintf(w, "| workload | unit | EdgeMQ (its client) | JetStream (nats.go) | EdgeMQ / JetStream |\n|---|---|---:|---:|---:|\n")
		for _, l := range jetStreamLines(p) {
			e := cell(by[pair[0]], line{keys: l.edgemq, cmp: l.edgemq[l.cmp]})
			j, ratio := "", ""
			if len(l.jets) > 0 { // the floor has no JetStream side
				j = cell(by[pair[1]], line{keys: l.jets, cmp: l.jets[l.cmp]})
				em, eok := med(by[pair[0]], l.edgemq[l.cmp])
				jm, jok := med(by[pair[1]], l.jets[l.cmp])
				if eok && jok && jm > 0 {
					ratio = fmt.Sprintf("%.3g", em/jm)
				}
			}
			if e == "" && j == "" {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.label, l.unit, e, j, ratio)
		}
	}
}
