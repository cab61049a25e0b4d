package commitlog

import (
	"bytes"
	"testing"
	"time"
)

func TestObserveFsyncBuckets(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		want int // bucket index
	}{
		{"zero", 0, 0},
		{"at the first bound", 100 * time.Microsecond, 0},
		{"just above the first bound", 100*time.Microsecond + 1, 1},
		{"3ms", 3 * time.Millisecond, 5},
		{"at the last bound", 10 * time.Second, len(fsyncBounds) - 1},
		{"above every bound", time.Minute, len(fsyncBounds)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s logStats
			s.observeFsync(c.d)
			for i := range s.buckets {
				got, want := s.buckets[i].Load(), int64(0)
				if i == c.want {
					want = 1
				}
				if got != want {
					t.Errorf("bucket %d: got %d, want %d", i, got, want)
				}
			}
			if got := time.Duration(s.fsyncNanos.Load()); got != c.d {
				t.Errorf("sum: got %v, want %v", got, c.d)
			}
		})
	}
}

// TestStatsCountFsyncsAndDeletions: each durable append in sync mode fsyncs its segment,
// and retention's deletions are counted with their bytes.
func TestStatsCountFsyncsAndDeletions(t *testing.T) {
	l := openTest(t, t.TempDir(), Options{Flush: FlushSync, MaxBytes: 3 * testSegSize, MaxAge: -1, MaxUsedRatio: -1})
	defer l.Close()
	if st := l.Stats(); st.Fsyncs.Count != 0 || st.SegmentsDeleted != 0 {
		t.Fatalf("fresh log: got %+v, want no fsyncs, no deletions", st)
	}
	big := bytes.Repeat([]byte("r"), 4000)
	const n = 200
	for i := 0; i < n; i++ {
		appendOne(t, l, 1, big)
	}
	st := l.Stats()
	if st.Fsyncs.Count < n {
		t.Errorf("fsyncs: got %d, want at least %d (one per durable append)", st.Fsyncs.Count, n)
	}
	var sum int64
	for _, c := range st.Fsyncs.Counts {
		sum += c
	}
	if sum != st.Fsyncs.Count || len(st.Fsyncs.Counts) != len(st.Fsyncs.Bounds)+1 || st.Fsyncs.Sum <= 0 {
		t.Errorf("histogram inconsistent: %+v", st.Fsyncs)
	}
	l.Retain()
	st = l.Stats()
	// 200 records of 4 KB fill about 12 segments of 64 KB; at most 3 stay.
	if st.SegmentsDeleted < 8 || st.BytesDeleted != st.SegmentsDeleted*testSegSize {
		t.Errorf("deletions: got %d segments, %d bytes, want at least 8 segments of %d bytes",
			st.SegmentsDeleted, st.BytesDeleted, testSegSize)
	}
}
