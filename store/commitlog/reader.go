package commitlog

import (
	"errors"
	"sort"
)

// errSegmentEnd says a position lies in the unused tail of a segment.
var errSegmentEnd = errors.New("commitlog: end of segment")

// Reader reads records by position. It keeps the segment it last read acquired, so a run of
// reads in one segment costs no locking. A Reader is not safe for concurrent use; Close it
// to release the segment.
type Reader struct {
	l    *Log
	seg  *segment
	data []byte
	// region is the start position of the last region countCold counted (resident.go).
	region int64
	// scanFrom is where the pages of r.seg a scan with Next read are not dropped yet
	// (dropBehindScan in resident.go); -1 when r.seg was not scanned.
	scanFrom int64
	// copy holds the payload of the last record read from the write buffer (wbuf.go).
	copy []byte
}

// NewReader returns a Reader of l.
func (l *Log) NewReader() *Reader { return &Reader{l: l, region: -1, scanFrom: -1} }

// Close releases the segment the reader holds, dropping what a scan left of it (a scan
// leaves a segment also when records it skipped take it to another one).
func (r *Reader) Close() {
	if r.seg != nil {
		if r.scanFrom >= 0 {
			r.dropBehindScan(r.scanFrom, r.seg.base+r.seg.size, true)
		}
		r.seg.release(r.l.fs)
		r.seg, r.data = nil, nil
		r.scanFrom = -1
	}
}

// Read returns the record that starts at pos. Errors: ErrNoRecord (no record starts there, or
// pos is at or past the end), ErrPositionGone (deleted by retention), a *CorruptError (the
// bytes there fail their checksum: they are never returned), ErrClosed.
func (r *Reader) Read(pos int64) (Record, error) {
	rec, err := r.read(pos)
	if errors.Is(err, errSegmentEnd) {
		return Record{}, ErrNoRecord
	}
	return rec, err
}

// Next returns the first record at or after pos, stepping over the unused tails of segments
// and over deleted segments. At the end of the written log it returns ErrNoRecord.
//
// Next is for scans, which read on forward (the dispatcher, recovery, a rebuild): the pages
// a scan read below the resident window (Options.ResidentBytes) leave the resident set as
// it goes (resident.go).
func (r *Reader) Next(pos int64) (Record, error) {
	for {
		if m := r.l.minPos.Load(); pos < m {
			pos = m
		}
		if off := pos % r.l.opts.SegmentSize; off < HeaderSize {
			pos += HeaderSize - off // a record that filled its segment ends at the next one's base
		}
		rec, err := r.read(pos)
		if errors.Is(err, ErrPositionGone) {
			continue // retention moved minPos meanwhile
		}
		if !errors.Is(err, errSegmentEnd) {
			if err == nil {
				r.dropBehindScan(rec.Pos, rec.Next, false)
			}
			return rec, err
		}
		if r.seg != nil && pos >= r.seg.base && pos < r.seg.base+r.seg.size {
			r.dropBehindScan(pos, pos, false) // the tail was read: Close drops it
		}
		r.Close() // done with the segment: drops what the scan left of it
		// Step to the next segment.
		next, ok := r.l.segmentAfter(pos)
		if !ok {
			return Record{}, ErrNoRecord
		}
		pos = next + HeaderSize
	}
}

func (r *Reader) read(pos int64) (Record, error) {
	l := r.l
	if l.isShut.Load() {
		r.Close()
		return Record{}, ErrClosed
	}
	w := l.written.Load()
	if pos >= w {
		return Record{}, ErrNoRecord
	}
	if pos < l.minPos.Load() {
		return Record{}, ErrPositionGone
	}
	if r.seg == nil || pos < r.seg.base || pos >= r.seg.base+r.seg.size {
		r.Close()
		s := l.segmentAt(pos)
		if s == nil {
			if pos < l.minPos.Load() {
				return Record{}, ErrPositionGone
			}
			return Record{}, errSegmentEnd // a segment moved aside as broken
		}
		data, err := s.acquire(l.tick.Load())
		if err != nil {
			return Record{}, err
		}
		if data == nil {
			return Record{}, ErrPositionGone
		}
		r.seg, r.data = s, data
	}
	s := r.seg
	off := pos - s.base
	if off < HeaderSize {
		return Record{}, ErrNoRecord
	}
	limit := s.size
	if w < s.base+s.size {
		limit = w - s.base
	}
	d, payload, n, st, ok := r.readBuffered(pos, w) // not written to the file yet
	if !ok {
		d, payload, n, st = decodeFrame(r.data[off:limit])
	}
	switch st {
	case frameOK:
		if pos < w-l.window {
			r.countCold(pos, pos+int64(n))
		}
		return Record{Pos: pos, Next: pos + int64(n), StoreTime: s.baseTime + d, Payload: payload}, nil
	case frameEnd:
		return Record{}, errSegmentEnd
	default:
		ce := &CorruptError{Segment: s.path, Offset: off, Reason: st.String()}
		if st == frameBadCRC {
			ce.Next = pos + int64(n)
		}
		return Record{}, ce
	}
}

// segmentAt returns the segment holding pos, or nil.
func (l *Log) segmentAt(pos int64) *segment {
	segs := *l.segs.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base+segs[i].size > pos })
	if i < len(segs) && segs[i].base <= pos {
		return segs[i]
	}
	return nil
}

// segmentAfter returns the base of the first segment starting after pos.
func (l *Log) segmentAfter(pos int64) (int64, bool) {
	segs := *l.segs.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > pos })
	if i < len(segs) && segs[i].base+HeaderSize < l.written.Load() {
		return segs[i].base, true
	}
	return 0, false
}
