package consumer

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/netfault"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// TestAtLeastOnce: 3 producers, 4 consumers of one group joining and leaving at random, some
// with Shutdown, some crashing (no offset persist, no unregister, no unlock): every message
// is consumed at least once; the orderly variant also never sees a queue's new messages out
// of order.
func TestAtLeastOnce(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		name := "concurrent"
		if orderly {
			name = "orderly"
		}
		t.Run(name, func(t *testing.T) { testAtLeastOnce(t, orderly, nil) })
	}
}

var faultSeed = flag.Uint64("faultseed", 0, "seed of TestAtLeastOnceFaultyLink's faults; 0: a new one each run")

// TestAtLeastOnceFaultyLink is TestAtLeastOnce with every consumer a network client of
// the broker's server, reached through a proxy that cuts connections, stalls, throttles
// and loses replies at random moments from a seed it logs, while members join and leave
// until every message is consumed: every message is consumed at least once, and the
// orderly variant never sees a queue's new messages out of order. It logs the number of
// duplicates.
//
// It runs with -net=cheap (the default) on 6,000 messages and with -net=all on 20,000.
func TestAtLeastOnceFaultyLink(t *testing.T) {
	if *netFlag == "off" {
		t.Skip("-net=off")
	}
	seed := *faultSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("fault seed %d (replay: go test ./consumer -run TestAtLeastOnceFaultyLink -faultseed %d)", seed, seed)
	for _, orderly := range []bool{false, true} {
		name := "concurrent"
		if orderly {
			name = "orderly"
		}
		t.Run(name, func(t *testing.T) {
			testAtLeastOnce(t, orderly, &netfault.Schedule{
				Seed:         seed,
				MinGap:       100 * time.Millisecond,
				MaxGap:       time.Second,
				MaxStall:     800 * time.Millisecond,
				ThrottleRate: 256 << 10,
			})
		})
	}
}

