package remoting_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/pace"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store/commitlog"
)

// BenchmarkClientSend measures a sync send of a 100-byte message over the client to a
// server on loopback: time and the client's and server's allocations together per send,
// with request headers in each encoding, and through a producer (edge/producer: a unique
// id per message, the queue chosen round robin, a timeout per attempt).
func BenchmarkClientSend(b *testing.B) {
	for _, enc := range []struct {
		name     string
		json     bool
		producer bool
	}{{"rocketmq", false, false}, {"json", true, false}, {"producer", false, true}} {
		b.Run(enc.name, func(b *testing.B) { benchClientSend(b, &remoting.Options{JSONHeaders: enc.json}, enc.producer) })
	}
}

func benchClientSend(b *testing.B, o *remoting.Options, viaProducer bool) {
	tb := startBroker(b, "", "")
	tb.createTopic("B", 4)
	c := dial(b, tb.addr, o)
	var send func(context.Context, *mq.Message, mq.QueueSelector) (mq.SendResult, error) = c.Send
	if viaProducer {
		p, err := producer.New(c, nil)
		if err != nil {
			b.Fatal(err)
		}
		send = p.Send
	}
	ctx := context.Background()
	body := make([]byte, 100)
	if _, err := send(ctx, &mq.Message{Topic: "B", Body: body}, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.SetParallelism(32) // 64 sends in flight on one connection, as a busy producer has
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := send(ctx, &mq.Message{Topic: "B", Body: body}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPushConsume measures a PushConsumer over the client consuming b.N pre-filled
// 100-byte messages from a server on loopback (pull batch 32, consume batch 1), its store
// flushed asynchronously.
func BenchmarkPushConsume(b *testing.B) {
	o := brokerOptions()
	o.Store.Flush = commitlog.FlushAsync // the pre-fill's fsyncs are not what is measured
	tb := startBrokerOpts(b, "", "", o)
	tb.createTopic("B", 4)
	body := make([]byte, 100)
	batch := make([]*mq.Message, 32)
	for i := range batch {
		batch[i] = &mq.Message{Topic: "B", Body: body}
	}
	for n := 0; n < b.N; n += len(batch) {
		if _, err := tb.b.SendBatch(context.Background(), batch[:min(len(batch), b.N-n)], nil); err != nil {
			b.Fatal(err)
		}
	}
	c := dial(b, tb.addr, nil)
	want := int64(b.N)
	var got atomic.Int64
	all := make(chan struct{})
	pc, err := consumer.NewPushConsumer(c, &consumer.Options{Group: "bg", FromWhere: consumer.ConsumeFromFirstOffset, PullBatchSize: 32, OffsetDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if err := pc.Subscribe("B", "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		if v := got.Add(int64(len(msgs))); v >= want && v-int64(len(msgs)) < want {
			close(all)
		}
		return consumer.ConsumeSuccess, nil
	})); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	if err := pc.Start(); err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), want)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc.Shutdown(ctx)
}

// stampedBroker is the client as the consumer under BenchmarkE2ELatency sees it: each
// Pull records when it was issued and when its reply was decoded, per message, by the
// message's index in its body.
type stampedBroker struct {
	*remoting.Client
	base   time.Time
	issued []atomic.Int64 // by message index: when the pull that brought it was issued
	done   []atomic.Int64 // by message index: when that pull returned
	stored []atomic.Int64 // by message index: its store time (unix ms, the broker's clock)

	mu    sync.Mutex
	last  map[mq.MessageQueue]time.Duration // by queue: when its last pull that found messages returned
	turns []time.Duration                   // from such a return to the issue of the queue's next pull
}

func (s *stampedBroker) Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error) {
	t0 := s.issue(req)
	res, err := s.Client.Pull(ctx, req)
	s.returned(req, t0, res)
	return res, err
}

// PullAsync stamps the pulls a PushConsumer chains (consumer.AsyncPuller) as Pull does.
func (s *stampedBroker) PullAsync(ctx context.Context, req mq.PullRequest, done func(mq.PullResult, error)) error {
	t0 := s.issue(req)
	return s.Client.PullAsync(ctx, req, func(res mq.PullResult, err error) {
		s.returned(req, t0, res)
		done(res, err)
	})
}

// issue records the issue of a pull of req's queue and returns its time.
func (s *stampedBroker) issue(req mq.PullRequest) time.Duration {
	t0 := time.Since(s.base)
	q := mq.MessageQueue{Topic: req.Queue.Topic, QueueID: req.Queue.QueueID}
	s.mu.Lock()
	if d, ok := s.last[q]; ok {
		s.turns = append(s.turns, t0-d)
		delete(s.last, q)
	}
	s.mu.Unlock()
	return t0
}

