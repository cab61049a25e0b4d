package mq

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestOffsetMsgID(t *testing.T) {
	for _, tc := range []struct {
		host string
		pos  int64
		want string
	}{
		{"127.0.0.1:10911", 64, "7F00000100002A9F0000000000000040"},
		{"10.0.0.5:10911", 1 << 40, "0A00000500002A9F0000010000000000"},
		{"[::ffff:10.0.0.5]:10911", 255, "0A00000500002A9F00000000000000FF"},
		{"[2001:db8::1]:1", 1, "20010DB800000000000000000000000100000001" + "0000000000000001"},
	} {
		host := netip.MustParseAddrPort(tc.host)
		got := OffsetMsgID(host, tc.pos)
		if got != tc.want {
			t.Errorf("OffsetMsgID(%s, %d) = %s, want %s", tc.host, tc.pos, got, tc.want)
		}
		h, pos, err := ParseOffsetMsgID(got)
		if err != nil || pos != tc.pos || h.Port() != host.Port() || h.Addr().Unmap() != host.Addr().Unmap() {
			t.Errorf("ParseOffsetMsgID(%s) = %v %d %v", got, h, pos, err)
		}
	}
	if h, pos, err := ParseOffsetMsgID("7f00000100002a9f0000000000000040"); err != nil || pos != 64 || h.String() != "127.0.0.1:10911" {
		t.Errorf("lower-case id: %v %d %v", h, pos, err)
	}
	for _, bad := range []string{"", "XYZ", "7F00000100002A9F00000000000000", "7F00000100002A9FFFFFFFFFFFFFFFFF",
		"7F00000100FFFFFF0000000000000040", "7F00000100002A9F000000000000004G", "7F00000100002A9F00000000000000-1"} {
		if _, _, err := ParseOffsetMsgID(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseOffsetMsgID(%q): %v, want %v", bad, err, ErrInvalidArgument)
		}
	}
}

// FuzzParseOffsetMsgID: ids come from the network (a view-message request); any string
// either parses into what formats back to the same id, or is refused.
func FuzzParseOffsetMsgID(f *testing.F) {
	f.Add("7F00000100002A9F0000000000000040")
	f.Add("20010DB800000000000000000000000100000001" + "0000000000000001")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, id string) {
		host, pos, err := ParseOffsetMsgID(id)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if back := OffsetMsgID(host, pos); !strings.EqualFold(back, id) && !(host.Addr().Is4In6() && len(id) == 56) {
			t.Fatalf("%q parsed to %v %d, which formats as %q", id, host, pos, back)
		}
	})
}

// QueueIndex(i) selects index i whatever n, and the common indexes cost no allocation.
func TestQueueIndex(t *testing.T) {
	for _, i := range []int{0, 1, 63, 64, 1000} {
		if got := QueueIndex(i)(4, &Message{}); got != i {
			t.Errorf("QueueIndex(%d) chose %d", i, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = QueueIndex(7) }); n != 0 {
		t.Errorf("QueueIndex(7): %v allocations, want 0", n)
	}
}

// SelectQueue gives the selector a copy of the message that the selector's changes do not
// reach, a copy cleared once the call returns, and costs no allocation; a nil selector or
// message chooses no queue (-1) instead of panicking.
func TestSelectQueue(t *testing.T) {
	m := &Message{Topic: "T", Keys: "k1", Body: []byte("b")}
	var seen *Message
	got := SelectQueue(func(n int, c *Message) int {
		if c == m || c.Topic != "T" || c.Keys != "k1" || string(c.Body) != "b" || n != 8 {
			t.Errorf("selector given %p %+v of %d queues, want a copy of %p", c, c, n, m)
		}
		seen = c
		c.Topic, c.Keys = "changed", "changed"
		return 5
	}, 8, m)
	if got != 5 {
		t.Errorf("SelectQueue returned %d, want the selector's 5", got)
	}
	if m.Topic != "T" || m.Keys != "k1" {
		t.Errorf("the selector's changes reached the message: %+v", m)
	}
	if seen.Topic != "" || seen.Body != nil {
		t.Errorf("the copy still holds the message after the call: %+v", seen)
	}
	if i := SelectQueue(nil, 4, m); i != -1 {
		t.Errorf("SelectQueue of a nil selector chose %d, want -1", i)
	}
	if i := SelectQueue(QueueIndex(1), 4, nil); i != -1 {
		t.Errorf("SelectQueue of a nil message chose %d, want -1", i)
	}
	sel := ShardingKey("order-17")
	if n := testing.AllocsPerRun(100, func() { SelectQueue(sel, 4, m) }); n != 0 {
		t.Errorf("SelectQueue: %v allocations, want 0", n)
	}
}

func BenchmarkOffsetMsgID(b *testing.B) {
	h := netip.MustParseAddrPort("10.0.0.5:10911")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = OffsetMsgID(h, int64(i))
	}
}

