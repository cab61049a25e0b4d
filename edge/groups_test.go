package edge

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// grpTimedBroker opens a broker with a 30 s heartbeat timeout checked every second. Call it
// in a synctest bubble, where time moves only by the test's time.Sleep.
func grpTimedBroker(t *testing.T) *Broker {
	t.Helper()
	return openBroker(t, &Options{HeartbeatTimeout: 30 * time.Second, HeartbeatCheckInterval: time.Second})
}

// grpChanges records a client's OnChange calls.
type grpChanges chan string

func newGrpChanges() grpChanges { return make(grpChanges, 100) }

func (c grpChanges) onChange(group string) { c <- group }

// want checks, in a bubble, that a notification about group was delivered once the bubble is
// idle.
func (c grpChanges) want(t *testing.T, group string) {
	t.Helper()
	synctest.Wait()
	select {
	case g := <-c:
		if g != group {
			t.Fatalf("OnChange(%q), want OnChange(%q)", g, group)
		}
	default:
		t.Fatalf("no OnChange(%q)", group)
	}
}

// none checks, in a bubble, that no notification was delivered once the bubble is idle.
func (c grpChanges) none(t *testing.T) {
	t.Helper()
	synctest.Wait()
	select {
	case g := <-c:
		t.Fatalf("unexpected OnChange(%q)", g)
	default:
	}
}

func hbConsumer(group string, subs ...mq.Subscription) mq.ConsumerData {
	return mq.ConsumerData{Group: group, Model: mq.Clustering, FromWhere: "CONSUME_FROM_LAST_OFFSET", Subscriptions: subs}
}

func hbSub(topic, expr string, version int64) mq.Subscription {
	return mq.Subscription{Topic: topic, Expression: expr, SubVersion: version}
}

func mustHeartbeat(t testing.TB, b *Broker, hb mq.Heartbeat) {
	t.Helper()
	if err := b.Heartbeat(context.Background(), hb); err != nil {
		t.Fatalf("Heartbeat(%s): %v", hb.ClientID, err)
	}
}

func consumerIDs(t *testing.T, b *Broker, group string) []string {
	t.Helper()
	ids, err := b.ConsumerIDs(context.Background(), "", group)
	if err != nil {
		t.Fatalf("ConsumerIDs(%q): %v", group, err)
	}
	return ids
}

func TestHeartbeatRegisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := grpTimedBroker(t)
		hb := mq.Heartbeat{ClientID: "10.0.0.1@1", Producers: []string{"pg"},
			Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("Telemetry", "temp || hum", 7), hbSub("%RETRY%g", "*", 7))}}
		hb.Consumers[0].ConsumeType = mq.ConsumeActively
		mustHeartbeat(t, b, hb)

		ms, err := b.Members("g")
		if err != nil {
			t.Fatal(err)
		}
		want := Member{ClientID: "10.0.0.1@1", Model: mq.Clustering, ConsumeType: mq.ConsumeActively, FromWhere: "CONSUME_FROM_LAST_OFFSET",
			Subscriptions: []mq.Subscription{hbSub("%RETRY%g", "*", 7), hbSub("Telemetry", "temp || hum", 7)}, LastHeartbeat: bubbleStart}
		if len(ms) != 1 || !grpEqualMember(ms[0], want) {
			t.Fatalf("Members = %+v, want [%+v]", ms, want)
		}
		if got := b.Groups(); !slices.Equal(got, []string{"g"}) {
			t.Fatalf("Groups = %v, want [g]", got)
		}
		if got := b.ProducerGroups(); !slices.Equal(got, []string{"pg"}) {
			t.Fatalf("ProducerGroups = %v, want [pg]", got)
		}
		if got := b.Producers("pg"); !slices.Equal(got, []string{"10.0.0.1@1"}) {
			t.Fatalf("Producers(pg) = %v", got)
		}
		if s, ok := b.groups.subscription("g", "Telemetry"); !ok || s.Expression != "temp || hum" {
			t.Fatalf("subscription = %+v, %v", s, ok)
		}
		if _, ok := b.groups.subscription("g", "Other"); ok {
			t.Fatal("subscription to a topic nobody subscribed")
		}

		// The group's config is stored the first time, and not overwritten later.
		cfg, ok, err := b.meta.Group("g")
		if err != nil || !ok || !cfg.ConsumeEnable || cfg.RetryQueues != 1 || cfg.MaxReconsumeTimes != 16 || cfg.BroadcastEnable {
			t.Fatalf("stored group %+v, %v, %v", cfg, ok, err)
		}
		cfg.MaxReconsumeTimes = 3
		if err := b.meta.PutGroup(cfg); err != nil {
			t.Fatal(err)
		}

		// A later heartbeat refreshes LastHeartbeat.
		time.Sleep(10 * time.Second)
		mustHeartbeat(t, b, hb)
		ms, _ = b.Members("g")
		if !ms[0].LastHeartbeat.Equal(bubbleStart.Add(10 * time.Second)) {
			t.Fatalf("LastHeartbeat = %v, want %v", ms[0].LastHeartbeat, bubbleStart.Add(10*time.Second))
		}
		if cfg, _, _ := b.meta.Group("g"); cfg.MaxReconsumeTimes != 3 {
			t.Fatalf("heartbeat overwrote the stored group config: %+v", cfg)
		}
	})
}

