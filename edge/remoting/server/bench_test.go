package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

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

// processCPU returns the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per op since start, both ends of the
// connection together: on a loaded machine a steadier figure than ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// readReplies reads n reply frames, returning a credit for each.
func readReplies(r *bufio.Reader, want int16, n int, credit chan struct{}) error {
	var word [8]byte
	var rest []byte
	var err error
	for range n {
		if _, err := io.ReadFull(r, word[:]); err != nil {
			return err
		}
		frameLen := int(binary.BigEndian.Uint32(word[:]))
		headerLen := int(binary.BigEndian.Uint32(word[4:]) & 0xffffff)
		serialize := word[4]
		if cap(rest) < frameLen-4 {
			rest = make([]byte, frameLen-4)
		}
		rest = rest[:frameLen-4]
		if _, err := io.ReadFull(r, rest); err != nil {
			return err
		}
		var code int16
		if serialize == byte(remoting.RocketMQ) {
			code = int16(binary.BigEndian.Uint16(rest))
		} else if code, err = jsonCode(rest[:headerLen]); err != nil {
			return err
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

// jsonCode reads the code of a JSON header as EdgeMQ writes it: {"code":N,...
func jsonCode(h []byte) (int16, error) {
	const prefix = `{"code":`
	if !bytes.HasPrefix(h, []byte(prefix)) {
		return 0, fmt.Errorf("reply header %q", h)
	}
	h = h[len(prefix):]
	if i := bytes.IndexByte(h, ','); i > 0 {
		n, err := strconv.Atoi(string(h[:i]))
		return int16(n), err
	}
	return 0, fmt.Errorf("reply header %q", h)
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
			cpu := processCPU(b)
			pipeline(b, s, req, remoting.Success, b.N)
			reportCPU(b, cpu)
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
			cpu := processCPU(b)
			pipeline(b, s, req, remoting.Success, (b.N+31)/32)
			reportCPU(b, cpu)
		})
	}
}
