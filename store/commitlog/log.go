package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/store/vfs"
)

// Log is a segmented, memory-mapped, append-only log of records. Appends are serialized;
// reads run concurrently with appends and with each other.
//
// Goroutines (all stopped and waited for by Close):
//   - the flusher: fsyncs written bytes (on demand in sync mode, after Linger, and on a timer
//     for lazy appends; on a timer or byte count in async mode), wakes appenders waiting for
//     durability, and writes the checkpoint;
//   - the preparer: creates and preallocates the next segment file ahead of need;
//   - the retention loop: deletes expired or over-quota segments and unmaps idle ones.
type Log struct {
	dir  string
	opts Options
	fs   vfs.FS
	lg   *slog.Logger

	segs atomic.Pointer[[]*segment] // immutable snapshot, sorted by base; the last is active

	mu     sync.Mutex // serializes appends, rolls, retention deletes and Close
	active *segment
	adata  []byte // the active segment's writable mapping (the writer holds a reference)
	wbuf   []byte // the write buffer (wbuf.go): records at wpos-len(wbuf) to wpos
	wspare []byte // a written buffer no reader holds, for reuse
	wfree  *wtail // a retired wtail no reader held, for reuse
	wpos   int64  // next write position
	zeroed int64  // the active segment's file holds zeros written ahead below this offset (wbuf.go)
	closed bool

	written atomic.Int64          // end of the published records: readers read below it
	wtail   atomic.Pointer[wtail] // the write buffer as readers see it; nil when empty
	durable atomic.Int64          // end of the records covered by a completed fsync
	minPos  atomic.Int64          // first position of the oldest segment
	floor   atomic.Int64          // Options.RetentionFloor's last answer (MaxInt64 without one)
	failed  atomic.Bool           // an fsync failed: no more appends
	isShut  atomic.Bool           // Close was called

	fmu   sync.Mutex // guards ferr; fcond waits on it
	fcond *sync.Cond
	ferr  error
	kick  chan struct{} // capacity 1: wake the flusher
	ckpt  vfs.File      // flusher-owned after Open

	// The resident set (resident.go); window and step are set by Open.
	window   int64                     // ResidentBytes, or MaxInt64 when dropping is off
	step     int64                     // bytes written between drops behind the writer
	nextDrop atomic.Int64              // write position at which an appender drops behind itself again
	dropped  atomic.Int64              // the pages below this position were dropped behind the writer
	regions  [keptRegions]atomic.Int64 // regions readers entered last below the window, newest first
	dropOff  atomic.Bool               // ResidentBytes < 0, or DropResident failed: dropping is off

	// Prefaulting ahead of the writer (prefault.go).
	pkick      chan struct{} // capacity 1: wake prefaultLoop; nil when prefaulting is off
	pmark      atomic.Int64  // an append ending at or past this wakes prefaultLoop
	prefaultOn atomic.Bool   // cleared when the OS cannot
	pfilled    atomic.Int64  // positions below are populated, or claimed by a populate under way
	pstepAt    atomic.Int64  // unix ns when an append last moved pmark (helpPrefault)

	appends atomic.Int64 // Append calls so far, for group commit
	// Flusher-owned group-commit state: appends covered by the last flush, how many it
	// released, how many arrived while it ran, and how long its fsync took.
	covered, lastAcked, lastArrived int64
	lastFsync                       time.Duration
	gatherTimer                     *time.Timer
	gatherBack                      gatherBackoff

	prepc  chan prepared
	tmpSeq atomic.Int64
	tick   atomic.Int64 // retention ticks, for idle unmapping

	// doomed holds segments retention took out of the log but has not deleted yet: a roll
	// leaves their deletion (an unlink and a directory fsync) to the retention loop, out of
	// the append lock. Guarded by mu.
	doomed []*segment
	rkick  chan struct{} // capacity 1: wake the retention loop

	rec       RecoveryStats // what Open's recovery cut; written by Open only
	stats     logStats      // fsync latency and deletions (stats.go)
	brokenGen int64         // the number of Open's recovery in the names of .broken files

	done chan struct{}
	wg   sync.WaitGroup
}

type prepared struct {
	f    vfs.File
	path string
	err  error
}

