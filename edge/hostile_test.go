package edge

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// brokerState is what a call may change in a broker, as its exported methods and its tables
// show it: a refused call must leave it as it was.
type brokerState struct {
	Topics         []TopicConfig
	Queues         []QueueInfo
	LogEnd         int64
	Offsets        map[offsetKey]int64
	Locks          map[lockKey]lockEntry
	Groups         map[string][]Member
	ProducerGroups map[string][]string
	TopicCounters  []string
	GroupCounters  []string
}

func stateOf(t testing.TB, b *Broker) brokerState {
	t.Helper()
	s := brokerState{Topics: b.topics.list(), LogEnd: b.st.Log().Written(), Groups: map[string][]Member{}, ProducerGroups: map[string][]string{}}
	for _, q := range b.st.Queues("") {
		s.Queues = append(s.Queues, QueueInfo{Topic: q.Topic, QueueID: q.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset})
	}
	slices.SortFunc(s.Queues, func(a, b QueueInfo) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.QueueID, b.QueueID))
	})
	b.offsets.mu.Lock()
	s.Offsets = maps.Clone(b.offsets.m)
	b.offsets.mu.Unlock()
	b.locks.mu.Lock()
	s.Locks = maps.Clone(b.locks.m)
	b.locks.mu.Unlock()
	b.groups.mu.RLock()
	names := slices.Collect(maps.Keys(b.groups.groups))
	for name, clients := range b.groups.producers {
		s.ProducerGroups[name] = slices.Sorted(maps.Keys(clients))
	}
	b.groups.mu.RUnlock()
	for _, name := range names {
		ms, err := b.Members(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Groups[name] = ms
	}
	for k := range b.stats.topics.Range {
		s.TopicCounters = append(s.TopicCounters, k.(string))
	}
	for k := range b.stats.groups.Range {
		s.GroupCounters = append(s.GroupCounters, k.(string))
	}
	slices.Sort(s.TopicCounters)
	slices.Sort(s.GroupCounters)
	return s
}

