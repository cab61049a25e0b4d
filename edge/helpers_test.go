package edge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store"
)

// openBroker opens a broker in a temp dir with small, fast store settings. o may be nil.
// The broker is closed by t.Cleanup unless the test closed it.
func openBroker(t testing.TB, o *Options) *Broker {
	t.Helper()
	return openBrokerAt(t, t.TempDir(), o)
}

func openBrokerAt(t testing.TB, dir string, o *Options) *Broker {
	t.Helper()
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Store == nil {
		opts.Store = &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true}
	}
	if opts.Logger == nil {
		// The broker's reports show with a failing test's output (and with -v).
		opts.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = 64 << 10
	}
	b, err := Open(dir, &opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testLogWriter writes each log line to the test's log. Close waits for the broker's
// goroutines, and t.Cleanup closes the broker, so nothing logs after the test ended.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// bubbleStart is the time at which every synctest bubble's clock starts.
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// logCounter counts a broker's log records by message, and writes them to the test log.
type logCounter struct {
	h  slog.Handler // to the test log
	mu sync.Mutex   // guards n
	n  map[string]int
}

func newLogCounter(t testing.TB) *logCounter {
	return &logCounter{h: slog.NewTextHandler(testLogWriter{t}, nil), n: map[string]int{}}
}

func (c *logCounter) logger() *slog.Logger { return slog.New(countHandler{c, c.h}) }

// count returns how many records with message msg were logged.
func (c *logCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

// countHandler is the handler of a logCounter's logger, or of a logger derived from it.
type countHandler struct {
	c *logCounter
	slog.Handler
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.mu.Lock()
	h.c.n[r.Message]++
	h.c.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countHandler{h.c, h.Handler.WithAttrs(as)}
}

func (h countHandler) WithGroup(name string) slog.Handler {
	return countHandler{h.c, h.Handler.WithGroup(name)}
}