// returned records the return of a pull of req issued at t0 with res.
func (s *stampedBroker) returned(req mq.PullRequest, t0 time.Duration, res mq.PullResult) {
	t1 := time.Since(s.base)
	q := mq.MessageQueue{Topic: req.Queue.Topic, QueueID: req.Queue.QueueID}
	if len(res.Messages) > 0 {
		s.mu.Lock()
		s.last[q] = t1
		s.mu.Unlock()
	}
	for i := range res.Messages {
		if b := res.Messages[i].Body; len(b) >= 16 {
			if k := binary.LittleEndian.Uint64(b); k < uint64(len(s.done)) {
				s.issued[k].Store(int64(t0))
				s.done[k].Store(int64(t1))
				s.stored[k].Store(res.Messages[i].StoreTime)
			}
		}
	}
}

// BenchmarkE2ELatency sends b.N 100-byte messages by SendAsync, paced at -lat.rate msgs/s
// (default 10,000), to a topic of 4 queues on a server on loopback (its store flushed
// asynchronously, as `edgemq serve -store.flush async`), and a PushConsumer over the same
// client receives them. It reports the percentiles of send-to-listener time and,
// at some percentiles of that time, where a message's time went: send to the return of
// SendAsync (the request written), to its store time
// (to the millisecond), to the send's acknowledgement (ack), to the issue of the pull that
// brought it (positive: no pull was parked when it was stored), and that pull's return to
// the listener (handoff); then the consumer's turnaround (from the return of a pull that
// found messages to the issue of the queue's next pull) and the stalls: runs of messages
// over 1 ms, by send time from the start (a runtime trace, -test.trace, marks the start
// with a log event "e2e" "start").
func BenchmarkE2ELatency(b *testing.B) {
	o := brokerOptions()
	o.Store.Flush = commitlog.FlushAsync
	tb := startBrokerOpts(b, "", "", o)
	tb.createTopic("L", 4)
	c := dial(b, tb.addr, nil)
	pr, err := producer.New(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	n := b.N
	base := time.Now()
	trace.Log(context.Background(), "e2e", "start")
	sb := &stampedBroker{Client: c, base: base, issued: make([]atomic.Int64, n), done: make([]atomic.Int64, n), stored: make([]atomic.Int64, n),
		last: map[mq.MessageQueue]time.Duration{}}
	sent := make([]int64, n)
	wrote := make([]int64, n) // when SendAsync returned: the request was written
	acked := make([]atomic.Int64, n)
	recv := make([]atomic.Int64, n)
	var got atomic.Int64
	all := make(chan struct{})
	const probe = ^uint64(0)
	var probed atomic.Bool
	pc, err := consumer.NewPushConsumer(sb, &consumer.Options{Group: "lg", FromWhere: consumer.ConsumeFromFirstOffset, OffsetDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if err := pc.Subscribe("L", "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		now := int64(time.Since(base))
		for _, m := range msgs {
			k := binary.LittleEndian.Uint64(m.Body)
			if k == probe {
				probed.Store(true)
				continue
			}
			if k < uint64(n) && recv[k].Swap(now) == 0 && got.Add(1) == int64(n) {
				close(all)
			}
		}
		return consumer.ConsumeSuccess, nil
	})); err != nil {
		b.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pc.Shutdown(ctx)
	}()
	ctx := context.Background()
	pbody := make([]byte, 100)
	binary.LittleEndian.PutUint64(pbody, probe)
	for deadline := time.Now().Add(30 * time.Second); !probed.Load(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the consumer received no probe in 30 s")
		}
		if _, err := pr.Send(ctx, &mq.Message{Topic: "L", Body: pbody}, nil); err != nil {
			b.Fatal(err)
		}
	}
	interval := time.Second / time.Duration(*latRate)
	b.ReportAllocs()
	b.ResetTimer()
	pacer := pace.New()
	defer pacer.Close()
	start := time.Now()
	for i := range n {
		pacer.Wait(ctx, start.Add(time.Duration(i)*interval))
		body := make([]byte, 100)
		binary.LittleEndian.PutUint64(body, uint64(i))
		sent[i] = int64(time.Since(base))
		if err := pr.SendAsync(ctx, &mq.Message{Topic: "L", Body: body}, nil, func(_ mq.SendResult, err error) {
			if err != nil {
				b.Error(err)
				return
			}
			acked[i].Store(int64(time.Since(base)))
		}); err != nil {
			b.Fatal(err)
		}
		wrote[i] = int64(time.Since(base))
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatalf("received %d of %d", got.Load(), n)
	}
	b.StopTimer()
	type sample struct{ sent, e2e, write, ack, wait, handoff, store time.Duration }
	ss := make([]sample, n)
	for i := range ss {
		ss[i] = sample{
			sent:    time.Duration(sent[i]),
			e2e:     time.Duration(recv[i].Load() - sent[i]),
			write:   time.Duration(wrote[i] - sent[i]),
			ack:     time.Duration(acked[i].Load() - sent[i]),
			wait:    time.Duration(sb.issued[i].Load() - sent[i]),
			handoff: time.Duration(recv[i].Load() - sb.done[i].Load()),
			// to the millisecond: store times have no finer grain
			store: time.Duration(sb.stored[i].Load()-base.Add(time.Duration(sent[i])).UnixMilli()) * time.Millisecond,
		}
	}
	slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.e2e, b.e2e) })
	at := func(q float64) sample { return ss[min(int(q*float64(n)), n-1)] }
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(at(0.5).e2e), "p50-µs")
	b.ReportMetric(us(at(0.99).e2e), "p99-µs")
	b.ReportMetric(us(at(0.999).e2e), "p99.9-µs")
	b.ReportMetric(0, "ns/op")
	if *latStages && n > 1 { // not the first run of one message
		// To stderr: the testing package keeps 10 lines of a benchmark's log.
		logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "    "+format+"\n", args...) }
		logf("E2ELatency of %d messages at %d msgs/s:", n, *latRate)
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
			s := at(q)
			logf("p%v e2e %v: written %v, stored %v (±1 ms), ack %v, pull issued %v after the send, handoff %v", q*100, s.e2e, s.write, s.store, s.ack, s.wait, s.handoff)
		}
		// The share of the slowest 1 % whose pull was issued after the send.
		late := 0
		for _, s := range ss[n*99/100:] {
			if s.wait > 0 {
				late++
			}
		}
		logf("slowest 1 %%: %d of %d waited for a pull to be issued", late, n-n*99/100)
		sb.mu.Lock()
		turns := slices.Clone(sb.turns)
		sb.mu.Unlock()
		if len(turns) > 0 {
			slices.Sort(turns)
			tq := func(q float64) time.Duration { return turns[min(int(q*float64(len(turns))), len(turns)-1)] }
			logf("turnaround of %d pulls: p50 %v, p90 %v, p99 %v, max %v", len(turns), tq(0.5), tq(0.9), tq(0.99), turns[len(turns)-1])
		}
		logStalls(logf, ss, func(s sample) (time.Duration, time.Duration) { return s.sent, s.e2e })
	}
}

