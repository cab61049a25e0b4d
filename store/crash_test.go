package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// The messages of the crash tests carry their id in their body, so a verifier can rebuild the
// exact bytes of any message it finds.
const crashTopics = 3

func crashMessage(id int64) *Message {
	r := rand.New(rand.NewPCG(uint64(id), 7))
	body := fmt.Appendf(nil, "id=%d;", id)
	pad := make([]byte, r.IntN(300))
	var x uint64
	for i := range pad { // letters from 8 bytes of each random word: verifiers make many
		if i%8 == 0 {
			x = r.Uint64()
		}
		pad[i] = byte('a' + x%26)
		x >>= 8
	}
	tags := []string{"", "A", "B"}[r.IntN(3)]
	return &Message{Topic: fmt.Sprintf("crash%d", id%crashTopics), QueueID: int32(r.IntN(3)), Tags: tags, Body: append(body, pad...)}
}

func crashID(body []byte) (int64, bool) {
	s, ok := bytes.CutPrefix(body, []byte("id="))
	if !ok {
		return 0, false
	}
	i := bytes.IndexByte(s, ';')
	if i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(string(s[:i]), 10, 64)
	return id, err == nil
}

// ack is what a writer learned of a stored message.
type ack struct {
	id     int64
	topic  string
	queue  int32
	offset int64
	pos    int64
	size   int32
}

// verifyStore checks that the store serves only whole, known messages, that every acked
// message is there byte for byte at its offset and position, that every queue is dense from
// min to max, and that the commitlog walks from start to end without a damaged record.
func verifyStore(t testing.TB, s *Store, acked []ack) {
	t.Helper()
	waitDispatched(t, s)
	r := s.log.NewReader()
	for pos := s.log.MinPos(); ; {
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			break
		}
		if err != nil {
			t.Fatalf("commitlog walk at %d: %v", pos, err)
		}
		pos = rec.Next
	}
	r.Close()
	found := map[ackKey]Message{}
	for _, qi := range s.Queues("") {
		off := qi.MinOffset
		for off < qi.MaxOffset {
			res, err := s.GetMessages(qi.Topic, qi.QueueID, off, 32, nil)
			if err != nil {
				t.Fatalf("GetMessages %s/%d@%d: %v", qi.Topic, qi.QueueID, off, err)
			}
			if res.Status != Found {
				t.Fatalf("queue %s/%d offset %d of [%d,%d): %v", qi.Topic, qi.QueueID, off, qi.MinOffset, qi.MaxOffset, res.Status)
			}
			for _, m := range res.Messages {
				if m.QueueOffset != off {
					t.Fatalf("queue %s/%d: got offset %d, want %d (not dense)", qi.Topic, qi.QueueID, m.QueueOffset, off)
				}
				id, ok := crashID(m.Body)
				want := crashMessage(id)
				if !ok || !bytes.Equal(m.Body, want.Body) || m.Tags != want.Tags || m.Topic != want.Topic || m.QueueID != want.QueueID {
					t.Fatalf("queue %s/%d offset %d: message %q is not one that was written", qi.Topic, qi.QueueID, off, m.Body)
				}
				found[ackKey{m.Topic, m.QueueID, m.QueueOffset}] = m
				off++
			}
		}
	}
	for _, a := range acked {
		m, ok := found[ackKey{a.topic, a.queue, a.offset}]
		if !ok {
			t.Fatalf("acknowledged message %d (%s/%d@%d, pos %d) is lost", a.id, a.topic, a.queue, a.offset, a.pos)
		}
		if id, _ := crashID(m.Body); id != a.id || m.Pos != a.pos || m.Size != a.size {
			t.Fatalf("acknowledged message %d at %s/%d@%d: found message %d at pos %d", a.id, a.topic, a.queue, a.offset, id, m.Pos)
		}
	}
}

type ackKey struct {
	topic  string
	queue  int32
	offset int64
}

