package store

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/dirlock"
	"github.com/edgemq/edgemq/store/meta"
)

// Data dir layout.
const (
	commitlogDir = "commitlog"
	queuesDir    = "consumequeue"
)

// propertySlack is what a record may carry beyond MaxMessageSize of body: properties, keys,
// tags and the header.
const propertySlack = 64 << 10

// Store is EdgeMQ's message store: a commitlog of message records, a consume queue per
// (topic, queue id) indexing it, a dispatcher that builds the queues from the log, and the
// meta store. It knows nothing of consumer groups, the network or RocketMQ's wire format.
//
// Goroutines: the commitlog's own (flusher, segment preparer, retention, and with async
// flush the prefaulter); the dispatcher, which turns new records into queue entries (those
// that acknowledgements left to it), calls Options.OnArrival, prepares a queue's next file
// once its active one is half full (cqueue.Queue.Prepare: syncing the full file and creating
// the next happen there, not under the append lock), and periodically fsyncs the queues and
// writes the dispatch checkpoint; and the acknowledgement goroutine of
// AppendAsync. Close stops and waits for all.
type Store struct {
	dir  string
	opts Options
	lg   *slog.Logger
	lock *dirlock.Lock
	meta *meta.Store
	log  *commitlog.Log

	clock     *storeClock // store times
	mu        sync.Mutex  // serializes Append: queue offsets are assigned in log order
	lastStore int64       // store time of the last append, ms
	scratch   []byte
	bounds    []int
	payloads  [][]byte
	pos       []int64
	undo      []undo

	qmu    sync.RWMutex // guards topics; taken to open a queue and to walk them all
	topics map[string]map[int32]*queue
	// queues is a read-only copy of topics, replaced whole (under qmu) when a queue opens,
	// for the lookups of every append and dispatch: a read lock's atomic counter, taken by
	// appenders under Store.mu and by the dispatcher at once, bounced between the CPUs.
	queues atomic.Pointer[map[string]map[int32]*queue]

	dispatched atomic.Int64 // every record below this position has its queue entry
	lazyEnd    atomic.Int64 // end of the last lazy batch (durable later than acknowledged)
	// dmu is the dispatch token: its holder (the dispatcher goroutine, or an acknowledgement
	// that dispatches records, see dispatchTo and dispatchInline) owns dr, dstopped, the
	// queues' read-ahead and the appends to consume queues. Release it with unlockDispatch.
	dmu         sync.Mutex
	dr          *commitlog.Reader
	synced      atomic.Int64    // dispatched when the queues were last synced (by sync)
	dstopped    bool            // the dispatcher has stopped: nobody dispatches any more
	wmu         sync.Mutex      // guards dwaiters
	dwaiters    []chan struct{} // acknowledgements waiting for dmu in takeToken
	dwpool      sync.Pool       // their capacity-1 channels, per store: no test's synctest bubble shares one
	dparked     atomic.Int32    // len(dwaiters)
	dkick       chan struct{}
	syncReq     chan chan error // Flush asks the dispatcher, the checkpoint's only writer (sync)
	progressMu  sync.Mutex      // with progress: appenders wait for a lagging dispatcher
	progress    *sync.Cond
	lagWaiters  atomic.Int32 // appenders waiting in waitForDispatcher
	ackMu       sync.Mutex   // guards acks: AppendAsync's acknowledgements
	acks        []pendingAck
	ackKick     chan struct{}
	prepMu      sync.Mutex // guards prepQ
	prepQ       []*queue   // queues whose next file the dispatcher should prepare (wantPrepare)
	hmu         sync.Mutex // guards handoff
	handoff     []handoffEntry
	carry       []handoffEntry // handed-over entries taken by the holder of dmu
	carryHead   int
	handedOverN int64                 // records dispatched from handed-over entries (tests look)
	inlineN     int64                 // records dispatched by their appender under s.mu (tests look)
	readers     sync.Pool             // *commitlog.Reader
	writeErr    atomic.Pointer[error] // the last append's disk error, nil once one succeeds (Err)
	syncErr     atomic.Pointer[error] // the last queue sync's error, nil once one succeeds (Err)
	closed      atomic.Bool
	done        chan struct{}
	wg          sync.WaitGroup

	rec RecoveryStats // what Open's recovery cut; written by Open only
}

// RecoveryStats says what the recovery of Open cut: from the commitlog (its stats also
// count the .broken files that keep cut bytes) and from the consume queues.
type RecoveryStats struct {
	commitlog.RecoveryStats
	// QueueEntries counts the consume queue entries cut because the commitlog did not back
	// them (their records were cut, or they were torn), in Queues queues.
	QueueEntries int64
	Queues       int
}

