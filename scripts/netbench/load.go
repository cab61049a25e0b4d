package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The load test (-load): edgemq serve with -load-conns client connections, of which
// -load-producers are rocketmq-client-go producers each sending -load-rate msgs/s (SendSync,
// paced), -load-consumers are push consumers of one group on a topic with as many queues,
// and the rest are idle connections of our own that ask for the topic's route every 30 s.
// After -load-duration the producers stop and the consumers drain; then every acknowledged
// message must have been consumed. Every 5 s it samples the broker's RSS, threads and
// sockets (edgemq serve has no goroutine endpoint: its OS threads stand in) and reports
// whether RSS and threads were flat or grew.

const topicLoad = "nb_load"

type loadParams struct {
	duration  time.Duration
	conns     int
	producers int
	consumers int
	rate      int
	flush     string
	size      int
}

// bitset is a fixed set of message sequence numbers, safe for concurrent use.
type bitset []atomic.Uint64

// set adds i and reports whether it was there already.
func (b bitset) set(i uint64) (had bool) {
	w, m := i/64, uint64(1)<<(i%64)
	return b[w].Or(m)&m != 0
}

func (b bitset) has(i uint64) bool { return b[i/64].Load()&(uint64(1)<<(i%64)) != 0 }

type sample struct {
	at      time.Duration
	rssKiB  int64
	anonKiB int64 // RssAnon: heap and stacks; the rest of RSS is the mapped log, page cache
	threads int64
	sockets int
	ours    int // goroutines of this process
	// goroutines is the broker's count (GET_BROKER_RUNTIME_INFO's "goroutines"), -1 when it
	// could not be read.
	goroutines int
}

