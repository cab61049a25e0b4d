package cqueue

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/store/vfs"
)

const (
	osCreate = os.O_RDWR | os.O_CREATE | os.O_TRUNC
	filePerm = 0o644
	dirPerm  = 0o755
)

// MaxSegmentEntries is the largest Options.SegmentEntries: it keeps one file's mapping far
// below 2 GiB for 32-bit platforms.
const MaxSegmentEntries = 1 << 26

// Options configures Open. A nil *Options, or a zero field, takes the value in
// DefaultOptions.
type Options struct {
	// FS is the file system holding the queue's files. Default vfs.OS.
	FS vfs.FS

	// SegmentEntries is the number of entries per file, 1 to MaxSegmentEntries (1<<26). Default 65536,
	// which makes 1.25 MiB files. Only the active (last) file is mapped, so this is also a
	// queue's mapped address space: lower it on 32-bit boxes with many queues, raise it to
	// have fewer files. It is part of a directory's format: Open refuses files of another
	// size rather than guess.
	SegmentEntries int

	// ResidentBytes bounds the active file's pages in the process's resident set (RSS):
	// about this many bytes behind the last entry stay resident, where consumers that keep
	// up read; older pages, synced or not, are dropped every quarter of it (at least a
	// page) of entries appended, and once reads further back add up to it. Dropped pages
	// stay in the page cache, so reading one again costs a minor fault. Default 64 KiB
	// (3,276 entries); negative keeps every touched page resident until the file is
	// sealed.
	ResidentBytes int64

	// Logger receives recovery warnings: a cut torn tail, stale files removed. Default: a
	// logger that discards everything.
	Logger *slog.Logger
}

// DefaultOptions are the values Open uses for a nil *Options or a zero field.
var DefaultOptions = Options{
	FS:             vfs.OS,
	SegmentEntries: 65536,
	ResidentBytes:  64 << 10,
	Logger:         slog.New(slog.DiscardHandler),
}

// Queue is one consume queue: the entries [Min, Max) of one (topic, queue id), in a
// directory of its own.
//
// A Queue has one writer and many readers. Append, TruncateFrom, DeleteBefore, Sync and
// Close are serialized by an internal mutex (wmu), so a dispatcher and a retention loop
// may share a queue, except that Sync holds wmu only to choose what to sync: its fdatasync
// runs under smu alone, so that Appends go on meanwhile (a dispatcher's appends would
// otherwise wait for the disk); whatever closes a file first waits for it. Get, Read,
// Search, Last, Min and Max may run concurrently with everything. Prepare, which its caller
// runs outside its own locks, holds wmu as Sync does. Lock order: pmu before wmu, wmu before
// smu, wmu before mu. A Queue starts no goroutines.
type Queue struct {
	dir string
	fs  vfs.FS
	n   int64 // entries per file
	log *slog.Logger

	min atomic.Int64 // first available offset
	max atomic.Int64 // next offset to write; stored only after the entry's bytes

	wmu      sync.Mutex  // serializes writers; guards the fields below and writes to segs/closed
	dirty    bool        // the active file has entries not yet synced
	gen      uint64      // times the active file was dirtied: Sync clears dirty only if unchanged
	dirDirty bool        // a file was created, renamed or removed without a successful SyncDir
	dirGen   uint64      // times dirDirty was set: a sync outside wmu clears it only if unchanged
	sealed   *segment    // the sealed file whose entries are not yet synced, if any (at most one)
	next     *segment    // the file made ahead by Prepare (nextName), nil if none
	wantPrep atomic.Bool // Append passed the middle of the active file: Prepare is due
	werr     error       // sticky: the disk no longer matches memory; writes return it
	nextDrop int64       // end of data (bytes) in the active file at which Append drops again

	// The resident set of the active file (resident.go).
	window  int64        // ResidentBytes: bytes behind the end of the data kept resident
	step    int64        // bytes appended between drops
	cold    atomic.Int64 // bytes read below the window since the last sweep
	dropOff atomic.Bool  // ResidentBytes < 0, or DropResident failed

	pmu    sync.Mutex   // serializes Prepare; taken before wmu
	smu    sync.Mutex   // held by Sync and Prepare across their fsyncs; taken (under wmu) before closing a file
	mu     sync.RWMutex // readers hold it (read) while they use segs and mappings
	segs   []*segment   // contiguous files; the last is active (mapped); empty before the first Append
	closed bool
}