// Recovery returns what the recovery of Open cut.
func (s *Store) Recovery() RecoveryStats {
	r := s.rec
	r.RecoveryStats = s.log.Recovery()
	return r
}

type queue struct {
	topic string
	id    int32
	cq    *cqueue.Queue
	next  int64 // next queue offset to assign; guarded by Store.mu

	// Entries read ahead by the dispatch to check replayed records against (owned by the
	// holder of Store.dmu, and by Open before the dispatcher starts).
	ahead     []cqueue.Entry
	aheadBase int64
}

type undo struct {
	q    *queue
	next int64
}

// Open opens the store in dir, creating it if needed. It checks the options first (an
// error wrapping ErrOptions names the one out of range, and nothing is created), takes the
// data dir's lock (a second process fails at once with an error naming the holder's pid),
// opens the meta store, recovers the commitlog, checks the consume queues against it, and
// rebuilds them past their last good entry.
func Open(dir string, opts *Options) (st *Store, err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("store: empty data dir path")
	}
	if err := o.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { // the lock and meta.db live on the real FS
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	s := &Store{
		dir:     dir,
		opts:    o,
		lg:      o.Logger.With("component", "store"),
		clock:   newStoreClock(o.Now, opts == nil || opts.Now == nil),
		topics:  map[string]map[int32]*queue{},
		dkick:   make(chan struct{}, 1),
		syncReq: make(chan chan error),
		done:    make(chan struct{}),
	}
	s.progress = sync.NewCond(&s.progressMu)
	if s.lock, err = dirlock.Acquire(dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.closeParts()
		}
	}()
	if s.meta, err = meta.Open(dir, &meta.Options{NoSync: o.MetaNoSync}); err != nil {
		return nil, err
	}
	if err := s.checkSettings(); err != nil {
		return nil, err
	}
	lo := s.opts.logOptions()
	lo.OnRetention = s.trimQueues
	lo.OnDurable = s.onDurable
	if s.log, err = commitlog.Open(filepath.Join(dir, commitlogDir), lo); err != nil {
		return nil, err
	}
	if err := s.recoverQueues(); err != nil {
		return nil, err
	}
	s.dr = s.log.NewReader()
	s.synced.Store(s.dispatched.Load())
	s.ackKick = make(chan struct{}, 1)
	s.wg.Add(2)
	go s.dispatchLoop()
	go s.ackLoop()
	return s, nil
}

// checkSettings reconciles the options with the settings the data dir was created with, and
// sets the segment size. The settings bind once the commitlog has a segment: an Open that
// failed before (options that an older version checked too late, a disk error) may have
// recorded settings that nothing was stored under. It checks the options that depend on the
// segment size before it records any settings.
func (s *Store) checkSettings() error {
	set, ok, err := s.meta.Settings()
	if err != nil {
		return err
	}
	if ok {
		if ok, err = commitlog.HasSegments(s.opts.FS, filepath.Join(s.dir, commitlogDir)); err != nil {
			return err
		}
		if !ok {
			s.lg.Info("the data dir has settings but no commitlog segment: ignoring them", "segment_size", set.SegmentSize, "flush", set.FlushPolicy)
		}
	}
	if ok {
		if set.SchemaVersion != PayloadVersion {
			return fmt.Errorf("%w: data dir has schema version %d, this build reads %d", ErrSettings, set.SchemaVersion, PayloadVersion)
		}
		if set.SegmentSize < commitlog.MinSegmentSize || set.SegmentSize > commitlog.MaxSegmentSize {
			return fmt.Errorf("%w: meta.db records a segment size of %d, out of range [%d, %d]: damaged settings", ErrSettings, set.SegmentSize, commitlog.MinSegmentSize, int64(commitlog.MaxSegmentSize))
		}
		if s.opts.SegmentSize == 0 {
			s.opts.SegmentSize = set.SegmentSize
		} else if s.opts.SegmentSize != set.SegmentSize {
			return fmt.Errorf("%w: data dir has %d-byte segments, options ask for %d", ErrSettings, set.SegmentSize, s.opts.SegmentSize)
		}
		if err := s.opts.checkMessageSize(s.opts.SegmentSize, true); err != nil {
			return fmt.Errorf("%w: %w", ErrSettings, err)
		}
		if err := s.opts.logOptions().Validate(); err != nil {
			return fmt.Errorf("%w: data dir has %d-byte segments: %w", ErrSettings, s.opts.SegmentSize, err)
		}
	}
	if s.opts.SegmentSize == 0 {
		s.opts.SegmentSize = commitlog.DefaultOptions.SegmentSize
		if err := s.opts.checkMessageSize(s.opts.SegmentSize, false); err != nil {
			return fmt.Errorf("%w: %w (SegmentSize 0 takes the default)", ErrOptions, err)
		}
		if err := s.opts.logOptions().Validate(); err != nil {
			return fmt.Errorf("%w: %w (SegmentSize 0 takes the default %d)", ErrOptions, err, s.opts.SegmentSize)
		}
	}
	if !ok || set.FlushPolicy != s.opts.Flush.String() {
		return s.meta.PutSettings(meta.Settings{SchemaVersion: PayloadVersion, FlushPolicy: s.opts.Flush.String(), SegmentSize: s.opts.SegmentSize})
	}
	return nil
}

