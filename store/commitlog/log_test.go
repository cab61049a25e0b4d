package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

const testSegSize = 64 << 10

// forEachMode runs f once per flush mode.
func forEachMode(t *testing.T, f func(t *testing.T, mode FlushMode)) {
	for _, m := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}

func openTest(t testing.TB, dir string, o Options) *Log {
	t.Helper()
	if o.SegmentSize == 0 {
		o.SegmentSize = testSegSize
	}
	l, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// A log the test left open stops before its dir is removed (its goroutines would write
	// there); one closed already says ErrClosed.
	t.Cleanup(func() { l.Close() })
	return l
}

func payload(i int) []byte {
	return []byte(fmt.Sprintf("record-%06d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%200)))
}

func appendOne(t testing.TB, l *Log, ts int64, p []byte) int64 {
	t.Helper()
	var pos [1]int64
	end, err := l.Append(ts, [][]byte{p}, pos[:])
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := l.WaitDurable(end); err != nil {
		t.Fatalf("WaitDurable: %v", err)
	}
	return pos[0]
}

// readAll walks the log from its start and returns every payload.
func readAll(t testing.TB, l *Log) ([][]byte, []int64) {
	t.Helper()
	r := l.NewReader()
	defer r.Close()
	var out [][]byte
	var pos []int64
	p := l.MinPos()
	for {
		rec, err := r.Next(p)
		if errors.Is(err, ErrNoRecord) {
			return out, pos
		}
		if err != nil {
			t.Fatalf("Next(%d): %v", p, err)
		}
		out = append(out, append([]byte(nil), rec.Payload...))
		pos = append(pos, rec.Pos)
		p = rec.Next
	}
}

func TestAppendReadRoundTripAcrossSegments(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode FlushMode) {
		dir := t.TempDir()
		l := openTest(t, dir, Options{Flush: mode})
		var want [][]byte
		var wantPos []int64
		for i := 0; i < 2000; i++ {
			p := payload(i)
			want = append(want, p)
			wantPos = append(wantPos, appendOne(t, l, int64(1000+i), p))
		}
		if n := len(*l.segs.Load()); n < 3 {
			t.Fatalf("got %d segments, want several", n)
		}
		check := func(l *Log) {
			got, pos := readAll(t, l)
			if len(got) != len(want) {
				t.Fatalf("got %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) || pos[i] != wantPos[i] {
					t.Fatalf("record %d: got %q at %d, want %q at %d", i, got[i], pos[i], want[i], wantPos[i])
				}
			}
			r := l.NewReader()
			defer r.Close()
			rec, err := r.Read(wantPos[1234])
			if err != nil || !bytes.Equal(rec.Payload, want[1234]) || rec.StoreTime != 1000+1234 {
				t.Fatalf("Read: got %q ts %d err %v", rec.Payload, rec.StoreTime, err)
			}
		}
		check(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openTest(t, dir, Options{Flush: mode})
		defer l.Close()
		check(l)
	})
}

func TestBatchLandsContiguouslyInOneSegment(t *testing.T) {
	l := openTest(t, t.TempDir(), Options{})
	defer l.Close()
	big := bytes.Repeat([]byte("x"), 1000)
	batch := make([][]byte, 30)
	for i := range batch {
		batch[i] = big
	}
	pos := make([]int64, len(batch))
	for round := 0; round < 10; round++ {
		end, err := l.Append(1, batch, pos)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(pos); i++ {
			if pos[i]-pos[i-1] != pos[1]-pos[0] || pos[1]-pos[0] > 1000+maxFrameOverhead {
				t.Fatalf("round %d: record %d at %d, previous at %d: not contiguous", round, i, pos[i], pos[i-1])
			}
		}
		if pos[0]/testSegSize != (end-1)/testSegSize {
			t.Fatalf("round %d: batch spans segments %d..%d", round, pos[0], end)
		}
	}
	huge := [][]byte{make([]byte, testSegSize)}
	if _, err := l.Append(1, huge, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized append: got %v, want ErrTooLarge", err)
	}
}

func TestGroupCommitConcurrentAppenders(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode FlushMode) {
		dir := t.TempDir()
		l := openTest(t, dir, Options{Flush: mode, SegmentSize: 1 << 20})
		const writers, each = 16, 300
		var mu sync.Mutex
		acked := map[int64][]byte{}
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					p := []byte(fmt.Sprintf("w%d-%d", w, i))
					pos := appendOne(t, l, 5, p)
					if l.Durable() < pos {
						t.Errorf("durable %d below acknowledged record %d", l.Durable(), pos)
					}
					mu.Lock()
					acked[pos] = p
					mu.Unlock()
				}
			}()
		}
		// Readers run while writers append.
		stop := make(chan struct{})
		var rwg sync.WaitGroup
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			r := l.NewReader()
			defer r.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := l.MinPos()
				for {
					rec, err := r.Next(p)
					if err != nil {
						if !errors.Is(err, ErrNoRecord) {
							t.Errorf("concurrent read: %v", err)
						}
						break
					}
					p = rec.Next
				}
			}
		}()
		wg.Wait()
		close(stop)
		rwg.Wait()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openTest(t, dir, Options{Flush: mode, SegmentSize: 1 << 20})
		defer l.Close()
		got, pos := readAll(t, l)
		if len(got) != writers*each {
			t.Fatalf("got %d records, want %d", len(got), writers*each)
		}
		for i, p := range pos {
			if !bytes.Equal(acked[p], got[i]) {
				t.Fatalf("record at %d: got %q, want %q", p, got[i], acked[p])
			}
		}
	})
}

