package commitlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/vfs"
)

func TestHasSegments(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "log")
	if ok, err := HasSegments(vfs.OS, dir); ok || err != nil {
		t.Errorf("missing dir: got %v, %v; want false, nil", ok, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasSegments(vfs.OS, dir); ok || err != nil {
		t.Errorf("dir without segments: got %v, %v; want false, nil", ok, err)
	}
	openTest(t, dir, Options{}).Close()
	if ok, err := HasSegments(vfs.OS, dir); !ok || err != nil {
		t.Errorf("dir of a log: got %v, %v; want true, nil", ok, err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := HasSegments(vfs.OS, file); ok || err == nil {
		t.Errorf("regular file: got %v, %v; want an error", ok, err)
	}
}
