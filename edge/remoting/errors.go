package remoting

import "errors"

// Errors of the wire formats. Decoders return them wrapped with what was wrong (use
// errors.Is).
var (
	// ErrFrameTooLarge: a frame longer than the reader's maximum frame size, or a command
	// too large for the wire format when encoding (a header over 16 MiB, a frame over 2 GiB,
	// an extension key over 32767 bytes).
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrMalformed: bytes that do not decode: a short or inconsistent frame, an unknown
	// header encoding, a header, message, body or extension field that is not of its
	// format, or a required field that is missing.
	ErrMalformed = errors.New("remoting: malformed")
)
