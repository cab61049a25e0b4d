package consumer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
)

// readType says where offsetStore.Read looks.
type readType int

const (
	// readFromMemory reads the in-memory table only.
	readFromMemory readType = iota
	// readFromStore reads the broker (clustering) or the file (broadcasting).
	readFromStore
	// readMemoryThenStore tries memory, then the store.
	readMemoryThenStore
)

// offsetStore keeps a consumer's offsets: in memory, persisted to the broker (clustering) or
// a local file (broadcasting). ctx bounds the broker calls of the clustering store.
type offsetStore interface {
	// Load reads persisted offsets into memory (broadcasting; a no-op for clustering).
	Load() error
	// Update sets queue's offset in memory; with increaseOnly it never moves it back.
	Update(queue mq.MessageQueue, offset int64, increaseOnly bool)
	// Read returns queue's offset, or -1 when none is known.
	Read(ctx context.Context, queue mq.MessageQueue, rt readType) (int64, error)
	// Persist writes the in-memory offsets of queues.
	Persist(ctx context.Context, queues []mq.MessageQueue) error
	// Remove forgets queue.
	Remove(queue mq.MessageQueue)
}

// ErrCorruptOffsets is returned (wrapped, naming the file) by localOffsetStore's Load and
// Read(readFromStore) when the offsets file cannot be decoded and no good backup copy
// (offsets.json.bak) is there to fall back on.
var ErrCorruptOffsets = errors.New("consumer: corrupt offsets file")

var (
	_ offsetStore = (*remoteOffsetStore)(nil)
	_ offsetStore = (*localOffsetStore)(nil)
)

// offsetTable is the in-memory part both stores share: offsets by queue, and which of them
// changed since they were last persisted. Its owner guards it.
type offsetTable struct {
	m     map[mq.MessageQueue]int64
	dirty map[mq.MessageQueue]struct{}
}

func newOffsetTable() offsetTable {
	return offsetTable{m: map[mq.MessageQueue]int64{}, dirty: map[mq.MessageQueue]struct{}{}}
}

// memOffsets is the in-memory part both offset stores share: the table and its lock.
type memOffsets struct {
	mu sync.Mutex // guards t
	t  offsetTable
}

// Update sets queue's offset in memory; with increaseOnly it never moves it back. Negative
// offsets are ignored.
func (s *memOffsets) Update(queue mq.MessageQueue, offset int64, increaseOnly bool) {
	s.mu.Lock()
	s.t.update(queue, offset, increaseOnly)
	s.mu.Unlock()
}

// readMemory is the in-memory part of Read: it returns queue's offset and true when rt is
// answered from memory (readFromMemory, or readMemoryThenStore with an offset known), false
// when the store must be asked, or errReadType.
func (s *memOffsets) readMemory(queue mq.MessageQueue, rt readType) (int64, bool, error) {
	switch rt {
	case readFromMemory, readMemoryThenStore:
		s.mu.Lock()
		off := s.t.read(queue)
		s.mu.Unlock()
		if off >= 0 || rt == readFromMemory {
			return off, true, nil
		}
		return -1, false, nil
	case readFromStore:
		return -1, false, nil
	}
	return -1, true, errReadType(rt)
}

// update sets queue's offset and marks it dirty if it changed. A negative offset is ignored:
// -1 is Read's "none known", and the broker refuses negative offsets.
func (t *offsetTable) update(queue mq.MessageQueue, offset int64, increaseOnly bool) {
	if offset < 0 {
		return
	}
	old, ok := t.m[queue]
	if ok && (old == offset || increaseOnly && offset < old) {
		return
	}
	t.m[queue] = offset
	t.dirty[queue] = struct{}{}
}

func (t *offsetTable) read(queue mq.MessageQueue) int64 {
	if off, ok := t.m[queue]; ok {
		return off
	}
	return -1
}

func (t *offsetTable) remove(queue mq.MessageQueue) {
	delete(t.m, queue)
	delete(t.dirty, queue)
}

func errReadType(rt readType) error {
	return fmt.Errorf("consumer: unknown offset read type %d", rt)
}

