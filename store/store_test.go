package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/dirlock"
	"github.com/edgemq/edgemq/store/internal/smaps"
	"github.com/edgemq/edgemq/store/internal/vfstest"
)

const testSeg = 256 << 10

func testOptions(o Options) Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 20
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 64 << 10
	}
	if o.QueueSegmentEntries == 0 {
		o.QueueSegmentEntries = 64
	}
	o.MetaNoSync = true
	return o
}

func openStore(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	o = testOptions(o)
	s, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func msg(topic string, q int32, i int) *Message {
	tag := "even"
	if i%2 == 1 {
		tag = "odd"
	}
	return &Message{Topic: topic, QueueID: q, Tags: tag, Keys: fmt.Sprintf("k%d", i), Body: []byte(fmt.Sprintf("body-%s-%d-%d", topic, q, i))}
}

func appendN(t testing.TB, s *Store, topic string, q int32, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := s.Append([]*Message{msg(topic, q, i)}); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
}

// waitDispatched waits until the dispatcher caught up with the log.
func waitDispatched(t testing.TB, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.DispatchedPos() < s.log.Written() {
		if time.Now().After(deadline) {
			t.Fatalf("dispatch stuck at %d of %d", s.DispatchedPos(), s.log.Written())
		}
		time.Sleep(time.Millisecond)
	}
}

func getAll(t testing.TB, s *Store, topic string, q int32, filter Filter) []Message {
	t.Helper()
	var out []Message
	off := s.MinOffset(topic, q)
	for {
		res, err := s.GetMessages(topic, q, off, 32, filter)
		if err != nil {
			t.Fatalf("GetMessages: %v", err)
		}
		out = append(out, res.Messages...)
		if res.Status == OffsetOverflowOne || res.Status == NoMessageInQueue {
			return out
		}
		if res.NextBeginOffset <= off {
			t.Fatalf("next offset %d did not move from %d (status %v)", res.NextBeginOffset, off, res.Status)
		}
		off = res.NextBeginOffset
	}
}

func TestAppendGetRoundTrip(t *testing.T) {
	for _, mode := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, Options{Flush: mode})
			full := &Message{Topic: "Full", QueueID: 2, Flag: 7, SysFlag: 0x10, BornTime: 12345,
				BornHost: netip.MustParseAddrPort("[2001:db8::1]:10911"), ReconsumeTimes: 3, Tags: "TagA", Keys: "K1 K2",
				Properties: map[string]string{"UNIQ_KEY": "ABC", "a": ""}, Body: []byte("payload")}
			if err := s.Append([]*Message{full}); err != nil {
				t.Fatal(err)
			}
			appendN(t, s, "Telemetry", 0, 0, 100)
			appendN(t, s, "Telemetry", 1, 0, 50)
			batch := []*Message{msg("Telemetry", 0, 100), msg("Other", 0, 0), msg("Telemetry", 0, 101)}
			if err := s.Append(batch); err != nil {
				t.Fatal(err)
			}
			if batch[0].QueueOffset != 100 || batch[1].QueueOffset != 0 || batch[2].QueueOffset != 101 {
				t.Fatalf("batch offsets %d %d %d, want 100 0 101", batch[0].QueueOffset, batch[1].QueueOffset, batch[2].QueueOffset)
			}
			if batch[1].Pos != batch[0].Pos+int64(batch[0].Size) {
				t.Fatal("batch not contiguous")
			}
			check := func(s *Store) {
				waitDispatched(t, s)
				got := getAll(t, s, "Telemetry", 0, nil)
				if len(got) != 102 {
					t.Fatalf("got %d messages, want 102", len(got))
				}
				for i, m := range got {
					want := msg("Telemetry", 0, i)
					if m.QueueOffset != int64(i) || !bytes.Equal(m.Body, want.Body) || m.Tags != want.Tags || m.Keys != want.Keys || m.Topic != "Telemetry" {
						t.Fatalf("message %d: got %+v", i, m)
					}
				}
				res, err := s.GetMessages("Full", 2, 0, 1, nil)
				if err != nil || len(res.Messages) != 1 {
					t.Fatalf("Full: %v %v", res.Status, err)
				}
				m := res.Messages[0]
				if m.Flag != 7 || m.SysFlag != 0x10 || m.BornTime != 12345 || m.BornHost != full.BornHost || m.ReconsumeTimes != 3 ||
					m.Tags != "TagA" || m.Keys != "K1 K2" || m.Properties["UNIQ_KEY"] != "ABC" || len(m.Properties) != 2 || string(m.Body) != "payload" || m.Pos != full.Pos {
					t.Fatalf("Full: got %+v", m)
				}
				rm, err := s.ReadMessage(full.Pos)
				if err != nil || rm.Keys != "K1 K2" || rm.QueueOffset != 0 {
					t.Fatalf("ReadMessage: %+v %v", rm, err)
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, Options{Flush: mode})
			defer s.Close()
			check(s)
			appendN(t, s, "Telemetry", 0, 102, 1)
			waitDispatched(t, s)
			if got := s.MaxOffset("Telemetry", 0); got != 103 {
				t.Fatalf("max offset after reopen and append: %d, want 103", got)
			}
		})
	}
}

