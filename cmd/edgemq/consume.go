package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

const consumeDoc = `
Pulls every read queue of -topic for -group from the group's offsets, prints the messages,
and commits the offsets as it goes: run it again and it goes on where it stopped. It stops
after -n messages, once the topic has been idle for -wait, or with -f only at Ctrl-C (the
offsets of what was printed are saved; a second Ctrl-C quits at once). The count of
messages goes to stderr.

Examples:
  edgemq consume -topic Orders -group billing
  edgemq consume -topic Orders -group billing -f -filter "new || paid" -json`

func consumeCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	topic := fs.String("topic", "", "`topic` to consume (required)")
	group := fs.String("group", "edgemq-cli", "consumer `group`: its offsets are read and committed")
	filter := fs.String("filter", "*", "tag `expression`: *, A, A || B")
	from := fs.String("from", "stored", "where a queue without a stored offset starts: stored (then first), first, last")
	limit := fs.Int("n", 0, "stop after this many messages (0: no limit)")
	wait := fs.Duration("wait", 2*time.Second, "stop once the topic has been idle this long")
	follow := fs.Bool("f", false, "follow: wait for new messages until interrupted (Ctrl-C), ignoring -wait")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, errOut io.Writer) error {
		if len(args) > 0 {
			return usageError("consume takes no arguments besides its flags, got %q", args)
		}
		if *topic == "" {
			return usageError("-topic is required")
		}
		if *limit < 0 || *wait <= 0 {
			return usageError("-n must be 0 or more, -wait more than 0")
		}
		if _, err := mq.ParseTagFilter(*filter); err != nil {
			return usageError("-filter %q: %v", *filter, err)
		}
		if err := mq.ValidateGroup(*group); err != nil {
			return usageError("-group %q: %v", *group, err)
		}
		switch *from {
		case "stored", "first", "last":
		default:
			return usageError("-from %q: want stored, first or last", *from)
		}
		b, err := tf.open(ctx, readWrite, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		if _, err := b.Topic(ctx, *topic); err != nil {
			return topicError(err, *topic)
		}
		route, err := b.Route(ctx, *topic)
		if err != nil {
			return topicError(err, *topic)
		}
		p := &printer{w: bufio.NewWriter(out), asJSON: *jsonOut, limit: *limit}
		cs := &consumeSession{b: b, group: *group, filter: *filter, p: p, start: time.Now()}
		queues := route.ReadQueues()
		offsets := make([]int64, len(queues))
		for i := range queues {
			if offsets[i], err = startOffset(ctx, b, *group, queues[i], *from); err != nil {
				return err
			}
			// The group starts here, also on a queue that stays empty: the next run goes on
			// from where this one started (-from last included).
			if err := b.CommitOffset(ctx, *group, queues[i], offsets[i]); err != nil {
				return err
			}
		}

		pctx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		errs := make([]error, len(queues))
		for i := range queues {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = cs.pullQueue(pctx, queues[i], offsets[i]); errs[i] != nil || p.full() {
					stop()
				}
			}()
		}
		if *follow {
			<-pctx.Done()
		} else {
			tick := time.NewTicker(min(*wait/4, 100*time.Millisecond))
			for pctx.Err() == nil && cs.idle() < *wait {
				select {
				case <-pctx.Done():
				case <-tick.C:
				}
			}
			tick.Stop()
		}
		if ctx.Err() != nil {
			stopping()
		}
		stop()
		wg.Wait()
		fmt.Fprintf(errOut, "%d messages\n", p.count())
		return errors.Join(errs...)
	}
}

// startOffset returns where the group reads queue q: its stored offset, or from tells.
func startOffset(ctx context.Context, b target, group string, q mq.MessageQueue, from string) (int64, error) {
	switch from {
	case "first":
		return b.MinOffset(ctx, q)
	case "last":
		return b.MaxOffset(ctx, q)
	}
	off, err := b.QueryOffset(ctx, group, q)
	if errors.Is(err, mq.ErrOffsetNotFound) {
		return b.MinOffset(ctx, q)
	}
	return off, err
}

// consumeSession is one run of consume: a goroutine per queue pulls (pullQueue) and prints
// through p.
type consumeSession struct {
	b          target
	group      string
	filter     string
	p          *printer
	start      time.Time    // when the session started
	lastActive atomic.Int64 // when it last printed a message: ns since start (monotonic)
}

// active records that cs printed messages now.
func (cs *consumeSession) active() { cs.lastActive.Store(int64(time.Since(cs.start))) }

// idle returns how long cs has printed nothing (since its start, at first). Both readings
// are on the monotonic clock: a step of the wall clock neither ends nor extends the wait.
func (cs *consumeSession) idle() time.Duration {
	return time.Since(cs.start) - time.Duration(cs.lastActive.Load())
}

// pullQueue pulls q from offset until ctx ends or the printer is full, committing the offset
// of what it printed after each batch. It returns nil when ctx ends.
func (cs *consumeSession) pullQueue(ctx context.Context, q mq.MessageQueue, offset int64) error {
	for ctx.Err() == nil && !cs.p.full() {
		res, err := cs.b.Pull(ctx, mq.PullRequest{Group: cs.group, Queue: q, Offset: offset,
			MaxMsgs: 32, Filter: cs.filter, Suspend: true})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n, err := cs.p.print(res.Messages)
		if err != nil {
			return err
		}
		if n > 0 {
			cs.active()
		}
		if n < len(res.Messages) {
			offset = res.Messages[n].QueueOffset // the limit stopped us here
		} else {
			offset = res.NextBeginOffset
		}
		// Committed in the broker's memory; it persists them at Close (or, a server, on its
		// own schedule). Not bounded by ctx: what was printed is committed.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cs.b.CommitOffset(cctx, cs.group, q, offset)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// printer prints messages for several goroutines, up to a limit.
type printer struct {
	mu     sync.Mutex // guards all below
	w      *bufio.Writer
	asJSON bool
	limit  int // 0: none
	n      int
}

// print prints msgs, or the first of them that fit under the limit, and returns how many
// it printed.
func (p *printer) print(msgs []mq.MessageExt) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for ; i < len(msgs) && (p.limit == 0 || p.n < p.limit); i++ {
		m := &msgs[i]
		if p.asJSON {
			line, err := json.Marshal(newMessageJSON(m))
			if err != nil {
				return i, err
			}
			p.w.Write(append(line, '\n'))
		} else {
			fmt.Fprintf(p.w, "%s queue=%d offset=%d tags=%q keys=%q %s\n", m.MsgID(), m.QueueID, m.QueueOffset, m.Tags, m.Keys, printable(m.Body))
		}
		p.n++
	}
	return i, p.w.Flush()
}

func (p *printer) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit > 0 && p.n >= p.limit
}

func (p *printer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func printable(b []byte) string {
	s := string(b)
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0xFFFD }) {
		return fmt.Sprintf("(%d bytes) %q", len(b), b)
	}
	return s
}