// Open opens the queue in dir, creating dir if missing, and recovers it: Max is the
// offset of the first all-zero entry in the last file, or of the first one that does not
// decode; that entry and everything after it in the file is zeroed (and logged), so it
// can never come back. Min is the first slot of the first file. See doc.go for the rules,
// including the files Open removes.
func Open(dir string, opts *Options) (*Queue, error) {
	o := DefaultOptions
	if opts != nil {
		if opts.FS != nil {
			o.FS = opts.FS
		}
		if opts.SegmentEntries != 0 {
			o.SegmentEntries = opts.SegmentEntries
		}
		if opts.ResidentBytes != 0 {
			o.ResidentBytes = opts.ResidentBytes
		}
		if opts.Logger != nil {
			o.Logger = opts.Logger
		}
	}
	if o.SegmentEntries < 1 || o.SegmentEntries > MaxSegmentEntries {
		return nil, fmt.Errorf("cqueue: SegmentEntries %d out of range [1, %d]", o.SegmentEntries, MaxSegmentEntries)
	}
	q := &Queue{dir: dir, fs: o.FS, n: int64(o.SegmentEntries), log: o.Logger}
	q.initResident(o.ResidentBytes)
	if err := q.load(); err != nil {
		return nil, err
	}
	return q, nil
}

// Min returns the first available offset.
func (q *Queue) Min() int64 { return q.min.Load() }

// Max returns the offset the next Append writes; the queue holds [Min, Max).
func (q *Queue) Max() int64 { return q.max.Load() }

// fileSize is the size of every file of q in bytes.
func (q *Queue) fileSize() int { return int(q.n * EntrySize) }

