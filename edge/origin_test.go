package edge

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// TestSendFromKeepsOrigin: what a remote producer says of its messages (born time and host,
// reconsume count) is what consumers read, for single and batch sends, waiting and async;
// the zero Origin is Send's.
func TestSendFromKeepsOrigin(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	o := Origin{BornTime: 1_700_000_000_123, BornHost: netip.MustParseAddrPort("10.1.2.3:40000"), ReconsumeTimes: 2}
	if _, err := b.SendFrom(ctx, &mq.Message{Topic: "T", Body: []byte("one")}, mq.QueueIndex(0), o); err != nil {
		t.Fatal(err)
	}
	batch := []*mq.Message{{Topic: "T", Body: []byte("two")}, {Topic: "T", Body: []byte("three")}}
	if _, err := b.SendBatchFrom(ctx, batch, mq.QueueIndex(0), o); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 2)
	if err := b.SendAsyncFrom(ctx, &mq.Message{Topic: "T", Body: []byte("four")}, mq.QueueIndex(0), o, func(r mq.SendResult, err error) {
		if err == nil && r.QueueOffset != 3 {
			err = fmt.Errorf("async send stored at %d, want 3", r.QueueOffset)
		}
		acked <- err
	}); err != nil {
		t.Fatal(err)
	}
	batch = []*mq.Message{{Topic: "T", Body: []byte("five")}, {Topic: "T", Body: []byte("six")}}
	if err := b.SendBatchAsyncFrom(ctx, batch, mq.QueueIndex(0), o, func(r []mq.SendResult, err error) {
		if err == nil && (len(r) != 2 || r[0].QueueOffset != 4 || r[1].QueueOffset != 5) {
			err = fmt.Errorf("async batch results %+v, want offsets 4 and 5", r)
		}
		acked <- err
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("local")}, mq.QueueIndex(0)); err != nil {
		t.Fatal(err)
	}
	pr, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T"}, Filter: "*"})
	if err != nil || len(pr.Messages) != 7 {
		t.Fatalf("Pull: %d messages, %v; want 7", len(pr.Messages), err)
	}
	for _, m := range pr.Messages[:6] {
		if m.BornTime != o.BornTime || m.BornHost != o.BornHost || m.ReconsumeTimes != o.ReconsumeTimes {
			t.Errorf("%s: born %d %v, reconsumed %d; want %d %v %d", m.Body, m.BornTime, m.BornHost, m.ReconsumeTimes,
				o.BornTime, o.BornHost, o.ReconsumeTimes)
		}
	}
	if m := pr.Messages[6]; m.BornTime != m.StoreTime || m.BornHost.IsValid() || m.ReconsumeTimes != 0 {
		t.Errorf("local send: born %d (stored %d) %v, reconsumed %d; want the store time, no host, 0", m.BornTime, m.StoreTime, m.BornHost, m.ReconsumeTimes)
	}
	for _, bad := range []Origin{{ReconsumeTimes: -1}, {BornTime: -5}} {
		if _, err := b.SendFrom(ctx, &mq.Message{Topic: "T"}, nil, bad); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("SendFrom with origin %+v: %v, want %v", bad, err, mq.ErrInvalidArgument)
		}
		if _, err := b.SendBatchFrom(ctx, []*mq.Message{{Topic: "T"}}, nil, bad); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("SendBatchFrom with origin %+v: %v, want %v", bad, err, mq.ErrInvalidArgument)
		}
		never := func([]mq.SendResult, error) { t.Error("done called") }
		if err := b.SendBatchAsyncFrom(ctx, []*mq.Message{{Topic: "T"}}, nil, bad, never); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("SendBatchAsyncFrom with origin %+v: %v, want %v", bad, err, mq.ErrInvalidArgument)
		}
	}
}