// tagsFilter is a Filter of exact tags, as the broker's TAG filter is: tag hashes first,
// then the tags.
type tagsFilter []string

func (f tagsFilter) MatchHash(h int64) bool {
	return slices.ContainsFunc(f, func(t string) bool { return TagHash(t) == h })
}

func (f tagsFilter) MatchTag(tag string) bool { return slices.Contains(f, tag) }

func TestGetMessagesStatuses(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	appendN(t, s, "T", 0, 0, 10)
	waitDispatched(t, s)
	odd, none := tagsFilter{"odd"}, tagsFilter{"nothing", "missing"}
	for _, tc := range []struct {
		name   string
		topic  string
		offset int64
		filter Filter
		want   GetStatus
		next   int64
		n      int
	}{
		{"unknown queue", "Nope", 0, nil, NoMessageInQueue, 0, 0},
		{"found", "T", 3, nil, Found, 10, 7},
		{"at max", "T", 10, nil, OffsetOverflowOne, 10, 0},
		{"past max", "T", 15, nil, OffsetOverflowBadly, 10, 0},
		{"filtered", "T", 0, odd, Found, 10, 5},
		{"nothing matches", "T", 0, none, NoMatchedMessage, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.GetMessages(tc.topic, 0, tc.offset, 32, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want || res.NextBeginOffset != tc.next || len(res.Messages) != tc.n {
				t.Fatalf("got %v next %d n %d, want %v next %d n %d", res.Status, res.NextBeginOffset, len(res.Messages), tc.want, tc.next, tc.n)
			}
			if tc.topic == "T" && (res.MinOffset != 0 || res.MaxOffset != 10) {
				t.Fatalf("min %d max %d, want 0 10", res.MinOffset, res.MaxOffset)
			}
			for _, m := range res.Messages {
				if tc.filter != nil && !tc.filter.MatchTag(m.Tags) {
					t.Fatalf("filter %v let through tag %q", tc.filter, m.Tags)
				}
			}
		})
	}
	res, _ := s.GetMessages("T", 0, 0, 3, nil)
	if len(res.Messages) != 3 || res.NextBeginOffset != 3 {
		t.Fatalf("max 3: got %d next %d", len(res.Messages), res.NextBeginOffset)
	}
	if _, err := s.GetMessages("T", 0, 0, 0, nil); err == nil {
		t.Fatal("max 0 accepted")
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	before := s.log.Written()
	for _, tc := range []struct {
		m    *Message
		want error
	}{
		{&Message{Topic: "", Body: []byte("x")}, ErrInvalidMessage},
		{&Message{Topic: strings.Repeat("t", 256)}, ErrInvalidMessage},
		{&Message{Topic: "T", QueueID: -1}, ErrInvalidMessage},
		{&Message{Topic: "T", Body: make([]byte, 64<<10+1)}, ErrMessageTooLarge},
		{&Message{Topic: "T", Properties: map[string]string{"big": strings.Repeat("p", 64<<10)}}, ErrMessageTooLarge},
	} {
		good := msg("T", 0, 0)
		if err := s.Append([]*Message{good, tc.m}); !errors.Is(err, tc.want) {
			t.Errorf("got %v, want %v", err, tc.want)
		}
	}
	if s.log.Written() != before || s.MaxOffset("T", 0) != 0 {
		t.Fatal("a rejected batch wrote something")
	}
	appendN(t, s, "T", 0, 0, 1)
	waitDispatched(t, s)
	if s.MaxOffset("T", 0) != 1 {
		t.Fatal("offsets skipped after rejected batches")
	}
}

func TestOffsetByTime(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openStore(t, t.TempDir(), Options{Now: clock})
	defer s.Close()
	for i := 0; i < 100; i++ {
		appendN(t, s, "T", 0, i, 1)
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
	}
	waitDispatched(t, s)
	for _, tc := range []struct{ ts, want int64 }{
		{0, 0}, {1_700_000_000_000, 0}, {1_700_000_000_001, 1}, {1_700_000_042_000, 42}, {1_800_000_000_000, 100},
	} {
		got, err := s.OffsetByTime("T", 0, tc.ts)
		if err != nil || got != tc.want {
			t.Errorf("OffsetByTime(%d) = %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	defer s.Close()
	start := time.Now()
	_, err := Open(dir, nil)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second Open: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("second Open did not fail fast")
	}
}

func TestSettingsPinSegmentSize(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{SegmentSize: 1 << 20})
	s.Close()
	o := testOptions(Options{SegmentSize: 2 << 20})
	if _, err := Open(dir, &o); !errors.Is(err, ErrSettings) {
		t.Fatalf("reopen with another segment size: %v", err)
	}
	o = testOptions(Options{})
	o.SegmentSize = 0
	s, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("reopen with default segment size: %v", err)
	}
	defer s.Close()
	if s.log.SegmentSize() != 1<<20 {
		t.Fatalf("segment size %d, want the stored 1 MiB", s.log.SegmentSize())
	}
}

func TestArrivalListener(t *testing.T) {
	var mu sync.Mutex
	var got []Arrival
	s := openStore(t, t.TempDir(), Options{OnArrival: func(a Arrival) { mu.Lock(); got = append(got, a); mu.Unlock() }})
	defer s.Close()
	appendN(t, s, "T", 1, 0, 3)
	waitDispatched(t, s)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2].Topic != "T" || got[2].QueueID != 1 || got[2].Offset != 2 || got[2].TagHash != TagHash("even") || got[2].StoreTime == 0 {
		t.Fatalf("arrivals %+v", got)
	}
}