func TestMsgID(t *testing.T) {
	m := MessageExt{StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), CommitLogOffset: 64}
	if got := m.MsgID(); got != "7F00000100002A9F0000000000000040" {
		t.Errorf("MsgID without UNIQ_KEY = %s, want the offset message id", got)
	}
	m.SetProperty(PropertyUniqKey, "U1")
	if got := m.MsgID(); got != "U1" {
		t.Errorf("MsgID with UNIQ_KEY = %s, want U1", got)
	}
	r := SendResult{StoreHost: m.StoreHost, CommitLogOffset: 64}
	if r.MsgID() != m.OffsetMsgID() || r.OffsetMsgID() != m.OffsetMsgID() {
		t.Errorf("SendResult ids %s %s, want %s", r.MsgID(), r.OffsetMsgID(), m.OffsetMsgID())
	}
	if r.UniqID = "U2"; r.MsgID() != "U2" {
		t.Errorf("SendResult.MsgID with a UniqID = %s", r.MsgID())
	}
}

func TestDelayLevel(t *testing.T) {
	var m Message
	if l, err := m.DelayLevel(); l != 0 || err != nil {
		t.Fatalf("no level: %d %v", l, err)
	}
	m.SetDelayLevel(3)
	if l, err := m.DelayLevel(); l != 3 || err != nil || m.Properties[PropertyDelayLevel] != "3" {
		t.Fatalf("level 3: %d %v %v", l, err, m.Properties)
	}
	m.SetDelayLevel(0)
	if _, ok := m.Properties[PropertyDelayLevel]; ok {
		t.Fatal("SetDelayLevel(0) kept the property")
	}
	for _, bad := range []string{"x", "-1", "1.5"} {
		m.SetProperty(PropertyDelayLevel, bad)
		if _, err := m.DelayLevel(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("level %q: %v, want %v", bad, err, ErrInvalidArgument)
		}
	}
}

func TestTagFilter(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		all      bool
		tags     []string
		match    []string
		mismatch []string
		canon    string
	}{
		{"*", true, nil, []string{"", "A"}, nil, "*"},
		{"", true, nil, []string{"A"}, nil, "*"},
		{"  *  ", true, nil, []string{"A"}, nil, "*"},
		{"A", false, []string{"A"}, []string{"A"}, []string{"", "B", "a", "A "}, "A"},
		{" A ||B|| C ", false, []string{"A", "B", "C"}, []string{"A", "B", "C"}, []string{"AB", ""}, "A || B || C"},
		{"温度 || 湿度", false, []string{"温度", "湿度"}, []string{"湿度"}, []string{"温"}, "温度 || 湿度"},
	} {
		f, err := ParseTagFilter(tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if f.All() != tc.all || !slices.Equal(f.Tags(), tc.tags) || f.String() != tc.canon {
			t.Errorf("%q: all %v tags %q canon %q, want %v %q %q", tc.expr, f.All(), f.Tags(), f.String(), tc.all, tc.tags, tc.canon)
		}
		for _, s := range tc.match {
			if !f.Match(s) {
				t.Errorf("%q does not match %q", tc.expr, s)
			}
		}
		for _, s := range tc.mismatch {
			if f.Match(s) {
				t.Errorf("%q matches %q", tc.expr, s)
			}
		}
	}
	for _, bad := range []string{"A ||", "|| A", "A || || B", "||"} {
		if _, err := ParseTagFilter(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v, want %v", bad, err, ErrInvalidArgument)
		}
	}
}

// FuzzTagFilter: expressions come from the network (subscriptions in heartbeats and
// pulls); a parsed filter matches exactly its tags, and its canonical form parses to the
// same filter.
func FuzzTagFilter(f *testing.F) {
	for _, s := range []string{"*", "A", "A || B", " A|| B ||C ", "||", "A||", "温度"} {
		f.Add(s, "A")
	}
	f.Fuzz(func(t *testing.T, expr, tag string) {
		fl, err := ParseTagFilter(expr)
		if err != nil {
			return
		}
		if fl.All() {
			if !fl.Match(tag) {
				t.Fatalf("%q matches everything but not %q", expr, tag)
			}
			return
		}
		if fl.Match(tag) != slices.Contains(fl.Tags(), tag) {
			t.Fatalf("%q: Match(%q) = %v with tags %q", expr, tag, fl.Match(tag), fl.Tags())
		}
		again, err := ParseTagFilter(fl.String())
		if err != nil || !slices.Equal(again.Tags(), fl.Tags()) {
			t.Fatalf("%q: canonical %q parses to %v, %v", expr, fl.String(), again, err)
		}
	})
}

