package commitlog

import (
	"encoding/binary"
	"hash/crc32"
)

// Segment header: two identical 32-byte copies at offsets 0 and 32 (see doc.go):
//
//	magic[4] "EMQL" | version u8 | payloadVersion u8 | reserved[2] | baseOffset i64 |
//	baseTime i64 (unix ms) | prevEnd u32 | crc32c u32 of bytes 0..28
//
// prevEnd is the byte offset where the previous segment's data ended when this one was
// started (0 for the first segment): recovery uses it to tell a lost tail from a clean roll.
const (
	headerCopySize = 32
	// HeaderSize is the number of bytes at the start of every segment before the first frame.
	HeaderSize = 2 * headerCopySize
	// FormatVersion is the version of the segment and frame layout this package writes.
	FormatVersion = 1
)

var magic = [4]byte{'E', 'M', 'Q', 'L'}

type header struct {
	version        uint8
	payloadVersion uint8
	baseOffset     int64
	baseTime       int64
	prevEnd        uint32
}

func (h header) put(b []byte) {
	for c := 0; c < 2; c++ {
		p := b[c*headerCopySize : (c+1)*headerCopySize]
		clear(p)
		copy(p, magic[:])
		p[4] = h.version
		p[5] = h.payloadVersion
		binary.BigEndian.PutUint64(p[8:], uint64(h.baseOffset))
		binary.BigEndian.PutUint64(p[16:], uint64(h.baseTime))
		binary.BigEndian.PutUint32(p[24:], h.prevEnd)
		binary.BigEndian.PutUint32(p[28:], crc32.Checksum(p[:28], castagnoli))
	}
}

// parseHeader returns the first copy that verifies, and whether one did.
func parseHeader(b []byte) (header, bool) {
	for c := 0; c < 2 && len(b) >= (c+1)*headerCopySize; c++ {
		p := b[c*headerCopySize : (c+1)*headerCopySize]
		if [4]byte(p[:4]) != magic || crc32.Checksum(p[:28], castagnoli) != binary.BigEndian.Uint32(p[28:]) {
			continue
		}
		return header{
			version:        p[4],
			payloadVersion: p[5],
			baseOffset:     int64(binary.BigEndian.Uint64(p[8:])),
			baseTime:       int64(binary.BigEndian.Uint64(p[16:])),
			prevEnd:        binary.BigEndian.Uint32(p[24:]),
		}, true
	}
	return header{}, false
}