func runLoad(ctx context.Context, c config, lp loadParams) int {
	k := kind{Name: "edgemq-" + lp.flush, Sync: lp.flush == "sync"}
	fmt.Printf("# Load test: edgemq serve -store.flush %s, %d connections, %d producers × %d msgs/s, %d consumers, %v\n\n",
		lp.flush, lp.conns, lp.producers, lp.rate, lp.consumers, lp.duration)
	b, took, err := startBroker(ctx, k, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "netbench: %v\n", err)
		return 1
	}
	defer func() {
		if err := b.stop(c); err != nil {
			fmt.Fprintf(os.Stderr, "netbench: stop: %v\n", err)
		}
	}()
	fmt.Printf("start to first ack: %.1f ms\n", float64(took.Microseconds())/1e3)
	if err := createLoadTopic(ctx, b, lp.consumers); err != nil {
		fmt.Fprintf(os.Stderr, "netbench: %v\n", err)
		return 1
	}
	base := sockets(b.pid)

	perProducer := uint64(float64(lp.rate)*lp.duration.Seconds()*1.05) + 1024
	acked := make([]bitset, lp.producers)
	consumed := make([]bitset, lp.producers)
	for i := range acked {
		acked[i] = make(bitset, perProducer/64+1)
		consumed[i] = make(bitset, perProducer/64+1)
	}
	var dups, foreign, recv atomic.Int64
	listener := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			recv.Add(1)
			if len(m.Body) < 12 {
				foreign.Add(1)
				continue
			}
			p, seq := binary.LittleEndian.Uint32(m.Body), binary.LittleEndian.Uint64(m.Body[4:])
			if int(p) >= lp.producers || seq >= perProducer {
				foreign.Add(1)
				continue
			}
			if consumed[p].set(seq) {
				dups.Add(1)
			}
		}
		return consumer.ConsumeSuccess, nil
	}
	var cons []rocketmq.PushConsumer
	defer func() {
		for _, pc := range cons {
			_ = pc.Shutdown()
		}
	}()
	for range lp.consumers {
		pc, err := rocketmq.NewPushConsumer(
			consumer.WithNsResolver(resolver(b.ns)),
			consumer.WithGroupName("nb_load_g"),
			consumer.WithInstance(instance("lc")),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		)
		if err == nil {
			err = pc.Subscribe(topicLoad, consumer.MessageSelector{}, listener)
		}
		if err == nil {
			err = pc.Start()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "netbench: consumer: %v\n", err)
			return 1
		}
		cons = append(cons, pc)
	}
	var prods []rocketmq.Producer
	defer func() {
		for _, p := range prods {
			_ = p.Shutdown()
		}
	}()
	for range lp.producers {
		p, err := newProducer(b.ns, 2)
		if err != nil {
			fmt.Fprintf(os.Stderr, "netbench: %v\n", err)
			return 1
		}
		prods = append(prods, p)
	}
	// Each producer's first send connects it; the idle connections make up the rest.
	var sendFailed atomic.Int64
	var sent []atomic.Uint64 = make([]atomic.Uint64, lp.producers)
	sendOne := func(ctx context.Context, p int) {
		seq := sent[p].Add(1) - 1
		body := make([]byte, max(lp.size, 12))
		binary.LittleEndian.PutUint32(body, uint32(p))
		binary.LittleEndian.PutUint64(body[4:], seq)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := prods[p].SendSync(sctx, primitive.NewMessage(topicLoad, body))
		cancel()
		if err != nil || r.Status != primitive.SendOK {
			sendFailed.Add(1)
			return
		}
		acked[p].set(seq)
	}
	for p := range prods {
		sendOne(ctx, p)
	}
	idleN := max(0, lp.conns-(sockets(b.pid)-base))
	idleCtx, stopIdle := context.WithCancel(ctx)
	var idleWG sync.WaitGroup
	var idleErrs atomic.Int64
	var idleFirstErr atomic.Pointer[error]
	for range idleN {
		conn, err := net.Dial("tcp", b.ns)
		if err != nil {
			idleErrs.Add(1)
			idleFirstErr.CompareAndSwap(nil, &err)
			continue
		}
		idleWG.Go(func() {
			defer conn.Close()
			if err := idleConn(idleCtx, conn); err != nil && idleCtx.Err() == nil {
				idleErrs.Add(1)
				idleFirstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	time.Sleep(time.Second)
	fmt.Printf("connections: %d producers + %d consumers + %d idle; broker sockets %d (%d before the clients)\n",
		lp.producers, lp.consumers, idleN, sockets(b.pid), base)

	// Producers: each paced at lp.rate from its own goroutine.
	sendCtx, stopSend := context.WithTimeout(ctx, lp.duration)
	defer stopSend()
	var prodWG sync.WaitGroup
	start := time.Now()
	for p := range prods {
		prodWG.Go(func() {
			interval := time.Second / time.Duration(lp.rate)
			next := time.Now().Add(time.Duration(p) * interval / time.Duration(lp.producers))
			for sendCtx.Err() == nil {
				if w := time.Until(next); w > 0 {
					select {
					case <-sendCtx.Done():
						return
					case <-time.After(w):
					}
				}
				next = next.Add(interval)
				sendOne(ctx, p)
			}
		})
	}
	var samples []sample
	take := func() sample {
		st, _ := status(b.pid)
		s := sample{at: time.Since(start), rssKiB: st["VmRSS"], anonKiB: st["RssAnon"], threads: st["Threads"], sockets: sockets(b.pid), ours: runtime.NumGoroutine(),
			goroutines: brokerGoroutines(b.ns)}
		samples = append(samples, s)
		return s
	}
	tick := time.NewTicker(5 * time.Second)
	lastPrint := time.Now()
	for sendCtx.Err() == nil {
		select {
		case <-sendCtx.Done():
		case <-tick.C:
			s := take()
			if time.Since(lastPrint) >= 30*time.Second {
				lastPrint = time.Now()
				fmt.Fprintf(os.Stderr, "load %5s: RSS %.1f MiB (anon %.1f), threads %d, goroutines %d, sockets %d, received %d, send failures %d\n",
					s.at.Round(time.Second), float64(s.rssKiB)/1024, float64(s.anonKiB)/1024, s.threads, s.goroutines, s.sockets, recv.Load(), sendFailed.Load())
			}
		}
	}
	tick.Stop()
	prodWG.Wait()
	sendWall := time.Since(start)
	take()

	// Drain: wait until every acknowledged message is consumed, or 2 minutes.
	missing := func() (n int64, total int64) {
		for p := range prods {
			for seq := uint64(0); seq < sent[p].Load(); seq++ {
				if acked[p].has(seq) {
					total++
					if !consumed[p].has(seq) {
						n++
					}
				}
			}
		}
		return n, total
	}
	var lost, total int64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		lost, total = missing()
		if lost == 0 || time.Now().After(deadline) {
			break
		}
	}
	stopIdle()
	idleWG.Wait()

	// The verdict is on anonymous memory: the mapped pages of the log grow with the data
	// written (page cache the kernel reclaims), which is no leak; they are shown apart.
	rssFlat, rssWhat := flat(samples, func(s sample) float64 { return float64(s.anonKiB) / 1024 }, 0.10, 4)
	_, fileWhat := flat(samples, func(s sample) float64 { return float64(s.rssKiB-s.anonKiB) / 1024 }, 0.10, 4)
	thrFlat, thrWhat := flat(samples, func(s sample) float64 { return float64(s.threads) }, 0, 2)
	// Goroutines: two per connection and one per parked pull, which come and go with the
	// consumers' rebalances; a leak of one per request or connection grows past 10 % and 100.
	grOK := true
	for _, s := range samples {
		grOK = grOK && s.goroutines >= 0
	}
	grFlat, grWhat := flat(samples, func(s sample) float64 { return float64(s.goroutines) }, 0.10, 100)
	grFlat = grFlat && grOK
	fmt.Printf("\n| check | result | verdict |\n|---|---|---|\n")
	fmt.Printf("| messages acknowledged / received (dups) / send failures | %d / %d (%d) / %d in %v, %.0f msgs/s | |\n",
		total, recv.Load(), dups.Load(), sendFailed.Load(), sendWall.Round(time.Second), float64(total)/sendWall.Seconds())
	fmt.Printf("| acknowledged but never consumed | %d | %s |\n", lost, pass(lost == 0 && foreign.Load() == 0))
	fmt.Printf("| broker anonymous RSS (MiB: heap, stacks) | %s | %s |\n", rssWhat, flatWord(rssFlat))
	fmt.Printf("| broker file-backed RSS (MiB: the mapped log) | %s | |\n", fileWhat)
	fmt.Printf("| broker OS threads | %s | %s |\n", thrWhat, flatWord(thrFlat))
	if !grOK {
		grWhat = "not readable (GET_BROKER_RUNTIME_INFO without goroutines): " + grWhat
	}
	fmt.Printf("| broker goroutines | %s | %s |\n", grWhat, flatWord(grFlat))
	socks := []float64{}
	for _, s := range samples {
		socks = append(socks, float64(s.sockets))
	}
	fmt.Printf("| broker sockets min–max | %.0f–%.0f | |\n", slices.Min(socks), slices.Max(socks))
	fmt.Printf("| idle connections failed | %d | %s |\n", idleErrs.Load(), pass(idleErrs.Load() == 0))
	if e := idleFirstErr.Load(); e != nil {
		fmt.Printf("\nfirst idle-connection error: %v\n", *e)
	}
	if raw, err := json.Marshal(samples); err == nil && c.keep {
		_ = os.WriteFile(b.dir+"/load-samples.json", raw, 0o644)
	}
	if lost == 0 && foreign.Load() == 0 && rssFlat && thrFlat && grFlat && idleErrs.Load() == 0 {
		return 0
	}
	return 1
}

func flatWord(ok bool) string {
	if ok {
		return "flat"
	}
	return "GROWING"
}

// flat compares the median of f over the first and the last quarter of the samples taken
// after the first tenth of the run (warm-up): flat when the last is at most frac above the
// first, or at most abs above it.
func flat(samples []sample, f func(sample) float64, frac, abs float64) (bool, string) {
	if len(samples) < 8 {
		return true, "too few samples to judge"
	}
	s := samples[len(samples)/10:]
	q := max(len(s)/4, 1)
	medOf := func(ss []sample) float64 {
		v := make([]float64, len(ss))
		for i, x := range ss {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	first, last := medOf(s[:q]), medOf(s[len(s)-q:])
	all := make([]float64, len(samples))
	for i, x := range samples {
		all[i] = f(x)
	}
	ok := last <= first*(1+frac) || last-first <= abs
	return ok, fmt.Sprintf("first quarter %.1f → last quarter %.1f (min %.1f, max %.1f, %d samples)", first, last, slices.Min(all), slices.Max(all), len(samples))
}

func createLoadTopic(ctx context.Context, b *broker, queues int) error {
	a, err := admin.NewAdmin(admin.WithResolver(resolver(b.ns)))
	if err != nil {
		return fmt.Errorf("new admin: %w", err)
	}
	defer a.Close()
	if err := a.CreateTopic(ctx, admin.WithTopicCreate(topicLoad), admin.WithBrokerAddrCreate(b.brokerAddr),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)); err != nil {
		return fmt.Errorf("create topic %s: %w", topicLoad, err)
	}
	return nil
}

// idleConn keeps conn open: every 30 s it asks for the load topic's route
// (GET_ROUTEINFO_BY_TOPIC, request code 105, JSON header) and checks the reply, until ctx
// is done.
func idleConn(ctx context.Context, conn net.Conn) error {
	for opaque := int32(1); ; opaque++ {
		if err := routeRequest(conn, opaque); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(30 * time.Second):
		}
	}
}

// brokerGoroutines asks the broker at addr for its runtime info (GET_BROKER_RUNTIME_INFO,
// request code 28) on a connection of its own and returns its "goroutines" entry, or -1.
func brokerGoroutines(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return -1
	}
	defer conn.Close()
	h, body, err := call(conn, 28, 1, nil)
	if err != nil || h.Code != 0 {
		return -1
	}
	var info struct {
		Table map[string]string `json:"table"`
	}
	if json.Unmarshal(body, &info) != nil {
		return -1
	}
	n, err := strconv.Atoi(info.Table["goroutines"])
	if err != nil {
		return -1
	}
	return n
}

// replyHeader is what the load test reads of a reply's JSON header.
type replyHeader struct {
	Code   int   `json:"code"`
	Flag   int   `json:"flag"`
	Opaque int32 `json:"opaque"`
}

// call sends a request (JSON header) and reads its reply's header and body.
func call(conn net.Conn, code int, opaque int32, ext map[string]string) (replyHeader, []byte, error) {
	var h replyHeader
	hdr, _ := json.Marshal(map[string]any{"code": code, "language": "GO", "version": 317, "opaque": opaque, "flag": 0,
		"extFields": ext})
	frame := make([]byte, 8+len(hdr))
	binary.BigEndian.PutUint32(frame, uint32(4+len(hdr)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(hdr))) // serialize type 0: JSON
	copy(frame[8:], hdr)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		return h, nil, fmt.Errorf("request %d: %w", code, err)
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(conn, lenBuf[:]); err != nil {
		return h, nil, fmt.Errorf("reply to %d: %w", code, err)
	}
	total, hl := binary.BigEndian.Uint32(lenBuf[:]), binary.BigEndian.Uint32(lenBuf[4:])&0xFFFFFF
	if total < 4+hl || total > 16<<20 {
		return h, nil, fmt.Errorf("reply to %d: bad lengths %d/%d", code, total, hl)
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return h, nil, fmt.Errorf("reply to %d: %w", code, err)
	}
	if err := json.Unmarshal(rest[:hl], &h); err != nil {
		return h, nil, fmt.Errorf("reply header to %d: %w", code, err)
	}
	if h.Flag&1 == 0 || h.Opaque != opaque {
		return h, nil, fmt.Errorf("reply to %d: flag %d opaque %d (sent %d)", code, h.Flag, h.Opaque, opaque)
	}
	return h, rest[hl:], nil
}

func routeRequest(conn net.Conn, opaque int32) error {
	h, _, err := call(conn, 105, opaque, map[string]string{"topic": topicLoad})
	if err != nil {
		return err
	}
	if h.Code != 0 {
		return fmt.Errorf("route reply: code %d", h.Code)
	}
	return nil
}
