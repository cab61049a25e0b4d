package cqueue

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

func TestEntryCodec(t *testing.T) {
	enc := func(e Entry) []byte {
		b := make([]byte, EntrySize)
		e.Put(b)
		return b
	}
	tests := []struct {
		name    string
		in      []byte
		want    Entry
		wantErr bool
	}{
		{name: "min pos", in: enc(Entry{Pos: 64, Size: 1}), want: Entry{Pos: 64, Size: 1}},
		{name: "max values", in: enc(Entry{Pos: 1<<63 - 1, Size: 1<<31 - 1, TagHash: -1}),
			want: Entry{Pos: 1<<63 - 1, Size: 1<<31 - 1, TagHash: -1}},
		{name: "negative tag hash", in: enc(Entry{Pos: 1000, Size: 7, TagHash: -42}),
			want: Entry{Pos: 1000, Size: 7, TagHash: -42}},
		{name: "trailing bytes ignored", in: append(enc(Entry{Pos: 99, Size: 3, TagHash: 5}), 0xff, 0xff),
			want: Entry{Pos: 99, Size: 3, TagHash: 5}},
		{name: "all zero", in: make([]byte, EntrySize), wantErr: true},
		{name: "pos below 64", in: enc(Entry{Pos: 63, Size: 1}), wantErr: true},
		{name: "negative pos", in: enc(Entry{Pos: -64, Size: 1}), wantErr: true},
		{name: "zero size", in: enc(Entry{Pos: 64, Size: 0, TagHash: 9}), wantErr: true},
		{name: "negative size", in: enc(Entry{Pos: 64, Size: -1}), wantErr: true},
		{name: "short", in: enc(Entry{Pos: 64, Size: 1})[:EntrySize-1], wantErr: true},
		{name: "empty", in: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeEntry(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeEntry(%x) = %+v, %v; want error wrapping ErrCorrupt", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DecodeEntry(%x) = %+v, %v; want %+v, nil", tt.in, got, err, tt.want)
			}
			if re := enc(got); !bytes.Equal(re, tt.in[:EntrySize]) {
				t.Fatalf("re-encoded %x, want %x", re, tt.in[:EntrySize])
			}
		})
	}
}

// TestEntryGolden pins the on-disk layout: testdata/entry.golden was written by hand from
// the table in doc.go, not by this package.
func TestEntryGolden(t *testing.T) {
	golden, err := os.ReadFile("testdata/entry.golden")
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Pos: 0x0102030405060708, Size: 0x0a0b0c0d, TagHash: -2}
	got := make([]byte, EntrySize)
	e.Put(got)
	if !bytes.Equal(got, golden) {
		t.Fatalf("Put(%+v) = %x, want %x", e, got, golden)
	}
	d, err := DecodeEntry(golden)
	if err != nil || d != e {
		t.Fatalf("DecodeEntry(golden) = %+v, %v; want %+v, nil", d, err, e)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	golden, err := os.ReadFile("testdata/entry.golden")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(make([]byte, EntrySize))
	f.Add([]byte{1, 2, 3})
	f.Add(append(golden, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		e, err := DecodeEntry(b[:len(b):len(b)])
		if !bytes.Equal(in, b) {
			t.Fatalf("DecodeEntry modified its input")
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeEntry(%x) error %v does not wrap ErrCorrupt", b, err)
			}
			return
		}
		if len(b) < EntrySize || e.Pos < MinPos || e.Size <= 0 {
			t.Fatalf("DecodeEntry(%x) accepted %+v", b, e)
		}
		// Only the first EntrySize bytes count: decoding them alone gives the same entry.
		if e2, err := DecodeEntry(b[:EntrySize:EntrySize]); err != nil || e2 != e {
			t.Fatalf("DecodeEntry(prefix) = %+v, %v; want %+v", e2, err, e)
		}
		re := make([]byte, EntrySize)
		e.Put(re)
		if !bytes.Equal(re, b[:EntrySize]) {
			t.Fatalf("re-encoded %x, want %x", re, b[:EntrySize])
		}
	})
}
