package consumer

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestProcessQueueOutOfOrderRemoval checks the tombstoned cache against a plain model under
// random puts (including offsets removed before, which come back), out-of-order removals,
// takes and rollbacks: RemoveMessages returns the smallest cached offset (or the highest
// put + 1), and Count, Size, MaxSpan and hasCached agree with the model.
func TestProcessQueueOutOfOrderRemoval(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	pq := newPQ(t)
	model := map[int64]bool{} // cached offsets (not the consuming set)
	var offMax int64
	next := int64(0)
	check := func(step int) {
		t.Helper()
		var keys []int64
		var size int64
		for o := range model {
			keys = append(keys, o)
			size += o + 1
		}
		slices.Sort(keys)
		if got := pq.Count(); got != int64(len(keys)) {
			t.Fatalf("step %d: Count = %d, want %d", step, got, len(keys))
		}
		if got := pq.Size(); got != size {
			t.Fatalf("step %d: Size = %d, want %d", step, got, size)
		}
		wantSpan := int64(0)
		if len(keys) > 0 {
			wantSpan = keys[len(keys)-1] - keys[0]
		}
		if got := pq.MaxSpan(); got != wantSpan {
			t.Fatalf("step %d: MaxSpan = %d, want %d", step, got, wantSpan)
		}
		if got := pq.hasCached(); got != (len(keys) > 0) {
			t.Fatalf("step %d: hasCached = %v, want %v", step, got, len(keys) > 0)
		}
	}
	for step := range 20000 {
		switch op := r.IntN(10); {
		case op < 4: // put a batch, sometimes with old offsets
			var offs []int64
			for range r.IntN(8) + 1 {
				if next > 0 && r.IntN(6) == 0 {
					offs = append(offs, r.Int64N(next))
				} else {
					offs = append(offs, next)
					next++
				}
			}
			pq.PutMessages(pqMsgs(offs...))
			for _, o := range offs {
				model[o] = true
				offMax = max(offMax, o)
			}
		case op < 9: // remove random cached offsets (and one never cached)
			var offs []int64
			for o := range model {
				if r.IntN(3) == 0 {
					offs = append(offs, o)
				}
			}
			offs = append(offs, next+100)
			got := pq.removeMessages(pqMsgs(offs...))
			if len(model) == 0 {
				if got != -1 {
					t.Fatalf("step %d: RemoveMessages on an empty cache = %d, want -1", step, got)
				}
				break
			}
			for _, o := range offs {
				delete(model, o)
			}
			want := offMax + 1
			for o := range model {
				want = min(want, o)
			}
			if got != want {
				t.Fatalf("step %d: RemoveMessages = %d, want %d", step, got, want)
			}
		default: // take the lowest, then put them back
			ms := pq.takeMessages(3)
			var keys []int64
			for o := range model {
				keys = append(keys, o)
			}
			slices.Sort(keys)
			if want := keys[:min(3, len(keys))]; !slices.Equal(offsetsOf(ms), want) {
				t.Fatalf("step %d: TakeMessages = %v, want %v", step, offsetsOf(ms), want)
			}
			pq.Rollback()
		}
		check(step)
	}
}