// logStalls logs the runs of samples slower than 1 ms, by send time (at, e2e of each), runs
// of send times under 5 ms apart, to be lined up with a trace or a period of the broker's.
func logStalls[S any](logf func(string, ...any), ss []S, of func(S) (at, e2e time.Duration)) {
	type stall struct {
		from, to, worst time.Duration
		n               int
	}
	var slow []S
	for _, s := range ss {
		if _, e := of(s); e > time.Millisecond {
			slow = append(slow, s)
		}
	}
	slices.SortFunc(slow, func(x, y S) int { a, _ := of(x); c, _ := of(y); return cmp.Compare(a, c) })
	var stalls []stall
	for _, s := range slow {
		at, e := of(s)
		if k := len(stalls) - 1; k >= 0 && at-stalls[k].to < 5*time.Millisecond {
			st := &stalls[k]
			st.to, st.worst, st.n = at, max(st.worst, e), st.n+1
			continue
		}
		stalls = append(stalls, stall{at, at, e, 1})
	}
	slices.SortFunc(stalls, func(x, y stall) int { return cmp.Compare(y.worst, x.worst) })
	logf("%d stalls (runs of messages over 1 ms), the worst:", len(stalls))
	for _, st := range stalls[:min(len(stalls), 10)] {
		logf("  sent from %v for %v: %d messages, worst %v", st.from.Round(time.Microsecond), (st.to - st.from).Round(time.Microsecond), st.n, st.worst.Round(time.Microsecond))
	}
}

var (
	latRate   = flag.Int("lat.rate", 10000, "BenchmarkE2ELatency: sends per second")
	latStages = flag.Bool("lat.stages", false, "BenchmarkE2ELatency: log where the time of messages at some percentiles went")
)

// BenchmarkLoopbackFloor is the platform floor of BenchmarkE2ELatency: a 100-byte message
// paced at -lat.rate msgs/s from one goroutine, written to a TCP loopback connection, echoed
// by a goroutine on the other end and read by a third, which times it: the network hops of
// a send and its pull reply with the goroutine wake-ups they cost, and no broker.
func BenchmarkLoopbackFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() { // the echo: ends when the client closes
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	n := b.N
	base := time.Now()
	lats := make([]time.Duration, n)
	done := make(chan struct{})
	go func() { // the reader
		defer close(done)
		msg := make([]byte, 100)
		for range n {
			if _, err := io.ReadFull(c, msg); err != nil {
				return
			}
			k := binary.LittleEndian.Uint64(msg)
			lats[k] = time.Since(base) - time.Duration(binary.LittleEndian.Uint64(msg[8:]))
		}
	}()
	interval := time.Second / time.Duration(*latRate)
	b.ResetTimer()
	start := time.Now()
	msg := make([]byte, 100)
	pacer := pace.New()
	defer pacer.Close()
	for i := range n {
		pacer.Wait(context.Background(), start.Add(time.Duration(i)*interval))
		binary.LittleEndian.PutUint64(msg, uint64(i))
		binary.LittleEndian.PutUint64(msg[8:], uint64(time.Since(base)))
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.StopTimer()
	slices.Sort(lats)
	at := func(q float64) float64 { return float64(lats[min(int(q*float64(n)), n-1)]) / float64(time.Microsecond) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p99.9-µs")
	b.ReportMetric(0, "ns/op")
}
