//go:build !unix

package server

import "errors"

// rawReadable says that connReader cannot read a socket's descriptor itself here: it
// keeps a buffer per connection.
const rawReadable = false

func rawRead(fd uintptr, b []byte) (int, error) {
	return 0, errors.New("server: raw reads not supported")
}
