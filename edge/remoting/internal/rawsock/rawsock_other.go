//go:build !linux

package rawsock

import "errors"

// iovec stands for writev's description of a buffer.
type iovec struct{}

// supported says that a socket's descriptor is not read or written here: a Conn goes
// through its net.Conn.
const supported = false

var errUnsupported = errors.New("rawsock: raw socket system calls not supported here")

// Read is not supported here.
func Read(fd uintptr, b []byte) (int, error) { return 0, errUnsupported }

// Writev is not supported here.
func Writev(fd uintptr, iov []iovec) (int, error) { return 0, errUnsupported }

func appendIov(iov []iovec, b []byte) []iovec { return iov }