func TestGroupsKnownAfterReopen(t *testing.T) {
	dir := t.TempDir()
	b := openBrokerAt(t, dir, nil)
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "a", Consumers: []mq.ConsumerData{hbConsumer("g")}})
	cfg, _, _ := b.meta.Group("g")
	cfg.MaxReconsumeTimes = 5
	if err := b.meta.PutGroup(cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBrokerAt(t, dir, nil)
	if ids, err := b.ConsumerIDs(context.Background(), "", "g"); err != nil || len(ids) != 0 {
		t.Fatalf("ConsumerIDs(g) after reopen = %v, %v; want [], nil", ids, err)
	}
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "a", Consumers: []mq.ConsumerData{hbConsumer("g")}})
	if cfg, _, _ := b.meta.Group("g"); cfg.MaxReconsumeTimes != 5 {
		t.Fatalf("heartbeat after reopen overwrote the stored group config: %+v", cfg)
	}
}

func grpEqualMember(a, b Member) bool {
	return a.ClientID == b.ClientID && a.Model == b.Model && a.ConsumeType == b.ConsumeType && a.FromWhere == b.FromWhere &&
		slices.Equal(a.Subscriptions, b.Subscriptions) && a.LastHeartbeat.Equal(b.LastHeartbeat)
}

func TestConsumerIDsSorted(t *testing.T) {
	b := openBroker(t, nil)
	for _, id := range []string{"c@3", "a@1", "b@2"} {
		mustHeartbeat(t, b, mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}})
	}
	if got, want := consumerIDs(t, b, "g"), []string{"a@1", "b@2", "c@3"}; !slices.Equal(got, want) {
		t.Fatalf("ConsumerIDs = %v, want %v", got, want)
	}
	if _, err := b.ConsumerIDs(context.Background(), "", "never"); !errors.Is(err, mq.ErrGroupNotExist) {
		t.Fatalf("ConsumerIDs(never) err = %v, want mq.ErrGroupNotExist", err)
	}
	if _, err := b.Members("never"); !errors.Is(err, mq.ErrGroupNotExist) {
		t.Fatalf("Members(never) err = %v, want mq.ErrGroupNotExist", err)
	}
	if _, err := b.ConsumerIDs(context.Background(), "", ""); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("ConsumerIDs(\"\") err = %v, want mq.ErrInvalidArgument", err)
	}
}

func TestRetryTopicOnlyForClustering(t *testing.T) {
	b := openBroker(t, nil)
	bc := hbConsumer("bcast", hbSub("T", "*", 1))
	bc.Model = mq.Broadcasting
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "a", Consumers: []mq.ConsumerData{hbConsumer("clu", hbSub("T", "*", 1)), bc}})
	cfg, err := b.Topic(mq.RetryTopic("clu"))
	if err != nil || cfg.ReadQueues != 1 || cfg.WriteQueues != 1 || cfg.Perm != mq.PermReadWrite {
		t.Fatalf("retry topic of a clustering group: %+v, %v", cfg, err)
	}
	if _, err := b.Topic(mq.RetryTopic("bcast")); err == nil {
		t.Fatal("a broadcasting group got a retry topic")
	}
	if g, _, _ := b.meta.Group("bcast"); !g.BroadcastEnable {
		t.Fatalf("stored broadcasting group %+v", g)
	}
}