// faultyLink serves b on loopback behind a netfault proxy that routes name, and returns
// the proxy.
func faultyLink(t *testing.T, b *edge.Broker) *netfault.Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(b, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Advertise: ln.Addr().String()})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	p, err := netfault.New(srv.Addr().String(), &netfault.Options{Listener: ln})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testAtLeastOnce runs the at-least-once test in-process (faults nil) or over a faulty
// link with faults.
func testAtLeastOnce(t *testing.T, orderly bool, faults *netfault.Schedule) {
	total := 100_000
	if faults != nil {
		total = 20_000
	}
	pace := 10 * time.Second
	if testing.Short() || (faults != nil && *netFlag != "all") {
		total = 6_000
		pace = 3 * time.Second
	}
	b := testBroker(t, func(o *edge.Options) {
		o.HeartbeatTimeout = time.Second
		o.HeartbeatCheckInterval = 50 * time.Millisecond
		o.LockLifetime = 3 * time.Second
	})
	createTopic(t, b, "T", 8)
	var proxy *netfault.Proxy
	if faults != nil {
		proxy = faultyLink(t, b)
	}
	clients := map[*PushConsumer]*remoting.Client{} // over the link: each member's own client
	c := newCounter()
	oc := newOrderChecker()
	var listener Listener = c.listener()
	if orderly {
		inner := oc.listener()
		listener = OrderlyListener(func(ctx context.Context, msgs []*Message, o *OrderlyContext) (ConsumeOrderlyStatus, error) {
			c.add(msgs)
			return inner(ctx, msgs, o)
		})
	}
	newConsumer := func() *PushConsumer {
		o := fastOptions(t, "g")
		o.PullBatchSize = 32
		o.ConsumeMessageBatchMaxSize = 4
		o.PullErrorDelay = 50 * time.Millisecond
		var cb Broker = b
		var client *remoting.Client
		if proxy != nil {
			client = dialBroker(t, proxy.Addr())
			cb = client
		}
		for attempt := 1; ; attempt++ {
			pc, err := NewPushConsumer(cb, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := pc.Subscribe("T", "*", listener); err != nil {
				t.Fatal(err)
			}
			err = pc.Start()
			if err == nil {
				if client != nil {
					clients[pc] = client
				}
				return pc
			}
			// Over the faulty link a start may meet a cut, or a stall or a dropped reply
			// that times its request out: a new consumer tries again, as a process would
			// be restarted.
			lost := errors.Is(err, mq.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
			if client == nil || !lost || attempt == 20 {
				t.Fatalf("Start (attempt %d): %v", attempt, err)
			}
			pc.Shutdown(context.Background())
			time.Sleep(50 * time.Millisecond)
		}
	}
	// leave makes pc leave: a crash (no offset persist, no unregister, no unlock; over the
	// link its connections close, as a dead process's would) or a Shutdown.
	leave := func(pc *PushConsumer, crash bool) {
		switch {
		case crash:
			pc.crash()
		case proxy == nil:
			shutdown(t, pc)
		default:
			// Over a faulty link a member's last offset commit or its unregistering may
			// be lost (the broker learns it from the closed connection); it stops anyway.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := pc.Shutdown(ctx); err != nil && !errors.Is(err, mq.ErrUnavailable) {
				t.Errorf("Shutdown: %v", err)
			}
			cancel()
		}
		if c := clients[pc]; c != nil {
			c.Close()
			delete(clients, pc)
		}
	}
	var slots [4]*PushConsumer
	slots[0], slots[1] = newConsumer(), newConsumer()
	defer func() {
		for _, pc := range slots {
			if pc != nil {
				leave(pc, true)
			}
		}
	}()
	if proxy != nil {
		if err := proxy.StartFaults(*faults); err != nil {
			t.Fatal(err)
		}
		defer proxy.StopFaults()
	}
	consumed := func() bool { return c.distinct() == total }
	deadline := time.Now().Add(120 * time.Second)

	var wg sync.WaitGroup
	per := total / 3
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := per
			if p == 2 {
				n = total - 2*per
			}
			// Over the link, sends are spread over pace, so that faults and churn meet
			// a steady flow rather than one backlog.
			every := n
			var tick <-chan time.Time
			if faults != nil {
				tk := time.NewTicker(10 * time.Millisecond)
				defer tk.Stop()
				tick = tk.C
				every = max(1, n/int(pace/(10*time.Millisecond)))
			}
			for i := range n {
				if i > 0 && i%every == 0 && tick != nil {
					<-tick
				}
				key := strconv.Itoa(p*1000 + i%16)
				m := &mq.Message{Topic: "T", Body: []byte(strconv.Itoa(p) + "-" + strconv.Itoa(i))}
				if _, err := b.Send(context.Background(), m, mq.ShardingKey(key)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	produced := make(chan struct{})
	go func() { wg.Wait(); close(produced) }()

	rng := rand.New(rand.NewPCG(1, 2))
	crashes, shutdowns, joins := 0, 0, 0
	churn := time.NewTicker(150 * time.Millisecond)
	defer churn.Stop()
	// Members churn until every message is produced, and over the link until every
	// message is consumed too, so that faults meet joins, leaves and consumption.
loop:
	for {
		select {
		case <-produced:
			if proxy == nil {
				break loop
			}
			produced = nil // a nil channel is never ready: churn on
			continue
		case <-churn.C:
		}
		if produced == nil && (consumed() || time.Now().After(deadline)) {
			break loop
		}
		i := rng.IntN(len(slots))
		switch pc := slots[i]; {
		case pc == nil:
			slots[i] = newConsumer()
			joins++
		case crashes <= shutdowns: // leaving members alternate between crash and Shutdown
			leave(pc, true)
			slots[i] = nil
			crashes++
		default:
			leave(pc, false)
			slots[i] = nil
			shutdowns++
		}
	}
	if t.Failed() {
		return
	}
	for i := range 2 {
		if slots[i] == nil {
			slots[i] = newConsumer()
		}
	}
	waitFor(t, time.Until(deadline)+10*time.Second, "every message consumed", consumed)
	oc.check(t)
	if proxy == nil {
		t.Logf("%d messages, %d deliveries (%d duplicates); %d joins, %d shutdowns, %d crashes",
			total, c.total(), c.total()-total, joins, shutdowns, crashes)
		return
	}
	proxy.StopFaults()
	kinds := map[netfault.FaultKind]int{}
	for _, f := range proxy.Faults() {
		kinds[f.Kind]++
	}
	t.Logf("summary: at-least-once over a faulty link, %s: %d messages, %d deliveries, %d duplicates; "+
		"%d joins, %d shutdowns, %d crashes; faults: %d cuts, %d stalls, %d throttles, %d lost replies armed (%d lost), %d connections",
		t.Name(), total, c.total(), c.total()-total, joins, shutdowns, crashes,
		kinds[netfault.FaultCut], kinds[netfault.FaultStall], kinds[netfault.FaultThrottle], kinds[netfault.FaultDropReply],
		proxy.RepliesDropped(), proxy.Accepted())
}
