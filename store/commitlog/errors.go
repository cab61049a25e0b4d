package commitlog

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every call on a Log after Close.
	ErrClosed = errors.New("commitlog: log closed")
	// ErrCorrupt is returned (inside a *CorruptError) when a record's checksum or framing does
	// not verify: its bytes are never handed out as a record.
	ErrCorrupt = errors.New("commitlog: corrupt record")
	// ErrDiskFull is returned by Append when the file system has no room for a new segment and
	// the OnFull policy could not (or may not) free any. Nothing was written; reads keep
	// working and appends succeed again once space returns.
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrTooLarge is returned by Append when a record or a batch cannot fit in one segment.
	ErrTooLarge = errors.New("commitlog: record or batch larger than a segment")
	// ErrPositionGone is returned when a position lies before the oldest retained segment.
	ErrPositionGone = errors.New("commitlog: position deleted by retention")
	// ErrNoRecord is returned when no record starts at a position: at or past the end of the
	// written log, or in the unused tail of a segment.
	ErrNoRecord = errors.New("commitlog: no record at position")
	// ErrFlush is returned (wrapped) by appends waiting for durability after an fsync failed.
	// It is sticky: after a failed fsync the page cache state is unknown, so the log refuses
	// further writes until it is reopened.
	ErrFlush = errors.New("commitlog: flush failed")
)

// CorruptError says where a corrupt record or segment header was found.
type CorruptError struct {
	Segment string // file name
	Offset  int64  // byte offset within the segment file
	Reason  string
	// Next is where the damaged record claims to end (a position), when its length field
	// decodes and fits in the segment; 0 otherwise. It is a hint: the length itself may be
	// what is damaged, so a caller skipping there must check that a record starts there.
	Next int64
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("commitlog: corrupt record in %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Unwrap lets errors.Is(err, ErrCorrupt) match.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
