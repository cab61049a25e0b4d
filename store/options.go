package store

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/vfs"
)

// Options configures a Store. A zero field takes its default; nil Options means all defaults.
// A value outside the range a field's comment gives makes Open fail with an error wrapping
// ErrOptions, before it creates or writes anything.
type Options struct {
	// FS is the storage layer of the commitlog and the consume queues. Default vfs.OS.
	// (The meta store and the dir lock always use the real file system.)
	FS vfs.FS
	// SegmentSize is the commitlog segment size in bytes, commitlog.MinSegmentSize to
	// commitlog.MaxSegmentSize, and at least 2 × (MaxMessageSize + 64 KiB): a segment holds
	// two of the largest records. Default: what the data dir was created with, else 64 MiB.
	// A data dir keeps the size it was created with (ErrSettings).
	SegmentSize int64
	// QueueSegmentEntries is the number of 20-byte entries per consume-queue file, 1 to
	// cqueue.MaxSegmentEntries. Default 65536 (1.25 MiB).
	QueueSegmentEntries int
	// Flush is the commitlog flush policy, FlushSync or FlushAsync. Default
	// commitlog.FlushSync: Append returns after an fsync covers its records, shared by
	// concurrent appenders (group commit).
	Flush commitlog.FlushMode
	// FlushInterval is the async flush period. Default 500 ms. Negative durations and byte
	// counts are refused here and below, unless a field's comment says negative disables.
	FlushInterval time.Duration
	// FlushBytes makes an async log flush once this many bytes are unflushed. Default 4 MiB.
	FlushBytes int64
	// Linger, with FlushSync, is how long an fsync waits for more appends to share it, 0 to
	// commitlog.MaxLinger: acknowledgements come up to Linger later, and a slow stream of
	// appends takes one fsync (one rewrite of the log's last page) per Linger instead of one
	// per append. The wait ends early once a page of records is unflushed. Default 0.
	Linger time.Duration
	// QueueFlushInterval is how often consume queues are fsynced and the dispatch checkpoint
	// written. Default 10 s: each time costs the device about 80 KB on ext4 (the queue files'
	// pages, the checkpoint's temporary file, rename and directory fsync, and their journal
	// commits), which at 1 s was 8× the payload of 100 messages a second of 100 bytes (flash
	// wear). Recovery replays what the checkpoint does not cover, at most QueueFlushBytes.
	QueueFlushInterval time.Duration
	// QueueFlushBytes also syncs the queues and writes the checkpoint once the dispatcher
	// has covered this many bytes of log since the last time, bounding what recovery after
	// a crash must dispatch again. Default 32 MiB.
	QueueFlushBytes int64
	// MaxDispatchLag makes Append wait (at most 1 s) while the dispatcher is this many
	// bytes of log behind the writer: it bounds what recovery after a crash replays and how
	// stale consumers' view of the queues can get under a flood. Default 32 MiB; negative
	// disables.
	MaxDispatchLag int64
	// ResidentBytes is how much of the commitlog's mappings stays in the process's resident
	// set behind the write position (the rest is dropped from RSS, not from the page
	// cache). Default 512 KiB (commitlog.DefaultOptions); negative keeps every page.
	ResidentBytes int64
	// QueueResidentBytes is the same for each consume queue's active file. Default 64 KiB;
	// negative keeps every page.
	QueueResidentBytes int64
	// PrefaultBytes is how far ahead of the write position the commitlog maps its active
	// segment for writing while busy (PrefaultRate), with async flush only, so that appends
	// do not take a page fault per new page under the append lock. A flush meanwhile
	// writes up to this many bytes of zeros. Default 256 KiB (commitlog.DefaultOptions);
	// negative turns prefaulting off.
	PrefaultBytes int64
	// PrefaultRate is the write rate, bytes per second, from which the commitlog counts as
	// busy and is prefaulted. Default 16 MiB/s.
	PrefaultRate int64
	// WriteBuffer is the size of a buffer in which the commitlog gathers records and writes
	// them to its file in one write, instead of writing each through its mapping: a third
	// of the CPU per 1 KiB record, and no prefaulting. What an fsync covers, and so what a
	// power cut keeps, is unchanged. With FlushSync a process crash loses nothing more
	// either (acknowledgements wait for an fsync, written first; DurabilityAsync appends
	// write the buffer out before they return); with FlushAsync the records still in the
	// buffer when the process dies are lost, though their appends returned. At most
	// commitlog.MaxWriteBuffer; 0: the default, commitlog.DefaultWriteBuffer (1 MiB) with
	// FlushSync and none with FlushAsync; negative: none, write through the mapping.
	WriteBuffer int64
	// ZeroAhead, with FlushSync and a write buffer, is how far ahead of its records the
	// commitlog writes zeros into the active segment's file, so that sync-mode fsyncs do
	// not each commit the file system's journal for a first write to a preallocated block
	// (commitlog.Options.ZeroAhead). Default 256 KiB, or a quarter of SegmentSize if less;
	// negative: off.
	ZeroAhead int64
	// MaxAge deletes commitlog segments older than this. Default 72 h; negative disables.
	MaxAge time.Duration
	// MaxBytes is the commitlog byte quota, at least two segments. Default 0: none.
	MaxBytes int64
	// MaxUsedRatio deletes the oldest segments while the file system is fuller than this
	// fraction, in (0, 1]. Default 0.75; negative disables.
	MaxUsedRatio float64
	// OnFull is what an append does on a full disk. Default commitlog.FailWrites.
	OnFull commitlog.OnFull
	// MaxBrokenBytes caps the bytes of the .broken files that commitlog recovery leaves
	// after a crash or power cut (cut bytes and segments moved aside, kept for inspection);
	// each Open deletes the oldest beyond it. They are not counted in MaxBytes. Default two
	// segments; negative keeps none.
	MaxBrokenBytes int64
	// RetentionInterval is how often retention runs. Default 10 s.
	RetentionInterval time.Duration
	// MaxMessageSize is the largest body Append accepts, in bytes, at most
	// commitlog.MaxSegmentSize/2 - 64 KiB (and see SegmentSize). Default 4 MiB.
	MaxMessageSize int
	// MaxPullBytes bounds the bytes of messages one GetMessages returns (at least one
	// message is always returned). Default 256 KiB.
	MaxPullBytes int
	// OnArrival, if set, is called for every message once its consume-queue entry is
	// written, by whoever dispatched it (an appender, for its own records and others', in
	// async mode maybe with the append lock held; the acknowledgement goroutine of
	// AppendAsync; or the dispatcher goroutine), before the message's Append returns or its
	// done is called. Calls are never concurrent and come in log order. It must not block,
	// append or wait for an append: long polling hangs on it, and appends wait for it.
	OnArrival func(Arrival)
	// RetentionFloor, if set, is the commitlog position from which retention keeps every
	// segment, whatever MaxAge, MaxBytes, MaxUsedRatio and OnFull say (math.MaxInt64 holds
	// nothing): see commitlog.Options.RetentionFloor.
	RetentionFloor func() int64
	// Now is the clock for store timestamps and retention, read for every append. Default
	// time.Now, read more cheaply: the wall clock once a second, and the monotonic time since
	// for each append, so that a step of the wall clock shows in store times up to a second
	// late.
	Now func() time.Time
	// Logger receives recovery, retention and corruption reports. Default: discard.
	Logger *slog.Logger
	// MetaNoSync skips fsync in the meta store. For tests only.
	MetaNoSync bool
}

