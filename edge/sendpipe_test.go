package edge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// waitCount waits up to 10 s for c to reach want.
func waitCount(t *testing.T, c *atomic.Int64, want int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s, want %d", c.Load(), what, want)
		}
	}
	if c.Load() != want {
		t.Fatalf("%d %s, want %d", c.Load(), what, want)
	}
}

// holdPipe makes b's pipe take every SendAsync that waits for no fsync and hold them until
// release is called: the pipe is busy (its goroutine woken, as a first queued send does) and
// cannot append.
func holdPipe(b *Broker) (release func()) {
	release = holdPipeUnwoken(b)
	select {
	case b.pipe.wake <- struct{}{}:
	default:
	}
	return release
}

// holdPipeUnwoken is holdPipe without waking the pipe's goroutine: the sends it takes wait
// for whoever appends them next (a caller's settle, a full pipe, or Close), not for it.
func holdPipeUnwoken(b *Broker) (release func()) {
	b.pipe.appendMu.Lock()
	b.pipe.busy.Store(true)
	return b.pipe.appendMu.Unlock
}

// openAsyncBroker opens a broker whose store flushes asynchronously, so that SendAsync's
// sends wait for no fsync, with a topic of one queue.
func openAsyncBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	b := openBrokerAt(t, dir, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024}})
	if err := b.CreateTopic(TopicConfig{Name: "P", WriteQueues: 1, ReadQueues: 1}); err != nil && !errors.Is(err, ErrTopicExists) {
		t.Fatal(err)
	}
	return b
}

// pullAll returns the bodies of queue 0 of topic P from offset 0.
func pullAll(t *testing.T, b *Broker) []string {
	t.Helper()
	var bodies []string
	for off := int64(0); ; {
		res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "P", QueueID: 0}, Offset: off, MaxMsgs: 1024, Filter: "*"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			return bodies
		}
		for _, m := range res.Messages {
			bodies = append(bodies, string(m.Body))
		}
		off = res.NextBeginOffset
	}
}

// TestSendPipeKeepsEachSendersOrder: goroutines that send fast with SendAsync (their sends
// handed to the pipe) have every send acknowledged once, without error, at the offset it
// was stored at, and each goroutine's messages stored in the order it sent them. The pipe is
// held until it has queued 1,000 sends, so that some go through it however slowly the
// senders run (the race detector on a loaded machine spaces them out past pipeGap); then
// it runs free.
func TestSendPipeKeepsEachSendersOrder(t *testing.T) {
	b := openAsyncBroker(t, t.TempDir())
	const senders, each = 4, 3000
	offsets := make([][]int64, senders)
	var acks atomic.Int64
	var wg sync.WaitGroup
	release := holdPipe(b)
	for g := range senders {
		offsets[g] = make([]int64, each)
		wg.Go(func() {
			for i := range each {
				m := &mq.Message{Topic: "P", Body: fmt.Appendf(nil, "%d-%05d", g, i)}
				err := b.SendAsync(context.Background(), m, nil, func(r mq.SendResult, err error) {
					if err != nil {
						t.Errorf("sender %d, send %d: %v", g, i, err)
					}
					offsets[g][i] = r.QueueOffset
					acks.Add(1)
				})
				if err != nil {
					t.Errorf("sender %d, send %d: %v", g, i, err)
					return
				}
			}
		})
	}
	for deadline := time.Now().Add(time.Minute); b.pipe.queued.Load() < 1000; time.Sleep(time.Millisecond) { // poll: the senders queue
		if time.Now().After(deadline) {
			release()
			wg.Wait() // the senders end: each makes its sends
			t.Fatalf("%d sends queued in the held pipe after 1 min, want 1,000", b.pipe.queued.Load())
		}
	}
	release()
	wg.Wait()
	waitCount(t, &acks, senders*each, "sends acknowledged")
	if b.pipe.piped.Load() == 0 {
		t.Fatal("no send went through the pipe: the test proves nothing")
	}
	bodies := pullAll(t, b)
	if len(bodies) != senders*each {
		t.Fatalf("%d messages stored, want %d", len(bodies), senders*each)
	}
	next := make([]int, senders)
	for off, body := range bodies {
		var g, i int
		if _, err := fmt.Sscanf(body, "%d-%d", &g, &i); err != nil {
			t.Fatalf("offset %d: body %q", off, body)
		}
		if i != next[g] {
			t.Fatalf("offset %d: sender %d's send %d, want its send %d (out of order)", off, g, i, next[g])
		}
		next[g]++
		if offsets[g][i] != int64(off) {
			t.Fatalf("sender %d, send %d: acknowledged at offset %d, stored at %d", g, i, offsets[g][i], off)
		}
	}
	t.Logf("%d of %d sends went through the pipe", b.pipe.piped.Load(), senders*each)
}

