package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store/commitlog"
)

// demoCommand produces telemetry from a few goroutines into an embedded broker and consumes
// it with one long-polling puller per queue, committing offsets as RocketMQ consumers do;
// then it reports throughput, end-to-end latency percentiles and the group's lag.
func demoCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	producers := fs.Int("producers", 4, "producer goroutines")
	messages := fs.Int("messages", 200_000, "messages to produce in all")
	body := fs.Int("body", 100, "body `bytes` (at least 16)")
	topic := fs.String("topic", "Telemetry", "topic")
	queues := fs.Int("queues", 4, "queues of the topic, if it is created")
	flush := fs.String("flush", "", "flush policy, sync or async (default: the config's, else sync)")
	group := fs.String("group", "demo", "consumer group")
	return func(args []string, out io.Writer) error {
		if *producers < 1 || *messages < 1 || *body < 16 || *queues < 1 {
			return fmt.Errorf("%w: -producers, -messages and -queues must be positive, -body at least 16", errUsage)
		}
		c, err := load()
		if err != nil {
			return err
		}
		if *flush != "" {
			m, err := commitlog.ParseFlushMode(*flush)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			c.store.Flush = m
		}
		if c.broker.DefaultQueues == 0 {
			c.broker.DefaultQueues = int32(*queues)
		}
		b, err := edge.Open(c.dataDir, c.options())
		if err != nil {
			return err
		}
		defer b.Close()
		return runDemo(b, out, demoConfig{producers: *producers, messages: *messages, body: *body, topic: *topic, group: *group, flush: c.store.Flush})
	}
}

type demoConfig struct {
	producers, messages, body int
	topic, group              string
	flush                     commitlog.FlushMode
}

func runDemo(b *edge.Broker, out io.Writer, dc demoConfig) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := rand.Uint64() // tells this run's messages from those of earlier runs in the dir
	fmt.Fprintf(out, "EdgeMQ demo: %d producers send %d messages of %d bytes to %q (%s flush); one long-polling consumer per queue in group %q\n",
		dc.producers, dc.messages, dc.body, dc.topic, dc.flush, dc.group)

	// Make sure the topic exists before consumers look at it.
	if _, ok := b.Topic(dc.topic); !ok {
		if err := b.CreateTopic(edge.TopicConfig{Name: dc.topic}); err != nil {
			return err
		}
	}
	cfg, _ := b.Topic(dc.topic)

	var sent, received atomic.Int64
	latencies := make([][]time.Duration, cfg.ReadQueues)
	var cwg sync.WaitGroup
	errc := make(chan error, int(cfg.ReadQueues)+dc.producers)
	start := time.Now()
	for q := int32(0); q < cfg.ReadQueues; q++ {
		offset, err := b.QueryOffset(dc.group, dc.topic, q)
		if err != nil {
			offset = b.Store().MaxOffset(dc.topic, q) // a new group starts at the end
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			lat := make([]time.Duration, 0, dc.messages/int(cfg.ReadQueues)+16)
			defer func() { latencies[q] = lat }()
			for ctx.Err() == nil {
				res, err := b.Pull(ctx, edge.PullRequest{Group: dc.group, Topic: dc.topic, QueueID: q, Offset: offset,
					MaxMsgs: 32, Filter: "*", CommitOffset: offset, Suspend: true, MaxWait: 200 * time.Millisecond})
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("pull queue %d: %w", q, err)
					}
					return
				}
				now := time.Now()
				for _, m := range res.Messages {
					if len(m.Body) >= 16 && binary.BigEndian.Uint64(m.Body) == run {
						lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(m.Body[8:])))))
						received.Add(1)
					}
				}
				offset = res.NextBeginOffset
			}
			b.CommitOffset(dc.group, dc.topic, q, offset)
		}()
	}

	var pwg sync.WaitGroup
	for p := 0; p < dc.producers; p++ {
		n := dc.messages / dc.producers
		if p < dc.messages%dc.producers {
			n++
		}
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			payload := make([]byte, dc.body)
			for i := range payload[16:] {
				payload[16+i] = byte('a' + (p+i)%26)
			}
			for i := 0; i < n; i++ {
				m := &edge.Message{Topic: dc.topic, Tags: "temp", Keys: fmt.Sprintf("sensor-%d", p), Body: slices.Clone(payload)}
				binary.BigEndian.PutUint64(m.Body, run)
				binary.BigEndian.PutUint64(m.Body[8:], uint64(time.Now().UnixNano()))
				if _, err := b.Send(ctx, m, nil); err != nil {
					errc <- fmt.Errorf("send: %w", err)
					return
				}
				sent.Add(1)
			}
		}()
	}

	progress := newProgress(os.Stderr, int64(dc.messages))
	sendDone := make(chan struct{})
	go func() { pwg.Wait(); close(sendDone) }()
	var sendTime time.Duration
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Time{}
	for received.Load() < int64(dc.messages) {
		select {
		case err := <-errc:
			cancel()
			cwg.Wait()
			return err
		case <-sendDone:
			sendTime = time.Since(start)
			sendDone = nil
			deadline = time.Now().Add(30 * time.Second)
		case <-tick.C:
			progress.show(sent.Load(), received.Load())
			if !deadline.IsZero() && time.Now().After(deadline) {
				cancel()
				cwg.Wait()
				return fmt.Errorf("received %d of %d messages 30 s after the last send", received.Load(), dc.messages)
			}
		}
	}
	total := time.Since(start)
	if sendTime == 0 {
		<-sendDone
		sendTime = time.Since(start)
	}
	progress.show(sent.Load(), received.Load())
	progress.done()
	cancel()
	cwg.Wait()

	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	fmt.Fprintf(out, "\nproduced  %d messages in %v: %.0f msgs/s\n", sent.Load(), sendTime.Round(time.Millisecond), float64(sent.Load())/sendTime.Seconds())
	fmt.Fprintf(out, "consumed  %d messages in %v: %.0f msgs/s\n", received.Load(), total.Round(time.Millisecond), float64(received.Load())/total.Seconds())
	fmt.Fprintf(out, "latency   send to receive: p50 %v  p99 %v  p99.9 %v  max %v\n", pct(0.50), pct(0.99), pct(0.999), pct(1))
	fmt.Fprintln(out, "\nlag of group", dc.group)
	return printLag(b, out, dc.group, dc.topic)
}

// progress draws a bar on a terminal, or a line a second elsewhere.
type progress struct {
	w     io.Writer
	total int64
	tty   bool
	last  time.Time
}

func newProgress(f *os.File, total int64) *progress {
	fi, err := f.Stat()
	return &progress{w: f, total: total, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progress) show(sent, received int64) {
	if !p.tty {
		if time.Since(p.last) < time.Second {
			return
		}
		p.last = time.Now()
		fmt.Fprintf(p.w, "sent %d, received %d of %d\n", sent, received, p.total)
		return
	}
	const width = 40
	fill := int(received * width / max(p.total, 1))
	fmt.Fprintf(p.w, "\r[%s%s] sent %d  received %d / %d ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), sent, received, p.total)
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
