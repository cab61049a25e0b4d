package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// cpuTime returns the user plus system CPU time of process pid so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it start past the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// status returns the numbers of /proc/PID/status keyed by field name without the colon
// (VmHWM, VmRSS, RssAnon, RssFile in KiB; Threads).
func status(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			m[k] = n
		}
	}
	return m, nil
}

// resetPeak resets VmHWM of pid to its current RSS (Linux 4.0+, clear_refs "5"), so that a
// later VmHWM is the peak of what ran in between. It reports whether the reset took.
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// openFDs counts the open file descriptors of pid (sockets included), or -1.
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// sockets counts the open sockets of pid, or -1.
func sockets(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// cpuMeter measures the CPU time that a set of processes used between begin and end.
type cpuMeter struct {
	pids  []int
	start time.Duration
	t0    time.Time
}

func meterCPU(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, t0: time.Now()}
	m.start = m.total()
	return m
}

func (m *cpuMeter) total() time.Duration {
	var sum time.Duration
	for _, p := range m.pids {
		if d, err := cpuTime(p); err == nil {
			sum += d
		}
	}
	return sum
}

// used returns the CPU time used since the meter was made, and the wall time.
func (m *cpuMeter) used() (cpu, wall time.Duration) {
	return m.total() - m.start, time.Since(m.t0)
}
