package commitlog

import (
	"math"
	"math/bits"
	"os"
	"slices"
)

// The resident set: every mapped page a writer or reader touched counts in the process's
// RSS (and its peak, VmHWM) until it is dropped or unmapped, although the page cache holds
// it anyway. The log keeps about ResidentBytes of its mappings resident, the window just
// behind the write position where consumers that keep up read, and drops the rest with
// vfs.File.DropResident (madvise MADV_DONTNEED):
//
//   - behind the writer: once the write position passed the next step (ResidentBytes/4),
//     the appender that passed it drops the pages from the last drop up to ResidentBytes
//     behind the write position, flushed or not (a dropped dirty page stays dirty in the
//     page cache and the next fsync writes it; see vfs.File.DropResident);
//   - before an async flush: the flusher drops the whole pages it is about to write back,
//     window or not (dropBeforeFlush), since writeback would otherwise write-protect each
//     mapped page with its own TLB shootdown;
//   - behind readers: a read fault maps the whole page-cache folio around the page, and on
//     Linux with large folios (x86-64, arm64) that is up to 2 MiB, so readers note the 2 MiB
//     regions they enter below the window. The log remembers the last keptRegions regions
//     entered; a reader entering any other region drops every mapped page below the
//     window, of every segment, but those (a sweep; madvise over pages not resident costs
//     a page-table walk, about 1 µs a segment);
//   - behind scans: a reader that reads on forward with Next (the store's dispatcher, which
//     falls behind the writer under load) drops what it read below the window as it goes,
//     a step at a time, and what it left of a segment when it leaves it. Without that, the
//     kept regions and the region a scan is in held up to 6 MiB between sweeps. A scan
//     notes the regions it enters like any reader: its sweeps also drop what others left
//     (on the peer benchmark's 1 KiB sends, scans that did not sweep let pages that some
//     fault mapped back behind the writer pile up over old segments).
//
// Drops never unmap: a reader that touches a dropped page takes a minor fault and reads
// it from the page cache. They run under the segment's mutex, like unmapping, so a
// segment's mapping cannot go away under one. Appenders and readers elect the one that
// drops with atomics, never waiting for each other.
//
// What stays resident: the window (until an async flush), up to a step more until the next
// drop, the page the writer is in (the writable mapping is advised random, so a write fault
// maps one page, not a whole large folio), the regions readers entered last, and what other
// readers touched since the last sweep.

// pageShift is log2 of the page size.
var pageShift = uint(bits.TrailingZeros64(uint64(os.Getpagesize())))

// regionSize is the most one fault can map: a PMD-size page-cache folio (2 MiB with 4 KiB
// pages). Readers note what they touch below the window in regions of this size.
const regionSize = 2 << 20

// keptRegions is how many of the regions readers entered last a sweep keeps. Consumers of
// a topic's queues read records that interleave, a few regions apart, so a sweep may drop
// pages one of them reads next; keeping more regions makes that rarer but keeps 2 MiB more
// each. On the peer benchmark's consume of 1 M messages from 4 queues (BENCHMARKS.md),
// 2 regions made 550-630 sweeps and a 30 MiB peak, 5 regions 95-200 sweeps and 35 MiB,
// at the same CPU time within noise.
const keptRegions = 2

// minResidentStep is the smallest step between drops, so a tiny ResidentBytes does not
// make every append a system call.
const minResidentStep = 64 << 10

// initResident sets up dropping from Options. Called by Open before load.
func (l *Log) initResident() {
	l.window = l.opts.ResidentBytes
	l.step = max(l.window/4, minResidentStep)
	l.nextDrop.Store(math.MaxInt64)
	for i := range l.regions {
		l.regions[i].Store(-1)
	}
	if l.window < 0 {
		l.window = math.MaxInt64 // nothing is ever outside the window
		l.dropOff.Store(true)
	}
}

// startDropping starts dropping behind the writer, whose segment starts at base. Called by
// load once recovery is done.
func (l *Log) startDropping(base int64) {
	if l.dropOff.Load() {
		return
	}
	l.dropped.Store(base)
	l.nextDrop.Store(base + l.window + l.step)
}

// maybeDropBehind drops the pages more than ResidentBytes behind end, the write position
// an Append just published, if end passed the next step. Of concurrent appenders, the one
// that moves nextDrop does it; l.mu is not held.
func (l *Log) maybeDropBehind(end int64) {
	next := l.nextDrop.Load()
	if end < next || !l.nextDrop.CompareAndSwap(next, end+l.step) {
		return
	}
	l.dropBehindUpTo(end - l.window)
}