// TestWorkerPoolRunsEveryTask: tasks submitted from several goroutines all run once, extra
// workers start when the queue is full, and a full pool at its maximum refuses.
func TestWorkerPoolRunsEveryTask(t *testing.T) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	p := newWorkerPool(2, 4, &wg, done)
	var ran atomic.Int64
	var sub sync.WaitGroup
	for range 4 {
		sub.Go(func() {
			for range 5000 {
				for !p.submit(funcTask(func() { ran.Add(1) })) {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	sub.Wait()
	waitFor(t, 30*time.Second, "every task", func() bool { return ran.Load() == 20000 })
	// The extra workers the full queue started leave once they find it empty: one still
	// alive would take a task below that the standing workers are meant to block on.
	waitFor(t, 30*time.Second, "the extra workers gone", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.n == 2
	})

	// Block every worker, fill the queue, then see extra workers take tasks and the pool refuse.
	release := make(chan struct{})
	var started atomic.Int64
	block := func() { started.Add(1); <-release }
	for range 2 {
		if !p.submit(funcTask(block)) {
			t.Fatal("submit to idle workers refused")
		}
	}
	waitFor(t, 30*time.Second, "the standing workers busy", func() bool { return started.Load() == 2 })
	for range poolQueueSize {
		if !p.submit(funcTask(func() {})) {
			t.Fatal("submit to a queue with room refused")
		}
	}
	for range 2 {
		if !p.submit(funcTask(block)) { // queue full: an extra worker runs it
			t.Fatal("submit with room for an extra worker refused")
		}
	}
	waitFor(t, 30*time.Second, "extra workers busy", func() bool { return started.Load() == 4 })
	if p.submit(funcTask(func() {})) {
		t.Fatal("submit to a full pool at its maximum accepted")
	}
	close(release)
	close(done)
	wg.Wait()
}

// TestConcurrentBatchesRunInParallel: one pull's batches of one message reach as many
// listener calls at once as ConsumeGoroutinesMin, although several batches share a pool
// task; and so do they when the listener's calls were fast until then (a pull's batches
// then go to two tasks) and turn slow: a slow call brings in helpers.
func TestConcurrentBatchesRunInParallel(t *testing.T) {
	t.Run("slow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { testConcurrentBatchesRunInParallel(t, false) })
	})
	t.Run("fast then slow", func(t *testing.T) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // fast pulls go to two tasks
		synctest.Test(t, func(t *testing.T) { testConcurrentBatchesRunInParallel(t, true) })
	})
}

func testConcurrentBatchesRunInParallel(t *testing.T, fastFirst bool) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	if fastFirst {
		sendN(t, b, "T", "fast", 64, nil)
	} else {
		sendN(t, b, "T", "m", 32, nil)
	}
	o := fastOptions(t, "g")
	o.PullBatchSize = 32
	o.ConsumeGoroutinesMin, o.ConsumeGoroutinesMax = 8, 8
	var (
		mu      sync.Mutex
		in, top int
		closed  bool
	)
	all := make(chan struct{})
	c := newCounter()
	pc := startConsumer(t, b, o, "T", ConcurrentListener(func(ctx context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		if strings.HasPrefix(string(msgs[0].Body), "fast") {
			c.add(msgs)
			return ConsumeSuccess, nil
		}
		mu.Lock()
		in++
		top = max(top, in)
		if in == 8 && top == 8 && !closed {
			closed = true
			close(all)
		}
		mu.Unlock()
		select { // hold the call until 8 are in (or give up)
		case <-all:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
		mu.Lock()
		in--
		mu.Unlock()
		c.add(msgs)
		return ConsumeSuccess, nil
	}))
	want := 32
	if fastFirst {
		waitFor(t, 10*time.Second, "the fast messages", func() bool { return c.distinct() == 64 })
		if tasks := pc.tasksFor(32); tasks != 2 {
			t.Fatalf("after fast calls a pull of 32 batches goes to %d tasks, want 2", tasks)
		}
		want += 64
		batch := make([]*mq.Message, 32) // one append: one pull takes them all
		for i := range batch {
			batch[i] = &mq.Message{Topic: "T", Body: []byte("m" + strconv.Itoa(i))}
		}
		if _, err := b.SendBatch(context.Background(), batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "all messages", func() bool { return c.distinct() == want })
	mu.Lock()
	defer mu.Unlock()
	if top != 8 {
		t.Fatalf("at most %d listener calls at once, want 8", top)
	}
}

// TestFlowControlEndsWhenDrained: a pull held back by flow control goes on once the
// listeners drain the cache, long before FlowControlDelay, for the count and for the span
// threshold.
func TestFlowControlEndsWhenDrained(t *testing.T) {
	for _, span := range []bool{false, true} {
		name := map[bool]string{false: "count", true: "span"}[span]
		t.Run(name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testFlowControlEndsWhenDrained(t, span) }) })
	}
}

func testFlowControlEndsWhenDrained(t *testing.T, span bool) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 1)
	sendN(t, b, "T", "m", 200, nil)
	o := fastOptions(t, "g")
	o.FlowControlDelay = time.Minute
	o.PullBatchSize = 4
	if span {
		o.ConsumeConcurrentlyMaxSpan = 20
	} else {
		o.PullThresholdForQueue = 10
	}
	release := make(chan struct{})
	c := newCounter()
	pc := startConsumer(t, b, o, "T", ConcurrentListener(func(ctx context.Context, msgs []*Message, _ *ConcurrentlyContext) (ConsumeConcurrentlyStatus, error) {
		if msgs[0].QueueOffset == 0 { // the head: holds the span open
			select {
			case <-release:
			case <-ctx.Done():
			}
		} else if !span {
			select {
			case <-release:
			case <-ctx.Done():
			}
		} else {
			// Slower than a pull, so that the cache holds messages beyond the head
			// when the next pull checks the span (else it spans just the head).
			time.Sleep(time.Millisecond)
		}
		c.add(msgs)
		return ConsumeSuccess, nil
	}))
	waitFor(t, 5*time.Second, "flow control", func() bool { return pc.Stats().Topics["T"].FlowControls > 0 })
	close(release)
	waitFor(t, 10*time.Second, "all messages well before FlowControlDelay", func() bool { return c.distinct() == 200 })
}
