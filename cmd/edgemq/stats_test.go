package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatsShowRecovery: after a crash left stale bytes past the log's end, stats says what
// recovery cut and that a .broken file keeps it, the same on a data dir and against a server
// on a copy of it.
func TestStatsShowRecovery(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "send", "-data", dir, "-topic", "T", "-create", "one", "two")
	var st statsJSON
	mustJSON(t, &st, "stats", "-data", dir, "-json")
	if st.Recovery != (recoveryJSON{}) {
		t.Fatalf("recovery after a clean close: %+v", st.Recovery)
	}
	// Garbage where the next frame would start, as a write torn by a power cut leaves it.
	seg, err := os.OpenFile(filepath.Join(dir, "commitlog", "00000000000000000000.log"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seg.WriteAt([]byte(strings.Repeat("\xa5", 100)), st.Commitlog.MaxPos); err != nil {
		t.Fatal(err)
	}
	seg.Close()
	served := filepath.Join(t.TempDir(), "served")
	if err := os.CopyFS(served, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}

	out := mustRun(t, "stats", "-data", dir)
	if !strings.Contains(out, "recovery at open: cut 0 records (100 B)") || !strings.Contains(out, ".broken files kept: 1 (100 B)") {
		t.Errorf("stats after a torn tail:\n%s", out)
	}
	_, addr := startServe(t, nil, "-data", served)
	if remote := mustRun(t, "stats", "-server", addr); normalizeRemote(remote) != normalizeRemote(out) {
		t.Errorf("stats -server:\n%s\nstats -data:\n%s", remote, out)
	}
	mustJSON(t, &st, "stats", "-server", addr, "-json")
	if r := st.Recovery; r.Bytes != 100 || r.BrokenFiles != 1 || r.BrokenBytes != 100 || r.BrokenMade != 1 {
		t.Errorf("stats -server -json recovery: %+v", r)
	}
}