// childCommand runs this test binary as a child, through EDGEMQ_TEST_EXEC_WRAPPER (qemu-user
// for cross-architecture runs) when set.
func childCommand(t testing.TB, run string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=^" + run + "$", "-test.v=false"}
	var cmd *exec.Cmd
	if w := os.Getenv("EDGEMQ_TEST_EXEC_WRAPPER"); w != "" {
		cmd = exec.Command(w, append([]string{exe}, args...)...)
	} else {
		cmd = exec.Command(exe, args...)
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startChild starts this test binary as a child running test run (see childCommand) and
// waits up to a minute for its first line, which must be READY; it fails t otherwise. It
// returns the child and the channel of its further stdout lines, which closes with the
// child's stdout.
func startChild(t testing.TB, run string, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := childCommand(t, run, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var said string
	select {
	case said = <-lines:
	case <-time.After(time.Minute):
		said = "nothing for a minute"
	}
	if said != "READY" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s: child said %q, want READY", run, said)
	}
	return cmd, lines
}

// TestCrashChild is the child of TestCrashKill: it appends in sync mode until killed and
// prints one line per acknowledged message.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("EDGEMQ_CRASH_DIR")
	if dir == "" {
		t.Skip("child process of TestCrashKill")
	}
	base, _ := strconv.ParseInt(os.Getenv("EDGEMQ_CRASH_BASE"), 10, 64)
	s, err := Open(dir, &Options{SegmentSize: 256 << 10, MaxMessageSize: 16 << 10, QueueSegmentEntries: 128, MetaNoSync: true})
	if err != nil {
		fmt.Println("OPENFAIL", err)
		os.Exit(3)
	}
	fmt.Println("READY")
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := int64(0); w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				id := base + w*1_000_000 + i
				batch := []*Message{crashMessage(id)}
				if i%5 == 0 {
					batch = append(batch, crashMessage(id+500_000)) // a batch spanning queues
				}
				if err := s.Append(batch); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(4)
				}
				mu.Lock()
				for _, m := range batch {
					id, _ := crashID(m.Body)
					fmt.Fprintf(out, "ACK %d %s %d %d %d %d\n", id, m.Topic, m.QueueID, m.QueueOffset, m.Pos, m.Size)
				}
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestCrashKill kills (SIGKILL) a child appending in sync mode at random moments, 20 times (5
// with -short), and after each kill reopens the store: every acknowledged message is there
// byte for byte, no partial record is served, and the consume queues agree with the commitlog.
//
// What it can prove: a kill ends the process, not the kernel, so this runs recovery on the
// real OS and file system after a process that stopped at any instruction: a frame half
// copied into the mapping, queues behind the log and a dispatch checkpoint behind the queues,
// a roll cut short, the data dir's lock left by a dead process. What it cannot: every byte the
// child wrote is in the page cache and reaches the disk, fsynced or not, and so do the names
// it created and renamed. Nothing unsynced is lost, so a missing or misordered fsync passes:
// an fsync skipped, appenders released before the fsync that covers them, a checkpoint written
// before the data it covers. The power-cut tests on CrashFS, which lose what was not made
// durable, are for those (TestPowerCut, TestPowerCutAtEveryStep).
func TestCrashKill(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var acked []ack
	for round := 0; round < rounds; round++ {
		cmd, lines := startChild(t, "TestCrashChild", "EDGEMQ_CRASH_DIR="+dir, fmt.Sprintf("EDGEMQ_CRASH_BASE=%d", int64(round)*10_000_000))
		kill := time.After(time.Duration(20+rng.IntN(300)) * time.Millisecond)
		var roundAcks int
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if a, ok := parseAck(l); ok {
					acked = append(acked, a)
					roundAcks++
				}
			case <-kill:
				cmd.Process.Kill()
				kill = nil
			}
		}
		cmd.Wait()
		s, err := Open(dir, &Options{SegmentSize: 256 << 10, MaxMessageSize: 16 << 10, QueueSegmentEntries: 128, MetaNoSync: true})
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		verifyStore(t, s, acked)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d acks (%d in all)", round, roundAcks, len(acked))
	}
}

func parseAck(l string) (ack, bool) {
	f := strings.Fields(l)
	if len(f) != 7 || f[0] != "ACK" {
		return ack{}, false
	}
	var a ack
	var q, size int64
	a.id, _ = strconv.ParseInt(f[1], 10, 64)
	a.topic = f[2]
	q, _ = strconv.ParseInt(f[3], 10, 32)
	a.offset, _ = strconv.ParseInt(f[4], 10, 64)
	a.pos, _ = strconv.ParseInt(f[5], 10, 64)
	size, _ = strconv.ParseInt(f[6], 10, 32)
	a.queue, a.size = int32(q), int32(size)
	return a, true
}

// crashSeed returns the starting value of a power-cut test's random number generator,
// which picks its cut moments: EDGEMQ_SEED, else the clock's. The test logs it, so that a
// failing run can be repeated.
func crashSeed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("EDGEMQ_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (rerun with EDGEMQ_SEED)", seed)
	return seed
}

