package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store/commitlog"
)

// statusEvery is how often serve updates its STATUS line for systemd without a watchdog.
const statusEvery = 10 * time.Second

// sdNotify sends state to systemd's notification socket (sd_notify(3)) when NOTIFY_SOCKET
// names one, as it does for a unit of Type=notify; without it, it does nothing.
func sdNotify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	// A name starting with @ is in the abstract namespace; package net maps it.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}

// watchdogInterval returns how often to ping systemd's watchdog: half of WATCHDOG_USEC, when
// it is set for this process (WATCHDOG_PID unset or ours); 0 for no watchdog. A malformed
// value is an error, and no watchdog.
func watchdogInterval() (time.Duration, error) {
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, nil // meant for another process
	}
	n, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC=%q: want a positive count of microseconds", usec)
	}
	return time.Duration(n) * time.Microsecond / 2, nil
}

// reporter keeps systemd informed while serve runs: every period it sends a STATUS= line
// (topics, message rates, connections, commitlog and disk use), and when the watchdog is on
// (WatchdogSec) WATCHDOG=1, but only while the broker's Health (healthStall) passes: a store
// whose disk fails, whose flusher is stuck or whose dispatcher stays behind stops the pings,
// and systemd restarts the service. It logs the first failed check, and a recovery; and the
// first message it could not send. Its goroutine is stopped by stop.
type reporter struct {
	b        *edge.Broker
	srv      *server.Server
	addr     string
	dataDir  string
	lg       *slog.Logger
	period   time.Duration
	stall    time.Duration // Health's
	watchdog bool

	done chan struct{}
	wg   sync.WaitGroup

	// Owned by the goroutine.
	last      edge.TrafficStats
	lastAt    time.Time
	unhealthy bool
	unsent    bool // a message could not be sent: logged
}

// startReporter starts reporting to systemd, when NOTIFY_SOCKET is set; else it returns nil.
func startReporter(b *edge.Broker, srv *server.Server, dataDir string, lg *slog.Logger) *reporter {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	r := &reporter{b: b, srv: srv, addr: srv.Addr().String(), dataDir: dataDir, lg: lg, period: statusEvery,
		done: make(chan struct{}), last: b.TrafficStats(), lastAt: time.Now()}
	wd, err := watchdogInterval()
	if err != nil {
		lg.Warn("systemd watchdog off", "err", err)
	}
	if wd > 0 {
		r.period, r.watchdog = wd, true
	}
	r.stall = healthStall(r.period, b.Options())
	r.wg.Add(1)
	go r.run()
	return r
}

func (r *reporter) run() {
	defer r.wg.Done()
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		err := sdNotify(r.report())
		if err != nil && !r.unsent {
			r.lg.Warn("cannot notify systemd", "err", err)
		}
		r.unsent = err != nil
	}
}

// report checks the broker's health and returns the message for systemd.
func (r *reporter) report() string {
	err := r.b.Health(r.stall)
	switch {
	case err != nil && !r.unhealthy:
		msg := "store unhealthy"
		if r.watchdog {
			msg = "store unhealthy: no more pings to systemd's watchdog"
		}
		r.lg.Error(msg, "err", err)
	case err == nil && r.unhealthy:
		r.lg.Info("store healthy again")
	}
	r.unhealthy = err != nil
	if err != nil {
		return "STATUS=unhealthy: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	msg := "STATUS=" + r.status()
	if r.watchdog {
		msg += "\nWATCHDOG=1"
	}
	return msg
}

// status returns the one-line summary of STATUS=: the address, the topics, the message
// rates since the last report, the client connections, the commitlog's size and the free space of its file system.
func (r *reporter) status() string {
	now := time.Now()
	cur := r.b.TrafficStats()
	secs := now.Sub(r.lastAt).Seconds()
	in, out := 0.0, 0.0
	if secs > 0 {
		in, out = float64(cur.MessagesIn-r.last.MessagesIn)/secs, float64(cur.MessagesOut-r.last.MessagesOut)/secs
	}
	r.last, r.lastAt = cur, now
	s := fmt.Sprintf("serving on %s: %d topics, %.1f msg/s in, %.1f msg/s out, %d connections",
		r.addr, len(r.b.Topics()), in, out, r.srv.Conns())
	if st, err := r.b.StoreStats(); err == nil {
		s += ", commitlog " + humanBytes(st.SegmentBytes)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(r.dataDir, &fs); err == nil && fs.Blocks > 0 {
		used := 100 * float64(fs.Blocks-fs.Bfree) / float64(fs.Blocks)
		s += fmt.Sprintf(", disk %.0f%% used (%s free)", used, humanBytes(int64(uint64(fs.Bavail)*uint64(fs.Bsize))))
	}
	return s
}

// healthStall is how long the broker's flusher and dispatcher may go without progress, for
// checks every period: period, but at least two async flush intervals, since an async log
// is flushed only that often.
func healthStall(period time.Duration, o edge.Options) time.Duration {
	flush := commitlog.DefaultOptions.FlushInterval
	if o.Store != nil && o.Store.FlushInterval > 0 {
		flush = o.Store.FlushInterval
	}
	return max(period, 2*flush)
}

// stop stops the reporter's goroutine and waits for it. A nil reporter does nothing.
func (r *reporter) stop() {
	if r == nil {
		return
	}
	close(r.done)
	r.wg.Wait()
}
