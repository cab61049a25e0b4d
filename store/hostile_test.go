package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/store/internal/guard"
)

// TestHostileAppend appends batches with one bad message each, through Append and
// AppendAsync: each fails with ErrInvalidMessage or ErrMessageTooLarge, without panicking,
// writing anything, calling done, or creating a directory for the topic.
func TestHostileAppend(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	defer s.Close()
	before := s.log.Written()
	for _, tc := range []struct {
		name string
		m    *Message
		want error
	}{
		{"nil message", nil, ErrInvalidMessage},
		{"empty topic", &Message{Body: []byte("x")}, ErrInvalidMessage},
		{"topic of 256 bytes", &Message{Topic: strings.Repeat("t", 256)}, ErrInvalidMessage},
		{"topic .", &Message{Topic: "."}, ErrInvalidMessage},
		{"topic ..", &Message{Topic: ".."}, ErrInvalidMessage},
		{"topic with a slash", &Message{Topic: "a/b"}, ErrInvalidMessage},
		{"topic out of the data dir", &Message{Topic: "../../escape"}, ErrInvalidMessage},
		{"absolute topic", &Message{Topic: "/tmp/escape"}, ErrInvalidMessage},
		{"topic with a backslash", &Message{Topic: `a\b`}, ErrInvalidMessage},
		{"topic with NUL", &Message{Topic: "a\x00b"}, ErrInvalidMessage},
		{"negative queue id", &Message{Topic: "T", QueueID: -1}, ErrInvalidMessage},
		{"body too large", &Message{Topic: "T", Body: make([]byte, 64<<10+1)}, ErrMessageTooLarge},
		{"properties too large", &Message{Topic: "T", Properties: map[string]string{"k": strings.Repeat("v", 64<<10)}}, ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range [][]*Message{{tc.m}, {msg("T", 0, 0), tc.m}, {tc.m, msg("T", 0, 0)}} {
				err := guard.Call(t, "Append", func() error { return s.Append(batch) })
				if !errors.Is(err, tc.want) {
					t.Errorf("Append: got %v, want %v", err, tc.want)
				}
				called := make(chan error, 1)
				err = guard.Call(t, "AppendAsync", func() error { return s.AppendAsync(batch, func(err error) { called <- err }) })
				if !errors.Is(err, tc.want) {
					t.Errorf("AppendAsync: got %v, want %v", err, tc.want)
				}
				select {
				case err := <-called:
					t.Errorf("AppendAsync called done(%v) for a refused batch", err)
				default:
				}
			}
		})
	}
	if err := s.AppendAsync([]*Message{msg("T", 0, 0)}, nil); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("AppendAsync with a nil done: got %v, want ErrInvalidMessage", err)
	}
	if s.log.Written() != before || s.MaxOffset("T", 0) != 0 {
		t.Fatal("a refused batch wrote something")
	}
	for _, p := range []string{filepath.Join(filepath.Dir(dir), "escape"), "/tmp/escape", filepath.Join(dir, "0")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a refused topic made %s (stat: %v)", p, err)
		}
	}
	appendN(t, s, "T", 0, 0, 1)
	waitDispatched(t, s)
	if s.MaxOffset("T", 0) != 1 {
		t.Fatal("offsets skipped after refused batches")
	}
}

