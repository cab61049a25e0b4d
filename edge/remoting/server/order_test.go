package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// TestSendOrderOnOneConnection: thousands of sends pipelined on one connection, without
// waiting for their replies, are stored in the order they were written, and each reply
// gives its send's place.
func TestSendOrderOnOneConnection(t *testing.T) {
	const n = 5000
	b := openBroker(t, nil) // sync flush: sends are acknowledged from the store's ack goroutine
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	// Room for all of them in flight: past the cap a send is refused busy (tested apart),
	// which a slow machine, whose store acknowledges slower than the client writes, reaches.
	s := startServer(t, b, Options{MaxInFlight: n})
	c := dial(t, s.Addr())
	replies := make([]chan *remoting.Command, n)
	for i := range n {
		replies[i] = c.write(remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte(strconv.Itoa(i))))
	}
	for i, ch := range replies {
		r := c.wait(ch)
		if r.Code != remoting.Success {
			t.Fatalf("send %d: reply %d %q", i, r.Code, r.Remark)
		}
		if got := r.Ext["queueOffset"]; got != strconv.Itoa(i) {
			t.Fatalf("send %d: reply at queue offset %s, want %d", i, got, i)
		}
	}
	for off := int64(0); off < n; {
		res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T"}, Offset: off, MaxMsgs: 1024, Filter: "*"})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("pull at %d: %d messages, %v", off, len(res.Messages), err)
		}
		for _, m := range res.Messages {
			if string(m.Body) != strconv.FormatInt(off, 10) {
				t.Fatalf("offset %d holds send %s", off, m.Body)
			}
			off++
		}
	}
}

// TestStuckReaderDoesNotStallStore: a client that pipelines sends and never reads a reply
// stalls only its own connection: it reaches its in-flight cap with every send of it
// stored and acknowledged, and the store goes on serving other clients.
func TestStuckReaderDoesNotStallStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxInFlight = 16
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{MaxInFlight: maxInFlight, WriteTimeout: time.Hour})
		stuck, server := net.Pipe() // a pipe has no buffer: the first reply blocks the writer
		s.admit(server, false)
		frame, err := remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte("stuck")).AppendFrame(nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for { // until the server stops reading, then until the test closes the pipe
				if _, err := stuck.Write(frame); err != nil {
					return
				}
			}
		}()
		synctest.Wait()
		time.Sleep(inlineWriteWait) // a reply the reader writes inline waits no longer for the stuck socket
		synctest.Wait()
		var sc *conn
		s.mu.Lock()
		for c := range s.conns {
			sc = c
		}
		s.mu.Unlock()
		if got := sc.inflight.Load(); got != maxInFlight {
			t.Fatalf("stuck connection has %d requests in flight, want its cap %d", got, maxInFlight)
		}
		stored := b.TopicStats("T").MessagesIn
		if stored < maxInFlight {
			t.Fatalf("%d of the stuck connection's sends stored, want at least %d", stored, maxInFlight)
		}
		other := pipeClient(t, s)
		for i := range 100 {
			r := other.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("other"))
			if want := strconv.FormatInt(stored+int64(i), 10); r.Ext["queueOffset"] != want {
				t.Fatalf("other send %d stored at %s, want %s", i, r.Ext["queueOffset"], want)
			}
		}
		stuck.Close()
	})
}

// TestLargePullReply: a pull reply whose body is larger than the writer copies (written
// from its own memory) arrives whole, between small replies on the same connection.
func TestLargePullReply(t *testing.T) {
	b := openBrokerT(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	var bodies []string
	for i := range 20 {
		body := strings.Repeat(strconv.Itoa(i%10), 1000)
		bodies = append(bodies, body)
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte(body))
	}
	before := c.write(remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil))
	pull := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, int(remoting.PullSubscription), 0, "*"), nil))
	after := c.write(remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil))
	r := c.wait(pull)
	if r.Code != remoting.Success || len(r.Body) <= bodyInline {
		t.Fatalf("pull: code %d, body of %d bytes; want a body over %d", r.Code, len(r.Body), bodyInline)
	}
	recs := decodeRecords(t, r.Body)
	if len(recs) != len(bodies) {
		t.Fatalf("pulled %d records, want %d", len(recs), len(bodies))
	}
	for i, rec := range recs {
		if rec.body != bodies[i] {
			t.Fatalf("record %d: body %.20q..., want %.20q...", i, rec.body, bodies[i])
		}
	}
	for _, ch := range []chan *remoting.Command{before, after} {
		if r := c.wait(ch); r.Code != remoting.Success || r.Ext["offset"] != "20" {
			t.Fatalf("max offset: code %d, ext %v", r.Code, r.Ext)
		}
	}
}

// TestInlineWriteCutShort: answers the reader writes itself to a client that reads only a
// few bytes of them within inlineWriteWait are finished by the writer, ahead of the answers
// to requests the reader reads meanwhile: the client reads every answer whole, in order.
func TestInlineWriteCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Async flush: a send is answered as the reader hands it to the broker.
		b := openBrokerT(t, &edge.Options{Store: &store.Options{SegmentSize: 4 << 20, MaxMessageSize: testMaxMessage,
			QueueSegmentEntries: 1024, MetaNoSync: true, Flush: commitlog.FlushAsync}})
		s := pipeServer(t, b, Options{WriteTimeout: time.Hour})
		a, server := net.Pipe()
		s.admit(server, false)
		sends := func(from, n int) []byte {
			var frames []byte
			for i := from; i < from+n; i++ {
				req := remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte(strconv.Itoa(i)))
				req.Opaque = int32(i)
				var err error
				if frames, err = req.AppendFrame(frames); err != nil {
					t.Fatal(err)
				}
			}
			return frames
		}
		if _, err := a.Write(sends(0, 3)); err != nil { // read together: one write inline
			t.Fatal(err)
		}
		synctest.Wait()
		head := make([]byte, 7)
		if _, err := io.ReadFull(a, head); err != nil { // a few bytes of that write, then nothing
			t.Fatal(err)
		}
		time.Sleep(inlineWriteWait)
		synctest.Wait()
		mustBeRead(t, a, sends(3, 2)) // while the writer waits to finish the first answers
		r := remoting.NewReader(io.MultiReader(bytes.NewReader(head), a), 0)
		for i := range 5 {
			resp, err := r.Read()
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			if resp.Opaque != int32(i) || resp.Code != remoting.Success || resp.Ext["queueOffset"] != strconv.Itoa(i) {
				t.Fatalf("answer %d: opaque %d, code %d, queue offset %s", i, resp.Opaque, resp.Code, resp.Ext["queueOffset"])
			}
		}
		a.Close()
	})
}

// mustBeRead writes frames to the server's end of a, in a synctest bubble, and fails unless
// the connection's reader reads them without the client reading anything.
func mustBeRead(t *testing.T, a net.Conn, frames []byte) {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write(frames)
		wrote <- err
	}()
	synctest.Wait()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the connection's reader waits on the client's socket: it read nothing")
	}
}
