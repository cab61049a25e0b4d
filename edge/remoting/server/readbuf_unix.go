//go:build unix && !linux

package server

import "syscall"

// rawReadable says that connReader can read a socket's descriptor itself.
const rawReadable = true

// rawRead reads from a non-blocking descriptor.
func rawRead(fd uintptr, b []byte) (int, error) {
	n, err := syscall.Read(int(fd), b)
	if n < 0 {
		n = 0
	}
	return n, err
}
