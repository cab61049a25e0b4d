package rawsock

import (
	"syscall"
	"unsafe"
)

// iovec is writev's description of a buffer.
type iovec = syscall.Iovec

// supported says that a socket's descriptor is read and written here.
const supported = true

// Read reads a non-blocking descriptor in a raw system call: syscall.EAGAIN when it has
// nothing yet.
func Read(fd uintptr, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(p), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// Writev writes iov to a non-blocking descriptor in a raw system call and returns how many
// bytes it took: syscall.EAGAIN when it has no room.
func Writev(fd uintptr, iov []iovec) (int, error) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func appendIov(iov []iovec, b []byte) []iovec {
	v := iovec{Base: &b[0]}
	v.SetLen(len(b))
	return append(iov, v)
}
