package commitlog

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/edgemq/edgemq/store/vfs"
)

// FlushMode says when appended records become durable.
type FlushMode int

const (
	// FlushSync makes Append wait until an fsync covers its records. Concurrent appenders
	// share one fsync (group commit).
	FlushSync FlushMode = iota
	// FlushAsync returns from Append at once; a background flush runs every FlushInterval or
	// once FlushBytes are unflushed, whichever comes first.
	FlushAsync
)

// String returns "sync" or "async", as ParseFlushMode reads them, or "FlushMode(n)" for
// a value that is neither.
func (m FlushMode) String() string {
	switch m {
	case FlushSync:
		return "sync"
	case FlushAsync:
		return "async"
	}
	return "FlushMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseFlushMode parses "sync" or "async".
func ParseFlushMode(s string) (FlushMode, error) {
	switch s {
	case "sync", "":
		return FlushSync, nil
	case "async":
		return FlushAsync, nil
	}
	return 0, fmt.Errorf("commitlog: unknown flush mode %q (want sync or async)", s)
}

// OnFull says what an append does when the file system has no room for a new segment.
type OnFull int

const (
	// FailWrites returns ErrDiskFull and keeps every stored record.
	FailWrites OnFull = iota
	// DropOldest deletes the oldest segments to make room, then retries.
	DropOldest
)

// ParseOnFull parses "fail" or "dropOldest".
func ParseOnFull(s string) (OnFull, error) {
	switch s {
	case "fail", "":
		return FailWrites, nil
	case "dropOldest":
		return DropOldest, nil
	}
	return 0, fmt.Errorf("commitlog: unknown onFull policy %q (want fail or dropOldest)", s)
}

// Options configures a Log. A zero field takes its default; nil Options means all defaults.
type Options struct {
	// FS is the storage layer. Default vfs.OS.
	FS vfs.FS
	// SegmentSize is the size in bytes of every segment file, header included.
	// Default 64 MiB; at least MinSegmentSize (64 KiB), at most MaxSegmentSize (2 GiB, 1 GiB
	// on 32-bit platforms, where a mapping's length is an int; mind the address space there,
	// which must also hold up to MaxMapped sealed segments).
	SegmentSize int64
	// Flush is the flush policy. Default FlushSync.
	Flush FlushMode
	// FlushInterval is how often an async log flushes, and the longest a sync log leaves
	// the records of lazy appends (AfterAppendLazy) unflushed. Default 500 ms.
	FlushInterval time.Duration
	// FlushBytes makes an async log flush once this many bytes are unflushed. Default 4 MiB.
	FlushBytes int64
	// Linger, with FlushSync, is how long an fsync waits for more appends to share it,
	// counted from the append that wakes the flusher: a waiter is acknowledged up to Linger
	// (plus the fsync) later, and the fsyncs of a slow stream of appends, each of which
	// rewrites the log's last 4 KiB page (flash wear), fall to one per Linger. The wait ends
	// early once a page of records (LingerPage bytes) is unflushed, where more waiting no
	// longer saves a page write. Default 0: group commit only, no waiting but a short gather
	// of appenders that just took part in an fsync. At most MaxLinger; negative is refused.
	Linger time.Duration
	// MaxAge deletes a sealed segment once its newest record is older than this.
	// Default 72 h; negative disables age retention.
	MaxAge time.Duration
	// MaxBytes caps the bytes of all segment files; the oldest segments are deleted to stay
	// under it. Default 0: no byte quota. When set, at least 2 segments.
	MaxBytes int64
	// MaxUsedRatio deletes the oldest segments while the file system holding the log is more
	// than this fraction full, in (0, 1]. Default 0.75; negative disables. Above 1, and NaN,
	// are refused.
	MaxUsedRatio float64
	// OnFull is the policy when the file system is full. Default FailWrites.
	OnFull OnFull
	// MaxBrokenBytes caps the bytes of the .broken files in the log's directory: bytes
	// recovery cut and segments it moved aside, kept for inspection. Each Open deletes the
	// oldest (of the earliest recovery) until the rest fit, so a device that loses power
	// often does not fill up with them; they are not counted in MaxBytes. Default two
	// segments (2 × SegmentSize); negative keeps none.
	MaxBrokenBytes int64
	// RetentionInterval is how often retention and idle-unmapping run. Default 10 s.
	RetentionInterval time.Duration
	// MaxMapped is how many sealed segments may stay mapped while idle; 32-bit boxes have
	// small address spaces. Default 8.
	MaxMapped int
	// ResidentBytes bounds the log's pages in the process's resident set (RSS, and its peak
	// VmHWM), which counts every mapped page touched, although the page cache holds them
	// anyway. About this many bytes just behind the write position stay resident, where
	// consumers that keep up read, until an async flush, which drops what it writes back
	// first (writeback would write-protect each mapped page with a TLB shootdown). Older
	// pages, flushed or not, are dropped in steps of a quarter of it (at least 64 KiB), and
	// pages readers fault in further back are dropped whenever a reader moves to another
	// 2 MiB region there (the last two regions readers entered stay). Dropped pages stay in
	// the page cache, dirty ones until the next fsync, so touching one again costs a minor
	// fault. Default 512 KiB (about 4,500 records of 100 bytes; a consumer further behind
	// takes a minor fault per page it reads); negative keeps every touched page resident
	// until its segment is unmapped.
	ResidentBytes int64
	// PrefaultBytes is how far ahead of the write position, with async flush, a goroutine
	// maps the active segment for writing while the log is busy (PrefaultRate), so that
	// appends do not take the page fault of each new page (about 4 µs on a VM, inside the
	// store's append lock). The pages it maps are dirty zeros until written, so a flush
	// meanwhile writes up to this many bytes of zeros, which is why a slow log, whose
	// flushes write little, is not prefaulted, and sync flush never. Default 256 KiB;
	// negative turns prefaulting off.
	PrefaultBytes int64
	// WriteBuffer is the size of a buffer in which appends gather records before one
	// pwrite writes them to the segment file, instead of writing each record through the
	// mapping, whose new pages cost the kernel far more (a fault and zeroing per 4 KiB page)
	// than a large write does. The buffer is written out when full, at a segment roll and
	// before every fsync, so what an fsync covers is the same and power cuts lose nothing
	// more; reads of its records are served from it. With FlushSync a process crash (SIGKILL)
	// loses nothing more either: an append waits for the fsync, which comes after the
	// write, and the appends that do not wait (AfterAppendLazy) write the buffer out before
	// they return. With FlushAsync the records still in the buffer when the process dies
	// are lost, up to WriteBuffer bytes, though their appends have returned (through the
	// mapping, the page cache keeps them). With it no page is prefaulted. At most
	// MaxWriteBuffer; 0: the default, DefaultWriteBuffer with FlushSync and none with
	// FlushAsync; negative: none, every record is written through the mapping.
	WriteBuffer int64
	// ZeroAhead, with FlushSync and a write buffer, is how far ahead of the records written
	// to the active segment the log writes zeros into the file (in the same write-out of the
	// buffer, under the append lock, where no record can be), ZeroAhead at a time once the
	// records come within half of it. The segment's blocks are preallocated but unwritten:
	// the first fsync that covers a write to such a block also commits the file system's
	// journal (on ext4), which makes the fsyncs of a sync-mode log take about half as long
	// again as fsyncs of blocks written before. Zeros written ahead take that commit once a
	// ZeroAhead of records, at the price of writing each segment's bytes twice (zeros, then
	// records: where the journal's commits are cheap, up to a byte of device writes more per
	// byte of records). Default 256 KiB, or a quarter of SegmentSize if less; at most
	// SegmentSize (a larger value zeros a whole segment at its first write); negative: off.
	// Ignored with FlushAsync or no write buffer.
	ZeroAhead int64
	// PrefaultRate is the write rate, in bytes per second, from which the log counts as
	// busy and is prefaulted. Default 16 MiB/s (about 140,000 records of 100 bytes a
	// second).
	PrefaultRate int64
	// PayloadVersion is recorded in every segment header for the payload codec of the layer
	// above. Default 0.
	PayloadVersion uint8
	// Now is the clock for store timestamps of segment headers and for retention.
	// Default time.Now.
	Now func() time.Time
	// Logger receives recovery and retention reports. Default: discard.
	Logger *slog.Logger
	// OnDurable, if set, is called from the flusher after each fsync that made more records
	// durable, with the new durable position. It must not block or append.
	OnDurable func(durable int64)
	// OnRetention, if set, is called from the retention goroutine after segments were
	// deleted, with the new minimum position. It must not call Close.
	OnRetention func(minPos int64)
	// RetentionFloor, if set, is the position from which retention (by age, bytes, used
	// ratio, and the DropOldest policy of a full disk) keeps every segment: a segment holding
	// a position at or past it is not deleted. math.MaxInt64 holds nothing. The retention
	// goroutine calls it before each pass, never with the log's lock held; appends that
	// delete segments use the value of the last pass (0, holding everything, before the
	// first). It must not block on the log.
	RetentionFloor func() int64
}

// DefaultOptions holds the defaults that zero fields take.
var DefaultOptions = Options{
	FS:                vfs.OS,
	SegmentSize:       64 << 20,
	Flush:             FlushSync,
	FlushInterval:     500 * time.Millisecond,
	FlushBytes:        4 << 20,
	MaxAge:            72 * time.Hour,
	MaxUsedRatio:      0.75,
	OnFull:            FailWrites,
	RetentionInterval: 10 * time.Second,
	MaxMapped:         8,
	ResidentBytes:     512 << 10,
	PrefaultBytes:     256 << 10,
	PrefaultRate:      16 << 20,
	ZeroAhead:         256 << 10,
	Now:               time.Now,
}

// MaxLinger is the largest Linger.
const MaxLinger = time.Second

// MaxWriteBuffer is the largest Options.WriteBuffer.
const MaxWriteBuffer = 64 << 20

// DefaultWriteBuffer is Options.WriteBuffer's default with FlushSync. A sync-mode buffer is
// written out before each fsync, so it holds what arrives between two of them: a 1,024-message
// batch of 180 bytes each is 184 KiB.
const DefaultWriteBuffer = 1 << 20

// LingerPage is the unflushed bytes that end a Linger early: a page of the page cache, what
// each fsync writes at least.
const LingerPage = 4096

// MinSegmentSize is the smallest SegmentSize Open accepts.
const MinSegmentSize = 64 << 10

// MaxSegmentSize is the largest SegmentSize Open accepts: 2 GiB, or 1 GiB where int, a
// mapping's length, has 32 bits.
const MaxSegmentSize = 1 << (30 + strconv.IntSize/64)

// Validate reports the first option out of range, as Open would, without touching the
// disk: a caller that sets up more than the log (the store) can refuse bad options before
// it writes anything. A nil *Options is valid.
func (o *Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	if r.FS == nil {
		r.FS = d.FS
	}
	if r.SegmentSize == 0 {
		r.SegmentSize = d.SegmentSize
	}
	if r.FlushInterval == 0 {
		r.FlushInterval = d.FlushInterval
	}
	if r.FlushBytes == 0 {
		r.FlushBytes = d.FlushBytes
	}
	if r.MaxAge == 0 {
		r.MaxAge = d.MaxAge
	}
	if r.MaxUsedRatio == 0 {
		r.MaxUsedRatio = d.MaxUsedRatio
	}
	if r.RetentionInterval == 0 {
		r.RetentionInterval = d.RetentionInterval
	}
	if r.MaxMapped == 0 {
		r.MaxMapped = d.MaxMapped
	}
	if r.ResidentBytes == 0 {
		r.ResidentBytes = d.ResidentBytes
	}
	if r.PrefaultBytes == 0 {
		r.PrefaultBytes = d.PrefaultBytes
	}
	if r.PrefaultRate == 0 {
		r.PrefaultRate = d.PrefaultRate
	}
	if r.ZeroAhead == 0 {
		r.ZeroAhead = min(d.ZeroAhead, r.SegmentSize/4)
	}
	r.ZeroAhead = min(r.ZeroAhead, r.SegmentSize) // past a segment's end is nothing to zero
	if r.WriteBuffer == 0 && r.Flush == FlushSync {
		r.WriteBuffer = DefaultWriteBuffer
	}
	if r.Now == nil {
		r.Now = d.Now
	}
	if r.MaxBrokenBytes == 0 {
		r.MaxBrokenBytes = 2 * r.SegmentSize
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case r.SegmentSize < MinSegmentSize || r.SegmentSize > MaxSegmentSize:
		return r, fmt.Errorf("commitlog: SegmentSize %d out of range [%d, %d]", r.SegmentSize, MinSegmentSize, int64(MaxSegmentSize))
	case r.Flush != FlushSync && r.Flush != FlushAsync:
		return r, fmt.Errorf("commitlog: unknown Flush mode %d (want FlushSync or FlushAsync)", r.Flush)
	case r.FlushInterval < 0:
		return r, fmt.Errorf("commitlog: FlushInterval %v is negative (want > 0, or 0 for the default %v)", r.FlushInterval, d.FlushInterval)
	case r.Linger < 0 || r.Linger > MaxLinger:
		return r, fmt.Errorf("commitlog: Linger %v out of range [0, %v]", r.Linger, MaxLinger)
	case r.FlushBytes < 0:
		return r, fmt.Errorf("commitlog: FlushBytes %d is negative (want > 0, or 0 for the default %d)", r.FlushBytes, d.FlushBytes)
	case r.RetentionInterval < 0:
		return r, fmt.Errorf("commitlog: RetentionInterval %v is negative (want > 0, or 0 for the default %v)", r.RetentionInterval, d.RetentionInterval)
	case r.MaxMapped < 0:
		return r, fmt.Errorf("commitlog: MaxMapped %d is negative (want > 0, or 0 for the default %d)", r.MaxMapped, d.MaxMapped)
	case r.WriteBuffer > MaxWriteBuffer:
		return r, fmt.Errorf("commitlog: WriteBuffer %d is more than %d (want 0 for the default, or negative for none)", r.WriteBuffer, MaxWriteBuffer)
	case r.PrefaultRate < 0:
		return r, fmt.Errorf("commitlog: PrefaultRate %d is negative (want > 0, or 0 for the default %d)", r.PrefaultRate, d.PrefaultRate)
	case r.MaxBytes < 0:
		return r, fmt.Errorf("commitlog: MaxBytes %d is negative (want 0 for no quota, or at least two segments)", r.MaxBytes)
	case r.MaxBytes > 0 && r.MaxBytes < 2*r.SegmentSize:
		return r, fmt.Errorf("commitlog: MaxBytes %d must be 0 (no quota) or at least two segments (%d)", r.MaxBytes, 2*r.SegmentSize)
	case r.MaxUsedRatio > 1 || math.IsNaN(r.MaxUsedRatio):
		return r, fmt.Errorf("commitlog: MaxUsedRatio %v out of range (want a fraction in (0, 1], 0 for the default %v, or negative to disable)", r.MaxUsedRatio, d.MaxUsedRatio)
	case r.OnFull != FailWrites && r.OnFull != DropOldest:
		return r, fmt.Errorf("commitlog: unknown OnFull policy %d (want FailWrites or DropOldest)", r.OnFull)
	}
	return r, nil
}
