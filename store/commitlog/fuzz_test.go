package commitlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

func FuzzParseCheckpoint(f *testing.F) {
	var b [checkpointSize]byte
	putCheckpoint(&b, HeaderSize+100)
	f.Add(b[:])
	f.Add(b[:checkpointCopy])
	f.Add(b[checkpointCopy:])
	f.Add(append(make([]byte, checkpointCopy), b[:checkpointCopy]...))
	putCheckpoint(&b, -1)
	f.Add(b[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		pos, ok := parseCheckpoint(b[:len(b):len(b)])
		if !bytes.Equal(in, b) {
			t.Fatal("parseCheckpoint modified its input")
		}
		if !ok {
			return
		}
		var re [checkpointSize]byte
		putCheckpoint(&re, pos)
		if got, ok := parseCheckpoint(re[:]); !ok || got != pos {
			t.Fatalf("round trip of %d: %d, %v", pos, got, ok)
		}
	})
}

// fuzzDir is where FuzzOpen's log lives on its in-memory file system.
const fuzzDir = "/log"

// fuzzLog returns the files of a small log on a CrashFS, to seed FuzzOpen: its first segment
// and its checkpoint.
func fuzzLog(f *testing.F, records int) (seg, ckpt []byte) {
	fs := vfstest.NewCrashFS()
	l, err := Open(fuzzDir, &Options{FS: fs, SegmentSize: testSegSize})
	if err != nil {
		f.Fatal(err)
	}
	for i := range records {
		if _, err := l.Append(int64(1000+i), [][]byte{payload(i)}, nil); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	return readFuzzFile(f, fs, segmentName(0)), readFuzzFile(f, fs, checkpointName)
}

func readFuzzFile(f *testing.F, fs vfs.FS, name string) []byte {
	file, err := fs.OpenFile(filepath.Join(fuzzDir, name), os.O_RDWR, 0)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		f.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := file.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		f.Fatal(err)
	}
	return b
}

// FuzzOpen opens a log whose first segment and checkpoint are the fuzzer's bytes (a segment
// cut or padded to the segment size), on an in-memory file system: Open either fails or
// recovers a log that reads, appends and closes, and nothing panics. Recovery, the header
// and frame decoders and the Reader all see bytes from disk here.
func FuzzOpen(f *testing.F) {
	seg, ckpt := fuzzLog(f, 20)
	f.Add(seg[:4096], ckpt)
	f.Add(seg[:4096], []byte{})
	f.Add(seg[:HeaderSize], ckpt)
	f.Add(seg[:HeaderSize-1], ckpt)
	torn := bytes.Clone(seg[:4096])
	torn[HeaderSize+10] ^= 0x55
	f.Add(torn, ckpt)
	noHeader := bytes.Clone(seg[:4096])
	clear(noHeader[:HeaderSize])
	f.Add(noHeader, ckpt)
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, seg, ckpt []byte) {
		fs := vfstest.NewCrashFS()
		if err := fs.MkdirAll(fuzzDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if len(seg) > testSegSize {
			seg = seg[:testSegSize]
		}
		writeFuzzFile(t, fs, segmentName(0), seg, testSegSize)
		writeFuzzFile(t, fs, checkpointName, ckpt, int64(len(ckpt)))
		l, err := Open(fuzzDir, &Options{FS: fs, SegmentSize: testSegSize})
		if err != nil {
			return
		}
		r := l.NewReader()
		n := 0
		for pos := l.MinPos(); n < testSegSize; n++ {
			rec, err := r.Next(pos)
			var ce *CorruptError
			if errors.As(err, &ce) && ce.Next > pos { // damage before the checkpoint stays
				pos = ce.Next
				continue
			}
			if err != nil {
				break
			}
			if rec.Next <= pos {
				t.Fatalf("Next(%d) returned a record ending at %d", pos, rec.Next)
			}
			pos = rec.Next
		}
		for _, pos := range []int64{-1, 0, HeaderSize, HeaderSize + 1, l.Written() - 1, l.Written()} {
			r.Read(pos)
		}
		r.Close()
		end, err := l.Append(1, [][]byte{[]byte("after recovery")}, nil)
		if err == nil {
			err = l.WaitDurable(end)
		}
		if err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// writeFuzzFile writes b to name in fuzzDir on fs, then extends it with zeros to size.
func writeFuzzFile(t *testing.T, fs vfs.FS, name string, b []byte, size int64) {
	t.Helper()
	file, err := fs.OpenFile(filepath.Join(fuzzDir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && int64(len(b)) < size {
		if err := file.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
}
