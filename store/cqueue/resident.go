package cqueue

import (
	"math"
	"os"
)

// The resident set of the active file: every page of its mapping the writer or a reader
// touched counts in the process's RSS until it is dropped or the file is sealed, so a
// queue would hold up to a whole file (1.25 MiB by default) resident, and a store with
// many queues that many times over. A queue keeps about ResidentBytes behind the end of
// its data resident, where consumers that keep up read, and drops the rest with
// vfs.File.DropResident (madvise MADV_DONTNEED):
//
//   - Append, every ResidentBytes/4 of entries, drops every page of the file more than
//     ResidentBytes behind the end of the data, synced or not (a dropped dirty page stays
//     dirty in the page cache and the next Sync writes it; see vfs.File.DropResident), and
//     with them whatever readers touched back there;
//   - Read counts the bytes it reads below the window; once they add up to ResidentBytes,
//     the reader that passed it drops everything below the window too (a sweep), for
//     queues that readers catch up on while nothing is appended.
//
// A read fault maps the whole page-cache folio around the page (up to 1 MiB of a 1.25 MiB
// file), so between drops readers far behind may hold more than they read, never more
// than the file. The mapping itself stays: a read of a dropped page takes a minor fault
// and finds the page in the page cache. Append drops under wmu, a sweep under mu (read),
// and the file is unmapped only under mu (write), so neither drops a mapping that is gone.

// pageSize is the OS page size; DropResident ranges start on a page boundary.
var pageSize = int64(os.Getpagesize())

// initResident sets up dropping from the options. Called by Open before load.
func (q *Queue) initResident(window int64) {
	q.window = window
	q.step = max(window/4, pageSize)
	if window < 0 {
		q.dropOff.Store(true)
	}
	q.resetDropLocked()
}

// resetDropLocked restarts dropping for a file that just became the active one (or was
// truncated). q.wmu is held (or the queue is being opened).
func (q *Queue) resetDropLocked() {
	q.nextDrop = 0
	if q.dropOff.Load() {
		q.nextDrop = math.MaxInt64
	}
}

// dropBehindLocked drops the pages of the active file s more than the window behind end,
// the byte offset just past its last entry, and sets when to drop next. q.wmu is held.
func (q *Queue) dropBehindLocked(s *segment, end int64) {
	if q.dropOff.Load() {
		q.nextDrop = math.MaxInt64
		return
	}
	q.nextDrop = end + q.step
	if upTo := (end - q.window) / pageSize * pageSize; upTo > 0 {
		if err := s.f.DropResident(s.m[:upTo]); err != nil {
			q.stopDropping(s, err)
		}
	}
}

// dropAll drops every page of the active file s from the resident set, unless dropping is
// off: after recovery or truncation touched them. The caller holds q.wmu or is Open.
func (q *Queue) dropAll(s *segment) {
	if q.dropOff.Load() || s.m == nil {
		return
	}
	if err := s.f.DropResident(s.m); err != nil {
		q.stopDropping(s, err)
	}
}

// countCold counts a read of the active file s's bytes [lo, hi), where end is the end of
// its data, and sweeps once reads below the window add up to the window. The caller
// holds q.mu (read), so s stays mapped.
func (q *Queue) countCold(s *segment, lo, hi, end int64) {
	hot := end - q.window
	if lo >= hot || q.dropOff.Load() {
		return
	}
	if q.cold.Add(min(hi, hot)-lo) >= q.window && q.cold.Swap(0) >= q.window {
		if err := s.f.DropResident(s.m[:hot/pageSize*pageSize]); err != nil {
			q.stopDropping(s, err)
		}
	}
}

// stopDropping turns dropping off after DropResident failed: it would fail again at every
// step, and keeping pages resident is only a cost.
func (q *Queue) stopDropping(s *segment, err error) {
	if q.dropOff.Swap(true) {
		return
	}
	q.log.Warn("cqueue: cannot drop mapped pages from the resident set: keeping them", "file", s.path, "err", err)
}
