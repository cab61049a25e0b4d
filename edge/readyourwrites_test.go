package edge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// TestReadYourWrites: a sent message is visible to every read once its send is acknowledged:
// when Send returns, and inside SendAsync's done, with 32 producers, in both flush modes.
// MaxOffset of its queue counts it, a Pull at its queue offset returns it, ViewMessage at
// its commit-log offset reads it, its store time lies between the send and the
// acknowledgement (but for a step of the wall clock within the last second), and
// SearchOffset brackets it (its store time gives an offset at or before it, a millisecond
// later one after it). It uses only the broker's exported API.
func TestReadYourWrites(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		for _, async := range []bool{false, true} {
			name := fl.String() + "/Send"
			if async {
				name = fl.String() + "/SendAsync"
			}
			t.Run(name, func(t *testing.T) {
				b, err := edge.Open(t.TempDir(), &edge.Options{MaxMessageSize: 64 << 10,
					Store: &store.Options{Flush: fl, SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true}})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if err := b.CreateTopic(edge.TopicConfig{Name: "RYW", ReadQueues: 4, WriteQueues: 4}); err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				const producers, each = 32, 40
				var bad atomic.Int64
				check := func(m *mq.Message, res mq.SendResult, before time.Time) {
					if err := sentVisible(ctx, b, m, res, before, time.Now()); err != nil && bad.Add(1) <= 3 {
						t.Error(err)
					}
				}
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						for i := range each {
							m := &mq.Message{Topic: "RYW", Body: fmt.Appendf(nil, "p%d-%d", p, i)}
							before := time.Now()
							if !async {
								res, err := b.Send(ctx, m, nil)
								if err != nil {
									t.Error(err)
									return
								}
								check(m, res, before)
								continue
							}
							acked := make(chan struct{})
							err := b.SendAsync(ctx, m, nil, func(res mq.SendResult, err error) {
								if err != nil {
									t.Error(err)
								} else {
									check(m, res, before)
								}
								close(acked)
							})
							if err != nil {
								t.Error(err)
								return
							}
							<-acked
						}
					})
				}
				wg.Wait()
				if n := bad.Load(); n > 0 {
					t.Fatalf("%d of %d acknowledged sends were not visible at their acknowledgement", n, producers*each)
				}
			})
		}
	}
}

// sentVisible reports the reads that miss m, whose send res, begun at before, was just
// acknowledged, by after.
func sentVisible(ctx context.Context, b *edge.Broker, m *mq.Message, res mq.SendResult, before, after time.Time) error {
	var errs []error
	off := res.QueueOffset
	if max, err := b.MaxOffset(ctx, res.Queue); err != nil || max <= off {
		errs = append(errs, fmt.Errorf("MaxOffset %d, %v; want > %d", max, err, off))
	}
	pr, err := b.Pull(ctx, mq.PullRequest{Group: "ryw", Queue: res.Queue, Offset: off, MaxMsgs: 1, Filter: "*"})
	if err != nil || pr.Status != mq.PullFound || len(pr.Messages) != 1 || pr.Messages[0].QueueOffset != off || !bytes.Equal(pr.Messages[0].Body, m.Body) {
		errs = append(errs, fmt.Errorf("Pull at its offset: %v, %d messages, %v", pr.Status, len(pr.Messages), err))
	}
	v, err := b.ViewMessage(ctx, res.CommitLogOffset)
	if err != nil || !bytes.Equal(v.Body, m.Body) {
		errs = append(errs, fmt.Errorf("ViewMessage at its commit-log offset: %q, %v", v.Body, err))
	}
	// The store time is the wall clock's, but for a step of the wall clock within the last
	// second (the store reads the wall clock once a second): a virtual machine's clock may
	// be stepped forward many times a second. SearchOffset is bracketed by the store time.
	if st := time.UnixMilli(v.StoreTime); st.Before(before.Add(-time.Second-time.Millisecond)) || st.After(after.Add(time.Millisecond)) {
		errs = append(errs, fmt.Errorf("store time %v, sent at %v, acknowledged at %v", st, before, after))
	}
	if o, err := b.SearchOffset(ctx, res.Queue, time.UnixMilli(v.StoreTime)); err != nil || o > off {
		errs = append(errs, fmt.Errorf("SearchOffset(its store time) = %d, %v; want <= %d", o, err, off))
	}
	if o, err := b.SearchOffset(ctx, res.Queue, time.UnixMilli(v.StoreTime+1)); err != nil || o <= off {
		errs = append(errs, fmt.Errorf("SearchOffset(its store time + 1 ms) = %d, %v; want > %d", o, err, off))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s/%d@%d:\n%w", res.Queue.Topic, res.Queue.QueueID, off, err)
	}
	return nil
}