// Record is one record read from the log. Payload aliases the log's mapping and is valid
// only until the next call on the Reader that returned it, or its Close.
type Record struct {
	Pos       int64  // position of the record: a stable, unique id
	Next      int64  // position just past the record
	StoreTime int64  // unix ms given to Append
	Payload   []byte // the bytes given to Append
}

// Open opens the log in dir, creating it if needed, and recovers it: from the last
// checkpoint it walks the records to the last whole one, and cuts a torn or corrupt tail
// (keeping the cut bytes in a .broken file, within Options.MaxBrokenBytes). Recovery says
// what it cut.
func Open(dir string, opts *Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{
		dir:   dir,
		opts:  o,
		fs:    o.FS,
		lg:    o.Logger.With("component", "commitlog", "dir", dir),
		kick:  make(chan struct{}, 1),
		prepc: make(chan prepared),
		rkick: make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	l.fcond = sync.NewCond(&l.fmu)
	if o.RetentionFloor == nil {
		l.floor.Store(math.MaxInt64)
	}
	l.initResident()
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("commitlog: create %s: %w", dir, err)
	}
	if err := l.load(); err != nil {
		l.closeSegments()
		return nil, err
	}
	l.wg.Add(3)
	go l.flushLoop()
	go l.prepareLoop()
	go l.retentionLoop()
	l.startPrefault()
	return l, nil
}

// load opens the segments, recovers the tail and maps the active segment for writing.
func (l *Log) load() error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("commitlog: list %s: %w", l.dir, err)
	}
	lastBase := int64(-1)
	for _, name := range names {
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		// Segment k starts at k*SegmentSize: a base that is no multiple was written with
		// another segment size, which reading (or extending) the segments would corrupt.
		if base%l.opts.SegmentSize != 0 {
			return fmt.Errorf("commitlog: %s starts at position %d, no multiple of SegmentSize %d: the log was written with another SegmentSize; open it with that one",
				filepath.Join(l.dir, name), base, l.opts.SegmentSize)
		}
		if base > math.MaxInt64-l.opts.SegmentSize {
			return fmt.Errorf("commitlog: %s starts at position %d, where a segment would end past the largest position", filepath.Join(l.dir, name), base)
		}
		lastBase = max(lastBase, base)
	}
	l.brokenGen = nextBrokenGen(names)
	var segs []*segment
	freshBase := int64(0) // where an empty log starts
	for _, name := range names {
		if filepath.Ext(name) == ".tmp" {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("commitlog: remove leftover %s: %w", name, err)
			}
			continue
		}
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		s, unstarted, err := l.openSegment(base, base == lastBase)
		if err != nil {
			for _, s := range segs {
				s.close()
			}
			return err
		}
		if s != nil {
			segs = append(segs, s)
		} else if unstarted {
			freshBase = base // it held nothing durable: the log goes on there
		}
	}
	// Names a roll or recovery left undurable (the process died before the flusher synced
	// them) must be durable before records in those segments count as durable.
	if err := l.fs.SyncDir(l.dir); err != nil {
		for _, s := range segs {
			s.close()
		}
		return fmt.Errorf("commitlog: sync dir %s: %w", l.dir, err)
	}
	for _, s := range segs {
		s.named.Store(true)
	}
	l.segs.Store(&segs)
	if len(segs) == 0 {
		f, path, err := l.createTemp()
		if err != nil {
			return err
		}
		if err := l.install(f, path, freshBase, 0); err != nil {
			return err
		}
		l.startDropping(freshBase)
		l.trimBroken()
		return nil
	}
	ckpt, err := l.openCheckpoint()
	if err != nil {
		return err
	}
	segs, end, err := l.recover(segs, ckpt)
	if err != nil {
		return err
	}
	l.segs.Store(&segs)
	last := segs[len(segs)-1]
	data, err := last.openWritable()
	if err != nil {
		return err
	}
	l.active, l.adata, l.wpos = last, data, end
	l.written.Store(end)
	l.durable.Store(end)
	l.minPos.Store(segs[0].base + HeaderSize)
	l.startDropping(last.base)
	l.trimBroken()
	return l.writeCheckpoint(end, true)
}

