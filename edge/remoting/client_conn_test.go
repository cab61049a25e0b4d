package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/remoting/internal/rawsock"
)

// pipeConn returns a connection of a client with default options over one end of a
// net.Pipe, its writer running, and the other end. On a pipe each Read returns bytes of
// one Write only, so the reads count the connection's writes.
func pipeConn(t *testing.T) (*clientConn, net.Conn) {
	t.Helper()
	c, far := pipeConnStopped(t)
	c.startWriter()
	return c, far
}

// pipeConnStopped is pipeConn with the writer not started: startWriter starts it.
func pipeConnStopped(t *testing.T) (*clientConn, net.Conn) {
	t.Helper()
	cl := &Client{opts: (&Options{}).withDefaults()}
	cl.lg = cl.opts.Logger
	near, far := net.Pipe()
	c := &clientConn{cl: cl, addr: "pipe", nc: near, raw: rawsock.New(near), pending: map[int32]*pendingCall{},
		kick: make(chan struct{}, 1), quit: make(chan struct{})}
	t.Cleanup(func() {
		c.close()
		far.Close()
		cl.wg.Wait()
	})
	return c, far
}

// startWriter starts a test connection's writer.
func (c *clientConn) startWriter() {
	c.cl.wg.Add(1)
	go c.writeLoop()
}

// readWrites reads from far until it has n frames, and returns how many reads (so writes
// of the other end) that took.
func readWrites(t *testing.T, far net.Conn, n int) int {
	t.Helper()
	far.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	reads := 0
	buf := make([]byte, 1<<20)
	for {
		m, err := far.Read(buf)
		if err != nil {
			t.Fatalf("after %d reads: %v", reads, err)
		}
		reads++
		got = append(got, buf[:m]...)
		r := NewReader(&byteReader{b: got}, 0)
		frames := 0
		for {
			if _, err := r.Read(); err != nil {
				break
			}
			frames++
		}
		if frames == n {
			return reads
		}
	}
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// Frames queued while a write is under way go out together in the next write.
func TestClientConnGathersWrites(t *testing.T) {
	c, far := pipeConn(t)
	ctx := context.Background()
	if err := c.write(ctx, NewRequest(HeartBeat, nil, []byte("first"))); err != nil {
		t.Fatal(err)
	}
	// The writer takes the first frame and blocks in its write: nothing reads the pipe.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.wmu.Lock()
		taken := len(c.wbuf) == 0
		c.wmu.Unlock()
		if taken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take the first frame")
		}
		time.Sleep(time.Millisecond) // polling the writer's progress, not synchronising on time
	}
	const n = 64
	for i := range n - 1 {
		if err := c.write(ctx, NewRequest(HeartBeat, map[string]string{"i": string(rune('a' + i%26))}, make([]byte, 100))); err != nil {
			t.Fatal(err)
		}
	}
	if got := readWrites(t, far, n); got > 2 {
		t.Fatalf("%d frames took %d writes, want at most 2", n, got)
	}
}

// Closing a connection writes the frames queued before it (a oneway request, say) and then
// closes the socket; later writes fail.
func TestClientConnCloseFlushes(t *testing.T) {
	c, far := pipeConn(t)
	if err := c.oneway(context.Background(), NewRequest(SendMessageV2, nil, []byte("last words"))); err != nil {
		t.Fatal(err)
	}
	c.close()
	readWrites(t, far, 1)
	if _, err := far.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the queued frame: %v, want EOF", err)
	}
	c.cl.wg.Wait()
	if err := c.write(context.Background(), NewRequest(HeartBeat, nil, nil)); !errors.Is(err, errClientConnClosed) {
		t.Fatalf("write after close: %v, want %v", err, errClientConnClosed)
	}
}

// A failed write makes every later write fail at once.
func TestClientConnWriteFailureSticks(t *testing.T) {
	c, far := pipeConn(t)
	far.Close()
	c.write(context.Background(), NewRequest(HeartBeat, nil, nil))
	c.cl.wg.Wait() // the writer returns after the failed write
	err := c.write(context.Background(), NewRequest(HeartBeat, nil, nil))
	if err == nil {
		t.Fatal("write after a failed write succeeded")
	}
}

