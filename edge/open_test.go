package edge

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/dirlock"
)

// TestOpenFails: Open refuses a data dir it cannot use and options that are out of range or
// contradict each other with an error that says why, never a panic, and leaves nothing
// behind: no goroutine (TestMain checks), no lock on the data dir, which opens afterwards.
func TestOpenFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string // "": a new temp dir
		opts *Options
		is   error  // the error wraps it (nil: any error)
		says string // and its text holds this
	}{
		{"empty data dir", "-", nil, mq.ErrInvalidArgument, "empty data dir"},
		{"data dir is a file", file, nil, nil, "not a directory"},
		{"data dir under a file", filepath.Join(file, "sub"), nil, nil, "not a directory"},
		{"1 MiB segments, 4 MiB messages", "", &Options{Store: &store.Options{SegmentSize: 1 << 20}}, store.ErrOptions, "SegmentSize 1048576 too small for MaxMessageSize 4194304"},
		{"messages larger than segments", "", &Options{MaxMessageSize: math.MaxInt}, store.ErrOptions, "out of range"},
		{"negative MaxMessageSize", "", &Options{MaxMessageSize: -1}, mq.ErrInvalidArgument, "negative MaxMessageSize"},
		{"negative store MaxMessageSize", "", &Options{Store: &store.Options{MaxMessageSize: -1}}, store.ErrOptions, "MaxMessageSize -1 out of range"},
		{"negative CompressOver", "", &Options{CompressOver: -100}, mq.ErrInvalidArgument, "negative CompressOver"},
		{"negative MaxReconsumeTimes", "", &Options{MaxReconsumeTimes: -1}, mq.ErrInvalidArgument, "negative MaxReconsumeTimes"},
		{"negative DefaultQueues", "", &Options{DefaultQueues: -1}, mq.ErrInvalidArgument, "DefaultQueues -1"},
		{"too many DefaultQueues", "", &Options{DefaultQueues: 5000}, mq.ErrInvalidArgument, "DefaultQueues 5000"},
		{"negative MaxSuspend", "", &Options{MaxSuspend: -time.Second}, mq.ErrInvalidArgument, "negative MaxSuspend"},
		{"negative LockLifetime", "", &Options{LockLifetime: -time.Second}, mq.ErrInvalidArgument, "negative LockLifetime"},
		{"bad BrokerName", "", &Options{BrokerName: "a b"}, mq.ErrInvalidArgument, "BrokerName"},
		{"too many delay levels", "", &Options{DelayLevels: make([]time.Duration, 65)}, mq.ErrInvalidArgument, "65 delay levels"},
		{"zero delay level", "", &Options{DelayLevels: []time.Duration{time.Second, 0}}, mq.ErrInvalidArgument, "delay level 2"},
		{"negative store QueueSegmentEntries", "", &Options{Store: &store.Options{QueueSegmentEntries: -1}}, nil, "QueueSegmentEntries"},
		{"negative store FlushInterval", "", &Options{Store: &store.Options{FlushInterval: -1}}, store.ErrOptions, "FlushInterval -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			switch dir {
			case "-":
				dir = ""
			case "":
				dir = t.TempDir()
			}
			b, err := Open(dir, tc.opts)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			if b != nil {
				t.Fatalf("Open returned a broker with %v", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %q, want an error wrapping %v saying %q", err, tc.is, tc.says)
			}
			t.Log(err)
			if tc.dir == "" { // the data dir is not left locked
				l, err := dirlock.Acquire(dir)
				if err != nil {
					t.Fatalf("after the failed Open: %v", err)
				}
				l.Release()
			}
		})
	}
}

// TestOpenDirHeldByAnotherProcess: a data dir that a running broker holds, here in a child
// process, is refused with an error that names the holder's pid.
func TestOpenDirHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := holderCommand(t, dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the holder closes its broker and exits
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder: %v", err)
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "HOLDING\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}

	b, err := Open(dir, nil)
	if err == nil {
		b.Close()
		t.Fatal("Open of a data dir another process holds succeeded")
	}
	if pid := fmt.Sprintf("pid %d", cmd.Process.Pid); !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), pid) {
		t.Fatalf("got %q, want an error wrapping %v that names %s", err, dirlock.ErrLocked, pid)
	}
	t.Log(err)
}

// holderCommand runs this test binary as a child that holds dir with an open broker until
// its stdin closes, through EDGEMQ_TEST_EXEC_WRAPPER (qemu-user for cross-architecture
// runs) when set.
func holderCommand(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=^TestOpenHolderChild$", "-test.v=false"}
	cmd := exec.Command(exe, args...)
	if w := os.Getenv("EDGEMQ_TEST_EXEC_WRAPPER"); w != "" {
		cmd = exec.Command(w, append([]string{exe}, args...)...)
	}
	cmd.Env = append(os.Environ(), "EDGEMQ_HOLD_DIR="+dir)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestOpenHolderChild is the child of TestOpenDirHeldByAnotherProcess.
func TestOpenHolderChild(t *testing.T) {
	dir := os.Getenv("EDGEMQ_HOLD_DIR")
	if dir == "" {
		t.Skip("child process of TestOpenDirHeldByAnotherProcess")
	}
	b, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("HOLDING")
	io.Copy(io.Discard, os.Stdin)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
