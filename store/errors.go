package store

import "errors"

var (
	// ErrClosed is returned by every call on a Store after Close.
	ErrClosed = errors.New("store: closed")
	// ErrMessageTooLarge is returned by Append for a body over Options.MaxMessageSize, or a
	// record whose properties, keys and tags push it over MaxMessageSize plus 64 KiB.
	ErrMessageTooLarge = errors.New("store: message too large")
	// ErrInvalidMessage is returned by Append for a nil message, a message without a topic,
	// with a topic longer than 255 bytes or that is no directory name (".", "..", or
	// holding '/', '\' or NUL), with a negative queue id, or with encoded properties that
	// are not as AppendProperties writes them; and by AppendAsync for a nil done. Nothing
	// of the batch is written.
	ErrInvalidMessage = errors.New("store: invalid message")
	// ErrBadRecord is returned when a record's payload does not decode as a message.
	ErrBadRecord = errors.New("store: record does not decode as a message")
	// ErrSettings is returned by Open when the options contradict what the data dir was
	// written with (segment size, schema version), the data dir's segments cannot hold a
	// message of Options.MaxMessageSize, or meta.db records a segment size out of range.
	ErrSettings = errors.New("store: options contradict the data dir")
	// ErrOptions is returned (wrapped) by Open for an option out of range or contradicting
	// another, before Open creates or writes anything. The error names the option and says
	// what is valid.
	ErrOptions = errors.New("store: invalid options")
)
