package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// pattern returns n bytes that differ from any shift of themselves.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestRawOnTCP(t *testing.T) {
	a, _ := tcpPair(t)
	if got := New(a).Raw(); got != supported {
		t.Fatalf("Raw() = %v on a TCP socket, want %v", got, supported)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if New(p1).Raw() {
		t.Fatal("Raw() on a net.Pipe: it has no descriptor")
	}
}

// TestWriteBuffersWhole writes far more than the socket buffers hold, in more buffers than
// one writev takes, empty ones among them, to a peer that reads slowly: the writes run out
// of room, wait for the poller and go on where they stopped, and every byte arrives in order.
func TestWriteBuffersWhole(t *testing.T) {
	for _, name := range []string{"tcp", "pipe"} {
		t.Run(name, func(t *testing.T) {
			var a, b net.Conn
			if name == "tcp" {
				a, b = tcpPair(t)
			} else {
				a, b = net.Pipe()
				defer a.Close()
				defer b.Close()
			}
			var want []byte
			var bufs net.Buffers
			for i := range 3000 {
				p := pattern(i%1500, i) // 0 to 1,499 bytes: some empty
				want = append(want, p...)
				bufs = append(bufs, p)
			}
			got := make(chan []byte, 1)
			b.SetReadDeadline(time.Now().Add(10 * time.Second)) // a write that loses bytes fails, not hangs
			go func() {
				var all []byte
				buf := make([]byte, 777)
				for len(all) < len(want) {
					n, err := b.Read(buf)
					all = append(all, buf[:n]...)
					if err != nil {
						break
					}
					if len(all) < 1<<20 {
						time.Sleep(time.Millisecond / 10) // slow at first: the writer waits for room
					}
				}
				got <- all
			}()
			c := New(a)
			if err := a.SetWriteDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteBuffers(&bufs); err != nil {
				t.Fatalf("WriteBuffers: %v", err)
			}
			if len(bufs) != 0 {
				t.Fatalf("WriteBuffers returned with %d buffers left", len(bufs))
			}
			if all := <-got; !bytes.Equal(all, want) {
				t.Fatalf("the peer read %d bytes that differ from the %d written", len(all), len(want))
			}
		})
	}
}

// TestWriteDeadlineLeavesRest: a peer that does not read makes a write run out of its
// deadline; the error is the deadline's, and bufs holds exactly what was not written.
func TestWriteDeadlineLeavesRest(t *testing.T) {
	a, b := tcpPair(t)
	want := pattern(32<<20, 7)
	bufs := net.Buffers{want[:1<<20], want[1<<20 : 3<<20], want[3<<20:]}
	c := New(a)
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	err := c.WriteBuffers(&bufs)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteBuffers to a peer that does not read: %v, want the deadline", err)
	}
	var rest []byte
	for _, p := range bufs {
		rest = append(rest, p...)
	}
	if len(rest) == 0 || len(rest) == len(want) {
		t.Fatalf("%d of %d bytes left: want a part written", len(rest), len(want))
	}
	written := len(want) - len(rest)
	if !bytes.Equal(rest, want[written:]) {
		t.Fatal("what is left is not the tail of what was given")
	}
	got := make([]byte, written)
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[:written]) {
		t.Fatal("the peer read other bytes than the head written")
	}
}

func TestReadDeadlineEOFAndClosed(t *testing.T) {
	a, b := tcpPair(t)
	c := New(a)
	buf := make([]byte, 64)
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with nothing sent: %v, want the deadline", err)
	}
	a.SetReadDeadline(time.Time{})
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
	b.Close()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
	}
	a.Close()
	if _, err := c.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read of a closed connection: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write to a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestWriteToResetPeer: the socket's own error (the peer reset the connection) comes back
// as net.Conn's would, an *net.OpError wrapping the errno.
func TestWriteToResetPeer(t *testing.T) {
	if !supported {
		t.Skip("no raw writes here")
	}
	a, b := tcpPair(t)
	b.(*net.TCPConn).SetLinger(0)
	b.Close() // a reset
	c := New(a)
	var err error
	for range 100 { // the reset may take a write to be seen
		if _, err = c.Write(pattern(4096, 1)); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(err, &op) || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		t.Fatalf("Write to a reset peer: %v (%T), want an *net.OpError with ECONNRESET or EPIPE", err, err)
	}
}
