package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/vfs"
)

// dispatchName is the dispatch checkpoint: i64 position (big-endian) | u32 crc32c. Every
// record below the position has its consume-queue entry synced to disk.
const dispatchName = "dispatch"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dispatchLimit is how far the dispatcher may go: durable records in sync mode (a consumer
// never sees a message a power cut could take back), written records in async mode.
func (s *Store) dispatchLimit() int64 {
	if s.opts.Flush == commitlog.FlushSync {
		return s.log.Durable()
	}
	return s.log.Written()
}

// dispatchLoop is the dispatcher goroutine. Acknowledgements wait for their records to be
// dispatched and dispatch them themselves when the token is free (dispatchTo), so the loop
// dispatches only what they left: records past the round an appender took, and records whose
// queue entry could not be written (a full disk) on a later kick. It fsyncs the queues and
// writes the checkpoint (sync) on its ticker, once QueueFlushBytes were dispatched, for Flush
// and at Close. It holds dmu, the dispatch token, whenever it dispatches, but not across the
// fsyncs of a sync (except at Close), so that appenders dispatch their messages meanwhile
// instead of waiting for the disk.
func (s *Store) dispatchLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.QueueFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.dkick:
		case <-t.C:
			if s.dispatched.Load() != s.synced.Load() {
				s.sync()
			}
			continue
		case reply := <-s.syncReq:
			s.dmu.Lock()
			for s.dispatch(s.dr, s.dispatchLimit(), true) {
			}
			s.unlockDispatch()
			reply <- s.sync()
			continue
		case <-s.done:
			s.dmu.Lock()
			for s.dispatch(s.dr, s.dispatchLimit(), true) {
			}
			s.syncLocked()
			s.dstopped = true // no appender dispatches from now on
			s.dr.Close()
			s.unlockDispatch()
			return
		}
		s.dmu.Lock()
		more := s.dispatch(s.dr, s.dispatchLimit(), true)
		s.unlockDispatch()
		s.prepareQueues()
		s.progressMu.Lock()
		s.progress.Broadcast() // appenders held back by MaxDispatchLag
		s.progressMu.Unlock()
		if s.syncDue() {
			s.sync()
		}
		if more {
			s.kickDispatcher() // let the loop breathe between rounds: ticker, Flush, Close
		}
	}
}

// wantPrepare queues q for the dispatcher goroutine's prepareQueues and kicks it: q's active
// file is half full, and the work of switching to the next file is best done ahead, outside
// the append lock (cqueue.Queue.Prepare).
func (s *Store) wantPrepare(q *queue) {
	s.prepMu.Lock()
	s.prepQ = append(s.prepQ, q)
	s.prepMu.Unlock()
	s.kickDispatcher()
}

// prepareQueues runs Prepare on the queues wantPrepare queued. Only the dispatcher
// goroutine calls it, holding no lock.
func (s *Store) prepareQueues() {
	s.prepMu.Lock()
	qs := s.prepQ
	s.prepQ = nil
	s.prepMu.Unlock()
	for _, q := range qs {
		if err := q.cq.Prepare(); err != nil && !errors.Is(err, cqueue.ErrClosed) {
			// Not fatal: the switch does the work itself then.
			s.lg.Warn("prepare the next consume queue file", "topic", q.topic, "queue", q.id, "err", err)
		}
	}
}

// syncDue reports whether QueueFlushBytes of log were dispatched since the queues were last
// synced.
func (s *Store) syncDue() bool {
	return s.dispatched.Load()-s.synced.Load() >= s.opts.QueueFlushBytes
}

