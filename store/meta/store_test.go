package meta

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testOpen opens a store in dir without fsync and closes it at cleanup.
func testOpen(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// must fails the test if err is not nil.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOffsets(t *testing.T) {
	s := testOpen(t, t.TempDir())
	// Names chosen so that naive concatenation would be ambiguous.
	in := []Offset{
		{"ab", "c", 0, 10},
		{"a", "bc", 0, 20},
		{"a", "b", 1, 30},
		{"a", "b", 0, 40},
		{"a", "b", 256, 50},
		{"a\x00", "b", 0, 60},
		{"g", "t", 1<<31 - 1, -1},
	}
	must(t, s.SetOffsets(in))
	for _, o := range in {
		got, ok, err := s.Offset(o.Group, o.Topic, o.QueueID)
		if err != nil || !ok || got != o.Offset {
			t.Errorf("Offset(%q, %q, %d) = %d, %v, %v; want %d, true, nil", o.Group, o.Topic, o.QueueID, got, ok, err, o.Offset)
		}
	}
	if got, ok, err := s.Offset("a", "b", 2); got != 0 || ok || err != nil {
		t.Errorf("Offset of missing queue = %d, %v, %v; want 0, false, nil", got, ok, err)
	}

	// Offsets returns key order: group by length then bytes, topic likewise, queue.
	want := []Offset{
		{"a", "b", 0, 40},
		{"a", "b", 1, 30},
		{"a", "b", 256, 50},
		{"a", "bc", 0, 20},
		{"g", "t", 1<<31 - 1, -1},
		{"a\x00", "b", 0, 60},
		{"ab", "c", 0, 10},
	}
	got, err := s.Offsets()
	must(t, err)
	if !slices.Equal(got, want) {
		t.Errorf("Offsets:\ngot  %v\nwant %v", got, want)
	}

	// Overwrite; the last of repeated keys wins.
	must(t, s.SetOffsets([]Offset{{"a", "b", 0, 41}, {"a", "b", 0, 42}}))
	if got, _, _ := s.Offset("a", "b", 0); got != 42 {
		t.Errorf("Offset after overwrite = %d, want 42", got)
	}
}

