package consumer

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
)

// openOffsetStoreBroker opens a broker in a temp dir with topic "T" of 4 queues.
func openOffsetStoreBroker(t *testing.T) *edge.Broker {
	t.Helper()
	b, err := edge.Open(t.TempDir(), &edge.Options{
		Store:          &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, MetaNoSync: true},
		MaxMessageSize: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	return b
}

// countingBroker counts CommitOffset calls and can make them fail.
type countingBroker struct {
	*edge.Broker
	mu      sync.Mutex
	commits int
	fail    error
}

func (c *countingBroker) CommitOffset(ctx context.Context, group string, queue mq.MessageQueue, offset int64) error {
	c.mu.Lock()
	c.commits++
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	return c.Broker.CommitOffset(ctx, group, queue, offset)
}

func (c *countingBroker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

func mustRead(t *testing.T, s offsetStore, queue mq.MessageQueue, rt readType) int64 {
	t.Helper()
	off, err := s.Read(context.Background(), queue, rt)
	if err != nil {
		t.Fatalf("Read(%v, %d): %v", queue, rt, err)
	}
	return off
}

var (
	mq0 = mq.MessageQueue{Topic: "T", QueueID: 0}
	mq1 = mq.MessageQueue{Topic: "T", QueueID: 1}
	mq2 = mq.MessageQueue{Topic: "T", QueueID: 2}
)

// testOffsetStoreMemory checks Update and readFromMemory, which both stores share.
func testOffsetStoreMemory(t *testing.T, s offsetStore) {
	t.Helper()
	steps := []struct {
		name         string
		offset       int64
		increaseOnly bool
		want         int64
	}{
		{"first", 5, false, 5},
		{"increase only forward", 9, true, 9},
		{"increase only backward is ignored", 3, true, 9},
		{"plain update moves back", 3, false, 3},
		{"negative is ignored", -1, false, 3},
	}
	if got := mustRead(t, s, mq0, readFromMemory); got != -1 {
		t.Fatalf("unknown queue: got %d, want -1", got)
	}
	for _, st := range steps {
		s.Update(mq0, st.offset, st.increaseOnly)
		if got := mustRead(t, s, mq0, readFromMemory); got != st.want {
			t.Fatalf("%s: got %d, want %d", st.name, got, st.want)
		}
	}
	if got := mustRead(t, s, mq1, readFromMemory); got != -1 {
		t.Fatalf("other queue: got %d, want -1", got)
	}
	if _, err := s.Read(context.Background(), mq0, readType(42)); err == nil {
		t.Fatal("unknown read type: no error")
	}
}

func TestRemoteOffsetStoreUpdateReadMemory(t *testing.T) {
	testOffsetStoreMemory(t, newRemoteOffsetStore(openOffsetStoreBroker(t), "G"))
}

func TestRemoteOffsetStorePersistThenFreshStoreReads(t *testing.T) {
	b := openOffsetStoreBroker(t)
	s := newRemoteOffsetStore(b, "G")
	s.Update(mq0, 7, true)
	s.Update(mq1, 11, true)
	if err := s.Persist(context.Background(), []mq.MessageQueue{mq0, mq2}); err != nil {
		t.Fatal(err)
	}
	if off, err := b.QueryOffset(context.Background(), "G", mq.MessageQueue{Topic: "T", QueueID: 0}); err != nil || off != 7 {
		t.Fatalf("broker queue 0: got %d, %v, want 7", off, err)
	}
	if _, err := b.QueryOffset(context.Background(), "G", mq.MessageQueue{Topic: "T", QueueID: 1}); !errors.Is(err, mq.ErrOffsetNotFound) {
		t.Fatalf("queue 1 not in mqs was committed: %v", err)
	}

	fresh := newRemoteOffsetStore(b, "G")
	if got := mustRead(t, fresh, mq0, readFromMemory); got != -1 {
		t.Fatalf("fresh store memory: got %d, want -1", got)
	}
	if got := mustRead(t, fresh, mq0, readFromStore); got != 7 {
		t.Fatalf("readFromStore: got %d, want 7", got)
	}
	if got := mustRead(t, fresh, mq0, readFromMemory); got != 7 {
		t.Fatalf("memory after readFromStore: got %d, want 7", got)
	}
	if err := b.CommitOffset(context.Background(), "G", mq.MessageQueue{Topic: "T", QueueID: 2}, 13); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, fresh, mq2, readMemoryThenStore); got != 13 {
		t.Fatalf("readMemoryThenStore: got %d, want 13", got)
	}
	// What a readFromStore put in memory is the broker's already: no commit needed.
	cb := &countingBroker{Broker: b}
	s2 := newRemoteOffsetStore(cb, "G")
	mustRead(t, s2, mq0, readFromStore)
	if err := s2.Persist(context.Background(), []mq.MessageQueue{mq0}); err != nil || cb.count() != 0 {
		t.Fatalf("persist after readFromStore: %d commits, %v", cb.count(), err)
	}
}

func TestRemoteOffsetStoreNotFoundAndErrors(t *testing.T) {
	b := openOffsetStoreBroker(t)
	s := newRemoteOffsetStore(b, "G")
	for _, rt := range []readType{readFromStore, readMemoryThenStore} {
		if got := mustRead(t, s, mq1, rt); got != -1 {
			t.Fatalf("read type %d, no offset: got %d, want -1", rt, got)
		}
	}
	_, err := s.Read(context.Background(), mq.MessageQueue{Topic: "Missing", QueueID: 0}, readFromStore)
	if !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("unknown topic: got %v, want ErrTopicNotExist", err)
	}
}

