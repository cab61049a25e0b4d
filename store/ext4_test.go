//go:build linux

package store

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// Real power cuts on ext4 (TestExt4PowerCut).
//
// CrashFS (store/internal/vfstest) proves the store against our model of a file system:
// every unsynced byte may be lost or kept, sector by sector, one sector torn, names lost
// unless their directory was synced. This test proves it against the real one: ext4 on a
// loop device, shut down the way xfstests simulates a crash (EXT4_IOC_SHUTDOWN with
// EXT4_GOING_FLAGS_NOLOGFLUSH: from that instant the file system takes no more writes and
// its journal is not flushed, so what had not been written to the device or committed in
// the journal is lost), then unmounted and mounted again (journal replay), as a reboot
// after a power cut leaves it.
//
// What it can catch: a missing fsync (data, file size or directory entry), fsyncs in the
// wrong order, recovery that mishandles what ext4 really leaves (renames committed by the
// journal without the data they name, preallocated extents that read as zeros, pages the
// kernel wrote back on its own before anything asked), and recovery that cannot cope with
// what it finds again and again, cut after cut, on one data dir.
//
// What it cannot: the device under the loop driver is the host's page cache, which the
// shutdown does not drop, so every page the kernel wrote back before the cut survives whole:
// no torn sectors, no reordering below the file system, no lost device cache. Nor does it
// choose what is lost: the kernel's writeback timing does, and most cuts find little
// unsynced data. CrashFS adds those cases, deterministically from a seed: torn and random
// sectors, any subset of unsynced sectors and names, and cuts at exact points (right after a
// roll, between two fsyncs), thousands of times a second.
//
// One more limit, of the kernel: an fdatasync still in flight when the shutdown lands can
// return success for a page that does not survive (seen with plain pwrite and mmap writes
// too). So an acknowledgement stamped after the moment of the cut proves nothing; such
// acknowledgements are counted apart, not checked.
//
// EDGEMQ_EXT4_CUTS=N runs N cuts per flush mode; it needs root, a free loop device and
// mkfs.ext4 (scripts/test-ext4.sh runs it). A child process (TestExt4PowerCutChild) appends
// and writes each acknowledgement, stamped with CLOCK_MONOTONIC, to a side file outside the
// image; the parent cuts at a random moment (or right after a segment roll, a retention
// delete or a queue-file roll it sees in the directory), kills the child, remounts, reopens
// the store and checks it: every message acknowledged before the cut in sync mode (every
// other sync-mode child with a Linger of 2 ms), and below the durable position the child saw
// before the cut in async mode, is there byte for byte; async mode loses nothing acknowledged longer than its flush window (asyncWindow)
// before the cut; the queues and the log agree both ways; the .broken files stay in their
// budget.

// ext4IOCShutdown is EXT4_IOC_SHUTDOWN, _IOR('X', 125, __u32), with the generic ioctl
// encoding (amd64, arm64, arm, 386, riscv64; mips and powerpc encode it otherwise).
const ext4IOCShutdown = 0x8004587d

// ext4Options are the store options of the ext4 cuts: small segments and a small quota, so
// that segment rolls, retention and queue-file rolls happen every second or so.
func ext4Options(mode commitlog.FlushMode) Options {
	return Options{Flush: mode, FlushInterval: ext4FlushInterval, SegmentSize: 256 << 10, MaxBytes: 4 << 20, MaxMessageSize: 16 << 10, QueueSegmentEntries: 64,
		MaxAge: -1, MaxUsedRatio: -1, QueueFlushInterval: 100 * time.Millisecond}
}

// ext4FlushInterval is the async flush interval of the ext4 cuts, and asyncWindow bounds what
// an async-mode cut may lose: messages acknowledged up to this long before it, the flush
// interval plus time for the flush's fsync on a busy machine.
const (
	ext4FlushInterval = 500 * time.Millisecond
	asyncWindow       = ext4FlushInterval + 1500*time.Millisecond
)

// monoNow returns CLOCK_MONOTONIC in ns: the clock the child and the parent share.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux
	}
	return ts.Nano()
}

// sideWriter appends whole lines to the side file, one write each.
type sideWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *sideWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Write(p)
}

