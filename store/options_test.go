package store

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/meta"
)

// TestOpenRefusesBadOptions opens a fresh data dir with each option out of range or
// contradicting another: Open fails with ErrOptions and an error naming the option and what
// is valid, creates nothing (but where SegmentSize 0 leaves it to the data dir, which Open
// must read), and a correct Open of the same dir afterwards succeeds.
func TestOpenRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string // the error must contain each
	}{
		{"1 MiB segment, default MaxMessageSize", Options{SegmentSize: 1 << 20},
			[]string{"SegmentSize 1048576", "MaxMessageSize 4194304", "raise SegmentSize to at least 8519680", "lower MaxMessageSize to at most 458752"}},
		{"segment too small for any message", Options{SegmentSize: 64 << 10, MaxMessageSize: 1},
			[]string{"SegmentSize 65536", "raise SegmentSize to at least 131074"}},
		{"negative SegmentSize", Options{SegmentSize: -1}, []string{"SegmentSize -1", "out of range [65536, "}},
		{"tiny SegmentSize", Options{SegmentSize: 1}, []string{"SegmentSize 1 ", "out of range [65536, "}},
		{"huge SegmentSize", Options{SegmentSize: 1 << 40}, []string{"SegmentSize 1099511627776", "out of range"}},
		{"huge MaxMessageSize", Options{MaxMessageSize: math.MaxInt}, []string{"MaxMessageSize", "out of range [0, "}},
		{"MaxMessageSize over the default segment", Options{MaxMessageSize: 40 << 20}, []string{"SegmentSize 67108864", "MaxMessageSize 41943040", "SegmentSize 0 takes the default"}},
		{"negative MaxMessageSize", Options{MaxMessageSize: -1}, []string{"MaxMessageSize -1"}},
		{"negative MaxPullBytes", Options{MaxPullBytes: -1}, []string{"MaxPullBytes -1", "want > 0"}},
		{"negative QueueFlushInterval", Options{QueueFlushInterval: -time.Second}, []string{"QueueFlushInterval -1s", "want > 0"}},
		{"negative QueueFlushBytes", Options{QueueFlushBytes: -1}, []string{"QueueFlushBytes -1", "want > 0"}},
		{"negative QueueSegmentEntries", Options{QueueSegmentEntries: -1}, []string{"QueueSegmentEntries -1", "[1, 67108864]"}},
		{"huge QueueSegmentEntries", Options{QueueSegmentEntries: 1 << 30}, []string{"QueueSegmentEntries 1073741824", "[1, 67108864]"}},
		{"MaxUsedRatio 7", Options{MaxUsedRatio: 7}, []string{"MaxUsedRatio 7", "(0, 1]"}},
		{"MaxUsedRatio NaN", Options{MaxUsedRatio: math.NaN()}, []string{"MaxUsedRatio NaN"}},
		{"unknown Flush", Options{Flush: 9}, []string{"Flush mode 9"}},
		{"unknown OnFull", Options{OnFull: 9}, []string{"OnFull policy 9"}},
		{"negative FlushInterval", Options{FlushInterval: -1}, []string{"FlushInterval -1ns"}},
		{"negative FlushBytes", Options{FlushBytes: -1}, []string{"FlushBytes -1"}},
		{"negative RetentionInterval", Options{RetentionInterval: -1}, []string{"RetentionInterval -1ns"}},
		{"negative PrefaultRate", Options{PrefaultRate: -1}, []string{"PrefaultRate -1"}},
		{"negative MaxBytes", Options{MaxBytes: -1}, []string{"MaxBytes -1"}},
		{"MaxBytes below two segments", Options{SegmentSize: 1 << 20, MaxMessageSize: 1 << 10, MaxBytes: 1 << 20}, []string{"MaxBytes 1048576", "at least two segments (2097152)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			o := tc.o
			o.MetaNoSync = true
			s, err := Open(dir, &o)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%+v) succeeded", tc.o)
			}
			if !errors.Is(err, ErrOptions) {
				t.Errorf("got %v, want ErrOptions", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) && tc.o.SegmentSize != 0 {
				t.Errorf("Open with bad options created the data dir (stat: %v)", err)
			}
			// A correct Open afterwards, with another segment size, is not held to
			// anything the failed one wrote.
			good := Options{SegmentSize: 2 << 20, MaxMessageSize: 64 << 10, MetaNoSync: true}
			s, err = Open(dir, &good)
			if err != nil {
				t.Fatalf("correct Open after the failed one: %v", err)
			}
			defer s.Close()
			if got := s.Log().SegmentSize(); got != 2<<20 {
				t.Errorf("segment size %d, want 2 MiB", got)
			}
		})
	}
}

