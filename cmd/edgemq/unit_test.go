package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// unitFile is the systemd unit of edgemq serve.
const unitFile = "../../configs/edgemq.service"

// readUnit returns the [Service] settings of a unit file, each key's values in order.
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[':
			section = l
		case section == "[Service]":
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", path, l)
			}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnitFile: the systemd unit runs edgemq serve with flags it takes, as a notify service
// with a watchdog it can feed, a restart on failure, its data dir as its state directory, and
// a stop timeout above the server's shutdown_timeout, so that a stop stays clean.
func TestUnitFile(t *testing.T) {
	u := readUnit(t, unitFile)
	one := func(k string) string {
		t.Helper()
		if len(u[k]) != 1 {
			t.Fatalf("%s: %s=%q, want one value", unitFile, k, u[k])
		}
		return u[k][0]
	}
	for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure",
		"StateDirectory": "edgemq", "User": "edgemq", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"ProtectHome": "yes", "PrivateTmp": "yes", "LimitNOFILE": "65536"} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	args := strings.Fields(one("ExecStart"))
	if len(args) < 2 || !strings.HasSuffix(args[0], "/edgemq") || args[1] != "serve" {
		t.Fatalf("ExecStart=%s does not run edgemq serve", one("ExecStart"))
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	serveCommand(fs)
	if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 {
		t.Fatalf("ExecStart's flags %q: %v %q", args[2:], err, fs.Args())
	}
	if data := fs.Lookup("data").Value.String(); data != "/var/lib/"+one("StateDirectory") || !strings.Contains(one("ReadWritePaths"), data) {
		t.Errorf("-data %s is not the state directory /var/lib/%s, or not in ReadWritePaths=%s", data, one("StateDirectory"), one("ReadWritePaths"))
	}
	watchdog, err := time.ParseDuration(one("WatchdogSec"))
	if err != nil || watchdog < 2*time.Second {
		t.Errorf("WatchdogSec=%s: %v; want a Go-syntax duration of at least 2s", one("WatchdogSec"), err)
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil || stop <= defaultShutdownTimeout+5*time.Second {
		t.Errorf("TimeoutStopSec=%s: %v; want it well above shutdown_timeout, %v", one("TimeoutStopSec"), err, defaultShutdownTimeout)
	}
}
