package store

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// acks records done calls of AppendAsync.
type acks struct {
	mu   sync.Mutex
	errs map[int]error
	n    map[int]int
	pos  []int64 // positions in the order done was called
}

func newAcks() *acks { return &acks{errs: map[int]error{}, n: map[int]int{}} }

func (a *acks) done(i int, m *Message) func(error) {
	return func(err error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.errs[i] = err
		a.n[i]++
		a.pos = append(a.pos, m.Pos)
	}
}

// check verifies that each of the n appends got done exactly once, with want, in log order.
func (a *acks) check(t *testing.T, n int, want error) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range n {
		if a.n[i] != 1 {
			t.Fatalf("append %d: done called %d times", i, a.n[i])
		}
		if !errors.Is(a.errs[i], want) {
			t.Fatalf("append %d: done(%v), want %v", i, a.errs[i], want)
		}
	}
	for i := 1; i < len(a.pos); i++ {
		if a.pos[i] <= a.pos[i-1] {
			t.Fatalf("done calls out of log order: position %d after %d", a.pos[i], a.pos[i-1])
		}
	}
}

// TestAppendAsyncAcknowledgesInLogOrder: one goroutine keeps many async appends in flight;
// each is acknowledged once, after it is durable, in log order, and is then readable.
func TestAppendAsyncAcknowledgesInLogOrder(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(fl.String(), func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{Flush: fl})
			defer s.Close()
			const n = 2000
			a := newAcks()
			var durable sync.WaitGroup
			durable.Add(n)
			for i := range n {
				m := msg("A", int32(i%2), i)
				d := a.done(i, m)
				err := s.AppendAsync([]*Message{m}, func(err error) {
					if err == nil && fl == commitlog.FlushSync && s.log.Durable() < m.Pos+int64(m.Size) {
						t.Errorf("append %d acknowledged before it was durable", i)
					}
					d(err)
					durable.Done()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			durable.Wait()
			a.check(t, n, nil)
			waitDispatched(t, s)
			if got := len(getAll(t, s, "A", 0, nil)) + len(getAll(t, s, "A", 1, nil)); got != n {
				t.Fatalf("%d messages readable, want %d", got, n)
			}
		})
	}
}