// Meta returns the store's metadata store (offsets, topic and group configs, delay progress,
// uplink cursors). It is closed by Close.
func (s *Store) Meta() *meta.Store { return s.meta }

// Dir returns the data dir.
func (s *Store) Dir() string { return s.dir }

// Append stores msgs as one contiguous batch. For each message it sets QueueOffset (the next
// of its (topic, queue)), StoreTime, Pos and Size. With FlushSync it returns once an fsync
// covers the batch. When it returns nil, every read sees the batch: its messages are in
// their consume queues (MaxOffset counts them; GetMessages, OffsetByTime and waiting pulls
// find them). In sync mode they reach their queues only once durable, so that no reader
// sees a message a power cut could take back. (Should a consume queue not take an entry, on a
// full disk, Append still returns nil, as the message is stored, and the dispatcher adds the
// entry once it can.) A batch may mix topics and queues. On error nothing of the batch is
// visible to readers (except after a flush failure, when durability is unknown).
//
// A message's Durability may override the store's flush policy: a batch of DurabilityAsync
// messages returns once written (in sync mode before readers see it, see DurabilityAsync); a
// batch with a message that asks for an fsync (DurabilitySync, or the default in sync mode)
// returns once an fsync covers it.
func (s *Store) Append(msgs []*Message) error {
	lazy := s.lazy(msgs)
	end, err := s.write(msgs, nil, lazy)
	if err != nil || end < 0 {
		return err
	}
	if !lazy {
		if err := s.log.WaitDurable(end); err != nil {
			return err
		}
	} else if s.opts.Flush == commitlog.FlushSync {
		return nil // readers see it once durable (onDurable)
	}
	s.dispatchTo(end)
	return nil
}

// lazy reports whether no message of the batch asks for an fsync before its acknowledgement.
func (s *Store) lazy(msgs []*Message) bool {
	for _, m := range msgs {
		if m == nil {
			return false // write refuses it
		}
		switch m.Durability {
		case DurabilitySync:
			return false
		case DurabilityDefault:
			if s.opts.Flush == commitlog.FlushSync {
				return false
			}
		}
	}
	return true
}

// onDurable is the commitlog's OnDurable: in sync mode, once lazy records are durable,
// nobody waits to dispatch them, so the dispatcher goroutine does.
func (s *Store) onDurable(durable int64) {
	if s.opts.Flush == commitlog.FlushSync && s.lazyEnd.Load() > s.dispatched.Load() {
		s.kickDispatcher()
	}
}

// AppendAsync stores msgs as Append does, but with FlushSync it returns once the batch is
// written, before the fsync that covers it; done is called when Append would have returned:
// with nil once that fsync completed and the batch is visible to every read as after Append,
// or with the flush's error. Concurrent and successive async appends share fsyncs, so that
// one caller can keep many batches in flight. An error found before writing (bad message,
// closed store, full disk) is returned and done is not called. Otherwise done is called
// exactly once: for a batch that needs no fsync (Durability as for Append: the async flush
// policy, or DurabilityAsync messages) before AppendAsync returns, else from the store's
// acknowledgement goroutine, in log order. done must not block: it delays the
// acknowledgements behind it, and Close waits for it.
func (s *Store) AppendAsync(msgs []*Message, done func(error)) error {
	if done == nil {
		return fmt.Errorf("%w: AppendAsync needs a done function", ErrInvalidMessage)
	}
	if len(msgs) == 0 {
		done(nil)
		return nil
	}
	lazy := s.lazy(msgs)
	if !lazy {
		_, err := s.write(msgs, done, false)
		return err
	}
	end, err := s.write(msgs, nil, true)
	if err != nil {
		return err
	}
	if s.opts.Flush == commitlog.FlushAsync {
		s.dispatchTo(end)
	}
	done(nil)
	return nil
}

