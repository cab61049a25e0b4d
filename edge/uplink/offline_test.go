package uplink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// manualClock is a wall clock the test moves: days pass in a loop.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) Now() time.Time  { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// smallDisk is the real file system with a disk of capacity bytes under the commit log: a
// new segment (the commit log preallocates each as a prealloc-*.tmp file) that would take
// the commit log's files past it fails with vfs.ErrNoSpace.
type smallDisk struct {
	vfs.FS
	capacity int64
	full     atomic.Int64 // new segments refused
}

func (d *smallDisk) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasPrefix(filepath.Base(name), "prealloc-") {
		return f, err
	}
	return &smallDiskFile{File: f, d: d, dir: filepath.Dir(name)}, nil
}

func (d *smallDisk) Usage(dir string) (vfs.Usage, error) {
	used := d.used(dir)
	return vfs.Usage{Total: uint64(d.capacity), Free: uint64(max(0, d.capacity-used))}, nil
}

// used is the bytes of the files in dir.
func (d *smallDisk) used(dir string) int64 {
	names, _ := d.FS.ReadDir(dir)
	var n int64
	for _, name := range names {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

type smallDiskFile struct {
	vfs.File
	d   *smallDisk
	dir string
}

func (f *smallDiskFile) Allocate(size int64) error {
	if f.d.used(f.dir)+size > f.d.capacity {
		f.d.full.Add(1)
		return &os.PathError{Op: "fallocate", Path: f.dir, Err: vfs.ErrNoSpace}
	}
	return f.File.Allocate(size)
}

// TestDaysOffline: a gateway whose hub is unreachable for three days (a manual clock),
// its store keeping two days (MaxAge) within a byte quota on a small disk, stores n
// messages of 100 bytes (5,000,000 at full scale). While offline the backlog's age reads
// three days; with RejectNew retention deletes nothing not forwarded, neither by age nor
// by quota, and once the disk is full sends fail with commitlog.ErrDiskFull (counted);
// with DropOldest retention keeps to the quota and the age, and the rule counts what it
// lost. Then the hub comes back: the backlog drains completely, in order per queue, and
// the Go heap stays bounded while it drains (it does not grow with the backlog).
func TestDaysOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a backlog of days")
	}
	for _, policy := range []Overflow{RejectNew, DropOldest} {
		t.Run(policy.String(), func(t *testing.T) { testDaysOffline(t, policy) })
	}
}

