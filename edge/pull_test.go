package edge

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// pullAsyncStore is the test store with async flushing: sends do not wait for fsync.
func pullAsyncStore() *store.Options {
	return &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024,
		MetaNoSync: true, Flush: commitlog.FlushAsync}
}

// pullSend sends one message per tag to (topic, queue); each can be pulled once its send
// returns.
func pullSend(t testing.TB, b *Broker, topic string, queue int32, tags ...string) {
	t.Helper()
	for _, tag := range tags {
		if _, err := b.Send(context.Background(), &mq.Message{Topic: topic, Tags: tag, Body: []byte("body-" + tag)}, mq.QueueIndex(int(queue))); err != nil {
			t.Fatalf("send %q: %v", tag, err)
		}
	}
}

type pullOutcome struct {
	res mq.PullResult
	err error
}

// pullAsync runs Pull in a goroutine; the result arrives on the returned channel.
func pullAsync(ctx context.Context, b *Broker, req mq.PullRequest) <-chan pullOutcome {
	ch := make(chan pullOutcome, 1)
	go func() {
		res, err := b.Pull(ctx, req)
		ch <- pullOutcome{res, err}
	}()
	return ch
}

func pullOffsets(msgs []mq.MessageExt) []int64 {
	var out []int64
	for _, m := range msgs {
		out = append(out, m.QueueOffset)
	}
	return out
}

func TestPullStatuses(t *testing.T) {
	b := openBroker(t, nil)
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	pullSend(t, b, "T", 0, "a", "b", "c")
	for _, tc := range []struct {
		name        string
		queue       int32
		offset      int64
		max         int
		status      mq.PullStatus
		offsets     []int64
		next, maxOf int64
	}{
		{"found all", 0, 0, 0, mq.PullFound, []int64{0, 1, 2}, 3, 3},
		{"found one", 0, 1, 1, mq.PullFound, []int64{1}, 2, 3},
		{"found tail", 0, 2, 32, mq.PullFound, []int64{2}, 3, 3},
		{"at max: no new", 0, 3, 32, mq.PullNoNewMsg, nil, 3, 3},
		{"beyond max", 0, 10, 32, mq.PullOffsetIllegal, nil, 3, 3},
		{"empty queue at 0", 1, 0, 32, mq.PullNoNewMsg, nil, 0, 0},
		{"empty queue at 5", 1, 5, 32, mq.PullOffsetIllegal, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: tc.queue},
				Offset: tc.offset, MaxMsgs: tc.max, Filter: "*"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || !slices.Equal(pullOffsets(res.Messages), tc.offsets) ||
				res.NextBeginOffset != tc.next || res.MaxOffset != tc.maxOf || res.MinOffset != 0 {
				t.Fatalf("got %v offsets %v next %d min %d max %d, want %v %v next %d min 0 max %d",
					res.Status, pullOffsets(res.Messages), res.NextBeginOffset, res.MinOffset, res.MaxOffset,
					tc.status, tc.offsets, tc.next, tc.maxOf)
			}
		})
	}
}

// TestPullStatusMapping covers the store statuses the live tests cannot easily produce
// (OFFSET_TOO_SMALL needs retention, OFFSET_FOUND_NULL a damaged log).
func TestPullStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		s           store.GetStatus
		offset      int64
		want        mq.PullStatus
		suspendable bool
	}{
		{store.Found, 0, mq.PullFound, false},
		{store.OffsetOverflowOne, 7, mq.PullNoNewMsg, true},
		{store.NoMessageInQueue, 0, mq.PullNoNewMsg, true},
		{store.NoMessageInQueue, 5, mq.PullOffsetIllegal, false},
		{store.OffsetFoundNull, 3, mq.PullNoNewMsg, true}, // holes: wait past them
		{store.NoMatchedMessage, 3, mq.PullNoMatchedMsg, false},
		{store.OffsetOverflowBadly, 9, mq.PullOffsetIllegal, false},
		{store.OffsetTooSmall, 0, mq.PullOffsetIllegal, false},
	} {
		st, susp := pullStatus(tc.s, tc.offset)
		if st != tc.want || susp != tc.suspendable {
			t.Errorf("%v at %d: got %v suspendable %v, want %v %v", tc.s, tc.offset, st, susp, tc.want, tc.suspendable)
		}
	}
}

