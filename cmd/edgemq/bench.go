package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/pace"
)

const benchDoc = `
Producers send messages of -size bytes to -topic (created with -queues queues if it does
not exist) as fast as they can or at -rate in all, until -n messages are sent or -duration
has passed; a consumer per read queue pulls them from where the queue ended at the start.
On a terminal a progress line shows on stderr. Then it waits up to -drain for the
consumers to catch up and prints a summary: messages per second sent and consumed, send
latency (until the broker acknowledged) and end-to-end latency (send to consume: the send
time travels in the body) as p50, p99, p99.9 and max. With -rate each producer sends its share
evenly spaced, a send every -producers/-rate seconds (on Linux each waits on a timerfd, tens of
microseconds late at most, so that even 10,000 msgs/s go one at a time, not in bursts).

It runs against the server at -server (EdgeMQ or Apache RocketMQ; -server or
$EDGEMQ_SERVER), or in-process on the data dir of an explicit -data.

Examples:
  edgemq bench -server 127.0.0.1:9876 -duration 30s -producers 8 -size 1024
  edgemq bench -data /tmp/benchdata -n 100000 -rate 5000`

// benchJSON is what bench -json prints.
type benchJSON struct {
	Topic           string             `json:"topic"`
	Size            int                `json:"size"`
	Sent            int64              `json:"sent"`
	SendErrors      int64              `json:"sendErrors"`
	Consumed        int64              `json:"consumed"`
	SendSeconds     float64            `json:"sendSeconds"`
	ConsumeSeconds  float64            `json:"consumeSeconds"`
	SentPerSec      float64            `json:"sentPerSec"`
	ConsumedPerSec  float64            `json:"consumedPerSec"`
	SendLatency     map[string]float64 `json:"sendLatencyMicros"`
	EndToEndLatency map[string]float64 `json:"endToEndLatencyMicros"`
	Interrupted     bool               `json:"interrupted"`
	// FirstError is the first failed send or pull, if any.
	FirstError string `json:"firstError,omitempty"`
}

// benchHeader is the head of a bench message's body: the run's id, then the send time.
const benchHeader = 16

func benchCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	topic := fs.String("topic", "EdgeMQBench", "`topic` to send to and consume")
	group := fs.String("group", "edgemq-bench", "consumer `group`")
	size := fs.Int("size", 256, "body size in `bytes` (at least 16)")
	rate := fs.Int("rate", 0, "messages per second in all (0: as fast as the producers go)")
	count := fs.Int64("n", 0, "stop sending after this many messages (0: -duration decides)")
	duration := fs.Duration("duration", 10*time.Second, "stop sending after this long (with -n: whichever comes first)")
	producers := fs.Int("producers", 4, "producers sending at once, each waiting for its acknowledgements")
	queues := fs.Int("queues", 8, "queues of the topic if bench creates it")
	drain := fs.Duration("drain", 10*time.Second, "after the sends, wait at most this long for the consumers to catch up")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, errOut io.Writer) error {
		if len(args) > 0 {
			return usageError("bench takes no arguments besides its flags, got %q", args)
		}
		if *size < benchHeader || *size > 4<<20 {
			return usageError("-size: want %d..%d bytes", benchHeader, 4<<20)
		}
		if *rate < 0 || *count < 0 || *duration <= 0 || *producers < 1 || *queues < 1 || *queues > 1024 || *drain < 0 {
			return usageError("-rate and -n must be 0 or more; -duration, -producers and -queues (up to 1024) more than 0")
		}
		addr, err := tf.serverAddr()
		if err != nil {
			return err
		}
		dataGiven := false
		fs.Visit(func(f *flag.Flag) { dataGiven = dataGiven || f.Name == "data" || f.Name == "config" })
		if addr == "" && !dataGiven {
			return usageError("bench needs -server ADDRESS (or $%s), or -data DIR to run in-process", serverEnv)
		}
		b, err := tf.open(ctx, create, func(c *config) { c.broker.NoAutoCreateTopics = true })
		if err != nil {
			return err
		}
		defer b.Close()
		if _, err := b.Topic(ctx, *topic); errors.Is(err, mq.ErrTopicNotExist) {
			cfg := edge.TopicConfig{Name: *topic, ReadQueues: int32(*queues), WriteQueues: int32(*queues), Perm: mq.PermRead | mq.PermWrite}
			if err := b.CreateTopic(ctx, cfg); err != nil && !errors.Is(err, edge.ErrTopicExists) {
				return err
			}
		} else if err != nil {
			return err
		}
		r := &benchRun{b: b, topic: *topic, group: *group, size: *size, rate: *rate, count: *count,
			duration: *duration, producers: *producers, drain: *drain, id: rand.Uint64()}
		if f, ok := errOut.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				r.progress = errOut
			}
		}
		rep, err := r.run(ctx)
		if err != nil {
			return err
		}
		if *jsonOut {
			return writeJSON(out, rep)
		}
		return printBench(out, rep)
	}
}

