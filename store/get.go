package store

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
)

// GetStatus is the outcome of GetMessages, as RocketMQ's GetMessageStatus.
type GetStatus int

const (
	// Found: at least one message is returned.
	Found GetStatus = iota
	// NoMessageInQueue: the queue does not exist or has never held a message.
	NoMessageInQueue
	// OffsetOverflowOne: the offset equals the max offset; the place to wait for new messages.
	OffsetOverflowOne
	// OffsetOverflowBadly: the offset is past the max offset.
	OffsetOverflowBadly
	// OffsetTooSmall: the offset is below the min offset (deleted by retention).
	OffsetTooSmall
	// NoMatchedMessage: entries were scanned but none matched the filter.
	NoMatchedMessage
	// OffsetFoundNull: entries were scanned but their records are gone or damaged.
	OffsetFoundNull
)

var statusNames = [...]string{"FOUND", "NO_MESSAGE_IN_QUEUE", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_TOO_SMALL", "NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL"}

func (s GetStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// GetResult is what GetMessages returns.
type GetResult struct {
	Status          GetStatus
	Messages        []Message // copies: they do not alias the store
	NextBeginOffset int64     // where the next read should start
	MinOffset       int64
	MaxOffset       int64 // the next offset to be written
}

// maxScanEntries bounds the entries one GetMessages scans when filtering (RocketMQ scans
// max(16000 bytes, 20 × maxMsgs) of consume queue).
func maxScanEntries(maxMsgs int) int { return max(16000/cqueue.EntrySize, maxMsgs) }

// GetMessages reads up to maxMsgs messages of (topic, queueID) from offset, keeping those filter
// matches (nil matches all). It never blocks; long polling is the broker's business.
func (s *Store) GetMessages(topic string, queueID int32, offset int64, maxMsgs int, filter Filter) (GetResult, error) {
	return s.getMessages(topic, queueID, offset, maxMsgs, filter, nil)
}

// GetViews is GetMessages that hands each message found to visit, read in place (see View),
// instead of copying it into the result: res.Messages stays nil. visit must not keep v or
// its slices past its return, and must not call the store.
func (s *Store) GetViews(topic string, queueID int32, offset int64, maxMsgs int, filter Filter, visit func(v *View)) (GetResult, error) {
	if visit == nil {
		return GetResult{}, fmt.Errorf("store: GetViews without a visit function")
	}
	return s.getMessages(topic, queueID, offset, maxMsgs, filter, visit)
}

// getMessages is GetMessages, or GetViews with visit set.
func (s *Store) getMessages(topic string, queueID int32, offset int64, maxMsgs int, filter Filter, visit func(v *View)) (GetResult, error) {
	if s.closed.Load() {
		return GetResult{}, ErrClosed
	}
	if maxMsgs <= 0 {
		return GetResult{}, fmt.Errorf("store: GetMessages max %d must be positive", maxMsgs)
	}
	q, _ := s.queueFor(topic, queueID, false)
	if q == nil {
		return GetResult{Status: NoMessageInQueue}, nil
	}
	minOff, maxOff := q.cq.Min(), q.cq.Max()
	res := GetResult{MinOffset: minOff, MaxOffset: maxOff}
	switch {
	case maxOff == 0:
		res.Status = NoMessageInQueue
		return res, nil
	case offset < minOff:
		res.Status, res.NextBeginOffset = OffsetTooSmall, minOff
		return res, nil
	case offset == maxOff:
		res.Status, res.NextBeginOffset = OffsetOverflowOne, offset
		return res, nil
	case offset > maxOff:
		res.Status, res.NextBeginOffset = OffsetOverflowBadly, maxOff
		return res, nil
	}

	var buf [64]cqueue.Entry
	r := s.reader()
	defer s.putReader(r)
	// Each message is decoded in place into v, checked and filtered there, and only then
	// handed to visit or copied out: a message the filter drops costs no copy. v is on the
	// stack, where writing it takes no write barriers, unless visit is handed it.
	var local View
	v := &local
	var pooled *View // visit's; never &local, which would then escape
	if visit != nil {
		pooled = views.Get().(*View)
		defer putView(pooled)
		v = pooled
	}
	scanned := 0
	limit := maxScanEntries(maxMsgs)
	next := offset
	found, sawGone, sawUnmatched := 0, false, false
	bytes := 0
	var arena []byte
	for scanned < limit && found < maxMsgs && next < maxOff && (found == 0 || bytes < s.opts.MaxPullBytes) {
		want := min(len(buf), limit-scanned)
		if filter == nil {
			want = min(want, maxMsgs-found) // every entry is a message to return: read no more
		}
		n, err := q.cq.Read(next, buf[:want])
		if err != nil {
			if errors.Is(err, cqueue.ErrOffsetTooSmall) { // retention raced us
				res.Status, res.NextBeginOffset = OffsetTooSmall, q.cq.Min()
				return res, nil
			}
			ce, corrupt := errors.AsType[*cqueue.CorruptError](err)
			switch {
			case !corrupt:
				return GetResult{}, err
			case n == 0:
				s.lg.Error("corrupt consume queue entry: skipped", "topic", topic, "queue", queueID, "offset", ce.Offset, "err", err)
				next, scanned, sawGone = ce.Offset+1, scanned+1, true
				continue
			}
			// Serve the good entries first; the next read reports the bad one.
		}
		if n == 0 {
			break
		}
		for i := 0; i < n && found < maxMsgs && (found == 0 || bytes < s.opts.MaxPullBytes); i++ {
			e := buf[i]
			off := next
			next++
			scanned++
			if filter != nil && !filter.MatchHash(e.TagHash) {
				sawUnmatched = true
				continue
			}
			rec, err := r.Read(e.Pos)
			if err != nil {
				if !errors.Is(err, commitlog.ErrPositionGone) {
					s.lg.Error("consume queue entry points at no good record: skipped", "topic", topic, "queue", queueID, "offset", off, "pos", e.Pos, "err", err)
				}
				sawGone = true
				continue
			}
			if err := decodeView(rec.Payload, rec.StoreTime, v); err != nil || v.QueueOffset != off || v.QueueID != queueID || string(v.Topic) != topic {
				s.lg.Error("record does not match its consume queue entry: skipped", "topic", topic, "queue", queueID, "offset", off, "pos", e.Pos, "err", err)
				sawGone = true
				continue
			}
			// The tags are read for the call only: the filter keeps nothing.
			if filter != nil && !filter.MatchTag(unsafe.String(unsafe.SliceData(v.Tags), len(v.Tags))) {
				sawUnmatched = true
				continue
			}
			v.Pos, v.Size = rec.Pos, int32(rec.Next-rec.Pos)
			found++
			if visit != nil {
				visit(pooled) // that is, v
				bytes += len(v.Body)
				continue
			}
			if res.Messages == nil {
				// Room for the messages the entries read promise, and for their bytes.
				k, need := s.sizeResult(buf[i:n], maxMsgs-found+1, filter, len(topic))
				res.Messages = make([]Message, 0, k)
				arena = make([]byte, 0, need)
			}
			if k := len(res.Messages); k < cap(res.Messages) {
				res.Messages = res.Messages[:k+1] // a zero Message: made so, never written
			} else {
				res.Messages = append(res.Messages, Message{})
			}
			v.copyTo(&res.Messages[len(res.Messages)-1], &arena, topic)
			bytes += len(v.Body)
		}
	}
	res.NextBeginOffset = next
	switch {
	case found > 0:
		res.Status = Found
	case sawUnmatched:
		res.Status = NoMatchedMessage
	case sawGone:
		res.Status = OffsetFoundNull
	default:
		res.Status = OffsetOverflowOne
	}
	return res, nil
}

// sizeResult returns the room to make for the messages of a read whose first message is
// that of ents[0]: how many of ents may be messages, at most most, and how many bytes their
// copies take at most. A record's frame and payload header (with the
// topic, not copied) take at least minRecordOverhead+topicLen bytes of its entry's Size.
func (s *Store) sizeResult(ents []cqueue.Entry, most int, filter Filter, topicLen int) (n, bytes int) {
	var need, first int64
	for _, e := range ents {
		if n == most {
			break
		}
		if n > 0 && filter != nil && !filter.MatchHash(e.TagHash) {
			continue
		}
		// Size comes from disk: a hint only (the arena grows if it is short), bounded by the
		// largest record the store writes, so that a corrupt entry cannot make a huge
		// allocation (or overflow an int on 32 bits).
		b := min(max(int64(e.Size)-int64(minRecordOverhead+topicLen), 0), int64(s.opts.MaxMessageSize)+maxRecordExtra)
		if n == 0 {
			first = b
		}
		n++
		need += b
	}
	// The read stops at the message that takes it to MaxPullBytes.
	return n, int(min(need, int64(s.opts.MaxPullBytes)+first))
}

// maxRecordExtra bounds what a record holds besides its body, for sizeResult's hint: the
// headroom the segment size leaves each message (Options.SegmentSize).
const maxRecordExtra = 64 << 10

// minRecordOverhead is the least a record takes besides the bytes GetMessages copies and its
// topic: a frame's length, checksum and time delta (1+4+1 bytes), and the payload's presence
// bits, queue id, queue offset and topic length (1 byte each).
const minRecordOverhead = 10

// decodeInto decodes a payload into m, copying strings and the body into *arena (see
// View.copyTo). topic is reused when equal.
func decodeInto(p []byte, storeTime int64, m *Message, arena *[]byte, topic string) error {
	var v View
	if err := decodeView(p, storeTime, &v); err != nil {
		return err
	}
	*m = Message{}
	v.copyTo(m, arena, topic)
	return nil
}

// MinOffset returns the first available queue offset of (topic, queueID), 0 if none.
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	if q, _ := s.queueFor(topic, queueID, false); q != nil {
		return q.cq.Min()
	}
	return 0
}

// MaxOffset returns the next queue offset to be written in (topic, queueID), 0 if none.
// Like RocketMQ's maxOffset, it counts only dispatched messages, which include every
// acknowledged one.
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	if q, _ := s.queueFor(topic, queueID, false); q != nil {
		return q.cq.Max()
	}
	return 0
}