// dropBehindUpTo drops the pages between the last drop behind the writer and upTo, moving
// dropped to upTo; of concurrent callers, each drops the part it moved dropped over.
func (l *Log) dropBehindUpTo(upTo int64) {
	from := l.dropped.Load()
	for upTo > from && !l.dropped.CompareAndSwap(from, upTo) {
		from = l.dropped.Load()
	}
	if upTo <= from {
		return
	}
	for _, s := range *l.segs.Load() {
		lo, hi := max(from, s.base), min(upTo, s.base+s.size)
		if hi <= lo {
			continue
		}
		if err := s.dropResident(lo-s.base, hi-s.base); err != nil {
			l.stopDropping(s, err)
			return
		}
	}
}

// dropBeforeFlush drops from the resident set the whole pages below target, the end of
// what an async flush is about to make durable, behind the writer. Writeback write-protects
// every mapped page it cleans, one TLB shootdown (an inter-processor interrupt; on a VM an
// exit) per page; a drop is one for the whole range. A reader that keeps up faults the
// pages back from the page cache, a minor fault each. With 4 KiB pages in the log's
// writable mapping (vfs.File.Map) the shootdowns of a 4 MiB flush cost 7 % of the CPU of
// 64 producers sending 100 B messages (perf, peer benchmark). Called by the flusher only.
func (l *Log) dropBeforeFlush(target int64) {
	if l.dropOff.Load() {
		return
	}
	l.dropBehindUpTo(target >> pageShift << pageShift) // target's page may still be written
}

// sweep drops every mapped page below the window, of every segment, except the regions
// [k, k+regionSize) for k in keep (region starts, -1 for none).
func (l *Log) sweep(keep [keptRegions]int64) {
	slices.Sort(keep[:])
	hot := l.written.Load() - l.window
	for _, s := range *l.segs.Load() {
		if s.base >= hot || l.dropOff.Load() {
			return
		}
		lo, hi := int64(0), min(s.size, hot-s.base)
		for _, k := range keep {
			if k < 0 {
				continue
			}
			if k -= s.base; k+regionSize <= lo || k >= hi {
				continue
			}
			if err := s.dropResident(lo, k); err != nil {
				l.stopDropping(s, err)
				return
			}
			lo = min(k+regionSize, hi)
		}
		if err := s.dropResident(lo, hi); err != nil {
			l.stopDropping(s, err)
			return
		}
	}
}

// recoveryStep is how many bytes recovery reads through a mapping between drops.
const recoveryStep = 1 << 20

// dropScanned drops [lo, hi) of s, which recovery has read, unless dropping is off.
func (l *Log) dropScanned(s *segment, lo, hi int64) {
	if l.dropOff.Load() {
		return
	}
	if err := s.dropResident(lo, hi); err != nil {
		l.stopDropping(s, err)
	}
}

// stopDropping turns dropping off after DropResident failed: it would fail again at every
// step, and keeping pages resident is only a cost.
func (l *Log) stopDropping(s *segment, err error) {
	if l.dropOff.Swap(true) {
		return
	}
	l.nextDrop.Store(math.MaxInt64)
	l.lg.Warn("cannot drop mapped pages from the resident set: keeping them", "segment", s.path, "err", err)
}

// dropBehindScan drops the pages of r.seg up to end, but not in the window, that a scan
// with Next read past: the record [pos, end) was just read. It drops once a step of them
// is due, or at once when final (the scan leaves the segment). A read fault maps the whole
// folio around the page, up to a region, and a folio the writer dropped pages of maps again
// whole, so each drop starts no later than the region of pos.
func (r *Reader) dropBehindScan(pos, end int64, final bool) {
	l, s := r.l, r.seg
	if l.dropOff.Load() {
		return
	}
	region := s.base + (pos-s.base)&^(regionSize-1)
	if r.scanFrom < 0 {
		r.scanFrom = region
	}
	hi := min(end, l.written.Load()-l.window)
	if hi-r.scanFrom < l.step && (!final || hi <= r.scanFrom) {
		return
	}
	lo := min(r.scanFrom, region)
	r.scanFrom = hi
	if err := s.dropResident(lo-s.base, hi-s.base); err != nil {
		l.stopDropping(s, err)
	}
}

// countCold notes a read of [pos, end) in r.seg, below the window: if it enters a region
// that is none of those the log remembers, it becomes the newest of them, the oldest is
// forgotten, and the reader sweeps. They are read and written without a lock: a lost
// update costs one needless sweep, or one region kept that need not be.
func (r *Reader) countCold(pos, end int64) {
	s := r.seg
	region := s.base + (end-1-s.base)&^(regionSize-1)
	if region == r.region {
		return
	}
	r.region = region
	l := r.l
	var keep [keptRegions]int64
	for i := range l.regions {
		if keep[i] = l.regions[i].Load(); keep[i] == region {
			return
		}
	}
	if l.dropOff.Load() {
		return
	}
	copy(keep[1:], keep[:])
	keep[0] = region
	for i := range l.regions {
		l.regions[i].Store(keep[i])
	}
	l.sweep(keep)
}
