package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// checkpointName is the file holding the last known durable position, twice:
//
//	2 x (i64 position (big-endian) | u32 crc32c of the 8 bytes)
//
// The first copy that verifies is used, so one damaged copy is not enough to lose it.
// It is rewritten in place, at most every 100 ms after a flush and at Close, and fsynced only
// at Open and Close: a stale checkpoint only makes recovery scan further, and one that fails
// its CRC is ignored (recovery then scans from the first segment).
const checkpointName = "checkpoint"

const checkpointCopy = 12

const checkpointSize = 2 * checkpointCopy

// openCheckpoint opens (creating) the checkpoint file and returns the position it holds, or
// -1 if it holds none.
func (l *Log) openCheckpoint() (int64, error) {
	path := filepath.Join(l.dir, checkpointName)
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("commitlog: open checkpoint: %w", err)
	}
	l.ckpt = f
	var b [checkpointSize]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("commitlog: read checkpoint: %w", err)
	}
	if pos, ok := parseCheckpoint(b[:n]); ok {
		return pos, nil
	}
	if n > 0 {
		l.lg.Warn("checkpoint fails its checksum: recovering from the first segment")
	}
	return -1, nil
}

// parseCheckpoint returns the position in the first whole copy in b that verifies, and
// whether one did.
func parseCheckpoint(b []byte) (int64, bool) {
	for c := 0; c+checkpointCopy <= len(b) && c < checkpointSize; c += checkpointCopy {
		p := b[c : c+checkpointCopy]
		if crc32.Checksum(p[:8], castagnoli) == binary.BigEndian.Uint32(p[8:]) {
			return int64(binary.BigEndian.Uint64(p[:8])), true
		}
	}
	return 0, false
}

// putCheckpoint encodes pos as the checkpoint file's two copies.
func putCheckpoint(b *[checkpointSize]byte, pos int64) {
	binary.BigEndian.PutUint64(b[:8], uint64(pos))
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	copy(b[checkpointCopy:], b[:checkpointCopy])
}

func (l *Log) writeCheckpoint(pos int64, sync bool) error {
	if l.ckpt == nil {
		f, err := l.fs.OpenFile(filepath.Join(l.dir, checkpointName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("commitlog: open checkpoint: %w", err)
		}
		l.ckpt = f
	}
	var b [checkpointSize]byte
	putCheckpoint(&b, pos)
	if _, err := l.ckpt.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("commitlog: write checkpoint: %w", err)
	}
	if sync {
		if err := l.ckpt.Sync(); err != nil {
			return fmt.Errorf("commitlog: sync checkpoint: %w", err)
		}
		return l.fs.SyncDir(l.dir)
	}
	return nil
}
