package commitlog

import (
	"bytes"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// TestRetentionFloorHoldsSegments: retention by age and by bytes, and the DropOldest policy,
// delete no segment holding a position at or past the floor; once the floor moves, they go.
func TestRetentionFloorHoldsSegments(t *testing.T) {
	var floor atomic.Int64
	now := time.UnixMilli(1_000_000)
	l := openTest(t, t.TempDir(), Options{MaxAge: time.Hour, MaxUsedRatio: -1, RetentionInterval: time.Hour,
		Now: func() time.Time { return now }, RetentionFloor: floor.Load})
	defer l.Close()
	big := bytes.Repeat([]byte("f"), 4000)
	var pos []int64
	for range 64 {
		pos = append(pos, appendOne(t, l, now.UnixMilli(), big))
	}
	nseg := len(*l.segs.Load())
	if nseg < 4 {
		t.Fatalf("%d segments, want at least 4", nseg)
	}
	now = now.Add(2 * time.Hour) // every sealed segment is past MaxAge
	held := pos[len(pos)/2]
	floor.Store(held)
	l.Retain()
	if l.MinPos() > held {
		t.Fatalf("retention deleted past the floor: min %d, floor %d", l.MinPos(), held)
	}
	if n := len(*l.segs.Load()); n == nseg {
		t.Fatalf("no segment below the floor was deleted")
	}
	l.mu.Lock()
	n := l.deleteOldestLocked(nseg)
	doomed := l.takeDoomedLocked()
	l.mu.Unlock()
	l.destroy(doomed)
	if n != 0 || l.MinPos() > held {
		t.Fatalf("DropOldest deleted %d segments past the floor (min %d, floor %d)", n, l.MinPos(), held)
	}
	floor.Store(math.MaxInt64)
	l.Retain()
	if got := len(*l.segs.Load()); got != 1 {
		t.Fatalf("floor lifted: %d segments left, want 1", got)
	}
}
