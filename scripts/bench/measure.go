package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/edge/pace"
)

// peakRSS returns the process's peak resident set size (VmHWM) in KiB, or 0 when
// /proc/self/status cannot be read.
func peakRSS() int64 {
	return procField("/proc/self/status", "VmHWM:")
}

// procField returns the first number after key in a /proc file of "Key: value kB" lines.
func procField(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// rssSampler tracks the peaks of RssAnon and RssFile, which VmHWM adds up: mmap'd log
// pages count as file-backed. It reads /proc/self/status every 50 ms until stop.
type rssSampler struct {
	anon, file atomic.Int64
	done       chan struct{}
	wg         sync.WaitGroup
}

func startRSSSampler() *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Go(func() {
		for {
			s.sample()
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return s
}

func (s *rssSampler) sample() {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			s.anon.Store(max(s.anon.Load(), n))
		case "RssFile:":
			s.file.Store(max(s.file.Load(), n))
		}
	}
}

// stop ends sampling and returns the peaks in KiB.
func (s *rssSampler) stop() (anon, file int64) {
	close(s.done)
	s.wg.Wait()
	return s.anon.Load(), s.file.Load()
}

// diskUsage returns the logical size (sum of st_size) and the allocated size
// (sum of st_blocks*512) of the regular files under dir.
func diskUsage(dir string) (logical, alloc int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		logical += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			alloc += st.Blocks * 512
		}
		return nil
	})
	return logical, alloc, err
}

// span times the measured phase of a workload and, when asked, CPU-profiles it.
type span struct {
	start time.Time
	prof  *os.File
}

// begin starts timing; with a non-empty path it also starts a CPU profile written there.
func begin(profile string) (*span, error) {
	s := &span{}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		s.prof = f
	}
	s.start = time.Now()
	return s, nil
}

// end stops timing (and profiling) and returns the elapsed time.
func (s *span) end() time.Duration {
	d := time.Since(s.start)
	if s.prof != nil {
		pprof.StopCPUProfile()
		s.prof.Close()
		s.prof = nil
	}
	return d
}

// drive calls send from producers goroutines until n calls have been made or d has passed,
// and returns the number of successful calls and the time taken. The first error stops it.
func drive(producers int, n int64, d time.Duration, profile string, send func() error) (int64, time.Duration, error) {
	return driveThen(producers, n, d, profile, send, nil)
}

// driveThen is drive with a flush, if not nil, called and timed after the producers stop.
func driveThen(producers int, n int64, d time.Duration, profile string, send, flush func() error) (int64, time.Duration, error) {
	var (
		claimed, done atomic.Int64
		stop          atomic.Bool
		wg            sync.WaitGroup
		once          sync.Once
		firstErr      error
	)
	sp, err := begin(profile)
	if err != nil {
		return 0, 0, err
	}
	deadline := sp.start.Add(d)
	// Producers claim sends in chunks and count what they did on their own: counters that
	// every send of every producer adds to would bounce between the CPUs, a cost of the
	// harness that grows with the broker's rate. Each chunk ends with a look at the clock,
	// which costs ~5 % of a fast send when read every time.
	const chunk = 16
	for range producers {
		wg.Go(func() {
			var sent int64
			defer func() { done.Add(sent) }()
			for !stop.Load() {
				end := claimed.Add(chunk)
				start := end - chunk
				if start >= n {
					return
				}
				for range min(end, n) - start {
					if err := send(); err != nil {
						once.Do(func() { firstErr = err })
						stop.Store(true)
						return
					}
					sent++
				}
				if time.Now().After(deadline) {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil && flush != nil {
		firstErr = flush()
	}
	return done.Load(), sp.end(), firstErr
}

// pacer sends n messages at rate per second from one goroutine: it waits until each
// message's scheduled time (no ticker) with a pace.Pacer, then calls send; lags records how
// late each send started relative to its schedule. (time.Sleep waited at least ~1 ms while
// the process was otherwise idle, so that sends came in bursts of about rate/1000.)
func pacer(n, rate int, send func(i int) error) (lags []time.Duration, err error) {
	interval := time.Second / time.Duration(rate)
	lags = make([]time.Duration, n)
	pc := pace.New()
	defer pc.Close()
	start := time.Now()
	for i := range n {
		next := start.Add(time.Duration(i) * interval)
		pc.Wait(context.Background(), next)
		lags[i] = time.Since(next)
		if err := send(i); err != nil {
			return lags[:i], err
		}
	}
	return lags, nil
}

// dist summarises a set of durations in nanoseconds.
type dist struct {
	N    int
	P50  int64
	P99  int64
	P999 int64
	Max  int64
}

func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) int64 {
		i := int(p * float64(len(s)))
		return int64(s[min(i, len(s)-1)])
	}
	return dist{N: len(s), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: int64(s[len(s)-1])}
}

// machine describes the host for the report header.
func machine(dir string) string {
	model := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	memGiB := float64(procField("/proc/meminfo", "MemTotal:")) / (1 << 20)
	fsType := "unknown"
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		fsType = fsName(st.Type)
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs (%s), %.1f GiB RAM, temp dir %s on %s, load average %s, %s %s/%s",
		runtime.NumCPU(), model, memGiB, dir, fsType, load, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func fsName(magic int64) string {
	switch magic {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("fs magic %#x", magic)
}
