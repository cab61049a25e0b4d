package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Pinning (-pin-clients, -pin-broker) runs the broker on its own CPUs and this process (the
// Go clients, and the Java tools it starts) on others, each Go process with as many
// processors as it has CPUs: on a machine of two CPUs, one each. Unpinned, the kernel places
// the broker's and the clients' threads on either CPU at each wake-up (a loopback write
// wakes its reader on the writer's CPU more often than not), and each Go runtime spins up
// its idle processors' threads on the CPU the other process needs.

// cpuCount returns how many CPUs a taskset CPU list ("1", "0-1", "0,2-3") names.
func cpuCount(list string) (int, error) {
	n := 0
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("CPU list %q: bad CPU %q", list, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("CPU list %q: bad range %q", list, part)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// pinSelf moves every thread of this process to the CPUs of list and gives the Go runtime
// as many processors. Threads started later inherit the CPUs of the thread that starts them.
func pinSelf(list string) error {
	n, err := cpuCount(list)
	if err != nil {
		return err
	}
	out, err := exec.Command("taskset", "-a", "-p", "-c", list, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset: %w: %s", err, out)
	}
	runtime.GOMAXPROCS(n)
	return nil
}

// pinned returns name and args as a command run on the CPUs of list (none: as they are).
func pinned(list, name string, args ...string) *exec.Cmd {
	if list == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("taskset", append([]string{"-c", list, name}, args...)...)
}

// The placements of a run (-placements).
const (
	placeUnpinned = "unpinned"
	placePinned   = "pinned"
	// pinnedSuffix ends the kind of a run in the pinned placement.
	pinnedSuffix = "+pinned"
)

// cpuRange is the CPU list of CPUs lo to hi.
func cpuRange(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// byPlacement splits runs (the in-process run left out) into the unpinned ones and the
// pinned ones, these with their kind's suffix removed.
func byPlacement(runs []run) (unpinned, pinned []run) {
	for _, r := range runs {
		switch {
		case r.Kind == "in-process":
		case strings.HasSuffix(r.Kind, pinnedSuffix):
			r.Kind = strings.TrimSuffix(r.Kind, pinnedSuffix)
			pinned = append(pinned, r)
		default:
			unpinned = append(unpinned, r)
		}
	}
	return unpinned, pinned
}

// printBest prints, for each compared row of the EdgeMQ against RocketMQ tables, each side's
// median in its better placement (the higher rate; the lower latency, memory or time), the
// other placement's beside it, and the ratio and verdict of the better ones.
func printBest(w io.Writer, unpinned, pinned []run, lines []line) {
	un, pin := byKind(unpinned), byKind(pinned)
	for _, pair := range [][2]string{{"edgemq-async", "rocketmq-async"}, {"edgemq-sync", "rocketmq-sync"}} {
		if un[pair[0]] == nil && pin[pair[0]] == nil {
			continue
		}
		head := "async flush"
		if pair[0] == "edgemq-sync" {
			head = "sync flush"
		}
		fmt.Fprintf(w, "\n## %s, each side in its better placement\n\n", head)
		fmt.Fprintf(w, "| workload | unit | EdgeMQ | RocketMQ | EdgeMQ / RocketMQ | target | verdict |\n|---|---|---:|---:|---:|---|---|\n")
		for _, l := range lines {
			if l.kind == ratioNone {
				continue
			}
			key := l.cmp
			if key == "" {
				key = l.keys[0]
			}
			higher := l.kind == ratioAtLeast
			best := func(kind string) (float64, string, bool) {
				u, uok := med(un[kind], key)
				p, pok := med(pin[kind], key)
				switch {
				case !uok && !pok:
					return 0, "", false
				case !pok:
					return u, num(u) + " unpinned", true
				case !uok:
					return p, num(p) + " pinned", true
				case (higher && p > u) || (!higher && p < u):
					return p, fmt.Sprintf("%s pinned (unpinned %s)", num(p), num(u)), true
				}
				return u, fmt.Sprintf("%s unpinned (pinned %s)", num(u), num(p)), true
			}
			em, ecell, eok := best(pair[0])
			rm, rcell, rok := best(pair[1])
			if !eok && !rok {
				continue
			}
			ratio, target, verdict := l.judge(em, rm, eok, rok)
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", l.label, l.unit, ecell, rcell, ratio, target, verdict)
		}
	}
}
