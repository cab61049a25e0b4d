package meta

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/store/internal/guard"
)

// hostileCalls calls every exported method of s once with hostile arguments. want says
// what each must return: ErrInvalidKey, or nil for an error or none (names that are odd but
// valid, empty batches, reads).
func hostileCalls(s *Store) []struct {
	name string
	f    func() error
	want error
} {
	long := strings.Repeat("n", MaxNameLen+1)
	odd := "\x00/..\xff" // any bytes make a name
	return []struct {
		name string
		f    func() error
		want error
	}{
		{"PutSettings(zero)", func() error { return s.PutSettings(Settings{SegmentSize: -1}) }, nil},
		{"Settings", func() error { _, _, err := s.Settings(); return err }, nil},
		{"PutTopic(long)", func() error { return s.PutTopic(Topic{Name: long, ReadQueues: -1}) }, ErrInvalidKey},
		{"PutTopic(odd)", func() error { return s.PutTopic(Topic{Name: odd, ReadQueues: math.MinInt32}) }, nil},
		{"Topic(empty)", func() error { _, _, err := s.Topic(""); return err }, ErrInvalidKey},
		{"Topic(odd)", func() error { _, _, err := s.Topic(odd); return err }, nil},
		{"Topics", func() error { _, err := s.Topics(); return err }, nil},
		{"DeleteTopic(empty)", func() error { return s.DeleteTopic("") }, ErrInvalidKey},
		{"DeleteTopic(long)", func() error { return s.DeleteTopic(long) }, ErrInvalidKey},
		{"DeleteTopic(missing)", func() error { return s.DeleteTopic("missing") }, nil},
		{"PutGroup(long)", func() error { return s.PutGroup(Group{Name: long}) }, ErrInvalidKey},
		{"Group(long)", func() error { _, _, err := s.Group(long); return err }, ErrInvalidKey},
		{"Groups", func() error { _, err := s.Groups(); return err }, nil},
		{"DeleteGroup(empty)", func() error { return s.DeleteGroup("") }, ErrInvalidKey},
		{"SetOffsets(nil)", func() error { return s.SetOffsets(nil) }, nil},
		{"SetOffsets(MinInt32 queue)", func() error { return s.SetOffsets([]Offset{{"g", "t", math.MinInt32, 0}}) }, ErrInvalidKey},
		{"SetOffsets(negative offset)", func() error { return s.SetOffsets([]Offset{{"g", "t", math.MaxInt32, math.MinInt64}}) }, nil},
		{"Offset(long topic)", func() error { _, _, err := s.Offset("g", long, 0); return err }, ErrInvalidKey},
		{"Offset(empty group)", func() error { _, _, err := s.Offset("", "t", 0); return err }, ErrInvalidKey},
		{"Offsets", func() error { _, err := s.Offsets(); return err }, nil},
		{"DeleteOffsets(all topics)", func() error { return s.DeleteOffsets("g", "") }, nil},
		{"DeleteOffsets(long group)", func() error { return s.DeleteOffsets(long, "t") }, ErrInvalidKey},
		{"SetDelayProgress(nil)", func() error { return s.SetDelayProgress(nil) }, nil},
		{"SetDelayProgress(MinInt32)", func() error { return s.SetDelayProgress(map[int32]int64{math.MinInt32: 1}) }, ErrInvalidKey},
		{"SetDelayProgress(MaxInt32)", func() error { return s.SetDelayProgress(map[int32]int64{math.MaxInt32: math.MinInt64}) }, nil},
		{"DelayProgress", func() error { _, err := s.DelayProgress(); return err }, nil},
		{"PutUplinkCursors(nil)", func() error { return s.PutUplinkCursors(nil) }, nil},
		{"PutUplinkCursors(long topic)", func() error { return s.PutUplinkCursors([]UplinkCursor{{Name: "u", Topic: long}}) }, ErrInvalidKey},
		{"UplinkCursors(long)", func() error { _, err := s.UplinkCursors(long); return err }, ErrInvalidKey},
		{"UplinkCursors(odd)", func() error { _, err := s.UplinkCursors(odd); return err }, nil},
	}
}

