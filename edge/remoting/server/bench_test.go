package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// benchWindow is how many requests a benchmark client keeps in flight on its connection.
const benchWindow = 256

// benchBroker opens a broker for benchmarks: the store flushes asynchronously, so that
// the figures are the server's CPU and not the disk's fsync.
func benchBroker(b *testing.B) *edge.Broker {
	return openBroker(b, &edge.Options{Store: &store.Options{SegmentSize: 64 << 20, MaxMessageSize: testMaxMessage,
		QueueSegmentEntries: 1 << 16, MetaNoSync: true, Flush: commitlog.FlushAsync}})
}

// pipeline writes the frame of req n times (the server does not need distinct opaques), at most benchWindow unanswered, over a
// TCP connection to s, and reads the replies, checking each is code want. The replies are
// counted from their length words and codes only, so that the client's share of the CPU
// stays small.
func pipeline(b *testing.B, s *Server, req *remoting.Command, want int16, n int) {
	b.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	frame, err := req.AppendFrame(nil)
	if err != nil {
		b.Fatal(err)
	}
	credit := make(chan struct{}, benchWindow)
	for range benchWindow {
		credit <- struct{}{}
	}
	errc := make(chan error, 1)
	go func() {
		errc <- readReplies(bufio.NewReaderSize(nc, 64<<10), want, n, credit)
	}()
	w := bufio.NewWriterSize(nc, 64<<10)
	for range n {
		select {
		case <-credit:
		default:
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			<-credit
		}
		if _, err := w.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// readReplies reads n reply frames, returning a credit for each.
func readReplies(r *bufio.Reader, want int16, n int, credit chan struct{}) error {
	var word [8]byte
	for range n {
		if _, err := io.ReadFull(r, word[:]); err != nil {
			return err
		}
		frameLen := int(binary.BigEndian.Uint32(word[:]))
		headerLen := int(binary.BigEndian.Uint32(word[4:]) & 0xffffff)
		serialize := word[4]
		rest := make([]byte, frameLen-4)
		if _, err := io.ReadFull(r, rest); err != nil {
			return err
		}
		var code int16
		if serialize == byte(remoting.RocketMQ) {
			code = int16(binary.BigEndian.Uint16(rest))
		} else {
			cmd, err := remoting.NewReader(bytesReader(word[:], rest), 0).Read()
			if err != nil {
				return err
			}
			code = cmd.Code
		}
		if code != want {
			return &codeError{code, want, string(rest[:min(headerLen, len(rest))])}
		}
		credit <- struct{}{}
	}
	return nil
}

type codeError struct {
	got, want int16
	header    string
}

func (e *codeError) Error() string {
	return "reply code " + strconv.Itoa(int(e.got)) + ", want " + strconv.Itoa(int(e.want)) + ": " + e.header
}

func bytesReader(a, b []byte) io.Reader {
	return io.MultiReader(&sliceReader{a}, &sliceReader{b})
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// BenchmarkRemoteSend measures a SEND_MESSAGE_V2 of a 256-byte body through a TCP
// listener, benchWindow in flight, as a Go client sends them (JSON header).
func BenchmarkRemoteSend(b *testing.B) {
	for _, ser := range []remoting.SerializeType{remoting.JSON, remoting.RocketMQ} {
		b.Run(ser.String(), func(b *testing.B) {
			br := benchBroker(b)
			s := startServer(b, br, Options{Logger: slog.New(slog.DiscardHandler)})
			req := remoting.NewRequest(remoting.SendMessageV2, sendExt("bench", 0, "UNIQ_KEY\x01ABCDEF0123456789\x02WAIT\x01true\x02"), make([]byte, 256))
			req.Serialize = ser
			b.SetBytes(256)
			b.ReportAllocs()
			b.ResetTimer()
			pipeline(b, s, req, remoting.Success, b.N)
		})
	}
}

// BenchmarkRemotePull measures a PULL_MESSAGE of 32 messages of 256 bytes through a TCP
// listener, benchWindow in flight, as a Go client pulls them (JSON header); b.N counts
// messages.
func BenchmarkRemotePull(b *testing.B) {
	for _, ser := range []remoting.SerializeType{remoting.JSON, remoting.RocketMQ} {
		b.Run(ser.String(), func(b *testing.B) {
			br := benchBroker(b)
			s := startServer(b, br, Options{Logger: slog.New(slog.DiscardHandler)})
			c := dial(b, s.Addr())
			for range 32 {
				c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("bench", 0, "UNIQ_KEY\x01ABCDEF0123456789\x02TAGS\x01t\x02"), make([]byte, 256))
			}
			req := remoting.NewRequest(remoting.PullMessage, pullHeader("g", "bench", 0, 0, int(remoting.PullSubscription), 0, "*"), nil)
			req.Serialize = ser
			b.SetBytes(256)
			b.ReportAllocs()
			b.ResetTimer()
			pipeline(b, s, req, remoting.Success, (b.N+31)/32)
		})
	}
}
