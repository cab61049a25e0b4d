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

// TestDefaultClock: with the default clock, every append's store time is the wall clock's
// at the append, between the wall-clock readings and after them.
func TestDefaultClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync})
		defer s.Close()
		for i, d := range []time.Duration{0, 0, 400 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, clockRebase / 2, clockRebase, 1, 2 * clockRebase} {
			time.Sleep(d)
			m := msg("T", 0, i)
			if err := s.Append([]*Message{m}); err != nil {
				t.Fatal(err)
			}
			if got, want := m.StoreTime, time.Now().UnixMilli(); got != want {
				t.Fatalf("append %d, %v after the last: store time %d, want the clock's %d", i, d, got, want)
			}
		}
	})
}