// Append writes e at offset off. off must be Max(); on an empty queue (Min() == Max())
// it may be any value >= Max(), and the queue then starts at off (its old, empty files
// are replaced by one named for off). Otherwise it returns an error wrapping
// ErrOffsetExists (off < Max) or ErrGap (off > Max); an invalid e wraps ErrInvalidEntry,
// and off above MaxInt64-SegmentEntries (where the next file's name would overflow)
// ErrOffsetTooLarge.
// When the active file is full, Append switches to the next one, made ahead by Prepare or
// else created (and the file before the full one synced) then; if that fails
// (allocation wraps vfs.ErrNoSpace on a full disk) the queue is unchanged and a later
// Append retries. The entry is durable after Sync; readers see it when Append returns.
func (q *Queue) Append(off int64, e Entry) error {
	if !e.valid() {
		return fmt.Errorf("%w: %s: %+v", ErrInvalidEntry, e.invalid(), e)
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if q.werr != nil {
		return q.werr
	}
	lo, hi := q.min.Load(), q.max.Load()
	switch {
	case off < hi:
		return fmt.Errorf("%w: offset %d, max %d", ErrOffsetExists, off, hi)
	case off > math.MaxInt64-q.n:
		return fmt.Errorf("%w: offset %d: a queue's offsets end at %d", ErrOffsetTooLarge, off, int64(math.MaxInt64-q.n))
	case len(q.segs) == 0 || (off > hi && lo == hi):
		if err := q.rebaseLocked(off); err != nil {
			return err
		}
	case off > hi:
		return fmt.Errorf("%w: offset %d, max %d", ErrGap, off, hi)
	}
	s := q.segs[len(q.segs)-1]
	slot := off - s.base
	if slot == q.n {
		if err := q.rollLocked(); err != nil {
			return err
		}
		s, slot = q.segs[len(q.segs)-1], 0
	}
	o := slot * EntrySize
	e.Put(s.m[o : o+EntrySize])
	q.markDirtyLocked()
	q.max.Store(off + 1) // publish only after the bytes are in place
	if slot == q.n/2 {
		q.wantPrep.Store(true)
	}
	if o+EntrySize >= q.nextDrop {
		q.dropBehindLocked(s, o+EntrySize)
	}
	return nil
}

// rollLocked seals the full active file and makes the next one active. The lock holds only
// the switch when Prepare did its work (the usual case): the file made ahead is renamed into
// place, and the sealed file is left for the next Sync or Prepare to sync (the new name too).
// Otherwise it does that work itself first: it syncs the previously sealed file if still
// unsynced and the directory if a name is not durable, so that at most one sealed file is
// unsynced and a file name is durable before the next one is written; and it creates the
// next file. So after a power cut every file but the last two is whole, and each file's name
// is durable if a later file's is. q.wmu is held.
func (q *Queue) rollLocked() error {
	old := q.segs[len(q.segs)-1]
	base := old.base + q.n
	if err := q.syncSealedLocked(); err != nil {
		return err
	}
	if q.dirDirty {
		if err := q.syncDirLocked(); err != nil {
			return err
		}
	}
	var s *segment
	if n := q.next; n != nil {
		path := filepath.Join(q.dir, fileName(base))
		if err := q.fs.Rename(n.path, path); err != nil {
			q.log.Warn("cqueue: rename the file made ahead", "file", n.path, "err", err)
			q.dropNextLocked()
		} else {
			q.next = nil
			n.base, n.path = base, path
			q.dirChangedLocked()
			s = n
		}
	}
	if s == nil {
		var err error
		if s, err = createSegment(q.fs, q.dir, base, q.fileSize()); err != nil {
			return err
		}
	}
	q.mu.Lock()
	uerr := old.unmap()
	q.segs = append(q.segs, s)
	q.mu.Unlock()
	if q.dirty {
		q.sealed, q.dirty = old, false
	}
	q.resetDropLocked()
	if uerr != nil {
		q.log.Warn("cqueue: unmap sealed file", "err", uerr)
	}
	return nil
}

// syncSealedLocked syncs the sealed file not yet synced, if any. q.wmu is held.
func (q *Queue) syncSealedLocked() error {
	if q.sealed == nil {
		return nil
	}
	if err := q.sealed.f.Sync(); err != nil {
		return fmt.Errorf("cqueue: sync %s: %w", q.sealed.path, err)
	}
	q.sealed = nil
	return nil
}

// dirChangedLocked notes a change to q.dir that is durable only after a SyncDir. q.wmu is
// held.
func (q *Queue) dirChangedLocked() {
	q.dirDirty = true
	q.dirGen++
}

// dropNextLocked closes and removes the file made ahead, if any. q.wmu is held.
func (q *Queue) dropNextLocked() {
	n := q.next
	if n == nil {
		return
	}
	q.next = nil
	_ = n.unmap()
	_ = n.f.Close()
	if err := q.fs.Remove(n.path); err != nil {
		q.log.Warn("cqueue: remove the file made ahead", "file", n.path, "err", err)
	}
}

// PrepareDue reports, once per file, that Append passed the middle of the active file:
// whoever appends should then call Prepare soon, outside its own locks.
func (q *Queue) PrepareDue() bool {
	return q.wantPrep.Load() && q.wantPrep.CompareAndSwap(true, false)
}

// Prepare does ahead of time the work that Append would otherwise do when the active file
// fills, while the caller's appends wait: it syncs the last sealed file (and the directory)
// if they are not yet synced, and creates, allocates, syncs and maps the next file under a
// temporary name, so that Append only renames it into place. Appends go on while it runs.
// Call it from one goroutine, after PrepareDue reports true; a Sync in flight at the same time
// waits for it with wmu held (so appends may wait too).
func (q *Queue) Prepare() error {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if err := q.syncOutside(false); err != nil {
		return err
	}
	q.wmu.Lock()
	need := !q.closed && q.werr == nil && q.next == nil
	q.wmu.Unlock()
	if !need {
		return nil
	}
	n, err := makeSegment(q.fs, filepath.Join(q.dir, nextName), q.fileSize())
	if err != nil {
		return err
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.next = n
	if q.closed {
		q.dropNextLocked()
		return ErrClosed
	}
	return nil
}

// rebaseLocked makes the empty queue start at off: a new file named for off replaces all
// files (which hold no available entries). On error the queue is unchanged. q.wmu is held.
func (q *Queue) rebaseLocked(off int64) error {
	s, err := createSegment(q.fs, q.dir, off, q.fileSize())
	if err != nil {
		return err
	}
	q.mu.Lock()
	old := q.segs
	var uerr error
	if len(old) > 0 {
		uerr = old[len(old)-1].unmap()
	}
	q.segs = []*segment{s}
	q.min.Store(off)
	q.max.Store(off)
	q.mu.Unlock()
	q.dirty, q.sealed = false, nil // the old files are removed below
	q.resetDropLocked()
	if uerr != nil {
		q.log.Warn("cqueue: unmap replaced file", "err", uerr)
	}
	if len(old) == 0 {
		return nil
	}
	// The new file is durable first, so a crash in here leaves it after a gap, and Open
	// removes whatever old file survived.
	q.waitSyncLocked()
	for _, o := range old {
		_ = o.f.Close()
		if err := q.fs.Remove(o.path); err != nil {
			q.log.Warn("cqueue: remove replaced file", "file", o.path, "err", err)
		}
	}
	_ = q.syncDirLocked() // a failure is retried by the next Sync
	return nil
}

// syncDirLocked syncs q.dir, remembering a failure for the next Sync. q.wmu is held.
func (q *Queue) syncDirLocked() error {
	if err := q.fs.SyncDir(q.dir); err != nil {
		q.dirChangedLocked()
		return fmt.Errorf("cqueue: sync dir %s: %w", q.dir, err)
	}
	q.dirDirty = false
	return nil
}

// Get returns the entry at off. It returns an error wrapping ErrOffsetTooSmall for
// off < Min, ErrOffsetTooLarge for off >= Max, and a *CorruptError for an entry on disk
// that does not decode.
func (q *Queue) Get(off int64) (Entry, error) {
	var e [1]Entry
	n, err := q.Read(off, e[:])
	if err != nil {
		return Entry{}, err
	}
	if n == 0 {
		return Entry{}, fmt.Errorf("%w: offset %d is at or past max", ErrOffsetTooLarge, off)
	}
	return e[0], nil
}

// Read stores up to len(dst) entries starting at off in dst and returns how many. Reading
// at Max returns 0 and nil: a consumer that has caught up is not an error. off > Max
// returns an error wrapping ErrOffsetTooLarge, off < Min one wrapping ErrOffsetTooSmall.
// An entry on disk that does not decode stops the read with a *CorruptError (wrapping
// ErrCorrupt); the n entries before it are valid.
func (q *Queue) Read(off int64, dst []Entry) (int, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return 0, ErrClosed
	}
	lo, hi := q.min.Load(), q.max.Load()
	switch {
	case off < lo:
		return 0, fmt.Errorf("%w: offset %d, min %d", ErrOffsetTooSmall, off, lo)
	case off > hi:
		return 0, fmt.Errorf("%w: offset %d, max %d", ErrOffsetTooLarge, off, hi)
	}
	want := int(min(int64(len(dst)), hi-off))
	done := 0
	for done < want {
		s := q.segs[(off-q.segs[0].base)/q.n]
		slot := off - s.base
		k := int(min(int64(want-done), q.n-slot))
		n, err := s.read(slot, dst[done:done+k])
		if s.m != nil {
			q.countCold(s, slot*EntrySize, (slot+int64(k))*EntrySize, (hi-s.base)*EntrySize)
		}
		done += n
		if err != nil {
			return done, err
		}
		off += int64(k)
	}
	return done, nil
}

// Search returns the smallest offset in [Min, Max) whose entry makes fn true, or Max if
// there is none. fn must be monotone over the queue (false for a prefix, then true), as
// "the record's store time is at least T" is; the store uses it to find an offset by
// time. An error from fn or from reading stops the search and is returned.
func (q *Queue) Search(fn func(Entry) (bool, error)) (int64, error) {
	if fn == nil {
		return 0, errors.New("cqueue: Search needs a function")
	}
	lo, hi := q.min.Load(), q.max.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Get(mid)
		if err != nil {
			return 0, err
		}
		ok, err := fn(e)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// Last returns the entry at Max()-1, and false if the queue is empty (or closed, or that
// entry cannot be read). Recovery compares it with the end of the commitlog.
func (q *Queue) Last() (Entry, bool) {
	hi := q.max.Load()
	if hi <= q.min.Load() {
		return Entry{}, false
	}
	e, err := q.Get(hi - 1)
	return e, err == nil
}

// Sync makes every entry appended so far durable: it fdatasyncs the active file and the
// last sealed one if that is not synced yet (see Prepare), and syncs the directory if a file
// name is not durable yet. Appends may go on while the fsyncs run; those they do not cover
// leave the queue dirty for the next Sync. (A second Sync or a Prepare in flight makes Sync
// wait with wmu held: callers that want Appends to go on sync from one goroutine.)
func (q *Queue) Sync() error { return q.syncOutside(true) }

// syncOutside syncs, holding wmu only to choose what to sync and to note what was synced: the
// sealed file not yet synced, the directory if dirty, and with active the active file.
func (q *Queue) syncOutside(active bool) error {
	q.wmu.Lock()
	if q.closed {
		q.wmu.Unlock()
		return ErrClosed
	}
	sealed, dir, dirGen := q.sealed, q.dirDirty, q.dirGen
	var s *segment
	gen := q.gen
	if active && q.dirty && len(q.segs) > 0 {
		s = q.segs[len(q.segs)-1]
	}
	if sealed == nil && !dir && s == nil {
		q.wmu.Unlock()
		return nil
	}
	q.smu.Lock() // before wmu is released: whoever closes a file waits for the sync
	q.wmu.Unlock()
	var err error
	if sealed != nil {
		if e := sealed.f.Sync(); e != nil {
			err = fmt.Errorf("cqueue: sync %s: %w", sealed.path, e)
		}
	}
	if dir && err == nil {
		if e := q.fs.SyncDir(q.dir); e != nil {
			err = fmt.Errorf("cqueue: sync dir %s: %w", q.dir, e)
		}
	}
	if s != nil && err == nil {
		if e := s.f.Sync(); e != nil {
			err = fmt.Errorf("cqueue: sync %s: %w", s.path, e)
		}
	}
	q.smu.Unlock()
	if err != nil {
		return err
	}
	q.wmu.Lock()
	if sealed != nil && q.sealed == sealed {
		q.sealed = nil
	}
	if dir && q.dirGen == dirGen {
		q.dirDirty = false
	}
	if s != nil && q.gen == gen {
		q.dirty = false
	}
	q.wmu.Unlock()
	return nil
}

// markDirtyLocked notes that the active file has bytes not yet synced. q.wmu is held.
func (q *Queue) markDirtyLocked() {
	q.dirty = true
	q.gen++
}

// waitSyncLocked waits for a Sync whose fdatasync is in flight, so that a file can be
// closed. q.wmu is held, so no other Sync starts.
func (q *Queue) waitSyncLocked() {
	q.smu.Lock()
	q.smu.Unlock() // an empty critical section: waiting is the point
}

// syncLocked is Sync with q.wmu held.
func (q *Queue) syncLocked() error {
	if err := q.syncSealedLocked(); err != nil {
		return err
	}
	if q.dirDirty {
		if err := q.syncDirLocked(); err != nil {
			return err
		}
	}
	if q.dirty && len(q.segs) > 0 {
		s := q.segs[len(q.segs)-1]
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("cqueue: sync %s: %w", s.path, err)
		}
		q.dirty = false
	}
	return nil
}

// Close syncs the queue, unmaps the active file and closes all files. Later calls to any
// method return ErrClosed, except Min and Max, which keep their last values.
func (q *Queue) Close() error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return ErrClosed
	}
	err := q.syncLocked()
	if err == nil && q.werr != nil {
		err = q.werr
	}
	q.waitSyncLocked()
	q.dropNextLocked()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, s := range q.segs {
		if uerr := s.unmap(); uerr != nil && err == nil {
			err = uerr
		}
		if cerr := s.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("cqueue: close %s: %w", s.path, cerr)
		}
	}
	q.segs = nil
	return err
}