// write appends msgs to the log and returns the end of the batch (-1 for none). With
// done, the batch's acknowledgement is queued for the ack goroutine under the append lock,
// so that Close, which waits for that lock, finds it queued.
func (s *Store) write(msgs []*Message, done func(error), lazy bool) (int64, error) {
	if len(msgs) == 0 {
		return -1, nil
	}
	for _, m := range msgs {
		if err := s.check(m); err != nil {
			return 0, err
		}
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.waitForDispatcher()
	now := s.clock.read() // read outside the lock, kept monotonic under it
	end, err := s.writeLocked(now, msgs, done, lazy)
	if err != nil {
		return 0, err
	}
	// Its system calls must not hold up the next appender.
	if lazy {
		s.log.AfterAppendLazy(end)
		if s.log.Durable() >= end { // an fsync came before lazyEnd was set: onDurable missed it
			s.onDurable(end)
		}
	} else {
		s.log.AfterAppend(end)
	}
	return end, nil
}

// writeLocked is write's part under the append lock.
func (s *Store) writeLocked(now int64, msgs []*Message, done func(error), lazy bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	// Appenders racing to the lock must not store times out of order (time search bisects a
	// queue's times); a clock set back by more than that is left to show.
	if now < s.lastStore && s.lastStore-now < maxStoreTimeSkew {
		now = s.lastStore
	}
	s.lastStore = now
	s.scratch, s.bounds, s.undo = s.scratch[:0], s.bounds[:0], s.undo[:0]
	for _, m := range msgs {
		q, err := s.queueFor(m.Topic, m.QueueID, true)
		if err != nil {
			s.rollback()
			s.noteWrite(err)
			return 0, err
		}
		s.undo = append(s.undo, undo{q, q.next})
		m.QueueOffset = q.next
		q.next++
		m.StoreTime = now
		s.scratch = m.appendPayload(s.scratch)
		s.bounds = append(s.bounds, len(s.scratch))
	}
	s.payloads = s.payloads[:0]
	start := 0
	for _, b := range s.bounds {
		s.payloads = append(s.payloads, s.scratch[start:b:b])
		start = b
	}
	s.pos = append(s.pos[:0], make([]int64, len(msgs))...)
	end, err := s.log.AppendDeferred(now, s.payloads, s.pos)
	clear(s.payloads)
	s.noteWrite(err)
	if err != nil {
		s.rollback()
		return 0, err
	}
	for i, m := range msgs {
		m.Pos = s.pos[i]
		next := end
		if i+1 < len(msgs) {
			next = s.pos[i+1]
		}
		m.Size = int32(next - m.Pos)
	}
	if !s.dispatchInline(msgs, s.undo, end) {
		s.handOver(msgs, s.undo)
	}
	if done != nil {
		s.queueAck(end, done)
	}
	if lazy {
		s.lazyEnd.Store(end)
	}
	return end, nil
}

// maxStoreTimeSkew bounds the store-time inversions Append smooths over, ms: those of appenders
// that read the clock before taking the lock.
const maxStoreTimeSkew = 1000

// maxLagWait bounds how long an append waits for a lagging dispatcher: a dispatcher stalled
// (say on a full disk) must not stop writes for good.
const maxLagWait = time.Second

// waitForDispatcher holds an append back while the dispatcher is more than MaxDispatchLag
// bytes of log behind, for at most maxLagWait.
func (s *Store) waitForDispatcher() {
	if s.opts.MaxDispatchLag < 0 || s.log.Written()-s.dispatched.Load() <= s.opts.MaxDispatchLag {
		return
	}
	deadline := time.Now().Add(maxLagWait)
	t := time.AfterFunc(maxLagWait, func() { // wake the waiters at the deadline
		s.progressMu.Lock()
		s.progress.Broadcast()
		s.progressMu.Unlock()
	})
	defer t.Stop()
	s.lagWaiters.Add(1)
	defer s.lagWaiters.Add(-1)
	s.progressMu.Lock()
	for s.log.Written()-s.dispatched.Load() > s.opts.MaxDispatchLag && !s.closed.Load() && time.Now().Before(deadline) {
		s.progress.Wait()
	}
	s.progressMu.Unlock()
}

// rollback restores the queue offsets a failed Append assigned, newest first.
func (s *Store) rollback() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i].q.next = s.undo[i].next
	}
}