// A pull that finds nothing queued and nobody writing is written by its caller (here no
// writer runs); other requests, and a pull behind queued frames, wait for the writer, in
// order.
func TestClientConnPullWritesInline(t *testing.T) {
	c, far := pipeConnStopped(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.write(ctx, NewRequest(PullMessage, nil, nil)) }()
	readWrites(t, far, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if err := c.write(ctx, NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.write(ctx, NewRequest(PullMessage, nil, nil)); err != nil { // behind the heartbeat
		t.Fatal(err)
	}
	c.wmu.Lock()
	queued := len(c.wbuf)
	c.wmu.Unlock()
	if codes, want := frameCodes(slices.Clone(c.wbuf[:queued])), []int16{HeartBeat, PullMessage}; !slices.Equal(codes, want) {
		t.Fatalf("queued for the writer: %v, want %v", codes, want)
	}
	c.startWriter()
	far.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, queued)
	if _, err := io.ReadFull(far, got); err != nil {
		t.Fatal(err)
	}
}

// A pull's own write that fails makes later writes fail, as the writer's does.
func TestClientConnInlineWriteFailureSticks(t *testing.T) {
	c, far := pipeConnStopped(t)
	far.Close()
	if err := c.write(context.Background(), NewRequest(PullMessage, nil, nil)); err != nil {
		t.Fatalf("the failed write itself: %v (its failure shows on later writes and the reader)", err)
	}
	if err := c.write(context.Background(), NewRequest(HeartBeat, nil, nil)); err == nil {
		t.Fatal("write after a failed write succeeded")
	}
}

// Frames queued while a pull's caller writes it wait for that write, also when the
// connection is closed meanwhile: they follow it whole, in order.
func TestClientConnQueuedBehindInlineWrite(t *testing.T) {
	c, far := pipeConnStopped(t)
	c.nc = halvesConn{c.nc} // as a socket may: a frame's bytes need not go in one write
	c.startWriter()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.write(ctx, NewRequest(PullMessage, nil, make([]byte, 1000))) }()
	deadline := time.Now().Add(10 * time.Second)
	for { // the caller's write is under way: nothing reads the pipe
		c.wmu.Lock()
		w := c.writing && len(c.wbuf) == 0
		c.wmu.Unlock()
		if w {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pull's caller did not start writing")
		}
		time.Sleep(time.Millisecond) // polling the caller's progress, not synchronising on time
	}
	if err := c.oneway(ctx, NewRequest(SendMessageV2, nil, []byte("behind"))); err != nil {
		t.Fatal(err)
	}
	c.close()
	far.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(far)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if codes, want := frameCodes(all), []int16{PullMessage, SendMessageV2}; !slices.Equal(codes, want) {
		t.Fatalf("frames written: %v, want %v", codes, want)
	}
}

// halvesConn writes each buffer in two writes, its halves.
type halvesConn struct{ net.Conn }

func (c halvesConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	m, err := c.Conn.Write(p[len(p)/2:])
	return n + m, err
}

// frameCodes returns the codes of the whole frames in b, in order.
func frameCodes(b []byte) []int16 {
	r := NewReader(&byteReader{b: b}, 0)
	var codes []int16
	for {
		cmd, err := r.Read()
		if err != nil {
			return codes
		}
		codes = append(codes, cmd.Code)
	}
}

// The writer keeps its two buffers: a kick that finds nothing queued (the frames it told of
// were taken with earlier ones, or written by a pull's caller) leaves them in place, so that
// the next frames are encoded into memory of the last ones rather than into a growing new
// slice.
func TestClientConnKeepsWriteBuffers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, far := pipeConn(t)
		go io.Copy(io.Discard, far)
		ctx := context.Background()
		for range 3 {
			if err := c.write(ctx, NewRequest(HeartBeat, nil, make([]byte, 100))); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // written
		}
		for range 3 {
			c.kickWriter() // nothing queued
			synctest.Wait()
		}
		c.wmu.Lock()
		bufs := cap(c.wbuf) > 0 && cap(c.spare) > 0
		c.wmu.Unlock()
		if !bufs {
			t.Fatalf("after kicks with nothing queued: write buffer of capacity %d, spare %d; want both kept", cap(c.wbuf), cap(c.spare))
		}
	})
}

// startReader starts a test connection's reader.
func (c *clientConn) startReader() {
	c.cl.wg.Add(1)
	go c.readLoop()
}

// heldPull registers a pending async pull (as pullAsync does, without its timer) whose
// callback runs then on the reader.
func heldPull(t *testing.T, c *clientConn, opaque int32, then func()) {
	t.Helper()
	p := &pendingCall{hold: true, done: func(*Command, error) { then() }}
	if err := c.add(opaque, p); err != nil {
		t.Fatal(err)
	}
}

