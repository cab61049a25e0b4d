package cqueue

import (
	"encoding/binary"
	"fmt"
)

// EntrySize is the size of an encoded Entry in bytes.
const EntrySize = 20

// MinPos is the smallest commitlog position a record can have (the commitlog's file
// header comes first), so an entry with a smaller Pos is invalid and an all-zero entry
// means "no entry".
const MinPos = 64

// Byte offsets of the fields of an encoded entry; see the table in doc.go.
const (
	posOff  = 0  // i64 pos
	sizeOff = 8  // i32 size
	tagOff  = 12 // i64 tagHash
)

// Entry is one consume queue entry: where a message of the queue sits in the commitlog.
type Entry struct {
	Pos     int64 // commitlog position of the record, >= MinPos
	Size    int32 // record size in bytes, > 0
	TagHash int64 // hash of the message tag, for filtering without reading the record
}

// DecodeEntry decodes the first EntrySize bytes of b; bytes past them are not read. It
// returns an error wrapping ErrCorrupt when b is shorter than EntrySize or the entry is
// invalid (Size <= 0 or Pos < MinPos; an all-zero entry is invalid too).
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < EntrySize {
		return Entry{}, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(b), EntrySize)
	}
	e := decode(b)
	if why := e.invalid(); why != "" {
		return Entry{}, fmt.Errorf("%w: %s: %+v", ErrCorrupt, why, e)
	}
	return e, nil
}

// Put encodes e into the first EntrySize bytes of b. It panics if b is shorter, like
// binary.BigEndian.PutUint64. It encodes invalid entries too; Append refuses them.
func (e Entry) Put(b []byte) {
	// layout: pos(8) size(4) tagHash(8), big-endian (doc.go)
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[posOff:], uint64(e.Pos))
	binary.BigEndian.PutUint32(b[sizeOff:], uint32(e.Size))
	binary.BigEndian.PutUint64(b[tagOff:], uint64(e.TagHash))
}

// decode decodes b[:EntrySize] without checking it; len(b) must be at least EntrySize.
func decode(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		Pos:     int64(binary.BigEndian.Uint64(b[posOff:])),
		Size:    int32(binary.BigEndian.Uint32(b[sizeOff:])),
		TagHash: int64(binary.BigEndian.Uint64(b[tagOff:])),
	}
}

// valid reports whether e can be stored: DecodeEntry would accept its encoding.
func (e Entry) valid() bool { return e.invalid() == "" }

// invalid returns why e cannot be stored, or "" if it can.
func (e Entry) invalid() string {
	switch {
	case e.Pos < MinPos:
		return "pos below 64"
	case e.Size <= 0:
		return "size not positive"
	}
	return ""
}

// isZero reports whether b[:EntrySize] is all zero: no entry.
func isZero(b []byte) bool {
	_ = b[EntrySize-1]
	return binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[8:])|
		uint64(binary.LittleEndian.Uint32(b[16:])) == 0
}
