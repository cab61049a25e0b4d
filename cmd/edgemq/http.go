package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/edge/uplink"
)

// defaultHTTPListen is http.listen's default: loopback only, the remoting port plus one.
const defaultHTTPListen = "127.0.0.1:9877"

// monitor is serve's HTTP listener (http.listen): Prometheus metrics (/metrics), health
// and readiness (/healthz, /readyz), the status page (/) and its JSON (/api/status). It is
// up before the store opens, so that a probe sees recovery, and stops after the remoting
// server.
//
// Goroutines, stopped and waited for by shutdown: the HTTP server's (net/http's accept
// loop and one per connection), and the rate sampler once the broker is open.
type monitor struct {
	lg      *slog.Logger
	recent  *recentLog
	stall   time.Duration // Health's
	started time.Time

	broker atomic.Pointer[edge.Broker]   // set by serving
	srv    atomic.Pointer[server.Server] // set by serving
	uplink atomic.Pointer[uplink.Uplink] // set by setUplink; nil without rules
	ready  atomic.Bool                   // serving and not stopping
	stop   atomic.Bool                   // stopping was called
	rates  *rateSampler                  // set by serving, before broker

	ln   net.Listener
	hs   *http.Server
	done chan struct{} // closed when the HTTP server's Serve returned
	once sync.Once
}

// startMonitor binds addr and serves the endpoints. recent holds the log's last warnings.
func startMonitor(addr string, lg *slog.Logger, recent *recentLog, stall time.Duration) (*monitor, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	m := &monitor{lg: lg, recent: recent, stall: stall, started: time.Now(), ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", m.handleMetrics)
	mux.HandleFunc("GET /healthz", m.handleHealthz)
	mux.HandleFunc("GET /readyz", m.handleReadyz)
	mux.HandleFunc("GET /api/status", m.handleStatus)
	mux.Handle("GET /", http.FileServer(webFS()))
	m.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(lg.Handler(), slog.LevelDebug)}
	go func() {
		defer close(m.done)
		if err := m.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("http server failed", "err", err)
		}
	}()
	return m, nil
}

// Addr returns the bound address.
func (m *monitor) Addr() net.Addr { return m.ln.Addr() }

// serving says the broker is open and the remoting server up: /readyz answers 200.
func (m *monitor) serving(b *edge.Broker, srv *server.Server) {
	m.rates = startRateSampler(b, rateEvery, rateWindow)
	m.srv.Store(srv)
	m.broker.Store(b)
	m.ready.Store(!m.stop.Load())
}

// setUplink has /metrics and /api/status report u's rules.
func (m *monitor) setUplink(u *uplink.Uplink) { m.uplink.Store(u) }

// stopping says serve is stopping: /readyz answers 503 from now on.
func (m *monitor) stopping() {
	m.stop.Store(true)
	m.ready.Store(false)
}

// state is serve's state for /api/status.
func (m *monitor) state() string {
	switch {
	case m.stop.Load():
		return "stopping"
	case m.broker.Load() == nil:
		return "recovering"
	}
	return "serving"
}

// shutdown stops the HTTP server (waiting at most until ctx ends for requests being
// answered) and the rate sampler. Calls after the first do nothing.
func (m *monitor) shutdown(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		m.stopping()
		err = m.hs.Shutdown(ctx)
		if err != nil {
			m.hs.Close()
		}
		<-m.done
		if m.broker.Load() != nil {
			m.rates.stop()
		}
	})
	return err
}

// handleHealthz answers 200 while the process serves (and while it recovers the store),
// and 503 with the reason when the store's health check fails or the broker is closed.
func (m *monitor) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	b := m.broker.Load()
	if b == nil {
		fmt.Fprintln(w, "ok: recovering the store")
		return
	}
	if err := b.Health(m.stall); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// handleReadyz answers 200 once recovery finished and the listeners are up, 503 before
// and while stopping.
func (m *monitor) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !m.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", m.state())
		return
	}
	fmt.Fprintln(w, "ready")
}

func sortTopics(ts []edge.TopicConfig) {
	slices.SortFunc(ts, func(a, b edge.TopicConfig) int { return strings.Compare(a.Name, b.Name) })
}

func sortedCodes(m map[int16]int64) []int16 {
	out := make([]int16, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b int16) int { return cmp.Compare(a, b) })
	return out
}
