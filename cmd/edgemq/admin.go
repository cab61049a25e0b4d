package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// openBroker opens the broker of the config's data dir.
func openBroker(load func() (*config, error)) (*edge.Broker, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	return edge.Open(c.dataDir, c.options())
}

func verifyCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	return func(args []string, out io.Writer) error {
		c, err := load()
		if err != nil {
			return err
		}
		so := c.store
		so.Logger = c.options().Logger
		st, err := store.Open(c.dataDir, &so)
		if err != nil {
			return err
		}
		defer st.Close()
		log := st.Log()
		r := log.NewReader()
		defer r.Close()
		var records, corrupt int
		for pos := log.MinPos(); ; {
			rec, err := r.Next(pos)
			if errors.Is(err, commitlog.ErrNoRecord) {
				break
			}
			if err != nil {
				var ce *commitlog.CorruptError
				if !errors.As(err, &ce) {
					return err
				}
				fmt.Fprintf(out, "corrupt: %v\n", err)
				corrupt++
				// Skip to the next segment: the frame length is not trustworthy.
				pos = pos - pos%log.SegmentSize() + log.SegmentSize()
				continue
			}
			records++
			pos = rec.Next
		}
		fmt.Fprintf(out, "commitlog: %d records in %d bytes of segments, positions %d..%d\n", records, log.Size(), log.MinPos(), log.Written())
		var entries, damaged int64
		queues := st.Queues("")
		sort.Slice(queues, func(i, j int) bool {
			if queues[i].Topic != queues[j].Topic {
				return queues[i].Topic < queues[j].Topic
			}
			return queues[i].QueueID < queues[j].QueueID
		})
		for _, q := range queues {
			for off := q.MinOffset; off < q.MaxOffset; {
				res, err := st.GetMessages(q.Topic, q.QueueID, off, 256, nil)
				if err != nil {
					return err
				}
				entries += int64(len(res.Messages))
				if next := off + int64(len(res.Messages)); res.NextBeginOffset > next {
					damaged += res.NextBeginOffset - next
				}
				if res.NextBeginOffset <= off {
					break
				}
				off = res.NextBeginOffset
			}
		}
		fmt.Fprintf(out, "consume queues: %d queues, %d messages readable, %d entries unreadable\n", len(queues), entries, damaged)
		if corrupt > 0 || damaged > 0 {
			return fmt.Errorf("damage found: %d corrupt records, %d unreadable queue entries (details in the log above)", corrupt, damaged)
		}
		fmt.Fprintln(out, "ok")
		return nil
	}
}

func topicCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	name := fs.String("name", "", "topic `name` (create, update, delete)")
	read := fs.Int("read", 0, "read queue `count` (0: default_queues)")
	write := fs.Int("write", 0, "write queue `count` (0: default_queues)")
	perm := fs.String("perm", "rw", "permission: rw, r or w")
	order := fs.Bool("order", false, "ordered topic")
	return func(args []string, out io.Writer) error {
		if len(args) != 1 {
			return fmt.Errorf("%w: want one of list, create, update, delete", errUsage)
		}
		b, err := openBroker(load)
		if err != nil {
			return err
		}
		defer b.Close()
		p := int32(0)
		for _, c := range *perm {
			switch c {
			case 'r':
				p |= mq.PermRead
			case 'w':
				p |= mq.PermWrite
			default:
				return fmt.Errorf("%w: -perm %q: use r, w or rw", errUsage, *perm)
			}
		}
		cfg := edge.TopicConfig{Name: *name, ReadQueues: int32(*read), WriteQueues: int32(*write), Perm: p, Order: *order}
		switch args[0] {
		case "list":
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tREAD\tWRITE\tPERM\tORDER\tMESSAGES IN")
			for _, t := range b.Topics() {
				qs, err := b.Queues(t.Name)
				if err != nil {
					return err
				}
				var n int64
				for _, q := range qs {
					n += q.MaxOffset - q.MinOffset
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%v\t%d\n", t.Name, t.ReadQueues, t.WriteQueues, permString(t.Perm), t.Order, n)
			}
			return tw.Flush()
		case "create":
			return b.CreateTopic(cfg)
		case "update":
			return b.UpdateTopic(cfg)
		case "delete":
			return b.DeleteTopic(*name)
		}
		return fmt.Errorf("%w: unknown topic action %q", errUsage, args[0])
	}
}

func permString(p int32) string {
	s := ""
	if p&mq.PermRead != 0 {
		s += "r"
	}
	if p&mq.PermWrite != 0 {
		s += "w"
	}
	return s
}

func sendCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	topic := fs.String("topic", "", "topic to send to (required)")
	tags := fs.String("tags", "", "message tag")
	keys := fs.String("keys", "", "message keys")
	delay := fs.Int("delay", 0, "delay `level` (1..18: 1s 5s 10s 30s 1m ... 2h)")
	queue := fs.Int("queue", -1, "queue `id` (default: round robin)")
	key := fs.String("key", "", "sharding `key`: messages with one key go to one queue")
	inflight := fs.Int("inflight", 1024, "sends in flight at once, sharing fsyncs (`n`; 1: wait for each)")
	return func(args []string, out io.Writer) (err error) {
		if *topic == "" {
			return fmt.Errorf("%w: -topic is required", errUsage)
		}
		if *inflight < 1 {
			return fmt.Errorf("%w: -inflight must be at least 1", errUsage)
		}
		b, err := openBroker(load)
		if err != nil {
			return err
		}
		defer b.Close()
		var sel mq.QueueSelector
		switch {
		case *queue >= 0:
			sel = mq.QueueIndex(*queue)
		case *key != "":
			sel = mq.ShardingKey(*key)
		}
		w := newSendWindow(*inflight, out)
		defer func() { err = cmp.Or(err, w.wait()) }()
		send := func(body string) error {
			m := &mq.Message{Topic: *topic, Tags: *tags, Keys: *keys, Body: []byte(body)}
			m.SetDelayLevel(*delay)
			return w.send(b, m, sel)
		}
		if len(args) > 0 {
			for _, a := range args {
				if err := send(a); err != nil {
					return err
				}
			}
			return nil
		}
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			if err := send(sc.Text()); err != nil {
				return err
			}
		}
		return sc.Err()
	}
}

// sendWindow keeps up to n Broker.SendAsync calls in flight and prints each result as it is
// acknowledged (in the order the messages were stored).
type sendWindow struct {
	slots chan struct{}
	out   io.Writer
	mu    sync.Mutex // guards err and out
	err   error      // the first failed acknowledgement
}

func newSendWindow(n int, out io.Writer) *sendWindow {
	return &sendWindow{slots: make(chan struct{}, n), out: out}
}

// send sends m once a slot is free; it returns the error of a refused send, or of an earlier
// send whose acknowledgement failed.
func (w *sendWindow) send(b *edge.Broker, m *mq.Message, sel mq.QueueSelector) error {
	w.slots <- struct{}{}
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err == nil {
		err = b.SendAsync(context.Background(), m, sel, w.done)
	}
	if err != nil {
		<-w.slots
	}
	return err
}

func (w *sendWindow) done(res mq.SendResult, err error) {
	w.mu.Lock()
	if err != nil {
		w.err = cmp.Or(w.err, err)
	} else {
		fmt.Fprintf(w.out, "%s queue=%d offset=%d\n", res.MsgID(), res.Queue.QueueID, res.QueueOffset)
	}
	w.mu.Unlock()
	<-w.slots
}