// remoteOffsetStore keeps a clustering consumer's offsets in memory and commits them to the
// broker, which owns them.
//
// Persist commits only the offsets that changed since they were last committed (RocketMQ
// commits every offset it holds, every time): an idle consumer makes no calls. A queue
// whose broker offset is lost is still covered, because a pull commits the consumer's
// offset too (the COMMIT_OFFSET piggyback). Safe for concurrent use.
type remoteOffsetStore struct {
	b     Broker
	group string

	pmu sync.Mutex // serializes Persist, so the broker sees each queue's commits in order
	memOffsets
}

func newRemoteOffsetStore(b Broker, group string) *remoteOffsetStore {
	return &remoteOffsetStore{b: b, group: group, memOffsets: memOffsets{t: newOffsetTable()}}
}

// Load does nothing: clustering offsets are read from the broker queue by queue.
func (s *remoteOffsetStore) Load() error { return nil }

// Read returns queue's offset, or -1 when none is known. readFromStore asks the broker; the
// answer replaces the in-memory offset (it is what the broker holds, so it is not dirty),
// while "no offset stored" returns -1 and leaves memory alone.
func (s *remoteOffsetStore) Read(ctx context.Context, queue mq.MessageQueue, rt readType) (int64, error) {
	if off, done, err := s.readMemory(queue, rt); done {
		return off, err
	}
	off, err := s.b.QueryOffset(ctx, s.group, queue)
	if errors.Is(err, mq.ErrOffsetNotFound) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("consumer: query offset of %s queue %d: %w", queue.Topic, queue.QueueID, err)
	}
	s.mu.Lock()
	s.t.m[queue] = off
	delete(s.t.dirty, queue)
	s.mu.Unlock()
	return off, nil
}

