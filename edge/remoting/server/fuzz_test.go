package server

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
)

// FuzzServer feeds a server arbitrary bytes over a net.Pipe: it must never panic (a
// handler's recovered panic counts) and must end the connection cleanly.
func FuzzServer(f *testing.F) {
	frame := func(code int16, ext map[string]string, body []byte) []byte {
		b, err := remoting.NewRequest(code, ext, body).AppendFrame(nil)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	bin := remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil)
	bin.Serialize = remoting.RocketMQ
	binFrame, _ := bin.AppendFrame(nil)
	seeds := [][]byte{
		frame(remoting.SendMessageV2, sendExt("T", 0, "TAGS\x01a\x02"), []byte("x")),
		frame(remoting.SendBatchMessage, sendExt("T", 0, ""), appendBatchItem(nil, "b", "TAGS\x01a\x02")),
		frame(remoting.SendBatchZstd, sendExt("T", 0, ""), zstdBatchItems(f)),
		frame(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil),
		frame(remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*")),
		frame(remoting.LockBatchMQ, nil, []byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T","queueId":0}]}`)),
		frame(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil),
		frame(remoting.ConsumerSendMsgBack, map[string]string{"group": "g", "offset": "0", "delayLevel": "0"}, nil),
		frame(remoting.UpdateAndCreateTopic, map[string]string{"topic": "U", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil),
		frame(remoting.GetConsumeStats, map[string]string{"consumerGroup": "g"}, nil),
		frame(remoting.ViewMessageByID, map[string]string{"offset": "0"}, nil),
		frame(remoting.PullMessage, func() map[string]string {
			h := pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, 5, "*")
			h["edgemqPushMsgs"] = "10"
			return h
		}(), nil),
		frame(remoting.EndPullStream, remoting.EndPullStreamHeader{Opaque: 1}.Ext(), nil),
		frame(9999, nil, nil),
		binFrame,
		rawFrame(2, 0, 0, nil, nil),
		{0, 0, 0, 8, 0, 0, 0, 2, '{', '}', 0, 0},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	lc := &logCounter{h: slog.NewTextHandler(io.Discard, nil), n: map[string]int{}} // f.Log may not be called from the target
	b := openBrokerT(f, &edge.Options{MaxSuspend: 10 * time.Millisecond})
	s := pipeServer(f, b, Options{MaxFrameSize: 1 << 20, Logger: lc.logger()})
	f.Fuzz(func(t *testing.T, data []byte) {
		fc := newFeedConn(data)
		s.admit(fc, false)
		// Once the server has read everything (or closed the connection on bad input) and
		// answered what it read, end the connection.
		deadline := time.Now().Add(10 * time.Second)
		for !fc.isDrained() || s.inflight() > 0 {
			if s.connCount() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server neither read everything nor closed the connection")
			}
			time.Sleep(20 * time.Microsecond)
		}
		fc.Close()
		waitConnsTB(t, s, 0)
		if n := lc.count("request handler panicked"); n != 0 {
			t.Fatalf("%d handler panics", n)
		}
	})
}

// feedConn is a connection whose client sends data, then waits (reads block until Close),
// and never reads: replies are discarded.
type feedConn struct {
	r       *bytes.Reader // read only by the server's reader
	drained chan struct{} // closed when a read found nothing more
	closed  chan struct{}
	dOnce   sync.Once
	cOnce   sync.Once
}

func newFeedConn(data []byte) *feedConn {
	return &feedConn{r: bytes.NewReader(data), drained: make(chan struct{}), closed: make(chan struct{})}
}

func (c *feedConn) Read(p []byte) (int, error) {
	if c.r.Len() > 0 {
		return c.r.Read(p)
	}
	c.dOnce.Do(func() { close(c.drained) })
	<-c.closed
	return 0, io.EOF
}

func (c *feedConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
		return len(p), nil
	}
}

func (c *feedConn) isDrained() bool {
	select {
	case <-c.drained:
		return true
	default:
		return false
	}
}

func (c *feedConn) Close() error {
	c.cOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *feedConn) LocalAddr() net.Addr              { return feedAddr{} }
func (c *feedConn) RemoteAddr() net.Addr             { return feedAddr{} }
func (c *feedConn) SetDeadline(time.Time) error      { return nil }
func (c *feedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *feedConn) SetWriteDeadline(time.Time) error { return nil }

type feedAddr struct{}

func (feedAddr) Network() string { return "feed" }
func (feedAddr) String() string  { return "feed" }

// inflight returns the requests being handled on all of s's connections.
func (s *Server) inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		n += int(c.inflight.Load())
	}
	return n
}

func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// waitConnsTB waits until s has n connections.
func waitConnsTB(t testing.TB, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.conns)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