// TestExt4PowerCutChild is the child of TestExt4PowerCut: it appends until killed and writes
// to the side file a line per acknowledged message ("A id topic queue offset pos size
// stamp"), in async mode a line per durable position it sees ("D pos stamp"), and the
// store's log (retention deletes among it).
func TestExt4PowerCutChild(t *testing.T) {
	dir := os.Getenv("EDGEMQ_EXT4_DIR")
	if dir == "" {
		t.Skip("child process of TestExt4PowerCut")
	}
	f, err := os.OpenFile(os.Getenv("EDGEMQ_EXT4_SIDE"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Println("SIDEFAIL", err)
		os.Exit(3)
	}
	side := &sideWriter{f: f}
	mode, _ := commitlog.ParseFlushMode(os.Getenv("EDGEMQ_EXT4_MODE"))
	base, _ := strconv.ParseInt(os.Getenv("EDGEMQ_EXT4_BASE"), 10, 64)
	o := ext4Options(mode)
	o.Linger, _ = time.ParseDuration(os.Getenv("EDGEMQ_EXT4_LINGER"))
	o.WriteBuffer, _ = strconv.ParseInt(os.Getenv("EDGEMQ_EXT4_WBUF"), 10, 64)
	o.Logger = slog.New(slog.NewTextHandler(side, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := Open(dir, &o)
	if err != nil {
		fmt.Println("OPENFAIL", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	if mode == commitlog.FlushAsync {
		go func() {
			last := int64(-1)
			for {
				if d := s.Log().Durable(); d != last {
					fmt.Fprintf(side, "D %d %d\n", d, monoNow())
					last = d
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for w := int64(0); w < 4; w++ {
		go func() {
			var line []byte
			for i := int64(0); ; i++ {
				id := base + w*1_000_000 + i
				batch := []*Message{crashMessage(id)}
				if i%5 == 0 {
					batch = append(batch, crashMessage(id+500_000)) // a batch spanning queues
				}
				if err := s.Append(batch); err != nil {
					return // the file system is shut down
				}
				now := monoNow()
				line = line[:0]
				for _, m := range batch {
					id, _ := crashID(m.Body)
					line = fmt.Appendf(line, "A %d %s %d %d %d %d %d\n", id, m.Topic, m.QueueID, m.QueueOffset, m.Pos, m.Size, now)
				}
				side.Write(line)
			}
		}()
	}
	select {} // until killed
}

// ext4Ack is an acknowledgement from the side file.
type ext4Ack struct {
	ack
	stamp int64
}

// sideFile is what a child wrote to its side file.
type sideFile struct {
	acks     []ext4Ack
	durable  [][2]int64 // position, stamp
	retained []int64    // bases of the segments retention deleted
	logs     []string
}

var retentionLine = regexp.MustCompile(`msg="deleting segment[^"]*".* segment=(\S+)`)

func readSideFile(t *testing.T, path string) sideFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sf sideFile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "A "):
			fs := strings.Fields(l)
			if len(fs) != 8 {
				continue // a line the kill cut short
			}
			a, ok := parseAck("ACK " + strings.Join(fs[1:7], " "))
			stamp, err := strconv.ParseInt(fs[7], 10, 64)
			if ok && err == nil {
				sf.acks = append(sf.acks, ext4Ack{a, stamp})
			}
		case strings.HasPrefix(l, "D "):
			var d [2]int64
			if _, err := fmt.Sscanf(l, "D %d %d", &d[0], &d[1]); err == nil {
				sf.durable = append(sf.durable, d)
			}
		case strings.HasPrefix(l, "time="):
			sf.logs = append(sf.logs, l)
			if m := retentionLine.FindStringSubmatch(l); m != nil {
				if base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(m[1]), ".log"), 10, 64); err == nil {
					sf.retained = append(sf.retained, base)
				}
			}
		}
	}
	return sf
}

// ext4Image is an ext4 file system in an image file img on a loop device, mounted at mnt.
type ext4Image struct {
	img, loop, mnt string
}

// newExt4Image makes and mounts an ext4 image of size bytes (sparse), or skips the test
// when the machine cannot.
func newExt4Image(t testing.TB, size int64) *ext4Image {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mount")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	img := filepath.Join(t.TempDir(), "ext4.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	im := &ext4Image{img: img, mnt: t.TempDir()}
	if err := im.attach(); err != nil {
		t.Skipf("no loop device: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(im.mnt, 0); err != nil {
			t.Logf("unmount %s: %v: detaching it lazily", im.mnt, err)
			unix.Unmount(im.mnt, unix.MNT_DETACH)
		}
		if out, err := exec.Command("losetup", "-d", im.loop).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", im.loop, err, out)
		}
	})
	if err := im.mount(); err != nil {
		t.Fatal(err)
	}
	return im
}

func (im *ext4Image) mount() error {
	if err := unix.Mount(im.loop, im.mnt, "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", im.loop, im.mnt, err)
	}
	return nil
}