// hostileBroker opens a broker with some of everything: topics "T" (4 queues) and "RO"
// (read-only), messages, a group "g" with a member subscribed to T, a producer, an offset,
// a lock.
//
// Nothing in it changes by itself while a test runs: delays, heartbeats and locks last
// hours.
func hostileBroker(t testing.TB) (*Broker, mq.SendResult) {
	t.Helper()
	b := openBroker(t, &Options{Store: &store.Options{SegmentSize: 1 << 20, MaxMessageSize: 4 << 10, QueueSegmentEntries: 1024,
		MetaNoSync: true, Flush: commitlog.FlushAsync}, MaxMessageSize: 4 << 10, DefaultSuspend: time.Millisecond,
		DelayLevels: []time.Duration{time.Hour, 2 * time.Hour}, HeartbeatTimeout: 24 * time.Hour, LockLifetime: 24 * time.Hour})
	ctx := context.Background()
	if err := b.CreateTopic(TopicConfig{Name: "T"}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(TopicConfig{Name: "RO", Perm: mq.PermRead}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Send(ctx, &mq.Message{Topic: "T", Tags: "A", Body: []byte("hello")}, mq.QueueIndex(0))
	if err != nil {
		t.Fatal(err)
	}
	mustHeartbeat(t, b, mq.Heartbeat{ClientID: "c1", Producers: []string{"pg"}, Consumers: []mq.ConsumerData{hbConsumer("g", hbSub("T", "*", 1))}})
	if err := b.CommitOffset(ctx, "g", mq.MessageQueue{Topic: "T", QueueID: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockQueues(ctx, "g", "c1", []mq.MessageQueue{{Topic: "T", QueueID: 0}}); err != nil {
		t.Fatal(err)
	}
	return b, res
}

// TestHostileInput calls every exported method of *Broker with hostile values: a nil or
// ended ctx, nil messages, selectors out of range, empty and 300-character names, negative
// offsets and queue ids, huge counts. Each returns an error wrapping the documented
// sentinel, or its documented answer, never panics, and a refused call changes nothing.
// After Close every call is ErrClosed, or the documented answer of a call without error.
func TestHostileInput(t *testing.T) {
	long := strings.Repeat("x", 300)
	q0 := mq.MessageQueue{Topic: "T", QueueID: 0}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	var nilCtx context.Context
	sel := func(i int) mq.QueueSelector { return func(int, *mq.Message) int { return i } }

	// A call of one method; its result other than the error is ignored unless check looks.
	type call struct {
		name string
		do   func(b *Broker, pos int64) error
		want error // nil: the call succeeds
	}
	// ctxCalls are the calls that take a ctx, each with a good argument list: run with a
	// nil and an ended ctx they must fail with those, change nothing.
	ctxCalls := map[string]func(ctx context.Context, b *Broker, pos int64) error{
		"Send": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil)
			return err
		},
		"SendAsync": func(ctx context.Context, b *Broker, _ int64) error {
			return b.SendAsync(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil, func(mq.SendResult, error) {})
		},
		"SendBatch": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.SendBatch(ctx, []*mq.Message{{Topic: "T", Body: []byte("x")}}, nil)
			return err
		},
		"Pull": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: q0, Filter: "*", CommitOffset: 1})
			return err
		},
		"Route": func(ctx context.Context, b *Broker, _ int64) error { _, err := b.Route(ctx, "T"); return err },
		"CommitOffset": func(ctx context.Context, b *Broker, _ int64) error {
			return b.CommitOffset(ctx, "g", q0, 1)
		},
		"QueryOffset": func(ctx context.Context, b *Broker, _ int64) error { _, err := b.QueryOffset(ctx, "g", q0); return err },
		"MaxOffset":   func(ctx context.Context, b *Broker, _ int64) error { _, err := b.MaxOffset(ctx, q0); return err },
		"MinOffset":   func(ctx context.Context, b *Broker, _ int64) error { _, err := b.MinOffset(ctx, q0); return err },
		"SearchOffset": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.SearchOffset(ctx, q0, time.Now())
			return err
		},
		"Heartbeat": func(ctx context.Context, b *Broker, _ int64) error {
			return b.Heartbeat(ctx, mq.Heartbeat{ClientID: "c2", Producers: []string{"pg2"}, Consumers: []mq.ConsumerData{hbConsumer("g2", hbSub("T", "*", 1))}})
		},
		"Unregister": func(ctx context.Context, b *Broker, _ int64) error { return b.Unregister(ctx, "c1", "") },
		"ConsumerIDs": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.ConsumerIDs(ctx, "T", "g")
			return err
		},
		"LockQueues": func(ctx context.Context, b *Broker, _ int64) error {
			_, err := b.LockQueues(ctx, "g", "c2", []mq.MessageQueue{{Topic: "T", QueueID: 2}})
			return err
		},
		"UnlockQueues": func(ctx context.Context, b *Broker, _ int64) error {
			return b.UnlockQueues(ctx, "g", "c1", []mq.MessageQueue{q0})
		},
		"SendBack": func(ctx context.Context, b *Broker, pos int64) error {
			return b.SendBack(ctx, mq.SendBackRequest{Group: "g", CommitLogOffset: pos})
		},
		"ViewMessage": func(ctx context.Context, b *Broker, pos int64) error { _, err := b.ViewMessage(ctx, pos); return err },
	}
	var calls []call
	for _, name := range slices.Sorted(maps.Keys(ctxCalls)) {
		f := ctxCalls[name]
		calls = append(calls,
			call{name + ": nil ctx", func(b *Broker, pos int64) error { return f(nilCtx, b, pos) }, mq.ErrInvalidArgument},
			call{name + ": ended ctx", func(b *Broker, pos int64) error { return f(cancelled, b, pos) }, context.Canceled})
	}
	send := func(m *mq.Message, s mq.QueueSelector) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { _, err := b.Send(bg, m, s); return err }
	}
	sendAsync := func(m *mq.Message, s mq.QueueSelector) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error {
			return b.SendAsync(bg, m, s, func(mq.SendResult, error) { t.Error("done called for a refused send") })
		}
	}
	batch := func(ms []*mq.Message, s mq.QueueSelector) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { _, err := b.SendBatch(bg, ms, s); return err }
	}
	pull := func(r mq.PullRequest) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { _, err := b.Pull(bg, r); return err }
	}
	big := make([]byte, 5<<10)
	for _, c := range []struct {
		name string
		m    *mq.Message
		sel  mq.QueueSelector
		want error
	}{
		{"nil message", nil, nil, mq.ErrInvalidArgument},
		{"empty topic", &mq.Message{}, nil, mq.ErrInvalidTopic},
		{"300-character topic", &mq.Message{Topic: long}, nil, mq.ErrInvalidTopic},
		{"300-character retry topic", &mq.Message{Topic: mq.RetryTopic(long)}, nil, mq.ErrInvalidTopic},
		{"DLQ topic", &mq.Message{Topic: mq.DLQTopic("g")}, nil, mq.ErrInvalidTopic},
		{"read-only topic", &mq.Message{Topic: "RO"}, nil, mq.ErrNoPermission},
		{"selector -1", &mq.Message{Topic: "T"}, sel(-1), mq.ErrInvalidQueue},
		{"selector n", &mq.Message{Topic: "T"}, sel(4), mq.ErrInvalidQueue},
		{"selector MaxInt", &mq.Message{Topic: "T"}, sel(math.MaxInt), mq.ErrInvalidQueue},
		{"selector -1, new topic", &mq.Message{Topic: "New"}, sel(-1), mq.ErrInvalidQueue},
		{"body too large, new topic", &mq.Message{Topic: "New", Body: big}, nil, mq.ErrMessageTooLarge},
		{"bad delay level, new topic", &mq.Message{Topic: "New", Properties: map[string]string{mq.PropertyDelayLevel: "-3"}}, nil, mq.ErrInvalidArgument},
		{"bad reconsume time, new retry topic", &mq.Message{Topic: mq.RetryTopic("new"), Properties: map[string]string{mq.PropertyReconsumeTime: "x"}}, nil, mq.ErrInvalidArgument},
	} {
		// Each call gets its own new topic, so that a refused send that made it shows.
		newTopic := func(method string) *mq.Message {
			if c.m == nil || c.m.Topic != "New" && c.m.Topic != mq.RetryTopic("new") {
				return c.m
			}
			m := *c.m
			m.Topic += strings.ReplaceAll(c.name, " ", "") + method
			m.Topic = strings.NewReplacer(",", "", "-", "", "'", "").Replace(m.Topic)
			return &m
		}
		calls = append(calls,
			call{"Send: " + c.name, send(newTopic("Send"), c.sel), c.want},
			call{"SendAsync: " + c.name, sendAsync(newTopic("SendAsync"), c.sel), c.want})
		if m := newTopic("SendBatch"); m != nil {
			calls = append(calls, call{"SendBatch: " + c.name, batch([]*mq.Message{m, m}, c.sel), c.want})
		}
	}
	calls = append(calls, []call{
		{"SendAsync: nil done", func(b *Broker, _ int64) error { return b.SendAsync(bg, &mq.Message{Topic: "T"}, nil, nil) }, mq.ErrInvalidArgument},
		{"SendBatch: nil message", batch([]*mq.Message{{Topic: "T"}, nil}, nil), mq.ErrInvalidArgument},
		{"SendBatch: nil first message", batch([]*mq.Message{nil}, nil), mq.ErrInvalidArgument},
		{"SendBatch: two topics", batch([]*mq.Message{{Topic: "T"}, {Topic: "New"}}, nil), mq.ErrInvalidArgument},
		{"SendBatch: empty", batch(nil, nil), nil},

		{"Pull: empty group", pull(mq.PullRequest{Queue: q0, Filter: "*"}), mq.ErrInvalidArgument},
		{"Pull: 300-character group", pull(mq.PullRequest{Group: long, Queue: q0, Filter: "*", CommitOffset: 1}), mq.ErrInvalidArgument},
		{"Pull: empty topic", pull(mq.PullRequest{Group: "g", Filter: "*"}), mq.ErrTopicNotExist},
		{"Pull: 300-character topic", pull(mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: long}, Filter: "*"}), mq.ErrTopicNotExist},
		{"Pull: negative queue", pull(mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: -1}, Filter: "*"}), mq.ErrInvalidQueue},
		{"Pull: queue past the topic's", pull(mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: math.MaxInt32}, Filter: "*"}), mq.ErrInvalidQueue},
		{"Pull: negative offset", pull(mq.PullRequest{Group: "g", Queue: q0, Offset: math.MinInt64, Filter: "*"}), mq.ErrInvalidArgument},
		{"Pull: huge MaxMsgs", pull(mq.PullRequest{Group: "g", Queue: q0, MaxMsgs: math.MaxInt, Filter: "*"}), mq.ErrInvalidArgument},
		{"Pull: negative MaxMsgs", pull(mq.PullRequest{Group: "g", Queue: q0, MaxMsgs: math.MinInt, Filter: "*"}), mq.ErrInvalidArgument},
		{"Pull: negative MaxWait", pull(mq.PullRequest{Group: "g", Queue: q0, MaxWait: math.MinInt64, Filter: "*", Suspend: true}), mq.ErrInvalidArgument},
		{"Pull: negative CommitOffset", pull(mq.PullRequest{Group: "g", Queue: q0, CommitOffset: -1, Filter: "*"}), mq.ErrInvalidArgument},
		{"Pull: bad filter", pull(mq.PullRequest{Group: "g", Queue: q0, Filter: "A ||"}), mq.ErrInvalidArgument},
		{"Pull: no subscription", pull(mq.PullRequest{Group: "other", Queue: q0}), mq.ErrSubscriptionNotExist},
		{"Pull: another broker", pull(mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", BrokerName: long}, Filter: "*"}), mq.ErrInvalidQueue},
		{"Pull: offset far past the end", pull(mq.PullRequest{Group: "g", Queue: q0, Offset: math.MaxInt64, Filter: "*"}), nil},

		{"Route: empty", func(b *Broker, _ int64) error { _, err := b.Route(bg, ""); return err }, mq.ErrTopicNotExist},
		{"Route: 300 characters", func(b *Broker, _ int64) error { _, err := b.Route(bg, long); return err }, mq.ErrTopicNotExist},
	}...)
	for _, g := range []struct {
		name, group string
		q           mq.MessageQueue
		off         int64
		want        error
	}{
		{"empty group", "", q0, 1, mq.ErrInvalidArgument},
		{"300-character group", long, q0, 1, mq.ErrInvalidArgument},
		{"group with a space", "a b", q0, 1, mq.ErrInvalidArgument},
		{"empty topic", "g", mq.MessageQueue{}, 1, mq.ErrTopicNotExist},
		{"300-character topic", "g", mq.MessageQueue{Topic: long}, 1, mq.ErrTopicNotExist},
		{"negative queue", "g", mq.MessageQueue{Topic: "T", QueueID: -1}, 1, mq.ErrInvalidQueue},
		{"queue MaxInt32", "g", mq.MessageQueue{Topic: "T", QueueID: math.MaxInt32}, 1, mq.ErrInvalidQueue},
		{"another broker", "g", mq.MessageQueue{Topic: "T", BrokerName: "other"}, 1, mq.ErrInvalidQueue},
	} {
		calls = append(calls,
			call{"CommitOffset: " + g.name, func(b *Broker, _ int64) error { return b.CommitOffset(bg, g.group, g.q, g.off) }, g.want},
			call{"QueryOffset: " + g.name, func(b *Broker, _ int64) error { _, err := b.QueryOffset(bg, g.group, g.q); return err }, g.want})
		if g.group == "g" {
			calls = append(calls,
				call{"MaxOffset: " + g.name, func(b *Broker, _ int64) error { _, err := b.MaxOffset(bg, g.q); return err }, g.want},
				call{"MinOffset: " + g.name, func(b *Broker, _ int64) error { _, err := b.MinOffset(bg, g.q); return err }, g.want},
				call{"SearchOffset: " + g.name, func(b *Broker, _ int64) error { _, err := b.SearchOffset(bg, g.q, time.Time{}); return err }, g.want})
		}
		if g.q == q0 {
			calls = append(calls,
				call{"ResetOffsets: " + g.name, func(b *Broker, _ int64) error {
					_, err := b.ResetOffsets(g.group, "T", ResetToFirst, time.Time{})
					return err
				}, g.want},
				call{"Lag: " + g.name, func(b *Broker, _ int64) error { _, err := b.Lag(g.group, "T"); return err }, g.want})
		}
	}
	hb := func(h mq.Heartbeat) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { return b.Heartbeat(bg, h) }
	}
	lock := func(group, client string, qs ...mq.MessageQueue) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { _, err := b.LockQueues(bg, group, client, qs); return err }
	}
	unlock := func(group, client string, qs ...mq.MessageQueue) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { return b.UnlockQueues(bg, group, client, qs) }
	}
	sendBack := func(r mq.SendBackRequest) func(*Broker, int64) error {
		return func(b *Broker, pos int64) error {
			if r.CommitLogOffset == 0 {
				r.CommitLogOffset = pos
			}
			return b.SendBack(bg, r)
		}
	}
	view := func(pos int64) func(*Broker, int64) error {
		return func(b *Broker, _ int64) error { _, err := b.ViewMessage(bg, pos); return err }
	}
	calls = append(calls, []call{
		{"CommitOffset: negative offset", func(b *Broker, _ int64) error { return b.CommitOffset(bg, "g", q0, math.MinInt64) }, mq.ErrInvalidArgument},
		{"ResetOffsets: unknown position", func(b *Broker, _ int64) error {
			_, err := b.ResetOffsets("g", "T", ResetWhere(99), time.Time{})
			return err
		}, mq.ErrInvalidArgument},
		{"ResetOffsets: negative position", func(b *Broker, _ int64) error {
			_, err := b.ResetOffsets("g", "T", ResetWhere(-1), time.Time{})
			return err
		}, mq.ErrInvalidArgument},
		{"Lag: unknown topic", func(b *Broker, _ int64) error { _, err := b.Lag("g", long); return err }, mq.ErrTopicNotExist},

		{"Heartbeat: empty client", hb(mq.Heartbeat{Consumers: []mq.ConsumerData{hbConsumer("g2")}}), mq.ErrInvalidArgument},
		{"Heartbeat: 300-character group", hb(mq.Heartbeat{ClientID: "c2", Consumers: []mq.ConsumerData{hbConsumer(long)}}), mq.ErrInvalidArgument},
		{"Heartbeat: empty group", hb(mq.Heartbeat{ClientID: "c2", Consumers: []mq.ConsumerData{hbConsumer("")}}), mq.ErrInvalidArgument},
		{"Heartbeat: 300-character producer group", hb(mq.Heartbeat{ClientID: "c2", Producers: []string{long}}), mq.ErrInvalidArgument},
		{"Heartbeat: empty producer group", hb(mq.Heartbeat{ClientID: "c2", Producers: []string{""}}), mq.ErrInvalidArgument},
		{"Heartbeat: 300-character topic", hb(mq.Heartbeat{ClientID: "c2", Consumers: []mq.ConsumerData{hbConsumer("g2", hbSub(long, "*", 1))}}), mq.ErrInvalidTopic},
		{"Heartbeat: bad model", hb(mq.Heartbeat{ClientID: "c2", Consumers: []mq.ConsumerData{{Group: "g2", Model: -1}}}), mq.ErrInvalidArgument},
		{"Unregister: empty client", func(b *Broker, _ int64) error { return b.Unregister(bg, "", "g") }, mq.ErrInvalidArgument},
		{"Unregister: unknown client and group", func(b *Broker, _ int64) error { return b.Unregister(bg, long, "unknown") }, nil},
		{"Unregister: malformed group", func(b *Broker, _ int64) error { return b.Unregister(bg, "c1", "a b") }, mq.ErrInvalidArgument},
		{"ConsumerIDs: malformed topic", func(b *Broker, _ int64) error { _, err := b.ConsumerIDs(bg, "a b", "g"); return err }, mq.ErrInvalidTopic},
		{"ConsumerIDs: empty group", func(b *Broker, _ int64) error { _, err := b.ConsumerIDs(bg, "", ""); return err }, mq.ErrInvalidArgument},
		{"ConsumerIDs: 300-character group", func(b *Broker, _ int64) error { _, err := b.ConsumerIDs(bg, long, long); return err }, mq.ErrInvalidArgument},
		{"ConsumerIDs: unknown group", func(b *Broker, _ int64) error { _, err := b.ConsumerIDs(bg, "T", "unknown"); return err }, mq.ErrGroupNotExist},
		{"Members: empty group", func(b *Broker, _ int64) error { _, err := b.Members(""); return err }, mq.ErrInvalidArgument},
		{"Members: 300-character group", func(b *Broker, _ int64) error { _, err := b.Members(long); return err }, mq.ErrInvalidArgument},
		{"Members: unknown group", func(b *Broker, _ int64) error { _, err := b.Members("unknown"); return err }, mq.ErrGroupNotExist},

		{"LockQueues: empty group", lock("", "c2", q0), mq.ErrInvalidArgument},
		{"LockQueues: 300-character group", lock(long, "c2", q0), mq.ErrInvalidArgument},
		{"LockQueues: empty client", lock("g", "", q0), mq.ErrInvalidArgument},
		{"LockQueues: negative queue", lock("g", "c2", mq.MessageQueue{Topic: "T", QueueID: 3}, mq.MessageQueue{Topic: "T", QueueID: -1}), mq.ErrInvalidArgument},
		{"LockQueues: empty topic", lock("g", "c2", mq.MessageQueue{Topic: "T", QueueID: 3}, mq.MessageQueue{}), mq.ErrInvalidTopic},
		{"LockQueues: 300-character topic", lock("g", "c2", mq.MessageQueue{Topic: long}), mq.ErrInvalidTopic},
		{"LockQueues: another broker", lock("g", "c2", mq.MessageQueue{Topic: "T", BrokerName: long}), mq.ErrInvalidQueue},
		{"UnlockQueues: empty group", unlock("", "c1", q0), mq.ErrInvalidArgument},
		{"UnlockQueues: 300-character group", unlock(long, "c1", q0), mq.ErrInvalidArgument},
		{"UnlockQueues: negative queue", unlock("g", "c1", q0, mq.MessageQueue{Topic: "T", QueueID: -1}), mq.ErrInvalidArgument},

		{"SendBack: empty group", sendBack(mq.SendBackRequest{}), mq.ErrInvalidArgument},
		{"SendBack: 300-character group", sendBack(mq.SendBackRequest{Group: long}), mq.ErrInvalidArgument},
		{"SendBack: negative offset", sendBack(mq.SendBackRequest{Group: "g", CommitLogOffset: math.MinInt64}), mq.ErrMessageNotFound},
		{"SendBack: offset past the end", sendBack(mq.SendBackRequest{Group: "g", CommitLogOffset: math.MaxInt64}), mq.ErrMessageNotFound},
		{"SendBack: negative max", sendBack(mq.SendBackRequest{Group: "g", MaxReconsumeTimes: math.MinInt32}), mq.ErrInvalidArgument},
		{"SendBack: another broker", sendBack(mq.SendBackRequest{Group: "g", BrokerName: long}), mq.ErrInvalidQueue},
		{"ViewMessage: negative offset", view(math.MinInt64), mq.ErrMessageNotFound},
		{"ViewMessage: offset past the end", view(math.MaxInt64), mq.ErrMessageNotFound},
		{"ViewMessage: segment header", view(0), mq.ErrMessageNotFound},

		{"CreateTopic: empty name", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{}) }, mq.ErrInvalidTopic},
		{"CreateTopic: 300 characters", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{Name: long}) }, mq.ErrInvalidTopic},
		{"CreateTopic: system topic", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{Name: mq.ScheduleTopic}) }, mq.ErrInvalidTopic},
		{"CreateTopic: exists", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{Name: "T"}) }, ErrTopicExists},
		{"CreateTopic: negative queues", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{Name: "New", ReadQueues: -1}) }, mq.ErrInvalidArgument},
		{"CreateTopic: too many queues", func(b *Broker, _ int64) error {
			return b.CreateTopic(TopicConfig{Name: "New", WriteQueues: math.MaxInt32})
		}, mq.ErrInvalidArgument},
		{"CreateTopic: bad permission", func(b *Broker, _ int64) error { return b.CreateTopic(TopicConfig{Name: "New", Perm: -1}) }, mq.ErrInvalidArgument},
		{"UpdateTopic: empty name", func(b *Broker, _ int64) error { return b.UpdateTopic(TopicConfig{}) }, mq.ErrInvalidTopic},
		{"UpdateTopic: 300 characters", func(b *Broker, _ int64) error { return b.UpdateTopic(TopicConfig{Name: long}) }, mq.ErrInvalidTopic},
		{"UpdateTopic: negative queues", func(b *Broker, _ int64) error { return b.UpdateTopic(TopicConfig{Name: "T", WriteQueues: -4}) }, mq.ErrInvalidArgument},
		{"DeleteTopic: empty name", func(b *Broker, _ int64) error { return b.DeleteTopic("") }, mq.ErrTopicNotExist},
		{"DeleteTopic: 300 characters", func(b *Broker, _ int64) error { return b.DeleteTopic(long) }, mq.ErrTopicNotExist},
		{"Topic: empty name", func(b *Broker, _ int64) error { _, err := b.Topic(""); return err }, mq.ErrTopicNotExist},
		{"Topic: 300 characters", func(b *Broker, _ int64) error { _, err := b.Topic(long); return err }, mq.ErrTopicNotExist},
		{"Queues: 300 characters", func(b *Broker, _ int64) error {
			if qs, err := b.Queues(long); err != nil || len(qs) != 0 {
				t.Errorf("Queues(300 characters) = %v, %v; want none", qs, err)
			}
			return nil
		}, nil},
		{"TopicStats, GroupStats, Producers: unknown names", func(b *Broker, _ int64) error {
			for _, n := range []string{"", long, "unknown"} {
				if s := b.TopicStats(n); s != (TopicStats{}) {
					t.Errorf("TopicStats(%q) = %+v", n, s)
				}
				if s := b.GroupStats(n); s != (GroupStats{}) {
					t.Errorf("GroupStats(%q) = %+v", n, s)
				}
				if p := b.Producers(n); len(p) != 0 {
					t.Errorf("Producers(%q) = %v", n, p)
				}
			}
			return nil
		}, nil},
	}...)

	b, sent := hostileBroker(t)
	for _, c := range calls {
		before := stateOf(t, b)
		err := c.do(b, sent.CommitLogOffset)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			continue
		}
		// The calls that succeed here change nothing either: lookups, empty batches,
		// unknown clients.
		if after := stateOf(t, b); !reflect.DeepEqual(before, after) {
			t.Errorf("%s: answered %v, but changed the broker:\nbefore %+v\nafter  %+v", c.name, err, before, after)
		}
	}

	// After Close every call that can fail fails with ErrClosed; the rest give their
	// documented answers.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(ctxCalls)) {
		if err := ctxCalls[name](bg, b, sent.CommitLogOffset); !errors.Is(err, ErrClosed) || !errors.Is(err, mq.ErrUnavailable) {
			t.Errorf("%s after Close: got %v, want %v", name, err, ErrClosed)
		}
	}
	for name, f := range map[string]func() error{
		"Close":        b.Close,
		"CreateTopic":  func() error { return b.CreateTopic(TopicConfig{Name: "New"}) },
		"UpdateTopic":  func() error { return b.UpdateTopic(TopicConfig{Name: "T"}) },
		"DeleteTopic":  func() error { return b.DeleteTopic("T") },
		"Topic":        func() error { _, err := b.Topic("T"); return err },
		"Members":      func() error { _, err := b.Members("g"); return err },
		"ResetOffsets": func() error { _, err := b.ResetOffsets("g", "T", ResetToLast, time.Time{}); return err },
		"Lag":          func() error { _, err := b.Lag("g", "T"); return err },
		"Queues":       func() error { _, err := b.Queues(""); return err },
		"StoreStats":   func() error { _, err := b.StoreStats(); return err },
		"EndTransaction": func() error {
			return b.EndTransaction(context.Background(), EndTransaction{ProducerGroup: "pg", Outcome: TxCommit})
		},
		"TransactionStats": func() error { _, err := b.TransactionStats(); return err },
	} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: got %v, want %v", name, err, ErrClosed)
		}
	}
	if ts, gs, pgs, ps := b.Topics(), b.Groups(), b.ProducerGroups(), b.Producers("pg"); ts != nil || gs != nil || pgs != nil || ps != nil {
		t.Errorf("after Close: Topics %v, Groups %v, ProducerGroups %v, Producers %v; want none", ts, gs, pgs, ps)
	}
	_ = b.TopicStats("T") // counters stay readable
	_ = b.GroupStats("g")
}

