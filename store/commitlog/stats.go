package commitlog

import (
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/store/vfs"
)

// fsyncBounds are the upper bounds of the fsync latency buckets, from what a fast SSD takes
// to what a worn SD card can take.
var fsyncBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// FsyncHistogram is the latency of the flusher's fsyncs of segment files since Open, in
// fixed buckets.
type FsyncHistogram struct {
	// Bounds are the buckets' upper bounds, ascending; an fsync of d counts in the first
	// bucket with d <= bound, or in the last count when d exceeds every bound.
	Bounds []time.Duration
	// Counts has one count per bound plus one for the fsyncs above every bound. A count is
	// not cumulative: it holds only the fsyncs of its bucket.
	Counts []int64
	// Count is the number of fsyncs (the sum of Counts), Sum their total time.
	Count int64
	Sum   time.Duration
}

// Stats is what the log did since Open.
type Stats struct {
	// Fsyncs times each fsync of a segment file by the flusher, failed ones too.
	Fsyncs FsyncHistogram
	// SegmentsDeleted and BytesDeleted count the segment files deleted by retention (age,
	// byte quota, used ratio) and by the DropOldest policy of a full disk, and their size.
	SegmentsDeleted int64
	BytesDeleted    int64
}

// logStats holds the counters behind Stats; each is safe for concurrent use.
type logStats struct {
	buckets         [len(fsyncBounds) + 1]atomic.Int64
	fsyncNanos      atomic.Int64
	segmentsDeleted atomic.Int64
	bytesDeleted    atomic.Int64
}

// syncTimed fsyncs f and counts how long it took in the fsync histogram.
func (l *Log) syncTimed(f vfs.File) error {
	start := time.Now()
	err := f.Sync()
	l.stats.observeFsync(time.Since(start))
	return err
}

func (s *logStats) observeFsync(d time.Duration) {
	i := 0
	for i < len(fsyncBounds) && d > fsyncBounds[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.fsyncNanos.Add(int64(d))
}

// deleted counts segments deleted from the log.
func (s *logStats) deleted(segs []*segment) {
	for _, sg := range segs {
		s.segmentsDeleted.Add(1)
		s.bytesDeleted.Add(sg.size)
	}
}

// Stats returns what the log did since Open. It is safe to call at any time, after Close
// too. The buckets are read one by one while fsyncs go on, so Count may lag Sum by an fsync.
func (l *Log) Stats() Stats {
	h := FsyncHistogram{
		Bounds: append([]time.Duration(nil), fsyncBounds[:]...),
		Counts: make([]int64, len(l.stats.buckets)),
		Sum:    time.Duration(l.stats.fsyncNanos.Load()),
	}
	for i := range l.stats.buckets {
		h.Counts[i] = l.stats.buckets[i].Load()
		h.Count += h.Counts[i]
	}
	return Stats{Fsyncs: h, SegmentsDeleted: l.stats.segmentsDeleted.Load(), BytesDeleted: l.stats.bytesDeleted.Load()}
}
