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

// TestDefaultClockPairsReadings: a thread descheduled between the default clock's wall and
// monotonic readings does not put later store times early: the wall clock is read again
// between two monotonic readings that lie close together.
func TestDefaultClockPairsReadings(t *testing.T) {
	const wallAtZero = int64(1_800_000_000_000_000_000) // the wall clock when the fake monotonic one reads 0
	for _, stall := range []time.Duration{0, clockPairGap / 2, 3 * time.Millisecond, 250 * time.Millisecond} {
		var now time.Duration // the fake monotonic clock
		walls := 0
		c := &storeClock{def: true,
			mono: func() time.Duration { now += time.Microsecond; return now },
			wall: func() int64 {
				w := wallAtZero + int64(now)
				if walls++; walls == 1 {
					now += stall // descheduled right after the first wall reading
				}
				return w
			},
		}
		c.rebase()
		for range 3 {
			now += 700 * time.Microsecond
			got := c.read()
			if want := unixMilli(wallAtZero + int64(now)); got != want {
				t.Fatalf("a stall of %v after the wall reading: store time %d, want the wall clock's %d", stall, got, want)
			}
		}
	}
}

func TestUnixMilli(t *testing.T) {
	for _, ns := range []int64{0, 1, 999_999, 1_000_000, -1, -999_999, -1_000_000, -1_000_001, 1_800_000_000_123_456_789} {
		if got, want := unixMilli(ns), time.Unix(0, ns).UnixMilli(); got != want {
			t.Errorf("unixMilli(%d) = %d, want %d", ns, got, want)
		}
	}
}

// BenchmarkDefaultClockRead: what an append pays for its store time with the default clock.
func BenchmarkDefaultClockRead(b *testing.B) {
	c := newStoreClock(time.Now, true)
	var sink int64
	for b.Loop() {
		sink += c.read()
	}
	_ = sink
}
