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
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

const consumeDoc = `
Pulls every read queue of -topic for -group from the group's offsets, prints the messages,
and commits the offsets as it goes: run it again and it goes on where it stopped. It stops
after -n messages, or once the topic has been idle for -wait. The count of messages goes to
stderr.

Examples:
  edgemq consume -topic Orders -group billing
  edgemq consume -topic Orders -group billing -filter "new || paid" -json`

func consumeCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	topic := fs.String("topic", "", "`topic` to consume (required)")
	group := fs.String("group", "edgemq-cli", "consumer `group`: its offsets are read and committed")
	filter := fs.String("filter", "*", "tag `expression`: *, A, A || B")
	from := fs.String("from", "stored", "where a queue without a stored offset starts: stored (then first), first, last")
	limit := fs.Int("n", 0, "stop after this many messages (0: no limit)")
	wait := fs.Duration("wait", 2*time.Second, "stop once the topic has been idle this long")
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
		c, err := load()
		if err != nil {
			return err
		}
		b, err := c.openBroker(readWrite)
		if err != nil {
			return err
		}
		defer b.Close()
		cfg, err := b.Topic(*topic)
		if err != nil {
			return topicError(err, *topic)
		}
		p := &printer{w: bufio.NewWriter(out), asJSON: *jsonOut, limit: *limit}
		queues := make([]mq.MessageQueue, cfg.ReadQueues)
		offsets := make([]int64, cfg.ReadQueues)
		for i := range queues {
			queues[i] = mq.MessageQueue{Topic: *topic, QueueID: int32(i)}
			if offsets[i], err = startOffset(ctx, b, *group, queues[i], *from); err != nil {
				return err
			}
		}
		idle := time.Now()
		for time.Since(idle) < *wait && !p.full() {
			got := false
			for i, q := range queues {
				res, err := b.Pull(ctx, mq.PullRequest{Group: *group, Queue: q, Offset: offsets[i],
					MaxMsgs: 32, Filter: *filter, Suspend: true, MaxWait: 100 * time.Millisecond})
				if err != nil {
					return err
				}
				n, err := p.print(res.Messages)
				if err != nil {
					return err
				}
				got = got || n > 0
				if n < len(res.Messages) {
					offsets[i] = res.Messages[n].QueueOffset // the limit stopped us here
				} else {
					offsets[i] = res.NextBeginOffset
				}
				if err := b.CommitOffset(ctx, *group, q, offsets[i]); err != nil {
					return err
				}
			}
			if got {
				idle = time.Now()
			}
		}
		fmt.Fprintf(errOut, "%d messages\n", p.count())
		return nil
	}
}

// startOffset returns where the group reads queue q: its stored offset, or from tells.
func startOffset(ctx context.Context, b *edge.Broker, group string, q mq.MessageQueue, from string) (int64, error) {
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
