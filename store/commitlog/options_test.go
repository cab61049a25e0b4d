package commitlog

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenRefusesBadOptions checks that every option out of range is refused by Validate and
// by Open, with an error naming the option and its valid range, before Open creates anything.
func TestOpenRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string // the error must contain each
	}{
		{"negative SegmentSize", Options{SegmentSize: -1}, []string{"SegmentSize -1", "[65536, "}},
		{"tiny SegmentSize", Options{SegmentSize: 1}, []string{"SegmentSize 1 ", "[65536, "}},
		{"huge SegmentSize", Options{SegmentSize: 1 << 40}, []string{"SegmentSize 1099511627776", "out of range"}},
		{"unknown Flush", Options{Flush: 7}, []string{"Flush mode 7", "FlushSync or FlushAsync"}},
		{"negative Flush", Options{Flush: -1}, []string{"Flush mode -1"}},
		{"negative FlushInterval", Options{FlushInterval: -time.Second}, []string{"FlushInterval -1s", "want > 0"}},
		{"negative FlushBytes", Options{FlushBytes: -1}, []string{"FlushBytes -1", "want > 0"}},
		{"negative RetentionInterval", Options{RetentionInterval: -1}, []string{"RetentionInterval -1ns", "want > 0"}},
		{"negative MaxMapped", Options{MaxMapped: -1}, []string{"MaxMapped -1", "want > 0"}},
		{"negative PrefaultRate", Options{PrefaultRate: -1}, []string{"PrefaultRate -1", "want > 0"}},
		{"negative MaxBytes", Options{MaxBytes: -1}, []string{"MaxBytes -1 is negative", "at least two segments"}},
		{"MaxBytes below two segments", Options{MaxBytes: testSegSize, SegmentSize: testSegSize}, []string{"MaxBytes 65536", "(131072)"}},
		{"MaxUsedRatio 7", Options{MaxUsedRatio: 7}, []string{"MaxUsedRatio 7", "(0, 1]"}},
		{"MaxUsedRatio +Inf", Options{MaxUsedRatio: math.Inf(1)}, []string{"MaxUsedRatio +Inf"}},
		{"MaxUsedRatio NaN", Options{MaxUsedRatio: math.NaN()}, []string{"MaxUsedRatio NaN"}},
		{"unknown OnFull", Options{OnFull: 3}, []string{"OnFull policy 3", "FailWrites or DropOldest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s accepted %+v", what, tc.o)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: got %q, want it to contain %q", what, err, w)
					}
				}
			}
			check("Validate", tc.o.Validate())
			dir := filepath.Join(t.TempDir(), "log")
			l, err := Open(dir, &tc.o)
			if err == nil {
				l.Close()
			}
			check("Open", err)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("Open with bad options created %s (stat: %v)", dir, err)
			}
		})
	}
}

// TestValidateAcceptsDocumentedValues checks the values each option's doc allows,
// including the negative ones that disable a feature.
func TestValidateAcceptsDocumentedValues(t *testing.T) {
	for _, o := range []*Options{
		nil,
		{},
		{SegmentSize: MinSegmentSize},
		{SegmentSize: MaxSegmentSize},
		{Flush: FlushAsync},
		{MaxAge: -1},
		{MaxUsedRatio: -1},
		{MaxUsedRatio: math.Inf(-1)},
		{MaxUsedRatio: 1},
		{MaxUsedRatio: 1e-9},
		{MaxBytes: 2 * DefaultOptions.SegmentSize},
		{OnFull: DropOldest},
		{ResidentBytes: -1},
		{PrefaultBytes: -1},
		{MaxBrokenBytes: -1},
		{MaxBrokenBytes: 1},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", o, err)
		}
	}
}

func TestFlushModeString(t *testing.T) {
	for _, tc := range []struct {
		m    FlushMode
		want string
	}{{FlushSync, "sync"}, {FlushAsync, "async"}, {7, "FlushMode(7)"}, {-1, "FlushMode(-1)"}} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("FlushMode(%d).String() = %q, want %q", int(tc.m), got, tc.want)
		}
		if m, err := ParseFlushMode(tc.m.String()); (err == nil) != (tc.m == FlushSync || tc.m == FlushAsync) || err == nil && m != tc.m {
			t.Errorf("ParseFlushMode(%q) = %v, %v", tc.m.String(), m, err)
		}
	}
}
