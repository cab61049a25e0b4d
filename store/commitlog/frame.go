package commitlog

import (
	"encoding/binary"
	"hash/crc32"
)

// Layout of a frame (see doc.go):
//
//	uvarint n | u32 crc32c (big-endian) | varint storeTimeDelta | payload
//
// n counts the varint and the payload; the CRC covers the uvarint n bytes, the varint and
// the payload: every byte of the frame but the CRC itself.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	crcSize = 4
	// maxFrameOverhead bounds the bytes a frame adds to its payload: a 5-byte uvarint n
	// (segments are < 4 GiB), the CRC and a 10-byte varint.
	maxFrameOverhead = 5 + crcSize + binary.MaxVarintLen64
)

// frameSize returns the encoded size of a frame carrying payload len p and time delta d.
func frameSize(p int, d int64) int {
	n := varintLen(d) + p
	return uvarintLen(uint64(n)) + crcSize + n
}

// putFrame encodes a frame into dst, which must be exactly frameSize(len(payload), d) long.
func putFrame(dst []byte, d int64, payload []byte) {
	n := varintLen(d) + len(payload)
	i := binary.PutUvarint(dst, uint64(n))
	crcAt := i
	i += crcSize
	i += binary.PutVarint(dst[i:], d)
	copy(dst[i:], payload)
	crc := crc32.Update(crc32.Checksum(dst[:crcAt], castagnoli), castagnoli, dst[crcAt+crcSize:])
	binary.BigEndian.PutUint32(dst[crcAt:], crc)
}

// frame result codes of decodeFrame.
type frameStatus int

const (
	frameOK     frameStatus = iota
	frameEnd                // a zero byte where n would start: no more frames in this segment
	frameTorn               // n runs past the available bytes
	frameBadCRC             // the checksum does not match
	frameBad                // malformed varints
)

func (s frameStatus) String() string {
	switch s {
	case frameOK:
		return "ok"
	case frameEnd:
		return "end of data"
	case frameTorn:
		return "length runs past the end of the segment"
	case frameBadCRC:
		return "checksum mismatch"
	default:
		return "malformed frame header"
	}
}

// decodeFrame decodes the frame at the start of b. It never reads past len(b). With
// frameBadCRC, size is the length the frame claims (which may itself be damaged).
func decodeFrame(b []byte) (delta int64, payload []byte, size int, st frameStatus) {
	if len(b) == 0 || b[0] == 0 {
		return 0, nil, 0, frameEnd
	}
	n, i := binary.Uvarint(b)
	if i <= 0 {
		if i == 0 {
			return 0, nil, 0, frameTorn
		}
		return 0, nil, 0, frameBad
	}
	rest := uint64(len(b) - i)
	if rest < crcSize || n > rest-crcSize {
		return 0, nil, 0, frameTorn
	}
	body := b[i+crcSize : i+crcSize+int(n)]
	want := binary.BigEndian.Uint32(b[i:])
	if crc32.Update(crc32.Checksum(b[:i], castagnoli), castagnoli, body) != want {
		// The size is what the (possibly damaged) length field says: a hint, no more.
		return 0, nil, i + crcSize + int(n), frameBadCRC
	}
	d, j := binary.Varint(body)
	if j <= 0 {
		return 0, nil, 0, frameBad
	}
	return d, body[j:], i + crcSize + int(n), frameOK
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}