// openSegment opens an existing segment file and checks its header. A segment it cannot
// serve is taken out of the log (discard), and openSegment returns a nil segment: one with
// both header copies damaged, or a base that differs from its name, or shorter than a
// header; and the last segment with a header of zeros, which a roll named before a power cut
// (its header was never made durable, which comes before any record in it counts as
// durable: install), for which it reports unstarted. Of these, a segment that held no
// record (zeros after the header) is removed; any other is moved aside as a .broken file.
func (l *Log) openSegment(base int64, last bool) (s *segment, unstarted bool, err error) {
	path := segPath(l.dir, base)
	f, err := l.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false, fmt.Errorf("commitlog: open %s: %w", path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("commitlog: size of %s: %w", path, err)
	}
	if size < HeaderSize {
		f.Close()
		return nil, false, l.discard(path, base, 0, 0, fmt.Sprintf("segment shorter than its header (%d bytes)", size))
	}
	if size != l.opts.SegmentSize {
		if size > l.opts.SegmentSize {
			f.Close()
			return nil, false, fmt.Errorf("commitlog: %s is %d bytes, segment size is %d: open with the segment size the log was written with", path, size, l.opts.SegmentSize)
		}
		// A short file can only come from outside damage; the missing bytes read as zeros.
		l.lg.Warn("segment shorter than the segment size: extending with zeros", "segment", path, "size", size)
		if err := f.Allocate(l.opts.SegmentSize); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("commitlog: extend %s: %w", path, err)
		}
	}
	var hb [HeaderSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("commitlog: read header of %s: %w", path, err)
	}
	h, ok := parseHeader(hb[:])
	if ok && h.baseOffset == base && h.version == FormatVersion {
		return &segment{base: base, baseTime: h.baseTime, prevEnd: int64(h.prevEnd), path: path, size: l.opts.SegmentSize, file: f}, false, nil
	}
	why := "segment header unusable: both header copies fail their checksum"
	unstarted = last && allZero(hb[:])
	switch {
	case unstarted:
		why = "the last segment's header was never made durable (a power cut during a roll); none of its records had been made durable"
	case ok:
		why = fmt.Sprintf("segment header unusable: it says base %d version %d", h.baseOffset, h.version)
	}
	records, bytes, err := l.surveyFile(f, l.opts.SegmentSize)
	f.Close()
	if err != nil {
		return nil, false, err
	}
	return nil, unstarted, l.discard(path, base, records, bytes, why)
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool { return lastNonZero(b, 0) == 0 }

// recover walks the records from the checkpoint to the end and keeps the longest whole
// prefix: it cuts the first torn or corrupt record and, when a segment's data ends short of
// where the next segment's header says it ended (a tail lost to a power cut), it cuts there
// and moves the later segments aside. It returns the segments kept and the end position.
func (l *Log) recover(segs []*segment, ckpt int64) ([]*segment, int64, error) {
	first := segs[0]
	last := segs[len(segs)-1]
	start := ckpt
	if start < first.base+HeaderSize || start > last.base+last.size {
		start = first.base + HeaderSize
	}
	k := sort.Search(len(segs), func(i int) bool { return segs[i].base+segs[i].size > start })
	if k == len(segs) { // the checkpoint is the very end of the last segment
		return segs, start, nil
	}
	// Without a checkpoint the walk starts at the first segment, among data synced long ago:
	// damage there is bit rot, not a torn write, and cutting the log at it would throw away
	// every later record. Only the last two segments can hold data a power cut tore (a flush
	// never leaves more than one segment boundary unsynced).
	sealedBelow := 0
	if ckpt < 0 {
		sealedBelow = len(segs) - 2
	}
	for i := k; i < len(segs); i++ {
		s := segs[i]
		off := int64(HeaderSize)
		if i == k && start > s.base+HeaderSize {
			off = start - s.base
		}
		off, st, err := l.scanSegment(s, off)
		if err != nil {
			return nil, 0, err
		}
		isLast := i == len(segs)-1
		if !isLast {
			next := segs[i+1]
			if st == frameEnd && next.base == s.base+s.size && next.prevEnd == off {
				continue // a clean roll
			}
			if i < sealedBelow && next.base == s.base+s.size && next.prevEnd > off {
				l.lg.Error("damaged record in a sealed segment: its later records are reachable only through their queue entries", "segment", s.path, "offset", off, "reason", st.String())
				continue
			}
			l.lg.Error("the log ends short of the next segment (a tail lost to a power cut, or damage): cutting here", "segment", s.path, "offset", off, "reason", st.String(), "next_expected", next.prevEnd)
			for _, later := range segs[i+1:] {
				records, bytes, err := l.surveySegment(later)
				later.close()
				if err != nil {
					return nil, 0, err
				}
				if err := l.discard(later.path, later.base, records, bytes, "a segment after the end of the log"); err != nil {
					return nil, 0, err
				}
			}
			segs = segs[:i+1]
		}
		if err := l.cutTail(s, off, st); err != nil {
			return nil, 0, err
		}
		return segs, s.base + off, nil
	}
	panic("unreachable")
}

