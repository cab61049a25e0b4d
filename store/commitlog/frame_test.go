package commitlog

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

func TestFrameCodec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delta   int64
		payload []byte
	}{
		{"empty payload", 0, nil},
		{"negative delta", -5000, []byte("clock went back")},
		{"large delta", 1 << 40, []byte("x")},
		{"two-byte length", 7, bytes.Repeat([]byte("y"), 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, frameSize(len(tc.payload), tc.delta)+3)
			putFrame(b[:frameSize(len(tc.payload), tc.delta)], tc.delta, tc.payload)
			d, p, n, st := decodeFrame(b)
			if st != frameOK || d != tc.delta || !bytes.Equal(p, tc.payload) || n != frameSize(len(tc.payload), tc.delta) {
				t.Fatalf("got delta %d payload %q size %d status %v", d, p, n, st)
			}
			for cut := 1; cut < n; cut++ {
				if _, _, _, st := decodeFrame(b[:cut]); st == frameOK {
					t.Fatalf("frame cut at %d of %d decoded", cut, n)
				}
			}
			for i := 0; i < n; i++ {
				c := append([]byte(nil), b[:n]...)
				c[i] ^= 0x10
				if _, p2, _, st := decodeFrame(c); st == frameOK && bytes.Equal(p2, tc.payload) && i != 0 {
					t.Fatalf("flip at byte %d went unnoticed", i)
				}
			}
		})
	}
}

// TestFrameGolden pins the frame layout: a change of the encoding must be a deliberate
// format version bump with a new golden file.
func TestFrameGolden(t *testing.T) {
	b := make([]byte, frameSize(5, 300))
	putFrame(b, 300, []byte("hello"))
	var h [HeaderSize]byte
	header{version: FormatVersion, payloadVersion: 1, baseOffset: 64 << 20, baseTime: 1764460800000}.put(h[:])
	got := hex.Dump(append(h[:], b...))
	path := filepath.Join("testdata", "golden.hex")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("segment header and frame bytes changed:\ngot\n%swant\n%s", got, want)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	b := make([]byte, frameSize(5, 3))
	putFrame(b, 3, []byte("hello"))
	f.Add(b)
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := append([]byte(nil), b...)
		d, p, n, st := decodeFrame(b)
		if !bytes.Equal(b, orig) {
			t.Fatal("decodeFrame modified its input")
		}
		if st != frameOK {
			return
		}
		if n > len(b) || n <= 0 {
			t.Fatalf("size %d of %d bytes", n, len(b))
		}
		re := make([]byte, frameSize(len(p), d))
		putFrame(re, d, p)
		if !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding differs: %x vs %x", re, b[:n])
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	var h [HeaderSize]byte
	header{version: 1, baseOffset: 1 << 26, baseTime: 5}.put(h[:])
	f.Add(h[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		parseHeader(b)
	})
}
