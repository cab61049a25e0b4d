package dirlock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAcquireHostileDirs acquires hostile dirs: each fails naming the path, and none makes a
// LOCK file elsewhere.
func TestAcquireHostileDirs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lockDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(lockDir, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, want string }{
		{"empty path", "", "empty"},
		{"dir is a file", file, filepath.Join(file, FileName)},
		{"LOCK is a directory", lockDir, filepath.Join(lockDir, FileName)},
		{"missing dir", filepath.Join(t.TempDir(), "missing"), "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Acquire(tc.dir)
			if err == nil {
				l.Release()
				t.Fatal("Acquire succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(FileName); !os.IsNotExist(err) {
		t.Errorf("Acquire made %s in the working directory (stat: %v)", FileName, err)
		os.Remove(FileName)
	}
}
