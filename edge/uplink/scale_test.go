package uplink

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// The full-scale run (make test-uplink-full; 5 min 5 s on 2 shared cores, load average
// falling from 11.7 to 3.5, 2.5 GB of temp files) measured:
//
//   - TestForwardThroughFaults: 1,000,000 messages forwarded in 32 s (31,000/s) through 100
//     cuts at random moments, 279 other faults (155 replies dropped after the hub stored the
//     batch, stalls, 4 MiB/s throttles) and a hub restart: 826 failed sends, 52,864 messages
//     resent (at most 64 per failure), 39,616 duplicates upstream, none missing or out of
//     order.
//   - TestForwardSurvivesSIGKILL: 1,000,000 messages forwarded in 18 s (54,000/s) through 20
//     SIGKILLs of the forwarding process: 4,416 duplicates (bound 20 kills x 4 queues x 64).
//   - TestDownSurvivesSIGKILL: 40,000 messages mirrored through 20 SIGKILLs in 9 s, each
//     stored locally once.
//   - TestDaysOffline: 5,000,000 messages of 100 bytes over 3 simulated days in about 60 s.
//     reject_new: 804,864 sends refused once the disk was full, nothing deleted, 4,195,136
//     drained in 42 s (99,000/s) with at most 10 MiB of heap in use; drop_oldest: none
//     refused, 1,591,296 lost to max age (counted), 3,408,704 drained in 19 s (180,000/s)
//     with at most 7 MiB of heap in use.
//
// scaleFlag chooses the size of the fault, kill and offline tests: "full" (or the
// environment's EDGEMQ_UPLINK_FULL=1) runs them at full scale (make test-uplink-full), else
// they run small enough for every go test.
var scaleFlag = flag.String("uplink.scale", "", `"full": run the uplink's fault, kill and offline tests at full scale`)

// fullScale reports whether this run is the full-scale one.
func fullScale() bool { return *scaleFlag == "full" || os.Getenv("EDGEMQ_UPLINK_FULL") == "1" }

// scaled returns small, or full in the full-scale run.
func scaled(small, full int) int {
	if fullScale() {
		return full
	}
	return small
}

// bulkStore are store options for the full-scale tests: async flush (a million sends, each
// waiting for an fsync, would take the run), segments and queue files large enough to hold
// them in tens of files.
func bulkStore() *store.Options {
	return &store.Options{Flush: commitlog.FlushAsync, SegmentSize: 64 << 20, MaxMessageSize: 64 << 10,
		QueueSegmentEntries: 65536}
}

// sendMany sends the messages sendN sends, n of them from the from-th, in batches of up to
// 64 per sharding key: the same queues and the same order per queue, a hundred times
// faster.
func sendMany(t testing.TB, b *edge.Broker, topic string, from, n int) {
	t.Helper()
	ctx := context.Background()
	const perShard = 64
	for lo := from; lo < from+n; lo += 8 * perShard {
		var shards [8][]*mq.Message
		for i := lo; i < min(lo+8*perShard, from+n); i++ {
			is := strconv.Itoa(i)
			m := &mq.Message{Topic: topic, Tags: tags[i%3], Keys: "k" + is,
				Properties: map[string]string{"seq": is, "shard": shardKeys[i%8]}, Body: []byte("message " + is)}
			if i%2 == 0 {
				m.Properties[mq.PropertyUniqKey] = "UNIQ" + zeros[:28-len(is)] + is
			}
			shards[i%8] = append(shards[i%8], m)
		}
		for s, msgs := range shards {
			if len(msgs) == 0 {
				continue
			}
			if _, err := b.SendBatch(ctx, msgs, mq.ShardingKey(shardKeys[s])); err != nil {
				t.Fatalf("send batch of shard %d from %d: %v", s, lo, err)
			}
		}
	}
}

var (
	tags      = [3]string{"t0", "t1", "t2"}
	shardKeys = [8]string{"0", "1", "2", "3", "4", "5", "6", "7"}
	zeros     = "0000000000000000000000000000"
)

// queueReader reads a queue of a broker in order, a pull at a time.
type queueReader struct {
	t    testing.TB
	b    *edge.Broker
	q    mq.MessageQueue
	off  int64
	buf  []mq.MessageExt
	done bool
}

func newQueueReader(t testing.TB, b *edge.Broker, topic string, q int32) *queueReader {
	return &queueReader{t: t, b: b, q: mq.MessageQueue{Topic: topic, BrokerName: b.Options().BrokerName, QueueID: q}}
}

// next returns the queue's next message, or nil at its end.
func (r *queueReader) next() *mq.MessageExt {
	r.t.Helper()
	if len(r.buf) == 0 && !r.done {
		req := mqPull(r.q, r.off)
		req.MaxMsgs = 1024
		res, err := r.b.Pull(context.Background(), req)
		if err != nil {
			r.t.Fatalf("pull %v at %d: %v", r.q, r.off, err)
		}
		r.buf, r.off, r.done = res.Messages, res.NextBeginOffset, len(res.Messages) == 0
	}
	if len(r.buf) == 0 {
		return nil
	}
	m := &r.buf[0]
	r.buf = r.buf[1:]
	return m
}

// checkStream is checkSame for topics too large to hold in memory: it reads each local
// queue and its upstream queue side by side. It returns the duplicates upstream (messages
// whose UNIQ_KEY came before in the queue) and fails past maxDups.
func checkStream(t *testing.T, local *edge.Broker, topic string, hub *edge.Broker, up string, maxDups int) int {
	t.Helper()
	tc, err := local.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	dups := 0
	for q := range tc.ReadQueues {
		lr, hr := newQueueReader(t, local, topic, q), newQueueReader(t, hub, up, q)
		seen := map[string]struct{}{}
		n := 0
		for g := hr.next(); g != nil; g = hr.next() {
			id := g.Properties[mq.PropertyUniqKey]
			if _, ok := seen[id]; ok {
				dups++
				continue
			}
			seen[id] = struct{}{}
			w := lr.next()
			if w == nil {
				t.Fatalf("queue %d: upstream offset %d (uniq %s, seq %s) is none of the %d local messages", q, g.QueueOffset, id, g.Properties["seq"], n)
			}
			n++
			checkForwarded(t, q, w, g)
		}
		if w := lr.next(); w != nil {
			t.Fatalf("queue %d: local offset %d (seq %s) and after are not upstream (%d are)", q, w.QueueOffset, w.Properties["seq"], n)
		}
	}
	if dups > maxDups {
		t.Fatalf("%d messages stored twice, at most %d expected", dups, maxDups)
	}
	return dups
}