// appendAcked appends the next crash message (id *next) to s and records it in *acked
// once Append returns, both under mu; false when the append failed (the store is closing).
func appendAcked(s *Store, mu *sync.Mutex, next *int64, acked *[]ack) bool {
	mu.Lock()
	id := *next
	*next++
	mu.Unlock()
	m := crashMessage(id)
	if err := s.Append([]*Message{m}); err != nil {
		return false
	}
	mu.Lock()
	*acked = append(*acked, ack{id, m.Topic, m.QueueID, m.QueueOffset, m.Pos, m.Size})
	mu.Unlock()
	return true
}

// TestPowerCut cuts the power (CrashFS: every write not covered by a completed fsync may be
// lost, and one sector in flight is torn) at hundreds of random moments while appenders run.
// In sync mode, with or without Linger, every acknowledged message survives; in async mode every message below the
// durable position at the cut survives; in both, the store reopens whole, serving only
// messages that were written, with dense queues, and the .broken files recovery leaves stay
// within their default budget of two segments.
func TestPowerCut(t *testing.T) {
	cuts := 300
	if testing.Short() {
		cuts = 40
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, c := range []struct {
		name   string
		mode   commitlog.FlushMode
		linger time.Duration
	}{
		{"sync", commitlog.FlushSync, 0},
		{"sync-linger", commitlog.FlushSync, 3 * time.Millisecond},
		{"async", commitlog.FlushAsync, 0},
	} {
		mode := c.mode
		t.Run(c.name, func(t *testing.T) {
			fs := vfstest.NewCrashFS()
			dir := t.TempDir() // the same path inside every CrashFS; lock and meta.db on disk
			var acked []ack
			next := int64(0)
			for cut := 0; cut < cuts/2; cut++ {
				o := testOptions(Options{FS: fs, Flush: mode, Linger: c.linger, SegmentSize: 192 << 10, MaxMessageSize: 16 << 10, QueueSegmentEntries: 32,
					FlushInterval: 5 * time.Millisecond, QueueFlushInterval: 5 * time.Millisecond})
				if os.Getenv("EDGEMQ_DEBUG") != "" {
					o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
				}
				s, err := Open(dir, &o)
				if err != nil {
					t.Fatalf("cut %d: reopen after power cut: %v", cut, err)
				}
				verifyStore(t, s, acked)
				if n, bytes := brokenFiles(t, fs, dir); bytes > 2*o.SegmentSize {
					t.Fatalf("cut %d: %d .broken files of %d bytes, over the default MaxBrokenBytes %d", cut, n, bytes, 2*o.SegmentSize)
				}
				var mu sync.Mutex
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for w := 0; w < 3; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := 0; n < 60; n++ {
							select {
							case <-stop:
								return
							default:
							}
							if !appendAcked(s, &mu, &next, &acked) {
								return // the store is closing under us
							}
						}
					}()
				}
				time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
				mu.Lock()
				survivors := acked
				if mode == commitlog.FlushAsync {
					durable := s.log.Durable()
					survivors = nil
					for _, a := range acked {
						if a.pos+int64(a.size) <= durable {
							survivors = append(survivors, a)
						}
					}
				}
				survivors = append([]ack(nil), survivors...)
				cutFS := fs.Cut(rng)
				mu.Unlock()
				close(stop)
				wg.Wait()
				s.Close()
				fs = cutFS
				acked = survivors
			}
			s, err := Open(dir, &Options{FS: fs, SegmentSize: 192 << 10, MaxMessageSize: 16 << 10, QueueSegmentEntries: 32, MetaNoSync: true})
			if err != nil {
				t.Fatalf("final reopen: %v", err)
			}
			defer s.Close()
			verifyStore(t, s, acked)
			t.Logf("%d cuts, %d messages survive", cuts/2, len(acked))
		})
	}
}

