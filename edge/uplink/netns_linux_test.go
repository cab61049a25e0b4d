package uplink

// The bad-link harness: an upstream `edgemq serve` in its own network namespace behind a
// veth pair whose rate and loss the kernel emulates, and a netfault proxy in this process
// that adds the delay.
//
// What is emulated where, and why:
//   - Rate: the kernel, a tbf qdisc on each end of the veth pair (each direction shaped).
//   - Loss: the kernel, iptables' statistic match dropping packets at random on the
//     namespace's side, in both directions: real packet loss, recovered by TCP's own
//     retransmits.
//   - Delay: user space, netfault.Options.Latency, a proxy in the root namespace between
//     the uplink and the veth (each direction holds bytes for half the round trip). The
//     kernels these tests run on lack netem (CONFIG_NET_SCH_NETEM), the qdisc that would
//     delay packets. The proxy ends TCP on both sides, so the delay is seen by the uplink
//     (its requests and answers take a round trip longer) but not by the TCP connection
//     that crosses the lossy, shaped veth: that one recovers from loss with the short
//     round trip of the veth (retransmit timers of at least 200 ms still apply).
//
// The tests run only when asked (-netns or EDGEMQ_NETNS=1), as root, with ip, tc and
// iptables on the PATH.

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/netfault"
)

var netnsFlag = flag.Bool("netns", false, "run the tests over a shaped, lossy link in a network namespace (root)")

// netnsPrefix starts the name of every namespace the harness makes: "<prefix><pid>-<n>".
const netnsPrefix = "edgemqnt-"

// hubPort is the upstream's port inside its namespace.
const hubPort = 27001

// badLink describes the link between the uplink and the upstream.
type badLink struct {
	RTT  time.Duration // round trip added by the proxy (half each way)
	Loss float64       // probability a packet is dropped, each direction
	Rate string        // tbf rate of each direction ("64kbit"); "": not shaped
}

// netnsHub is an upstream `edgemq serve` in a namespace, reached through the link.
type netnsHub struct {
	ns, vethRoot string
	direct       string // the hub's own address, across the veth without the proxy
	addr         string // the proxy's address: the name server and broker address to use
	proxy        *netfault.Proxy
}

var netnsSeq atomic.Int64

// needNetns skips t unless the bad-link tests were asked for and can run.
func needNetns(t *testing.T) {
	t.Helper()
	if !*netnsFlag && os.Getenv("EDGEMQ_NETNS") != "1" {
		t.Skip("the bad-link tests run with -netns or EDGEMQ_NETNS=1 (root; make test-netns)")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("the bad-link tests need root on Linux (network namespaces, tc, iptables)")
	}
	for _, tool := range []string{"ip", "tc", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the bad-link tests need %s on the PATH (apt-get install iproute2 iptables): %v", tool, err)
		}
	}
}

// run runs a command, failing t with its output if it fails.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sweepNetns deletes the namespaces of earlier runs whose process is gone (a run killed
// before its cleanup), and the processes left in them.
func sweepNetns(t testing.TB) {
	t.Helper()
	out := run(t, "ip", "netns", "list")
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(pidText); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			continue // a live run's
		}
		removeNetns(t, name)
		t.Logf("removed stale namespace %s", name)
	}
}

// removeNetns kills the processes in namespace ns and deletes it (the veth pair goes with
// it, and the iptables rules and qdiscs on its ends).
func removeNetns(t testing.TB, ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Logf("ip netns del %s: %v %s", ns, err, out)
	}
}

// freeSubnet returns x such that no address of 10.77.x.0/24 is in use.
func freeSubnet(t testing.TB) int {
	t.Helper()
	used := run(t, "ip", "-o", "-4", "addr", "show")
	start := os.Getpid() % 250
	for i := range 250 {
		x := (start+i)%250 + 1
		if !strings.Contains(used, fmt.Sprintf(" 10.77.%d.", x)) {
			return x
		}
	}
	t.Fatal("no free 10.77.x.0/24")
	return 0
}

// edgemqBinary builds cmd/edgemq into a directory t.Cleanup removes.
func edgemqBinary(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "edgemq")
	if out, err := exec.Command("go", "build", "-o", p, "github.com/edgemq/edgemq/cmd/edgemq").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/edgemq: %v\n%s", err, out)
	}
	return p
}