func TestDeleteOffsets(t *testing.T) {
	all := []Offset{
		{"a", "t", 0, 1}, {"a", "t", 1, 2}, {"a", "u", 0, 3},
		{"ab", "t", 0, 4}, {"b", "t", 0, 5}, {"b", "tt", 0, 6},
	}
	tests := []struct {
		group, topic string
		want         []Offset // what remains
	}{
		{"a", "t", []Offset{{"a", "u", 0, 3}, {"b", "t", 0, 5}, {"b", "tt", 0, 6}, {"ab", "t", 0, 4}}},
		{"a", "", []Offset{{"b", "t", 0, 5}, {"b", "tt", 0, 6}, {"ab", "t", 0, 4}}},
		{"b", "t", []Offset{{"a", "t", 0, 1}, {"a", "t", 1, 2}, {"a", "u", 0, 3}, {"b", "tt", 0, 6}, {"ab", "t", 0, 4}}},
		{"missing", "", []Offset{{"a", "t", 0, 1}, {"a", "t", 1, 2}, {"a", "u", 0, 3}, {"b", "t", 0, 5}, {"b", "tt", 0, 6}, {"ab", "t", 0, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.group+"/"+tt.topic, func(t *testing.T) {
			s := testOpen(t, t.TempDir())
			must(t, s.SetOffsets(all))
			must(t, s.DeleteOffsets(tt.group, tt.topic))
			got, err := s.Offsets()
			must(t, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("after DeleteOffsets(%q, %q):\ngot  %v\nwant %v", tt.group, tt.topic, got, tt.want)
			}
		})
	}
}

func TestSetOffsetsMany(t *testing.T) {
	s := testOpen(t, t.TempDir())
	var in []Offset
	for g := range 10 {
		for q := range 1000 {
			in = append(in, Offset{fmt.Sprintf("group-%d", g), "topic", int32(q), int64(g*1000 + q)})
		}
	}
	must(t, s.SetOffsets(in))
	got, err := s.Offsets()
	must(t, err)
	if !slices.Equal(got, in) {
		t.Errorf("Offsets returned %d entries, want the %d set in order", len(got), len(in))
	}
}

func TestInvalidKeys(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	tests := []struct {
		name string
		call func(*Store) error
	}{
		{"empty group", func(s *Store) error { return s.SetOffsets([]Offset{{"g", "t", 0, 1}, {"", "t", 0, 1}}) }},
		{"empty topic", func(s *Store) error { return s.SetOffsets([]Offset{{"g", "", 0, 1}}) }},
		{"long group", func(s *Store) error { return s.SetOffsets([]Offset{{long, "t", 0, 1}}) }},
		{"negative queue", func(s *Store) error { return s.SetOffsets([]Offset{{"g", "t", -1, 1}}) }},
		{"offset negative queue", func(s *Store) error { _, _, err := s.Offset("g", "t", -1); return err }},
		{"delete long topic", func(s *Store) error { return s.DeleteOffsets("g", long) }},
		{"delete empty group", func(s *Store) error { return s.DeleteOffsets("", "t") }},
		{"empty topic name", func(s *Store) error { return s.PutTopic(Topic{}) }},
		{"long topic name", func(s *Store) error { _, _, err := s.Topic(long); return err }},
		{"empty group name", func(s *Store) error { return s.PutGroup(Group{}) }},
		{"negative delay level", func(s *Store) error { return s.SetDelayProgress(map[int32]int64{1: 1, -1: 1}) }},
		{"uplink empty name", func(s *Store) error { return s.PutUplinkCursors([]UplinkCursor{{Topic: "t"}}) }},
		{"uplink negative queue", func(s *Store) error { return s.PutUplinkCursors([]UplinkCursor{{Name: "u", Topic: "t", QueueID: -2}}) }},
		{"uplink list empty name", func(s *Store) error { _, err := s.UplinkCursors(""); return err }},
	}
	s := testOpen(t, t.TempDir())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(s); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("got %v, want ErrInvalidKey", err)
			}
		})
	}
	// Nothing of a rejected batch was stored.
	if offs, err := s.Offsets(); err != nil || len(offs) != 0 {
		t.Errorf("Offsets after rejected writes = %v, %v; want none", offs, err)
	}
	if p, err := s.DelayProgress(); err != nil || len(p) != 0 {
		t.Errorf("DelayProgress after rejected writes = %v, %v; want none", p, err)
	}
}

func TestTopics(t *testing.T) {
	s := testOpen(t, t.TempDir())
	a := Topic{Name: "a", ReadQueues: 4, WriteQueues: 4, Perm: 6, Order: true, SysFlag: 1, Created: 1700000000123}
	b := Topic{Name: "b", ReadQueues: 8, WriteQueues: 2, Perm: 2, Created: -1}
	must(t, s.PutTopic(b))
	must(t, s.PutTopic(a))
	got, ok, err := s.Topic("a")
	if err != nil || !ok || got != a {
		t.Errorf("Topic(a) = %+v, %v, %v; want %+v, true, nil", got, ok, err, a)
	}
	if got, ok, err := s.Topic("c"); err != nil || ok || got != (Topic{}) {
		t.Errorf("Topic(c) = %+v, %v, %v; want zero, false, nil", got, ok, err)
	}
	all, err := s.Topics()
	must(t, err)
	if want := []Topic{a, b}; !slices.Equal(all, want) {
		t.Errorf("Topics = %+v, want %+v", all, want)
	}
	a.ReadQueues = 16
	must(t, s.PutTopic(a))
	if got, _, _ := s.Topic("a"); got != a {
		t.Errorf("Topic(a) after overwrite = %+v, want %+v", got, a)
	}
	must(t, s.DeleteTopic("a"))
	must(t, s.DeleteTopic("a"))
	all, err = s.Topics()
	must(t, err)
	if want := []Topic{b}; !slices.Equal(all, want) {
		t.Errorf("Topics after delete = %+v, want %+v", all, want)
	}
}