// TestSendAfterPipedSends: a Send (and a batch) made right after SendAsync calls is stored
// after them, though those may still be in the pipe. The pipe is held while the SendAsync
// calls queue in it (as sends that come fast do) and released just before the Send, so that
// the Send comes while the pipe's goroutine is about to append them.
func TestSendAfterPipedSends(t *testing.T) {
	b := openAsyncBroker(t, t.TempDir())
	ctx := context.Background()
	const n = 2000 // under pipeMax: no caller appends while the pipe is held
	total := 0
	for round := range 5 {
		release := holdPipe(b)
		for range n {
			if err := b.SendAsync(ctx, &mq.Message{Topic: "P", Body: []byte("async")}, nil, func(mq.SendResult, error) {}); err != nil {
				release()
				t.Fatal(err)
			}
		}
		release()
		total += n
		var at int64
		if round%2 == 0 {
			r, err := b.Send(ctx, &mq.Message{Topic: "P", Body: []byte("sync")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			at = r.QueueOffset
		} else {
			rs, err := b.SendBatch(ctx, []*mq.Message{{Topic: "P", Body: []byte("sync")}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			at = rs[0].QueueOffset
		}
		if at != int64(total) {
			t.Fatalf("round %d: the send after %d SendAsync calls stored at offset %d, want %d", round, total, at, total)
		}
		total++
	}
	if b.pipe.piped.Load() == 0 {
		t.Fatal("no send went through the pipe: the test proves nothing")
	}
}

// TestSendPipeRefusedMessage: a message the store refuses (properties over its limit) in
// a batch of the pipe fails alone; the sends around it are stored.
func TestSendPipeRefusedMessage(t *testing.T) {
	b := openAsyncBroker(t, t.TempDir())
	ctx := context.Background()
	// Every send goes to the pipe, and it appends them in one batch once released.
	release := holdPipe(b)
	const n = 3000 // under pipeMax: no caller appends
	var failed, ok atomic.Int64
	var failedAt atomic.Int64
	failedAt.Store(-1)
	for i := range n {
		m := &mq.Message{Topic: "P", Body: fmt.Appendf(nil, "%05d", i)}
		if i == n/2 {
			m.SetProperty("big", strings.Repeat("x", 70<<10)) // over the store's 63 KiB of tags, keys and properties
		}
		err := b.SendAsync(ctx, m, nil, func(_ mq.SendResult, err error) {
			if err != nil {
				if !errors.Is(err, mq.ErrMessageTooLarge) {
					t.Errorf("send %d: %v, want mq.ErrMessageTooLarge", i, err)
				}
				failed.Add(1)
				failedAt.Store(int64(i))
				return
			}
			ok.Add(1)
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	release()
	b.pipe.settle()
	waitCount(t, &ok, n-1, "sends acknowledged")
	if failed.Load() != 1 || failedAt.Load() != n/2 || ok.Load() != n-1 {
		t.Fatalf("%d failed (the last: send %d), %d acknowledged; want send %d alone to fail", failed.Load(), failedAt.Load(), ok.Load(), n/2)
	}
	if got := len(pullAll(t, b)); got != n-1 {
		t.Fatalf("%d messages stored, want %d", got, n-1)
	}
}

// TestSendPipeClose: Close appends what the pipe holds before the store closes: every send
// SendAsync took is acknowledged once, those acknowledged without error are there after a
// reopen, and a SendAsync after Close is refused.
func TestSendPipeClose(t *testing.T) {
	dir := t.TempDir()
	b := openAsyncBroker(t, dir)
	ctx := context.Background()
	var taken, acked, okAcks atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Held until 3,000 sends queue, so that sends go through the pipe however slowly a
	// loaded machine runs the senders.
	release := holdPipe(b)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := b.SendAsync(ctx, &mq.Message{Topic: "P", Body: []byte("x")}, nil, func(_ mq.SendResult, err error) {
					acked.Add(1)
					if err == nil {
						okAcks.Add(1)
					}
				})
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("SendAsync: %v, want ErrClosed", err)
					}
					return
				}
				taken.Add(1)
			}
		})
	}
	for deadline := time.Now().Add(time.Minute); b.pipe.queued.Load() < 3000; time.Sleep(time.Millisecond) { // poll: the senders queue
		if t.Failed() || time.Now().After(deadline) {
			release()
			close(stop)
			wg.Wait()
			t.Fatalf("%d sends queued in the held pipe, want 3,000", b.pipe.queued.Load())
		}
	}
	release()
	for deadline := time.Now().Add(time.Minute); b.pipe.piped.Load() < 3000; time.Sleep(time.Millisecond) { // poll: the pipe appends
		if t.Failed() || time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("%d sends appended from the pipe, want 3,000", b.pipe.piped.Load())
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if acked.Load() != taken.Load() {
		t.Fatalf("%d sends taken, %d acknowledged", taken.Load(), acked.Load())
	}
	if err := b.SendAsync(ctx, &mq.Message{Topic: "P", Body: []byte("x")}, nil, func(mq.SendResult, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("SendAsync after Close: %v, want ErrClosed", err)
	}
	b = openAsyncBroker(t, dir)
	if got := len(pullAll(t, b)); int64(got) != okAcks.Load() {
		t.Fatalf("%d messages after a reopen, %d acknowledged", got, okAcks.Load())
	}
}

// TestSendPipeCloseAppendsPending: sends the pipe holds when Close begins are appended and
// acknowledged before the store closes.
func TestSendPipeCloseAppendsPending(t *testing.T) {
	dir := t.TempDir()
	b := openAsyncBroker(t, dir)
	// Unwoken, so that only Close's own appending of what the pipe holds stores them.
	release := holdPipeUnwoken(b)
	const n = 100
	var acked atomic.Int64
	for i := range n {
		if err := b.SendAsync(context.Background(), &mq.Message{Topic: "P", Body: []byte("x")}, nil, func(_ mq.SendResult, err error) {
			if err != nil {
				t.Errorf("send %d: %v", i, err)
			}
			acked.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if acked.Load() != n {
		t.Fatalf("%d of %d sends acknowledged by the time Close returned", acked.Load(), n)
	}
	b = openAsyncBroker(t, dir)
	if got := len(pullAll(t, b)); got != n {
		t.Fatalf("%d messages after a reopen, want %d", got, n)
	}
}

// TestSendPipeDoneSendsAgain: a done function called from the pipe may send again, through
// the pipe or not, without waiting on the pipe's own appends.
func TestSendPipeDoneSendsAgain(t *testing.T) {
	b := openAsyncBroker(t, t.TempDir())
	ctx := context.Background()
	release := holdPipe(b)
	var sent atomic.Int64
	err := b.SendAsync(ctx, &mq.Message{Topic: "P", Body: []byte("first")}, nil, func(_ mq.SendResult, err error) {
		if err != nil {
			t.Error(err)
		}
		if _, err := b.Send(ctx, &mq.Message{Topic: "P", Body: []byte("from done")}, nil); err != nil {
			t.Error(err)
		}
		if err := b.SendAsync(ctx, &mq.Message{Topic: "P", Body: []byte("async from done")}, nil, func(_ mq.SendResult, err error) {
			if err != nil {
				t.Error(err)
			}
			sent.Add(1)
		}); err != nil {
			t.Error(err)
		}
		sent.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	release()
	go b.pipe.settle() // a deadlock shows as a count short of 2
	waitCount(t, &sent, 2, "done functions returned")
	if got := pullAll(t, b); len(got) != 3 || got[0] != "first" {
		t.Fatalf("stored %q, want first and the two sends of its done function", got)
	}
}

// TestSendPipeSplitsLargeBatches: what the pipe holds past pipeBatchBytes is appended in
// several batches, oldest first, every send acknowledged at the offset it was stored at.
func TestSendPipeSplitsLargeBatches(t *testing.T) {
	b := openAsyncBroker(t, t.TempDir())
	release := holdPipe(b)
	const n = 100
	body := make([]byte, 8<<10) // 100 of them: about three batches
	offsets := make([]int64, n)
	var acked atomic.Int64
	for i := range n {
		m := &mq.Message{Topic: "P", Body: append(fmt.Appendf(nil, "%03d", i), body...)}
		if err := b.SendAsync(context.Background(), m, nil, func(r mq.SendResult, err error) {
			if err != nil {
				t.Errorf("send %d: %v", i, err)
			}
			offsets[i] = r.QueueOffset
			acked.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if k := batchPrefix(b.pipe.pending); k >= n || k < 1 {
		t.Fatalf("the first batch takes %d of %d sends of 8 KiB", k, n)
	}
	release()
	b.pipe.settle() // all of them, in several batches
	if got := b.pipe.piped.Load(); got != n {
		t.Fatalf("settle returned with %d of %d sends appended", got, n)
	}
	waitCount(t, &acked, n, "sends acknowledged")
	got := pullAll(t, b)
	if len(got) != n {
		t.Fatalf("%d messages stored, want %d", len(got), n)
	}
	for i, body := range got {
		if want := fmt.Sprintf("%03d", i); body[:3] != want || offsets[i] != int64(i) {
			t.Fatalf("offset %d holds send %s, acknowledged at %d", i, body[:3], offsets[i])
		}
	}
}

func TestBatchPrefix(t *testing.T) {
	op := func(size int) *asyncSend { return &asyncSend{s: store.Message{Body: make([]byte, size)}} }
	for _, c := range []struct {
		name  string
		sizes []int
		want  int
	}{
		{"one small", []int{10}, 1},
		{"one over the bound", []int{pipeBatchBytes + 1}, 1},
		{"the second over", []int{10, pipeBatchBytes}, 1},
		{"all fit", []int{1000, 1000, 1000}, 3},
		{"up to the bound", []int{pipeBatchBytes / 2, pipeBatchBytes/2 - 64, 1}, 2},
	} {
		ops := make([]*asyncSend, len(c.sizes))
		for i, n := range c.sizes {
			ops[i] = op(n)
		}
		if got := batchPrefix(ops); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