func TestPullFilters(t *testing.T) {
	b := openBroker(t, nil)
	// "Aa" and "BB" have the same tag hash (Java String.hashCode): only the exact tag check
	// tells them apart.
	if store.TagHash("Aa") != store.TagHash("BB") {
		t.Fatal("test needs colliding tags")
	}
	pullSend(t, b, "F", 0, "A", "B", "C", "", "A", "Aa", "BB")
	for _, tc := range []struct {
		filter  string
		status  mq.PullStatus
		offsets []int64
	}{
		{"*", mq.PullFound, []int64{0, 1, 2, 3, 4, 5, 6}},
		{"A", mq.PullFound, []int64{0, 4}},
		{"A || B", mq.PullFound, []int64{0, 1, 4}},
		{" A ||C ", mq.PullFound, []int64{0, 2, 4}},
		{"Aa", mq.PullFound, []int64{5}},
		{"BB", mq.PullFound, []int64{6}},
		{"Z", mq.PullNoMatchedMsg, nil},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "F"}, Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || !slices.Equal(pullOffsets(res.Messages), tc.offsets) || res.NextBeginOffset != 7 {
				t.Fatalf("got %v %v next %d, want %v %v next 7", res.Status, pullOffsets(res.Messages), res.NextBeginOffset, tc.status, tc.offsets)
			}
			f, _ := mq.ParseTagFilter(tc.filter)
			for _, m := range res.Messages {
				if !f.Match(m.Tags) {
					t.Fatalf("filter %q returned tag %q", tc.filter, m.Tags)
				}
			}
		})
	}
}

func TestPullWithoutFilterNeedsSubscription(t *testing.T) {
	b := openBroker(t, nil)
	pullSend(t, b, "S", 0, "A")
	if _, err := b.Pull(context.Background(), mq.PullRequest{Group: "nobody", Queue: mq.MessageQueue{Topic: "S"}}); !errors.Is(err, mq.ErrSubscriptionNotExist) {
		t.Fatalf("got %v, want %v", err, mq.ErrSubscriptionNotExist)
	}
}

func TestPullBadInputChangesNothing(t *testing.T) {
	b := openBroker(t, nil) // auto-creation on: Pull still must not create topics
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(TopicConfig{Name: "WO", Perm: mq.PermWrite}); err != nil {
		t.Fatal(err)
	}
	ok := mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: 1}, Filter: "*", CommitOffset: 9}
	for _, tc := range []struct {
		name string
		edit func(*mq.PullRequest)
		want error
	}{
		{"empty group", func(r *mq.PullRequest) { r.Group = "" }, mq.ErrInvalidArgument},
		{"unknown topic", func(r *mq.PullRequest) { r.Queue.Topic = "Nope" }, mq.ErrTopicNotExist},
		{"unreadable topic", func(r *mq.PullRequest) { r.Queue.Topic = "WO"; r.Queue.QueueID = 0 }, mq.ErrNoPermission},
		{"queue beyond read queues", func(r *mq.PullRequest) { r.Queue.QueueID = 2 }, mq.ErrInvalidQueue},
		{"negative queue", func(r *mq.PullRequest) { r.Queue.QueueID = -1 }, mq.ErrInvalidQueue},
		{"another broker's queue", func(r *mq.PullRequest) { r.Queue.BrokerName = "other" }, mq.ErrInvalidQueue},
		{"negative offset", func(r *mq.PullRequest) { r.Offset = -1 }, mq.ErrInvalidArgument},
		{"MaxMsgs 2000", func(r *mq.PullRequest) { r.MaxMsgs = 2000 }, mq.ErrInvalidArgument},
		{"MaxMsgs -1", func(r *mq.PullRequest) { r.MaxMsgs = -1 }, mq.ErrInvalidArgument},
		{"negative MaxWait", func(r *mq.PullRequest) { r.MaxWait = -time.Second }, mq.ErrInvalidArgument},
		{"bad filter", func(r *mq.PullRequest) { r.Filter = "A || " }, mq.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.edit(&req)
			if _, err := b.Pull(context.Background(), req); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := b.Topic("Nope"); err == nil {
		t.Fatal("pull created a topic")
	}
	if off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T", QueueID: 1}); err == nil {
		t.Fatalf("rejected pulls stored offset %d", off)
	}
	// The good request works, and is refused after Close.
	if _, err := b.Pull(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Pull(ctx, ok); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended ctx: got %v, want %v", err, context.Canceled)
	}
	b.Close()
	if _, err := b.Pull(context.Background(), ok); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: got %v, want %v", err, ErrClosed)
	}
}

func TestPullCommitOffsetOnFirstPassOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, nil)
		ctx := context.Background()
		q := mq.MessageQueue{Topic: "C", QueueID: 0}
		if err := b.CreateTopic(TopicConfig{Name: "C", ReadQueues: 1, WriteQueues: 1}); err != nil {
			t.Fatal(err)
		}
		holdSend(t, b, "C", 0, "a", "b", "c", "d", "e")
		res, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: q, Offset: 5, Filter: "*", CommitOffset: 3})
		if err != nil || res.Status != mq.PullNoNewMsg {
			t.Fatalf("pull: %v %v", res.Status, err)
		}
		if off, err := b.QueryOffset(ctx, "g", q); err != nil || off != 3 {
			t.Fatalf("piggybacked offset: got %d %v, want 3", off, err)
		}
		// A parked pull carrying 4: the consumer commits 5 meanwhile; the second pass after
		// the wake-up must not put 4 back.
		ch := pullAsync(ctx, b, mq.PullRequest{Group: "g", Queue: q, Offset: 5, Filter: "*", CommitOffset: 4, Suspend: true})
		holdParked(t, b, 1)
		if off, _ := b.QueryOffset(ctx, "g", q); off != 4 {
			t.Fatalf("first pass stored %d, want 4", off)
		}
		if err := b.CommitOffset(ctx, "g", q, 5); err != nil {
			t.Fatal(err)
		}
		holdSend(t, b, "C", 0, "f")
		if o := holdRecv(t, ch); o.err != nil || o.res.Status != mq.PullFound {
			t.Fatalf("woken pull: %v %v", o.res.Status, o.err)
		}
		if off, _ := b.QueryOffset(ctx, "g", q); off != 5 {
			t.Fatalf("offset after the second pass: got %d, want 5", off)
		}
	})
}

func TestPullDecompressesAndCounts(t *testing.T) {
	b := openBroker(t, &Options{CompressOver: 100})
	body := []byte(strings.Repeat("temperature=21.5;", 100))
	if _, err := b.Send(context.Background(), &mq.Message{Topic: "Z", Body: body}, mq.QueueIndex(0)); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "Z"}, Filter: "*"})
	if err != nil || res.Status != mq.PullFound || len(res.Messages) != 1 {
		t.Fatalf("pull: %v %v", res.Status, err)
	}
	if m := res.Messages[0]; string(m.Body) != string(body) || m.SysFlag&mq.SysFlagCompressed != 0 {
		t.Fatalf("body of %d bytes, sysflag %x: not decompressed", len(m.Body), m.SysFlag)
	}
	if got := b.GroupStats("g"); got.MessagesOut != 1 || got.BytesOut != int64(len(body)) {
		t.Fatalf("stats: got %+v, want 1 message, %d bytes", got, len(body))
	}
}

