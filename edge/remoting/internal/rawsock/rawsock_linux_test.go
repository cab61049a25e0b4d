package rawsock

import (
	"io"
	"net"
	"runtime"
	"testing"
)

// TestWriteHoldsNoBuffer: once a write returns, the Conn holds no reference to the buffers
// it wrote (a pooled buffer reused after it must not be kept alive, or read, by it).
func TestWriteHoldsNoBuffer(t *testing.T) {
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b)
	c := New(a)
	bufs := net.Buffers{pattern(100, 1), pattern(100, 2)}
	if err := c.WriteBuffers(&bufs); err != nil {
		t.Fatal(err)
	}
	for i, v := range c.iov[:cap(c.iov)] {
		if v.Base != nil {
			t.Fatalf("iov[%d] still points at a written buffer", i)
		}
	}
	runtime.KeepAlive(bufs)
}