func TestSubscriptionReplacedOnlyByNewerVersion(t *testing.T) {
	b := openBroker(t, nil)
	hb := func(client string, s mq.Subscription) {
		mustHeartbeat(t, b, mq.Heartbeat{ClientID: client, Consumers: []mq.ConsumerData{hbConsumer("g", s)}})
	}
	expr := func() string {
		s, ok := b.groups.subscription("g", "T")
		if !ok {
			t.Fatal("no subscription")
		}
		return s.Expression
	}
	hb("a", hbSub("T", "A", 10))
	hb("a", hbSub("T", "B", 5))
	if got := expr(); got != "A" {
		t.Fatalf("after an older version: %q, want A", got)
	}
	hb("a", hbSub("T", "C", 10))
	if got := expr(); got != "C" {
		t.Fatalf("after the same version: %q, want C", got)
	}
	hb("a", hbSub("T", "D", 11))
	if got := expr(); got != "D" {
		t.Fatalf("after a newer version: %q, want D", got)
	}
	// Members that disagree: the highest version wins, whoever declared it.
	hb("b", hbSub("T", "E", 20))
	if got := expr(); got != "E" {
		t.Fatalf("members disagree: %q, want E (version 20)", got)
	}
	hb("c", hbSub("T", "F", 15))
	if got := expr(); got != "E" {
		t.Fatalf("members disagree: %q, want E (version 20)", got)
	}
	// A topic left out of a heartbeat is no longer subscribed.
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "b", Consumers: []mq.ConsumerData{hbConsumer("g")}})
	if got := expr(); got != "F" {
		t.Fatalf("after b dropped T: %q, want F", got)
	}
}

func TestOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := grpTimedBroker(t)
		ca, cb, cc := newGrpChanges(), newGrpChanges(), newGrpChanges()
		a := mq.Heartbeat{ClientID: "a", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}, OnChange: ca.onChange}
		bb := mq.Heartbeat{ClientID: "b", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}, OnChange: cb.onChange}
		cl := mq.Heartbeat{ClientID: "c", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}, OnChange: cc.onChange}

		// A join: every member hears of it, the newcomer too (so that a remote client whose
		// first rebalance came too early rebalances again at once).
		mustHeartbeat(t, b, a)
		ca.want(t, "g")
		mustHeartbeat(t, b, bb)
		ca.want(t, "g")
		cb.want(t, "g")

		// A heartbeat that changes nothing announces nothing.
		mustHeartbeat(t, b, a)
		mustHeartbeat(t, b, bb)
		ca.none(t)
		cb.none(t)

		// A subscription change.
		bb.Consumers = []mq.ConsumerData{hbConsumer("g", hbSub("T", "X", 2))}
		mustHeartbeat(t, b, bb)
		ca.want(t, "g")
		cb.want(t, "g")

		// A new topic is a change too.
		bb.Consumers = []mq.ConsumerData{hbConsumer("g", hbSub("T", "X", 2), hbSub("U", "*", 2))}
		mustHeartbeat(t, b, bb)
		ca.want(t, "g")
		cb.want(t, "g")

		// Leave.
		mustHeartbeat(t, b, cl)
		ca.want(t, "g")
		cb.want(t, "g")
		cc.want(t, "g")
		if err := b.Unregister(context.Background(), "c", "g"); err != nil {
			t.Fatal(err)
		}
		ca.want(t, "g")
		cb.want(t, "g")
		cc.none(t)
		if got := consumerIDs(t, b, "g"); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after Unregister: %v, want [a b]", got)
		}
	})
}

func TestOnChangeOnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := grpTimedBroker(t)
		ca, cb := newGrpChanges(), newGrpChanges()
		a := mq.Heartbeat{ClientID: "a", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}, OnChange: ca.onChange}
		bb := mq.Heartbeat{ClientID: "b", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}, OnChange: cb.onChange}
		mustHeartbeat(t, b, a)
		ca.want(t, "g")
		mustHeartbeat(t, b, bb)
		ca.want(t, "g")
		cb.want(t, "g")

		// b keeps its heartbeats up, a goes silent. The 30 s timeout is checked every second:
		// a is gone at the first check more than 30 s after its heartbeat, 31 s.
		for range 30 {
			time.Sleep(time.Second)
			mustHeartbeat(t, b, bb)
			cb.none(t)
		}
		time.Sleep(time.Second)
		cb.want(t, "g")
		if got := consumerIDs(t, b, "g"); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("after a expired: %v, want [b]", got)
		}
		ca.none(t)
	})
}

func TestNoOnChangeInBroadcastingGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := grpTimedBroker(t)
		ca, cb := newGrpChanges(), newGrpChanges()
		bc := func(client string, cb grpChanges, expr string) mq.Heartbeat {
			cd := hbConsumer("g", hbSub("T", expr, 1))
			cd.Model = mq.Broadcasting
			return mq.Heartbeat{ClientID: client, Consumers: []mq.ConsumerData{cd}, OnChange: cb.onChange}
		}
		mustHeartbeat(t, b, bc("a", ca, "*"))
		mustHeartbeat(t, b, bc("b", cb, "*"))                               // join
		mustHeartbeat(t, b, bc("b", cb, "X"))                               // subscription change
		if err := b.Unregister(context.Background(), "b", ""); err != nil { // leave
			t.Fatal(err)
		}
		mustHeartbeat(t, b, bc("b", cb, "*"))
		time.Sleep(10 * time.Second)
		mustHeartbeat(t, b, bc("a", ca, "*"))
		time.Sleep(21 * time.Second) // b expires
		synctest.Wait()
		if got := consumerIDs(t, b, "g"); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after b's timeout: %v, want [a]", got)
		}
		time.Sleep(10 * time.Second) // a expires
		synctest.Wait()
		if got := consumerIDs(t, b, "g"); len(got) != 0 {
			t.Fatalf("after a's timeout: %v, want none", got)
		}
		ca.none(t)
		cb.none(t)
	})
}

func TestBlockedOnChangeDoesNotBlockHeartbeat(t *testing.T) {
	b := openBroker(t, nil)
	release := make(chan struct{})
	stuck := make(chan struct{})
	var mu sync.Mutex
	n := 0
	slow := func(string) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			close(stuck)
			<-release
		}
	}
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "slow", Consumers: []mq.ConsumerData{hbConsumer("g")}, OnChange: slow})

	// x's join gets slow's callback stuck; 200 more changes follow while it is.
	done := make(chan error, 1)
	go func() {
		if err := b.Heartbeat(context.Background(), mq.Heartbeat{ClientID: "x", Consumers: []mq.ConsumerData{hbConsumer("g")}}); err != nil {
			done <- err
			return
		}
		for i := 0; i < 100; i++ {
			id := fmt.Sprintf("c%d", i)
			if err := b.Heartbeat(context.Background(), mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{hbConsumer("g")}}); err != nil {
				done <- err
				return
			}
			if err := b.Unregister(context.Background(), id, "g"); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("heartbeats blocked behind a stuck OnChange")
	}
	select {
	case <-stuck:
	case <-time.After(5 * time.Second):
		t.Fatal("OnChange was never called")
	}
	close(release)
	b.groups.notes.wait()
	// The changes that came while the callback was stuck are coalesced into one more call.
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Fatalf("slow client got %d calls, want 2 (the stuck one and one for all changes since)", n)
	}
}

func TestUnregister(t *testing.T) {
	b := openBroker(t, nil)
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "a", Producers: []string{"p"}, Consumers: []mq.ConsumerData{hbConsumer("g1"), hbConsumer("g2")}})
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "b", Consumers: []mq.ConsumerData{hbConsumer("g1"), hbConsumer("g2")}})
	if err := b.Unregister(context.Background(), "a", "g1"); err != nil {
		t.Fatal(err)
	}
	if got := consumerIDs(t, b, "g1"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("g1 = %v, want [b]", got)
	}
	if got := consumerIDs(t, b, "g2"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("g2 = %v, want [a b]", got)
	}
	if err := b.Unregister(context.Background(), "a", ""); err != nil {
		t.Fatal(err)
	}
	if got := consumerIDs(t, b, "g2"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("g2 = %v, want [b]", got)
	}
	if got := b.ProducerGroups(); len(got) != 0 {
		t.Fatalf("producer groups after Unregister: %v", got)
	}
	if err := b.Unregister(context.Background(), "nobody", ""); err != nil {
		t.Fatalf("Unregister of an unknown client: %v", err)
	}
	if err := b.Unregister(context.Background(), "", "g1"); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("Unregister(\"\") err = %v, want mq.ErrInvalidArgument", err)
	}
}

