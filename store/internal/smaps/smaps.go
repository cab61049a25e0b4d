// Package smaps reads the resident bytes of this process's file mappings from
// /proc/self/smaps: the pages that count in its RSS (and VmHWM), not those in the page
// cache. The tests of the store's bounded resident set use it; they find mappings by the
// mapped file's path, which works under qemu-user too, where a 32-bit guest's addresses
// are not the host's.
package smaps

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Path is the file Rss reads.
const Path = "/proc/self/smaps"

// Rss returns the resident bytes of the mappings whose file path match accepts, and whether
// there was any. An error opening Path (no procfs) is returned as is: callers skip.
func Rss(match func(path string) bool) (int64, bool, error) {
	f, err := os.Open(Path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	return parse(f, match)
}

// Under matches the files in dir and below it.
func Under(dir string) func(string) bool {
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	return func(p string) bool { return strings.HasPrefix(p, prefix) }
}

// File matches the file name.
func File(name string) func(string) bool {
	name = filepath.Clean(name)
	return func(p string) bool { return p == name }
}

// parse sums the Rss lines of the mappings in r whose path matches. A mapping's header line
// is "start-end perms offset dev inode [path]"; its fields follow, one "Name: value" per line.
func parse(r io.Reader, match func(string) bool) (total int64, found bool, err error) {
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && match(strings.Join(fields[5:], " "))
			found = found || in
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("smaps: line %q: %w", line, err)
			}
			total += kb << 10
		}
	}
	return total, found, sc.Err()
}

// ForTest is Rss for tests: it skips tb when Path cannot be read (no procfs).
func ForTest(tb testing.TB, match func(path string) bool) (n int64, found bool) {
	tb.Helper()
	n, found, err := Rss(match)
	if err != nil {
		tb.Skipf("no %s: %v", Path, err)
	}
	return n, found
}
