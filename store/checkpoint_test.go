package store

import (
	"bytes"
	"errors"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	for _, c := range []checkpoint{
		{pos: 64},
		{pos: 1 << 40, queues: []queueMax{{"Telemetry", 0, 5}, {"%RETRY%g", 3, 1 << 33}, {"t", 1023, 0}}},
	} {
		b := c.marshal()
		got, err := unmarshalCheckpoint(b)
		if err != nil || got.pos != c.pos || len(got.queues) != len(c.queues) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
		for i := range c.queues {
			if got.queues[i] != c.queues[i] {
				t.Fatalf("queue %d: got %+v, want %+v", i, got.queues[i], c.queues[i])
			}
		}
		for i := range b { // every flipped byte is caught
			d := bytes.Clone(b)
			d[i] ^= 0x20
			if _, err := unmarshalCheckpoint(d); !errors.Is(err, errBadCheckpoint) {
				t.Fatalf("flip at %d of %d: %v", i, len(b), err)
			}
		}
	}
}

func FuzzUnmarshalCheckpoint(f *testing.F) {
	f.Add(checkpoint{pos: 64}.marshal())
	f.Add(checkpoint{pos: 99, queues: []queueMax{{"T", 1, 2}}}.marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := unmarshalCheckpoint(b)
		if err != nil {
			return
		}
		if re := c.marshal(); !bytes.Equal(re, b) {
			t.Fatalf("accepted %x but re-encodes as %x", b, re)
		}
	})
}
