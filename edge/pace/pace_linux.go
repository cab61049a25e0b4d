package pace

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// timerfd is a timer the runtime's poller waits on: a non-blocking timerfd in an *os.File.
type timerfd struct {
	f  *os.File
	rc syscall.RawConn // f's descriptor, to arm it
}

func newTimer() (timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pace: timerfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pace: timerfd: %w", err)
	}
	return &timerfd{f: f, rc: rc}, nil
}

// wait arms the timer to fire once, d from now, and reads its expiry count, which blocks
// this goroutine (not its thread) until it fires.
func (t *timerfd) wait(d time.Duration) error {
	var serr error
	if err := t.rc.Control(func(fd uintptr) {
		its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(d.Nanoseconds(), 1))}
		serr = unix.TimerfdSettime(int(fd), 0, &its, nil)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("pace: timerfd_settime: %w", serr)
	}
	var n [8]byte
	_, err := t.f.Read(n[:])
	return err
}

func (t *timerfd) close() error { return t.f.Close() }