// TestOpenAcceptsDocumentedValues opens with the values the options' docs allow, including
// the negative ones that turn a feature off.
func TestOpenAcceptsDocumentedValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"zero", Options{}},
		{"smallest segment for 64 KiB messages", Options{SegmentSize: 256 << 10, MaxMessageSize: 64 << 10}},
		{"largest message of a 1 MiB segment", Options{SegmentSize: 1 << 20, MaxMessageSize: 1<<19 - propertySlack}},
		{"negative disables", Options{MaxDispatchLag: -1, ResidentBytes: -1, QueueResidentBytes: -1, PrefaultBytes: -1, MaxAge: -1, MaxUsedRatio: -1, MaxBrokenBytes: -1}},
		{"MaxUsedRatio 1", Options{MaxUsedRatio: 1}},
		{"async, drop oldest", Options{Flush: commitlog.FlushAsync, OnFull: commitlog.DropOldest}},
		{"largest queue files", Options{QueueSegmentEntries: 1 << 26}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.MetaNoSync = true
			s, err := Open(t.TempDir(), &o)
			if err != nil {
				t.Fatalf("Open(%+v): %v", tc.o, err)
			}
			s.Close()
		})
	}
}

// TestSettingsWithoutSegmentsDoNotBind checks a data dir whose meta.db records settings but
// whose commitlog has no segment (what a failed Open of an older version left, recording
// even a bad segment size): the settings pin nothing, since nothing was stored under them.
func TestSettingsWithoutSegmentsDoNotBind(t *testing.T) {
	for _, seg := range []int64{1 << 20, -1, 1} {
		dir := t.TempDir()
		m, err := meta.Open(dir, &meta.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.PutSettings(meta.Settings{SchemaVersion: PayloadVersion, FlushPolicy: "sync", SegmentSize: seg}); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if err := os.Mkdir(filepath.Join(dir, commitlogDir), 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, &Options{SegmentSize: 2 << 20, MaxMessageSize: 64 << 10, MetaNoSync: true})
		if err != nil {
			t.Fatalf("settings with segment size %d: %v", seg, err)
		}
		s.Close()
		// Now the log has 2 MiB segments, and the settings say so.
		o := testOptions(Options{SegmentSize: 1 << 20})
		if _, err := Open(dir, &o); !errors.Is(err, ErrSettings) {
			t.Fatalf("reopen with another segment size: got %v, want ErrSettings", err)
		}
	}
}

// TestMessageSizeAgainstStoredSegments opens a data dir of small segments with a
// MaxMessageSize they cannot hold: ErrSettings, saying what to change.
func TestMessageSizeAgainstStoredSegments(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{SegmentSize: 1 << 20})
	s.Close()
	_, err := Open(dir, &Options{MaxMessageSize: 4 << 20, MetaNoSync: true})
	if !errors.Is(err, ErrSettings) {
		t.Fatalf("got %v, want ErrSettings", err)
	}
	for _, w := range []string{"data dir has 1048576-byte segments", "MaxMessageSize 4194304", "lower MaxMessageSize to at most 458752"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("got %q, want it to contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "raise SegmentSize") {
		t.Errorf("got %q: a data dir's segment size cannot be raised", err)
	}
	s = openStore(t, dir, Options{SegmentSize: 0, MaxMessageSize: 458752})
	s.Close()
}
