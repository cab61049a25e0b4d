// Package smaps reads the resident bytes of this process's file mappings from
// /proc/self/smaps: the pages that count in its RSS (and VmHWM), not those in the page
// cache; and their VmFlags (the madvise advice they carry). The tests of the store's bounded resident set use it; they find mappings by the
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

	"golang.org/x/sys/unix"
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

// parse sums the Rss lines of the mappings in r whose path matches.
func parse(r io.Reader, match func(string) bool) (total int64, found bool, err error) {
	err = fields(r, match, func(name, value string) error {
		found = true
		if name != "Rss" {
			return nil
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(value, " kB"), 10, 64)
		if err != nil {
			return fmt.Errorf("smaps: Rss %q: %w", value, err)
		}
		total += kb << 10
		return nil
	})
	return total, found, err
}

// fields calls fn with each "Name: value" field (value trimmed) of the mappings in r whose
// path matches. A mapping's header line is "start-end perms offset dev inode [path]"; its
// fields follow, one per line.
func fields(r io.Reader, match func(string) bool, fn func(name, value string) error) error {
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && match(strings.Join(f[5:], " "))
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok && in {
			if err := fn(name, strings.TrimSpace(value)); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// VmFlags returns the VmFlags of the mappings whose file path match accepts, space
// separated (e.g. "rd wr sh mr mw me ms rr"; "rr" is MADV_RANDOM advice), and whether there
// was any. An error opening Path is returned as is: callers skip.
func VmFlags(match func(path string) bool) (string, bool, error) {
	f, err := os.Open(Path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	var flags []string
	found := false
	err = fields(f, match, func(name, value string) error {
		found = true
		if name == "VmFlags" {
			flags = append(flags, value)
		}
		return nil
	})
	return strings.Join(flags, " "), found, err
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

// SkipIfAdviceIgnored skips tb where madvise advice does not reach the kernel (qemu-user
// takes it and drops it), so that smaps cannot show its effects: it maps a file in
// tb.TempDir(), advises it MADV_RANDOM and looks for "rr" in its VmFlags.
func SkipIfAdviceIgnored(tb testing.TB) {
	tb.Helper()
	probe := filepath.Join(tb.TempDir(), "advice-probe")
	if err := os.WriteFile(probe, make([]byte, os.Getpagesize()), 0o644); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(probe)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := unix.Madvise(m, unix.MADV_RANDOM); err != nil {
		tb.Skipf("madvise(MADV_RANDOM): %v", err)
	}
	flags, _, err := VmFlags(File(probe))
	if err != nil {
		tb.Skipf("no %s: %v", Path, err)
	}
	if !strings.Contains(" "+flags+" ", " rr ") {
		tb.Skip("madvise advice does not show in smaps here (emulated?)")
	}
}