// dispatchTo returns once every record below end has its queue entry: an acknowledgement
// (Append, AppendAsync's done) waits for it, so that an acknowledged message is visible to
// every read. In sync mode end must be durable, since dispatch never goes past durability.
//
// While the dispatch token is free it dispatches itself, up to dispatchLimit: the records of
// other appenders too, so that of the appenders one group commit's fsync releases, the first
// to run dispatches the whole group and the others find their records dispatched without
// taking the token; on an idle store a message so reaches its queue and a waiting pull
// without a hand-off to another goroutine. While the token is held it waits for its holder to
// release it (takeToken), who may have dispatched these records meanwhile.
//
// It returns early, leaving the records to the dispatcher goroutine, when a round of its own
// makes no progress (a consume queue cannot take an entry, on a full disk; the error is
// logged) or dispatching has stopped (Close). The queues' fsyncs, when due, are left to the
// dispatcher goroutine too: an acknowledgement should not wait for them.
func (s *Store) dispatchTo(end int64) {
	for s.dispatched.Load() < end {
		if !s.takeToken(end) {
			continue
		}
		if s.dstopped || s.dispatched.Load() >= end {
			s.unlockDispatch()
			return
		}
		from := s.dispatched.Load()
		more := s.dispatch(s.dr, s.dispatchLimit(), true)
		// Acknowledgements that came to wait meanwhile may be of records past the limit
		// read above: take them too, so that they wake to find them dispatched rather than
		// to take the token in turn.
		for i := 0; i < maxExtraRounds && !more && s.dparked.Load() > 0 && s.dispatchLimit() > s.dispatched.Load(); i++ {
			more = s.dispatch(s.dr, s.dispatchLimit(), true)
		}
		stuck := s.dispatched.Load() == from
		due := s.syncDue()
		s.unlockDispatch()
		if s.lagWaiters.Load() > 0 {
			s.progressMu.Lock()
			s.progress.Broadcast()
			s.progressMu.Unlock()
		}
		if more || due || stuck {
			s.kickDispatcher()
		}
		if stuck {
			return
		}
	}
}

// maxExtraRounds bounds the rounds that an acknowledgement holding the dispatch token
// dispatches for those waiting for it, after its own: it returns only after them.
const maxExtraRounds = 2

// takeToken takes the dispatch token and reports true if it is free. Otherwise it waits until
// the holder releases it (unlockDispatch) or every record below end is dispatched, and
// reports false. A waiter puts its capacity-1 channel in dwaiters, then tries the token
// again: the holder that made that TryLock fail releases the token after, and then finds the
// waiter in the list and wakes it. A waiter that stops waiting unwoken takes itself out.
func (s *Store) takeToken(end int64) bool {
	if s.dmu.TryLock() {
		return true
	}
	w, ok := s.dwpool.Get().(chan struct{})
	if !ok {
		w = make(chan struct{}, 1)
	}
	defer s.dwpool.Put(w)
	s.wmu.Lock()
	s.dwaiters = append(s.dwaiters, w)
	s.dparked.Store(int32(len(s.dwaiters)))
	s.wmu.Unlock()
	got := s.dmu.TryLock()
	if !got && s.dispatched.Load() < end {
		<-w
		return false
	}
	s.wmu.Lock()
	if i := slices.Index(s.dwaiters, w); i >= 0 {
		s.dwaiters = slices.Delete(s.dwaiters, i, i+1)
		s.dparked.Store(int32(len(s.dwaiters)))
	} else {
		<-w // a release took it out and woke it, under wmu: drain it for the pool
	}
	s.wmu.Unlock()
	return got
}

// unlockDispatch releases the dispatch token and wakes whoever waits for it in takeToken.
// Every holder of dmu releases it so, or a waiter would sleep until the next release.
func (s *Store) unlockDispatch() {
	s.dmu.Unlock()
	if s.dparked.Load() == 0 {
		return
	}
	s.wmu.Lock()
	for _, w := range s.dwaiters {
		w <- struct{}{} // never blocks: each channel is in the list once, and empty
	}
	clear(s.dwaiters)
	s.dwaiters = s.dwaiters[:0]
	s.dparked.Store(0)
	s.wmu.Unlock()
}