func TestGroups(t *testing.T) {
	s := testOpen(t, t.TempDir())
	a := Group{Name: "a", ConsumeEnable: true, BroadcastEnable: true, RetryQueues: 1, MaxReconsumeTimes: 16, ConsumeFromMinEnable: true}
	b := Group{Name: "b", RetryQueues: 2, MaxReconsumeTimes: -1}
	must(t, s.PutGroup(b))
	must(t, s.PutGroup(a))
	got, ok, err := s.Group("a")
	if err != nil || !ok || got != a {
		t.Errorf("Group(a) = %+v, %v, %v; want %+v, true, nil", got, ok, err, a)
	}
	if got, ok, err := s.Group("c"); err != nil || ok || got != (Group{}) {
		t.Errorf("Group(c) = %+v, %v, %v; want zero, false, nil", got, ok, err)
	}
	all, err := s.Groups()
	must(t, err)
	if want := []Group{a, b}; !slices.Equal(all, want) {
		t.Errorf("Groups = %+v, want %+v", all, want)
	}
	must(t, s.DeleteGroup("b"))
	all, err = s.Groups()
	must(t, err)
	if want := []Group{a}; !slices.Equal(all, want) {
		t.Errorf("Groups after delete = %+v, want %+v", all, want)
	}
}

func TestDelayProgress(t *testing.T) {
	s := testOpen(t, t.TempDir())
	got, err := s.DelayProgress()
	if err != nil || len(got) != 0 {
		t.Fatalf("DelayProgress of new store = %v, %v; want empty", got, err)
	}
	must(t, s.SetDelayProgress(map[int32]int64{1: 10, 2: 20, 18: 180}))
	must(t, s.SetDelayProgress(map[int32]int64{2: 21, 0: -5}))
	got, err = s.DelayProgress()
	must(t, err)
	want := map[int32]int64{0: -5, 1: 10, 2: 21, 18: 180}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DelayProgress = %v, want %v", got, want)
	}
}