// replies returns the PULL_NOT_FOUND replies to the requests of opaques, back to back.
func replies(t *testing.T, opaques ...int32) []byte {
	t.Helper()
	var b []byte
	for _, o := range opaques {
		r := &Command{Code: PullNotFound, Opaque: o, Flag: FlagResponse, Serialize: RocketMQ}
		var err error
		if b, err = r.AppendFrame(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// The pulls that the callbacks of async pulls send, from the reader, while it hands out the
// replies it read together: the first reply's goes out at once, before the reader hands out
// the second, so that the broker has work while the reader works; the rest go out in one
// write once the reader has handed them all out: by the reader, or, when the far end is not
// reading within the reader's short wait, by the writer.
func TestClientConnReaderWritesHeldPulls(t *testing.T) {
	// In a bubble: the reader's own write waits a millisecond for the far end to read, and on a
	// loaded machine the test could take longer than that to get there (the writer then takes
	// the write, which the reader holds back while it hands out the second reply).
	synctest.Test(t, func(t *testing.T) {
		c, far := pipeConn(t)
		c.startReader()
		ctx := context.Background()
		var sent atomic.Int32 // pulls the callbacks sent
		firstOut := make(chan struct{})
		for _, o := range []int32{1, 2, 3} {
			heldPull(t, c, o, func() {
				if o == 2 { // the first pull is out before the second reply is handed out
					select {
					case <-firstOut:
					case <-time.After(10 * time.Second):
						t.Error("the first reply's pull was not written before the second reply was handed out")
					}
				}
				if err := c.write(ctx, NewRequest(PullMessage, nil, nil)); err != nil {
					t.Error(err)
				}
				sent.Add(1)
			})
		}
		far.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := far.Write(replies(t, 1, 2, 3)); err != nil { // one read for the reader
			t.Fatal(err)
		}
		if got := readWrites(t, far, 1); got != 1 {
			t.Fatalf("the first pull took %d writes, want 1", got)
		}
		close(firstOut)
		if got := readWrites(t, far, 2); got != 1 {
			t.Fatalf("the other 2 pulls from the callbacks took %d writes, want 1", got)
		}
		if n := sent.Load(); n != 3 {
			t.Fatalf("%d pulls sent, want 3", n)
		}
		c.wmu.Lock()
		held, queued := c.held, len(c.wbuf)
		c.wmu.Unlock()
		if held || queued != 0 {
			t.Fatalf("after the reader's write: held %v, %d bytes queued", held, queued)
		}
	})
}

// When the socket has no room for what the reader writes, the reader does not wait: the
// writer writes the rest of a frame cut short, ahead of what is queued after it, and the
// reader goes on reading replies meanwhile.
func TestClientConnReaderLeavesFullSocketToWriter(t *testing.T) {
	c, far := pipeConnStopped(t)
	c.startWriter()
	c.startReader()
	ctx := context.Background()
	big := make([]byte, 100_000)
	for i := range big {
		big[i] = byte(i)
	}
	second := make(chan struct{})
	heldPull(t, c, 1, func() {
		if err := c.write(ctx, NewRequest(PullMessage, map[string]string{"n": "1"}, big)); err != nil {
			t.Error(err)
		}
	})
	heldPull(t, c, 2, func() {
		if err := c.write(ctx, NewRequest(PullMessage, map[string]string{"n": "2"}, []byte("second"))); err != nil {
			t.Error(err)
		}
		close(second)
	})
	// The far end reads 10 bytes of the first pull, then nothing until both callbacks ran.
	far.SetDeadline(time.Now().Add(10 * time.Second))
	first := make([]byte, 10)
	headRead := make(chan error, 1)
	go func() { _, err := io.ReadFull(far, first); headRead <- err }()
	if _, err := far.Write(replies(t, 1)); err != nil {
		t.Fatal(err)
	}
	if err := <-headRead; err != nil {
		t.Fatal(err)
	}
	if _, err := far.Write(replies(t, 2)); err != nil { // read while the first pull is unwritten
		t.Fatal(err)
	}
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not hand out the second reply: it waits on its own socket")
	}
	var all []byte
	all = append(all, first...)
	buf := make([]byte, 64<<10)
	for len(frameCodes(all)) < 2 {
		n, err := far.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(all), err)
		}
		all = append(all, buf[:n]...)
	}
	r := NewReader(&byteReader{b: all}, 0)
	for i, want := range [][]byte{big, []byte("second")} {
		cmd, err := r.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if cmd.Code != PullMessage || !bytes.Equal(cmd.Body, want) {
			t.Fatalf("frame %d: code %d, body of %d bytes; want the pull of %d bytes", i, cmd.Code, len(cmd.Body), len(want))
		}
	}
}

// On a TLS connection, whose writes cannot resume after a timeout, the reader leaves the
// pulls the callbacks queued to the writer: it kicks the writer and writes nothing itself.
func TestClientConnReaderLeavesTLSWritesToWriter(t *testing.T) {
	c, far := pipeConnStopped(t) // no writer: what the reader does not write stays queued
	c.cl.opts.TLS = &tls.Config{}
	c.startReader()
	ctx := context.Background()
	handed := make(chan struct{}, 2)
	for _, o := range []int32{1, 2} {
		heldPull(t, c, o, func() {
			if err := c.write(ctx, NewRequest(PullMessage, nil, nil)); err != nil {
				t.Error(err)
			}
			handed <- struct{}{}
		})
	}
	var read atomic.Int64 // bytes the far end got: the reader's writes, if any
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := far.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	far.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := far.Write(replies(t, 1, 2)); err != nil {
		t.Fatal(err)
	}
	<-handed
	<-handed
	select {
	case <-c.kick:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not kicked")
	}
	c.wmu.Lock()
	codes := frameCodes(slices.Clone(c.wbuf))
	c.wmu.Unlock()
	if want := []int16{PullMessage, PullMessage}; !slices.Equal(codes, want) || read.Load() != 0 {
		t.Fatalf("queued for the writer: %v, want %v; %d bytes written by the reader, want none", codes, want, read.Load())
	}
}
