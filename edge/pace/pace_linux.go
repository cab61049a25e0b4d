package pace

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// timerfd is a timer the runtime's poller waits on: a non-blocking timerfd in an *os.File.
// It is armed and read in raw system calls, which the runtime does not see as system calls:
// the first system call after a process was idle wakes the runtime's monitor thread, which
// then polls every 20 µs for about a millisecond, on the CPUs a paced sender measures.
type timerfd struct {
	f  *os.File
	rc syscall.RawConn // f's descriptor, to arm and read it

	its  unix.ItimerSpec       // the expiry to arm (wait)
	serr error                 // arm's outcome
	arm  func(fd uintptr)      // t.armFD, bound once
	rerr error                 // read's outcome
	read func(fd uintptr) bool // t.readFD, bound once
	n    [8]byte               // the expiry count read
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
	t := &timerfd{f: f, rc: rc}
	t.arm, t.read = t.armFD, t.readFD
	return t, nil
}

// wait arms the timer to fire once, d from now, and reads its expiry count, which blocks
// this goroutine (not its thread) until it fires.
func (t *timerfd) wait(d time.Duration) error {
	t.its = unix.ItimerSpec{Value: unix.NsecToTimespec(max(d.Nanoseconds(), 1))}
	if err := t.rc.Control(t.arm); err != nil {
		return err
	}
	if t.serr != nil {
		return fmt.Errorf("pace: timerfd_settime: %w", t.serr)
	}
	if err := t.rc.Read(t.read); err != nil {
		return err
	}
	if t.rerr != nil {
		return fmt.Errorf("pace: read timerfd: %w", t.rerr)
	}
	return nil
}

func (t *timerfd) armFD(fd uintptr) {
	t.serr = nil
	if _, _, errno := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&t.its)), 0, 0, 0); errno != 0 {
		t.serr = errno
	}
}

// readFD reads the expiry count; false (wait for the poller) while the timer has not fired.
func (t *timerfd) readFD(fd uintptr) bool {
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&t.n[0])), uintptr(len(t.n)))
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		case 0:
			t.rerr = nil
		default:
			t.rerr = errno
		}
		return true
	}
}

func (t *timerfd) close() error { return t.f.Close() }