// scanSegment walks whole frames of s from off and returns where they end and why. The
// pages it reads leave the resident set as it goes.
func (l *Log) scanSegment(s *segment, off int64) (int64, frameStatus, error) {
	data, err := s.acquire(0)
	if err != nil {
		return 0, 0, err
	}
	defer s.release(l.fs)
	from := off
	for {
		_, _, n, st := decodeFrame(data[off:])
		if st != frameOK {
			l.dropScanned(s, from, off)
			return off, st, nil
		}
		off += int64(n)
		if off-from >= recoveryStep {
			l.dropScanned(s, from, off)
			from = off
		}
	}
}

// surveySegment is survey for a segment of the log.
func (l *Log) surveySegment(s *segment) (records, bytes int64, err error) {
	data, err := s.acquire(0)
	if err != nil {
		return 0, 0, err
	}
	records, bytes = survey(data, func(lo, hi int64) { l.dropScanned(s, lo, hi) })
	return records, bytes, s.release(l.fs)
}

// cutTail makes off the end of the last segment s: any non-zero bytes from off on (a torn or
// corrupt record, or stale bytes that new records could one day make look whole) are saved
// to a .broken file and zeroed.
func (l *Log) cutTail(s *segment, off int64, st frameStatus) error {
	data, err := s.acquire(0)
	if err != nil {
		return err
	}
	// Scan back from the end of the file in steps, dropping each: the zeros past the end
	// of the data are most of a segment.
	cutTo := int64(len(data))
	for cutTo > off {
		lo := max(off, cutTo-recoveryStep)
		nz := lastNonZero(data[:cutTo], lo)
		l.dropScanned(s, lo, cutTo)
		if nz > lo {
			cutTo = nz
			break
		}
		cutTo = lo
	}
	var broken []byte
	if cutTo > off {
		broken = append([]byte(nil), data[off:cutTo]...)
	}
	if err := s.release(l.fs); err != nil {
		return err
	}
	if broken == nil {
		return nil
	}
	if st == frameEnd {
		l.lg.Warn("stale bytes after the last record: cutting them", "segment", s.path, "offset", off, "bytes", len(broken))
	} else {
		l.lg.Error("torn or corrupt record: cutting the log here", "segment", s.path, "offset", off, "reason", st.String(), "bytes", len(broken))
	}
	return l.cut(s, off, broken)
}

// cut saves broken to a .broken file and zeroes the segment from off.
func (l *Log) cut(s *segment, off int64, broken []byte) error {
	bpath := l.brokenPath(s.base, off)
	bf, err := l.fs.OpenFile(bpath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: save cut bytes: %w", err)
	}
	_, err = bf.WriteAt(broken, 0)
	if err == nil {
		err = bf.Sync()
	}
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commitlog: save cut bytes to %s: %w", bpath, err)
	}
	l.rec.BrokenMade++
	l.rec.Bytes += int64(len(broken))
	if err := s.file.Truncate(off); err != nil {
		return fmt.Errorf("commitlog: cut %s at %d: %w", s.path, off, err)
	}
	if err := s.file.Allocate(s.size); err != nil {
		return fmt.Errorf("commitlog: re-extend %s: %w", s.path, err)
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s after cut: %w", s.path, err)
	}
	return l.fs.SyncDir(l.dir)
}

// lastNonZero returns the offset just past the last non-zero byte of data at or after from.
// It compares eight bytes at a time: at every Open it runs over the zeros that fill most of
// the active segment.
func lastNonZero(data []byte, from int64) int64 {
	i := int64(len(data))
	for i > from && i%8 != 0 && data[i-1] == 0 {
		i--
	}
	for i-8 >= from && binary.NativeEndian.Uint64(data[i-8:i]) == 0 {
		i -= 8
	}
	for i > from && data[i-1] == 0 {
		i--
	}
	return i
}