// TestHostileCalls drives every exported method of a Store with hostile names, queue ids,
// levels and batches, open and closed: each returns ErrInvalidKey where a key cannot be
// stored (ErrClosed after Close), and none panics or hangs.
func TestHostileCalls(t *testing.T) {
	s := testOpen(t, t.TempDir())
	for _, tc := range hostileCalls(s) {
		err := guard.Call(t, tc.name, tc.f)
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	must(t, s.Close())
	for _, tc := range append(hostileCalls(s), struct {
		name string
		f    func() error
		want error
	}{"Close", s.Close, ErrClosed}) {
		// Keys are checked first, so an invalid one may say so instead.
		if err := guard.Call(t, tc.name, tc.f); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s after Close: got %v, want ErrClosed", tc.name, err)
		}
	}
}

// TestHostileOpen opens meta stores from hostile paths: each fails with an error naming the
// path.
func TestHostileOpen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o644))
	dirDB := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dirDB, FileName), 0o755))
	empty := t.TempDir()
	must(t, os.WriteFile(filepath.Join(empty, FileName), nil, 0o600))
	for _, tc := range []struct{ name, dir, want string }{
		{"empty path", "", "empty dir path"}, // not meta.db in the working directory
		{"dir is a file", file, filepath.Join(file, FileName)},
		{"meta.db is a directory", dirDB, filepath.Join(dirDB, FileName)},
	} {
		var s *Store
		err := guard.Call(t, tc.name, func() (err error) { s, err = Open(tc.dir, &Options{Timeout: -1}); return err })
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %q, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := os.Stat(FileName); !os.IsNotExist(err) {
		t.Errorf("Open made %s in the working directory (stat: %v)", FileName, err)
		os.Remove(FileName)
	}
	// An empty meta.db (a crash while bbolt created it) is initialised again.
	s, err := Open(empty, &Options{NoSync: true, Timeout: math.MaxInt64})
	if err != nil {
		t.Fatalf("empty meta.db: %v", err)
	}
	s.Close()
}

// TestDamagedFile flips bytes in the data pages of a meta.db (bbolt checksums only its meta
// pages) and uses it: every call returns, with an error or without, and none crashes the
// process. bbolt trusts its pages: before, damage made it fault reading past its mapping
// (a fatal error, not a panic) or panic on an index out of range.
func TestDamagedFile(t *testing.T) {
	dir := t.TempDir()
	s := testOpen(t, dir)
	for i := range 200 {
		topic := fmt.Sprintf("topic-%d", i)
		must(t, s.PutTopic(Topic{Name: topic, ReadQueues: 4}))
		must(t, s.SetOffsets([]Offset{{Group: "g", Topic: topic, QueueID: 1, Offset: int64(i)}}))
	}
	must(t, s.Close())
	good, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096 // bbolt's pages 0 and 1 are the checksummed meta pages
	seeds := 100
	if testing.Short() {
		seeds = 25
	}
	damaged := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 1))
		b := bytes.Clone(good)
		for range 8 {
			b[2*pageSize+rng.IntN(len(b)-2*pageSize)] ^= byte(1 + rng.IntN(255))
		}
		d := t.TempDir()
		must(t, os.WriteFile(filepath.Join(d, FileName), b, 0o600))
		s, err := Open(d, &Options{NoSync: true, Timeout: -1})
		if err != nil {
			continue
		}
		for _, f := range []func() error{
			func() error { _, err := s.Topics(); return err },
			func() error { _, err := s.Offsets(); return err },
			func() error { return s.PutTopic(Topic{Name: "new"}) },
			func() error { _, _, err := s.Topic("topic-7"); return err },
			func() error { return s.DeleteOffsets("g", "") },
		} {
			if err := f(); err != nil && strings.Contains(err.Error(), "is damaged") {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("seed %d: %v does not match ErrCorrupt", seed, err)
				}
				damaged++
			}
		}
		s.Close()
	}
	if damaged == 0 {
		t.Errorf("no call of %d seeds found the file damaged: the test damages nothing bbolt reads", seeds)
	}
}
