package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

var topicVerbs = []verb{
	{"list", "list the topics and their messages"},
	{"create", "create topic -name: -read and -write queues, -perm, -order"},
	{"update", "replace the settings of topic -name, as create sets them"},
	{"delete", "delete topic -name (its messages stay until retention removes them)"},
}

const topicDoc = `
Examples:
  edgemq topic list -data ./data
  edgemq topic create -name Orders -read 8 -write 8 -order
  edgemq topic delete -name Orders`

// openBroker opens the broker of the config's data dir.
func (c *config) openBroker() (*edge.Broker, error) {
	return edge.Open(c.dataDir, c.options())
}

func topicCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	name := fs.String("name", "", "topic `name` (create, update, delete)")
	read := fs.Int("read", 0, "read queue `count`: queues consumers read (create: 0 is broker.default_queues)")
	write := fs.Int("write", 0, "write queue `count`: queues producers write (create: 0 is broker.default_queues)")
	perm := fs.String("perm", "rw", "`permission`: rw, r (no sends) or w (no pulls)")
	order := fs.Bool("order", false, "ordered topic: producers pick queues by sharding key")
	return func(_ context.Context, args []string, out, _ io.Writer) error {
		verb := args[0]
		if verb != "list" && *name == "" {
			return usageError("topic %s needs -name", verb)
		}
		if *read < 0 || *write < 0 || *read > 1024 || *write > 1024 {
			return usageError("-read and -write: want 0..1024")
		}
		p, err := parsePerm(*perm)
		if err != nil {
			return err
		}
		c, err := load()
		if err != nil {
			return err
		}
		b, err := c.openBroker()
		if err != nil {
			return err
		}
		defer b.Close()
		switch verb {
		case "list":
			return listTopics(b, out)
		case "create":
			return b.CreateTopic(edge.TopicConfig{Name: *name, ReadQueues: int32(*read), WriteQueues: int32(*write), Perm: p, Order: *order})
		case "update":
			return b.UpdateTopic(edge.TopicConfig{Name: *name, ReadQueues: int32(*read), WriteQueues: int32(*write), Perm: p, Order: *order})
		case "delete":
			if _, err := b.Topic(*name); err != nil {
				return topicError(err, *name)
			}
			return b.DeleteTopic(*name)
		}
		return usageError("unknown verb %q", verb)
	}
}

// topicError explains a missing topic.
func topicError(err error, name string) error {
	if errors.Is(err, mq.ErrTopicNotExist) {
		return fmt.Errorf("topic %q does not exist (edgemq topic list shows the topics)", name)
	}
	return err
}

func parsePerm(s string) (int32, error) {
	p := int32(0)
	for _, c := range s {
		switch c {
		case 'r':
			p |= mq.PermRead
		case 'w':
			p |= mq.PermWrite
		default:
			return 0, usageError("-perm %q: want rw, r or w", s)
		}
	}
	if p == 0 {
		return 0, usageError("-perm %q: want rw, r or w", s)
	}
	return p, nil
}

func permString(p int32) string {
	s := ""
	if p&mq.PermRead != 0 {
		s += "r"
	}
	if p&mq.PermWrite != 0 {
		s += "w"
	}
	if s == "" {
		s = "-"
	}
	return s
}

func listTopics(b *edge.Broker, out io.Writer) error {
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
}

var offsetVerbs = []verb{
	{"show", "show -group's offsets and lag on -topic"},
	{"reset", "move -group's offsets on -topic -to first, last, or a time"},
}

const offsetDoc = `
Examples:
  edgemq offset show -group billing -topic Orders
  edgemq offset reset -group billing -topic Orders -to 2026-11-30T08:00:00Z

A group's consumers should be stopped while its offsets are reset, or they will commit
their old positions again.`

func offsetCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	group := fs.String("group", "", "consumer `group` (required)")
	topic := fs.String("topic", "", "`topic` (required)")
	to := fs.String("to", "", "reset target: first, last, or a time (RFC 3339, e.g. 2026-11-30T08:00:00Z)")
	return func(_ context.Context, args []string, out, _ io.Writer) error {
		if *group == "" || *topic == "" {
			return usageError("offset %s needs -group and -topic", args[0])
		}
		c, err := load()
		if err != nil {
			return err
		}
		switch args[0] {
		case "show":
			b, err := c.openBroker()
			if err != nil {
				return err
			}
			defer b.Close()
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
					return usageError("-to %q: want first, last or an RFC 3339 time such as 2026-11-30T08:00:00Z", *to)
				}
				where, at = edge.ResetToTimestamp, t
			}
			b, err := c.openBroker()
			if err != nil {
				return err
			}
			defer b.Close()
			if _, err := b.Topic(*topic); err != nil {
				return topicError(err, *topic)
			}
			if _, err := b.ResetOffsets(*group, *topic, where, at); err != nil {
				return err
			}
			return printLag(b, out, *group, *topic)
		}
		return usageError("unknown verb %q", args[0])
	}
}

// printLag prints group's offsets and lag on each queue of topic.
func printLag(b *edge.Broker, out io.Writer, group, topic string) error {
	lags, err := b.Lag(group, topic)
	if err != nil {
		return topicError(err, topic)
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

func statsCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	topic := fs.String("topic", "", "only this `topic`")
	group := fs.String("group", "", "show this `group`'s lag on -topic instead")
	return func(_ context.Context, args []string, out, _ io.Writer) error {
		if len(args) > 0 {
			return usageError("stats takes no arguments besides its flags, got %q", args)
		}
		if *group != "" && *topic == "" {
			return usageError("-group needs -topic")
		}
		c, err := load()
		if err != nil {
			return err
		}
		b, err := c.openBroker()
		if err != nil {
			return err
		}
		defer b.Close()
		if *group != "" {
			return printLag(b, out, *group, *topic)
		}
		if *topic != "" {
			if _, err := b.Topic(*topic); err != nil {
				return topicError(err, *topic)
			}
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