// startNetnsHub makes a namespace joined to this one by a veth pair carrying link, starts
// `edgemq serve` in it and a delaying proxy to it here. t.Cleanup undoes all of it.
func startNetnsHub(t *testing.T, link badLink) *netnsHub {
	t.Helper()
	sweepNetns(t)
	bin := edgemqBinary(t)
	n := netnsSeq.Add(1)
	h := &netnsHub{ns: fmt.Sprintf("%s%d-%d", netnsPrefix, os.Getpid(), n)}
	h.vethRoot = fmt.Sprintf("emq%05d%02dr", os.Getpid()%100000, n%100)
	vethNS := h.vethRoot[:len(h.vethRoot)-1] + "n"
	x := freeSubnet(t)
	rootIP, nsIP := fmt.Sprintf("10.77.%d.1", x), fmt.Sprintf("10.77.%d.2", x)

	run(t, "ip", "netns", "add", h.ns)
	t.Cleanup(func() { removeNetns(t, h.ns) })
	run(t, "ip", "link", "add", h.vethRoot, "type", "veth", "peer", "name", vethNS)
	run(t, "ip", "link", "set", vethNS, "netns", h.ns)
	run(t, "ip", "addr", "add", rootIP+"/30", "dev", h.vethRoot)
	run(t, "ip", "link", "set", h.vethRoot, "up")
	run(t, "ip", "-n", h.ns, "addr", "add", nsIP+"/30", "dev", vethNS)
	run(t, "ip", "-n", h.ns, "link", "set", vethNS, "up")
	run(t, "ip", "-n", h.ns, "link", "set", "lo", "up")
	// One TCP segment per packet (no segmentation offload), so that loss and the queue
	// act on packets of the MTU, as on a real link.
	run(t, "ip", "link", "set", "dev", h.vethRoot, "gso_max_segs", "1")
	run(t, "ip", "-n", h.ns, "link", "set", "dev", vethNS, "gso_max_segs", "1")
	if link.Rate != "" {
		// A queue of a second's worth at the rate (plus a burst of one packet), as a
		// modem's: what does not fit is dropped, as there.
		tbf := []string{"qdisc", "add", "dev", "", "root", "tbf", "rate", link.Rate, "burst", "1600", "latency", "1s"}
		tbf[3] = h.vethRoot
		run(t, "tc", tbf...)
		tbf[3] = vethNS
		run(t, "tc", append([]string{"-n", h.ns}, tbf...)...)
	}
	if link.Loss > 0 {
		p := strconv.FormatFloat(link.Loss, 'f', -1, 64)
		for _, rule := range [][]string{
			{"-A", "INPUT", "-i", vethNS},
			{"-A", "OUTPUT", "-o", vethNS},
		} {
			args := append([]string{"netns", "exec", h.ns, "iptables"}, rule...)
			run(t, "ip", append(args, "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP")...)
		}
	}

	h.direct = net.JoinHostPort(nsIP, strconv.Itoa(hubPort))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.proxy, err = netfault.New(h.direct, &netfault.Options{Listener: ln, Latency: link.RTT / 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.proxy.Close() })

	cmd := exec.Command("ip", "netns", "exec", h.ns, bin, "serve", "-data", t.TempDir(),
		"-server.listen", h.direct, "-server.vip_listen", "off", "-http.listen", "off",
		"-server.advertise", h.addr, "-broker.broker_name", "hub", "-log_level", "warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("edgemq serve's output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", h.direct, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("edgemq serve exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("edgemq serve not listening on %s after 30 s: %v", h.direct, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("upstream in namespace %s at %s (via %s): %+v", h.ns, h.direct, h.addr, link)
	return h
}

// linkBytes returns the bytes the tbf on the root end of the veth has sent (the uplink's
// direction), from tc's statistics; 0 if the link is not shaped.
func (h *netnsHub) linkBytes(t testing.TB) int64 {
	t.Helper()
	out := run(t, "tc", "-s", "qdisc", "show", "dev", h.vethRoot)
	sc := bufio.NewScanner(strings.NewReader(out))
	re := regexp.MustCompile(`Sent (\d+) bytes`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			return n
		}
	}
	return 0
}

