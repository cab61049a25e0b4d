package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

var topicVerbs = []verb{
	{"list", "list the topics and their messages (system topics too with -all)"},
	{"create", "create topic -name: -read and -write queues, -perm, -order, -durability"},
	{"update", "change the settings given of topic -name; the others stay as they are"},
	{"delete", "delete topic -name (its messages stay until retention removes them)"},
}

const topicDoc = `
Examples:
  edgemq topic list -data ./data
  edgemq topic create -name Orders -read 8 -write 8 -order
  edgemq topic create -name Telemetry -durability async
  edgemq topic update -name Orders -read 4     # still 8 write queues, still ordered
  edgemq topic delete -name Orders

topic list changes nothing in the data dir (after a crash, opening it recovers the store as
serve would), and fails if there is none; topic create makes one.
System topics (retry %RETRY%group, dead-letter %DLQ%group, the schedule topic of delayed
messages) are hidden unless -all.`

func topicCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	name := fs.String("name", "", "topic `name` (create, update, delete)")
	read := fs.Int("read", 0, "read queue `count`: queues consumers read (create: 0 is broker.default_queues)")
	write := fs.Int("write", 0, "write queue `count`: queues producers write (create: 0 is broker.default_queues)")
	perm := fs.String("perm", "rw", "`permission`: rw, r (no sends) or w (no pulls)")
	order := fs.Bool("order", false, "ordered topic: producers pick queues by sharding key (-order=false to unset)")
	durability := fs.String("durability", "default", "when a send returns: `sync` (once on disk), async (once written: "+
		"a power cut may lose the last store.flush_interval of sends), or default (store.flush)")
	all := fs.Bool("all", false, "list system topics too")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, _ io.Writer) error {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		verb := args[0]
		if verb != "list" && *name == "" {
			return usageError("topic %s needs -name", verb)
		}
		if *read < 0 || *write < 0 || *read > 1024 || *write > 1024 {
			return usageError("-read and -write: want 0..1024")
		}
		if verb == "update" && (given["read"] && *read == 0 || given["write"] && *write == 0) {
			return usageError("topic update: -read and -write must be at least 1")
		}
		p, err := parsePerm(*perm)
		if err != nil {
			return err
		}
		dur, err := store.ParseDurability(*durability)
		if err != nil {
			return usageError("-durability %q: want sync, async or default", *durability)
		}
		a := readWrite
		switch verb {
		case "list":
			a = readOnly
		case "create":
			a = create
		}
		b, err := tf.open(ctx, a, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		switch verb {
		case "list":
			return listTopics(ctx, b, out, *all, *jsonOut)
		case "create":
			return b.CreateTopic(ctx, edge.TopicConfig{Name: *name, ReadQueues: int32(*read), WriteQueues: int32(*write), Perm: p, Order: *order, Durability: dur})
		case "update":
			cfg, err := b.Topic(ctx, *name)
			if err != nil {
				return topicError(err, *name)
			}
			if given["read"] {
				cfg.ReadQueues = int32(*read)
			}
			if given["write"] {
				cfg.WriteQueues = int32(*write)
			}
			if given["perm"] {
				cfg.Perm = cfg.Perm&^(mq.PermRead|mq.PermWrite) | p
			}
			if given["order"] {
				cfg.Order = *order
			}
			if given["durability"] {
				cfg.Durability = dur
			}
			return b.UpdateTopic(ctx, cfg)
		case "delete":
			if _, err := b.Topic(ctx, *name); err != nil {
				return topicError(err, *name)
			}
			return b.DeleteTopic(ctx, *name)
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

// topicJSON is a topic as topic list -json prints it.
type topicJSON struct {
	Name        string `json:"name"`
	ReadQueues  int32  `json:"readQueues"`
	WriteQueues int32  `json:"writeQueues"`
	Perm        string `json:"perm"`
	Order       bool   `json:"order"`
	Durability  string `json:"durability"` // default, sync or async
	System      bool   `json:"system"`
	// Messages counts the messages still stored in its queues.
	Messages int64 `json:"messages"`
}

func listTopics(ctx context.Context, b target, out io.Writer, all, asJSON bool) error {
	list := []topicJSON{}
	topics, err := b.Topics(ctx)
	if err != nil {
		return err
	}
	for _, t := range topics {
		sys := b.IsSystemTopic(t.Name)
		if sys && !all {
			continue
		}
		qs, err := b.Queues(ctx, t.Name)
		if err != nil {
			return err
		}
		var n int64
		for _, q := range qs {
			n += q.MaxOffset - q.MinOffset
		}
		list = append(list, topicJSON{Name: t.Name, ReadQueues: t.ReadQueues, WriteQueues: t.WriteQueues,
			Perm: permString(t.Perm), Order: t.Order, Durability: t.Durability.String(), System: sys, Messages: n})
	}
	if asJSON {
		return writeJSON(out, list)
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "TOPIC\tREAD\tWRITE\tPERM\tORDER\tMESSAGES")
	for _, t := range list {
		order := "-"
		if t.Order {
			order = "ordered"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", t.Name, t.ReadQueues, t.WriteQueues, t.Perm, order, humanCount(t.Messages))
	}
	return tw.Flush()
}

var offsetVerbs = []verb{
	{"show", "show consumer offsets and lag: of -group (else every group), on -topic (else every topic it consumed; system topics with -all)"},
	{"reset", "move -group's offsets on -topic -to first, last, or a time"},
}

const offsetDoc = `
Examples:
  edgemq offset show -group billing -topic Orders
  edgemq offset show -group billing
  edgemq offset reset -group billing -topic Orders -to 2026-11-30T08:00:00Z

offset show changes nothing in the data dir (after a crash, opening it recovers the store as
serve would). Against a running server (-server), offset reset tells the group's running
consumers, which move to the new offsets (EdgeMQ's consumer and RocketMQ's clients do); a
message they were consuming at that moment may be consumed once more.`

func offsetCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	group := fs.String("group", "", "consumer `group` (reset: required; show: default every group)")
	topic := fs.String("topic", "", "`topic` (reset: required; show: default every topic with offsets)")
	to := fs.String("to", "", "reset target: first, last, or a time (RFC 3339, e.g. 2026-11-30T08:00:00Z)")
	all := fs.Bool("all", false, "show: list the offsets on system topics too (retry and dead-letter topics)")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, _ io.Writer) error {
		switch args[0] {
		case "show":
			b, err := tf.open(ctx, readOnly, nil)
			if err != nil {
				return err
			}
			defer b.Close()
			lags, err := collectLags(ctx, b, *group, *topic, *all)
			if err != nil {
				return err
			}
			return printLags(out, lags, *jsonOut)
		case "reset":
			if *group == "" || *topic == "" || *to == "" {
				return usageError("offset reset needs -group, -topic and -to")
			}
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
			b, err := tf.open(ctx, readWrite, nil)
			if err != nil {
				return err
			}
			defer b.Close()
			if _, err := b.Topic(ctx, *topic); err != nil {
				return topicError(err, *topic)
			}
			if err := b.ResetOffsets(ctx, *group, *topic, where, at); err != nil {
				return err
			}
			lags, err := collectLags(ctx, b, *group, *topic, false)
			if err != nil {
				return err
			}
			return printLags(out, lags, *jsonOut)
		}
		return usageError("unknown verb %q", args[0])
	}
}

// lagJSON is one queue's offsets for a group, as offset show -json prints it.
type lagJSON struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// ConsumerOffset is the group's next offset to consume; null when it has none.
	ConsumerOffset *int64 `json:"consumerOffset"`
	Lag            int64  `json:"lag"`
}

// collectLags returns the offsets and lag of group on topic. An empty group means every
// group; an empty topic every topic on which the group has an offset (system topics only
// with all).
func collectLags(ctx context.Context, b target, group, topic string, all bool) ([]lagJSON, error) {
	groups := []string{group}
	if group == "" {
		var err error
		if groups, err = b.Groups(ctx); err != nil {
			return nil, err
		}
	}
	topics := []string{topic}
	if topic == "" {
		topics = nil
		ts, err := b.Topics(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if all || !b.IsSystemTopic(t.Name) {
				topics = append(topics, t.Name)
			}
		}
	} else if _, err := b.Topic(ctx, topic); err != nil {
		return nil, topicError(err, topic)
	}
	lags := []lagJSON{}
	for _, g := range groups {
		for _, t := range topics {
			ls, err := groupLag(ctx, b, g, t)
			if err != nil {
				return nil, err
			}
			if topic == "" || group == "" {
				// Listing: only the pairs where the group consumed.
				consumed := false
				for _, l := range ls {
					consumed = consumed || l.ConsumerOffset != nil
				}
				if !consumed {
					continue
				}
			}
			lags = append(lags, ls...)
		}
	}
	return lags, nil
}

func groupLag(ctx context.Context, b target, group, topic string) ([]lagJSON, error) {
	ls, err := b.GroupOffsets(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	out := make([]lagJSON, 0, len(ls))
	for _, l := range ls {
		// Not yet consumed: from the group's offset, or the first stored.
		from := l.MinOffset
		if l.ConsumerOffset >= 0 {
			from = max(from, l.ConsumerOffset)
		}
		j := lagJSON{Group: group, Topic: topic, QueueID: l.QueueID, MinOffset: l.MinOffset, MaxOffset: l.MaxOffset, Lag: max(0, l.MaxOffset-from)}
		if l.ConsumerOffset >= 0 {
			co := l.ConsumerOffset
			j.ConsumerOffset = &co
		}
		out = append(out, j)
	}
	return out, nil
}

func printLags(out io.Writer, lags []lagJSON, asJSON bool) error {
	if asJSON {
		return writeJSON(out, lags)
	}
	if len(lags) == 0 {
		_, err := fmt.Fprintln(out, "no consumer offsets")
		return err
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tQUEUE\tMIN\tMAX\tCONSUMER OFFSET\tLAG")
	for _, l := range lags {
		co := "-"
		if l.ConsumerOffset != nil {
			co = fmt.Sprint(*l.ConsumerOffset)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", l.Group, l.Topic, l.QueueID, l.MinOffset, l.MaxOffset, co, humanCount(l.Lag))
	}
	return tw.Flush()
}

// printRecovery prints one line on what recovery cut at open, and one on the .broken files
// if there are any.
func printRecovery(out io.Writer, r recoveryJSON) error {
	line := "recovery at open: nothing cut"
	if r.Records+r.Bytes+r.QueueEntries > 0 || r.EmptySegmentsRemoved+r.BrokenMade+r.BrokenDeleted > 0 {
		line = fmt.Sprintf("recovery at open: cut %s records (%s), %s queue entries in %d queues; removed %d empty segments; made %d .broken files, deleted %d",
			humanCount(r.Records), humanBytes(r.Bytes), humanCount(r.QueueEntries), r.Queues, r.EmptySegmentsRemoved, r.BrokenMade, r.BrokenDeleted)
	}
	if _, err := fmt.Fprintln(out, line); err != nil {
		return err
	}
	if r.BrokenFiles > 0 {
		_, err := fmt.Fprintf(out, ".broken files kept: %d (%s)\n", r.BrokenFiles, humanBytes(r.BrokenBytes))
		return err
	}
	return nil
}

const statsDoc = `
stats changes nothing in the data dir (after a crash, opening it recovers the store as serve
would, and stats says what that cut), and fails if there is none. System topics are hidden
unless -all.`

// statsJSON is what stats -json prints.
type statsJSON struct {
	Queues    []queueJSON   `json:"queues"`
	Commitlog commitlogJSON `json:"commitlog"`
	Recovery  recoveryJSON  `json:"recovery"`
}

// recoveryJSON is what the store's recovery cut when the broker opened, and the .broken
// files (cut bytes kept for inspection) in the commitlog's directory.
type recoveryJSON struct {
	Records              int64 `json:"records"`
	Bytes                int64 `json:"bytes"`
	QueueEntries         int64 `json:"queueEntries"`
	Queues               int   `json:"queues"`
	EmptySegmentsRemoved int   `json:"emptySegmentsRemoved"`
	BrokenMade           int   `json:"brokenMade"`
	BrokenDeleted        int   `json:"brokenDeleted"`
	BrokenFiles          int   `json:"brokenFiles"`
	BrokenBytes          int64 `json:"brokenBytes"`
}

type queueJSON struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	Messages  int64  `json:"messages"`
}

type commitlogJSON struct {
	SegmentBytes int64 `json:"segmentBytes"`
	MinPos       int64 `json:"minPos"`
	MaxPos       int64 `json:"maxPos"`
	DurablePos   int64 `json:"durablePos"`
}

func statsCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	topic := fs.String("topic", "", "only this `topic`")
	group := fs.String("group", "", "show this `group`'s lag on -topic instead")
	all := fs.Bool("all", false, "show system topics too")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, _ io.Writer) error {
		if len(args) > 0 {
			return usageError("stats takes no arguments besides its flags, got %q", args)
		}
		if *group != "" && *topic == "" {
			return usageError("-group needs -topic")
		}
		b, err := tf.open(ctx, readOnly, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		if *group != "" {
			lags, err := collectLags(ctx, b, *group, *topic, false)
			if err != nil {
				return err
			}
			return printLags(out, lags, *jsonOut)
		}
		topics := []string{*topic}
		if *topic != "" {
			if _, err := b.Topic(ctx, *topic); err != nil {
				return topicError(err, *topic)
			}
		} else {
			ts, err := b.Topics(ctx)
			if err != nil {
				return err
			}
			topics = topics[:0]
			for _, t := range ts {
				topics = append(topics, t.Name)
			}
		}
		var qs []edge.QueueInfo
		for _, t := range topics {
			tqs, err := b.Queues(ctx, t)
			if err != nil {
				return err
			}
			qs = append(qs, tqs...)
		}
		ss, err := b.StoreStats(ctx)
		if err != nil {
			return err
		}
		r := ss.Recovery
		st := statsJSON{Queues: []queueJSON{}, Commitlog: commitlogJSON{ss.SegmentBytes, ss.MinPos, ss.MaxPos, ss.DurablePos},
			Recovery: recoveryJSON{r.Records, r.Bytes, r.QueueEntries, r.Queues, r.EmptyRemoved, r.BrokenMade, r.BrokenDeleted, r.BrokenFiles, r.BrokenBytes}}
		for _, q := range qs {
			if b.IsSystemTopic(q.Topic) && !*all && q.Topic != *topic {
				continue
			}
			st.Queues = append(st.Queues, queueJSON{q.Topic, q.QueueID, q.MinOffset, q.MaxOffset, q.MaxOffset - q.MinOffset})
		}
		if *jsonOut {
			return writeJSON(out, st)
		}
		tw := newTable(out)
		fmt.Fprintln(tw, "TOPIC\tQUEUE\tMIN\tMAX\tMESSAGES")
		for _, q := range st.Queues {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", q.Topic, q.QueueID, q.MinOffset, q.MaxOffset, humanCount(q.Messages))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "\ncommitlog: %s of segments, positions %d..%d (%s of records)\n",
			humanBytes(ss.SegmentBytes), ss.MinPos, ss.MaxPos, humanBytes(ss.MaxPos-ss.MinPos)); err != nil {
			return err
		}
		return printRecovery(out, st.Recovery)
	}
}