func TestUplinkCursors(t *testing.T) {
	s := testOpen(t, t.TempDir())
	up := []UplinkCursor{
		{Name: "up", Topic: "tt", QueueID: 0, Offset: 5, Updated: 1},
		{Name: "up", Topic: "t", QueueID: 1, Offset: 7, Updated: 2},
		{Name: "up", Topic: "t", QueueID: 0, Offset: 6, Updated: 3},
		{Name: "up2", Topic: "t", QueueID: 0, Offset: 99, Updated: 4},
		{Name: "u", Topic: "pt", QueueID: 0, Offset: 98, Updated: 5},
	}
	must(t, s.PutUplinkCursors(up))
	must(t, s.PutUplinkCursors([]UplinkCursor{{Name: "up", Topic: "t", QueueID: 1, Offset: 8, Updated: 6}}))
	tests := []struct {
		name string
		want []UplinkCursor
	}{
		{"up", []UplinkCursor{
			{Name: "up", Topic: "t", QueueID: 0, Offset: 6, Updated: 3},
			{Name: "up", Topic: "t", QueueID: 1, Offset: 8, Updated: 6},
			{Name: "up", Topic: "tt", QueueID: 0, Offset: 5, Updated: 1},
		}},
		{"up2", []UplinkCursor{{Name: "up2", Topic: "t", QueueID: 0, Offset: 99, Updated: 4}}},
		{"u", []UplinkCursor{{Name: "u", Topic: "pt", QueueID: 0, Offset: 98, Updated: 5}}},
		{"none", nil},
	}
	for _, tt := range tests {
		got, err := s.UplinkCursors(tt.name)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("UplinkCursors(%q) = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestSettings(t *testing.T) {
	s := testOpen(t, t.TempDir())
	if got, ok, err := s.Settings(); err != nil || ok || got != (Settings{}) {
		t.Errorf("Settings of new store = %+v, %v, %v; want zero, false, nil", got, ok, err)
	}
	want := Settings{SchemaVersion: 1, FlushPolicy: "async", SegmentSize: 1 << 30}
	must(t, s.PutSettings(want))
	if got, ok, err := s.Settings(); err != nil || !ok || got != want {
		t.Errorf("Settings = %+v, %v, %v; want %+v, true, nil", got, ok, err, want)
	}
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	offs := []Offset{{"g", "t", 0, 1}, {"g", "t", 1, 2}}
	topic := Topic{Name: "t", ReadQueues: 2, WriteQueues: 2, Perm: 6}
	group := Group{Name: "g", ConsumeEnable: true, MaxReconsumeTimes: 16}
	cur := UplinkCursor{Name: "cloud", Topic: "t", QueueID: 1, Offset: 3, Updated: 4}
	st := Settings{SchemaVersion: 2, FlushPolicy: "sync", SegmentSize: 64 << 20}

	s, err := Open(dir, nil) // default options: fsync on
	must(t, err)
	must(t, s.SetOffsets(offs))
	must(t, s.PutTopic(topic))
	must(t, s.PutGroup(group))
	must(t, s.SetDelayProgress(map[int32]int64{3: 33}))
	must(t, s.PutUplinkCursors([]UplinkCursor{cur}))
	must(t, s.PutSettings(st))
	must(t, s.Close())

	s = testOpen(t, dir)
	if got, err := s.Offsets(); err != nil || !slices.Equal(got, offs) {
		t.Errorf("Offsets = %v, %v; want %v", got, err, offs)
	}
	if got, _, err := s.Topic("t"); err != nil || got != topic {
		t.Errorf("Topic = %+v, %v; want %+v", got, err, topic)
	}
	if got, _, err := s.Group("g"); err != nil || got != group {
		t.Errorf("Group = %+v, %v; want %+v", got, err, group)
	}
	if got, err := s.DelayProgress(); err != nil || len(got) != 1 || got[3] != 33 {
		t.Errorf("DelayProgress = %v, %v; want map[3:33]", got, err)
	}
	if got, err := s.UplinkCursors("cloud"); err != nil || !slices.Equal(got, []UplinkCursor{cur}) {
		t.Errorf("UplinkCursors = %+v, %v; want [%+v]", got, err, cur)
	}
	if got, _, err := s.Settings(); err != nil || got != st {
		t.Errorf("Settings = %+v, %v; want %+v", got, err, st)
	}
}

// TestCorruptEntries writes bad entries straight into meta.db and checks
// that reading them after a reopen returns a CorruptError, not a panic.
func TestCorruptEntries(t *testing.T) {
	garbage := []byte{0xde, 0xad, 0xbe, 0xef}
	topicB := encode(Topic{Name: "b"})
	cursorB := encode(UplinkCursor{Name: "up", Topic: "t", QueueID: 1})
	tests := []struct {
		name   string
		bucket string
		key    []byte
		value  []byte
		read   func(*Store) error
	}{
		{"offset value", bucketOffsets, queueKey("g", "t", 0), []byte{1, 2, 3}, func(s *Store) error { _, _, err := s.Offset("g", "t", 0); return err }},
		{"offsets value", bucketOffsets, queueKey("g", "t", 0), []byte{1, 2, 3}, func(s *Store) error { _, err := s.Offsets(); return err }},
		{"offsets key", bucketOffsets, []byte("gt0"), int64Value(1), func(s *Store) error { _, err := s.Offsets(); return err }},
		{"offsets negative queue", bucketOffsets, append(queuePrefix("g", "t"), 0xff, 0, 0, 0), int64Value(1), func(s *Store) error { _, err := s.Offsets(); return err }},
		{"topic value", bucketTopics, []byte("a"), garbage, func(s *Store) error { _, _, err := s.Topic("a"); return err }},
		{"topics value", bucketTopics, []byte("a"), garbage, func(s *Store) error { _, err := s.Topics(); return err }},
		{"topic trailing bytes", bucketTopics, []byte("a"), append(encode(Topic{Name: "a"}), 0), func(s *Store) error { _, _, err := s.Topic("a"); return err }},
		{"topic truncated", bucketTopics, []byte("a"), encode(Topic{Name: "a"})[:10], func(s *Store) error { _, err := s.Topics(); return err }},
		{"topic name mismatch", bucketTopics, []byte("a"), topicB, func(s *Store) error { _, _, err := s.Topic("a"); return err }},
		{"group value", bucketGroups, []byte("g"), garbage, func(s *Store) error { _, _, err := s.Group("g"); return err }},
		{"groups value", bucketGroups, []byte("g"), []byte{0x81, 0xa4, 'n', 'a', 'm', 'e', 0x05}, func(s *Store) error { _, err := s.Groups(); return err }},
		{"delay key", bucketDelay, []byte{1}, int64Value(1), func(s *Store) error { _, err := s.DelayProgress(); return err }},
		{"delay value", bucketDelay, levelKey(1), garbage, func(s *Store) error { _, err := s.DelayProgress(); return err }},
		{"uplink value", bucketUplink, queueKey("up", "t", 0), garbage, func(s *Store) error { _, err := s.UplinkCursors("up"); return err }},
		{"uplink key mismatch", bucketUplink, queueKey("up", "t", 0), cursorB, func(s *Store) error { _, err := s.UplinkCursors("up"); return err }},
		{"uplink bad key", bucketUplink, append(queuePrefix("up", ""), 0), cursorB, func(s *Store) error { _, err := s.UplinkCursors("up"); return err }},
		{"settings value", bucketSettings, settingsKey, garbage, func(s *Store) error { _, _, err := s.Settings(); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, testOpen(t, dir).Close())
			db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
			must(t, err)
			must(t, db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(tt.bucket)).Put(tt.key, tt.value)
			}))
			must(t, db.Close())

			s := testOpen(t, dir)
			err = tt.read(s)
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("got %v, want a CorruptError", err)
			}
			if ce.Bucket != tt.bucket || string(ce.Key) != string(tt.key) || ce.Err == nil {
				t.Errorf("CorruptError = %+v, want bucket %s key %q and a cause", ce, tt.bucket, tt.key)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Run("missing dir", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "missing"), nil)
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("got %v, want os.ErrNotExist", err)
		}
	})
	t.Run("not a bbolt file", func(t *testing.T) {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, FileName), []byte(strings.Repeat("not bbolt ", 1000)), 0o600))
		if s, err := Open(dir, nil); err == nil {
			s.Close()
			t.Error("Open of a garbage file succeeded")
		}
	})
	t.Run("locked", func(t *testing.T) {
		dir := t.TempDir()
		testOpen(t, dir)
		start := time.Now()
		s, err := Open(dir, &Options{Timeout: -1})
		if err == nil {
			s.Close()
			t.Fatal("second Open of the same file succeeded")
		}
		if !errors.Is(err, bolt.ErrTimeout) {
			t.Errorf("got %v, want bolt.ErrTimeout", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Open with negative Timeout took %v", d)
		}
	})
}

