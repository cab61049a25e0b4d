package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

const verifyDoc = `
verify opens the store alone, without a broker, and recovers it as any open does: a torn
tail left by a crash or power cut is cut into .broken files. Then it reads every commitlog
record, checking its CRC, and every consume-queue entry back through the log. A damaged
record is reported with its segment file and offset, and the scan goes on in the next
segment. verify exits 1 when it finds damage.

verify never creates a data dir and runs with retention off. It opens any dir that send
and demo open, without their config file: the segment size is the dir's, and
broker.max_message_size defaults to what those segments hold.`

// damageJSON is a damaged record of the commitlog.
type damageJSON struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"` // in the segment file
	Reason  string `json:"reason"`
}

// verifyJSON is what verify -json prints.
type verifyJSON struct {
	OK                bool         `json:"ok"`
	Interrupted       bool         `json:"interrupted,omitempty"`
	Records           int64        `json:"records"`
	SegmentBytes      int64        `json:"segmentBytes"`
	MinPos            int64        `json:"minPos"`
	MaxPos            int64        `json:"maxPos"`
	DamagedRecords    int          `json:"damagedRecords"`
	Damage            []damageJSON `json:"damage"`
	Queues            int          `json:"queues"`
	Messages          int64        `json:"messages"`
	UnreadableEntries int64        `json:"unreadableEntries"`
}

func verifyCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, _ io.Writer) error {
		if len(args) > 0 {
			return usageError("verify takes no arguments besides its flags, got %q", args)
		}
		c, err := load()
		if err != nil {
			return err
		}
		st, err := c.openStore(readOnly)
		if err != nil {
			return err
		}
		defer st.Close()
		log := st.Log()
		rep := verifyJSON{Damage: []damageJSON{}, SegmentBytes: log.Size(), MinPos: log.MinPos(), MaxPos: log.Written()}
		report := func(d damageJSON) {
			if !*jsonOut {
				fmt.Fprintf(out, "damaged: %s offset %d: %s\n", d.Segment, d.Offset, d.Reason)
			}
		}
		rep.Records, rep.Damage, err = scanLog(ctx, st.Log(), report)
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		rep.DamagedRecords = len(rep.Damage)
		if err == nil {
			rep.Queues, rep.Messages, rep.UnreadableEntries, err = scanQueues(ctx, st)
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		}
		rep.Interrupted = err != nil
		rep.OK = rep.DamagedRecords == 0 && rep.UnreadableEntries == 0 && !rep.Interrupted
		if *jsonOut {
			if err := writeJSON(out, rep); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(out, "commitlog: %d records in %s of segments, positions %d..%d; %d damaged\n",
				rep.Records, humanBytes(rep.SegmentBytes), rep.MinPos, rep.MaxPos, rep.DamagedRecords)
			if !rep.Interrupted {
				fmt.Fprintf(out, "consume queues: %d queues, %d messages readable, %d entries unreadable\n",
					rep.Queues, rep.Messages, rep.UnreadableEntries)
			}
			if rep.OK {
				fmt.Fprintln(out, "ok")
			}
		}
		if rep.Interrupted {
			return ctx.Err()
		}
		if !rep.OK {
			return fmt.Errorf("damage found: %d damaged %s, %d unreadable queue %s",
				rep.DamagedRecords, plural(rep.DamagedRecords, "record"),
				rep.UnreadableEntries, plural(int(rep.UnreadableEntries), "entry"))
		}
		return nil
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	if strings.HasSuffix(word, "y") {
		return word[:len(word)-1] + "ies"
	}
	return word + "s"
}

// scanLog reads every record of log, and returns how many verify and where the damage is,
// calling report for each damaged record as it finds it. It stops with ctx.Err() when ctx
// ends.
func scanLog(ctx context.Context, log *commitlog.Log, report func(damageJSON)) (int64, []damageJSON, error) {
	r := log.NewReader()
	defer r.Close()
	var records int64
	damage := []damageJSON{}
	for pos := log.MinPos(); ; {
		if records%4096 == 0 && ctx.Err() != nil {
			return records, damage, ctx.Err()
		}
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			return records, damage, nil
		}
		var ce *commitlog.CorruptError
		if errors.As(err, &ce) {
			d := damageJSON{Segment: filepath.Base(ce.Segment), Offset: ce.Offset, Reason: ce.Reason}
			report(d)
			damage = append(damage, d)
			// Skip to the next segment: the frame length is not trustworthy.
			pos = pos - pos%log.SegmentSize() + log.SegmentSize()
			continue
		}
		if err != nil {
			return records, damage, err
		}
		records++
		pos = rec.Next
	}
}

// scanQueues reads every consume queue's entries back through the log, and returns the
// number of queues, of messages read, and of entries whose record is unreadable.
func scanQueues(ctx context.Context, st *store.Store) (queues int, messages, unreadable int64, err error) {
	qs := st.Queues("")
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].Topic != qs[j].Topic {
			return qs[i].Topic < qs[j].Topic
		}
		return qs[i].QueueID < qs[j].QueueID
	})
	for _, q := range qs {
		for off := q.MinOffset; off < q.MaxOffset; {
			if err := ctx.Err(); err != nil {
				return len(qs), messages, unreadable, err
			}
			res, err := st.GetMessages(q.Topic, q.QueueID, off, 256, nil)
			if err != nil {
				return len(qs), messages, unreadable, err
			}
			messages += int64(len(res.Messages))
			if next := off + int64(len(res.Messages)); res.NextBeginOffset > next {
				unreadable += res.NextBeginOffset - next
			}
			if res.NextBeginOffset <= off {
				break
			}
			off = res.NextBeginOffset
		}
	}
	return len(qs), messages, unreadable, nil
}