// check reports whether Append may store m.
func (s *Store) check(m *Message) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil message", ErrInvalidMessage)
	case m.Topic == "" || len(m.Topic) > 255:
		return fmt.Errorf("%w: topic %q must be 1 to 255 bytes", ErrInvalidMessage, m.Topic)
	case m.Topic == "." || m.Topic == ".." || strings.ContainsAny(m.Topic, "/\\\x00"):
		// The topic names its consume queues' directory (queueDir).
		return fmt.Errorf("%w: topic %q is not a directory name (it must not be . or .. nor hold / \\ or NUL)", ErrInvalidMessage, m.Topic)
	case m.QueueID < 0:
		return fmt.Errorf("%w: queue id %d", ErrInvalidMessage, m.QueueID)
	case len(m.Body) > s.opts.MaxMessageSize:
		return fmt.Errorf("%w: body of %d bytes, max %d", ErrMessageTooLarge, len(m.Body), s.opts.MaxMessageSize)
	}
	props, err := m.propertiesSize()
	if err != nil {
		return err
	}
	if extra := len(m.Tags) + len(m.Keys) + props; extra > propertySlack-1024 {
		return fmt.Errorf("%w: %d bytes of tags, keys and properties", ErrMessageTooLarge, extra)
	}
	return nil
}

// queueFor returns the queue of (topic, id), opening or creating it when create is set.
func (s *Store) queueFor(topic string, id int32, create bool) (*queue, error) {
	q := s.lookupQueue(topic, id)
	if q != nil || !create {
		return q, nil
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if q := s.topics[topic][id]; q != nil {
		return q, nil
	}
	return s.openQueueLocked(topic, id)
}

func (s *Store) openQueueLocked(topic string, id int32) (*queue, error) {
	cq, err := cqueue.Open(s.queueDir(topic, id), &cqueue.Options{FS: s.opts.FS, SegmentEntries: s.opts.QueueSegmentEntries, ResidentBytes: s.opts.QueueResidentBytes, Logger: s.opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("store: open consume queue %s/%d: %w", topic, id, err)
	}
	q := &queue{topic: topic, id: id, cq: cq, next: cq.Max()}
	if s.topics[topic] == nil {
		s.topics[topic] = map[int32]*queue{}
	}
	s.topics[topic][id] = q
	s.publishQueuesLocked()
	return q, nil
}

// lookupQueue returns the open queue of (topic, id), or nil, without a lock.
func (s *Store) lookupQueue(topic string, id int32) *queue {
	if m := s.queues.Load(); m != nil {
		return (*m)[topic][id]
	}
	return nil
}

// publishQueuesLocked replaces the copy of topics lookupQueue reads. s.qmu must be held for
// writing.
func (s *Store) publishQueuesLocked() {
	m := make(map[string]map[int32]*queue, len(s.topics))
	for t, qs := range s.topics {
		m[t] = maps.Clone(qs)
	}
	s.queues.Store(&m)
}

func (s *Store) queueDir(topic string, id int32) string {
	return filepath.Join(s.dir, queuesDir, topic, fmt.Sprint(id))
}

// trimQueues moves every queue's head past records that retention deleted.
func (s *Store) trimQueues(minPos int64) {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	for _, qs := range s.topics {
		for _, q := range qs {
			if _, err := q.cq.DeleteBefore(minPos); err != nil && !errors.Is(err, cqueue.ErrClosed) {
				s.lg.Warn("trim consume queue after retention", "topic", q.topic, "queue", q.id, "err", err)
			}
		}
	}
}

// Flush makes everything appended so far durable, consume queues included.
func (s *Store) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.log.Flush(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	select {
	case s.syncReq <- reply:
		return <-reply
	case <-s.done:
		return ErrClosed
	}
}

// Close flushes the log and the queues, writes the checkpoints, stops the goroutines and
// releases the data dir.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	s.mu.Lock() // wait for appends in flight
	s.mu.Unlock()
	ferr := s.log.Flush()
	close(s.done)
	s.progressMu.Lock()
	s.progress.Broadcast()
	s.progressMu.Unlock()
	s.wg.Wait()
	return errors.Join(ferr, s.closeParts())
}

func (s *Store) closeParts() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	s.qmu.Lock()
	for _, qs := range s.topics {
		for _, q := range qs {
			errs = append(errs, q.cq.Close())
		}
	}
	s.topics = nil
	s.queues.Store(nil)
	s.qmu.Unlock()
	if s.meta != nil {
		errs = append(errs, s.meta.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Release())
	}
	return errors.Join(errs...)
}