// createTemp creates a preallocated segment file under a temporary name and fsyncs it, so
// that the fsync which later covers its first records has no allocation left to commit.
func (l *Log) createTemp() (vfs.File, string, error) {
	path := filepath.Join(l.dir, fmt.Sprintf("prealloc-%d.tmp", l.tmpSeq.Add(1)))
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("commitlog: create segment: %w", err)
	}
	if err := f.Allocate(l.opts.SegmentSize); err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, "", fmt.Errorf("commitlog: preallocate segment: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, "", fmt.Errorf("commitlog: sync new segment: %w", err)
	}
	return f, path, nil
}

// install turns a prepared file into the active segment at base. Caller holds mu (or is Open).
//
// It syncs nothing: the append lock is held, and a roll that waited for two fsyncs (the
// header, then the directory) stalled every sender for milliseconds, longer on an SD card.
// The flusher makes the header and the name durable instead, with the segment's first
// fsync and before any record in it counts as durable (flushOnce). A power cut before then
// may leave the segment under its name with its header unwritten, all zeros; Open removes
// such a segment when it is the last (load).
func (l *Log) install(f vfs.File, tmp string, base, prevEnd int64) error {
	data, err := f.Map(int(l.opts.SegmentSize), true)
	if err != nil {
		f.Close()
		l.fs.Remove(tmp)
		return fmt.Errorf("commitlog: map new segment: %w", err)
	}
	h := header{version: FormatVersion, payloadVersion: l.opts.PayloadVersion, baseOffset: base, baseTime: l.opts.Now().UnixMilli(), prevEnd: uint32(prevEnd)}
	h.put(data)
	path := segPath(l.dir, base)
	if err := l.fs.Rename(tmp, path); err != nil {
		f.Unmap(data)
		f.Close()
		l.fs.Remove(tmp)
		return fmt.Errorf("commitlog: name new segment: %w", err)
	}
	s := &segment{base: base, baseTime: h.baseTime, prevEnd: prevEnd, path: path, size: l.opts.SegmentSize, file: f, data: data, writable: true, refs: 1}
	old := *l.segs.Load()
	segs := make([]*segment, len(old), len(old)+1)
	copy(segs, old)
	segs = append(segs, s)
	l.segs.Store(&segs)
	if l.active != nil {
		if err := l.active.release(l.fs); err != nil {
			l.lg.Warn("release sealed segment", "err", err)
		}
	}
	l.active, l.adata, l.wpos, l.zeroed = s, data, base+HeaderSize, 0
	if len(old) == 0 {
		l.written.Store(l.wpos)
		l.durable.Store(l.wpos)
		l.minPos.Store(l.wpos)
	}
	return nil
}

// Append writes payloads as consecutive records in one segment, all stamped with storeTime
// (unix ms). It fills pos[i] (when pos is not nil) with each record's position and returns
// the end position of the batch. Append does not wait for durability: call WaitDurable.
func (l *Log) Append(storeTime int64, payloads [][]byte, pos []int64) (int64, error) {
	end, err := l.AppendDeferred(storeTime, payloads, pos)
	if err == nil {
		l.AfterAppend(end)
	}
	return end, err
}