func TestNames(t *testing.T) {
	long := strings.Repeat("t", 127)
	for _, tc := range []struct {
		name              string
		topic, subscribed bool
	}{
		{"Telemetry", true, true},
		{"a_b-c%d|e", true, true},
		{long, true, true},
		{long + "t", false, false},
		{"", false, false},
		{"a b", false, false},
		{"温度", false, false},
		{RetryTopic("g"), false, true},
		{DLQTopic("g"), false, true},
		{RetryPrefix, false, false},
		{DLQPrefix, false, false},
		{RetryTopic(strings.Repeat("g", MaxGroupLen)), false, true},
		{RetryTopic(strings.Repeat("g", MaxGroupLen+1)), false, false},
		{ScheduleTopic, false, false},
		{DefaultTopic, false, false},
		{"RMQ_SYS_TRACE_TOPIC", false, false},
	} {
		if err := ValidateTopic(tc.name); (err == nil) != tc.topic || err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidateTopic(%.20q) = %v, want ok %v", tc.name, err, tc.topic)
		}
		if err := ValidateSubscribedTopic(tc.name); (err == nil) != tc.subscribed || err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidateSubscribedTopic(%.20q) = %v, want ok %v", tc.name, err, tc.subscribed)
		}
	}
	for _, tc := range []struct {
		name      string
		group, pg bool
	}{
		{"billing", true, true},
		{strings.Repeat("g", MaxGroupLen), true, true},
		{strings.Repeat("g", MaxGroupLen+1), false, true},
		{strings.Repeat("g", MaxSystemTopicLen+1), false, false},
		{"", false, false},
		{"a/b", false, false},
	} {
		if err := ValidateGroup(tc.name); (err == nil) != tc.group || err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidateGroup(%.20q) = %v, want ok %v", tc.name, err, tc.group)
		}
		if err := ValidateProducerGroup(tc.name); (err == nil) != tc.pg {
			t.Errorf("ValidateProducerGroup(%.20q) = %v, want ok %v", tc.name, err, tc.pg)
		}
	}
	if !IsRetryTopic("%RETRY%g") || IsRetryTopic(RetryPrefix) || !IsDLQTopic("%DLQ%g") || IsDLQTopic(DLQPrefix) {
		t.Error("IsRetryTopic / IsDLQTopic")
	}
}

func TestRouteQueues(t *testing.T) {
	r := TopicRoute{
		Topic: "T",
		Brokers: []BrokerData{
			{Name: "b", Addrs: map[int64]string{MasterID: "10.0.0.2:10911"}},
			{Name: "a", Addrs: map[int64]string{MasterID: "10.0.0.1:10911", 1: "10.0.0.9:10911"}},
			{Name: "slave-only", Addrs: map[int64]string{1: "10.0.0.3:10911"}},
		},
		Queues: []QueueData{
			{BrokerName: "b", ReadQueues: 2, WriteQueues: 1, Perm: PermReadWrite},
			{BrokerName: "a", ReadQueues: 1, WriteQueues: 2, Perm: PermReadWrite},
			{BrokerName: "slave-only", ReadQueues: 1, WriteQueues: 1, Perm: PermReadWrite},
			{BrokerName: "read-only", ReadQueues: 1, WriteQueues: 1, Perm: PermRead},
			{BrokerName: "write-only", ReadQueues: 1, WriteQueues: 1, Perm: PermWrite},
		},
	}
	q := func(broker string, id int32) MessageQueue {
		return MessageQueue{Topic: "T", BrokerName: broker, QueueID: id}
	}
	if got, want := r.ReadQueues(), []MessageQueue{q("a", 0), q("b", 0), q("b", 1), q("read-only", 0), q("slave-only", 0)}; !slices.Equal(got, want) {
		t.Errorf("ReadQueues = %v, want %v", got, want)
	}
	// Writable and with a master: write-only has no broker entry, so no master either.
	if got, want := r.WriteQueues(), []MessageQueue{q("a", 0), q("a", 1), q("b", 0)}; !slices.Equal(got, want) {
		t.Errorf("WriteQueues = %v, want %v", got, want)
	}
	if r.MasterAddr("a") != "10.0.0.1:10911" || r.MasterAddr("slave-only") != "" || r.MasterAddr("nope") != "" {
		t.Error("MasterAddr")
	}
	if got := q("a", 3).String(); got != "MessageQueue [topic=T, brokerName=a, queueId=3]" {
		t.Errorf("String = %q", got)
	}
}

func TestQueueSelectors(t *testing.T) {
	m := &Message{Topic: "T"}
	for n := 1; n <= 64; n++ {
		for _, key := range []string{"", "order-42", "温度"} {
			sel := ShardingKey(key)
			i := sel(n, m)
			if i < 0 || i >= n || sel(n, m) != i || ShardingKey(key)(n, m) != i {
				t.Fatalf("ShardingKey(%q) over %d queues: %d, not stable or out of range", key, n, i)
			}
		}
	}
	if QueueIndex(3)(8, m) != 3 {
		t.Error("QueueIndex")
	}
}

func TestStatusNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{PullFound.String(), "FOUND"}, {PullOffsetIllegal.String(), "OFFSET_ILLEGAL"}, {PullStatus(9).String(), "PullStatus(?)"},
		{PullStatus(-1).String(), "PullStatus(?)"}, {Clustering.String(), "CLUSTERING"}, {Broadcasting.String(), "BROADCASTING"},
		{MessageModel(5).String(), "MessageModel(?)"}, {ConsumeActively.String(), "CONSUME_ACTIVELY"}, {ConsumeType(7).String(), "ConsumeType(?)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