// dropped returns the packets the loss rules dropped so far, in and out of the namespace.
func (h *netnsHub) dropped(t testing.TB) (in, out int64) {
	t.Helper()
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		txt := run(t, "ip", "netns", "exec", h.ns, "iptables", "-L", chain, "-v", "-n", "-x")
		var n int64
		for _, line := range strings.Split(txt, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == "DROP" {
				n, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
		if chain == "INPUT" {
			in = n
		} else {
			out = n
		}
	}
	return in, out
}

// client connects our remoting client to the hub through the link.
func (h *netnsHub) client(t testing.TB) *remoting.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := remoting.Dial(ctx, h.addr, nil)
	if err != nil {
		t.Fatalf("dial the hub: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readHub returns every message of topic on the hub, by upstream queue in queue order.
func readHub(t testing.TB, c *remoting.Client, topic string) map[int32][]mq.MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	qs, err := c.TopicStats(ctx, topic)
	if err != nil {
		t.Fatalf("topic stats of %s: %v", topic, err)
	}
	out := map[int32][]mq.MessageExt{}
	for _, q := range qs {
		for off := q.MinOffset; off < q.MaxOffset; {
			res, err := c.Pull(ctx, mq.PullRequest{Group: "CHECK", Queue: q.Queue, Offset: off, MaxMsgs: 1024, Filter: "*"})
			if err != nil {
				t.Fatalf("pull %v at %d: %v", q.Queue, off, err)
			}
			if len(res.Messages) == 0 {
				t.Fatalf("pull %v at %d: nothing (status %v), max %d", q.Queue, off, res.Status, q.MaxOffset)
			}
			out[q.Queue.QueueID] = append(out[q.Queue.QueueID], res.Messages...)
			off = res.NextBeginOffset
		}
	}
	return out
}

// TestNetnsLossyForward: over a 300 ms round trip with 1 % packet loss each way, a
// forward of messages on several local queues arrives upstream complete and, per local
// queue, in order (a message sent again after a lost answer may repeat a batch: those
// duplicates are counted and logged).
func TestNetnsLossyForward(t *testing.T) {
	needNetns(t)
	h := startNetnsHub(t, badLink{RTT: 300 * time.Millisecond, Loss: 0.01})
	local := openLocal(t, t.TempDir(), nil)
	const queues, n = 4, 4000
	ctx := context.Background()
	body := bytes.Repeat([]byte("o"), 100)
	for i := range n {
		q := i % queues
		m := &mq.Message{Topic: "orders", Body: body, Properties: map[string]string{"q": fmt.Sprint(q), "seq": fmt.Sprint(i / queues)}}
		if _, err := local.Send(ctx, m, mq.QueueIndex(q)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	u := startUplink(t, local, Options{Up: []UpRule{
		{Name: "orders", Topics: []string{"orders"}, Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}},
	}})
	waitFor(t, 3*time.Minute, "the forward", func() bool { st := u.Stats().Up[0]; return st.Forwarded > 0 && st.Backlog == 0 })
	st := u.Stats().Up[0]
	t.Logf("forwarded %d messages in %v: %d batches, %d sent again, %d failures",
		st.Forwarded, time.Since(start).Round(time.Millisecond), st.Batches, st.Resent, st.Failures)

	got := readHub(t, h.client(t), "orders")
	next := make([]int, queues) // per local queue, the next sequence number not seen yet
	dups, total := 0, 0
	for uq, msgs := range got {
		for _, m := range msgs {
			total++
			q, err1 := strconv.Atoi(m.Properties["q"])
			seq, err2 := strconv.Atoi(m.Properties["seq"])
			if err1 != nil || err2 != nil || q < 0 || q >= queues {
				t.Fatalf("upstream queue %d: a message without q and seq: %v", uq, m.Properties)
			}
			switch {
			case seq == next[q]:
				next[q]++
			case seq < next[q]:
				dups++
			default:
				t.Fatalf("local queue %d: message %d arrived after %d: out of order or lost", q, seq, next[q]-1)
			}
		}
	}
	for q, k := range next {
		if k != n/queues {
			t.Errorf("local queue %d: %d of %d messages upstream", q, k, n/queues)
		}
	}
	in, out := h.dropped(t)
	t.Logf("upstream: %d messages, %d duplicates; the link dropped %d packets towards the hub, %d back", total, dups, in, out)
}

// TestNetnsAlarmLatency: on a 64 kbit/s link with a 300 ms round trip and 1 % loss, while
// a low-priority telemetry rule drains a backlog using most of the link, an alarm of a
// high-priority rule to the same upstream is stored upstream within 2 s of being sent
// locally, half of them within 1 s, with the telemetry rule capped under the link's rate
// or, uncapped, paced. Without pacing and a cap (Options.PaceDelay negative) the
// telemetry's TCP stream keeps the link's queue full: that case is measured and reported,
// its latency not bounded. Latency is the hub's store time less the local send time (one
// clock: the hub runs on this machine).
func TestNetnsAlarmLatency(t *testing.T) {
	needNetns(t)
	tests := []struct {
		name         string
		telemetryCap int64         // the telemetry rule's RateLimit, body bytes per second
		paceDelay    time.Duration // Options.PaceDelay
		bound        time.Duration // every alarm within it, half within half of it; 0: reported only
	}{
		// The cap is under the link's 8000 B/s counting the wire's overhead: batches of
		// 100-byte messages take about 2.4 times their body bytes on the wire.
		{"capped", 3000, 0, 2 * time.Second},
		{"uncapped", 0, 0, 2 * time.Second},
		{"unpaced", 0, -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { alarmLatency(t, tc.telemetryCap, tc.paceDelay, tc.bound) })
	}
}

func alarmLatency(t *testing.T, telemetryCap int64, paceDelay, alarmBound time.Duration) {
	const linkRate = 8000 // bytes per second: 64 kbit/s
	h := startNetnsHub(t, badLink{RTT: 300 * time.Millisecond, Loss: 0.01, Rate: "64kbit"})
	local := openLocal(t, t.TempDir(), nil)
	const backlog, alarms = 5000, 20
	ctx := context.Background()
	body := bytes.Repeat([]byte("t"), 100)
	for i := range backlog {
		if _, err := local.Send(ctx, &mq.Message{Topic: "telemetry", Body: body}, mq.QueueIndex(i%4)); err != nil {
			t.Fatal(err)
		}
	}
	alarm := func(i int) {
		m := &mq.Message{Topic: "alarm", Body: []byte(fmt.Sprintf("alarm %d", i)),
			Properties: map[string]string{"sent": strconv.FormatInt(time.Now().UnixNano(), 10), "i": fmt.Sprint(i)}}
		if _, err := local.Send(ctx, m, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
	}
	up := Upstream{Addrs: h.addr, Kind: KindEdgeMQ}
	u := startUplink(t, local, Options{ScanInterval: 100 * time.Millisecond, PaceDelay: paceDelay, Up: []UpRule{
		{Name: "telemetry", Topics: []string{"telemetry"}, Upstream: up, RateLimit: telemetryCap},
		{Name: "alarms", Topics: []string{"alarm"}, Upstream: up, Priority: 10},
	}})
	// The first alarm connects the alarm rule (a dial and a route over the link): sent
	// before the drain, it is not one of those measured.
	alarm(-1)
	waitFor(t, time.Minute, "the alarm rule connected", func() bool { return u.Stats().Up[1].Forwarded == 1 })
	waitFor(t, time.Minute, "telemetry flowing", func() bool { return u.Stats().Up[0].Forwarded > 0 })

	t0, fwd0, link0 := time.Now(), u.Stats().Up[0].ForwardedBytes, h.linkBytes(t)
	for i := range alarms {
		time.Sleep(800*time.Millisecond + time.Duration(i*97)*time.Millisecond%700)
		alarm(i)
	}
	waitFor(t, time.Minute, "the alarms upstream", func() bool { return u.Stats().Up[1].Forwarded == alarms+1 })
	d := time.Since(t0)
	st := u.Stats().Up[0]
	fwd, linkB := st.ForwardedBytes-fwd0, h.linkBytes(t)-link0
	if st.Forwarded >= backlog {
		t.Fatalf("the backlog drained before the alarms went: make it larger")
	}

	var lat []time.Duration
	for _, msgs := range readHub(t, h.client(t), "alarm") {
		for _, m := range msgs {
			if m.Properties["i"] == "-1" {
				continue
			}
			sent, err := strconv.ParseInt(m.Properties["sent"], 10, 64)
			if err != nil {
				t.Fatalf("alarm without its send time: %v", m.Properties)
			}
			lat = append(lat, time.UnixMilli(m.StoreTime).Sub(time.Unix(0, sent)))
		}
	}
	if len(lat) != alarms {
		t.Fatalf("%d alarms upstream, want %d", len(lat), alarms)
	}
	slices.Sort(lat)
	p50, worst := lat[len(lat)/2], lat[len(lat)-1]
	t.Logf("alarm latency over %d alarms while telemetry drains: p50 %v, max %v (all: %v)", alarms,
		p50.Round(time.Millisecond), worst.Round(time.Millisecond), lat)
	t.Logf("telemetry drained %.0f body B/s (%.1f msg/s) over %v; the link carried %.0f B/s up of %d B/s (%.0f %%)",
		float64(fwd)/d.Seconds(), float64(fwd)/100/d.Seconds(), d.Round(time.Millisecond),
		float64(linkB)/d.Seconds(), linkRate, 100*float64(linkB)/d.Seconds()/linkRate)
	in, out := h.dropped(t)
	t.Logf("the link dropped %d packets towards the hub, %d back", in, out)
	if p := u.rules[0].pace; p != nil {
		rate, rtt := p.estimate()
		t.Logf("pacing: delivery rate %.0f body B/s, round trip %v, batches of %d body bytes", rate, rtt.Round(time.Millisecond), p.batchBytes())
	}
	if rate := float64(linkB) / d.Seconds(); rate < linkRate/2 {
		t.Errorf("the link carried %.0f B/s while the alarms went, want at least half its %d B/s", rate, linkRate)
	}
	if alarmBound > 0 && p50 > alarmBound/2 {
		t.Errorf("half the alarms took over %v to go up while telemetry drained, want at most %v", p50, alarmBound/2)
	}
	if alarmBound > 0 && worst > alarmBound {
		t.Fatalf("an alarm took %v to go up while telemetry drained, want at most %v", worst, alarmBound)
	}
}