func TestHeartbeatBadInput(t *testing.T) {
	long := strings.Repeat("g", mq.MaxGroupLen+1)
	bad := func(f func(cd *mq.ConsumerData)) mq.Heartbeat {
		good := hbConsumer("ok", hbSub("T", "*", 1))
		cd := hbConsumer("g", hbSub("T", "A || B", 1))
		f(&cd)
		return mq.Heartbeat{ClientID: "c", Producers: []string{"p"}, Consumers: []mq.ConsumerData{good, cd}}
	}
	cases := []struct {
		name string
		hb   mq.Heartbeat
		want error
	}{
		{"empty client id", mq.Heartbeat{Consumers: []mq.ConsumerData{hbConsumer("g")}}, mq.ErrInvalidArgument},
		{"empty group", bad(func(cd *mq.ConsumerData) { cd.Group = "" }), mq.ErrInvalidArgument},
		{"group with a space", bad(func(cd *mq.ConsumerData) { cd.Group = "my group" }), mq.ErrInvalidArgument},
		{"group with a control char", bad(func(cd *mq.ConsumerData) { cd.Group = "g\n" }), mq.ErrInvalidArgument},
		{"group too long for its retry topic", bad(func(cd *mq.ConsumerData) { cd.Group = long }), mq.ErrInvalidArgument},
		{"bad producer group", mq.Heartbeat{ClientID: "c", Producers: []string{"p", "a b"}}, mq.ErrInvalidArgument},
		{"bad model", bad(func(cd *mq.ConsumerData) { cd.Model = 7 }), mq.ErrInvalidArgument},
		{"bad consume type", bad(func(cd *mq.ConsumerData) { cd.ConsumeType = 9 }), mq.ErrInvalidArgument},
		{"bad topic", bad(func(cd *mq.ConsumerData) { cd.Subscriptions[0].Topic = "a/b" }), mq.ErrInvalidTopic},
		{"empty topic", bad(func(cd *mq.ConsumerData) { cd.Subscriptions[0].Topic = "" }), mq.ErrInvalidTopic},
		{"reserved topic", bad(func(cd *mq.ConsumerData) { cd.Subscriptions[0].Topic = mq.DefaultTopic }), mq.ErrInvalidTopic},
		{"bad expression", bad(func(cd *mq.ConsumerData) { cd.Subscriptions[0].Expression = "A ||" }), mq.ErrInvalidArgument},
	}
	b := openBroker(t, nil)
	topics := len(b.Topics())
	for _, tc := range cases {
		if err := b.Heartbeat(context.Background(), tc.hb); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := b.Groups(); len(got) != 0 {
		t.Errorf("groups after rejected heartbeats: %v", got)
	}
	if got := b.ProducerGroups(); len(got) != 0 {
		t.Errorf("producer groups after rejected heartbeats: %v", got)
	}
	if got := len(b.Topics()); got != topics {
		t.Errorf("%d topics after rejected heartbeats, want %d", got, topics)
	}
	if gs, _ := b.meta.Groups(); len(gs) != 0 {
		t.Errorf("stored groups after rejected heartbeats: %v", gs)
	}
	// Retry and dead-letter topics may be subscribed.
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "c", Consumers: []mq.ConsumerData{hbConsumer("g", hbSub(mq.RetryTopic("g"), "*", 1), hbSub(mq.DLQTopic("g"), "*", 1))}})
}

func TestConcurrentHeartbeatsAndLocks(t *testing.T) {
	b := openBroker(t, nil)
	const workers, rounds = 16, 50
	mqs := []mq.MessageQueue{{Topic: "T", QueueID: 0}, {Topic: "T", QueueID: 1}, {Topic: "T", QueueID: 2}, {Topic: "T", QueueID: 3}}
	var wg sync.WaitGroup
	var notified sync.Map
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("client-%02d", w)
			for r := 0; r < rounds; r++ {
				hb := mq.Heartbeat{ClientID: id, Producers: []string{"p"},
					Consumers: []mq.ConsumerData{hbConsumer(fmt.Sprintf("g%d", r%3), hbSub("T", fmt.Sprintf("t%d", r), int64(r)))},
					OnChange:  func(g string) { notified.Store(id, true) }}
				if err := b.Heartbeat(context.Background(), hb); err != nil {
					t.Error(err)
					return
				}
				if _, err := b.LockQueues(context.Background(), "g0", id, mqs); err != nil {
					t.Error(err)
					return
				}
				b.groups.subscription("g1", "T")
				if _, err := b.ConsumerIDs(context.Background(), "", "g0"); err != nil {
					t.Error(err)
				}
				if r%10 == 9 {
					if err := b.UnlockQueues(context.Background(), "g0", id, mqs); err != nil {
						t.Error(err)
					}
					if err := b.Unregister(context.Background(), id, ""); err != nil {
						t.Error(err)
					}
				}
			}
			if err := b.Heartbeat(context.Background(), mq.Heartbeat{ClientID: id, Consumers: []mq.ConsumerData{hbConsumer("g0")}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := consumerIDs(t, b, "g0"); len(got) != workers {
		t.Fatalf("g0 has %d members, want %d", len(got), workers)
	}
	// Every queue is locked by exactly one client.
	owners := map[string]int{}
	for w := 0; w < workers; w++ {
		id := fmt.Sprintf("client-%02d", w)
		got, err := b.LockQueues(context.Background(), "g0", id, mqs)
		if err != nil {
			t.Fatal(err)
		}
		for range got {
			owners[id]++
		}
	}
	total := 0
	for _, n := range owners {
		total += n
	}
	if total != len(mqs) {
		t.Fatalf("%d queues granted to %v, want each of %d to one owner", total, owners, len(mqs))
	}
}