// lastSegment returns the path of the newest segment file in dir.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(names) == 0 {
		t.Fatal("no segment")
	}
	return names[len(names)-1]
}

func TestRecoveryCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	var want [][]byte
	for i := 0; i < 100; i++ {
		want = append(want, payload(i))
		appendOne(t, l, 1, want[i])
	}
	end := l.Written()
	l.Close()
	// A torn frame: a length that runs on, a partial body.
	seg := lastSegment(t, dir)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := end % testSegSize
	torn := make([]byte, 40)
	putFrame(make([]byte, frameSize(200, 0)), 0, make([]byte, 200))
	full := make([]byte, frameSize(200, 0))
	putFrame(full, 0, bytes.Repeat([]byte("t"), 200))
	copy(torn, full)
	f.WriteAt(torn, off)
	f.Close()

	l = openTest(t, dir, Options{})
	got, _ := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("after torn tail: got %d records, want %d", len(got), len(want))
	}
	if l.Written() != end {
		t.Fatalf("end moved: got %d, want %d", l.Written(), end)
	}
	broken, _ := filepath.Glob(seg + ".*.broken")
	if len(broken) != 1 {
		t.Fatalf("got broken files %v, want one", broken)
	}
	// New appends after the cut survive a reopen and nothing stale comes back.
	appendOne(t, l, 2, []byte("after"))
	l.Close()
	l = openTest(t, dir, Options{})
	defer l.Close()
	got, _ = readAll(t, l)
	if len(got) != len(want)+1 || string(got[len(got)-1]) != "after" {
		t.Fatalf("after cut and append: got %d records, last %q", len(got), got[len(got)-1])
	}
}

