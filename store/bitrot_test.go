package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edgemq/edgemq/store/commitlog"
)

// TestBitRot stores messages, flips random bytes in the closed data dir (commitlog segments,
// consume-queue files and, now and then, the two checkpoints) and reopens it: the store must
// open, never serve a damaged message, never serve one twice or at the wrong offset, and
// account for every message it no longer serves. A run without damage (k=0) loses nothing.
// EDGEMQ_DEBUG=1 logs the flipped bytes and the store log of every run.
func TestBitRot(t *testing.T) {
	ks := []int{1, 2, 5, 10, 20, 30, 40, 50}
	if testing.Short() {
		ks = []int{1, 10, 50}
	}
	for i, k := range ks {
		seed := uint64(i + 1)
		t.Run(fmt.Sprintf("seed%d_k%d", seed, k), func(t *testing.T) { testBitRot(t, seed, k) })
	}
	t.Run("control_k0", func(t *testing.T) {
		if lost := testBitRot(t, 99, 0); lost != 0 {
			t.Fatalf("%d messages missing without any damage", lost)
		}
	})
}

// bitRotMessages is how many messages each TestBitRot run stores.
const bitRotMessages = 3000

// flip is one damaged byte.
type flip struct {
	file string
	off  int64
	mask byte
}

// lockedBuffer collects the store's log lines for a failure report.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testBitRot runs one damage round with k flipped bytes and returns how many of the stored
// messages the reopened store no longer serves.
func testBitRot(t *testing.T, seed uint64, k int) int {
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	var logs lockedBuffer
	opts := Options{SegmentSize: testSeg, MaxMessageSize: 16 << 10, QueueSegmentEntries: 64, Flush: commitlog.FlushAsync,
		MaxAge: -1, MaxUsedRatio: -1, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}

	// Store the messages, remembering what Append assigned to each.
	s := openStore(t, dir, opts)
	orig := make(map[int64]*Message, bitRotMessages)
	for id := int64(0); id < bitRotMessages; {
		var batch []*Message
		for n := 1 + rng.IntN(8); n > 0 && id < bitRotMessages; n-- {
			batch = append(batch, crashMessage(id))
			id++
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
		for _, m := range batch {
			cid, _ := crashID(m.Body)
			orig[cid] = m
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage the data dir.
	segs, _ := filepath.Glob(filepath.Join(dir, commitlogDir, "*.log"))
	cqs, _ := filepath.Glob(filepath.Join(dir, queuesDir, "*", "*", "*.cq"))
	ckpts := []string{filepath.Join(dir, commitlogDir, "checkpoint"), filepath.Join(dir, dispatchName)}
	if len(segs) < 2 || len(cqs) < 9 {
		t.Fatalf("%d segments and %d queue files: the data set is too small to damage", len(segs), len(cqs))
	}
	var flips []flip
	var perKind [3]int // segments, queue files, checkpoints
	for range k {
		var kind int
		var file string
		switch r := rng.IntN(100); {
		case r < 45:
			kind, file = 0, segs[rng.IntN(len(segs))]
		case r < 90:
			kind, file = 1, cqs[rng.IntN(len(cqs))]
		default:
			kind, file = 2, ckpts[rng.IntN(len(ckpts))]
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		f := flip{file: file, off: rng.Int64N(fi.Size()), mask: byte(1 + rng.IntN(255))}
		flipByte(t, f)
		flips = append(flips, f)
		perKind[kind]++
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("EDGEMQ_DEBUG") != "" {
			for _, f := range flips {
				rel, _ := filepath.Rel(dir, f.file)
				t.Logf("flipped %s at %d with %#02x", rel, f.off, f.mask)
			}
			t.Logf("store log:\n%s", logs.String())
		}
	})

	o := testOptions(opts)
	s, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("reopen after %d flipped bytes: %v", k, err)
	}
	defer s.Close()
	waitDispatched(t, s)

	// Every queue that was written, and no other, exists.
	queues := map[ackKey]bool{}
	for _, m := range orig {
		queues[ackKey{m.Topic, m.QueueID, 0}] = true
	}
	for _, qi := range s.Queues("") {
		if !queues[ackKey{qi.Topic, qi.QueueID, 0}] {
			t.Errorf("queue %q/%d appeared from nowhere", qi.Topic, qi.QueueID)
		}
	}

	// Read every queue from min to max: only whole, known messages, each at its offset.
	served := map[int64]bool{}
	for key := range queues {
		readDamagedQueue(t, s, key.topic, key.queue, orig, served)
	}

	// Account for each message no longer served.
	r := s.Log().NewReader()
	defer r.Close()
	var damaged, cut, badEntry int
	for id, m := range orig {
		if served[id] {
			continue
		}
		rec, err := r.Read(m.Pos)
		switch {
		case errors.Is(err, commitlog.ErrCorrupt):
			damaged++
			continue
		case err != nil:
			cut++ // recovery cut the log before it, or moved its segment aside
			continue
		}
		var got Message
		if derr := decodeMessage(rec.Payload, rec.StoreTime, &got); derr != nil || rec.Next-rec.Pos != int64(m.Size) || msgDiff(&got, decoded(m)) != "" {
			t.Errorf("message %d: the record at its position %d passes its checksum but is another one (%v)", id, m.Pos, derr)
			continue
		}
		q, _ := s.queueFor(m.Topic, m.QueueID, false)
		if q == nil {
			t.Errorf("message %d: its queue %s/%d is gone", id, m.Topic, m.QueueID)
			continue
		}
		if e, err := q.cq.Get(m.QueueOffset); err != nil || e.Pos != m.Pos {
			badEntry++ // entries carry no checksum: a damaged one cannot be told from another
			continue
		}
		t.Errorf("message %d (%s/%d@%d): its record and its queue entry are intact, yet it is not served", id, m.Topic, m.QueueID, m.QueueOffset)
	}
	missing := len(orig) - len(served)

	// Walk the commitlog: every record is a known one at its position; damage is reported as
	// a *CorruptError, never returned as a record.
	walked, corrupt := walkDamagedLog(t, s, orig)

	// The damaged store keeps working.
	var fresh []*Message
	for i := range int64(30) {
		fresh = append(fresh, crashMessage(1_000_000+i))
	}
	if err := s.Append(fresh); err != nil {
		t.Fatalf("append after damage: %v", err)
	}
	waitDispatched(t, s)
	for _, m := range fresh {
		res, err := s.GetMessages(m.Topic, m.QueueID, m.QueueOffset, 1, nil)
		if err != nil || res.Status != Found || len(res.Messages) != 1 {
			t.Fatalf("message appended after damage at %s/%d@%d: %v %v", m.Topic, m.QueueID, m.QueueOffset, res.Status, err)
		}
		want := decoded(m)
		want.Pos, want.Size = m.Pos, m.Size
		if d := msgDiff(&res.Messages[0], want); d != "" {
			t.Fatalf("message appended after damage: %s", d)
		}
	}

	t.Logf("k=%d (%d in segments, %d in queue files, %d in checkpoints): %d of %d served, %d missing (%d records damaged, %d cut by recovery, %d queue entries damaged); log walk: %d records, %d corrupt",
		k, perKind[0], perKind[1], perKind[2], len(served), len(orig), missing, damaged, cut, badEntry, walked, corrupt)
	return missing
}

func flipByte(t *testing.T, f flip) {
	t.Helper()
	fh, err := os.OpenFile(f.file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var b [1]byte
	if _, err := fh.ReadAt(b[:], f.off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= f.mask
	if _, err := fh.WriteAt(b[:], f.off); err != nil {
		t.Fatal(err)
	}
}

// readDamagedQueue reads (topic, queueID) from its min to its max offset, stepping past
// damaged entries, and checks that every message served is one that was stored, byte for
// byte, at the offset and position it was stored at, and served once.
func readDamagedQueue(t *testing.T, s *Store, topic string, queueID int32, orig map[int64]*Message, served map[int64]bool) {
	t.Helper()
	lo, hi := s.MinOffset(topic, queueID), s.MaxOffset(topic, queueID)
	off, last := lo, int64(-1)
	for calls := int64(0); off < hi; calls++ {
		if calls > hi-lo {
			t.Fatalf("%s/%d: %d reads did not get from %d to %d", topic, queueID, calls, lo, hi)
		}
		res, err := s.GetMessages(topic, queueID, off, 32, nil)
		if err != nil {
			t.Fatalf("GetMessages %s/%d@%d: %v", topic, queueID, off, err)
		}
		if res.Status == OffsetOverflowOne && res.NextBeginOffset == hi {
			break
		}
		if res.Status != Found && res.Status != OffsetFoundNull {
			t.Fatalf("GetMessages %s/%d@%d of [%d,%d): %v", topic, queueID, off, lo, hi, res.Status)
		}
		if res.NextBeginOffset <= off || res.NextBeginOffset > hi {
			t.Fatalf("GetMessages %s/%d@%d: next begin offset %d (status %v, max %d)", topic, queueID, off, res.NextBeginOffset, res.Status, hi)
		}
		for i := range res.Messages {
			m := &res.Messages[i]
			if m.QueueOffset < off || m.QueueOffset >= res.NextBeginOffset || m.QueueOffset <= last {
				t.Fatalf("%s/%d read at %d (next %d, last served %d): message at offset %d", topic, queueID, off, res.NextBeginOffset, last, m.QueueOffset)
			}
			last = m.QueueOffset
			id, ok := crashID(m.Body)
			o := orig[id]
			if !ok || o == nil {
				t.Fatalf("%s/%d@%d: served a message that was never stored: %.60q", topic, queueID, m.QueueOffset, m.Body)
			}
			want := decoded(o)
			want.Pos, want.Size = o.Pos, o.Size
			if d := msgDiff(m, want); d != "" {
				t.Fatalf("%s/%d@%d: served message %d damaged: %s", topic, queueID, m.QueueOffset, id, d)
			}
			if served[id] {
				t.Fatalf("message %d served twice", id)
			}
			served[id] = true
		}
		off = res.NextBeginOffset
	}
}

// walkDamagedLog walks the commitlog from its first to its last record, stepping to the next
// segment past a corrupt record, and checks every record returned is a stored message at its
// position. It returns the records and the corrupt records seen.
func walkDamagedLog(t *testing.T, s *Store, orig map[int64]*Message) (walked, corrupt int) {
	t.Helper()
	l := s.Log()
	r := l.NewReader()
	defer r.Close()
	seen := map[int64]bool{}
	for pos, steps := l.MinPos(), 0; ; steps++ {
		if steps > 2*len(orig)+100 {
			t.Fatalf("commitlog walk did not end: at %d after %d steps", pos, steps)
		}
		rec, err := r.Next(pos)
		if errors.Is(err, commitlog.ErrNoRecord) {
			return walked, corrupt
		}
		var ce *commitlog.CorruptError
		if errors.As(err, &ce) {
			base, perr := strconv.ParseInt(strings.TrimSuffix(filepath.Base(ce.Segment), ".log"), 10, 64)
			if perr != nil || base+ce.Offset < pos {
				t.Fatalf("commitlog walk from %d: corrupt record in %s at %d", pos, ce.Segment, ce.Offset)
			}
			corrupt++
			pos = base + l.SegmentSize() // nothing marks where the next record starts
			continue
		}
		if err != nil {
			t.Fatalf("commitlog walk at %d: %v (%T)", pos, err, err)
		}
		if rec.Pos < pos || rec.Next <= rec.Pos {
			t.Fatalf("commitlog walk from %d: record at %d to %d", pos, rec.Pos, rec.Next)
		}
		var m Message
		if err := decodeMessage(rec.Payload, rec.StoreTime, &m); err != nil {
			t.Fatalf("record at %d passes its checksum but does not decode: %v", rec.Pos, err)
		}
		id, _ := crashID(m.Body)
		o := orig[id]
		if o == nil || o.Pos != rec.Pos || int64(o.Size) != rec.Next-rec.Pos || seen[id] {
			t.Fatalf("record at %d (%d bytes) is not the one stored there: %.60q", rec.Pos, rec.Next-rec.Pos, m.Body)
		}
		if d := msgDiff(&m, decoded(o)); d != "" {
			t.Fatalf("record at %d: %s", rec.Pos, d)
		}
		seen[id] = true
		walked++
		pos = rec.Next
	}
}

// TestBitRotSealedQueueEntry damages one entry in the middle of a sealed consume-queue file so
// that it no longer decodes (its size turns negative): reads must skip exactly that entry and
// serve the 63 messages before and after it in the same file.
func TestBitRotSealedQueueEntry(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: testSeg, MaxMessageSize: 16 << 10, QueueSegmentEntries: 64, Flush: commitlog.FlushAsync, MaxAge: -1, MaxUsedRatio: -1}
	s := openStore(t, dir, opts)
	appendN(t, s, "T", 0, 0, 200)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const bad = 10 // in the first file, sealed: files hold 64 entries
	flipByte(t, flip{file: filepath.Join(dir, queuesDir, "T", "0", fmt.Sprintf("%020d.cq", 0)), off: bad*20 + 8, mask: 0x80})
	s = openStore(t, dir, opts)
	defer s.Close()
	got := map[int64]bool{}
	for off := int64(0); off < 200; {
		res, err := s.GetMessages("T", 0, off, 32, nil)
		if err != nil || res.NextBeginOffset <= off {
			t.Fatalf("GetMessages at %d: %v next %d, %v", off, res.Status, res.NextBeginOffset, err)
		}
		for _, m := range res.Messages {
			if want := msg("T", 0, int(m.QueueOffset)); !bytes.Equal(m.Body, want.Body) {
				t.Fatalf("offset %d: body %q, want %q", m.QueueOffset, m.Body, want.Body)
			}
			got[m.QueueOffset] = true
		}
		off = res.NextBeginOffset
	}
	for off := int64(0); off < 200; off++ {
		if !got[off] && off != bad {
			t.Errorf("offset %d not served: only the entry at %d is damaged", off, bad)
		}
	}
}
