package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"
)

func TestTextLogLines(t *testing.T) {
	at := time.Date(2026, 12, 1, 18, 52, 5, 123e6, time.UTC)
	for _, tc := range []struct {
		name string
		log  func(lg *slog.Logger)
		want string
	}{
		{"plain", func(lg *slog.Logger) { lg.Info("serving", "listen", "127.0.0.1:9876", "conns", 3, "ok", true) },
			"INFO serving listen=127.0.0.1:9876 conns=3 ok=true\n"},
		{"quoted values", func(lg *slog.Logger) {
			lg.Warn("cut", "segment", "/a b/x.log", "empty", "", "eq", "a=b", "err", errors.New(`bad "x"`))
		}, `WARN cut segment="/a b/x.log" empty="" eq="a=b" err="bad \"x\""` + "\n"},
		{"a newline in the message stays on one line", func(lg *slog.Logger) { lg.Error("two\nlines", "v", "a\nb") },
			`ERROR "two\nlines" v="a\nb"` + "\n"},
		{"durations and times", func(lg *slog.Logger) { lg.Info("m", "d", 1500*time.Millisecond, "t", at) },
			"INFO m d=1.5s t=2026-12-01T18:52:05.123Z\n"},
		{"groups and attrs", func(lg *slog.Logger) {
			lg.With("conn", 7).WithGroup("req").With("code", 34).Info("m", slog.Group("g", "a", 1), "b", 2)
		}, "INFO m conn=7 req.code=34 req.g.a=1 req.b=2\n"},
		{"below the level", func(lg *slog.Logger) { lg.Debug("hidden") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			c := newConfig()
			lg, _ := c.newLogger(&b)
			tc.log(lg)
			if b.String() != tc.want {
				t.Fatalf("got  %q\nwant %q", b.String(), tc.want)
			}
		})
	}
}

// TestLogTimestamps: auto stamps no line written to a pipe or a buffer (journald stamps them
// itself); on stamps every line, off none; in JSON too.
func TestLogTimestamps(t *testing.T) {
	stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) INFO hello\n$`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Fatal("a pipe is a terminal")
	}
	for _, tc := range []struct {
		ts     logTimestamps
		format logFormat
		stamp  bool
	}{
		{timestampsAuto, logText, false},
		{timestampsOn, logText, true},
		{timestampsOff, logText, false},
		{timestampsAuto, logJSON, false},
		{timestampsOn, logJSON, true},
	} {
		c := newConfig()
		c.logTimestamps, c.logFormat = tc.ts, tc.format
		lg, _ := c.newLogger(w)
		lg.Info("hello")
		buf := make([]byte, 512)
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		line := string(buf[:n])
		var stamp bool
		if tc.format == logJSON {
			var m map[string]any
			if err := json.Unmarshal(buf[:n], &m); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			_, stamp = m["time"]
			if m["level"] != "INFO" || m["msg"] != "hello" {
				t.Errorf("json line %q", line)
			}
		} else {
			stamp = stamped.MatchString(line)
			if !stamp && line != "INFO hello\n" {
				t.Errorf("text line %q", line)
			}
		}
		if stamp != tc.stamp {
			t.Errorf("log_timestamps %v, log_format %v: line %q, want stamped %v", tc.ts, tc.format, line, tc.stamp)
		}
	}
}

// TestLogToJournal: on the stream systemd connects to journald, text lines start with their
// syslog priority; on another stream they do not.
func TestLogToJournal(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", sys.Dev, sys.Ino))
	c := newConfig()
	c.logLevel = slog.LevelDebug
	lg, warnings := c.newLogger(f)
	lg.Debug("d")
	lg.Info("i")
	lg.Warn("w")
	lg.Error("e")
	t.Setenv("JOURNAL_STREAM", "1:2")
	other, _ := c.newLogger(f)
	other.Warn("not the journal")
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if want := "<7>DEBUG d\n<6>INFO i\n<4>WARN w\n<3>ERROR e\nWARN not the journal\n"; string(b) != want {
		t.Fatalf("got  %q\nwant %q", b, want)
	}
	if n := warnings.Load(); n != 2 {
		t.Fatalf("%d warnings counted, want 2", n)
	}
}
