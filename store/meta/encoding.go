package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// MaxNameLen is the longest group, topic or uplink name the store accepts,
// in bytes.
const MaxNameLen = 1024

// Sizes of the fixed-width fields of keys and values; the layouts are in doc.go.
const (
	nameLenSize = 2 // uint16 big-endian length before each name of a queue key
	queueIDSize = 4 // uint32 big-endian queue ID ending a queue key
	levelSize   = 4 // uint32 big-endian delay level key
	int64Size   = 8 // int64 big-endian offset or delay progress value
)

var (
	errShortKey   = errors.New("key too short")
	errLongKey    = errors.New("trailing bytes after key")
	errBadName    = errors.New("name length out of range")
	errBadQueueID = errors.New("negative queue ID")
	errBadValue   = errors.New("value is not 8 bytes")
	errTrailing   = errors.New("trailing bytes after value")
	errKeyName    = errors.New("value does not match its key")
)

// checkName reports whether s can be stored as a name; what says which name.
func checkName(op, what, s string) error {
	if len(s) == 0 {
		return invalidKey(op, "%s name is empty", what)
	}
	if len(s) > MaxNameLen {
		return invalidKey(op, "%s name is %d bytes, more than %d", what, len(s), MaxNameLen)
	}
	return nil
}

// checkQueueKey reports whether (a, b, queueID) can be stored as a queue key.
func checkQueueKey(op, whatA, a, b string, queueID int32) error {
	if err := checkName(op, whatA, a); err != nil {
		return err
	}
	if err := checkName(op, "topic", b); err != nil {
		return err
	}
	if queueID < 0 {
		return invalidKey(op, "queue ID %d is negative", queueID)
	}
	return nil
}

// appendName appends len(s) as uint16 big-endian, then s.
func appendName(k []byte, s string) []byte {
	k = binary.BigEndian.AppendUint16(k, uint16(len(s)))
	return append(k, s...)
}

// queueKey encodes (a, b, queueID) as a queue key: len(a) a len(b) b queueID.
// The caller has checked the parts with checkQueueKey.
func queueKey(a, b string, queueID int32) []byte {
	return appendQueueKey(make([]byte, 0, 2*nameLenSize+len(a)+len(b)+queueIDSize), a, b, queueID)
}

// appendQueueKey appends the queue key of (a, b, queueID) to k.
func appendQueueKey(k []byte, a, b string, queueID int32) []byte {
	k = appendName(k, a)
	k = appendName(k, b)
	return binary.BigEndian.AppendUint32(k, uint32(queueID))
}

// queuePrefix returns the prefix shared by the queue keys of a, or of a and
// b when b is not empty.
func queuePrefix(a, b string) []byte {
	k := appendName(nil, a)
	if b != "" {
		k = appendName(k, b)
	}
	return k
}

// readName decodes a length-prefixed name from the start of k.
func readName(k []byte) (string, []byte, error) {
	if len(k) < nameLenSize {
		return "", nil, errShortKey
	}
	n := int(binary.BigEndian.Uint16(k))
	k = k[nameLenSize:]
	if n == 0 || n > MaxNameLen {
		return "", nil, errBadName
	}
	if len(k) < n {
		return "", nil, errShortKey
	}
	return string(k[:n]), k[n:], nil
}

// decodeQueueKey is the inverse of queueKey. It accepts exactly the keys
// queueKey produces from valid parts.
func decodeQueueKey(k []byte) (a, b string, queueID int32, err error) {
	if a, k, err = readName(k); err != nil {
		return "", "", 0, err
	}
	if b, k, err = readName(k); err != nil {
		return "", "", 0, err
	}
	switch {
	case len(k) < queueIDSize:
		return "", "", 0, errShortKey
	case len(k) > queueIDSize:
		return "", "", 0, errLongKey
	}
	queueID = int32(binary.BigEndian.Uint32(k))
	if queueID < 0 {
		return "", "", 0, errBadQueueID
	}
	return a, b, queueID, nil
}

// levelKey encodes a delay level, which the caller has checked is not
// negative.
func levelKey(level int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(level))
}

// decodeLevelKey is the inverse of levelKey.
func decodeLevelKey(k []byte) (int32, error) {
	if len(k) != levelSize {
		return 0, fmt.Errorf("level key is %d bytes, want %d", len(k), levelSize)
	}
	level := int32(binary.BigEndian.Uint32(k))
	if level < 0 {
		return 0, errors.New("negative delay level")
	}
	return level, nil
}

// int64Value encodes an offset or delay progress value.
func int64Value(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// decodeInt64 is the inverse of int64Value.
func decodeInt64(v []byte) (int64, error) {
	if len(v) != int64Size {
		return 0, errBadValue
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// record is a pointer to one of the msgp-encoded value types.
type record[T any] interface {
	*T
	msgp.Marshaler
	msgp.Unmarshaler
}

// encode returns v's msgp encoding.
func encode[T any, P record[T]](v T) []byte {
	b, err := P(&v).MarshalMsg(nil)
	if err != nil {
		// Generated MarshalMsg of plain structs only appends; it cannot fail.
		panic(fmt.Sprintf("meta: encode %T: %v", v, err))
	}
	return b
}

// decode decodes a msgp value that must fill b exactly.
func decode[T any, P record[T]](b []byte) (T, error) {
	var v T
	rest, err := P(&v).UnmarshalMsg(b)
	if err != nil {
		return v, err
	}
	if len(rest) != 0 {
		return v, errTrailing
	}
	return v, nil
}

// decodeTopic decodes a value of the topics bucket.
func decodeTopic(b []byte) (Topic, error) { return decode[Topic](b) }

// decodeGroup decodes a value of the groups bucket.
func decodeGroup(b []byte) (Group, error) { return decode[Group](b) }

// decodeUplinkCursor decodes a value of the uplink bucket.
func decodeUplinkCursor(b []byte) (UplinkCursor, error) { return decode[UplinkCursor](b) }

// decodeSettings decodes the value of the settings bucket.
func decodeSettings(b []byte) (Settings, error) { return decode[Settings](b) }
