package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

const verifyDoc = `
verify opens the store alone, without a broker, and recovers it as any open does: a torn
tail left by a crash or power cut is cut into .broken files. Then it reads every commitlog
record, checking its CRC, and every consume-queue entry back through the log. Each damaged
record is reported with its segment file and offset; the scan resynchronises on the next
record that verifies, so every damaged record is counted, and the rest of the log is still
read. (A damaged length field hides where the records behind it start: such a run of
bytes counts as one damaged record.) verify exits 1 when it finds damage.

verify never creates a data dir and runs with retention off. It opens any dir that send
and demo open, without their config file: the segment size is the dir's, and
broker.max_message_size defaults to what those segments hold.`

// damageJSON is one damaged stretch of the commitlog.
type damageJSON struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"` // in the segment file
	Pos     int64  `json:"pos"`    // in the log
	// Bytes are the unreadable bytes from Pos to the next record that verifies (or to the
	// end of the segment's data).
	Bytes int64 `json:"bytes"`
	// Records is how many damaged records those bytes hold: what their length fields say
	// when they lead exactly to the next good record, else 1.
	Records int    `json:"records"`
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
	DamagedBytes      int64        `json:"damagedBytes"`
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
				fmt.Fprintf(out, "damaged: %s offset %d (position %d): %s; %s unreadable, %d %s\n",
					d.Segment, d.Offset, d.Pos, d.Reason, humanBytes(d.Bytes), d.Records, plural(d.Records, "record"))
			}
		}
		rep.Records, rep.Damage, err = scanLog(ctx, st, report)
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		for _, d := range rep.Damage {
			rep.DamagedRecords += d.Records
			rep.DamagedBytes += d.Bytes
		}
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
			fmt.Fprintf(out, "commitlog: %d records in %s of segments, positions %d..%d; %d damaged (%s)\n",
				rep.Records, humanBytes(rep.SegmentBytes), rep.MinPos, rep.MaxPos, rep.DamagedRecords, humanBytes(rep.DamagedBytes))
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
			return fmt.Errorf("damage found: %d damaged %s (%s), %d unreadable queue %s",
				rep.DamagedRecords, plural(rep.DamagedRecords, "record"), humanBytes(rep.DamagedBytes),
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

// scanLog reads every record of the store's log, and returns how many verify and where the
// damage is, calling report for each damaged stretch as it finds it. It stops with
// ctx.Err() when ctx ends.
func scanLog(ctx context.Context, st *store.Store, report func(damageJSON)) (int64, []damageJSON, error) {
	log := st.Log()
	ls := &logScan{st: st, r: log.NewReader(), queues: st.Queues("")}
	defer ls.r.Close()
	var records int64
	damage := []damageJSON{}
	for pos := log.MinPos(); ; {
		if records%4096 == 0 && ctx.Err() != nil {
			return records, damage, ctx.Err()
		}
		rec, err := ls.r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			return records, damage, nil
		}
		var ce *commitlog.CorruptError
		if errors.As(err, &ce) {
			base, ok := segmentBase(ce.Segment)
			if !ok {
				return records, damage, fmt.Errorf("damage in %s, whose name is not a segment's: %w", ce.Segment, err)
			}
			at := base + ce.Offset
			next, d := ls.resync(at, min(base+log.SegmentSize(), log.Written()), ce)
			report(d)
			damage = append(damage, d)
			pos = next
			continue
		}
		if err != nil {
			return records, damage, err
		}
		records++
		pos = rec.Next
	}
}

// segmentBase returns the base position of the segment file path: its name is %020d.log of
// it (store/FORMAT.md).
func segmentBase(path string) (int64, bool) {
	name, ok := strings.CutSuffix(filepath.Base(path), ".log")
	if !ok {
		return 0, false
	}
	base, err := strconv.ParseInt(name, 10, 64)
	return base, err == nil
}

// logScan is verify's walk over the log.
type logScan struct {
	st     *store.Store
	r      *commitlog.Reader
	queues []store.QueueInfo
}

// resync finds where reading goes on after the damaged record at pos (ce its error), in a
// segment whose data ends by end, and returns that position and the damage.
//
// The damaged length field may be what is damaged, so the next record is not where it
// says. The next good record is the first one after pos that a consume queue indexes, if
// there is one in the segment; else the damage runs to the end of the segment's data, where
// the records' lengths lead if they can be trusted; else the bytes after pos are tried one
// by one until a record verifies (slow, as each try checks a CRC over what the bytes there
// claim is a record). The damaged bytes count as the records their length fields chain
// through when that chain ends exactly where the damage does, else as one record.
func (ls *logScan) resync(pos, end int64, ce *commitlog.CorruptError) (next int64, d damageJSON) {
	d = damageJSON{Segment: filepath.Base(ce.Segment), Offset: ce.Offset, Pos: pos, Records: 1, Reason: ce.Reason}
	stop := int64(-1) // where the damage ends
	next = end
	if p, ok := ls.nextIndexed(pos); ok && p < end {
		stop, next = p, p
	} else if p, _ := ls.chain(pos, end, ce); p == end || p > pos && p < end && ls.zerosFrom(p, end) {
		stop = p // the data ends there
	} else {
		stop = pos + 1 // where the segment's trailing zeros start, if no record verifies
		for p := pos + 1; p < end; p++ {
			_, err := ls.r.Read(p)
			if err == nil {
				stop, next = p, p
				break
			}
			if !errors.Is(err, commitlog.ErrNoRecord) { // ErrNoRecord: a zero byte
				stop = p + 1
			}
		}
	}
	if p, n := ls.chain(pos, stop, ce); p == stop {
		d.Records = n
	}
	d.Bytes = stop - pos
	return next, d
}

// chain follows the length fields of damaged records from pos (ce its error) while they
// lead to another damaged record before limit, and returns where the last one leads (0 if
// its length is unreadable) and how many records it went through.
func (ls *logScan) chain(pos, limit int64, ce *commitlog.CorruptError) (int64, int) {
	n := 1
	for ce.Next > pos && ce.Next < limit {
		pos = ce.Next
		_, err := ls.r.Read(pos)
		var next *commitlog.CorruptError
		if !errors.As(err, &next) {
			break
		}
		n++
		ce = next
	}
	return ce.Next, n
}

// zerosFrom reports whether no record starts at p and the segment's bytes from p to end are
// zeros: the end of its data.
func (ls *logScan) zerosFrom(p, end int64) bool {
	for ; p < end; p++ {
		if _, err := ls.r.Read(p); !errors.Is(err, commitlog.ErrNoRecord) {
			return false
		}
	}
	return true
}

// nextIndexed returns the position of the first readable record after pos that a consume
// queue indexes: a binary search of each queue, whose entries' positions grow with their
// offsets.
func (ls *logScan) nextIndexed(pos int64) (int64, bool) {
	best, found := int64(0), false
	for _, q := range ls.queues {
		// first returns the position of the first readable message at or after off.
		first := func(off int64) (int64, bool) {
			res, err := ls.st.GetMessages(q.Topic, q.QueueID, off, 1, nil)
			if err != nil || len(res.Messages) == 0 {
				return 0, false
			}
			return res.Messages[0].Pos, true
		}
		lo, hi := q.MinOffset, q.MaxOffset
		for lo < hi {
			mid := lo + (hi-lo)/2
			if p, ok := first(mid); !ok || p > pos {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if p, ok := first(lo); ok && p > pos && (!found || p < best) {
			best, found = p, true
		}
	}
	return best, found
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