// TestPowerCutReader cuts the power (CrashFS, as TestPowerCut) at random moments while
// appenders run in sync mode and a reader pulls every queue continuously, as a consumer
// would: every message the reader received before a cut is in the reopened store, byte for
// byte, at the same offset and position. (A consumer must never act on a message that a power
// cut takes back: in sync mode a record reaches its queue only once durable.) The log's
// fsyncs take about a millisecond, as a real disk's, so that a record spends that long
// written but not durable, where a reader that could see it would.
func TestPowerCutReader(t *testing.T) {
	cuts := 150
	if testing.Short() {
		cuts = 20
	}
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	slowLog := func(path string, dir bool) {
		if !dir && strings.Contains(path, string(os.PathSeparator)+commitlogDir+string(os.PathSeparator)) {
			time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Microsecond)
		}
	}
	fs := vfstest.NewCrashFS()
	dir := t.TempDir()
	var acked, received []ack
	next := int64(0)
	for cut := 0; cut < cuts; cut++ {
		o := testOptions(Options{FS: vfstest.SyncHookFS{FS: fs, Hook: slowLog}, SegmentSize: 192 << 10, MaxMessageSize: 16 << 10,
			QueueSegmentEntries: 32, QueueFlushInterval: 5 * time.Millisecond})
		s, err := Open(dir, &o)
		if err != nil {
			t.Fatalf("cut %d: reopen after power cut: %v", cut, err)
		}
		verifyStore(t, s, acked)
		verifyReceived(t, s, cut, received)
		var (
			mu   sync.Mutex // guards next, acked, received and cutDone
			wg   sync.WaitGroup
			stop = make(chan struct{})
		)
		cutDone := false
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if !appendAcked(s, &mu, &next, &acked) {
						return // the store is closing under us
					}
				}
			})
		}
		wg.Go(func() { // the reader
			from := map[ackKey]int64{}
			for _, qi := range s.Queues("") {
				from[ackKey{qi.Topic, qi.QueueID, 0}] = qi.MaxOffset
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := 0
				for topic := range crashTopics {
					for q := range int32(3) {
						k := ackKey{fmt.Sprintf("crash%d", topic), q, 0}
						res, err := s.GetMessages(k.topic, q, from[k], 32, nil)
						if err != nil || res.Status != Found {
							continue
						}
						from[k] = res.NextBeginOffset
						got += len(res.Messages)
						mu.Lock()
						if cutDone { // received after the cut: nothing to check
							mu.Unlock()
							return
						}
						for _, m := range res.Messages {
							id, _ := crashID(m.Body)
							received = append(received, ack{id, m.Topic, m.QueueID, m.QueueOffset, m.Pos, m.Size})
						}
						mu.Unlock()
					}
				}
				if got == 0 {
					runtime.Gosched()
				}
			}
		})
		time.Sleep(time.Duration(rng.IntN(10000)) * time.Microsecond)
		mu.Lock()
		survivors := append([]ack(nil), acked...)
		cutFS := fs.Cut(rng)
		cutDone = true // the reader adds nothing to received from now on
		mu.Unlock()
		close(stop)
		wg.Wait()
		s.Close()
		fs, acked = cutFS, survivors
	}
	s, err := Open(dir, &Options{FS: fs, SegmentSize: 192 << 10, MaxMessageSize: 16 << 10, QueueSegmentEntries: 32, MetaNoSync: true})
	if err != nil {
		t.Fatalf("final reopen: %v", err)
	}
	defer s.Close()
	verifyStore(t, s, acked)
	verifyReceived(t, s, cuts, received)
	t.Logf("%d cuts, %d messages read by the reader before a cut, %d acknowledged survive", cuts, len(received), len(acked))
}

// brokenFiles returns the number of .broken files in the commitlog of the data dir dir, and
// their bytes.
func brokenFiles(t testing.TB, fs vfs.FS, dir string) (int, int64) {
	t.Helper()
	logDir := filepath.Join(dir, commitlogDir)
	names, err := fs.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	n, total := 0, int64(0)
	for _, name := range names {
		if !strings.HasSuffix(name, ".broken") {
			continue
		}
		f, err := fs.OpenFile(filepath.Join(logDir, name), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		size, err := f.Size()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		n++
		total += size
	}
	return n, total
}

// verifyReceived checks that every message a reader received before a power cut is in the
// store after it, byte for byte, at the same queue offset and position.
func verifyReceived(t testing.TB, s *Store, cut int, received []ack) {
	t.Helper()
	for _, a := range received {
		res, err := s.GetMessages(a.topic, a.queue, a.offset, 1, nil)
		if err != nil || res.Status != Found || len(res.Messages) != 1 {
			t.Fatalf("after cut %d: message %d (%s/%d@%d, pos %d), read before the cut, is lost: %v, %v", cut, a.id, a.topic, a.queue, a.offset, a.pos, res.Status, err)
		}
		m := res.Messages[0]
		id, _ := crashID(m.Body)
		want := crashMessage(a.id)
		if id != a.id || m.QueueOffset != a.offset || m.Pos != a.pos || m.Size != a.size || !bytes.Equal(m.Body, want.Body) || m.Tags != want.Tags {
			t.Fatalf("after cut %d: message %d (%s/%d@%d, pos %d), read before the cut: found message %d at offset %d, pos %d", cut, a.id, a.topic, a.queue, a.offset, a.pos, id, m.QueueOffset, m.Pos)
		}
	}
}