// brokerErrors are the sentinels the broker's errors wrap.
var brokerErrors = []error{ErrClosed, ErrTopicExists, mq.ErrTopicNotExist, mq.ErrInvalidTopic, mq.ErrNoPermission,
	mq.ErrInvalidQueue, mq.ErrInvalidArgument, mq.ErrMessageTooLarge, mq.ErrSubscriptionNotExist,
	mq.ErrGroupNotExist, mq.ErrOffsetNotFound, mq.ErrMessageNotFound, mq.ErrUnavailable}

// fuzzProps turns "k=v;k=v" into properties, so that the fuzzer reaches the ones the broker
// reads (DELAY, RECONSUME_TIME, MAX_RECONSUME_TIMES).
func fuzzProps(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// FuzzBroker drives the broker's entry points with values from the fuzzer, on one broker
// (hostileBroker). Every call returns nil or an error wrapping one of the broker's
// sentinels, never panics, and a refused call changes nothing.
func FuzzBroker(f *testing.F) {
	f.Add(uint8(0), "T", "g", int32(0), int64(0), 1, "", []byte("x"))
	f.Add(uint8(0), "New", "g", int32(7), int64(0), 0, "DELAY=1", []byte("x"))
	f.Add(uint8(0), "%RETRY%g", "g", int32(0), int64(0), 0, "RECONSUME_TIME=17;MAX_RECONSUME_TIMES=3", []byte("x"))
	f.Add(uint8(0), "%RETRY%g", "g", int32(0), int64(0), 0, "RECONSUME_TIME=-1", []byte(nil))
	f.Add(uint8(1), "T", "g", int32(1), int64(-1), 2, "DELAY=x", []byte("y"))
	f.Add(uint8(2), "T", "g", int32(0), int64(0), 32, "A || B", []byte(nil))
	f.Add(uint8(2), "T", "", int32(-1), int64(1<<62), 5000, "||", []byte(nil))
	f.Add(uint8(3), "T", "g", int32(3), int64(5), 0, "", []byte(nil))
	f.Add(uint8(4), "T", "g", int32(0), int64(0), 0, "", []byte(nil))
	f.Add(uint8(5), "T", "g", int32(0), int64(0), 0, "*", []byte(nil))
	f.Add(uint8(6), "T", "g", int32(2), int64(0), 0, "", []byte(nil))
	f.Add(uint8(7), "T", "g", int32(0), int64(64), -1, "", []byte(nil))
	f.Add(uint8(8), "Z", "g", int32(3), int64(0), 6, "", []byte(nil))
	f.Add(uint8(9), "T", "g", int32(0), int64(0), 2, "", []byte(nil))
	b, _ := hostileBroker(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, op uint8, topic, group string, queue int32, off int64, n int, props string, body []byte) {
		q := mq.MessageQueue{Topic: topic, QueueID: queue}
		msg := func() *mq.Message {
			return &mq.Message{Topic: topic, Tags: group, Properties: fuzzProps(props), Body: body}
		}
		sel := mq.QueueIndex(int(queue))
		if queue == 0 {
			sel = nil
		}
		before := stateOf(t, b)
		var err error
		switch op % 10 {
		case 0:
			_, err = b.Send(ctx, msg(), sel)
		case 1:
			_, err = b.SendBatch(ctx, []*mq.Message{msg(), msg()}, sel)
		case 2:
			_, err = b.Pull(ctx, mq.PullRequest{Group: group, Queue: q, Offset: off, MaxMsgs: n, Filter: props, CommitOffset: off})
		case 3:
			err = b.CommitOffset(ctx, group, q, off)
		case 4:
			_, err = b.QueryOffset(ctx, group, q)
			if _, e := b.MaxOffset(ctx, q); err == nil {
				err = e
			}
			if _, e := b.SearchOffset(ctx, q, time.UnixMilli(off)); err == nil {
				err = e
			}
		case 5:
			err = b.Heartbeat(ctx, mq.Heartbeat{ClientID: group, Producers: []string{group},
				Consumers: []mq.ConsumerData{{Group: group, Model: mq.MessageModel(n), Subscriptions: []mq.Subscription{{Topic: topic, Expression: props}}}}})
		case 6:
			qs := []mq.MessageQueue{q, {Topic: topic, QueueID: queue + 1}}
			if _, err = b.LockQueues(ctx, group, topic, qs); err == nil {
				err = b.UnlockQueues(ctx, group, topic, qs[1:])
			}
		case 7:
			err = b.SendBack(ctx, mq.SendBackRequest{Group: group, CommitLogOffset: off, DelayLevel: queue, MaxReconsumeTimes: int32(n)})
			if _, e := b.ViewMessage(ctx, off); err == nil {
				err = e
			}
		case 8:
			err = b.CreateTopic(TopicConfig{Name: topic, ReadQueues: queue, WriteQueues: int32(n), Perm: int32(off)})
		case 9:
			_, err = b.ResetOffsets(group, topic, ResetWhere(n), time.UnixMilli(off))
			if _, e := b.Lag(group, topic); err == nil {
				err = e
			}
		}
		if err == nil {
			return
		}
		if !slices.ContainsFunc(brokerErrors, func(s error) bool { return errors.Is(err, s) }) {
			t.Fatalf("op %d: %v wraps none of the broker's errors", op%10, err)
		}
		if op%10 == 4 || op%10 == 7 || op%10 == 9 {
			return // several calls: an error after one that succeeded
		}
		if after := stateOf(t, b); !reflect.DeepEqual(before, after) {
			t.Fatalf("op %d refused with %v, but changed the broker:\nbefore %+v\nafter  %+v", op%10, err, before, after)
		}
	})
}