func testDaysOffline(t *testing.T, policy Overflow) {
	const (
		days       = 3
		batch      = 256 // messages per local send, all to one queue
		recordSize = 110 // bytes of commit log per message of the test (checked below)
		// heapBound bounds the heap in use while the backlog drains, whatever its size: each
		// of the 4 forwarders holds one batch (64 messages, read and copied for the
		// upstream: under 0.1 MB), the hub runs in this process (its pulls and sends take a
		// few MB of buffers), and the garbage collector lets the heap reach twice what is
		// live. Measured: 3 to 12 MiB for a backlog of 50,000, 12 to 16 MiB for 5,000,000
		// (550 MB of log).
		heapBound = 32 << 20
	)
	n := scaled(50_000, 5_000_000)
	seg := int64(scaled(256<<10, 16<<20))
	written := int64(n) * recordSize
	// The two days MaxAge keeps (two thirds of the messages) fit the quota; the disk holds
	// nine tenths of them.
	disk := &smallDisk{FS: vfs.OS, capacity: written * 9 / 10}
	quota := written * 3 / 4 / seg * seg
	clock := new(manualClock)
	start := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	clock.Set(start)
	so := bulkStore()
	so.FS, so.SegmentSize, so.MaxBytes, so.MaxAge, so.MaxUsedRatio = disk, seg, quota, 48*time.Hour, -1
	so.RetentionInterval = 20 * time.Millisecond
	so.FlushBytes = seg / 8
	o := brokerOptions(t, "gw1", so)
	o.Now = clock.Now
	local, err := edge.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	if err := local.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	ln := freeListener(t)
	addr := ln.Addr().String()
	ln.Close() // the hub is down until it starts there
	u := startUplink(t, local, Options{BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second,
		Up: []UpRule{{Name: "r", Topics: []string{"T"}, Overflow: policy, BatchSize: 64, Upstream: Upstream{Addrs: addr, Kind: KindEdgeMQ}}}})

	// Three days of messages, written in seconds.
	ctx := context.Background()
	var accepted [4]int // messages stored per queue
	refused, began := 0, time.Now()
	var flushed int64 // the log is flushed up to here
	body := bytes.Repeat([]byte("d"), 100)
	for i := 0; i < n; i += batch {
		clock.Set(start.Add(time.Duration(float64(days*24*time.Hour) * float64(i) / float64(n))))
		q := (i / batch) % 4
		msgs := make([]*mq.Message, min(batch, n-i))
		for j := range msgs {
			b := append(strconv.AppendInt(append([]byte(nil), byte('0'+q), ' '), int64(accepted[q]+j), 10), ' ')
			msgs[j] = &mq.Message{Topic: "T", Body: append(b, body[:100-len(b)]...)}
		}
		if _, err := local.SendBatch(ctx, msgs, mq.QueueIndex(q)); err != nil {
			if !errors.Is(err, commitlog.ErrDiskFull) {
				t.Fatalf("send at %d: %v", i, err)
			}
			refused += len(msgs)
			continue
		}
		accepted[q] += len(msgs)
		if pos := local.WritePos(); pos-flushed > seg/4 {
			// Three days hold thousands of flushes; retention deletes flushed segments only.
			waitFor(t, 10*time.Second, "the flush", func() bool { st, _ := local.StoreStats(); return st.DurablePos >= pos })
			flushed = pos
		}
		if i == batch*4 {
			if per := float64(local.WritePos()) / float64(i+batch); per > recordSize*1.1 || per < recordSize*0.9 {
				t.Fatalf("%.1f bytes of log per message, the test's sizes assume %d", per, recordSize)
			}
		}
	}
	clock.Set(start.Add(days * 24 * time.Hour))
	total := accepted[0] + accepted[1] + accepted[2] + accepted[3]
	t.Logf("%s: %d messages over %d simulated days in %v (%.0f/s), %d refused (disk of %d MiB full), log %d MiB, quota %d MiB",
		policy, n, days, time.Since(began).Round(time.Millisecond), float64(n)/time.Since(began).Seconds(), refused,
		disk.capacity>>20, local.WritePos()>>20, quota>>20)

	// Offline: retention runs (every 20 ms) with the clock at three days.
	minOffsets := func() (mins [4]int64) {
		for q := range 4 {
			mins[q], _ = local.MinOffset(ctx, mq.MessageQueue{Topic: "T", BrokerName: "gw1", QueueID: int32(q)})
		}
		return mins
	}
	s := u.Stats().Up[0]
	// With DropOldest a forwarder that read again after retention deleted its next
	// messages counted them lost already.
	if s.State != BackingOff || s.Backlog+s.Lost != int64(total) || policy == RejectNew && s.Lost != 0 {
		t.Fatalf("offline: state %v, backlog %d, lost %d; want backing off with %d", s.State, s.Backlog, s.Lost, total)
	}
	switch policy {
	case RejectNew:
		waitFor(t, 30*time.Second, "the backlog's age", func() bool { return u.Stats().Up[0].OldestAge >= days*24*time.Hour-time.Hour })
		time.Sleep(200 * time.Millisecond) // ten retention passes
		if m := minOffsets(); m != [4]int64{} {
			t.Fatalf("retention deleted up to queue offsets %v of what was not forwarded", m)
		}
		if refused == 0 || disk.full.Load() == 0 {
			t.Fatalf("no send refused on a full disk of %d bytes", disk.capacity)
		}
	case DropOldest:
		// Retention by age keeps two days, give or take a segment of messages.
		span := time.Duration(float64(days*24*time.Hour) * float64(seg) / float64(written))
		waitFor(t, 30*time.Second, "retention by age", func() bool {
			for q, off := range minOffsets() {
				res, err := local.Pull(ctx, mq.PullRequest{Group: "CHECK", Queue: mq.MessageQueue{Topic: "T", BrokerName: "gw1", QueueID: int32(q)},
					Offset: off, MaxMsgs: 1, Filter: "*"})
				if err != nil || len(res.Messages) == 0 || clock.Now().Sub(time.UnixMilli(res.Messages[0].StoreTime)) > 48*time.Hour+span {
					return false
				}
			}
			st, _ := local.StoreStats()
			return st.SegmentBytes <= quota+seg
		})
		if refused != 0 {
			t.Fatalf("%d sends refused: drop_oldest should have kept to the age and the quota", refused)
		}
	}
	t.Logf("%s offline: backlog %d, oldest %v, queue min offsets %v", policy, u.Stats().Up[0].Backlog,
		u.Stats().Up[0].OldestAge.Round(time.Minute), minOffsets())

	// The link comes back: the backlog drains, the heap stays bounded.
	h := &hub{t: t, dir: t.TempDir(), so: bulkStore}
	began = time.Now()
	h.start(addr)
	t.Cleanup(h.stop)
	var peak uint64
	samples := 0
	waitFor(t, 600*time.Second, "backlog drained", func() bool {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		samples++
		return u.Stats().Up[0].Backlog == 0
	})
	took := time.Since(began)
	s = u.Stats().Up[0]
	t.Logf("%s: drained %d messages in %v (%.0f/s), lost %d; heap in use at most %d MiB (%d samples)",
		policy, s.Forwarded, took.Round(time.Millisecond), float64(s.Forwarded)/took.Seconds(), s.Lost, peak>>20, samples)
	if peak > heapBound {
		t.Errorf("heap in use reached %d MiB while draining, bound %d MiB", peak>>20, heapBound>>20)
	}
	if s.Forwarded+s.Lost != int64(total) || policy == RejectNew && s.Lost != 0 || policy == DropOldest && s.Lost == 0 {
		t.Fatalf("%d accepted, stats %+v", total, s)
	}
	checkDrained(t, h.b, accepted, policy == RejectNew, s.Forwarded)
}

// checkDrained reads the hub's topic T: each queue q holds the test's messages "q i" in
// increasing i, ending with the last stored locally (accepted[q]-1), every one of them
// from 0 when all must be there, forwarded messages in all.
func checkDrained(t *testing.T, hub *edge.Broker, accepted [4]int, all bool, forwarded int64) {
	t.Helper()
	var got int64
	for q := range int32(4) {
		r := newQueueReader(t, hub, "T", q)
		last := -1
		for m := r.next(); m != nil; m = r.next() {
			var mq, i int
			if _, err := fmt.Sscan(string(m.Body[:min(len(m.Body), 24)]), &mq, &i); err != nil || mq != int(q) {
				t.Fatalf("queue %d, offset %d: body %q", q, m.QueueOffset, m.Body)
			}
			if i <= last || all && i != last+1 {
				t.Fatalf("queue %d: message %d after %d", q, i, last)
			}
			last = i
			got++
		}
		if last != accepted[q]-1 {
			t.Fatalf("queue %d: last message upstream %d, want %d", q, last, accepted[q]-1)
		}
	}
	if got != forwarded {
		t.Fatalf("%d messages upstream, %d forwarded", got, forwarded)
	}
}
