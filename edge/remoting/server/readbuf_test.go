package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection; t.Cleanup closes them.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestConnReaderIdleHoldsNoBuffer: the reader returns the bytes written in order, small
// reads through its buffer and large ones straight; once drained and waiting it holds no
// buffer, and the read deadline and the peer's close come through as errors.
func TestConnReaderIdleHoldsNoBuffer(t *testing.T) {
	client, server := tcpPair(t)
	cr := newConnReader(server)
	if cr.rc == nil {
		t.Fatal("a TCP connection read without its descriptor")
	}
	want := make([]byte, 3*readBufSize)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go client.Write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(io.LimitReader(cr, 100), got[:100]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cr, got[100:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes read differ from those written")
	}
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := cr.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if cr.buf != nil {
		t.Fatal("a reader waiting on an idle connection holds a buffer")
	}
	server.SetReadDeadline(time.Time{})
	client.Write([]byte("abc"))
	client.Close()
	b, err := io.ReadAll(cr)
	if string(b) != "abc" || err != nil {
		t.Fatalf("read %q, %v; want abc and EOF", b, err)
	}
	cr.release()
}
