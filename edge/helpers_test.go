package edge

import (
	"log/slog"
	"strings"
	"testing"

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