// TestSendFromRetryTopicCountsOrigin: a message a client sends to a retry topic with a
// reconsume count in its header only goes to the dead-letter topic past its maximum, as
// one with the RECONSUME_TIME property does.
func TestSendFromRetryTopicCountsOrigin(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	retry := mq.RetryTopic("g")
	m := &mq.Message{Topic: retry, Body: []byte("x"), Properties: map[string]string{mq.PropertyMaxReconsumeTimes: "3"}}
	res, err := b.SendFrom(ctx, m, nil, Origin{ReconsumeTimes: 3})
	if err != nil || res.Queue.Topic != retry {
		t.Fatalf("reconsumed 3 of 3: stored in %q, %v; want %q", res.Queue.Topic, err, retry)
	}
	res, err = b.SendFrom(ctx, m, nil, Origin{ReconsumeTimes: 4})
	if err != nil || res.Queue.Topic != mq.DLQTopic("g") {
		t.Fatalf("reconsumed 4 of 3: stored in %q, %v; want %q", res.Queue.Topic, err, mq.DLQTopic("g"))
	}
	if _, ok := m.Properties[mq.PropertyReconsumeTime]; ok {
		t.Error("SendFrom changed the caller's properties")
	}
	got, err := b.ViewMessage(ctx, res.CommitLogOffset)
	if err != nil || got.ReconsumeTimes != 4 || got.Properties[mq.PropertyReconsumeTime] != "" {
		t.Errorf("DLQ copy: reconsumed %d, properties %v, %v; want 4 and no %s", got.ReconsumeTimes, got.Properties, err, mq.PropertyReconsumeTime)
	}
}

// TestRouteBeforeTopics: a group's retry topic has a route on its first lookup (made
// then), and TBW102 has one while topics are auto-created; other unknown topics have none.
func TestRouteBeforeTopics(t *testing.T) {
	ctx := context.Background()
	b := openBroker(t, &Options{DefaultQueues: 3})
	r, err := b.Route(ctx, "%RETRY%g")
	if err != nil || len(r.Queues) != 1 || r.Queues[0].ReadQueues != 1 || r.Queues[0].Perm != mq.PermReadWrite {
		t.Fatalf("Route(%%RETRY%%g) = %+v, %v; want one queue, read-write", r, err)
	}
	if _, err := b.Topic("%RETRY%g"); err != nil {
		t.Errorf("the retry topic was not made: %v", err)
	}
	r, err = b.Route(ctx, mq.DefaultTopic)
	if err != nil || r.Queues[0].WriteQueues != 3 || r.Queues[0].Perm != mq.PermReadWrite|mq.PermInherit {
		t.Errorf("Route(TBW102) = %+v, %v; want 3 queues, perm 7", r, err)
	}
	if _, err := b.Topic(mq.DefaultTopic); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Errorf("TBW102 became a topic: %v", err)
	}
	for _, topic := range []string{"Nope", "%DLQ%g", "%RETRY%", "%RETRY%a/b"} {
		if _, err := b.Route(ctx, topic); err == nil {
			t.Errorf("Route(%q) found a route", topic)
		}
	}
	nb := openBroker(t, &Options{NoAutoCreateTopics: true})
	if _, err := nb.Route(ctx, mq.DefaultTopic); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Errorf("Route(TBW102) without auto-creation: %v, want %v", err, mq.ErrTopicNotExist)
	}
}

// TestOptionsReportsDefaults: Options gives the effective options, defaults filled in, as
// a copy.
func TestOptionsReportsDefaults(t *testing.T) {
	b := openBroker(t, &Options{MaxMessageSize: 1 << 15, NoAutoCreateTopics: true})
	o := b.Options()
	if o.MaxMessageSize != 1<<15 || !o.NoAutoCreateTopics || o.DefaultQueues != DefaultOptions.DefaultQueues ||
		o.BrokerName != DefaultOptions.BrokerName || len(o.DelayLevels) != len(DefaultDelayLevels) {
		t.Errorf("Options() = %+v", o)
	}
	o.DelayLevels[0] = time.Hour
	o.Store.MaxMessageSize = 1
	if b.opts.DelayLevels[0] == time.Hour || b.opts.Store.MaxMessageSize == 1 {
		t.Error("changing the copy changed the broker's options")
	}
	if (*Broker)(nil).Options().MaxMessageSize != 0 {
		t.Error("a nil broker has options")
	}
}

