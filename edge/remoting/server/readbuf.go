package server

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// readBufs pools connection read buffers (readBufSize bytes).
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// connReader is a connection's buffered reader. On a socket it holds a read buffer only
// while it holds bytes: it reads when the socket has some, with a buffer from a pool that
// goes back once it is drained, so that an idle connection holds none. On anything else
// (a pipe, a TLS connection) it keeps one buffer.
type connReader struct {
	nc   net.Conn
	rc   syscall.RawConn // nil: not a socket
	buf  *[]byte         // nil while drained, on a socket
	r, w int             // (*buf)[r:w] is unread
	// drained, if set, is called when a read finds the buffer drained, before it reads
	// the connection.
	drained func()
}

func newConnReader(nc net.Conn) *connReader {
	cr := &connReader{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok && rawReadable {
		if rc, err := sc.SyscallConn(); err == nil {
			cr.rc = rc
		}
	}
	return cr
}

// Read implements io.Reader.
func (cr *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if cr.r == cr.w {
		if cr.drained != nil {
			cr.drained()
		}
		if cr.rc != nil && cr.buf != nil {
			readBufs.Put(cr.buf)
			cr.buf = nil
		}
		if len(p) >= readBufSize {
			return cr.nc.Read(p) // a large frame's body: straight into it
		}
		if err := cr.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*cr.buf)[cr.r:cr.w])
	cr.r += n
	return n, nil
}

// fill reads what the connection has into an empty buffer, waiting for it.
func (cr *connReader) fill() error {
	cr.r, cr.w = 0, 0
	if cr.rc == nil {
		if cr.buf == nil {
			cr.buf = readBufs.Get().(*[]byte)
		}
		n, err := cr.nc.Read(*cr.buf)
		cr.w = n
		if n > 0 {
			return nil
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	var n int
	var rerr error
	err := cr.rc.Read(func(fd uintptr) bool {
		if cr.buf == nil {
			cr.buf = readBufs.Get().(*[]byte)
		}
		for {
			if n, rerr = rawRead(fd, *cr.buf); rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			readBufs.Put(cr.buf) // nothing yet: wait without a buffer
			cr.buf = nil
			return false
		}
		return true
	})
	if err != nil {
		return err // the read deadline, or the connection closed
	}
	switch {
	case rerr != nil:
		return &net.OpError{Op: "read", Net: "tcp", Source: cr.nc.LocalAddr(), Addr: cr.nc.RemoteAddr(), Err: rerr}
	case n == 0:
		return io.EOF
	}
	cr.w = n
	return nil
}

// release returns the buffer to the pool: the reader is done.
func (cr *connReader) release() {
	if cr.buf != nil {
		readBufs.Put(cr.buf)
		cr.buf = nil
	}
}
