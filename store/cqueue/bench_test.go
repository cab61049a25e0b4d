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
