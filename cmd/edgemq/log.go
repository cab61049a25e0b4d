package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// logFormat is how log records are written: log_format in the config file.
type logFormat int

const (
	// logText writes a line of words: LEVEL message key=value ...
	logText logFormat = iota
	// logJSON writes a JSON object a line (log/slog's JSON handler).
	logJSON
)

// logTimestamps says whether log lines start with the time: log_timestamps in the config file.
type logTimestamps int

const (
	// timestampsAuto stamps lines when stderr is a terminal. Under systemd it is not, and
	// journald stamps each line itself.
	timestampsAuto logTimestamps = iota
	timestampsOn
	timestampsOff
)

// timeLayout is the time of a stamped log line: local time, milliseconds, zone offset.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// newLogger returns the logger of the config's log_level, log_format and log_timestamps,
// writing to w, and the count of records it wrote at level WARN or above.
//
// On a stream to journald (systemd sets JOURNAL_STREAM to stderr's device and inode), text
// lines start with the syslog priority of their level, "<4>WARN ...": journald files them
// at that priority (journalctl -p warning) and drops the prefix.
func (c *config) newLogger(w io.Writer) (*slog.Logger, *atomic.Int64) {
	f, isFile := w.(*os.File)
	stamp := c.logTimestamps == timestampsOn || c.logTimestamps == timestampsAuto && isFile && isTerminal(f)
	var h slog.Handler
	switch c.logFormat {
	case logJSON:
		opts := &slog.HandlerOptions{Level: c.logLevel}
		if !stamp {
			opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}
		}
		h = slog.NewJSONHandler(w, opts)
	default:
		h = &textHandler{out: &logOutput{w: w, timestamps: stamp, priority: isFile && isJournal(f)}, level: c.logLevel}
	}
	warnings := new(atomic.Int64)
	return slog.New(&countingHandler{Handler: h, warnings: warnings}), warnings
}

// countingHandler counts the records at level WARN and above that its Handler writes.
type countingHandler struct {
	slog.Handler
	warnings *atomic.Int64
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warnings.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), warnings: h.warnings}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), warnings: h.warnings}
}

// logOutput is where a textHandler and the handlers derived from it write.
type logOutput struct {
	mu         sync.Mutex // serializes writes: one record, one Write
	w          io.Writer
	timestamps bool
	priority   bool // start lines with the syslog priority, <N>
}

// textHandler writes a record as one line of text:
//
//	[2026-12-01T18:52:05.123+01:00 ]INFO serving listen=127.0.0.1:9876 data_dir=/var/lib/edgemq
//
// The message is written as is unless it holds a newline or another control character;
// values are quoted (Go syntax) when they are empty or hold a space, a quote, an "=" or such
// a character. Attributes of a group are named group.key.
type textHandler struct {
	out   *logOutput
	level slog.Leveler
	attrs []byte // the attributes of WithAttrs, formatted
	group string // the prefix of the groups of WithGroup: "a.b."
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append([]byte(nil), h.attrs...)
	for _, a := range as {
		h2.attrs = appendAttr(h2.attrs, h.group, a)
	}
	return &h2
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.group += name + "."
	return &h2
}

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256)
	if h.out.priority {
		buf = append(buf, '<')
		buf = strconv.AppendInt(buf, int64(syslogPriority(r.Level)), 10)
		buf = append(buf, '>')
	}
	if h.out.timestamps && !r.Time.IsZero() {
		buf = r.Time.AppendFormat(buf, timeLayout)
		buf = append(buf, ' ')
	}
	buf = append(buf, r.Level.String()...)
	buf = append(buf, ' ')
	if hasControl(r.Message) {
		buf = strconv.AppendQuote(buf, r.Message)
	} else {
		buf = append(buf, r.Message...)
	}
	buf = append(buf, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		buf = appendAttr(buf, h.group, a)
		return true
	})
	buf = append(buf, '\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(buf)
	return err
}

// syslogPriority is the syslog priority of a level: debug 7, info 6, warning 4, error 3.
func syslogPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// appendAttr appends " key=value" for a, or one such pair for each attribute of a group.
func appendAttr(buf []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			buf = appendAttr(buf, prefix, g)
		}
		return buf
	}
	buf = append(buf, ' ')
	buf = append(buf, prefix...)
	buf = append(buf, a.Key...)
	buf = append(buf, '=')
	var s string
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindTime:
		s = v.Time().Format(timeLayout)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprint(x)
		}
	default: // numbers, bools and durations write no spaces
		return append(buf, v.String()...)
	}
	if needsQuote(s) {
		return strconv.AppendQuote(buf, s)
	}
	return append(buf, s...)
}

// needsQuote reports whether a value must be quoted to read back as one word.
func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r == ' ' || r == '"' || r == '=' || r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}

// hasControl reports whether s holds a control character: a newline would split the record
// into two lines.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// logSince is the duration attribute of how long something took since start, for people:
// took=1.46ms.
func logSince(start time.Time) slog.Attr {
	return slog.String("took", humanDuration(time.Since(start)))
}
