package main

import (
	"testing"
	"time"
)

// TestFlat: the load test's verdict on a series: flat within its bounds, growing past them
// (so that a leak fails the run).
func TestFlat(t *testing.T) {
	series := func(f func(i int) int) []sample {
		var s []sample
		for i := range 120 {
			s = append(s, sample{at: time.Duration(i) * 5 * time.Second, goroutines: f(i)})
		}
		return s
	}
	gr := func(s sample) float64 { return float64(s.goroutines) }
	for _, tc := range []struct {
		name string
		f    func(i int) int
		want bool
	}{
		{"steady", func(i int) int { return 2200 + i%7*10 }, true},
		{"within 100", func(i int) int { return 2200 + i*80/120 }, true},
		{"leak of one per 5 s per producer", func(i int) int { return 2200 + i*200 }, false},
		{"slow leak", func(i int) int { return 2200 + i*4 }, false},
	} {
		if ok, what := flat(series(tc.f), gr, 0.10, 100); ok != tc.want {
			t.Errorf("%s: flat %v (%s), want %v", tc.name, ok, what, tc.want)
		}
	}
}