func TestRemoteOffsetStorePersistsOnlyChanges(t *testing.T) {
	cb := &countingBroker{Broker: openOffsetStoreBroker(t)}
	s := newRemoteOffsetStore(cb, "G")
	all := []mq.MessageQueue{mq0, mq1, mq2}
	s.Update(mq0, 1, true)
	s.Update(mq1, 2, true)
	if err := s.Persist(context.Background(), all); err != nil || cb.count() != 2 {
		t.Fatalf("first persist: %d commits, %v; want 2", cb.count(), err)
	}
	if err := s.Persist(context.Background(), all); err != nil || cb.count() != 2 {
		t.Fatalf("unchanged persist: %d commits, %v; want still 2", cb.count(), err)
	}
	s.Update(mq1, 2, true) // same value: no change
	s.Update(mq0, 3, true)
	if err := s.Persist(context.Background(), all); err != nil || cb.count() != 3 {
		t.Fatalf("one change: %d commits, %v; want 3", cb.count(), err)
	}

	// A failed commit is reported and retried by the next Persist.
	boom := errors.New("boom")
	cb.mu.Lock()
	cb.fail = boom
	cb.mu.Unlock()
	s.Update(mq2, 8, true)
	if err := s.Persist(context.Background(), all); !errors.Is(err, boom) {
		t.Fatalf("failed commit: got %v, want boom", err)
	}
	cb.mu.Lock()
	cb.fail = nil
	cb.mu.Unlock()
	if err := s.Persist(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	if off, err := cb.QueryOffset(context.Background(), "G", mq.MessageQueue{Topic: "T", QueueID: 2}); err != nil || off != 8 {
		t.Fatalf("retried commit: got %d, %v, want 8", off, err)
	}
}

func TestRemoteOffsetStoreRemove(t *testing.T) {
	cb := &countingBroker{Broker: openOffsetStoreBroker(t)}
	s := newRemoteOffsetStore(cb, "G")
	s.Update(mq0, 4, true)
	s.Remove(mq0)
	if got := mustRead(t, s, mq0, readFromMemory); got != -1 {
		t.Fatalf("after Remove: got %d, want -1", got)
	}
	if err := s.Persist(context.Background(), []mq.MessageQueue{mq0}); err != nil || cb.count() != 0 {
		t.Fatalf("persist of a removed queue: %d commits, %v", cb.count(), err)
	}
}

func TestRemoteOffsetStoreConcurrent(t *testing.T) {
	b := openOffsetStoreBroker(t)
	s := newRemoteOffsetStore(b, "G")
	mqs := []mq.MessageQueue{mq0, mq1, mq2}
	const workers, n = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				queue := mqs[(w+i)%len(mqs)]
				s.Update(queue, int64(i), true)
				if _, err := s.Read(context.Background(), queue, readMemoryThenStore); err != nil {
					t.Error(err)
				}
				if i%20 == 0 {
					if err := s.Persist(context.Background(), mqs); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := s.Persist(context.Background(), mqs); err != nil {
		t.Fatal(err)
	}
	for _, queue := range mqs {
		if off, err := b.QueryOffset(context.Background(), "G", mq.MessageQueue{Topic: queue.Topic, QueueID: queue.QueueID}); err != nil || off != n-1 {
			t.Fatalf("%v: got %d, %v, want %d", queue, off, err, n-1)
		}
	}
}

func newTestLocalStore(t *testing.T, dir string) *localOffsetStore {
	t.Helper()
	s, err := newLocalOffsetStore(dir, "G", "host@42#0")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t *testing.T, s *localOffsetStore) {
	t.Helper()
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
}

func mustPersist(t *testing.T, s *localOffsetStore) {
	t.Helper()
	if err := s.Persist(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestLocalOffsetStoreUpdateReadMemory(t *testing.T) {
	testOffsetStoreMemory(t, newTestLocalStore(t, t.TempDir()))
}

func TestLocalOffsetStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newTestLocalStore(t, dir)
	mustLoad(t, s) // no file yet: empty
	s.Update(mq0, 10, true)
	s.Update(mq1, 20, true)
	s.Update(mq.MessageQueue{Topic: "U", QueueID: 3}, 30, true)
	mustPersist(t, s)
	if _, err := os.Stat(filepath.Join(dir, "host@42#0", "G", "offsets.json")); err != nil {
		t.Fatalf("offsets file: %v", err)
	}

	n := newTestLocalStore(t, dir)
	// readFromStore reads the file even before Load.
	if got := mustRead(t, n, mq1, readFromStore); got != 20 {
		t.Fatalf("readFromStore: got %d, want 20", got)
	}
	if got := mustRead(t, n, mq1, readFromMemory); got != 20 {
		t.Fatalf("memory after readFromStore: got %d, want 20", got)
	}
	if got := mustRead(t, n, mq2, readMemoryThenStore); got != -1 {
		t.Fatalf("queue not in file: got %d, want -1", got)
	}
	mustLoad(t, n)
	want := map[mq.MessageQueue]int64{mq0: 10, mq1: 20, {Topic: "U", QueueID: 3}: 30, mq2: -1}
	for queue, w := range want {
		if got := mustRead(t, n, queue, readFromMemory); got != w {
			t.Fatalf("%v after Load: got %d, want %d", queue, got, w)
		}
	}

	// Remove drops the queue from the file on the next Persist.
	n.Remove(mq0)
	mustPersist(t, n)
	m := newTestLocalStore(t, dir)
	mustLoad(t, m)
	if got := mustRead(t, m, mq0, readFromMemory); got != -1 {
		t.Fatalf("removed queue: got %d, want -1", got)
	}
}

func TestLocalOffsetStorePersistSkipsUnchanged(t *testing.T) {
	dir := t.TempDir()
	s := newTestLocalStore(t, dir)
	mustPersist(t, s)
	if _, err := os.Stat(filepath.Join(dir, "host@42#0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty persist touched the disk: %v", err)
	}
	s.Update(mq0, 1, true)
	mustPersist(t, s)
	file := filepath.Join(dir, "host@42#0", "G", "offsets.json")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	s.Update(mq0, 1, true) // same value
	mustPersist(t, s)
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unchanged offsets were rewritten: %v", err)
	}
	s.Update(mq0, 2, true)
	mustPersist(t, s)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("changed offsets not written: %v", err)
	}
}

func TestLocalOffsetStoreCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s := newTestLocalStore(t, dir)
	s.Update(mq0, 5, true)
	mustPersist(t, s)
	// A crash after the temp file was (partly) written, before it was renamed.
	gdir := filepath.Join(dir, "host@42#0", "G")
	tmp := filepath.Join(gdir, "offsets.json.tmp")
	for name, data := range map[string]string{
		"partial":  `{"version":1,"offsets":[{"topic":"T","queueId":0,"off`,
		"complete": `{"version":1,"offsets":[{"topic":"T","queueId":0,"offset":99}]}`,
	} {
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		n := newTestLocalStore(t, dir)
		mustLoad(t, n)
		if got := mustRead(t, n, mq0, readFromMemory); got != 5 {
			t.Fatalf("with a %s leftover temp file: got %d, want 5", name, got)
		}
		if got := mustRead(t, n, mq0, readFromStore); got != 5 {
			t.Fatalf("readFromStore with a %s leftover temp file: got %d, want 5", name, got)
		}
	}
	n := newTestLocalStore(t, dir)
	mustLoad(t, n)
	// The next write goes through despite the leftover.
	n.Update(mq0, 6, true)
	mustPersist(t, n)
	m := newTestLocalStore(t, dir)
	mustLoad(t, m)
	if got := mustRead(t, m, mq0, readFromMemory); got != 6 {
		t.Fatalf("after rewrite: got %d, want 6", got)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left after a write: %v", err)
	}
}

