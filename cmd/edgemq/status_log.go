package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// recentLog keeps the last records at level WARN and above, for the status page: a ring of
// a fixed size, the oldest overwritten first.
type recentLog struct {
	mu    sync.Mutex // guards the fields below; a leaf
	ring  []logEntry
	next  int   // where the next record goes
	total int64 // records seen
}

// logEntry is one record of recentLog, as /api/status gives it.
type logEntry struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"msg"`
	// Attrs are the record's key=value pairs, in the order written.
	Attrs string `json:"attrs,omitempty"`
}

// recentErrors is how many warnings and errors the status page shows.
const recentErrors = 50

func newRecentLog(n int) *recentLog { return &recentLog{ring: make([]logEntry, 0, n)} }

func (l *recentLog) add(e logEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, e)
		return
	}
	l.ring[l.next] = e
	l.next = (l.next + 1) % len(l.ring)
}

// entries returns the records kept, newest first, and how many were seen in all.
func (l *recentLog) entries() ([]logEntry, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]logEntry, 0, len(l.ring))
	for i := range l.ring {
		// Newest first: just before next, going back.
		out = append(out, l.ring[(l.next-1-i+2*len(l.ring))%len(l.ring)])
	}
	return out, l.total
}

// recentHandler passes every record to its Handler and keeps those at WARN and above in a
// recentLog.
type recentHandler struct {
	slog.Handler
	log   *recentLog
	attrs string // from WithAttrs, written
	group string // from WithGroup, as a key prefix
}

func newRecentHandler(h slog.Handler, l *recentLog) *recentHandler {
	return &recentHandler{Handler: h, log: l}
}

// Enabled is true at WARN and above even when the wrapped handler writes only errors.
func (h *recentHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn || h.Handler.Enabled(ctx, level)
}

func (h *recentHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var sb strings.Builder
		sb.WriteString(h.attrs)
		r.Attrs(func(a slog.Attr) bool {
			writeAttr(&sb, h.group, a)
			return true
		})
		h.log.add(logEntry{Time: r.Time, Level: r.Level.String(), Message: r.Message, Attrs: strings.TrimSpace(sb.String())})
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *recentHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var sb strings.Builder
	sb.WriteString(h.attrs)
	for _, a := range as {
		writeAttr(&sb, h.group, a)
	}
	return &recentHandler{Handler: h.Handler.WithAttrs(as), log: h.log, attrs: sb.String(), group: h.group}
}

func (h *recentHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &recentHandler{Handler: h.Handler.WithGroup(name), log: h.log, attrs: h.attrs, group: h.group + name + "."}
}

// writeAttr writes " key=value", groups flattened into dotted keys.
func writeAttr(sb *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, ga := range v.Group() {
			writeAttr(sb, p, ga)
		}
		return
	}
	if a.Key == "" {
		return
	}
	sb.WriteString(" ")
	sb.WriteString(prefix + a.Key)
	sb.WriteString("=")
	sb.WriteString(v.String())
}
