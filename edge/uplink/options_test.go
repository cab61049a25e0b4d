package uplink

import "testing"

// TestBatchBytesFollowsTheCap: under a rate cap (the rule's or the shared one, the smaller)
// a batch carries at most a quarter second's worth of it.
func TestBatchBytesFollowsTheCap(t *testing.T) {
	tests := []struct {
		name             string
		shared, ruleCap  int64
		batchBytes, want int
	}{
		{"no cap", 0, 0, 0, DefaultBatchBytes},
		{"rule cap", 0, 3000, 0, 750},
		{"shared cap", 8000, 0, 0, 2000},
		{"the smaller cap", 8000, 3000, 0, 750},
		{"a smaller batch stays", 0, 100_000, 1000, 1000},
		{"a larger batch shrinks", 0, 100_000, 50_000, 25_000},
		{"a tiny cap", 0, 2, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{RateLimit: tc.shared, Up: []UpRule{{Name: "r", Topics: []string{"t"},
				Upstream: Upstream{Addrs: "127.0.0.1:1"}, RateLimit: tc.ruleCap, BatchBytes: tc.batchBytes}}}
			r, err := o.withDefaults("gw")
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Up[0].BatchBytes; got != tc.want {
				t.Fatalf("BatchBytes %d, want %d", got, tc.want)
			}
		})
	}
}
