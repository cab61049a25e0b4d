package meta

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every method of a Store after Close.
	ErrClosed = errors.New("meta: store closed")

	// ErrCorrupt is matched by the [*CorruptError] returned when a stored key
	// or value does not decode, or a required bucket is missing.
	ErrCorrupt = errors.New("meta: corrupt entry")

	// ErrInvalidKey is matched by the error returned when a write names an
	// entry that cannot be stored: a name that is empty or longer than
	// MaxNameLen bytes, or a negative queue ID or delay level.
	ErrInvalidKey = errors.New("meta: invalid key")
)

// CorruptError reports a stored entry that does not decode. It matches
// [ErrCorrupt] and unwraps to the decoding error as well.
type CorruptError struct {
	// Op names the method that found the entry, for example "topics".
	Op string
	// Bucket is the bucket holding the entry, "" when the file itself is damaged.
	Bucket string
	// Key is the entry's key, nil when the bucket itself is missing.
	Key []byte
	// Err says what is wrong.
	Err error
}

// Error returns "meta: <op>: corrupt <bucket> entry <key>: <err>", or "meta: <op>: <err>"
// for a damaged file.
func (e *CorruptError) Error() string {
	if e.Bucket == "" {
		return fmt.Sprintf("meta: %s: %v", e.Op, e.Err)
	}
	if e.Key == nil {
		return fmt.Sprintf("meta: %s: corrupt bucket %s: %v", e.Op, e.Bucket, e.Err)
	}
	return fmt.Sprintf("meta: %s: corrupt %s entry %q: %v", e.Op, e.Bucket, e.Key, e.Err)
}

// Unwrap returns ErrCorrupt and the decoding error.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// invalidKey returns an error matching ErrInvalidKey.
func invalidKey(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidKey, op, fmt.Sprintf(format, args...))
}