// AppendDeferred is Append without its follow-up work, which the caller must do by calling
// AfterAppend(end) once it can: a caller that serializes appends under its own lock calls
// it after releasing that lock, so that the system calls it may make (dropping pages behind
// the writer, waking the flusher) do not hold up the next appender.
func (l *Log) AppendDeferred(storeTime int64, payloads [][]byte, pos []int64) (int64, error) {
	if pos != nil && len(pos) < len(payloads) {
		return 0, fmt.Errorf("commitlog: %d positions for %d payloads", len(pos), len(payloads))
	}
	if len(payloads) == 0 {
		return l.written.Load(), nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	if l.failed.Load() {
		l.mu.Unlock()
		return 0, l.flushErr()
	}
	d := storeTime - l.active.baseTime
	need := batchSize(payloads, d)
	if need > l.opts.SegmentSize-HeaderSize {
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: %d bytes, segment holds %d", ErrTooLarge, need, l.opts.SegmentSize-HeaderSize)
	}
	if l.wpos+need > l.active.base+l.active.size {
		if err := l.rollLocked(); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		d = storeTime - l.active.baseTime
		need = batchSize(payloads, d)
	}
	if l.opts.WriteBuffer > 0 {
		if err := l.bufferFramesLocked(d, payloads, need, pos); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		end := l.wpos
		l.written.Store(end)
		l.appends.Add(1)
		l.mu.Unlock()
		return end, nil
	}
	off := l.wpos - l.active.base
	for i, p := range payloads {
		n := int64(frameSize(len(p), d))
		putFrame(l.adata[off:off+n], d, p)
		if pos != nil {
			pos[i] = l.active.base + off
		}
		off += n
	}
	l.wpos = l.active.base + off
	end := l.wpos
	l.written.Store(end)
	l.appends.Add(1)
	l.mu.Unlock()
	return end, nil
}

// AfterAppend does what follows an append that ended at end: it drops the pages that fell
// out of the resident window and wakes the flusher when a flush is due.
func (l *Log) AfterAppend(end int64) {
	end = min(end, l.written.Load()) // an end past the log would stop drops and prefaults for good
	l.maybeDropBehind(end)
	l.kickPrefault(end)
	if l.opts.Flush == FlushSync || end-l.durable.Load() >= l.opts.FlushBytes {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// AfterAppendLazy is AfterAppend for records whose appender does not wait for them to be
// durable: with FlushSync it does not wake the flusher, which covers them with the next fsync
// another appender asks for, or else within FlushInterval (or once FlushBytes are unflushed),
// as with FlushAsync. With FlushSync and a write buffer it writes the buffer out first, if
// the records are still in it, so that they outlive a crash of the process as through the
// mapping.
func (l *Log) AfterAppendLazy(end int64) {
	end = min(end, l.written.Load())
	if l.opts.Flush == FlushSync && l.opts.WriteBuffer > 0 {
		l.drainThrough(end)
	}
	l.maybeDropBehind(end)
	l.kickPrefault(end)
	if end-l.durable.Load() >= l.opts.FlushBytes {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func batchSize(payloads [][]byte, d int64) int64 {
	var n int64
	for _, p := range payloads {
		n += int64(frameSize(len(p), d))
	}
	return n
}

// rollLocked seals the active segment and starts the next one.
func (l *Log) rollLocked() error {
	if err := l.drainLocked(); err != nil {
		return err
	}
	p := <-l.prepc
	if p.err != nil {
		// The preparer failed earlier; space may have returned since.
		p.f, p.path, p.err = l.createTemp()
	}
	dropped := 0
	for p.err != nil && errors.Is(p.err, vfs.ErrNoSpace) && l.opts.OnFull == DropOldest {
		if l.deleteOldestLocked(1) == 0 {
			break
		}
		l.destroy(l.takeDoomedLocked()) // the space is needed now: delete under the lock
		dropped++
		p.f, p.path, p.err = l.createTemp()
	}
	if dropped > 0 {
		l.afterRetention()
	}
	if p.err != nil {
		if errors.Is(p.err, vfs.ErrNoSpace) {
			return fmt.Errorf("%w: %w", ErrDiskFull, p.err)
		}
		return p.err
	}
	if n := l.retainLocked(l.opts.SegmentSize); n > 0 {
		l.kickRetention() // it deletes them, out of the lock
	}
	return l.install(p.f, p.path, l.active.base+l.active.size, l.wpos-l.active.base)
}

// WaitDurable blocks until an fsync covers every byte before end (a value returned by
// Append), or the flush failed. An end past what was appended is an error.
func (l *Log) WaitDurable(end int64) error {
	if l.durable.Load() >= end {
		return nil
	}
	if w := l.written.Load(); end > w { // it would wait for good
		return fmt.Errorf("commitlog: WaitDurable(%d) past the end of the log, %d: not an end Append returned", end, w)
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	for l.durable.Load() < end && l.ferr == nil {
		l.fcond.Wait()
	}
	if l.durable.Load() >= end {
		return nil
	}
	return l.ferr
}

// Flush makes every record appended so far durable and waits for it.
func (l *Log) Flush() error {
	if l.isShut.Load() {
		return ErrClosed
	}
	return l.WaitDurable(l.written.Load())
}

// Err returns the error of the fsync that failed (wrapping ErrFlush), or nil while every
// flush succeeded. It is sticky: after a failed fsync the log refuses writes until reopened.
func (l *Log) Err() error { return l.flushErr() }

func (l *Log) flushErr() error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return l.ferr
}

// Written returns the end of the records appended so far (readers may read below it).
func (l *Log) Written() int64 { return l.written.Load() }

// Durable returns the end of the records covered by a completed fsync.
func (l *Log) Durable() int64 { return l.durable.Load() }

// MinPos returns the position of the oldest retained byte; records before it are gone.
func (l *Log) MinPos() int64 { return l.minPos.Load() }

// SegmentSize returns the size of each segment file.
func (l *Log) SegmentSize() int64 { return l.opts.SegmentSize }

// Size returns the bytes of all segment files.
func (l *Log) Size() int64 { return int64(len(*l.segs.Load())) * l.opts.SegmentSize }

func (l *Log) flushLoop() {
	defer l.wg.Done()
	// With FlushSync the ticker covers the records of lazy appends (AfterAppendLazy).
	t := time.NewTicker(l.opts.FlushInterval)
	defer t.Stop()
	lastCkpt := time.Now()
	for {
		wait := l.opts.Flush == FlushSync
		select {
		case <-l.kick:
		case <-t.C:
			if l.written.Load() == l.durable.Load() {
				continue
			}
			wait = false // nobody asked: no gathering or lingering
		case <-l.done:
			l.flushOnce(true, false, &lastCkpt)
			return
		}
		l.flushOnce(false, wait, &lastCkpt)
	}
}

// maxGather caps how long group commit waits for appenders before an fsync.
const maxGather = 500 * time.Microsecond

// gatherBackoff keeps gathering from costing more than it saves: a gather that ended more
// than gatherOverrun after its deadline makes the next flush skip gathering, and each
// overrun after it twice as many flushes as the last one did, up to maxGatherSkip;
// gatherTrust gathers in a row that ended in time end the backing off.
type gatherBackoff struct {
	inTime  int // gathers in a row that ended in time
	backoff int // flushes the last overrun made skip gathering
	skip    int // flushes left to skip
}

const (
	maxGatherSkip = 1024
	gatherTrust   = 64
)

// gatherOverrun is how late past its deadline a gather may end before it counts as an
// overrun (a variable for the tests: a fake clock never overruns).
var gatherOverrun = 250 * time.Microsecond

// allow reports whether this flush may gather, counting a skipped one.
func (g *gatherBackoff) allow() bool {
	if g.skip > 0 {
		g.skip--
		return false
	}
	return true
}

// ended records a gather that ended late past its deadline.
func (g *gatherBackoff) ended(late time.Duration) {
	if late > gatherOverrun {
		g.inTime = 0
		g.backoff = min(max(2*g.backoff, 1), maxGatherSkip)
		g.skip = g.backoff
		return
	}
	if g.inTime++; g.inTime >= gatherTrust {
		g.backoff = 0
	}
}

// gather lets a sync-mode flush cover more appenders: the appenders the last flush released
// (and those that arrived while it ran) tend to append again within microseconds, and
// without a short wait for them, concurrent appenders split into two groups alternating
// between fsyncs. It waits until as many appends are pending as took part last time, at
// most half the last fsync's time (and maxGather). A lone appender never waits.
//
// Appenders that do not wait for each other's acknowledgements, such as a stream of sends
// arriving at a steady rate, are not coming back, and their appends may stop before the
// count is reached: the gather then ends on its timer, and the runtime wakes a goroutine
// sleeping on a timer under a millisecond away about a millisecond later when no goroutine
// runs, several fsyncs' time added to every acknowledgement behind it. Gathering backs off
// while its waits overrun that way (gatherOverrun); where appends keep coming, a gather
// ends at the first append past its deadline.
func (l *Log) gather() {
	want := l.lastAcked + l.lastArrived
	if want <= 1 || l.lastFsync <= 0 {
		return
	}
	if !l.gatherBack.allow() {
		return
	}
	limit := min(l.lastFsync/2, maxGather)
	deadline := time.Now().Add(limit)
	if l.gatherTimer == nil {
		l.gatherTimer = time.NewTimer(limit)
	} else {
		l.gatherTimer.Reset(limit)
	}
	defer l.gatherTimer.Stop()
	for l.appends.Load()-l.covered < want && time.Now().Before(deadline) {
		select {
		case <-l.kick:
		case <-l.gatherTimer.C:
		case <-l.done:
			return
		}
	}
	l.gatherBack.ended(time.Since(deadline))
}

// linger waits, before a sync-mode fsync, until Linger has passed since the flusher was
// woken or a page of records (LingerPage) is unflushed, so that the appends of a slow stream
// share fsyncs. Appends wake the flusher, which then checks the unflushed bytes again.
func (l *Log) linger() {
	if l.written.Load()-l.durable.Load() >= LingerPage {
		return
	}
	if l.gatherTimer == nil {
		l.gatherTimer = time.NewTimer(l.opts.Linger)
	} else {
		l.gatherTimer.Reset(l.opts.Linger)
	}
	defer l.gatherTimer.Stop()
	for l.written.Load()-l.durable.Load() < LingerPage {
		select {
		case <-l.kick:
		case <-l.gatherTimer.C:
			return
		case <-l.done:
			return
		}
	}
}

// checkpointEvery bounds how often the flusher rewrites the checkpoint.
const checkpointEvery = 100 * time.Millisecond

// flushOnce fsyncs what was written; wait lets a sync-mode flush gather or linger first.
func (l *Log) flushOnce(final, wait bool, lastCkpt *time.Time) {
	if l.failed.Load() {
		return
	}
	if wait {
		if l.opts.Linger > 0 {
			l.linger()
		} else {
			l.gather()
		}
	}
	n0 := l.appends.Load()
	target, err := l.drainForFlush()
	if err != nil {
		return // drainLocked failed the log
	}
	from := l.durable.Load()
	if l.opts.Flush == FlushAsync && target > from {
		l.dropBeforeFlush(target)
	}
	start := time.Now()
	if target > from {
		for _, s := range *l.segs.Load() {
			if s.base+s.size > from && s.base < target {
				if err = l.syncTimed(s.file); err != nil {
					err = fmt.Errorf("%w: fsync %s: %w", ErrFlush, s.path, err)
					break
				}
				// The header is durable now; the name must be too before the
				// segment's records count as durable (install).
				if !s.named.Load() {
					if err = l.fs.SyncDir(l.dir); err != nil {
						err = fmt.Errorf("%w: sync dir for %s: %w", ErrFlush, s.path, err)
						break
					}
					s.named.Store(true)
				}
			}
		}
	}
	if target > from {
		l.lastFsync = time.Since(start)
	}
	l.lastAcked, l.covered = n0-l.covered, n0
	l.lastArrived = l.appends.Load() - n0
	if err == nil && (final || (target > from && time.Since(*lastCkpt) >= checkpointEvery)) {
		*lastCkpt = time.Now()
		if cerr := l.writeCheckpoint(target, final); cerr != nil {
			l.lg.Warn("checkpoint not written; recovery will scan further", "err", cerr)
		}
	}
	l.fmu.Lock()
	if err != nil {
		l.ferr = err
		l.failed.Store(true)
		l.lg.Error("flush failed: the log refuses writes until reopened", "err", err)
	} else if target > from {
		l.durable.Store(target)
	}
	l.fcond.Broadcast()
	l.fmu.Unlock()
	if err == nil && target > from && l.opts.OnDurable != nil {
		l.opts.OnDurable(target)
	}
}

func (l *Log) prepareLoop() {
	defer l.wg.Done()
	for {
		f, path, err := l.createTemp()
		select {
		case l.prepc <- prepared{f, path, err}:
		case <-l.done:
			if f != nil {
				f.Close()
				l.fs.Remove(path)
			}
			return
		}
	}
}

// Close flushes, writes the checkpoint, stops the goroutines and releases every segment.
// Records appended before Close are durable when it returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.isShut.Store(true)
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	doomed := l.takeDoomedLocked() // a roll's, which the retention loop did not reach
	l.mu.Unlock()
	l.destroy(doomed)
	err := l.flushErr()
	if l.active != nil {
		if rerr := l.active.release(l.fs); err == nil {
			err = rerr
		}
	}
	if cerr := l.closeSegments(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeSegments() error {
	var err error
	if p := l.segs.Load(); p != nil {
		for _, s := range *p {
			if cerr := s.close(); err == nil {
				err = cerr
			}
		}
	}
	if l.ckpt != nil {
		if cerr := l.ckpt.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