// maxInlineLag bounds the bytes of log before its batch that an async append dispatches
// under the append lock (dispatchInline); past it the batch waits for dispatch outside it.
const maxInlineLag = 64 << 10

// dispatchInline dispatches msgs, just appended and ending the log at end, under the append
// lock: in async mode, when the dispatch token is free, as it is unless the dispatcher
// goroutine is busy. Then no append waits for another's dispatch. The batch's entries are
// written directly when every record before it is dispatched, as is usual; else (records
// handed over while the token was busy, or the batch opens a segment) the batch is handed
// over and everything up to end dispatched, at most maxInlineLag behind it, so that the
// appends after it can go directly again. It reports false, having done nothing, when it
// cannot; the batch is then handed over and Append waits for its dispatch (dispatchTo).
// s.mu must be held.
func (s *Store) dispatchInline(msgs []*Message, qs []undo, end int64) bool {
	start := msgs[0].Pos
	if s.opts.Flush != commitlog.FlushAsync || start-s.dispatched.Load() > maxInlineLag || !s.dmu.TryLock() {
		return false
	}
	switch from := s.dispatched.Load(); {
	case s.dstopped:
		s.unlockDispatch()
		return false
	case from == start:
		for i, m := range msgs {
			e := cqueue.Entry{Pos: m.Pos, Size: m.Size, TagHash: TagHash(m.Tags)}
			if !s.dispatchEntry(qs[i].q, m.QueueOffset, e, m.StoreTime, true) {
				s.handOver(msgs[i:], qs[i:]) // a queue cannot take it (a full disk): retried later
				break
			}
			s.inlineN++
			s.dispatched.Store(m.Pos + int64(m.Size))
		}
	case from < end:
		s.handOver(msgs, qs)
		s.dispatch(s.dr, end, true)
	}
	due := s.syncDue()
	s.unlockDispatch()
	if due {
		s.kickDispatcher()
	}
	return true
}

func (s *Store) kickDispatcher() {
	select {
	case s.dkick <- struct{}{}:
	default:
	}
}

// sync fsyncs the queues and writes the checkpoint, logging a failure; s.dmu must not be
// held. It holds dmu only to note how far dispatch got and each queue's length then (the
// checkpoint must describe one moment), and fsyncs without it, so that appenders dispatch
// their messages to waiting pulls meanwhile instead of waiting for the disk. Only the
// dispatcher goroutine syncs.
func (s *Store) sync() error {
	s.dmu.Lock()
	ck := s.checkpointLocked()
	s.unlockDispatch()
	return s.syncTo(ck)
}

// syncLocked is sync with s.dmu held (Close, Open).
func (s *Store) syncLocked() error { return s.syncTo(s.checkpointLocked()) }

// syncTo makes ck true on disk, logging a failure: it fsyncs every queue of ck (entries
// appended since it was taken are synced too, or not: the checkpoint does not count them)
// and writes ck.
func (s *Store) syncTo(ck checkpoint) error {
	err := s.syncQueues(ck)
	s.noteSync(err)
	if err != nil {
		s.lg.Error("sync consume queues", "err", err)
		return err
	}
	s.synced.Store(ck.pos)
	return nil
}

// dispatchRound bounds the bytes of log one dispatch call covers.
const dispatchRound = 4 << 20