// Arrival tells that a consume queue grew.
type Arrival struct {
	Topic     string
	QueueID   int32
	Offset    int64 // the new message's queue offset; the queue's max offset is Offset+1
	TagHash   int64
	StoreTime int64 // unix ms
}

// DefaultOptions holds the defaults that zero fields take.
var DefaultOptions = Options{
	QueueSegmentEntries: 65536,
	QueueFlushInterval:  10 * time.Second,
	QueueFlushBytes:     32 << 20,
	MaxDispatchLag:      32 << 20,
	MaxMessageSize:      4 << 20,
	MaxPullBytes:        256 << 10,
	Now:                 time.Now,
}

// withDefaults returns the options with defaults filled in, or an error wrapping ErrOptions
// for the first one out of range. SegmentSize may still be 0: the data dir decides it
// (checkSettings), and then checkMessageSize and logOptions().Validate() check it.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	if r.FS == nil {
		r.FS = vfs.OS
	}
	if r.QueueSegmentEntries == 0 {
		r.QueueSegmentEntries = d.QueueSegmentEntries
	}
	if r.QueueFlushInterval == 0 {
		r.QueueFlushInterval = d.QueueFlushInterval
	}
	if r.QueueFlushBytes == 0 {
		r.QueueFlushBytes = d.QueueFlushBytes
	}
	if r.MaxDispatchLag == 0 {
		r.MaxDispatchLag = d.MaxDispatchLag
	}
	if r.MaxMessageSize == 0 {
		r.MaxMessageSize = d.MaxMessageSize
	}
	if r.MaxPullBytes == 0 {
		r.MaxPullBytes = d.MaxPullBytes
	}
	if r.Now == nil {
		r.Now = d.Now
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r, r.validate()
}

