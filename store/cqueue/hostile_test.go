package cqueue

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/internal/guard"
)

// TestHostileCalls drives every exported entry point of a Queue with hostile values, on a
// queue with entries, an empty one and a closed one: each returns an error or its
// documented answer, and none panics or hangs.
func TestHostileCalls(t *testing.T) {
	const n = 8
	full := openQueue(t, t.TempDir(), segOpts(n))
	appendRange(t, full, 0, 3*n+2)
	empty := openQueue(t, t.TempDir(), segOpts(n))
	closed := openQueue(t, t.TempDir(), segOpts(n))
	appendRange(t, closed, 0, 5)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	var buf [4]Entry
	for _, q := range []struct {
		name string
		q    *Queue
	}{{"full", full}, {"empty", empty}, {"closed", closed}} {
		for _, tc := range []struct {
			name string
			f    func(q *Queue) error
			want error // nil: any error or none
		}{
			{"Append(-1)", func(q *Queue) error { return q.Append(-1, ent(1)) }, errAny},
			{"Append(MinInt64)", func(q *Queue) error { return q.Append(math.MinInt64, ent(1)) }, errAny},
			{"Append(MaxInt64)", func(q *Queue) error { return q.Append(math.MaxInt64, ent(1)) }, errAny},
			{"Append(MaxInt64-n+1)", func(q *Queue) error { return q.Append(math.MaxInt64-n+1, ent(1)) }, errAny},
			{"Append(zero entry)", func(q *Queue) error { return q.Append(q.Max(), Entry{}) }, errAny},
			{"Append(negative size)", func(q *Queue) error { return q.Append(q.Max(), Entry{Pos: MinPos, Size: -1}) }, errAny},
			{"Get(-1)", func(q *Queue) error { _, err := q.Get(-1); return err }, errAny},
			{"Get(MinInt64)", func(q *Queue) error { _, err := q.Get(math.MinInt64); return err }, errAny},
			{"Get(MaxInt64)", func(q *Queue) error { _, err := q.Get(math.MaxInt64); return err }, errAny},
			{"Read(-1)", func(q *Queue) error { _, err := q.Read(-1, buf[:]); return err }, errAny},
			{"Read(MaxInt64)", func(q *Queue) error { _, err := q.Read(math.MaxInt64, buf[:]); return err }, errAny},
			{"Read(nil dst)", func(q *Queue) error { _, err := q.Read(q.Min(), nil); return err }, nil},
			{"Search(nil)", func(q *Queue) error { _, err := q.Search(nil); return err }, nil},
			{"Search(error)", func(q *Queue) error {
				_, err := q.Search(func(Entry) (bool, error) { return false, errors.New("boom") })
				return err
			}, nil},
			{"Last", func(q *Queue) error { q.Last(); return nil }, nil},
			{"TruncateFrom(MaxInt64)", func(q *Queue) error { return q.TruncateFrom(math.MaxInt64) }, nil},
			{"DeleteBefore(MinInt64)", func(q *Queue) error { _, err := q.DeleteBefore(math.MinInt64); return err }, nil},
			{"DeleteBefore(-1)", func(q *Queue) error { _, err := q.DeleteBefore(-1); return err }, nil},
			{"Sync", func(q *Queue) error { return q.Sync() }, nil},
		} {
			t.Run(q.name+"/"+tc.name, func(t *testing.T) {
				err := guard.Call(t, tc.name, func() error { return tc.f(q.q) })
				if q.q == closed && tc.name != "Last" && err == nil {
					t.Errorf("on a closed queue: got no error, want ErrClosed")
				}
				if tc.want == errAny && err == nil {
					t.Errorf("got no error")
				}
			})
		}
	}
	// What the hostile calls left: the full queue unchanged but for the hostile appends
	// refused, the empty one still usable.
	checkQueue(t, full, 0, 3*n+2)
	appendRange(t, empty, 0, 2)
	checkQueue(t, empty, 0, 2)

	for _, tc := range []struct {
		name string
		f    func(q *Queue) error
	}{
		{"TruncateFrom(-1)", func(q *Queue) error { return q.TruncateFrom(-1) }},
		{"TruncateFrom(MinInt64)", func(q *Queue) error { return q.TruncateFrom(math.MinInt64) }},
		{"DeleteBefore(MaxInt64)", func(q *Queue) error { _, err := q.DeleteBefore(math.MaxInt64); return err }},
		{"Search(nil) on entries", func(q *Queue) error {
			if _, err := q.Search(nil); err == nil {
				return errors.New("no error")
			}
			return nil
		}},
	} {
		t.Run("destructive/"+tc.name, func(t *testing.T) {
			q := openQueue(t, t.TempDir(), segOpts(n))
			appendRange(t, q, 0, 3*n+2)
			if err := guard.Call(t, tc.name, func() error { return tc.f(q) }); err != nil {
				t.Errorf("got %v", err)
			}
		})
	}
	if err := guard.Call(t, "second Close", closed.Close); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: got %v, want ErrClosed", err)
	}
}

// TestLastOffsets fills a queue up to the largest offset Append takes: the one after is
// refused, and nothing overflows on the way.
func TestLastOffsets(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(n))
	first := int64(math.MaxInt64 - 2*n)
	for off := first; off <= math.MaxInt64-n; off++ {
		if err := q.Append(off, ent(off-first)); err != nil {
			t.Fatalf("Append(%d): %v", off, err)
		}
	}
	if err := q.Append(math.MaxInt64-n+1, ent(n+1)); !errors.Is(err, ErrOffsetTooLarge) {
		t.Fatalf("Append(MaxInt64-n+1): got %v, want ErrOffsetTooLarge", err)
	}
	if q.Min() != first || q.Max() != math.MaxInt64-n+1 {
		t.Fatalf("Min, Max = %d, %d; want %d, %d", q.Min(), q.Max(), first, int64(math.MaxInt64-n+1))
	}
	if e, err := q.Get(math.MaxInt64 - n); err != nil || e != ent(n) {
		t.Fatalf("Get(last) = %+v, %v; want %+v", e, err, ent(n))
	}
	q.Close()
	q = openQueue(t, dir, segOpts(n))
	if q.Min() != first || q.Max() != math.MaxInt64-n+1 {
		t.Fatalf("after reopening: Min, Max = %d, %d", q.Min(), q.Max())
	}
}

// errAny marks a table case that must return some error.
var errAny = errors.New("any error")

// TestHostileOpen opens queues from hostile directories and options: each fails with an
// error naming what is wrong, or opens a queue that works.
func TestHostileOpen(t *testing.T) {
	const n = 8
	t.Run("empty path", func(t *testing.T) {
		if _, err := Open("", nil); err == nil {
			t.Error("Open(\"\") succeeded")
		}
	})
	t.Run("path is a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(f, nil); err == nil {
			t.Error("Open(regular file) succeeded")
		}
	})
	t.Run("queue file is a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, fileName(0)), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, segOpts(n)); err == nil {
			t.Error("Open succeeded")
		}
	})
	for _, base := range []int64{math.MaxInt64 - n + 1, math.MaxInt64 - 1} {
		t.Run(fmt.Sprintf("file named for offset %d", base), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, fileName(base)), make([]byte, n*EntrySize), 0o644); err != nil {
				t.Fatal(err)
			}
			q, err := Open(dir, segOpts(n))
			if err == nil {
				q.Close()
				t.Fatal("Open succeeded: the queue's offsets would overflow")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("got %v, want ErrCorrupt", err)
			}
		})
	}
}