// dispatch writes queue entries for the records in [dispatched, limit), at most about
// dispatchRound bytes of them; it reports whether records remain.
func (s *Store) dispatch(r *commitlog.Reader, limit int64, notify bool) bool {
	pos := s.dispatched.Load()
	stop := pos + dispatchRound
	for pos < limit {
		if pos >= stop && notify {
			return true
		}
		if he, ok := s.handedOver(pos); ok {
			if !s.dispatchEntry(he.q, he.off, he.e, he.storeTime, notify) {
				s.carry, s.carryHead = s.carry[:0], 0 // read the log on the next try
				return false
			}
			s.handedOverN++
			pos = he.e.Pos + int64(he.e.Size)
			s.dispatched.Store(pos)
			continue
		}
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			// No record between pos and the end of the log (the unused tail of a segment).
			if limit <= s.log.Written() {
				s.dispatched.Store(limit)
			}
			return false
		}
		if err != nil {
			var ce *commitlog.CorruptError
			if errors.As(err, &ce) {
				// Only bit rot gets here (recovery cut whatever a power cut tore).
				next := s.skipDamage(r, pos, ce)
				s.lg.Error("corrupt record while dispatching: skipped", "pos", pos, "resume", next, "err", err)
				pos = next
				s.dispatched.Store(pos)
				continue
			}
			s.lg.Error("dispatch read", "pos", pos, "err", err)
			return false
		}
		if ok := s.dispatchRecord(r, rec, notify); !ok {
			return false // disk full or closed: retry on the next kick
		}
		pos = rec.Next
		s.dispatched.Store(pos)
	}
	return false
}

// handoffEntry is the queue entry of a record as its appender knew it: the dispatcher uses it
// instead of reading and decoding the record back from the log.
type handoffEntry struct {
	q         *queue
	off       int64
	e         cqueue.Entry
	storeTime int64
}

// maxHandoff bounds the entries appenders leave for the dispatcher; past it they leave none,
// and the dispatcher reads those records from the log. An acknowledgement waits for its
// records to be dispatched (dispatchTo), so the hand-off holds the batches of the appends in
// flight: one per Append, and in sync mode those of AppendAsync waiting for their fsync (a
// pipelining caller's window). The hand-off and the dispatcher's carry are live heap, which
// the GC's goal doubles: at 16Ki entries (48 bytes each), before appenders helped, they made
// 3-4 MiB of the peak RSS of a saturated send run of the peer benchmark (scripts/bench, 64
// producers of 100 B).
const maxHandoff = 4 << 10

// handOver leaves the dispatcher the queue entries of msgs, just appended. s.mu must be held
// (entries are handed over in log order).
func (s *Store) handOver(msgs []*Message, qs []undo) {
	s.hmu.Lock()
	if len(s.handoff)+len(msgs) <= maxHandoff {
		for i, m := range msgs {
			s.handoff = append(s.handoff, handoffEntry{
				q:         qs[i].q,
				off:       m.QueueOffset,
				e:         cqueue.Entry{Pos: m.Pos, Size: m.Size, TagHash: TagHash(m.Tags)},
				storeTime: m.StoreTime,
			})
		}
	}
	s.hmu.Unlock()
}

// handedOver returns the handed-over entry of the record at pos, if there is one. Entries of
// records below pos (dispatched from the log meanwhile) are dropped; an entry beyond pos
// (records between were not handed over, or pos is the unused tail of a segment) leaves the
// record at pos to be read from the log. s.dmu must be held.
func (s *Store) handedOver(pos int64) (handoffEntry, bool) {
	if s.carryHead == len(s.carry) {
		s.carry, s.carryHead = s.carry[:0], 0
		s.hmu.Lock()
		s.carry = append(s.carry, s.handoff...)
		s.handoff = s.handoff[:0]
		s.hmu.Unlock()
	}
	for s.carryHead < len(s.carry) {
		he := s.carry[s.carryHead]
		if he.e.Pos > pos {
			break
		}
		s.carryHead++
		if he.e.Pos == pos {
			return he, true
		}
	}
	return handoffEntry{}, false
}