// attach puts the image on a free loop device.
func (im *ext4Image) attach() error {
	out, err := exec.Command("losetup", "-f", "--show", im.img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("losetup -f %s: %w: %s", im.img, err, out)
	}
	im.loop = strings.TrimSpace(string(out))
	return nil
}

// remount unmounts the file system and mounts it again, which replays its journal. As after
// a reboot, the image comes back on a fresh loop device: a process in another mount
// namespace (`ip netns exec` copies the mount table, and / is a private mount here) may
// still pin the shut-down file system, and a mount of the same device would get that
// superblock back, failing every read with EIO.
func (im *ext4Image) remount() error {
	var err error
	for range 50 { // a killed child's files may take a moment to close
		if err = unix.Unmount(im.mnt, 0); !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", im.mnt, err)
	}
	// A device still in use elsewhere is detached when its last user lets go.
	if out, err := exec.Command("losetup", "-d", im.loop).CombinedOutput(); err != nil {
		return fmt.Errorf("losetup -d %s: %w: %s", im.loop, err, out)
	}
	if err := im.attach(); err != nil {
		return err
	}
	return im.mount()
}

// shutdown cuts the power: the file system takes no more writes and does not flush its
// journal. It returns the moment just before, by monoNow.
func (im *ext4Image) shutdown() (int64, error) {
	fd, err := unix.Open(im.mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	at := monoNow()
	if err := unix.IoctlSetPointerInt(fd, ext4IOCShutdown, unix.FS_SHUTDOWN_FLAGS_NOLOGFLUSH); err != nil {
		return 0, fmt.Errorf("EXT4_IOC_SHUTDOWN: %w", err)
	}
	return at, nil
}

// The moments a cut is aimed at.
const (
	cutAnyTime   = iota // a random moment
	cutRoll             // a new segment name appeared
	cutRetention        // a segment was deleted
	cutQueueRoll        // a new consume queue file appeared
	cutKinds
)

var cutKindNames = [cutKinds]string{"random moment", "segment roll", "retention", "queue-file roll"}

// waitDirEvent polls the data dir until the event of kind happens, and reports whether it
// did before timeout.
func waitDirEvent(dir string, kind int, timeout time.Duration) bool {
	list := func() map[string]bool {
		names := map[string]bool{}
		if kind == cutQueueRoll {
			files, _ := filepath.Glob(filepath.Join(dir, queuesDir, "*", "*", "*.cq"))
			for _, f := range files {
				names[f] = true
			}
			return names
		}
		ents, _ := os.ReadDir(filepath.Join(dir, commitlogDir))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				names[e.Name()] = true
			}
		}
		return names
	}
	before := list()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		now := list()
		for name := range now {
			if !before[name] && kind != cutRetention {
				return true
			}
		}
		for name := range before {
			if !now[name] && kind == cutRetention {
				return true
			}
		}
		before = now
	}
	return false
}

// ext4Totals sums what the cuts of one flush mode saw.
type ext4Totals struct {
	cuts          [cutKinds]int
	missed        int   // aimed cuts whose event did not come in time (cut anyway)
	checked       int   // acknowledgements that had to survive their cut (and the later ones)
	afterCut      int   // acknowledgements stamped after the cut: not checked
	afterCutLost  int   // of those, not in the reopened store
	asyncLost     int   // async acknowledgements before the cut, above the durable position, lost
	asyncWindowNs int64 // the oldest of those, before the cut
	rec           RecoveryStats
	maxBroken     int64
}

// TestExt4PowerCut cuts the power of a real ext4 file system (see the comment at the top of
// this file) EDGEMQ_EXT4_CUTS times per flush mode while a child process appends; the children
// take turns at the default write buffer (Options.WriteBuffer), none and a small one.
func TestExt4PowerCut(t *testing.T) {
	cuts, _ := strconv.Atoi(os.Getenv("EDGEMQ_EXT4_CUTS"))
	if cuts <= 0 {
		t.Skip("set EDGEMQ_EXT4_CUTS=N for N real power cuts per flush mode on ext4 (root, a loop device, mkfs.ext4; scripts/test-ext4.sh)")
	}
	im := newExt4Image(t, 512<<20)
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	sideDir := t.TempDir() // outside the image
	for _, mode := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			start := time.Now()
			tot := ext4Cuts(t, im, mode, cuts, rng, sideDir)
			t.Logf("%d cuts in %v: %d at a random moment, %d after a segment roll, %d after a retention delete, %d after a queue-file roll (%d of those aimed cuts came at a random moment instead)",
				cuts, time.Since(start).Round(time.Second), tot.cuts[cutAnyTime], tot.cuts[cutRoll], tot.cuts[cutRetention], tot.cuts[cutQueueRoll], tot.missed)
			t.Logf("%d acknowledged messages had to survive their cut and every later one (unless retention deleted them), and did; %d acknowledgements stamped after the cut were not checked, and %d of those messages were lost",
				tot.checked, tot.afterCut, tot.afterCutLost)
			if mode == commitlog.FlushAsync {
				t.Logf("async: %d acknowledged messages above the durable position lost, acknowledged at most %v before the cut", tot.asyncLost, time.Duration(tot.asyncWindowNs).Round(time.Millisecond))
			}
			r := tot.rec
			t.Logf("recovery cut %d records, %d bytes, %d queue entries in all; removed %d empty segments; made %d .broken files, deleted %d; .broken bytes at most %d",
				r.Records, r.Bytes, r.QueueEntries, r.EmptyRemoved, r.BrokenMade, r.BrokenDeleted, tot.maxBroken)
		})
	}
}