func TestClosed(t *testing.T) {
	s := testOpen(t, t.TempDir())
	must(t, s.Close())
	calls := map[string]func() error{
		"Close":            s.Close,
		"SetOffsets":       func() error { return s.SetOffsets([]Offset{{"g", "t", 0, 1}}) },
		"Offset":           func() error { _, _, err := s.Offset("g", "t", 0); return err },
		"Offsets":          func() error { _, err := s.Offsets(); return err },
		"DeleteOffsets":    func() error { return s.DeleteOffsets("g", "") },
		"PutTopic":         func() error { return s.PutTopic(Topic{Name: "t"}) },
		"Topics":           func() error { _, err := s.Topics(); return err },
		"Group":            func() error { _, _, err := s.Group("g"); return err },
		"SetDelayProgress": func() error { return s.SetDelayProgress(map[int32]int64{1: 1}) },
		"UplinkCursors":    func() error { _, err := s.UplinkCursors("u"); return err },
		"Settings":         func() error { _, _, err := s.Settings(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
		}
	}
}

func TestConcurrentOffsets(t *testing.T) {
	s := testOpen(t, t.TempDir())
	const (
		writers = 8
		rounds  = 50
		queues  = 16
	)
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		group := fmt.Sprintf("g%d", w)
		wg.Go(func() {
			for r := range rounds {
				batch := make([]Offset, queues)
				for q := range batch {
					batch[q] = Offset{group, "t", int32(q), int64(r)}
				}
				if err := s.SetOffsets(batch); err != nil {
					errs <- err
					return
				}
				// Our own writes are visible; offsets never go back.
				for q := range queues {
					off, ok, err := s.Offset(group, "t", int32(q))
					if err != nil || !ok || off != int64(r) {
						errs <- fmt.Errorf("Offset(%s, t, %d) = %d, %v, %v; want %d", group, q, off, ok, err, r)
						return
					}
				}
			}
		})
		wg.Go(func() {
			for range rounds {
				if _, err := s.Offsets(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s.Offsets()
	must(t, err)
	if len(got) != writers*queues {
		t.Fatalf("Offsets returned %d entries, want %d", len(got), writers*queues)
	}
	for _, o := range got {
		if o.Offset != rounds-1 {
			t.Errorf("final %v, want offset %d", o, rounds-1)
		}
	}
}
