package cqueue

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every method of a Queue after Close, and by a second Close.
	ErrClosed = errors.New("cqueue: queue closed")

	// ErrCorrupt is wrapped by DecodeEntry for short input or an invalid entry, and by a
	// *CorruptError when an entry on disk inside [Min, Max) does not decode.
	ErrCorrupt = errors.New("cqueue: corrupt entry")

	// ErrInvalidEntry is returned (wrapped) by Append for an entry DecodeEntry would reject
	// (Size <= 0 or Pos < 64): it could not be told apart from the end of the data.
	ErrInvalidEntry = errors.New("cqueue: invalid entry")

	// ErrOffsetExists is returned (wrapped) by Append when the offset is below Max: that
	// entry has already been written.
	ErrOffsetExists = errors.New("cqueue: offset already written")

	// ErrGap is returned (wrapped) by Append when the offset is above Max on a queue that is
	// not empty: queue offsets are dense.
	ErrGap = errors.New("cqueue: offset leaves a gap")

	// ErrOffsetTooSmall is returned (wrapped) by Get and Read for an offset below Min,
	// including one whose file retention deleted while the read was waiting.
	ErrOffsetTooSmall = errors.New("cqueue: offset below min")

	// ErrOffsetTooLarge is returned (wrapped) by Read for an offset above Max, by Get for
	// an offset at or above Max, and by Append for an offset within SegmentEntries of
	// math.MaxInt64, past which file names and Max would overflow.
	ErrOffsetTooLarge = errors.New("cqueue: offset beyond max")
)

// CorruptError reports an entry inside [Min, Max) that does not decode. It wraps
// ErrCorrupt. Recovery (Open) cuts such entries off the last file; in a sealed file they
// mean the disk lost data, and reads return this error instead of a bogus entry.
type CorruptError struct {
	File   string // path of the file holding the entry
	Offset int64  // queue offset of the entry
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("cqueue: corrupt entry at offset %d in %s", e.Offset, e.File)
}

// Unwrap returns ErrCorrupt, so errors.Is(err, ErrCorrupt) holds.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