// wait waits for every send in flight and returns the first failed acknowledgement.
func (w *sendWindow) wait() error {
	for range cap(w.slots) {
		w.slots <- struct{}{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func consumeCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	topic := fs.String("topic", "", "topic to consume (required)")
	group := fs.String("group", "edgemq-cli", "consumer `group`: its offsets are read and committed")
	filter := fs.String("filter", "*", "tag expression: *, A, A || B")
	from := fs.String("from", "stored", "where to start without a stored offset: stored (else first), first, last")
	limit := fs.Int("n", 0, "stop after this many messages (0: no limit)")
	wait := fs.Duration("wait", 2*time.Second, "stop after the topic has been idle this long")
	return func(args []string, out io.Writer) error {
		if *topic == "" {
			return fmt.Errorf("%w: -topic is required", errUsage)
		}
		b, err := openBroker(load)
		if err != nil {
			return err
		}
		defer b.Close()
		ctx := context.Background()
		cfg, err := b.Topic(*topic)
		if err != nil {
			return err
		}
		offsets := make([]int64, cfg.ReadQueues)
		for q := range offsets {
			queue := mq.MessageQueue{Topic: *topic, QueueID: int32(q)}
			var off int64
			switch *from {
			case "first":
				off, err = b.MinOffset(ctx, queue)
			case "last":
				off, err = b.MaxOffset(ctx, queue)
			case "stored":
				if off, err = b.QueryOffset(ctx, *group, queue); errors.Is(err, mq.ErrOffsetNotFound) {
					off, err = b.MinOffset(ctx, queue)
				}
			default:
				return fmt.Errorf("%w: -from %q", errUsage, *from)
			}
			if err != nil {
				return err
			}
			offsets[q] = off
		}
		n := 0
		idle := time.Now()
		for time.Since(idle) < *wait && (*limit == 0 || n < *limit) {
			got := false
			for q := range offsets {
				queue := mq.MessageQueue{Topic: *topic, QueueID: int32(q)}
				res, err := b.Pull(ctx, mq.PullRequest{Group: *group, Queue: queue,
					Offset: offsets[q], MaxMsgs: 32, Filter: *filter, Suspend: true, MaxWait: 100 * time.Millisecond})
				if err != nil {
					return err
				}
				for _, m := range res.Messages {
					if *limit > 0 && n >= *limit {
						break
					}
					fmt.Fprintf(out, "%s queue=%d offset=%d tags=%q keys=%q %s\n", m.MsgID(), m.QueueID, m.QueueOffset, m.Tags, m.Keys, printable(m.Body))
					n++
					offsets[q] = m.QueueOffset + 1
					got = true
				}
				if res.Status != mq.PullFound {
					offsets[q] = res.NextBeginOffset
				}
				if err := b.CommitOffset(ctx, *group, queue, offsets[q]); err != nil {
					return err
				}
			}
			if got {
				idle = time.Now()
			}
		}
		fmt.Fprintf(os.Stderr, "%d messages\n", n)
		return nil
	}
}

func printable(b []byte) string {
	s := string(b)
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0xFFFD }) {
		return fmt.Sprintf("(%d bytes) %q", len(b), b)
	}
	return s
}

func offsetCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	group := fs.String("group", "", "consumer `group` (required)")
	topic := fs.String("topic", "", "topic (required)")
	to := fs.String("to", "", "reset target: first, last, or a time (RFC 3339, e.g. 2026-11-30T08:00:00Z)")
	return func(args []string, out io.Writer) error {
		if len(args) != 1 || *group == "" || *topic == "" {
			return fmt.Errorf("%w: want show or reset, with -group and -topic", errUsage)
		}
		b, err := openBroker(load)
		if err != nil {
			return err
		}
		defer b.Close()
		switch args[0] {
		case "show":
			return printLag(b, out, *group, *topic)
		case "reset":
			where, at := edge.ResetToFirst, time.Time{}
			switch *to {
			case "first":
			case "last":
				where = edge.ResetToLast
			default:
				t, err := time.Parse(time.RFC3339, *to)
				if err != nil {
					return fmt.Errorf("%w: -to %q: want first, last or an RFC 3339 time", errUsage, *to)
				}
				where, at = edge.ResetToTimestamp, t
			}
			if _, err := b.ResetOffsets(*group, *topic, where, at); err != nil {
				return err
			}
			return printLag(b, out, *group, *topic)
		}
		return fmt.Errorf("%w: unknown offset action %q", errUsage, args[0])
	}
}

func printLag(b *edge.Broker, out io.Writer, group, topic string) error {
	lags, err := b.Lag(group, topic)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tMIN\tMAX\tCONSUMER OFFSET\tLAG")
	for _, l := range lags {
		co := "-"
		if l.ConsumerOffset >= 0 {
			co = fmt.Sprint(l.ConsumerOffset)
		}
		minOff, err := b.MinOffset(context.Background(), mq.MessageQueue{Topic: topic, QueueID: l.QueueID})
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\n", l.QueueID, minOff, l.MaxOffset, co, l.Lag)
	}
	return tw.Flush()
}

func statsCommand(fs *flag.FlagSet) func([]string, io.Writer) error {
	load := commonFlags(fs)
	topic := fs.String("topic", "", "only this topic")
	group := fs.String("group", "", "show this group's lag on -topic")
	return func(args []string, out io.Writer) error {
		b, err := openBroker(load)
		if err != nil {
			return err
		}
		defer b.Close()
		if *group != "" {
			if *topic == "" {
				return fmt.Errorf("%w: -group needs -topic", errUsage)
			}
			return printLag(b, out, *group, *topic)
		}
		qs, err := b.Queues(*topic)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tQUEUE\tMIN\tMAX")
		for _, q := range qs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", q.Topic, q.QueueID, q.MinOffset, q.MaxOffset)
		}
		ss, err := b.StoreStats()
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "\ncommitlog\t%d bytes\tpositions %d..%d\n", ss.SegmentBytes, ss.MinPos, ss.MaxPos)
		return tw.Flush()
	}
}
