package vfs

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestUsageIsDf: Usage counts as df does: Total is df's Used plus Avail (blocks reserved
// for root are not capacity), Free is Avail, so UsedRatio is df's Use%. Checked against
// df on the test's directory; the file system is shared, so the two readings may differ
// by what others wrote between them.
func TestUsageIsDf(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("df", "-B1", "--output=used,avail", dir).Output()
	if err != nil {
		t.Skipf("df: %v", err)
	}
	u, err := OS.Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("df output %q", out)
	}
	used, err1 := strconv.ParseUint(f[2], 10, 64)
	avail, err2 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("df output %q", out)
	}
	const slack = 256 << 20
	near := func(a, b uint64) bool { return max(a, b)-min(a, b) <= slack }
	if !near(u.Total, used+avail) || !near(u.Free, avail) {
		t.Errorf("Usage %+v; df: used %d, avail %d (total %d)", u, used, avail, used+avail)
	}
	t.Logf("UsedRatio %.3f, df Use%% %.3f", u.UsedRatio(), float64(used)/float64(used+avail))
}