// benchRun is one run of bench: producers, a consumer per queue, and the progress line,
// each a goroutine run owns and waits for.
type benchRun struct {
	b                        target
	topic, group             string
	size, rate, producers    int
	count                    int64
	duration, drain          time.Duration
	id                       uint64
	progress                 io.Writer // nil: no progress line
	sent, sendErrs, consumed atomic.Int64
	mu                       sync.Mutex // guards the latencies and firstErr
	sendLat, e2eLat          []time.Duration
	firstErr                 error
}

func (r *benchRun) fail(err error) {
	r.mu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
}

func (r *benchRun) run(ctx context.Context) (benchJSON, error) {
	route, err := r.b.Route(ctx, r.topic)
	if err != nil {
		return benchJSON{}, err
	}
	qs := route.ReadQueues()
	starts := make([]int64, len(qs))
	for i, q := range qs {
		if starts[i], err = r.b.MaxOffset(ctx, q); err != nil {
			return benchJSON{}, err
		}
	}

	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers sync.WaitGroup
	for i, q := range qs {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			r.consume(cctx, q, starts[i])
		}()
	}

	start := time.Now()
	end := start.Add(r.duration)
	var producers sync.WaitGroup
	var budget atomic.Int64 // messages left to send with -n
	budget.Store(r.count)
	for p := range r.producers {
		producers.Add(1)
		go func() {
			defer producers.Done()
			r.produce(ctx, p, &budget, start, end)
		}()
	}

	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	if r.progress != nil {
		progress.Add(1)
		go func() {
			defer progress.Done()
			r.showProgress(progressDone, start)
		}()
	}

	producers.Wait()
	sendTime := time.Since(start)
	// Drain: wait for the consumers to catch up with what was acknowledged.
	deadline := time.Now().Add(r.drain)
	for ctx.Err() == nil && r.consumed.Load() < r.sent.Load() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	consumeTime := time.Since(start)
	stopConsumers()
	consumers.Wait()
	close(progressDone)
	progress.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstErr != nil && r.sent.Load() == 0 {
		return benchJSON{}, r.firstErr
	}
	rep := benchJSON{Topic: r.topic, Size: r.size, Sent: r.sent.Load(), SendErrors: r.sendErrs.Load(), Consumed: r.consumed.Load(),
		SendSeconds: sendTime.Seconds(), ConsumeSeconds: consumeTime.Seconds(), Interrupted: ctx.Err() != nil,
		SendLatency: percentiles(r.sendLat), EndToEndLatency: percentiles(r.e2eLat)}
	if r.firstErr != nil {
		rep.FirstError = r.firstErr.Error()
	}
	rep.SentPerSec = float64(rep.Sent) / max(sendTime.Seconds(), 1e-9)
	rep.ConsumedPerSec = float64(rep.Consumed) / max(consumeTime.Seconds(), 1e-9)
	return rep, nil
}

// produce sends until end, ctx ends or the budget (with -n) is spent, pacing itself to its
// share of -rate. (Its sends are bounded by ctx alone: a deadline that cut a send short
// would close the connection that the consumers share.)
func (r *benchRun) produce(ctx context.Context, p int, budget *atomic.Int64, start, end time.Time) {
	var interval time.Duration
	if r.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(r.producers) / float64(r.rate))
	}
	body := make([]byte, r.size)
	for i := range body[benchHeader:] {
		body[benchHeader+i] = 'a' + byte(i%26)
	}
	binary.LittleEndian.PutUint64(body, r.id)
	var lat []time.Duration
	defer func() {
		r.mu.Lock()
		r.sendLat = append(r.sendLat, lat...)
		r.mu.Unlock()
	}()
	next := start.Add(time.Duration(p) * interval / time.Duration(r.producers))
	pc := pace.New() // time.After would wait a millisecond at least, and send in bursts
	defer pc.Close()
	for ctx.Err() == nil && time.Now().Before(end) {
		if r.count > 0 && budget.Add(-1) < 0 {
			return
		}
		if interval > 0 {
			if next.After(end) {
				return
			}
			if pc.Wait(ctx, next) != nil {
				return
			}
			next = next.Add(interval)
		}
		t := time.Now()
		binary.LittleEndian.PutUint64(body[8:], uint64(t.UnixNano()))
		_, err := r.b.Send(ctx, &mq.Message{Topic: r.topic, Body: body}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.sendErrs.Add(1)
			r.fail(err)
			continue
		}
		lat = append(lat, time.Since(t))
		r.sent.Add(1)
	}
}