func TestRetentionMovesQueueHeads(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{SegmentSize: testSeg, MaxBytes: 3 * testSeg, MaxAge: -1, MaxUsedRatio: -1, MaxMessageSize: 16 << 10})
	defer s.Close()
	body := bytes.Repeat([]byte("r"), 2000)
	for i := 0; i < 1000; i++ {
		if err := s.Append([]*Message{{Topic: "T", Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	waitDispatched(t, s)
	if s.Log().Size() > 3*testSeg {
		t.Fatalf("log %d bytes over quota", s.Log().Size())
	}
	min := s.MinOffset("T", 0)
	if min == 0 {
		t.Fatal("queue head did not follow retention")
	}
	res, err := s.GetMessages("T", 0, 0, 32, nil)
	if err != nil || res.Status != OffsetTooSmall || res.NextBeginOffset != min {
		t.Fatalf("read below min: %v next %d, want OFFSET_TOO_SMALL next %d", res.Status, res.NextBeginOffset, min)
	}
	if got := getAll(t, s, "T", 0, nil); int64(len(got)) != 1000-min {
		t.Fatalf("got %d messages after min %d", len(got), min)
	}
}

func TestDiskFull(t *testing.T) {
	for _, policy := range []commitlog.OnFull{commitlog.FailWrites, commitlog.DropOldest} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			fs := vfstest.NewCrashFS()
			fs.SetCapacity(6*testSeg + 200<<10)
			s := openStore(t, t.TempDir(), Options{FS: fs, SegmentSize: testSeg, OnFull: policy, MaxAge: -1, MaxUsedRatio: -1, MaxMessageSize: 16 << 10, QueueSegmentEntries: 256})
			defer s.Close()
			body := bytes.Repeat([]byte("f"), 1000)
			var stored int
			var err error
			for i := 0; i < 5000; i++ {
				if err = s.Append([]*Message{{Topic: "T", Body: body}}); err != nil {
					break
				}
				stored++
			}
			waitDispatched(t, s)
			if policy == commitlog.FailWrites {
				if !errors.Is(err, commitlog.ErrDiskFull) {
					t.Fatalf("got %v after %d appends, want ErrDiskFull", err, stored)
				}
				if got := getAll(t, s, "T", 0, nil); len(got) != stored {
					t.Fatalf("reads after disk full: %d messages, want %d", len(got), stored)
				}
				fs.SetCapacity(0) // space returns
				if err := s.Append([]*Message{{Topic: "T", Body: body}}); err != nil {
					t.Fatalf("append after space returned: %v", err)
				}
				waitDispatched(t, s)
				if got := getAll(t, s, "T", 0, nil); len(got) != stored+1 {
					t.Fatalf("after resume: %d messages, want %d", len(got), stored+1)
				}
			} else {
				if err != nil {
					t.Fatalf("dropOldest: append failed after %d: %v", stored, err)
				}
				if s.MinOffset("T", 0) == 0 {
					t.Fatal("dropOldest deleted nothing")
				}
			}
		})
	}
}