// entryAhead returns the queue's entry at off, reading entries ahead in bulk: replay after a
// restart checks every replayed record against its entry, and one read per record would
// make recovery slow.
func (q *queue) entryAhead(off int64) (cqueue.Entry, bool) {
	if off >= q.aheadBase && off < q.aheadBase+int64(len(q.ahead)) {
		return q.ahead[off-q.aheadBase], true
	}
	if cap(q.ahead) == 0 {
		q.ahead = make([]cqueue.Entry, 0, 512)
	}
	n, _ := q.cq.Read(off, q.ahead[:cap(q.ahead)]) // entries before a damaged one are good
	q.ahead, q.aheadBase = q.ahead[:n], off
	if n == 0 {
		return cqueue.Entry{}, false
	}
	return q.ahead[0], true
}

// skipDamage returns where to go on after a damaged record at pos: just past it when its
// length leads to a record that verifies, else the next segment — but never past the end
// of the log, where new records will be written.
func (s *Store) skipDamage(r *commitlog.Reader, pos int64, ce *commitlog.CorruptError) int64 {
	if ce.Next > pos {
		if _, err := r.Read(ce.Next); err == nil {
			return ce.Next
		}
	}
	next := pos - pos%s.opts.SegmentSize + s.opts.SegmentSize
	return min(next, max(pos+1, s.log.Written()))
}

// dispatchRecord writes the queue entry of one record. It reports false when the entry could
// not be written and the record must be dispatched again later.
func (s *Store) dispatchRecord(r *commitlog.Reader, rec commitlog.Record, notify bool) bool {
	h, err := decodeHeader(rec.Payload)
	if err != nil {
		s.lg.Error("record does not decode: no queue entry", "pos", rec.Pos, "err", err)
		return true
	}
	var q *queue
	if m := s.queues.Load(); m != nil {
		q = (*m)[string(h.topic)][h.queueID] // indexed with the conversion: no copy of the name
	}
	if q == nil {
		s.qmu.Lock()
		q, err = s.openQueueLocked(string(h.topic), h.queueID)
		s.qmu.Unlock()
		if err != nil {
			s.lg.Error("dispatch", "err", err)
			return false
		}
	}
	e := cqueue.Entry{Pos: rec.Pos, Size: int32(rec.Next - rec.Pos), TagHash: tagHashBytes(h.tags)}
	return s.dispatchEntry(q, h.queueOffset, e, rec.StoreTime, notify)
}

// dispatchEntry writes entry e at offset off of queue q. It reports false when the entry could
// not be written and the record must be dispatched again later.
func (s *Store) dispatchEntry(q *queue, off int64, e cqueue.Entry, storeTime int64, notify bool) bool {
	if off < q.cq.Max() && off >= q.cq.Min() {
		// Replayed after a restart: the entry should be there already. Past the dispatch
		// checkpoint the queue file was not synced, so a power cut may have left garbage in
		// it: an entry that disagrees with the log is cut, with everything after it.
		if old, ok := q.entryAhead(off); ok && old == e {
			return true
		}
		s.lg.Warn("consume queue entry disagrees with the commitlog: rewriting the queue from here", "topic", q.topic, "queue", q.id, "offset", off)
		q.ahead = q.ahead[:0]
		if err := q.cq.TruncateFrom(off); err != nil {
			s.lg.Error("cut consume queue", "topic", q.topic, "queue", q.id, "err", err)
			return false
		}
	}
	err := q.cq.Append(off, e)
	if errors.Is(err, cqueue.ErrGap) {
		err = s.rebuildQueue(q, e.Pos, off)
		if err == nil {
			err = q.cq.Append(off, e)
		}
	}
	switch {
	case err == nil:
		if q.cq.PrepareDue() {
			s.wantPrepare(q)
		}
		if notify && s.opts.OnArrival != nil {
			s.opts.OnArrival(Arrival{Topic: q.topic, QueueID: q.id, Offset: off, TagHash: e.TagHash, StoreTime: storeTime})
		}
		return true
	case errors.Is(err, cqueue.ErrOffsetExists):
		return true // below Min: retention deleted it meanwhile
	case errors.Is(err, vfs.ErrNoSpace):
		s.lg.Error("disk full: consume queue entry waits", "topic", q.topic, "queue", q.id, "err", err)
		return false
	default:
		s.lg.Error("consume queue append", "topic", q.topic, "queue", q.id, "err", err)
		return !errors.Is(err, cqueue.ErrClosed)
	}
}