func TestLocalOffsetStoreCrashBetweenRenames(t *testing.T) {
	dir := t.TempDir()
	s := newTestLocalStore(t, dir)
	s.Update(mq0, 5, true)
	mustPersist(t, s)
	// offsets.json became the backup; the new file never took its place.
	gdir := filepath.Join(dir, "host@42#0", "G")
	if err := os.Rename(filepath.Join(gdir, "offsets.json"), filepath.Join(gdir, "offsets.json.bak")); err != nil {
		t.Fatal(err)
	}
	n := newTestLocalStore(t, dir)
	mustLoad(t, n)
	if got := mustRead(t, n, mq0, readFromMemory); got != 5 {
		t.Fatalf("main missing: got %d, want 5 from the backup", got)
	}
}

func TestLocalOffsetStoreCorruptFile(t *testing.T) {
	dir := t.TempDir()
	gdir := filepath.Join(dir, "host@42#0", "G")
	main, bak := filepath.Join(gdir, "offsets.json"), filepath.Join(gdir, "offsets.json.bak")
	s := newTestLocalStore(t, dir)
	s.Update(mq0, 1, true)
	mustPersist(t, s)

	// No backup yet: a corrupt file is an error.
	good, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newTestLocalStore(t, dir).Load(); !errors.Is(err, ErrCorruptOffsets) {
		t.Fatalf("corrupt, no backup: got %v, want ErrCorruptOffsets", err)
	}
	if _, err := newTestLocalStore(t, dir).Read(context.Background(), mq0, readFromStore); !errors.Is(err, ErrCorruptOffsets) {
		t.Fatalf("readFromStore of a corrupt file: got %v, want ErrCorruptOffsets", err)
	}
	if err := os.WriteFile(main, good, 0o644); err != nil {
		t.Fatal(err)
	}

	// Two writes: the first file is kept as the backup.
	s = newTestLocalStore(t, dir)
	mustLoad(t, s)
	s.Update(mq0, 2, true)
	mustPersist(t, s)
	for name, data := range map[string]string{
		"truncated":   `{"version":1,"offsets":[`,
		"not json":    "\x00\x00garbage",
		"bad version": `{"version":7,"offsets":[]}`,
		"negative":    `{"version":1,"offsets":[{"topic":"T","queueId":0,"offset":-5}]}`,
		"duplicate":   `{"version":1,"offsets":[{"topic":"T","queueId":0,"offset":1},{"topic":"T","queueId":0,"offset":2}]}`,
	} {
		if err := os.WriteFile(main, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		n := newTestLocalStore(t, dir)
		if err := n.Load(); err != nil {
			t.Fatalf("%s, good backup: %v", name, err)
		}
		if got := mustRead(t, n, mq0, readFromMemory); got != 1 {
			t.Fatalf("%s: got %d, want 1 from the backup", name, got)
		}
	}

	// Writing after a fallback must not turn the corrupt file into the backup.
	n := newTestLocalStore(t, dir)
	mustLoad(t, n)
	n.Update(mq0, 3, true)
	mustPersist(t, n)
	if bm, err := readOffsetsFile(bak); err != nil || bm[mq0] != 1 {
		t.Fatalf("backup after writing over a corrupt file: %v, %v; want offset 1", bm, err)
	}

	// Both corrupt: an error.
	for _, f := range []string{main, bak} {
		if err := os.WriteFile(f, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := newTestLocalStore(t, dir).Load(); !errors.Is(err, ErrCorruptOffsets) {
		t.Fatalf("both corrupt: got %v, want ErrCorruptOffsets", err)
	}
}

func TestLocalOffsetStorePathSanitizing(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"host@1234#0", "host@1234#0"},
		{"a/b", "a%2Fb"},
		{"a%2Fb", "a%252Fb"},
		{`a\b`, "a%5Cb"},
		{"..", "%2E%2E"},
		{".", "%2E"},
		{"../../etc", "..%2F..%2Fetc"},
		{"x\x00y", "x%00y"},
		{"a..b", "a..b"},
	} {
		if got := escapePathComponent(c.in); got != c.want {
			t.Errorf("escapePathComponent(%q): got %q, want %q", c.in, got, c.want)
		}
	}

	root := t.TempDir()
	seen := map[string]string{}
	for _, ids := range [][2]string{{"../../x", ".."}, {"a/b", "G"}, {"a%2Fb", "G"}, {"..", "."}, {"/abs", "g/../h"}} {
		s, err := newLocalOffsetStore(root, ids[1], ids[0])
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, s.dir)
		parts := strings.Split(rel, string(filepath.Separator))
		if err != nil || len(parts) != 2 || slices.Contains(parts, "..") || slices.Contains(parts, ".") {
			t.Fatalf("client %q group %q: dir %q escapes or nests under %q", ids[0], ids[1], s.dir, root)
		}
		if other, dup := seen[s.dir]; dup {
			t.Fatalf("client %q group %q shares dir %q with %s", ids[0], ids[1], s.dir, other)
		}
		seen[s.dir] = fmt.Sprint(ids)
		s.Update(mq0, 1, true)
		mustPersist(t, s)
		if _, err := os.Stat(filepath.Join(s.dir, "offsets.json")); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range [][3]string{{"", "G", "c"}, {root, "", "c"}, {root, "G", ""}} {
		if _, err := newLocalOffsetStore(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("newLocalOffsetStore%q: no error", bad)
		}
	}
}

func TestLocalOffsetStoreConcurrent(t *testing.T) {
	dir := t.TempDir()
	s := newTestLocalStore(t, dir)
	mustLoad(t, s)
	mqs := []mq.MessageQueue{mq0, mq1, mq2}
	const workers, n = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				queue := mqs[(w+i)%len(mqs)]
				s.Update(queue, int64(i), true)
				if _, err := s.Read(context.Background(), queue, readMemoryThenStore); err != nil {
					t.Error(err)
				}
				switch i % 50 {
				case 0:
					if err := s.Persist(context.Background(), mqs); err != nil {
						t.Error(err)
					}
				case 25:
					if _, err := s.Read(context.Background(), queue, readFromStore); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	// readFromStore may have set an older file value; the final updates win again.
	for _, queue := range mqs {
		s.Update(queue, n-1, true)
	}
	mustPersist(t, s)
	r := newTestLocalStore(t, dir)
	mustLoad(t, r)
	for _, queue := range mqs {
		if got := mustRead(t, r, queue, readFromMemory); got != n-1 {
			t.Fatalf("%v: got %d, want %d", queue, got, n-1)
		}
	}
}
