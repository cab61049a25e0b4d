package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
)

// TestGetMessagesOwnTheirBytes: the messages GetMessages returns alias neither the memory
// their records were read from nor each other. The records are read from the write buffer,
// through one copy buffer that each read overwrites; the messages must keep their strings
// and bodies after later reads, after the buffer is written out and read through the
// mapping, and after Close unmapped everything.
func TestGetMessagesOwnTheirBytes(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{Flush: commitlog.FlushAsync, WriteBuffer: 1 << 20,
		FlushInterval: time.Hour, FlushBytes: 1 << 30})
	defer func() { _ = s.Close() }()
	want := func(i int) *Message {
		m := msg("T", 0, i)
		m.Properties = map[string]string{"n": fmt.Sprint(i), fmt.Sprintf("key%d", i): "v"}
		return m
	}
	var batch []*Message
	for i := range 100 {
		batch = append(batch, want(i))
	}
	if err := s.Append(batch); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, s)
	check := func(when string, got []Message, from int) {
		t.Helper()
		for i := range got {
			w := want(from + i)
			g := &got[i]
			if g.Topic != w.Topic || g.Tags != w.Tags || g.Keys != w.Keys || string(g.Body) != string(w.Body) ||
				len(g.Properties) != 2 || g.Properties["n"] != w.Properties["n"] || g.Properties[fmt.Sprintf("key%d", from+i)] != "v" {
				t.Fatalf("%s: message %d is %q %q %q %q %v, want %q %q %q %q %v", when, from+i,
					g.Topic, g.Tags, g.Keys, g.Body, g.Properties, w.Topic, w.Tags, w.Keys, w.Body, w.Properties)
			}
		}
	}
	get := func(off int64) []Message {
		t.Helper()
		res, err := s.GetMessages("T", 0, off, 32, nil)
		if err != nil || len(res.Messages) != 32 {
			t.Fatalf("GetMessages at %d: %d messages, %v", off, len(res.Messages), err)
		}
		return res.Messages
	}
	first := get(0)
	check("as read", first, 0)
	filtered, err := s.GetMessages("T", 0, 0, 16, tagsFilter{"odd"})
	if err != nil || len(filtered.Messages) != 16 {
		t.Fatalf("GetMessages odd: %d messages, %v", len(filtered.Messages), err)
	}
	for i, m := range filtered.Messages {
		check("filtered", []Message{m}, 2*i+1)
	}
	check("after more reads of the buffer", first, 0)
	if err := s.log.Flush(); err != nil { // the buffer is written out: reads use the mapping
		t.Fatal(err)
	}
	second := get(32)
	check("from the mapping", second, 32)
	check("after reads of the mapping", first, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("after Close", first, 0) // a message that aliased a mapping would fault here
	check("after Close", second, 32)
}