// rebuildQueue fills a queue that lost entries (a damaged or deleted queue file) from the
// commitlog: it scans from the queue's last good entry to upTo for the queue's records. If the
// records it lacks are gone from the log too, it restarts the queue empty at offset want.
func (s *Store) rebuildQueue(q *queue, upTo, want int64) error {
	from := s.log.MinPos()
	if last, ok := q.cq.Last(); ok {
		from = max(from, last.Pos+int64(last.Size))
	}
	s.lg.Warn("consume queue lacks entries: rebuilding it from the commitlog", "topic", q.topic, "queue", q.id, "max", q.cq.Max(), "want", want, "from", from)
	r := s.log.NewReader()
	defer r.Close()
	for pos := from; pos < upTo; {
		rec, err := r.Next(pos)
		var ce *commitlog.CorruptError
		if errors.As(err, &ce) {
			pos = s.skipDamage(r, pos, ce)
			continue
		}
		if err != nil || rec.Pos >= upTo {
			break
		}
		pos = rec.Next
		h, err := decodeHeader(rec.Payload)
		if err != nil || h.queueID != q.id || string(h.topic) != q.topic || h.queueOffset != q.cq.Max() {
			continue
		}
		e := cqueue.Entry{Pos: rec.Pos, Size: int32(rec.Next - rec.Pos), TagHash: tagHashBytes(h.tags)}
		if err := q.cq.Append(h.queueOffset, e); err != nil {
			return err
		}
	}
	if lost := want - q.cq.Max(); lost > 0 {
		// The records are gone or damaged too: keep offsets dense (consumers hold offsets
		// into this queue) with hole entries that reads report and skip.
		s.lg.Error("consume queue entries lost with their records: filling with holes", "topic", q.topic, "queue", q.id, "from", q.cq.Max(), "count", lost)
		for q.cq.Max() < want {
			if err := q.cq.Append(q.cq.Max(), holeEntry); err != nil {
				return err
			}
		}
	}
	return nil
}

// holeEntry stands for a queue entry whose record is lost. It points at the first position of
// the log, whose record (if any) never matches the entry's topic, queue and offset; reads skip
// it as OFFSET_FOUND_NULL.
var holeEntry = cqueue.Entry{Pos: cqueue.MinPos, Size: 1}

// checkpointLocked returns the checkpoint of this moment: how far dispatch got and the
// length of every queue. s.dmu must be held, so that no dispatch is under way. It reads the
// lock-free copy of the queue map.
func (s *Store) checkpointLocked() checkpoint {
	ck := checkpoint{pos: s.dispatched.Load()}
	if m := s.queues.Load(); m != nil {
		for _, qs := range *m {
			for _, q := range qs {
				ck.queues = append(ck.queues, queueMax{q.topic, q.id, q.cq.Max()})
			}
		}
	}
	return ck
}

// syncQueues fsyncs the queues of ck, then writes ck as the dispatch checkpoint.
func (s *Store) syncQueues(ck checkpoint) error {
	var err error
	for _, qm := range ck.queues {
		q := s.lookupQueue(qm.topic, qm.id)
		if q == nil {
			continue
		}
		if e := q.cq.Sync(); e != nil && err == nil && !errors.Is(e, cqueue.ErrClosed) {
			err = e
		}
	}
	if err != nil {
		return err
	}
	return s.writeCheckpoint(ck)
}

// checkpoint is the dispatch checkpoint: every record below pos has its queue entry on disk,
// and each queue held max entries then. Layout (store/FORMAT.md):
//
//	u32 count | count × (u16 topic length | topic | i32 queue id | i64 max offset) |
//	i64 pos | u32 crc32c of everything before it
//
// It is written to a temporary file, fsynced and renamed over the old one.
type checkpoint struct {
	pos    int64
	queues []queueMax
}

