package uplink

import "errors"

var (
	// ErrInvalidRule is matched by Start's error for a rule that cannot work: a bad name,
	// topic, pattern, template, address list, kind or size. An unreachable upstream is not
	// an error but a state (BackingOff).
	ErrInvalidRule = errors.New("uplink: invalid rule")
	// ErrClosed is returned by Close after the first call.
	ErrClosed = errors.New("uplink: closed")
)