// TestNilBroker: every method of a nil *Broker answers; none panics.
func TestNilBroker(t *testing.T) {
	var b *Broker
	ctx := context.Background()
	q := mq.MessageQueue{Topic: "T"}
	for name, call := range map[string]func() error{
		"Send":         func() error { _, err := b.Send(ctx, &mq.Message{Topic: "T"}, nil); return err },
		"SendAsync":    func() error { return b.SendAsync(ctx, &mq.Message{Topic: "T"}, nil, func(mq.SendResult, error) {}) },
		"SendBatch":    func() error { _, err := b.SendBatch(ctx, []*mq.Message{{Topic: "T"}}, nil); return err },
		"Pull":         func() error { _, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: q}); return err },
		"Route":        func() error { _, err := b.Route(ctx, "T"); return err },
		"CommitOffset": func() error { return b.CommitOffset(ctx, "g", q, 1) },
		"QueryOffset":  func() error { _, err := b.QueryOffset(ctx, "g", q); return err },
		"MaxOffset":    func() error { _, err := b.MaxOffset(ctx, q); return err },
		"MinOffset":    func() error { _, err := b.MinOffset(ctx, q); return err },
		"SearchOffset": func() error { _, err := b.SearchOffset(ctx, q, time.Now()); return err },
		"Heartbeat":    func() error { return b.Heartbeat(ctx, mq.Heartbeat{ClientID: "c"}) },
		"Unregister":   func() error { return b.Unregister(ctx, "c", "") },
		"ConsumerIDs":  func() error { _, err := b.ConsumerIDs(ctx, "T", "g"); return err },
		"LockQueues":   func() error { _, err := b.LockQueues(ctx, "g", "c", []mq.MessageQueue{q}); return err },
		"UnlockQueues": func() error { return b.UnlockQueues(ctx, "g", "c", []mq.MessageQueue{q}) },
		"SendBack":     func() error { return b.SendBack(ctx, mq.SendBackRequest{Group: "g"}) },
		"ViewMessage":  func() error { _, err := b.ViewMessage(ctx, 0); return err },
		"CreateTopic":  func() error { return b.CreateTopic(TopicConfig{Name: "T"}) },
		"UpdateTopic":  func() error { return b.UpdateTopic(TopicConfig{Name: "T"}) },
		"DeleteTopic":  func() error { return b.DeleteTopic("T") },
		"Topic":        func() error { _, err := b.Topic("T"); return err },
		"Members":      func() error { _, err := b.Members("g"); return err },
		"ResetOffsets": func() error { _, err := b.ResetOffsets("g", "T", ResetToFirst, time.Time{}); return err },
		"Lag":          func() error { _, err := b.Lag("g", "T"); return err },
		"Queues":       func() error { _, err := b.Queues(""); return err },
		"StoreStats":   func() error { _, err := b.StoreStats(); return err },
		"EndTransaction": func() error {
			return b.EndTransaction(ctx, EndTransaction{ProducerGroup: "pg", Outcome: TxCommit})
		},
		"TransactionStats": func() error { _, err := b.TransactionStats(); return err },
		"Close":            b.Close,
	} {
		if err := call(); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("%s on a nil broker: %v, want %v", name, err, mq.ErrInvalidArgument)
		}
	}
	b.SetTransactionChecker(func(TransactionCheck) bool { return true }) // nothing to set: no panic
	if b.Topics() != nil || b.Groups() != nil || b.ProducerGroups() != nil || b.Producers("g") != nil ||
		b.TopicStats("T") != (TopicStats{}) || b.GroupStats("g") != (GroupStats{}) {
		t.Error("a nil broker's lists and counters are not empty")
	}
}