// ext4Cuts runs the cuts of one flush mode, in a data dir of its own on the image.
func ext4Cuts(t *testing.T, im *ext4Image, mode commitlog.FlushMode, cuts int, rng *rand.Rand, sideDir string) ext4Totals {
	dir := filepath.Join(im.mnt, mode.String())
	var tot ext4Totals
	var acked []ack              // messages that must be in the store, unless retention deleted them
	retained := map[int64]bool{} // segment bases retention deleted
	var sf sideFile              // the last cut's
	var logs lockedLog           // the reopening store's log, of the last cut
	var open *Store              // the store the test has open, if any
	defer func() {
		if open != nil { // a check failed: let the next flush mode unmount
			open.Close()
		}
		if t.Failed() {
			ext4Dump(t, sf, logs.String())
		}
	}()
	for cut := 0; cut < cuts; cut++ {
		sidePath := filepath.Join(sideDir, fmt.Sprintf("%s-%d", mode, cut))
		linger := "0s" // every other sync-mode child lingers: an ack must still mean durable
		if mode == commitlog.FlushSync && cut%2 == 1 {
			linger = "2ms"
		}
		// The write buffer: the default (sync: 1 MiB, async: none), none, or 64 KiB; the
		// same guarantees either way.
		wbuf := [3]int{0, -1, 64 << 10}[cut%3]
		cmd, _ := startChild(t, "TestExt4PowerCutChild", "EDGEMQ_EXT4_DIR="+dir, "EDGEMQ_EXT4_SIDE="+sidePath,
			"EDGEMQ_EXT4_MODE="+mode.String(), fmt.Sprintf("EDGEMQ_EXT4_BASE=%d", int64(cut)*10_000_000), "EDGEMQ_EXT4_LINGER="+linger, fmt.Sprintf("EDGEMQ_EXT4_WBUF=%d", wbuf))

		kind := cut % cutKinds
		if kind == cutAnyTime {
			// Async runs may outlast its loss window, where a flusher that stalled shows.
			limit := 1500 * time.Millisecond
			if mode == commitlog.FlushAsync {
				limit = 2 * asyncWindow
			}
			time.Sleep(time.Duration(rng.Int64N(int64(limit))))
		} else {
			time.Sleep(time.Duration(20+rng.IntN(200)) * time.Millisecond)
			if !waitDirEvent(dir, kind, 5*time.Second) {
				tot.missed++
			}
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
		tot.cuts[kind]++
		cutAt, err := im.shutdown()
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if err := im.remount(); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}

		sf = readSideFile(t, sidePath)
		for _, b := range sf.retained {
			retained[b] = true
		}
		durable := int64(-1) // async: the durable position the child saw before the cut
		for _, d := range sf.durable {
			if d[1] < cutAt {
				durable = max(durable, d[0])
			}
		}
		var maybe []ext4Ack // acknowledged, but a cut may take them back
		for _, a := range sf.acks {
			switch {
			case a.stamp >= cutAt:
				tot.afterCut++
				maybe = append(maybe, a)
			case mode == commitlog.FlushSync || a.pos+int64(a.size) <= durable:
				acked = append(acked, a.ack)
				tot.checked++
			default:
				maybe = append(maybe, a)
			}
		}

		o := testOptions(ext4Options(mode))
		o.MetaNoSync = false
		o.RetentionInterval = time.Hour // nothing is deleted while the test reads
		logs.Reset()
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s, err := Open(dir, &o)
		if err != nil {
			t.Fatalf("cut %d (%s): reopen: %v", cut, cutKindNames[kind], err)
		}
		open = s
		// What retention deleted is gone, and only that.
		kept := acked[:0]
		for _, a := range acked {
			switch {
			case a.pos >= s.Log().MinPos():
				kept = append(kept, a)
			case !retained[a.pos/o.SegmentSize*o.SegmentSize]:
				t.Fatalf("cut %d (%s): message %d at position %d, below the log's start %d, is gone, but retention never deleted its segment",
					cut, cutKindNames[kind], a.id, a.pos, s.Log().MinPos())
			}
		}
		acked = kept
		verifyStore(t, s, acked)
		verifyLogIndexed(t, s)
		for _, a := range maybe {
			if found := ext4Find(t, s, a.ack); found {
				acked = append(acked, a.ack) // on disk now: it must stay
			} else if a.stamp >= cutAt {
				tot.afterCutLost++
			} else {
				tot.asyncLost++
				tot.asyncWindowNs = max(tot.asyncWindowNs, cutAt-a.stamp)
				if age := time.Duration(cutAt - a.stamp); age > asyncWindow {
					t.Fatalf("cut %d (%s): message %d, acknowledged %v before the cut, is lost: async mode may lose only its flush window (%v, and %v for the fsync)",
						cut, cutKindNames[kind], a.id, age, ext4FlushInterval, asyncWindow-ext4FlushInterval)
				}
			}
		}
		r := s.Recovery()
		names, bytes := brokenFiles(t, vfs.OS, dir)
		if bytes > 2*o.SegmentSize || r.BrokenBytes != bytes {
			t.Fatalf("cut %d: %d .broken files of %d bytes (recovery says %d), over the default budget of %d", cut, names, bytes, r.BrokenBytes, 2*o.SegmentSize)
		}
		tot.maxBroken = max(tot.maxBroken, bytes)
		tot.rec.Records += r.Records
		tot.rec.Bytes += r.Bytes
		tot.rec.EmptyRemoved += r.EmptyRemoved
		tot.rec.BrokenMade += r.BrokenMade
		tot.rec.BrokenDeleted += r.BrokenDeleted
		tot.rec.QueueEntries += r.QueueEntries
		open = nil
		if err := s.Close(); err != nil {
			t.Fatalf("cut %d: close: %v", cut, err)
		}
		if testing.Verbose() {
			t.Logf("cut %d (%s): %d acknowledgements, %d must survive; recovery cut %d records, %d bytes, %d queue entries, removed %d empty segments, made %d .broken files and deleted %d (%d bytes left)",
				cut, cutKindNames[kind], len(sf.acks), len(acked), r.Records, r.Bytes, r.QueueEntries, r.EmptyRemoved, r.BrokenMade, r.BrokenDeleted, r.BrokenBytes)
		}
	}
	return tot
}

