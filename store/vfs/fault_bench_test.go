package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWriteFault measures the first write into each page of a writable mapping of a
// preallocated file, one op per page: "fresh" is the page fault the commitlog's appender took
// under the store's append lock; "populated" populates the pages first (Populate, as the
// commitlog's prefault goroutine does ahead of the writer) and reports the two parts, the
// populate and the write left to the appender (populate-ns/page, write-ns/page); ns/op is
// their sum. Files of 64 MiB are mapped and removed in turn, outside the timing.
func BenchmarkWriteFault(b *testing.B) {
	const chunk = 64 << 20
	page := os.Getpagesize()
	for _, populated := range []bool{false, true} {
		name := "fresh"
		if populated {
			name = "populated"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "seg")
			var populate, write time.Duration
			for done := 0; done < b.N; {
				b.StopTimer()
				f := mustOpen(b, OS, path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
				if err := f.Allocate(chunk); err != nil {
					b.Fatal(err)
				}
				m, err := f.Map(chunk, true)
				if err != nil {
					b.Fatal(err)
				}
				pages := min(chunk/page, b.N-done)
				b.StartTimer()
				start := time.Now()
				if populated {
					if err := f.Populate(m[:pages*page]); err != nil {
						b.Skip(err)
					}
				}
				mid := time.Now()
				for i := range pages {
					m[i*page] = 1
				}
				populate, write = populate+mid.Sub(start), write+time.Since(mid)
				b.StopTimer()
				done += pages
				f.Unmap(m)
				f.Close()
				if err := os.Remove(path); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if populated {
				b.ReportMetric(float64(populate.Nanoseconds())/float64(b.N), "populate-ns/page")
				b.ReportMetric(float64(write.Nanoseconds())/float64(b.N), "write-ns/page")
			}
		})
	}
}
