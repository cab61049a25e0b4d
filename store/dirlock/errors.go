package dirlock

import (
	"errors"
	"fmt"
)

// ErrLocked is matched (via [errors.Is]) by the error [Acquire] returns when
// another [Lock], in this process or another, already holds the directory.
// The returned error is a [*LockedError] that names the directory and holder.
var ErrLocked = errors.New("dirlock: data dir in use")

// LockedError reports that a data directory is locked by someone else. It
// matches [ErrLocked].
type LockedError struct {
	// Dir is the directory passed to Acquire.
	Dir string
	// PID is the holder's process ID as read from the LOCK file, or 0 when
	// the file held no valid pid (for example while the holder is writing it).
	PID int
}

// Error returns "dirlock: data dir <dir> in use by pid N", or "... in use by
// another process" when the pid is unknown.
func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("dirlock: data dir %s in use by pid %d", e.Dir, e.PID)
	}
	return fmt.Sprintf("dirlock: data dir %s in use by another process", e.Dir)
}

// Is reports whether target is [ErrLocked].
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
