package commitlog

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/store/vfs"
)

// RecoveryStats says what the recovery of the last Open cut from the log, and what became of
// the .broken files that keep cut bytes for inspection.
type RecoveryStats struct {
	// Records counts the records whose frames verify in what recovery cut: those of the
	// segments it moved aside, walked from their first frame to the first that does not
	// verify. (A cut tail starts with the torn record, so its bytes count in Bytes only.)
	Records int64
	// Bytes counts the bytes recovery cut: torn tails, stale bytes after the end, and the
	// data of segments moved aside (up to their last non-zero byte).
	Bytes int64
	// EmptyRemoved counts segment files removed because they held no record (nothing but
	// zeros after the header, or shorter than a header): preallocated files a roll named
	// before a power cut.
	EmptyRemoved int
	// BrokenMade counts the .broken files recovery wrote or moved aside.
	BrokenMade int
	// BrokenDeleted counts the .broken files deleted, oldest first, to keep them within
	// Options.MaxBrokenBytes.
	BrokenDeleted int
	// BrokenFiles and BrokenBytes are the .broken files left in the log's directory, and
	// their bytes.
	BrokenFiles int
	BrokenBytes int64
}

// Recovery returns what the recovery of Open cut (RecoveryStats).
func (l *Log) Recovery() RecoveryStats { return l.rec }

// survey walks a segment's mapping data from its first frame: it returns how many frames
// verify before the first that does not, and how many bytes follow the header up to the last
// non-zero one (0: the segment held no record). drop(lo, hi) is called for the ranges read,
// to drop them from the resident set.
func survey(data []byte, drop func(lo, hi int64)) (records, bytes int64) {
	size := int64(len(data))
	if size <= HeaderSize {
		return 0, 0
	}
	from, off := int64(HeaderSize), int64(HeaderSize)
	for {
		_, _, n, st := decodeFrame(data[off:])
		if st != frameOK {
			break
		}
		records++
		off += int64(n)
		if off-from >= recoveryStep {
			drop(from, off)
			from = off
		}
	}
	drop(from, off)
	end := size
	for end > HeaderSize {
		lo := max(HeaderSize, end-recoveryStep)
		nz := lastNonZero(data[:end], lo)
		drop(lo, end)
		if nz > lo {
			end = nz
			break
		}
		end = lo
	}
	return records, end - HeaderSize
}

// surveyFile is survey for a segment file f of size bytes that is not (yet) a *segment.
func (l *Log) surveyFile(f vfs.File, size int64) (records, bytes int64, err error) {
	if size <= HeaderSize {
		return 0, 0, nil
	}
	data, err := f.Map(int(size), false)
	if err != nil {
		return 0, 0, fmt.Errorf("commitlog: map %s: %w", f.Name(), err)
	}
	records, bytes = survey(data, func(lo, hi int64) {
		lo = lo >> pageShift << pageShift
		if hi < size {
			hi = hi >> pageShift << pageShift
		}
		if hi > lo && !l.dropOff.Load() {
			_ = f.DropResident(data[lo:hi]) // only the resident set is at stake; unmapping drops it anyway
		}
	})
	if err := f.Unmap(data); err != nil {
		return 0, 0, fmt.Errorf("commitlog: unmap %s: %w", f.Name(), err)
	}
	return records, bytes, nil
}

// discard takes the segment file at path out of the log, its file closed already: a file
// that held no record (bytes 0) is removed; any other is moved aside as a .broken file, and
// its records and bytes count as cut.
func (l *Log) discard(path string, base, records, bytes int64, why string) error {
	if bytes == 0 {
		l.lg.Warn(why+": removing the segment, which held no record", "segment", path)
		if err := l.fs.Remove(path); err != nil {
			return fmt.Errorf("commitlog: remove %s: %w", path, err)
		}
		l.rec.EmptyRemoved++
		return nil
	}
	to := l.brokenPath(base, 0)
	l.lg.Error(why+": moving the segment aside, its records are not served", "segment", path, "to", to, "records", records, "bytes", bytes)
	if err := l.fs.Rename(path, to); err != nil {
		return fmt.Errorf("commitlog: move aside %s: %w", path, err)
	}
	l.rec.BrokenMade++
	l.rec.Records += records
	l.rec.Bytes += bytes
	return nil
}

