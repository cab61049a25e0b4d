package store

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// TestPowerCutAsyncTopic checks, on a fake clock, a DurabilityAsync message in a
// store with the sync flush policy: Append returns before any fsync covers it (and readers do
// not see it yet), it is durable and visible within FlushInterval, and a power cut after that
// keeps it; a power cut before may lose it, the documented bound. A default message appended
// after it waits for its own fsync, which covers both.
func TestPowerCutAsyncTopic(t *testing.T) {
	const every = 50 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		fs := vfstest.NewCrashFS()
		dir := t.TempDir()
		o := testOptions(Options{FS: fs, Flush: commitlog.FlushSync, FlushInterval: every})
		s := openStore(t, dir, o)
		synctest.Wait()
		lazy := &Message{Topic: "telemetry", Body: []byte("lazy"), Durability: DurabilityAsync}
		start := time.Now()
		if err := s.Append([]*Message{lazy}); err != nil {
			t.Fatal(err)
		}
		end := lazy.Pos + int64(lazy.Size)
		if got := time.Since(start); got != 0 {
			t.Errorf("a lazy Append took %v on the fake clock, want 0: it waited", got)
		}
		synctest.Wait()
		if d := s.log.Durable(); d >= end {
			t.Fatalf("durable %d covers the lazy message (end %d) before FlushInterval", d, end)
		}
		if n := s.MaxOffset("telemetry", 0); n != 0 {
			t.Fatalf("a reader sees %d messages before the lazy one is durable", n)
		}
		if lost := reopenCut(t, fs.CutClean(), dir, o); lost.MaxOffset("telemetry", 0) != 0 {
			t.Fatal("a cut before any fsync kept the lazy message: the cut proves nothing")
		}

		time.Sleep(every)
		synctest.Wait()
		if d := s.log.Durable(); d < end {
			t.Fatalf("durable %d, short of the lazy message's end %d, FlushInterval after it", d, end)
		}
		if n := s.MaxOffset("telemetry", 0); n != 1 {
			t.Fatalf("a reader sees %d messages FlushInterval after the lazy append, want 1", n)
		}
		if kept := reopenCut(t, fs.CutClean(), dir, o); kept.MaxOffset("telemetry", 0) != 1 {
			t.Fatal("a power cut FlushInterval after the lazy append lost it")
		}

		lazy2 := &Message{Topic: "telemetry", Body: []byte("lazy2"), Durability: DurabilityAsync}
		strict := &Message{Topic: "alarms", Body: []byte("strict")}
		if err := s.Append([]*Message{lazy2}); err != nil {
			t.Fatal(err)
		}
		if err := s.Append([]*Message{strict}); err != nil {
			t.Fatal(err)
		}
		if d := s.log.Durable(); d < strict.Pos+int64(strict.Size) {
			t.Fatalf("a default message in a sync store returned at durable %d, short of its end %d", d, strict.Pos+int64(strict.Size))
		}
		if n := s.MaxOffset("telemetry", 0); n != 2 {
			t.Fatalf("the fsync of a later message did not make the lazy one visible: %d messages, want 2", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDurabilitySyncInAsyncStore checks that a DurabilitySync message in a store with the
// async flush policy returns from Append and AppendAsync's done only once durable.
func TestDurabilitySyncInAsyncStore(t *testing.T) {
	fs := vfstest.NewCrashFS()
	dir := t.TempDir()
	o := testOptions(Options{FS: fs, Flush: commitlog.FlushAsync, FlushInterval: time.Hour})
	s := openStore(t, dir, o)
	defer s.Close()
	strict := &Message{Topic: "alarms", Body: []byte("strict"), Durability: DurabilitySync}
	if err := s.Append([]*Message{strict}); err != nil {
		t.Fatal(err)
	}
	if d, end := s.log.Durable(), strict.Pos+int64(strict.Size); d < end {
		t.Fatalf("Append of a sync message returned at durable %d, short of its end %d", d, end)
	}
	loose := &Message{Topic: "telemetry", Body: []byte("loose")}
	if err := s.Append([]*Message{loose}); err != nil {
		t.Fatal(err)
	}
	if d, end := s.log.Durable(), loose.Pos+int64(loose.Size); d >= end {
		t.Fatalf("a default message in an async store was synced (durable %d, end %d): the check above proves nothing", d, end)
	}
	strict2 := &Message{Topic: "alarms", Body: []byte("strict2"), Durability: DurabilitySync}
	got := make(chan int64, 1)
	if err := s.AppendAsync([]*Message{strict2}, func(err error) {
		if err != nil {
			t.Error(err)
		}
		got <- s.log.Durable()
	}); err != nil {
		t.Fatal(err)
	}
	if d, end := <-got, strict2.Pos+int64(strict2.Size); d < end {
		t.Fatalf("AppendAsync's done of a sync message ran at durable %d, short of its end %d", d, end)
	}
}

// reopenCut opens the store a power cut left in cut and returns it, closed at cleanup.
func reopenCut(t *testing.T, cut *vfstest.CrashFS, dir string, o Options) *Store {
	t.Helper()
	rdir := t.TempDir() // the running store holds dir's lock
	moveTree(t, cut, dir, rdir)
	o.FS = cut
	s, err := Open(rdir, &o)
	if err != nil {
		t.Fatalf("reopen after the cut: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