// TestRecoveryCutsStaleBytesAfterEnd: a whole valid frame sitting after a zero gap past the
// end of the log (as a write whose first sector was lost leaves it) is cut at Open and kept
// in a .broken file, or it would come back as a record once new records fill the gap. The
// gap is sized for the record appended next, stamped with its own store time, so that record
// ends exactly where the stale frame starts. (Checked: with Open not cutting stale bytes
// after the end, the stale frame comes back as a twelfth record.)
func TestRecoveryCutsStaleBytesAfterEnd(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	for i := 0; i < 10; i++ {
		appendOne(t, l, 1, payload(i))
	}
	end := l.Written()
	d := int64(1) - l.active.baseTime // the delta of a record stamped 1 in this segment
	l.Close()
	seg := lastSegment(t, dir)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	stale := make([]byte, frameSize(len("stale"), d))
	putFrame(stale, d, []byte("stale"))
	staleAt := end%testSegSize + int64(frameSize(len("gap!!"), d))
	if _, err := f.WriteAt(stale, staleAt); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTest(t, dir, Options{})
	if pos := appendOne(t, l, 1, []byte("gap!!")); pos != end || l.Written()%testSegSize != staleAt {
		t.Fatalf("the record filling the gap spans [%d, %d), want [%d, %d)", pos, l.Written(), end, end-end%testSegSize+staleAt)
	}
	l.Close()
	l = openTest(t, dir, Options{})
	defer l.Close()
	got, _ := readAll(t, l)
	if len(got) != 11 || string(got[10]) != "gap!!" {
		t.Fatalf("got %d records, last %q, want 11, last \"gap!!\": the stale frame came back", len(got), got[len(got)-1])
	}
	// <segment>.<offset>.<recovery>.broken: the cut bytes from the end on, whatever the
	// number of the recovery that cut them.
	names, err := filepath.Glob(fmt.Sprintf("%s.%d.*.broken", seg, end%testSegSize))
	if err != nil || len(names) != 1 {
		t.Fatalf("the cut bytes were not kept aside: .broken files %v, %v", names, err)
	}
	broken, err := os.ReadFile(names[0])
	if err != nil || !bytes.Contains(broken, stale) {
		t.Fatalf("the cut bytes were not kept aside with the stale frame: %v", err)
	}
}

func TestReadNeverReturnsCorruptBytes(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	var pos []int64
	for i := 0; i < 50; i++ {
		pos = append(pos, appendOne(t, l, 1, payload(i)))
	}
	l.Close()
	seg := lastSegment(t, dir)
	f, _ := os.OpenFile(seg, os.O_RDWR, 0)
	var b [1]byte
	f.ReadAt(b[:], pos[20]%testSegSize+8)
	b[0] ^= 0x40
	f.WriteAt(b[:], pos[20]%testSegSize+8)
	f.Close()
	l = openTest(t, dir, Options{})
	defer l.Close()
	r := l.NewReader()
	defer r.Close()
	_, err := r.Read(pos[20])
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a flipped record: got %v, want *CorruptError", err)
	}
	if rec, err := r.Read(pos[21]); err != nil || !bytes.Equal(rec.Payload, payload(21)) {
		t.Fatalf("record after the damaged one: %q %v", rec.Payload, err)
	}
}

func TestDamagedHeaderCopyStillOpens(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{})
	appendOne(t, l, 1, []byte("hello"))
	l.Close()
	seg := lastSegment(t, dir)
	f, _ := os.OpenFile(seg, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff, 0xff}, 9) // first copy's base offset
	f.Close()
	l = openTest(t, dir, Options{})
	defer l.Close()
	if got, _ := readAll(t, l); len(got) != 1 || string(got[0]) != "hello" {
		t.Fatalf("got %q", got)
	}
}

