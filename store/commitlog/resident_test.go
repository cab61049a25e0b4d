package commitlog

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile returns the process's resident file-backed memory (RssFile, Linux), or -1.
func rssFile() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// TestFlushedPagesLeaveResidentSet writes 48 MiB through the mapping: with the default
// resident window the process's file-backed RSS grows by little more than the window;
// keeping everything resident it grows by the whole 48 MiB.
func TestFlushedPagesLeaveResidentSet(t *testing.T) {
	if rssFile() < 0 {
		t.Skip("no RssFile in /proc/self/status")
	}
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	growth := func(resident int64) int64 {
		l := openTest(t, t.TempDir(), Options{SegmentSize: 64 << 20, Flush: FlushAsync, ResidentBytes: resident})
		defer l.Close()
		before := rssFile()
		chunk := bytes.Repeat([]byte("r"), 64<<10)
		for i := 0; i < 48*16; i++ {
			if _, err := l.Append(1, [][]byte{chunk}, nil); err != nil {
				t.Fatal(err)
			}
			if i%64 == 63 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return rssFile() - before
	}
	kept := growth(-1)
	dropped := growth(4 << 20)
	t.Logf("RssFile growth: %d MiB keeping all pages, %d MiB with a 4 MiB window", kept>>20, dropped>>20)
	if kept < 32<<20 {
		t.Skipf("keeping every page grew RssFile by only %d MiB: this kernel does not count them", kept>>20)
	}
	if dropped > 16<<20 {
		t.Fatalf("with a 4 MiB resident window RssFile grew by %d MiB", dropped>>20)
	}
}
