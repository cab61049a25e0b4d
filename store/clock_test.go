package store

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
)

// TestCallerClockReadPerAppend: a clock given in Options.Now is read for every append, so
// that a clock a program advances by hand shows in the very next message.
func TestCallerClockReadPerAppend(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync, Now: func() time.Time { return now }})
	defer s.Close()
	for i := range 50 {
		now = start.Add(time.Duration(i) * time.Millisecond)
		m := msg("T", 0, i)
		if err := s.Append([]*Message{m}); err != nil {
			t.Fatal(err)
		}
		if got, want := m.StoreTime, now.UnixMilli(); got != want {
			t.Fatalf("message %d: store time %d, want the clock's %d", i, got, want)
		}
	}
}

// TestDefaultClockReuse: with the default clock, appends share a reading for at most
// clockReuse; an append after that carries the new time.
func TestDefaultClockReuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync})
		defer s.Close()
		appendAt := func(i int) int64 {
			m := msg("T", 0, i)
			if err := s.Append([]*Message{m}); err != nil {
				t.Fatal(err)
			}
			return m.StoreTime
		}
		for i := range 4 {
			want := time.Now().UnixMilli()
			if got := appendAt(i); got != want {
				t.Fatalf("append %d at %d: store time %d", i, want, got)
			}
			if got := appendAt(i); got != want { // no time passed
				t.Fatalf("append %d again at %d: store time %d", i, want, got)
			}
			time.Sleep(3 * clockReuse)
		}
	})
}