func TestRetentionByAgeAndBytes(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var retained []int64
	var rmu sync.Mutex
	o := Options{Now: clock, MaxAge: time.Hour, MaxUsedRatio: -1, RetentionInterval: time.Hour,
		OnRetention: func(min int64) { rmu.Lock(); retained = append(retained, min); rmu.Unlock() }}
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	big := bytes.Repeat([]byte("r"), 4000)
	for i := 0; i < 64; i++ {
		appendOne(t, l, clock().UnixMilli(), big)
		advance(time.Minute)
	}
	nseg := len(*l.segs.Load())
	if n := l.Retain(); n != 0 {
		t.Fatalf("deleted %d segments younger than MaxAge", n)
	}
	advance(2 * time.Hour)
	// Segments whose successor began more than an hour ago go, the active one stays.
	if n := l.Retain(); n != nseg-1 {
		t.Fatalf("deleted %d segments, want %d", n, nseg-1)
	}
	if len(*l.segs.Load()) != 1 || l.MinPos() != l.active.base+HeaderSize {
		t.Fatalf("after retention: %d segments, min %d", len(*l.segs.Load()), l.MinPos())
	}
	r := l.NewReader()
	defer r.Close()
	if _, err := r.Read(HeaderSize); !errors.Is(err, ErrPositionGone) {
		t.Fatalf("read of a deleted position: got %v, want ErrPositionGone", err)
	}
	rmu.Lock()
	if len(retained) == 0 || retained[len(retained)-1] != l.MinPos() {
		t.Fatalf("OnRetention got %v, want last %d", retained, l.MinPos())
	}
	rmu.Unlock()

	// Byte quota: never more than MaxBytes of segments.
	l2 := openTest(t, t.TempDir(), Options{MaxBytes: 3 * testSegSize, MaxAge: -1, MaxUsedRatio: -1})
	defer l2.Close()
	for i := 0; i < 200; i++ {
		appendOne(t, l2, 1, big)
		if s := l2.Size(); s > 3*testSegSize {
			t.Fatalf("log is %d bytes, quota %d", s, 3*testSegSize)
		}
	}
	got, _ := readAll(t, l2)
	if len(got) == 0 || len(got) >= 200 {
		t.Fatalf("got %d records after quota retention", len(got))
	}
}

// TestReaderHoldsSegmentThroughRetention: retention deletes a segment a reader holds only
// when the reader lets go: until then the record the reader read stays mapped, its bytes
// intact, and the file stays. The record is unique, so bytes another mapping put at the
// same address do not pass for it, and on CrashFS an unmapped slice reads as poison.
// (Checked: with retention unmapping and removing a held segment, the held payload is
// poison on CrashFS and the file is gone.)
func TestReaderHoldsSegmentThroughRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
	}{{"crashfs", vfstest.NewCrashFS()}, {"os", vfs.OS}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir() // a path inside the CrashFS too
			l := openTest(t, dir, Options{FS: tc.fs, MaxBytes: 2 * testSegSize, MaxAge: -1, MaxUsedRatio: -1})
			defer l.Close()
			want := []byte(fmt.Sprintf("held record %d %s", rand.Int64(), bytes.Repeat([]byte("h"), 4000)))
			first := appendOne(t, l, 1, want)
			seg := (*l.segs.Load())[0]
			r := l.NewReader()
			rec, err := r.Read(first)
			if err != nil {
				t.Fatal(err)
			}
			held := rec.Payload
			big := bytes.Repeat([]byte("x"), 4000)
			for l.MinPos() <= first { // the first segment leaves the log
				appendOne(t, l, 1, big)
			}
			// The retention loop deletes it out of the append lock: wait until it has.
			deadline := time.Now().Add(10 * time.Second)
			deleted := func() bool { seg.mu.Lock(); defer seg.mu.Unlock(); return seg.deleted }
			for !deleted() {
				if time.Now().After(deadline) {
					t.Fatal("retention never deleted the first segment")
				}
				time.Sleep(time.Millisecond)
			}
			if !bytes.Equal(held, want) { // on a real OS: a fault, or another mapping's bytes
				t.Fatalf("the held payload changed to %.40q... after retention deleted its segment", held)
			}
			if !exists(t, tc.fs, seg.path) {
				t.Fatal("the segment's file was removed while a reader held it")
			}
			r.Close()
			if exists(t, tc.fs, seg.path) {
				t.Fatal("the segment's file is still there after its last reader let go")
			}
		})
	}
}

// exists reports whether path is in its directory on fs.
func exists(t *testing.T, fs vfs.FS, path string) bool {
	t.Helper()
	names, err := fs.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(names, filepath.Base(path))
}

