package netfault

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memListener is an in-memory net.Listener of net.Pipe connections, so that a test in a
// synctest bubble can run a proxy on a fake clock.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects to the listener.
func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// upstream is a test server: serve runs for each connection until the connection closes.
type upstream struct {
	ln   *memListener
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

func startUpstream(t testing.TB, serve func(net.Conn)) *upstream {
	u := &upstream{ln: newMemListener()}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := u.ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.open = append(u.open, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		u.ln.Close()
		u.mu.Lock()
		for _, c := range u.open {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func echo(c net.Conn) { io.Copy(c, c) }

// memProxy starts a proxy on an in-memory listener to u; it returns the proxy and a dial
// of it.
func memProxy(t testing.TB, u *upstream) (*Proxy, func() net.Conn) {
	t.Helper()
	ln := newMemListener()
	p, err := New("", &Options{Listener: ln, Dial: u.ln.dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, func() net.Conn {
		c, err := ln.dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// roundTrip writes b to c and reads as many bytes back, returning them.
func roundTrip(t testing.TB, c net.Conn, b []byte) []byte {
	t.Helper()
	errc := make(chan error, 1)
	go func() { _, err := c.Write(b); errc <- err }()
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	return got
}

func TestForwardTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); echo(c) }()
		}
	}()
	p, err := New(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 1<<20)
	rand.Read(want)
	if got := roundTrip(t, c, want); !bytes.Equal(got, want) {
		t.Fatal("bytes through the proxy differ from those sent")
	}

	p.Cut()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut: %v, want the connection closed", err)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := roundTrip(t, c2, []byte("again")); string(got) != "again" {
		t.Fatalf("after Cut: got %q", got)
	}
	if p.Accepted() != 2 {
		t.Fatalf("Accepted = %d, want 2", p.Accepted())
	}
}

func TestCutClosesEveryConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := startUpstream(t, echo)
		p, dial := memProxy(t, u)
		a, b := dial(), dial()
		roundTrip(t, a, []byte("a"))
		roundTrip(t, b, []byte("b"))
		if p.Conns() != 2 {
			t.Fatalf("Conns = %d, want 2", p.Conns())
		}
		p.Cut()
		for _, c := range []net.Conn{a, b} {
			if n, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("read after Cut: %d bytes, no error", n)
			}
		}
		synctest.Wait()
		if p.Conns() != 0 {
			t.Fatalf("Conns after Cut = %d, want 0", p.Conns())
		}
	})
}

func TestStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := startUpstream(t, echo)
		p, dial := memProxy(t, u)
		c := dial()
		roundTrip(t, c, []byte("warm"))
		p.Stall(1500 * time.Millisecond)
		start := time.Now()
		roundTrip(t, c, []byte("x"))
		if d := time.Since(start); d != 1500*time.Millisecond {
			t.Fatalf("a round trip under a 1.5 s stall took %v", d)
		}
		// A new connection waits for a stall too, and Stall(0) ends it.
		p.Stall(time.Hour)
		c2 := dial()
		got := make(chan []byte)
		go func() { got <- roundTrip(t, c2, []byte("y")) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("forwarded %q during a stall", b)
		default:
		}
		p.Stall(0)
		time.Sleep(time.Hour) // the pumps wake at the old stall's end at the latest
		if b := <-got; string(b) != "y" {
			t.Fatalf("got %q after the stall", b)
		}
	})
}

func TestThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := startUpstream(t, echo)
		p, dial := memProxy(t, u)
		c := dial()
		msg := bytes.Repeat([]byte("z"), 4000)
		start := time.Now()
		roundTrip(t, c, msg)
		if d := time.Since(start); d != 0 {
			t.Fatalf("unthrottled round trip took %v on the fake clock", d)
		}
		p.Throttle(1000)
		start = time.Now()
		roundTrip(t, c, msg)
		// 4000 bytes at 1000 B/s each way, the directions overlapping in 50-byte steps.
		if d := time.Since(start); d < 4*time.Second || d > 5*time.Second {
			t.Fatalf("4000 bytes at 1000 B/s took %v, want 4 s to 5 s", d)
		}
		p.Throttle(0)
		start = time.Now()
		roundTrip(t, c, msg)
		if d := time.Since(start); d != 0 {
			t.Fatalf("round trip after Throttle(0) took %v", d)
		}
	})
}

func TestDropNextReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var requests atomic.Int64
		u := startUpstream(t, func(c net.Conn) {
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				requests.Add(1)
				if _, err := c.Write([]byte("ok\n")); err != nil {
					return
				}
			}
		})
		p, dial := memProxy(t, u)
		c := dial()
		if got := roundTrip(t, c, []byte("aa\n")); string(got) != "ok\n" {
			t.Fatalf("got %q", got)
		}
		p.DropNextReply()
		go c.Write([]byte("b\n"))
		if n, err := c.Read(make([]byte, 3)); err == nil {
			t.Fatalf("read the reply to a dropped request: %d bytes", n)
		}
		synctest.Wait()
		if n := requests.Load(); n != 2 {
			t.Fatalf("upstream got %d requests, want 2: the dropped reply's request must arrive", n)
		}
		if n := p.RepliesDropped(); n != 1 {
			t.Fatalf("RepliesDropped = %d, want 1", n)
		}
		// Only one reply is dropped.
		c2 := dial()
		for range 3 {
			if got := roundTrip(t, c2, []byte("cc\n")); string(got) != "ok\n" {
				t.Fatalf("got %q", got)
			}
		}
	})
}

func runSchedule(t *testing.T, s Schedule, d time.Duration) []Fault {
	t.Helper()
	var faults []Fault
	synctest.Test(t, func(t *testing.T) {
		u := startUpstream(t, echo)
		p, dial := memProxy(t, u)
		c := dial()
		if err := p.StartFaults(s); err != nil {
			t.Fatal(err)
		}
		if err := p.StartFaults(s); !errors.Is(err, ErrFaultsRunning) {
			t.Fatalf("second StartFaults: %v, want ErrFaultsRunning", err)
		}
		go func() { io.Copy(io.Discard, c) }()
		time.Sleep(d)
		p.StopFaults()
		faults = p.Faults()
		// StopFaults heals the link: a new connection round-trips at once.
		start := time.Now()
		roundTrip(t, dial(), []byte("healed"))
		if el := time.Since(start); el != 0 {
			t.Fatalf("round trip after StopFaults took %v", el)
		}
	})
	return faults
}

func TestScheduleReplays(t *testing.T) {
	s := Schedule{Seed: 42, MinGap: 100 * time.Millisecond, MaxGap: 300 * time.Millisecond}
	a := runSchedule(t, s, 20*time.Second)
	b := runSchedule(t, s, 20*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different faults:\n%v\n%v", a, b)
	}
	kinds := map[FaultKind]int{}
	for i, f := range a {
		kinds[f.Kind]++
		if i > 0 {
			if gap := f.At - a[i-1].At; gap < s.MinGap || gap > s.MaxGap {
				t.Fatalf("fault %d: gap %v outside [%v, %v]", i, gap, s.MinGap, s.MaxGap)
			}
		}
	}
	if len(kinds) != 4 {
		t.Fatalf("20 s of faults with equal weights gave only %v: %v", kinds, a)
	}
	s.Seed = 43
	if c := runSchedule(t, s, 20*time.Second); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same faults")
	}
	only := runSchedule(t, Schedule{Seed: 1, Stall: 1}, 5*time.Second)
	for _, f := range only {
		if f.Kind != FaultStall || f.Duration <= 0 || f.Duration > time.Second {
			t.Fatalf("stall-only schedule injected %v", f)
		}
	}
}

func TestScheduleOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Schedule
		ok   bool
	}{
		{"zero", Schedule{}, true},
		{"gaps inverted", Schedule{MinGap: time.Second, MaxGap: time.Millisecond}, false},
		{"negative weight", Schedule{Cut: -1, Stall: 2}, false},
		{"min gap over default max", Schedule{MinGap: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.withDefaults()
			if (err == nil) != tc.ok {
				t.Fatalf("withDefaults: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := startUpstream(t, echo)
		p, dial := memProxy(t, u)
		c := dial()
		p.Stall(time.Hour)
		go c.Write([]byte("stuck"))
		if err := p.StartFaults(Schedule{Seed: 3}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := p.StartFaults(Schedule{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("StartFaults after Close: %v, want ErrClosed", err)
		}
	})
}

// TestLatency: with Options.Latency each write comes back through an echo upstream twice
// the latency after it was written, whatever came before it: the bytes keep their order
// and the delay does not lower the throughput (writes in a burst or spaced by less than
// the latency do not queue behind one another). A throttle applies after the delay.
func TestLatency(t *testing.T) {
	tests := []struct {
		name     string
		latency  time.Duration
		throttle int           // bytes per second; 0: none
		writes   int           // how many writes
		size     int           // bytes each
		gap      time.Duration // between two writes
		want     func(i int) time.Duration
	}{
		{"none", 0, 0, 5, 100, 10 * time.Millisecond, func(int) time.Duration { return 0 }},
		{"one write", 150 * time.Millisecond, 0, 1, 10, 0, func(int) time.Duration { return 300 * time.Millisecond }},
		{"stream faster than the delay", 150 * time.Millisecond, 0, 200, 1000, 5 * time.Millisecond,
			func(int) time.Duration { return 300 * time.Millisecond }},
		{"burst", 150 * time.Millisecond, 0, 100, 64 << 10, 0, func(int) time.Duration { return 300 * time.Millisecond }},
		{"gaps above the delay", 50 * time.Millisecond, 0, 5, 10, time.Second, func(int) time.Duration { return 100 * time.Millisecond }},
		// 1000 bytes at 20 000 B/s: 50 ms each way after 100 ms each way, the directions
		// overlapping in 1000-byte steps (a twentieth of a second's worth).
		{"throttled", 100 * time.Millisecond, 20_000, 3, 1000, time.Second, func(int) time.Duration { return 300 * time.Millisecond }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := startUpstream(t, echo)
				ln := newMemListener()
				p, err := New("", &Options{Listener: ln, Dial: u.ln.dial, Latency: tc.latency})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				p.Throttle(tc.throttle)
				c, err := ln.dial(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				sent := make([]time.Time, tc.writes)
				want := make([]byte, 0, tc.writes*tc.size)
				for i := range tc.writes {
					want = append(want, bytes.Repeat([]byte{byte('a' + i%26)}, tc.size)...)
				}
				errc := make(chan error, 1)
				go func() {
					for i := range tc.writes {
						sent[i] = time.Now()
						if _, err := c.Write(want[i*tc.size : (i+1)*tc.size]); err != nil {
							errc <- err
							return
						}
						time.Sleep(tc.gap)
					}
					errc <- nil
				}()
				got := make([]byte, tc.size)
				for i := range tc.writes {
					if _, err := io.ReadFull(c, got); err != nil {
						t.Fatalf("read %d: %v", i, err)
					}
					if !bytes.Equal(got, want[i*tc.size:(i+1)*tc.size]) {
						t.Fatalf("write %d came back as %q..., want %q...", i, got[:1], want[i*tc.size:i*tc.size+1])
					}
					if d := time.Since(sent[i]); d != tc.want(i) {
						t.Fatalf("write %d came back after %v, want %v", i, d, tc.want(i))
					}
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
	if _, err := New("x:1", &Options{Latency: -time.Second}); err == nil {
		t.Fatal("New accepted a negative latency")
	}
}