type queueMax struct {
	topic string
	id    int32
	max   int64
}

func (c checkpoint) marshal() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(c.queues)))
	for _, q := range c.queues {
		b = binary.BigEndian.AppendUint16(b, uint16(len(q.topic)))
		b = append(b, q.topic...)
		b = binary.BigEndian.AppendUint32(b, uint32(q.id))
		b = binary.BigEndian.AppendUint64(b, uint64(q.max))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(c.pos))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadCheckpoint = errors.New("store: dispatch checkpoint does not verify")

func unmarshalCheckpoint(b []byte) (checkpoint, error) {
	var c checkpoint
	if len(b) < 16 || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return c, errBadCheckpoint
	}
	body := b[:len(b)-12]
	c.pos = int64(binary.BigEndian.Uint64(b[len(b)-12:]))
	n := binary.BigEndian.Uint32(body)
	body = body[4:]
	if uint64(n) > uint64(len(body))/14 {
		return checkpoint{}, errBadCheckpoint
	}
	for i := uint32(0); i < n; i++ {
		if len(body) < 2 {
			return checkpoint{}, errBadCheckpoint
		}
		l := int(binary.BigEndian.Uint16(body))
		if len(body) < 2+l+12 {
			return checkpoint{}, errBadCheckpoint
		}
		q := queueMax{topic: string(body[2 : 2+l]), id: int32(binary.BigEndian.Uint32(body[2+l:])), max: int64(binary.BigEndian.Uint64(body[6+l:]))}
		c.queues = append(c.queues, q)
		body = body[2+l+12:]
	}
	if len(body) != 0 {
		return checkpoint{}, errBadCheckpoint
	}
	return c, nil
}

func (s *Store) writeCheckpoint(c checkpoint) error {
	path := filepath.Join(s.dir, dispatchName)
	tmp := path + ".tmp"
	f, err := s.opts.FS.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store: dispatch checkpoint: %w", err)
	}
	_, err = f.WriteAt(c.marshal(), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.opts.FS.Rename(tmp, path)
	}
	if err == nil {
		err = s.opts.FS.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("store: write dispatch checkpoint: %w", err)
	}
	return nil
}

// readCheckpoint returns the dispatch checkpoint, or one at position -1.
func (s *Store) readCheckpoint() checkpoint {
	none := checkpoint{pos: -1}
	f, err := s.opts.FS.OpenFile(filepath.Join(s.dir, dispatchName), os.O_RDONLY, 0)
	if err != nil {
		return none
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size > 64<<20 {
		return none
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return none
	}
	c, err := unmarshalCheckpoint(b)
	if err != nil {
		s.lg.Warn("dispatch checkpoint unusable: rebuilding consume queues from the start of the log", "err", err)
		return none
	}
	return c
}

// recoverQueues opens every consume queue, cuts entries the commitlog does not back, and
// dispatches the records after the dispatch checkpoint.
func (s *Store) recoverQueues() error {
	root := filepath.Join(s.dir, queuesDir)
	if err := s.opts.FS.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", root, err)
	}
	topics, err := s.opts.FS.ReadDir(root)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", root, err)
	}
	r := s.log.NewReader()
	defer r.Close()
	ck := s.readCheckpoint()
	trusted := map[queueKey]int64{}
	for _, qm := range ck.queues {
		trusted[queueKey{qm.topic, qm.id}] = qm.max
	}
	for _, topic := range topics {
		ids, err := s.opts.FS.ReadDir(filepath.Join(root, topic))
		if err != nil {
			continue // not a directory
		}
		for _, name := range ids {
			id, err := strconv.ParseInt(name, 10, 32)
			if err != nil || id < 0 {
				continue
			}
			s.qmu.Lock()
			q, err := s.openQueueLocked(topic, int32(id))
			s.qmu.Unlock()
			if err != nil {
				return err
			}
			if err := s.checkQueueTail(r, q, trusted[queueKey{topic, int32(id)}]); err != nil {
				return err
			}
		}
	}
	start := ck.pos
	if start < s.log.MinPos() || start > s.log.Written() {
		start = s.log.MinPos()
	}
	s.lg.Debug("recovering consume queues", "checkpoint", ck.pos, "start", start, "log_min", s.log.MinPos(), "log_end", s.log.Written())
	// A queue shorter than the checkpoint says lost entries (damaged or deleted files).
	for _, qm := range ck.queues {
		q, err := s.queueFor(qm.topic, qm.id, true)
		if err != nil {
			return err
		}
		s.lg.Debug("queue at recovery", "topic", qm.topic, "queue", qm.id, "max", q.cq.Max(), "checkpoint_max", qm.max)
		if q.cq.Max() < qm.max && start > s.log.MinPos() {
			if err := s.rebuildQueue(q, start, qm.max); err != nil {
				return err
			}
		}
	}
	s.dispatched.Store(start)
	s.dispatch(r, s.log.Written(), false)
	s.trimQueues(s.log.MinPos())
	for _, qs := range s.topics {
		for _, q := range qs {
			q.next = q.cq.Max()
			q.ahead = nil // only replay reads ahead
		}
	}
	return s.syncQueues(s.checkpointLocked()) // nobody else dispatches yet
}