func TestConcurrentAppendAndGet(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync})
	defer s.Close()
	const producers, each = 4, 500
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := s.Append([]*Message{msg("C", int32(p%2), p*each+i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	var rwg sync.WaitGroup
	for q := int32(0); q < 2; q++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var off int64
			for {
				res, err := s.GetMessages("C", q, off, 32, nil)
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range res.Messages {
					if m.QueueOffset != off {
						t.Errorf("queue %d: got offset %d, want %d", q, m.QueueOffset, off)
						return
					}
					off++
				}
				if res.Status == OffsetOverflowOne || res.Status == NoMessageInQueue {
					select {
					case <-done:
						if off == s.MaxOffset("C", q) {
							return
						}
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	waitDispatched(t, s)
	close(done)
	rwg.Wait()
	if s.MaxOffset("C", 0)+s.MaxOffset("C", 1) != producers*each {
		t.Fatalf("max offsets %d+%d", s.MaxOffset("C", 0), s.MaxOffset("C", 1))
	}
}

func TestQueueRebuiltFromCommitlog(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{QueueSegmentEntries: 16})
	appendN(t, s, "T", 0, 0, 100)
	s.Close()
	// Damage the queue: drop its last files and the dispatch checkpoint says all is there.
	qdir := filepath.Join(dir, queuesDir, "T", "0")
	files, _ := filepath.Glob(filepath.Join(qdir, "*.cq"))
	for _, f := range files[len(files)-3:] {
		os.Remove(f)
	}
	s = openStore(t, dir, Options{QueueSegmentEntries: 16})
	defer s.Close()
	appendN(t, s, "T", 0, 100, 1)
	waitDispatched(t, s)
	got := getAll(t, s, "T", 0, nil)
	if len(got) != 101 {
		t.Fatalf("got %d messages after rebuild, want 101", len(got))
	}
	for i, m := range got {
		if m.QueueOffset != int64(i) || string(m.Body) != string(msg("T", 0, i).Body) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
}

// TestAppendDispatchesInline: on an otherwise idle store an append dispatches its own record
// before it returns (no hand-off to the dispatcher goroutine), in both flush modes.
func TestAppendDispatchesInline(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(fl.String(), func(t *testing.T) {
			var arrived atomic.Int64
			s := openStore(t, t.TempDir(), Options{Flush: fl, QueueFlushInterval: time.Hour, OnArrival: func(Arrival) { arrived.Add(1) }})
			defer s.Close()
			for i := range 200 {
				if err := s.Append([]*Message{msg("T", 0, i)}); err != nil {
					t.Fatal(err)
				}
				if got := arrived.Load(); got != int64(i+1) {
					t.Fatalf("after append %d: %d arrivals, want %d", i, got, i+1)
				}
				if got := s.MaxOffset("T", 0); got != int64(i+1) {
					t.Fatalf("after append %d: max offset %d", i, got)
				}
			}
		})
	}
}

// TestCloseWhileAppending: appends racing Close either succeed (and are read back after a
// reopen) or fail with ErrClosed; nothing panics or dispatches into closed queues.
func TestCloseWhileAppending(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{Flush: commitlog.FlushAsync})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := s.Append([]*Message{msg("C", int32(p%2), i)})
				if errors.Is(err, ErrClosed) || errors.Is(err, commitlog.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				ok.Add(1)
			}
		})
	}
	for ok.Load() < 2000 {
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s = openStore(t, dir, Options{Flush: commitlog.FlushAsync})
	defer s.Close()
	if got := s.MaxOffset("C", 0) + s.MaxOffset("C", 1); got != ok.Load() {
		t.Fatalf("%d messages in the queues after reopen, %d appends succeeded", got, ok.Load())
	}
}

// TestHandedOverEntriesMatchTheLog: the queue entries appenders hand over to the dispatcher,
// and those they write themselves in async mode (dispatchInline), are those the dispatcher
// would build by reading the records back: after concurrent appends of batches over several
// queues, the queues equal queues rebuilt from the log alone.
func TestHandedOverEntriesMatchTheLog(t *testing.T) {
	for _, fl := range []commitlog.FlushMode{commitlog.FlushAsync, commitlog.FlushSync} {
		t.Run(fl.String(), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Flush: fl, SegmentSize: testSeg}
			s := openStore(t, dir, o)
			var wg sync.WaitGroup
			for p := range 4 {
				wg.Go(func() {
					for i := range 300 {
						batch := []*Message{msg("H", int32(i%3), i), msg("H", int32(p), i)}
						batch[1].Tags = fmt.Sprintf("tag-%d-é", i%5) // a non-ASCII tag hash
						if err := s.Append(batch[:1+i%2]); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			waitDispatched(t, s)
			s.dmu.Lock()
			handed, inline := s.handedOverN, s.inlineN
			s.unlockDispatch()
			if handed == 0 && (fl == commitlog.FlushSync || inline == 0) {
				t.Fatalf("%d records dispatched from handed-over entries, %d by their appenders", handed, inline)
			}
			want := queueEntries(t, s, "H", 4)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Rebuild every queue from the log alone.
			if err := os.RemoveAll(filepath.Join(dir, queuesDir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, dispatchName)); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, o)
			defer s.Close()
			got := queueEntries(t, s, "H", 4)
			for q := range want {
				if len(got[q]) != len(want[q]) {
					t.Fatalf("queue %d: %d entries rebuilt from the log, %d handed over", q, len(got[q]), len(want[q]))
				}
				for i := range want[q] {
					if got[q][i] != want[q][i] {
						t.Fatalf("queue %d offset %d: handed over %+v, log says %+v", q, i, want[q][i], got[q][i])
					}
				}
			}
			t.Logf("%d of the records dispatched from handed-over entries, %d by their appenders", handed, inline)
		})
	}
}

func queueEntries(t *testing.T, s *Store, topic string, queues int32) [][]cqueue.Entry {
	t.Helper()
	out := make([][]cqueue.Entry, queues)
	for id := range queues {
		q, err := s.queueFor(topic, id, false)
		if err != nil || q == nil {
			t.Fatalf("queue %d: %v", id, err)
		}
		out[id] = make([]cqueue.Entry, q.cq.Max())
		if n, err := q.cq.Read(0, out[id]); err != nil || n != len(out[id]) {
			t.Fatalf("queue %d: read %d of %d entries: %v", id, n, len(out[id]), err)
		}
	}
	return out
}

// TestQueueFlushBytesSyncs: once QueueFlushBytes of log are dispatched, the queues are synced
// and the checkpoint written without waiting for QueueFlushInterval, also when appenders
// dispatch their own records (they leave the fsyncs to the dispatcher).
func TestQueueFlushBytesSyncs(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync, QueueFlushInterval: time.Hour, QueueFlushBytes: 64 << 10})
	defer s.Close()
	body := bytes.Repeat([]byte("x"), 1000)
	for range 200 { // about 200 KiB of log
		if err := s.Append([]*Message{{Topic: "F", Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.readCheckpoint().pos < 64<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint at %d after %d bytes of log dispatched", s.readCheckpoint().pos, s.DispatchedPos())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAppendFollowUp: the log's follow-up to an append, which the store runs after releasing
// its append lock, still happens. Pages behind the writer leave the resident set, and an async
// log flushes once FlushBytes are unflushed, long before its FlushInterval.
func TestAppendFollowUp(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{Flush: commitlog.FlushAsync, FlushInterval: time.Hour, FlushBytes: 256 << 10, SegmentSize: 16 << 20, ResidentBytes: 256 << 10})
	defer s.Close()
	body := bytes.Repeat([]byte("r"), 1000)
	for i := range 8 << 10 { // 8 MiB of records
		if err := s.Append([]*Message{{Topic: "Follow", Body: body}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if rss, found := smaps.ForTest(t, smaps.Under(filepath.Join(dir, "commitlog"))); !found || rss > 4<<20 {
		t.Errorf("after 8 MiB appended with ResidentBytes 256 KiB: %d KiB of the log resident (mapping found: %v), want under 4 MiB", rss>>10, found)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.log.Durable() < 4<<20 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if d := s.log.Durable(); d < 4<<20 {
		t.Errorf("durable position %d after 8 MiB appended with FlushBytes 256 KiB, want the flusher to have run", d)
	}
}
