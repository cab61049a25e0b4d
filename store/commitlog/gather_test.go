package commitlog

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestGatherBacksOffAfterOverrun checks, on a fake clock, that the flusher of a sync-mode log
// gathers (waits up to half the last fsync for as many appends as took part last time) and
// that a gather which overran its deadline makes the next flush skip gathering. A fake clock
// never overruns, so the test lowers the overrun bound below zero for its second case.
func TestGatherBacksOffAfterOverrun(t *testing.T) {
	const fsync = 400 * time.Microsecond // each segment fsync takes this long
	for _, c := range []struct {
		name    string
		overrun time.Duration // gatherOverrun in the test
		want    time.Duration // the last append's wait for its fsync
	}{
		{name: "gathers in time keep gathering", overrun: gatherOverrun, want: fsync/2 + fsync},
		{name: "an overrun skips the next gather", overrun: -time.Nanosecond, want: fsync},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func(o time.Duration) { gatherOverrun = o }(gatherOverrun)
			gatherOverrun = c.overrun
			synctest.Test(t, func(t *testing.T) {
				fs := vfstest.StepFS{FS: vfstest.NewCrashFS(), Before: func(s vfstest.Step) {
					if s.Op == vfstest.StepSync && strings.Contains(s.Path, "prealloc-") {
						time.Sleep(fsync)
					}
				}}
				l, err := Open("/log", &Options{FS: fs, Flush: FlushSync, SegmentSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				synctest.Wait() // the preparer has synced the next segment's file
				rec := [][]byte{[]byte("telemetry")}
				appendN := func(n int) int64 {
					var end int64
					for range n {
						if end, err = l.Append(1, rec, nil); err != nil {
							t.Fatal(err)
						}
					}
					return end
				}
				// A lead append's fsync (the first: no gather) is under way while three
				// more are appended, so that they share the next flush whatever the
				// scheduling. That flush gathers for four (the lead and the three that
				// arrived during its fsync), which do not come: a gather to its deadline,
				// half the last fsync.
				appendN(1)
				synctest.Wait() // the flusher sleeps in the lead's fsync
				if err := l.WaitDurable(appendN(3)); err != nil {
					t.Fatal(err)
				}
				// The last flush had three: one append gathers for them, or skips.
				synctest.Wait()
				start := time.Now()
				if err := l.WaitDurable(appendN(1)); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != c.want {
					t.Errorf("the append was durable after %v, want %v", got, c.want)
				}
			})
		})
	}
}

// TestGatherBackoff follows the flusher's gathering through sequences of gathers that end in
// time ('.') or overrun their deadline ('!'): each letter of want is whether the flush at
// that point gathered ('g') or skipped gathering ('s'). An overrun skips the next flush, the
// next overrun twice as many as the last, up to maxGatherSkip; gatherTrust gathers in time
// in a row end the backing off.
func TestGatherBackoff(t *testing.T) {
	for _, c := range []struct {
		name     string
		outcomes string // of the gathers, in order
		want     string // per flush: 'g' gathered (taking the next outcome) or 's' skipped
	}{
		{name: "in time never skips", outcomes: "....", want: "gggg"},
		{name: "an overrun skips one flush", outcomes: "!..", want: "gsgg"},
		{name: "overruns in a row double the skip", outcomes: "!!!.", want: "gsgssgssssg"},
		{name: "a gather in time between overruns keeps the backoff", outcomes: "!.!.", want: "gsggssg"},
		{name: "trust resets the backoff", outcomes: "!" + strings.Repeat(".", gatherTrust) + "!.", want: "gs" + strings.Repeat("g", gatherTrust) + "gsg"},
		{name: "one short of trust keeps it", outcomes: "!" + strings.Repeat(".", gatherTrust-1) + "!.", want: "gs" + strings.Repeat("g", gatherTrust-1) + "gssg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var g gatherBackoff
			var got strings.Builder
			outcomes := c.outcomes
			for range len(c.want) {
				if !g.allow() {
					got.WriteByte('s')
					continue
				}
				got.WriteByte('g')
				if outcomes == "" {
					t.Fatalf("gathered after the last outcome: %s", got.String())
				}
				late := -time.Microsecond
				if outcomes[0] == '!' {
					late = gatherOverrun + time.Microsecond
				}
				outcomes = outcomes[1:]
				g.ended(late)
			}
			if got.String() != c.want {
				t.Errorf("flushes %s, want %s", got.String(), c.want)
			}
		})
	}
	t.Run("the skip is capped", func(t *testing.T) {
		var g gatherBackoff
		for range 20 {
			g.ended(time.Millisecond)
		}
		if g.skip != maxGatherSkip {
			t.Errorf("skip %d after 20 overruns, want %d", g.skip, maxGatherSkip)
		}
	})
}