// TestAppendAsyncBadInput: an error found before writing is returned and done is not called.
func TestAppendAsyncBadInput(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	called := false
	done := func(error) { called = true }
	if err := s.AppendAsync([]*Message{{Topic: ""}}, done); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("empty topic: %v", err)
	}
	if err := s.AppendAsync([]*Message{{Topic: "T"}}, nil); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("nil done: %v", err)
	}
	for _, st := range []*Store{s, openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync})} {
		empty := 0
		if err := st.AppendAsync(nil, func(err error) {
			if err != nil {
				t.Errorf("empty batch: done(%v)", err)
			}
			empty++
		}); err != nil || empty != 1 {
			t.Fatalf("empty batch (%v): %v, done called %d times", st.opts.Flush, err, empty)
		}
		if st != s {
			st.Close()
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAsync([]*Message{{Topic: "T"}}, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if called {
		t.Fatal("done called for a refused append")
	}
}

// TestAppendAsyncCloseAcknowledgesAll: Close flushes and acknowledges every async append
// written before it, racing appenders included, and stops the acknowledgement goroutine.
func TestAppendAsyncCloseAcknowledgesAll(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	var (
		mu       sync.Mutex
		accepted int
		acked    = map[int64]error{}
		wg       sync.WaitGroup
	)
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				m := msg("C", int32(p), i)
				err := s.AppendAsync([]*Message{m}, func(err error) {
					mu.Lock()
					acked[m.Pos] = err
					mu.Unlock()
				})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := accepted
		mu.Unlock()
		if n >= 500 {
			break
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != accepted {
		t.Fatalf("%d appends accepted, %d acknowledged by Close", accepted, len(acked))
	}
	for pos, err := range acked {
		if err != nil {
			t.Fatalf("append at %d: done(%v)", pos, err)
		}
	}
	s = openStore(t, dir, Options{})
	defer s.Close()
	var stored int64
	for q := range int32(4) {
		stored += s.MaxOffset("C", q)
	}
	if stored != int64(accepted) {
		t.Fatalf("%d messages after reopening, %d acknowledged", stored, accepted)
	}
}

// TestAppendAsyncFlushFailure: when the fsync fails, done gets the error.
func TestAppendAsyncFlushFailure(t *testing.T) {
	fs := vfstest.NewCrashFS()
	s := openStore(t, t.TempDir(), Options{FS: fs})
	defer s.Close()
	boom := errors.New("boom")
	fs.FailSync(boom)
	got := make(chan error, 1)
	if err := s.AppendAsync([]*Message{msg("F", 0, 0)}, func(err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, boom) {
		t.Fatalf("done(%v), want the flush's error", err)
	}
	fs.FailSync(nil)
}

// TestAppendAsyncAllocs: rounds of async appends with many in flight allocate nothing in the
// store once it is warm. The acknowledgement queue's two buffers alternate between the
// appenders and the ack goroutine; one dropped whenever the goroutine found the queue empty
// made every burst grow a new queue, garbage in proportion to the sends in flight.
func TestAppendAsyncAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	// Segments large enough that none is created in the measured rounds.
	s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushSync, SegmentSize: 16 << 20, QueueSegmentEntries: 1 << 20})
	defer s.Close()
	const inFlight = 256
	body := make([]byte, 100)
	msgs := make([]Message, inFlight)
	batches := make([][]*Message, inFlight)
	for i := range msgs {
		batches[i] = []*Message{&msgs[i]}
	}
	var wg sync.WaitGroup
	done := func(err error) {
		if err != nil {
			t.Error(err)
		}
		wg.Done()
	}
	round := func() {
		wg.Add(inFlight)
		for i := range msgs {
			msgs[i] = Message{Topic: "A", Body: body}
			if err := s.AppendAsync(batches[i], done); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
	}
	for range 20 { // warm: the queue's buffers reach their size, the topic its queue
		round()
	}
	if n := testing.AllocsPerRun(50, round) / inFlight; n > 0.01 {
		t.Errorf("%.3f allocations per async append, want 0", n)
	}
}

// TestAppendAsyncAckNotHeldByLaterBatch checks, on a fake clock with fsyncs of 1 ms, that a
// batch whose fsync has completed is acknowledged as soon as the acknowledgement goroutine is
// free, not after the fsync of a batch queued behind it: B's fsync ends while A's done
// function still runs, C is appended after B's fsync began, and B is acknowledged when A's
// done returns, before C's fsync.
func TestAppendAsyncAckNotHeldByLaterBatch(t *testing.T) {
	const fsync = time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		fs := vfstest.StepFS{FS: vfstest.NewCrashFS(), Before: func(s vfstest.Step) {
			if s.Op == vfstest.StepSync && strings.Contains(s.Path, "prealloc-") {
				time.Sleep(fsync)
			}
		}}
		s := openStore(t, t.TempDir(), testOptions(Options{FS: fs, Flush: commitlog.FlushSync}))
		defer s.Close()
		synctest.Wait()
		start := time.Now()
		acked := make(map[string]time.Duration)
		var mu sync.Mutex
		send := func(name string, hold time.Duration) {
			t.Helper()
			err := s.AppendAsync([]*Message{{Topic: "T", Body: []byte(name)}}, func(err error) {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				mu.Lock()
				acked[name] = time.Since(start)
				mu.Unlock()
				time.Sleep(hold) // a slow done function holds the acknowledgements behind it
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		send("A", 1200*time.Microsecond) // its fsync: 0-1 ms; its done runs to 2.2 ms
		time.Sleep(1100 * time.Microsecond)
		send("B", 0) // its fsync: 1.1-2.1 ms
		time.Sleep(400 * time.Microsecond)
		send("C", 0) // after B's fsync began: the next one
		time.Sleep(10 * fsync)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got, want := acked["B"], 2200*time.Microsecond; got != want {
			t.Errorf("B acknowledged at %v, want %v (when A's done returned)", got, want)
		}
		if acked["C"] <= acked["B"] || acked["C"] > 5*fsync {
			t.Errorf("C acknowledged at %v, want after B (%v) and within %v", acked["C"], acked["B"], 5*fsync)
		}
	})
}