type queueKey struct {
	topic string
	id    int32
}

// checkQueueTail drops entries at the end of q that the commitlog does not back: records cut
// by log recovery, or entries that fail to match their record. Entries below trusted were
// synced before the dispatch checkpoint was written: one whose record fails its checksum is
// bit rot, kept for reads to report and skip. Entries above it may be garbage from a torn
// write, and must match their record exactly. What it cuts is counted in the recovery
// stats and reported in one line per queue.
func (s *Store) checkQueueTail(r *commitlog.Reader, q *queue, trusted int64) error {
	top := q.cq.Max()
	var firstErr error // why the highest entry was cut
	defer func() {
		if n := top - q.cq.Max(); n > 0 {
			s.rec.QueueEntries += n
			s.rec.Queues++
			s.lg.Warn("consume queue entries not backed by the commitlog: cut them", "topic", q.topic, "queue", q.id,
				"entries", n, "from", q.cq.Max(), "to", top, "err", firstErr)
		}
	}()
	for {
		e, ok := q.cq.Last()
		if !ok {
			if q.cq.Max() > q.cq.Min() { // the last entry does not decode
				if err := q.cq.TruncateFrom(q.cq.Max() - 1); err != nil {
					return err
				}
				if firstErr == nil {
					firstErr = errors.New("store: queue entry does not decode")
				}
				continue
			}
			return nil
		}
		want := q.cq.Max() - 1
		if e.Pos < s.log.MinPos() {
			return nil // deleted by retention: trimmed below
		}
		if e == holeEntry {
			return nil
		}
		rec, err := r.Read(e.Pos)
		if errors.Is(err, commitlog.ErrCorrupt) && want < trusted {
			// The record is damaged, not cut: keep its entry; reads report and skip it.
			s.lg.Error("consume queue's last record is damaged", "topic", q.topic, "queue", q.id, "offset", want, "pos", e.Pos)
			return nil
		}
		if err == nil {
			h, herr := decodeHeader(rec.Payload)
			if herr == nil && string(h.topic) == q.topic && h.queueID == q.id && h.queueOffset == want && rec.Next-rec.Pos == int64(e.Size) {
				return nil
			}
			err = fmt.Errorf("store: the record at position %d is not the queue's entry %d", e.Pos, want)
		}
		if firstErr == nil {
			firstErr = err
		}
		if err := q.cq.TruncateFrom(want); err != nil {
			return err
		}
	}
}