// TestPullConcurrentExactlyOnceInOrder runs senders and long-polling pullers (two groups)
// on four queues at once: every group gets every message of every queue once, in order.
func TestPullConcurrentExactlyOnceInOrder(t *testing.T) {
	b := openBroker(t, &Options{Store: pullAsyncStore()})
	const queues, senders, perSender = 4, 4, 150
	if err := b.CreateTopic(TopicConfig{Name: "P", ReadQueues: queues, WriteQueues: queues}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for s := 0; s < senders; s++ {
		wg.Go(func() {
			for i := 0; i < perSender; i++ {
				for q := int32(0); q < queues; q++ {
					m := &mq.Message{Topic: "P", Tags: fmt.Sprint("t", i%3), Body: fmt.Appendf(nil, "%d:%d", s, i)}
					if _, err := b.Send(ctx, m, mq.QueueIndex(int(q))); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	for _, group := range []string{"g1", "g2"} {
		for q := int32(0); q < queues; q++ {
			wg.Go(func() {
				last := make([]int, senders)
				for i := range last {
					last[i] = -1
				}
				var off int64
				for off < senders*perSender {
					res, err := b.Pull(ctx, mq.PullRequest{Group: group, Queue: mq.MessageQueue{Topic: "P", QueueID: q}, Offset: off, MaxMsgs: 7,
						Filter: "*", Suspend: true, MaxWait: time.Second})
					if err != nil {
						errs <- fmt.Errorf("%s queue %d at %d: %w", group, q, off, err)
						return
					}
					for _, m := range res.Messages {
						var s, i int
						if _, err := fmt.Sscanf(string(m.Body), "%d:%d", &s, &i); err != nil || m.QueueOffset != off || i != last[s]+1 {
							errs <- fmt.Errorf("%s queue %d: got offset %d body %q, want offset %d, sender %d message %d",
								group, q, m.QueueOffset, m.Body, off, s, last[s]+1)
							return
						}
						last[s] = i
						off++
					}
					if res.NextBeginOffset != off {
						errs <- fmt.Errorf("%s queue %d: next %d after offset %d (%v)", group, q, res.NextBeginOffset, off, res.Status)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := b.GroupStats("g1").MessagesOut; got != queues*senders*perSender {
		t.Errorf("g1 pulled %d messages, want %d", got, queues*senders*perSender)
	}
}

// BenchmarkPullParkedWake measures the time from Send to the return of a pull parked on the
// queue (async flush, so the fsync is not part of it).
func BenchmarkPullParkedWake(b *testing.B) {
	br := openBroker(b, &Options{Store: pullAsyncStore()})
	if err := br.CreateTopic(TopicConfig{Name: "W", ReadQueues: 1, WriteQueues: 1}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	offsets := make(chan int64)
	results := make(chan error)
	defer close(offsets)
	go func() {
		for off := range offsets {
			res, err := br.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "W"}, Offset: off, Filter: "*", Suspend: true, MaxWait: 10 * time.Second})
			if err == nil && (res.Status != mq.PullFound || len(res.Messages) != 1) {
				err = fmt.Errorf("pull at %d: %v with %d messages", off, res.Status, len(res.Messages))
			}
			results <- err
		}
	}()
	body := []byte(strings.Repeat("x", 100))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		offsets <- int64(i)
		for br.hold.parked() == 0 {
			runtime.Gosched()
		}
		b.StartTimer()
		if _, err := br.Send(ctx, &mq.Message{Topic: "W", Body: body}, nil); err != nil {
			b.Fatal(err)
		}
		if err := <-results; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPullFound32 measures a pull of 32 stored 100-byte messages.
func BenchmarkPullFound32(b *testing.B) {
	br := openBroker(b, &Options{Store: pullAsyncStore()})
	const batches = 64
	batch := make([]*mq.Message, 32)
	for i := 0; i < batches; i++ {
		for j := range batch {
			batch[j] = &mq.Message{Topic: "R", Tags: "t", Body: []byte(strings.Repeat("x", 100))}
		}
		if _, err := br.SendBatch(context.Background(), batch, mq.QueueIndex(0)); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.SetBytes(32 * 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := br.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "R"}, Offset: int64(i%batches) * 32, MaxMsgs: 32, Filter: "*"})
		if err != nil || res.Status != mq.PullFound || len(res.Messages) != 32 {
			b.Fatalf("pull: %v, %d messages, %v", res.Status, len(res.Messages), err)
		}
	}
}