// TestHostileReads drives the store's read entry points with hostile topics, queue ids,
// offsets, positions, counts and times, on an open store and a closed one: each returns an
// error or its documented answer, and none panics or hangs.
func TestHostileReads(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	appendN(t, s, "T", 0, 0, 50)
	waitDispatched(t, s)
	first := s.Log().MinPos()
	topics := []string{"", "T", "nope", "..", "../T", strings.Repeat("t", 1<<16)}
	ids := []int32{math.MinInt32, -1, 0, 1, math.MaxInt32}
	offsets := []int64{math.MinInt64, -1, 0, 49, 50, 51, math.MaxInt64}
	counts := []int{math.MinInt, -1, 0, 1, 32, math.MaxInt}
	for _, topic := range topics {
		for _, id := range ids {
			for _, off := range offsets {
				for _, n := range counts {
					name := fmt.Sprintf("GetMessages(%.8q, %d, %d, %d)", topic, id, off, n)
					var res GetResult
					err := guard.Call(t, name, func() (err error) { res, err = s.GetMessages(topic, id, off, n, nil); return err })
					if (err != nil) != (n <= 0) {
						t.Errorf("%s: %v", name, err)
					}
					if len(res.Messages) > max(n, 0) {
						t.Errorf("%s: %d messages", name, len(res.Messages))
					}
				}
			}
			for _, ts := range []int64{math.MinInt64, -1, 0, math.MaxInt64} {
				name := fmt.Sprintf("OffsetByTime(%.8q, %d, %d)", topic, id, ts)
				if err := guard.Call(t, name, func() error { _, err := s.OffsetByTime(topic, id, ts); return err }); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			guard.Call(t, "MinOffset", func() error { s.MinOffset(topic, id); return nil })
			guard.Call(t, "MaxOffset", func() error { s.MaxOffset(topic, id); return nil })
		}
		guard.Call(t, "Queues", func() error { s.Queues(topic); return nil })
	}
	for _, pos := range []int64{math.MinInt64, -1, 0, first - 1, first + 1, s.Log().Written(), math.MaxInt64} {
		name := fmt.Sprintf("ReadMessage(%d)", pos)
		if err := guard.Call(t, name, func() error { _, err := s.ReadMessage(pos); return err }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if m, err := s.ReadMessage(first); err != nil || m.Topic != "T" {
		t.Errorf("ReadMessage(first) = %+v, %v", m, err)
	}
	if got := getAll(t, s, "T", 0, nil); len(got) != 50 {
		t.Fatalf("after the hostile reads: %d messages, want 50", len(got))
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"Append", func() error { return s.Append([]*Message{msg("T", 0, 0)}) }},
		{"AppendAsync", func() error {
			return s.AppendAsync([]*Message{msg("T", 0, 0)}, func(error) { t.Error("done called after Close") })
		}},
		{"GetMessages", func() error { _, err := s.GetMessages("T", 0, 0, 1, nil); return err }},
		{"OffsetByTime", func() error { _, err := s.OffsetByTime("T", 0, 0); return err }},
		{"ReadMessage", func() error { _, err := s.ReadMessage(first); return err }},
		{"Flush", s.Flush},
		{"Close", s.Close},
	} {
		if err := guard.Call(t, tc.name, tc.f); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", tc.name, err)
		}
	}
	if got := guard.Call(t, "MinOffset", func() error {
		if s.MinOffset("T", 0) != 0 || s.MaxOffset("T", 0) != 0 || len(s.Queues("")) != 0 {
			return errors.New("not empty")
		}
		return nil
	}); got != nil {
		t.Errorf("MinOffset, MaxOffset, Queues after Close: %v, want 0, 0, none", got)
	}
}

// TestEmptyBatch checks what an empty batch does: nothing is written, and either the call
// succeeds (AppendAsync then calls done(nil) once: what it does today) or it fails with
// ErrInvalidMessage (and done is not called), as the issue would have it.
func TestEmptyBatch(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	before := s.Log().Written()
	for _, batch := range [][]*Message{nil, {}} {
		if err := guard.Call(t, "Append", func() error { return s.Append(batch) }); err != nil && !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Append(%v): got %v, want nil or ErrInvalidMessage", batch, err)
		}
		var calls []error
		err := guard.Call(t, "AppendAsync", func() error { return s.AppendAsync(batch, func(err error) { calls = append(calls, err) }) })
		switch {
		case err == nil && (len(calls) != 1 || calls[0] != nil):
			t.Errorf("AppendAsync(%v) succeeded and called done with %v, want nil once", batch, calls)
		case err != nil && !errors.Is(err, ErrInvalidMessage):
			t.Errorf("AppendAsync(%v): got %v, want nil or ErrInvalidMessage", batch, err)
		case err != nil && len(calls) != 0:
			t.Errorf("AppendAsync(%v) failed and called done with %v", batch, calls)
		}
	}
	if s.Log().Written() != before {
		t.Error("an empty batch wrote something")
	}
}

// TestCorruptEntrySize serves a queue whose first entry claims a record of 2 GiB - 1 bytes (a
// damaged or forged consume queue file): GetMessages must not size its buffers by it (on
// 32-bit platforms the product overflowed int and make panicked).
func TestCorruptEntrySize(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	appendN(t, s, "T", 0, 0, 3)
	s.Close()
	path := filepath.Join(dir, queuesDir, "T", "0", fmt.Sprintf("%020d.cq", 0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], math.MaxInt32)
	if _, err := f.WriteAt(size[:], 8); err != nil { // entry 0's size field (cqueue/doc.go)
		t.Fatal(err)
	}
	f.Close()
	s = openStore(t, dir, Options{})
	defer s.Close()
	var res GetResult
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := guard.Call(t, "GetMessages", func() (err error) { res, err = s.GetMessages("T", 0, 0, 32, nil); return err }); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(res.Messages) != 3 {
		t.Errorf("got %d messages, want 3", len(res.Messages))
	}
	// The size on disk is a hint for the result's buffer: a corrupt one must not make a
	// buffer of its size (2 GiB).
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("GetMessages allocated %d bytes for a corrupt entry size", n)
	}
}
