package server

import "github.com/edgemq/edgemq/edge/remoting/internal/rawsock"

// rawReadable says that connReader can read a socket's descriptor itself.
const rawReadable = true

// rawRead reads from a non-blocking descriptor, in a raw system call (see package rawsock).
func rawRead(fd uintptr, b []byte) (int, error) { return rawsock.Read(fd, b) }