// TestCreateGroup: a group made before any heartbeat is known, with no members, and has its
// retry topic and its stored config; making it again replaces the config and keeps its
// members; bad input is refused.
func TestCreateGroup(t *testing.T) {
	ctx := context.Background()
	b := openBroker(t, nil)
	if _, err := b.ConsumerIDs(ctx, "", "g"); !errors.Is(err, mq.ErrGroupNotExist) {
		t.Fatalf("ConsumerIDs before CreateGroup: %v", err)
	}
	if err := b.CreateGroup(GroupConfig{Name: "g", ConsumeEnable: true}); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.ConsumerIDs(ctx, "", "g"); err != nil || len(ids) != 0 {
		t.Errorf("ConsumerIDs after CreateGroup: %v %v, want none", ids, err)
	}
	if _, err := b.Topic(mq.RetryTopic("g")); err != nil {
		t.Errorf("retry topic: %v", err)
	}
	cfgs, err := b.GroupConfigs()
	if want := (GroupConfig{Name: "g", ConsumeEnable: true, RetryQueues: 1, MaxReconsumeTimes: 16}); err != nil || len(cfgs) != 1 || cfgs[0] != want {
		t.Errorf("GroupConfigs() = %+v, %v; want [%+v]", cfgs, err, want)
	}
	if err := b.Heartbeat(ctx, mq.Heartbeat{ClientID: "c", Consumers: []mq.ConsumerData{{Group: "g"}, {Group: "h"}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateGroup(GroupConfig{Name: "g", MaxReconsumeTimes: 3}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := b.ConsumerIDs(ctx, "", "g"); len(ids) != 1 {
		t.Errorf("CreateGroup of a known group changed its members: %v", ids)
	}
	cfgs, err = b.GroupConfigs()
	if err != nil || len(cfgs) != 2 || cfgs[0].MaxReconsumeTimes != 3 || cfgs[0].ConsumeEnable || cfgs[1].Name != "h" {
		t.Errorf("GroupConfigs() after an update and a heartbeat = %+v, %v", cfgs, err)
	}
	for _, bad := range []GroupConfig{{Name: "a b"}, {Name: "g", RetryQueues: -1}, {Name: "g", MaxReconsumeTimes: -1}} {
		if err := b.CreateGroup(bad); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("CreateGroup(%+v) = %v", bad, err)
		}
	}
	if !slices.Contains(b.Groups(), "g") {
		t.Errorf("Groups() = %v", b.Groups())
	}
}

// TestMessagesByKey: messages are found by a key among their keys or by their UNIQ_KEY,
// in the time range, up to the maximum.
func TestMessagesByKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := openBroker(t, &Options{DefaultQueues: 2})
		send := func(keys, uniq string) {
			m := &mq.Message{Topic: "T", Keys: keys, Body: []byte(keys + uniq)}
			if uniq != "" {
				m.SetProperty(mq.PropertyUniqKey, uniq)
			}
			if _, err := b.Send(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		start := time.Now()
		send("a b", "")
		send("b", "U1")
		send("c", "")
		send("b a", "")
		mid := start.Add(2 * time.Second)
		for _, tc := range []struct {
			key      string
			max      int
			from, to time.Time
			want     []string
		}{
			{"a", 10, start, time.Now(), []string{"a b", "b a"}},
			{"b", 10, start, time.Now(), []string{"a b", "bU1", "b a"}}, // round robin: queue 0 holds "a b" and "c"
			{"b", 2, start, time.Now(), []string{"a b", "bU1"}},
			{"U1", 10, start, time.Now(), []string{"bU1"}},
			{"a", 10, mid, time.Now(), []string{"b a"}},
			{"a", 10, start, mid, []string{"a b"}},
			{"zz", 10, start, time.Now(), nil},
		} {
			got, err := b.MessagesByKey(ctx, "T", tc.key, tc.max, tc.from, tc.to)
			var bodies []string
			for _, m := range got {
				bodies = append(bodies, string(m.Body))
			}
			if err != nil || !slices.Equal(bodies, tc.want) {
				t.Errorf("MessagesByKey(%q, %d, %v..%v) = %q, %v; want %q", tc.key, tc.max, tc.from.Sub(start), tc.to.Sub(start), bodies, err, tc.want)
			}
		}
		if _, err := b.MessagesByKey(ctx, "Nope", "a", 1, start, time.Now()); !errors.Is(err, mq.ErrTopicNotExist) {
			t.Errorf("unknown topic: %v", err)
		}
		if _, err := b.MessagesByKey(ctx, "T", "", 1, start, time.Now()); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("empty key: %v", err)
		}
	})
}