// A .broken file is named <segment>.<offset>.<recovery>.broken: the bytes of segment from
// offset on (0 for a whole segment moved aside), cut by the recovery numbered recovery,
// which is one more than the largest number among the .broken files present when it ran.
// Versions before the number named them <segment>.<offset>.broken and <segment>.broken;
// those count as recovery 0.
const brokenSuffix = ".broken"

// brokenPath names the .broken file of base's segment from offset off, for this recovery.
func (l *Log) brokenPath(base, off int64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s.%d.%d%s", segmentName(base), off, l.brokenGen, brokenSuffix))
}

// nextBrokenGen returns the number of a recovery in a directory holding names.
func nextBrokenGen(names []string) int64 {
	gen := int64(1)
	for _, name := range names {
		if b, ok := parseBrokenName(name); ok && b.gen < math.MaxInt64 {
			gen = max(gen, b.gen+1)
		}
	}
	return gen
}

type brokenName struct {
	gen, pos int64 // recovery number, position of the first byte
}

// parseBrokenName parses the name of a .broken file, in any of the forms brokenPath and
// earlier versions made.
func parseBrokenName(name string) (brokenName, bool) {
	rest, ok := strings.CutSuffix(name, brokenSuffix)
	if !ok || len(rest) < 20+len(segSuffix) {
		return brokenName{}, false
	}
	base, ok := parseSegmentName(rest[:20+len(segSuffix)])
	if !ok {
		return brokenName{}, false
	}
	var nums []int64
	if tail := rest[20+len(segSuffix):]; tail != "" {
		if tail[0] != '.' {
			return brokenName{}, false
		}
		for f := range strings.SplitSeq(tail[1:], ".") {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil || n < 0 {
				return brokenName{}, false
			}
			nums = append(nums, n)
		}
	}
	switch len(nums) {
	case 0: // <segment>.broken
		return brokenName{pos: base}, true
	case 1: // <segment>.<offset>.broken
		return brokenName{pos: base + nums[0]}, true
	case 2:
		return brokenName{gen: nums[1], pos: base + nums[0]}, true
	}
	return brokenName{}, false
}

// trimBroken deletes the oldest .broken files (of the lowest recovery number, then the lowest
// position) until the rest fit in MaxBrokenBytes, and counts what is left. A file it cannot
// size or delete is reported and left: the log does not depend on them.
func (l *Log) trimBroken() {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		l.lg.Warn("list .broken files", "err", err)
		return
	}
	type file struct {
		brokenName
		path string
		size int64
	}
	var files []file
	var total int64
	for _, name := range names {
		b, ok := parseBrokenName(name)
		if !ok {
			continue
		}
		path := filepath.Join(l.dir, name)
		size, err := fileSize(l.fs, path)
		if err != nil {
			l.lg.Warn("size of .broken file", "file", path, "err", err)
			continue
		}
		files = append(files, file{b, path, size})
		total += size
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(cmp.Compare(a.gen, b.gen), cmp.Compare(a.pos, b.pos), strings.Compare(a.path, b.path))
	})
	budget := max(l.opts.MaxBrokenBytes, 0)
	deleted := 0
	for i := 0; i < len(files) && total > budget; i++ {
		if err := l.fs.Remove(files[i].path); err != nil {
			l.lg.Warn("delete .broken file", "file", files[i].path, "err", err)
			continue
		}
		total -= files[i].size
		deleted++
	}
	if deleted > 0 {
		l.lg.Info("deleted the oldest .broken files to stay within MaxBrokenBytes", "deleted", deleted, "kept", len(files)-deleted, "kept_bytes", total, "max_broken_bytes", l.opts.MaxBrokenBytes)
		if err := l.fs.SyncDir(l.dir); err != nil {
			l.lg.Warn("sync dir after deleting .broken files", "err", err)
		}
	}
	l.rec.BrokenDeleted += deleted
	l.rec.BrokenFiles = len(files) - deleted
	l.rec.BrokenBytes = total
}

func fileSize(fs vfs.FS, path string) (int64, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	size, err := f.Size()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}