// Persist commits to the broker the offsets of queues that changed since their last commit.
// A failed commit is retried by the next Persist; the errors are joined.
func (s *remoteOffsetStore) Persist(ctx context.Context, queues []mq.MessageQueue) error {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	type commit struct {
		queue mq.MessageQueue
		off   int64
	}
	var todo []commit
	s.mu.Lock()
	for _, queue := range queues {
		if _, ok := s.t.dirty[queue]; ok {
			todo = append(todo, commit{queue, s.t.m[queue]})
			delete(s.t.dirty, queue)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, c := range todo {
		if err := s.b.CommitOffset(ctx, s.group, c.queue, c.off); err != nil {
			errs = append(errs, fmt.Errorf("consumer: commit offset %d of %s queue %d: %w", c.off, c.queue.Topic, c.queue.QueueID, err))
			s.mu.Lock()
			if _, ok := s.t.m[c.queue]; ok { // not removed meanwhile: retry next time
				s.t.dirty[c.queue] = struct{}{}
			}
			s.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// Remove forgets queue's offset without committing it.
func (s *remoteOffsetStore) Remove(queue mq.MessageQueue) {
	s.mu.Lock()
	s.t.remove(queue)
	s.mu.Unlock()
}

// Local offsets file names, in <dir>/<clientID>/<group>/.
const (
	offsetsFile    = "offsets.json"
	offsetsBakFile = "offsets.json.bak" // the previous good offsets.json
	offsetsTmpFile = "offsets.json.tmp" // being written; ignored by readers
	offsetsVersion = 1
)

// offsetsDoc is the offsets file, JSON:
//
//	{"version": 1, "group": "g", "clientId": "host@DEFAULT",
//	 "offsets": [{"topic": "T", "brokerName": "edgemq", "queueId": 0, "offset": 42}, ...]}
//
// Offsets are sorted by topic, broker name, then queue id, so equal tables give equal
// files. A file written before queues named their broker has no brokerName: its offsets
// are read as those of queues with an empty broker name.
type offsetsDoc struct {
	Version  int           `json:"version"`
	Group    string        `json:"group"`
	ClientID string        `json:"clientId"`
	Offsets  []queueOffset `json:"offsets"`
}

type queueOffset struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName,omitempty"`
	QueueID    int32  `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// localOffsetStore keeps a broadcasting consumer's offsets in memory and in the file
// <dir>/<clientID>/<group>/offsets.json.
//
// A write goes to offsets.json.tmp, is fsynced, the current offsets.json (when it is known
// to be good) is renamed to offsets.json.bak, the temp file is renamed to offsets.json, and
// the directory is fsynced. A crash at any point leaves offsets.json, or, between the two
// renames, only offsets.json.bak; Load falls back to the backup when offsets.json is
// missing or corrupt. A leftover temp file is never read, and the next write truncates it.
//
// Persist writes every in-memory offset, whatever its queues (the file is the whole table, as
// RocketMQ's Go client writes it), and only when an offset changed since the last write,
// to spare flash. Call Load before Update and Persist (the consumer does so when it starts),
// or the first write replaces the offsets of queues not yet updated. Safe for concurrent use.
type localOffsetStore struct {
	dir      string // <dir>/<clientID>/<group>
	group    string
	clientID string
	// lg reports falling back to the backup file. Default: discard; the consumer may set it
	// before first use.
	lg *slog.Logger

	wmu      sync.Mutex // serializes file reads and writes; taken before mu
	mainGood bool       // offsets.json is known good: keep it as the backup when replacing it

	memOffsets
}

func newLocalOffsetStore(dir, group, clientID string) (*localOffsetStore, error) {
	if dir == "" || group == "" || clientID == "" {
		return nil, fmt.Errorf("consumer: offsets dir, group and client id must not be empty")
	}
	return &localOffsetStore{
		dir:        filepath.Join(dir, escapePathComponent(clientID), escapePathComponent(group)),
		group:      group,
		clientID:   clientID,
		lg:         slog.New(slog.DiscardHandler),
		memOffsets: memOffsets{t: newOffsetTable()},
	}, nil
}

// escapePathComponent turns s into one safe file name: '%', '/', '\\' and control bytes
// become %XX, and a name of only dots ("." or "..") has its dots escaped too. Distinct
// names stay distinct; '@' and '#' of client ids are kept.
func escapePathComponent(s string) string {
	if strings.Trim(s, ".") == "" {
		return strings.Repeat("%2E", len(s))
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == '/' || c == '\\' || c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Load replaces the in-memory offsets with the file's. A missing file means no offsets. A
// corrupt offsets.json falls back to offsets.json.bak (reported to lg); when that is
// missing or corrupt too, Load returns an error wrapping ErrCorruptOffsets.
func (s *localOffsetStore) Load() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m, mainGood, err := s.readLocked()
	if err != nil {
		return err
	}
	s.mainGood = mainGood
	s.mu.Lock()
	s.t = newOffsetTable()
	for queue, off := range m {
		s.t.m[queue] = off
	}
	s.mu.Unlock()
	return nil
}

// readLocked reads the offsets file, falling back to the backup. mainGood reports that
// offsets.json itself was read. The caller holds wmu.
func (s *localOffsetStore) readLocked() (m map[mq.MessageQueue]int64, mainGood bool, err error) {
	main := filepath.Join(s.dir, offsetsFile)
	m, err = readOffsetsFile(main)
	if err == nil {
		return m, true, nil
	}
	missing := errors.Is(err, fs.ErrNotExist)
	if !missing && !errors.Is(err, ErrCorruptOffsets) {
		return nil, false, err
	}
	bak, berr := readOffsetsFile(filepath.Join(s.dir, offsetsBakFile))
	switch {
	case berr == nil:
		if missing {
			s.lg.Info("offsets file missing, using its backup", "file", main)
		} else {
			s.lg.Warn("offsets file corrupt, using its backup", "file", main, "err", err)
		}
		return bak, false, nil
	case missing && errors.Is(berr, fs.ErrNotExist):
		return map[mq.MessageQueue]int64{}, false, nil
	case missing:
		return nil, false, berr
	case errors.Is(berr, fs.ErrNotExist):
		return nil, false, err
	default:
		return nil, false, fmt.Errorf("%w (backup: %v)", err, berr)
	}
}

// readOffsetsFile decodes one offsets file. A missing file returns an error matching
// fs.ErrNotExist; one that does not decode, or holds impossible values, ErrCorruptOffsets.
func readOffsetsFile(path string) (map[mq.MessageQueue]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("consumer: read offsets: %w", err)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorruptOffsets, path, fmt.Sprintf(format, args...))
	}
	var doc offsetsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, corrupt("%v", err)
	}
	if doc.Version != offsetsVersion {
		return nil, corrupt("version %d, want %d", doc.Version, offsetsVersion)
	}
	m := make(map[mq.MessageQueue]int64, len(doc.Offsets))
	for _, o := range doc.Offsets {
		queue := mq.MessageQueue{Topic: o.Topic, BrokerName: o.BrokerName, QueueID: o.QueueID}
		if _, dup := m[queue]; dup || o.Topic == "" || o.QueueID < 0 || o.Offset < 0 {
			return nil, corrupt("bad entry %+v", o)
		}
		m[queue] = o.Offset
	}
	return m, nil
}

// Read returns queue's offset, or -1 when none is known. readFromStore reads the file (with
// Load's fallback to the backup) and, when it holds queue, sets the in-memory offset to it.
func (s *localOffsetStore) Read(_ context.Context, queue mq.MessageQueue, rt readType) (int64, error) {
	if off, done, err := s.readMemory(queue, rt); done {
		return off, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m, _, err := s.readLocked()
	if err != nil {
		return -1, err
	}
	off, ok := m[queue]
	if !ok {
		return -1, nil
	}
	s.mu.Lock()
	s.t.update(queue, off, false)
	s.mu.Unlock()
	return off, nil
}

// Persist writes all in-memory offsets to the file when any changed since the last write.
// queues is not used: the file always holds the whole table.
func (s *localOffsetStore) Persist(_ context.Context, _ []mq.MessageQueue) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if len(s.t.dirty) == 0 {
		s.mu.Unlock()
		return nil
	}
	doc := offsetsDoc{Version: offsetsVersion, Group: s.group, ClientID: s.clientID,
		Offsets: make([]queueOffset, 0, len(s.t.m))}
	for queue, off := range s.t.m {
		doc.Offsets = append(doc.Offsets, queueOffset{queue.Topic, queue.BrokerName, queue.QueueID, off})
	}
	dirty := s.t.dirty
	s.t.dirty = map[mq.MessageQueue]struct{}{}
	s.mu.Unlock()
	slices.SortFunc(doc.Offsets, func(a, b queueOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
	})
	data, err := json.MarshalIndent(doc, "", "\t") // plain strings and numbers: no error
	if err == nil {
		err = s.writeLocked(append(data, '\n'))
	}
	if err != nil {
		s.mu.Lock()
		for queue := range dirty { // the file is still behind: write next time
			s.t.dirty[queue] = struct{}{}
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

// writeLocked replaces offsets.json with data, keeping the good file it replaces as
// offsets.json.bak (tidwall/wal atomicWrite, plus the backup). The caller holds wmu.
func (s *localOffsetStore) writeLocked(data []byte) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("consumer: write offsets: %w", err)
	}
	main := filepath.Join(s.dir, offsetsFile)
	tmp := filepath.Join(s.dir, offsetsTmpFile)
	// 1. The new content, durable under the temp name.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("consumer: write offsets: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("consumer: write offsets: %w", err)
	}
	// 2. The current good file becomes the backup. A corrupt one is not kept: the backup
	// may be the only good copy.
	if s.mainGood {
		if err := os.Rename(main, filepath.Join(s.dir, offsetsBakFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("consumer: write offsets: %w", err)
		}
	}
	// 3. The new file takes its place, and the directory entries are made durable.
	if err := os.Rename(tmp, main); err != nil {
		s.mainGood = false // it may have become the backup
		return fmt.Errorf("consumer: write offsets: %w", err)
	}
	s.mainGood = true
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("consumer: write offsets: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Remove forgets queue's offset; the next Persist drops it from the file.
func (s *localOffsetStore) Remove(queue mq.MessageQueue) {
	s.mu.Lock()
	if _, ok := s.t.m[queue]; ok {
		s.t.remove(queue)
		s.t.dirty[queue] = struct{}{} // the file changes even though queue is gone
	}
	s.mu.Unlock()
}
