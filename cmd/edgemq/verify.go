package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

const verifyDoc = `
verify opens the store alone, without a broker, and recovers it as any open does: a torn
tail left by a crash or power cut is cut into .broken files. Then it reads every commitlog
record, checking its CRC, and every consume-queue entry back through the log. A damaged
record is reported with its segment file and offset, and the scan goes on in the next
segment. verify exits 1 when it finds damage.`

func verifyCommand(fs *flag.FlagSet) runFunc {
	load := commonFlags(fs)
	return func(_ context.Context, args []string, out, _ io.Writer) error {
		if len(args) > 0 {
			return usageError("verify takes no arguments besides its flags, got %q", args)
		}
		c, err := load()
		if err != nil {
			return err
		}
		so := *c.options().Store
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