// OffsetByTime returns the first queue offset whose message was stored at or after ts (unix
// ms), or the max offset if none was. It binary-searches the queue.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	q, _ := s.queueFor(topic, queueID, false)
	if q == nil {
		return 0, nil
	}
	r := s.reader()
	defer s.putReader(r)
	return q.cq.Search(func(e cqueue.Entry) (bool, error) {
		rec, err := r.Read(e.Pos)
		if errors.Is(err, commitlog.ErrPositionGone) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return rec.StoreTime >= ts, nil
	})
}

// ReadMessage returns the message stored at commitlog position pos.
func (s *Store) ReadMessage(pos int64) (*Message, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	r := s.reader()
	defer s.putReader(r)
	rec, err := r.Read(pos)
	if err != nil {
		return nil, err
	}
	m := new(Message)
	if err := decodeMessage(rec.Payload, rec.StoreTime, m); err != nil {
		return nil, err
	}
	m.Pos, m.Size = rec.Pos, int32(rec.Next-rec.Pos)
	return m, nil
}

// QueueInfo describes one consume queue.
type QueueInfo struct {
	Topic     string
	QueueID   int32
	MinOffset int64
	MaxOffset int64
}

// Queues lists the consume queues of topic, or of all topics when topic is "".
func (s *Store) Queues(topic string) []QueueInfo {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	var out []QueueInfo
	for t, qs := range s.topics {
		if topic != "" && t != topic {
			continue
		}
		for id, q := range qs {
			out = append(out, QueueInfo{Topic: t, QueueID: id, MinOffset: q.cq.Min(), MaxOffset: q.cq.Max()})
		}
	}
	return out
}

// DispatchedPos returns the commitlog position below which every record is in its queue.
func (s *Store) DispatchedPos() int64 { return s.dispatched.Load() }

// Log returns the underlying commitlog, for tools that dump or verify it.
func (s *Store) Log() *commitlog.Log { return s.log }

func (s *Store) reader() *commitlog.Reader {
	if r, ok := s.readers.Get().(*commitlog.Reader); ok {
		return r
	}
	return s.log.NewReader()
}

func (s *Store) putReader(r *commitlog.Reader) {
	r.Close()
	s.readers.Put(r)
}
