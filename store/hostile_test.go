package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// call runs f and fails the test if it panics or has not returned after 10 s.
func call(t *testing.T, name string, f func() error) error {
	t.Helper()
	type result struct {
		err   error
		panic string
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- result{panic: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		ch <- result{err: f()}
	}()
	select {
	case r := <-ch:
		if r.panic != "" {
			t.Fatalf("%s panicked: %s", name, r.panic)
		}
		return r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s has not returned after 10 s", name)
		return nil
	}
}

// TestHostileAppend appends batches with one bad message each, through Append and
// AppendAsync: each fails with ErrInvalidMessage or ErrMessageTooLarge, without panicking,
// writing anything, calling done, or creating a directory for the topic.
func TestHostileAppend(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	defer s.Close()
	before := s.log.Written()
	for _, tc := range []struct {
		name string
		m    *Message
		want error
	}{
		{"nil message", nil, ErrInvalidMessage},
		{"empty topic", &Message{Body: []byte("x")}, ErrInvalidMessage},
		{"topic of 256 bytes", &Message{Topic: strings.Repeat("t", 256)}, ErrInvalidMessage},
		{"topic .", &Message{Topic: "."}, ErrInvalidMessage},
		{"topic ..", &Message{Topic: ".."}, ErrInvalidMessage},
		{"topic with a slash", &Message{Topic: "a/b"}, ErrInvalidMessage},
		{"topic out of the data dir", &Message{Topic: "../../escape"}, ErrInvalidMessage},
		{"absolute topic", &Message{Topic: "/tmp/escape"}, ErrInvalidMessage},
		{"topic with a backslash", &Message{Topic: `a\b`}, ErrInvalidMessage},
		{"topic with NUL", &Message{Topic: "a\x00b"}, ErrInvalidMessage},
		{"negative queue id", &Message{Topic: "T", QueueID: -1}, ErrInvalidMessage},
		{"body too large", &Message{Topic: "T", Body: make([]byte, 64<<10+1)}, ErrMessageTooLarge},
		{"properties too large", &Message{Topic: "T", Properties: map[string]string{"k": strings.Repeat("v", 64<<10)}}, ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range [][]*Message{{tc.m}, {msg("T", 0, 0), tc.m}, {tc.m, msg("T", 0, 0)}} {
				err := call(t, "Append", func() error { return s.Append(batch) })
				if !errors.Is(err, tc.want) {
					t.Errorf("Append: got %v, want %v", err, tc.want)
				}
				called := make(chan error, 1)
				err = call(t, "AppendAsync", func() error { return s.AppendAsync(batch, func(err error) { called <- err }) })
				if !errors.Is(err, tc.want) {
					t.Errorf("AppendAsync: got %v, want %v", err, tc.want)
				}
				select {
				case err := <-called:
					t.Errorf("AppendAsync called done(%v) for a refused batch", err)
				default:
				}
			}
		})
	}
	if err := s.AppendAsync([]*Message{msg("T", 0, 0)}, nil); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("AppendAsync with a nil done: got %v, want ErrInvalidMessage", err)
	}
	if s.log.Written() != before || s.MaxOffset("T", 0) != 0 {
		t.Fatal("a refused batch wrote something")
	}
	for _, p := range []string{filepath.Join(filepath.Dir(dir), "escape"), "/tmp/escape", filepath.Join(dir, "0")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a refused topic made %s (stat: %v)", p, err)
		}
	}
	appendN(t, s, "T", 0, 0, 1)
	waitDispatched(t, s)
	if s.MaxOffset("T", 0) != 1 {
		t.Fatal("offsets skipped after refused batches")
	}
}