func TestOptionsValidation(t *testing.T) {
	// The largest segment a mapping's length (an int) can hold.
	if max := int64(MaxSegmentSize); max != 1<<31 && max != 1<<30 || int64(int(max)) != max || int(max) < 0 {
		t.Fatalf("MaxSegmentSize %d does not fit an int of %d bits", max, strconv.IntSize)
	}
	for _, o := range []Options{
		{SegmentSize: 1000},
		{SegmentSize: MaxSegmentSize + 1},
		{Flush: 7},
		{MaxBytes: testSegSize, SegmentSize: testSegSize},
		{MaxUsedRatio: 1.5},
		{OnFull: 9},
	} {
		if _, err := Open(t.TempDir(), &o); err == nil {
			t.Errorf("Open(%+v) succeeded, want an error", o)
		}
	}
	l := openTest(t, t.TempDir(), Options{SegmentSize: 128 << 10})
	dir := l.dir
	l.Close()
	if _, err := Open(dir, &Options{SegmentSize: 64 << 10}); err == nil {
		t.Error("reopen with a smaller segment size succeeded")
	}
}

func TestClosedLog(t *testing.T) {
	l := openTest(t, t.TempDir(), Options{})
	l.Close()
	if _, err := l.Append(1, [][]byte{[]byte("x")}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.NewReader().Read(HeaderSize); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

var _ = rand.N[int]
var _ vfs.FS = vfs.OS

// TestNextAfterRecordFillingSegment: a record that ends exactly at the end of its segment has
// Next at the following segment's base, inside its header; Next must step over it.
func TestNextAfterRecordFillingSegment(t *testing.T) {
	l := openTest(t, t.TempDir(), Options{})
	defer l.Close()
	appendOne(t, l, 1, []byte("first"))
	d := int64(1) - l.active.baseTime
	room := int(testSegSize - (l.Written() - l.active.base))
	n := room - (frameSize(0, d) - 0)
	for frameSize(n, d) > room {
		n--
	}
	for frameSize(n, d) < room {
		n++
	}
	if frameSize(n, d) != room {
		t.Skipf("no payload size fills the segment exactly (room %d)", room)
	}
	filler := appendOne(t, l, 1, make([]byte, n))
	last := appendOne(t, l, 1, []byte("next segment"))
	r := l.NewReader()
	defer r.Close()
	rec, err := r.Read(filler)
	if err != nil || rec.Next != testSegSize {
		t.Fatalf("filler: next %d, err %v; want next %d", rec.Next, err, testSegSize)
	}
	rec, err = r.Next(rec.Next)
	if err != nil || rec.Pos != last || string(rec.Payload) != "next segment" {
		t.Fatalf("Next after a full segment: got %q at %d, %v; want the record at %d", rec.Payload, rec.Pos, err, last)
	}
}

func TestCloseDoesNotUnmapUnderReader(t *testing.T) {
	l := openTest(t, t.TempDir(), Options{})
	pos := appendOne(t, l, 1, []byte("held across Close"))
	r := l.NewReader()
	rec, err := r.Read(pos)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if string(rec.Payload) != "held across Close" { // would fault if unmapped
		t.Fatalf("payload changed to %q", rec.Payload)
	}
	if _, err := r.Read(pos); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	r.Close()
}

// TestLastNonZero checks the word-at-a-time scan against a byte-at-a-time one: every length
// up to three words, every start, one or two non-zero bytes anywhere.
func TestLastNonZero(t *testing.T) {
	naive := func(data []byte, from int64) int64 {
		i := int64(len(data))
		for i > from && data[i-1] == 0 {
			i--
		}
		return i
	}
	for n := 0; n <= 24; n++ {
		for from := int64(0); from <= int64(n); from++ {
			for nz := -1; nz < n; nz++ {
				for _, nz2 := range []int{-1, 0, n / 2} {
					data := make([]byte, n)
					if nz >= 0 {
						data[nz] = 0x80
					}
					if nz2 >= 0 && nz2 < n {
						data[nz2] = 1
					}
					if got, want := lastNonZero(data, from), naive(data, from); got != want {
						t.Fatalf("lastNonZero(% x, %d) = %d, want %d", data, from, got, want)
					}
				}
			}
		}
	}
}
