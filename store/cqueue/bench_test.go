package cqueue

import (
	"testing"
)

func BenchmarkAppend(b *testing.B) {
	q := openQueue(b, b.TempDir(), nil)
	b.SetBytes(EntrySize)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if err := q.Append(off, ent(off)); err != nil {
			b.Fatal(err)
		}
		off++
	}
}

func BenchmarkRead32(b *testing.B) {
	const n = 4096 // entries per file
	for _, bc := range []struct {
		name string
		base int64 // first offset read; file 0 is sealed, file n active
	}{
		{"active", n},
		{"sealed", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			q := openQueue(b, b.TempDir(), segOpts(n))
			appendRange(b, q, 0, 2*n-1)
			buf := make([]Entry, 32)
			b.SetBytes(32 * EntrySize)
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				if _, err := q.Read(bc.base+off, buf); err != nil {
					b.Fatal(err)
				}
				off = (off + 32) % (n - 64)
			}
		})
	}
}

// BenchmarkSwitch times the Append that fills the active file and switches to the next one,
// which its caller waits for (in the store, under the append lock): "ahead" with Prepare run
// before (the usual case: the store's dispatcher runs it once a file is half full), "inline"
// without (Append syncs the full file and creates the next one itself). Between two timed
// switches, one file of 65536 entries (the default size) is appended untimed.
func BenchmarkSwitch(b *testing.B) {
	for _, ahead := range []bool{true, false} {
		name := "inline"
		if ahead {
			name = "ahead"
		}
		b.Run(name, func(b *testing.B) {
			q := openQueue(b, b.TempDir(), nil)
			n := int64(DefaultOptions.SegmentEntries)
			off := int64(0)
			fill := func(k int64) { // appends k entries untimed
				b.StopTimer()
				defer b.StartTimer()
				for range k {
					if err := q.Append(off, ent(off)); err != nil {
						b.Fatal(err)
					}
					off++
					if q.PrepareDue() && ahead {
						if err := q.Prepare(); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			fill(n)
			for b.Loop() {
				if err := q.Append(off, ent(off)); err != nil { // the first entry of the next file
					b.Fatal(err)
				}
				off++
				fill(n - 1)
			}
		})
	}
}