// consume pulls q from offset until ctx ends, counting this run's messages.
func (r *benchRun) consume(ctx context.Context, q mq.MessageQueue, offset int64) {
	var lat []time.Duration
	defer func() {
		r.mu.Lock()
		r.e2eLat = append(r.e2eLat, lat...)
		r.mu.Unlock()
	}()
	for ctx.Err() == nil {
		res, err := r.b.Pull(ctx, mq.PullRequest{Group: r.group, Queue: q, Offset: offset, MaxMsgs: 32, Filter: "*",
			Suspend: true, MaxWait: time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.fail(err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		now := time.Now()
		for i := range res.Messages {
			m := &res.Messages[i]
			if len(m.Body) < benchHeader || binary.LittleEndian.Uint64(m.Body) != r.id {
				continue
			}
			lat = append(lat, now.Sub(time.Unix(0, int64(binary.LittleEndian.Uint64(m.Body[8:])))))
			r.consumed.Add(1)
		}
		if res.NextBeginOffset > offset {
			offset = res.NextBeginOffset
		}
	}
}

// showProgress rewrites one line on the terminal every half second until done.
func (r *benchRun) showProgress(done <-chan struct{}, start time.Time) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var lastSent, lastCons int64
	last := start
	for {
		select {
		case <-done:
			fmt.Fprint(r.progress, "\r\033[K")
			return
		case now := <-t.C:
			s, c := r.sent.Load(), r.consumed.Load()
			d := now.Sub(last).Seconds()
			fmt.Fprintf(r.progress, "\r\033[K%s  sent %s (%s/s)  consumed %s (%s/s)  errors %d",
				humanDuration(now.Sub(start).Round(100*time.Millisecond)), humanCount(s), humanCount(int64(float64(s-lastSent)/d)),
				humanCount(c), humanCount(int64(float64(c-lastCons)/d)), r.sendErrs.Load())
			lastSent, lastCons, last = s, c, now
		}
	}
}

// percentiles returns p50, p99, p99.9 and max of ds in microseconds (none when ds is empty).
func percentiles(ds []time.Duration) map[string]float64 {
	out := map[string]float64{}
	if len(ds) == 0 {
		return out
	}
	slices.Sort(ds)
	for _, p := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}, {"max", 1}} {
		i := min(int(p.p*float64(len(ds))), len(ds)-1)
		out[p.name] = float64(ds[i]) / float64(time.Microsecond)
	}
	return out
}

func printBench(out io.Writer, rep benchJSON) error {
	if rep.Interrupted {
		fmt.Fprintln(out, "interrupted: the figures cover what was done until then")
	}
	fmt.Fprintf(out, "sent      %s messages of %s in %s: %s msgs/s (%d errors)\n", humanCount(rep.Sent), humanBytes(int64(rep.Size)),
		humanDuration(time.Duration(rep.SendSeconds*float64(time.Second))), humanCount(int64(rep.SentPerSec)), rep.SendErrors)
	fmt.Fprintf(out, "consumed  %s messages in %s: %s msgs/s\n", humanCount(rep.Consumed),
		humanDuration(time.Duration(rep.ConsumeSeconds*float64(time.Second))), humanCount(int64(rep.ConsumedPerSec)))
	if rep.FirstError != "" {
		fmt.Fprintf(out, "first error: %s\n", rep.FirstError)
	}
	for _, l := range []struct {
		name string
		m    map[string]float64
	}{{"send latency ", rep.SendLatency}, {"end-to-end   ", rep.EndToEndLatency}} {
		if len(l.m) == 0 {
			fmt.Fprintf(out, "%s -\n", l.name)
			continue
		}
		us := func(k string) string { return humanDuration(time.Duration(l.m[k] * float64(time.Microsecond))) }
		fmt.Fprintf(out, "%s p50 %s  p99 %s  p99.9 %s  max %s\n", l.name, us("p50"), us("p99"), us("p99.9"), us("max"))
	}
	return nil
}