// validate checks options with their defaults filled in.
func (o *Options) validate() error {
	d := DefaultOptions
	switch {
	case o.MaxPullBytes < 0:
		return fmt.Errorf("%w: MaxPullBytes %d is negative (want > 0, or 0 for the default %d)", ErrOptions, o.MaxPullBytes, d.MaxPullBytes)
	case o.QueueFlushInterval < 0:
		return fmt.Errorf("%w: QueueFlushInterval %v is negative (want > 0, or 0 for the default %v)", ErrOptions, o.QueueFlushInterval, d.QueueFlushInterval)
	case o.QueueFlushBytes < 0:
		return fmt.Errorf("%w: QueueFlushBytes %d is negative (want > 0, or 0 for the default %d)", ErrOptions, o.QueueFlushBytes, d.QueueFlushBytes)
	case o.MaxMessageSize < 0 || int64(o.MaxMessageSize) > maxMessageSize:
		return fmt.Errorf("%w: MaxMessageSize %d out of range [0, %d] (0 takes the default %d)", ErrOptions, o.MaxMessageSize, int64(maxMessageSize), d.MaxMessageSize)
	case o.QueueSegmentEntries < 1 || o.QueueSegmentEntries > cqueue.MaxSegmentEntries:
		return fmt.Errorf("%w: QueueSegmentEntries %d out of range [1, %d] (0 takes the default %d)", ErrOptions, o.QueueSegmentEntries, cqueue.MaxSegmentEntries, d.QueueSegmentEntries)
	}
	// The data dir may set SegmentSize (0 here): checkSettings checks what depends on it
	// once it is known.
	lo := o.logOptions()
	if lo.SegmentSize == 0 {
		lo.SegmentSize = commitlog.MinSegmentSize
		lo.MaxBytes = min(lo.MaxBytes, 0)
	}
	if err := lo.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if o.SegmentSize != 0 {
		if err := o.checkMessageSize(o.SegmentSize, false); err != nil {
			return fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	return nil
}

// maxMessageSize is the largest MaxMessageSize: two records of it fill the largest segment.
const maxMessageSize = commitlog.MaxSegmentSize/2 - propertySlack

// checkMessageSize reports whether segments of segSize bytes hold messages of MaxMessageSize:
// every message the store accepts must fit in a segment, and Open asks for room for two, so
// that a segment is not rolled for every large message. MaxMessageSize must be in range
// [0, maxMessageSize] (validate). fixed says the data dir set segSize, which cannot change.
func (o *Options) checkMessageSize(segSize int64, fixed bool) error {
	need := 2 * (int64(o.MaxMessageSize) + propertySlack)
	if need <= segSize {
		return nil
	}
	fit := segSize/2 - propertySlack
	why := fmt.Sprintf("a segment must hold two records of up to MaxMessageSize + %d bytes (tags, keys, properties, framing)", propertySlack)
	switch {
	case !fixed && fit > 0:
		return fmt.Errorf("SegmentSize %d too small for MaxMessageSize %d: %s: raise SegmentSize to at least %d or lower MaxMessageSize to at most %d", segSize, o.MaxMessageSize, why, need, fit)
	case !fixed:
		return fmt.Errorf("SegmentSize %d too small for MaxMessageSize %d: %s: raise SegmentSize to at least %d", segSize, o.MaxMessageSize, why, need)
	case fit > 0:
		return fmt.Errorf("data dir has %d-byte segments, too small for MaxMessageSize %d: %s: lower MaxMessageSize to at most %d (a data dir keeps its segment size)", segSize, o.MaxMessageSize, why, fit)
	}
	return fmt.Errorf("data dir has %d-byte segments, too small for any message: %s", segSize, why)
}

// logOptions returns the options of the store's commitlog, but for OnRetention.
func (o *Options) logOptions() *commitlog.Options {
	return &commitlog.Options{
		FS:                o.FS,
		SegmentSize:       o.SegmentSize,
		Flush:             o.Flush,
		FlushInterval:     o.FlushInterval,
		FlushBytes:        o.FlushBytes,
		Linger:            o.Linger,
		MaxAge:            o.MaxAge,
		MaxBytes:          o.MaxBytes,
		MaxUsedRatio:      o.MaxUsedRatio,
		OnFull:            o.OnFull,
		MaxBrokenBytes:    o.MaxBrokenBytes,
		RetentionInterval: o.RetentionInterval,
		ResidentBytes:     o.ResidentBytes,
		PrefaultBytes:     o.PrefaultBytes,
		PrefaultRate:      o.PrefaultRate,
		WriteBuffer:       o.WriteBuffer,
		ZeroAhead:         o.ZeroAhead,
		PayloadVersion:    PayloadVersion,
		RetentionFloor:    o.RetentionFloor,
		Now:               o.Now,
		Logger:            o.Logger,
	}
}
