// Package rawsock reads and writes a socket's descriptor in raw system calls, which the Go
// runtime does not see as system calls.
//
// A read or write through net.Conn tells the scheduler that a system call begins, and the
// first one after the process was idle wakes the runtime's monitor thread (sysmon), which
// then polls every 20 µs for about a millisecond before it sleeps again. A broker or client
// that handles a message every 100 µs is idle between messages: each message then paid a
// futex wake of that thread and a string of its wake-ups, on the CPU the message's own work
// needed (`edgemq serve` pinned to one CPU at 10,000 messages a second: 0.5 futex calls, 0.4
// nanosleeps and 1.6 context switches a message). A read or write of a non-blocking socket
// never sleeps in the kernel, so the scheduler loses nothing by not being told: it only
// copies bytes, and the sender's side runs the loopback's receive path. A socket with
// nothing to read (or no room to write) is waited for through the runtime's poller, with
// the connection's deadlines, as net.Conn does.
//
// A Conn falls back to its net.Conn where the descriptor cannot be had (TLS, a pipe, a
// wrapped connection) or off Linux.
package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Conn reads and writes a connection, in raw system calls when it is a socket. One
// goroutine may read while another writes; reads (and writes) must not run concurrently
// with each other.
type Conn struct {
	nc net.Conn
	rc syscall.RawConn // nil: through nc

	// The read under way (Read): its buffer, result and error.
	rb   []byte
	rn   int
	rerr error
	rfn  func(fd uintptr) bool // c.tryRead, bound once

	// The write under way (WriteBuffers).
	wbufs *net.Buffers
	werr  error
	iov   []iovec
	wfn   func(fd uintptr) bool // c.tryWrite, bound once
	one   [1][]byte
	onev  net.Buffers
}

// New returns a Conn on nc: raw on a socket whose descriptor can be had, else through nc.
func New(nc net.Conn) *Conn {
	c := &Conn{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok && supported {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
		}
	}
	c.rfn, c.wfn = c.tryRead, c.tryWrite
	return c
}

// Raw reports whether c reads and writes its descriptor itself.
func (c *Conn) Raw() bool { return c.rc != nil }

// Read implements io.Reader: it waits for bytes (up to the connection's read deadline) and
// reads what the socket holds, up to len(p). The end of the stream is io.EOF.
func (c *Conn) Read(p []byte) (int, error) {
	if c.rc == nil {
		return c.nc.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.rb, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.rfn)
	n, rerr := c.rn, c.rerr
	c.rb, c.rn, c.rerr = nil, 0, nil
	switch {
	case err != nil:
		return 0, err // the deadline, or the connection closed
	case rerr != nil:
		return 0, c.opError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *Conn) tryRead(fd uintptr) bool {
	for {
		n, err := Read(fd, c.rb)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerr = n, err
		return true
	}
}

// Write implements io.Writer: it writes all of p, waiting for room up to the connection's
// write deadline.
func (c *Conn) Write(p []byte) (int, error) {
	if c.rc == nil {
		return c.nc.Write(p)
	}
	c.one[0] = p
	c.onev = c.one[:]
	err := c.WriteBuffers(&c.onev)
	n := len(p)
	if len(c.onev) > 0 {
		n -= len(c.onev[0])
	}
	c.one[0], c.onev = nil, nil
	return n, err
}

// WriteBuffers writes bufs as net.Buffers.WriteTo does, in as few system calls as it can,
// waiting for room up to the connection's write deadline; on an error bufs holds what was
// not written.
func (c *Conn) WriteBuffers(bufs *net.Buffers) error {
	if c.rc == nil {
		_, err := bufs.WriteTo(c.nc)
		return err
	}
	c.wbufs, c.werr = bufs, nil
	err := c.rc.Write(c.wfn)
	if err == nil && c.werr != nil {
		err = c.opError("write", c.werr)
	}
	clear(c.iov[:cap(c.iov)]) // hold none of the buffers
	c.iov = c.iov[:0]
	c.wbufs, c.werr = nil, nil
	return err
}

// maxIov is how many buffers one writev takes (Linux's IOV_MAX).
const maxIov = 1024

func (c *Conn) tryWrite(fd uintptr) bool {
	bufs := c.wbufs
	for {
		c.iov = c.iov[:0]
		for _, b := range *bufs {
			if len(b) == 0 {
				continue
			}
			c.iov = appendIov(c.iov, b)
			if len(c.iov) == maxIov {
				break
			}
		}
		if len(c.iov) == 0 {
			*bufs = (*bufs)[len(*bufs):]
			return true
		}
		n, err := Writev(fd, c.iov)
		switch err {
		case nil:
			consume(bufs, n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = err
			return true
		}
	}
}

// consume drops the first n bytes of v, as net.Buffers does once they are written.
func consume(v *net.Buffers, n int) {
	for len(*v) > 0 {
		if l := len((*v)[0]); l > n {
			(*v)[0] = (*v)[0][n:]
			return
		} else {
			n -= l
		}
		(*v)[0] = nil
		*v = (*v)[1:]
	}
}

// opError wraps a system call's error as net.Conn's methods do.
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.nc.LocalAddr().Network(), Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError(op, err)}
}