// ext4Find reports whether the acknowledged message a is in s, byte for byte where it was.
func ext4Find(t *testing.T, s *Store, a ack) bool {
	t.Helper()
	res, err := s.GetMessages(a.topic, a.queue, a.offset, 1, nil)
	if err != nil || res.Status != Found || len(res.Messages) != 1 {
		return false
	}
	m := res.Messages[0]
	id, _ := crashID(m.Body)
	return id == a.id && m.QueueOffset == a.offset && m.Pos == a.pos && m.Size == a.size
}

// verifyLogIndexed checks that every record of the log is in its consume queue at its
// offset: the queues cover the log (verifyStore checks that they hold only its records).
func verifyLogIndexed(t *testing.T, s *Store) {
	t.Helper()
	r := s.log.NewReader()
	defer r.Close()
	for pos := s.log.MinPos(); ; {
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			return
		}
		if err != nil {
			t.Fatalf("commitlog walk at %d: %v", pos, err)
		}
		pos = rec.Next
		h, err := decodeHeader(rec.Payload)
		if err != nil {
			t.Fatalf("record at %d does not decode: %v", rec.Pos, err)
		}
		res, err := s.GetMessages(string(h.topic), h.queueID, h.queueOffset, 1, nil)
		if err != nil || res.Status != Found || len(res.Messages) != 1 || res.Messages[0].Pos != rec.Pos {
			t.Fatalf("record at %d (%s/%d@%d) is not in its consume queue: %v %v", rec.Pos, h.topic, h.queueID, h.queueOffset, res.Status, err)
		}
	}
}

// lockedLog is a log a store writes and a failing test reads.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ext4Dump logs the end of what the child and the reopening store logged, for a failure.
func ext4Dump(t *testing.T, sf sideFile, reopen string) {
	t.Helper()
	logs := sf.logs[max(0, len(sf.logs)-40):]
	t.Logf("the child's last log lines:\n%s", strings.Join(logs, "\n"))
	t.Logf("the reopening store's log:\n%s", reopen)
}
