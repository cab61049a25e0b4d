package edge

import (
	"bytes"
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"maps"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store"
)

// retryMsg stores m on queue 0 of its topic as the send path would (compressed if large)
// and returns it as stored. It writes to the store, so that m may carry what a producer
// cannot set, such as reconsume times.
func retryMsg(t *testing.T, b *Broker, m *store.Message) *store.Message {
	t.Helper()
	if _, err := b.topics.ensure(m.Topic); err != nil {
		t.Fatal(err)
	}
	if err := b.prepare(m); err != nil {
		t.Fatal(err)
	}
	if err := b.st.Append([]*store.Message{m}); err != nil {
		t.Fatal(err)
	}
	stored, err := b.st.ReadMessage(m.Pos)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func retrySendBack(t *testing.T, b *Broker, req mq.SendBackRequest) (mq.SendResult, *store.Message) {
	t.Helper()
	res, err := b.sendBack(context.Background(), req)
	if err != nil {
		t.Fatalf("SendBack %+v: %v", req, err)
	}
	m, err := b.st.ReadMessage(res.CommitLogOffset)
	if err != nil {
		t.Fatal(err)
	}
	return res, m
}

// TestSendBackRetriesWithGrowingDelay follows one message through 16 failed consumptions:
// retry levels 3, 4, ... 18, each delivered to %RETRY%g after its delay, then the DLQ.
func TestSendBackRetriesWithGrowingDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		props := map[string]string{"p": "v", mq.PropertyUniqKey: "U"}
		orig := retryMsg(t, b, &store.Message{Topic: "T", Tags: "tg", Keys: "k", Flag: 3, Properties: maps.Clone(props), Body: []byte("payload")})
		originID := mq.OffsetMsgID(b.opts.StoreHost, orig.Pos)
		retry := mq.RetryTopic("g")
		cur := orig
		for i := int32(0); i < 16; i++ {
			level := int(3 + i)
			_, s := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: cur.Pos, Group: "g"})
			if s.Topic != mq.ScheduleTopic || s.QueueID != int32(level-1) || s.Properties[mq.PropertyDelayLevel] != strconv.Itoa(level) ||
				s.Properties[mq.PropertyRealTopic] != retry || s.Properties[mq.PropertyRealQueueID] != "0" {
				t.Fatalf("reconsume %d: schedule copy %s/%d with %v, want level %d for %s", i, s.Topic, s.QueueID, s.Properties, level, retry)
			}
			schedHas(t, b, retry, 0, int64(i))
			time.Sleep(b.opts.DelayLevels[level-1] - time.Millisecond)
			schedHas(t, b, retry, 0, int64(i))
			time.Sleep(time.Millisecond)
			schedHas(t, b, retry, 0, int64(i+1))
			got := schedRead(t, b, retry, 0)[i]
			want := maps.Clone(props)
			want[mq.PropertyRetryTopic] = "T"
			want[mq.PropertyOriginMessageID] = originID
			if !maps.Equal(got.Properties, want) {
				t.Fatalf("reconsume %d: properties %v, want %v", i, got.Properties, want)
			}
			if got.ReconsumeTimes != i+1 || string(got.Body) != "payload" || got.Tags != "tg" || got.Keys != "k" || got.Flag != 3 || got.BornTime != orig.BornTime {
				t.Fatalf("reconsume %d: retry message %+v", i, got)
			}
			cur = &got
		}
		if cfg, err := b.Topic(retry); err != nil || cfg.ReadQueues != 1 || cfg.WriteQueues != 1 {
			t.Fatalf("retry topic %+v %v", cfg, err)
		}
		// Reconsumed 16 times: the DLQ, at once.
		res, d := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: cur.Pos, Group: "g"})
		if res.Queue.Topic != mq.DLQTopic("g") || d.Topic != mq.DLQTopic("g") || d.QueueID != 0 || d.ReconsumeTimes != 17 ||
			d.Properties[mq.PropertyDelayLevel] != "" || d.Properties[mq.PropertyOriginMessageID] != originID || string(d.Body) != "payload" {
			t.Fatalf("after 16 reconsumes: %+v stored %+v", res, d)
		}
		if cfg, err := b.Topic(mq.DLQTopic("g")); err != nil || cfg.ReadQueues != 1 || cfg.WriteQueues != 1 {
			t.Fatalf("DLQ topic %+v %v", cfg, err)
		}
	})
}

func TestSendBackDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		orig := retryMsg(t, b, &store.Message{Topic: "T", Body: []byte("x")})
		res, d := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g", DelayLevel: -1})
		if res.Queue.Topic != mq.DLQTopic("g") || d.Topic != mq.DLQTopic("g") || d.ReconsumeTimes != 1 || d.Properties[mq.PropertyRetryTopic] != "T" {
			t.Fatalf("DelayLevel -1: %+v stored %+v", res, d)
		}
		schedHas(t, b, mq.DLQTopic("g"), 0, 1)
	})
}

func TestSendBackMaxReconsumeTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		twice := retryMsg(t, b, &store.Message{Topic: "T", ReconsumeTimes: 2, Body: []byte("x")})
		_, d := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: twice.Pos, Group: "g", MaxReconsumeTimes: 2})
		if d.Topic != mq.DLQTopic("g") || d.Properties[mq.PropertyMaxReconsumeTimes] != "2" || d.ReconsumeTimes != 3 {
			t.Fatalf("max 2 after 2: stored %+v", d)
		}
		_, s := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: twice.Pos, Group: "g", MaxReconsumeTimes: 3})
		if s.Topic != mq.ScheduleTopic || s.Properties[mq.PropertyRealTopic] != mq.RetryTopic("g") || s.Properties[mq.PropertyDelayLevel] != "5" ||
			s.Properties[mq.PropertyMaxReconsumeTimes] != "3" {
			t.Fatalf("max 3 after 2: stored %+v", s)
		}
		// Options.MaxReconsumeTimes is the default.
		b2 := schedBroker(t, "", &Options{MaxReconsumeTimes: 2})
		twice = retryMsg(t, b2, &store.Message{Topic: "T", ReconsumeTimes: 2, Body: []byte("x")})
		if _, d := retrySendBack(t, b2, mq.SendBackRequest{CommitLogOffset: twice.Pos, Group: "g"}); d.Topic != mq.DLQTopic("g") || d.Properties[mq.PropertyMaxReconsumeTimes] != "" {
			t.Fatalf("Options max 2 after 2: stored %+v", d)
		}
	})
}

func TestSendBackDelayLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		orig := retryMsg(t, b, &store.Message{Topic: "T", ReconsumeTimes: 20, Body: []byte("x")})
		for _, tc := range []struct {
			name       string
			req, level int32
		}{
			{"explicit", 5, 5},
			{"clamped", 99, 18},
			{"default clamped", 0, 18},
		} {
			_, s := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g", DelayLevel: tc.req, MaxReconsumeTimes: 100})
			if s.Topic != mq.ScheduleTopic || s.QueueID != tc.level-1 || s.Properties[mq.PropertyDelayLevel] != strconv.Itoa(int(tc.level)) {
				t.Errorf("%s: stored in %s/%d with DELAY %q, want level %d", tc.name, s.Topic, s.QueueID, s.Properties[mq.PropertyDelayLevel], tc.level)
			}
		}
	})
}

func TestSendBackKeepsOriginIDAndCompression(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", &Options{CompressOver: 100})
		body := bytes.Repeat([]byte("abc"), 200)
		orig := retryMsg(t, b, &store.Message{Topic: "T", Body: body})
		if orig.SysFlag&mq.SysFlagCompressed == 0 {
			t.Fatal("original not compressed")
		}
		_, s := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g", DelayLevel: 1, OriginMsgID: "CLIENT-ID"})
		if s.Properties[mq.PropertyOriginMessageID] != "CLIENT-ID" || s.SysFlag != orig.SysFlag || !bytes.Equal(s.Body, orig.Body) {
			t.Fatalf("copy sysflag %#x origin %q", s.SysFlag, s.Properties[mq.PropertyOriginMessageID])
		}
		time.Sleep(time.Second)
		schedHas(t, b, mq.RetryTopic("g"), 0, 1)
		r := schedRead(t, b, mq.RetryTopic("g"), 0)[0]
		if err := b.decompress(&r); err != nil || !bytes.Equal(r.Body, body) {
			t.Fatalf("retry body differs (%v)", err)
		}
		// An id already there is kept.
		_, s2 := retrySendBack(t, b, mq.SendBackRequest{CommitLogOffset: r.Pos, Group: "g", OriginMsgID: "OTHER"})
		if s2.Properties[mq.PropertyOriginMessageID] != "CLIENT-ID" || s2.Properties[mq.PropertyRetryTopic] != "T" {
			t.Fatalf("second send-back properties %v", s2.Properties)
		}
	})
}

func TestSendBackBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		orig := retryMsg(t, b, &store.Message{Topic: "T", Body: []byte("some body")})
		end := b.st.Log().Written()
		for _, tc := range []struct {
			name string
			req  mq.SendBackRequest
			want error
		}{
			{"empty group", mq.SendBackRequest{CommitLogOffset: orig.Pos}, mq.ErrInvalidArgument},
			{"negative max", mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g", MaxReconsumeTimes: -1}, mq.ErrInvalidArgument},
			{"bad group", mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "a b"}, mq.ErrInvalidArgument},
			{"past the end", mq.SendBackRequest{CommitLogOffset: end + 100, Group: "g"}, mq.ErrMessageNotFound},
			{"far past the end", mq.SendBackRequest{CommitLogOffset: 1 << 40, Group: "g"}, mq.ErrMessageNotFound},
			{"inside a record", mq.SendBackRequest{CommitLogOffset: orig.Pos + 3, Group: "g"}, mq.ErrMessageNotFound},
			{"segment header", mq.SendBackRequest{CommitLogOffset: 0, Group: "g"}, mq.ErrMessageNotFound},
			{"negative", mq.SendBackRequest{CommitLogOffset: -1, Group: "g"}, mq.ErrMessageNotFound},
			{"another broker", mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g", BrokerName: "other"}, mq.ErrInvalidQueue},
		} {
			if err := b.SendBack(context.Background(), tc.req); !errors.Is(err, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
			}
		}
		if n := b.st.Log().Written(); n != end {
			t.Fatalf("log grew from %d to %d after rejected send-backs", end, n)
		}
		b.Close()
		if err := b.SendBack(context.Background(), mq.SendBackRequest{CommitLogOffset: orig.Pos, Group: "g"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

// TestSendToRetryTopicPastMaxGoesToDLQ: a message a client sends to %RETRY%<group> itself
// (its send-back failed, or it is a remote client) carries its reconsume count in
// RECONSUME_TIME. The broker stores the count as the message's ReconsumeTimes, and a
// message past its maximum (MAX_RECONSUME_TIMES, else Options.MaxReconsumeTimes) goes to
// %DLQ%<group>, undelayed, as RocketMQ does; at the maximum it is still retried. Bad
// values are refused, and nothing is stored.
func TestSendToRetryTopicPastMaxGoesToDLQ(t *testing.T) {
	retry, dlq := mq.RetryTopic("g"), mq.DLQTopic("g")
	brokers := map[int32]*Broker{16: openBroker(t, nil), 2: openBroker(t, &Options{MaxReconsumeTimes: 2})}
	for _, tc := range []struct {
		name      string
		maxTimes  int32 // Options.MaxReconsumeTimes
		props     map[string]string
		topic     string // where the message is stored
		level     string // its DELAY as stored ("" none)
		reconsume int32
	}{
		{"no count", 16, nil, retry, "", 0},
		{"below the default max", 16, map[string]string{mq.PropertyReconsumeTime: "5"}, retry, "", 5},
		{"at the default max", 16, map[string]string{mq.PropertyReconsumeTime: "16"}, retry, "", 16},
		{"past the default max", 16, map[string]string{mq.PropertyReconsumeTime: "17"}, dlq, "", 17},
		{"at the message's max", 16, map[string]string{mq.PropertyReconsumeTime: "3", mq.PropertyMaxReconsumeTimes: "3"}, retry, "", 3},
		{"past the message's max", 16, map[string]string{mq.PropertyReconsumeTime: "4", mq.PropertyMaxReconsumeTimes: "3"}, dlq, "", 4},
		{"message's max 0", 16, map[string]string{mq.PropertyReconsumeTime: "1", mq.PropertyMaxReconsumeTimes: "0"}, dlq, "", 1},
		{"message's max -1: the default", 16, map[string]string{mq.PropertyReconsumeTime: "16", mq.PropertyMaxReconsumeTimes: "-1"}, retry, "", 16},
		{"at Options' max", 2, map[string]string{mq.PropertyReconsumeTime: "2"}, retry, "", 2},
		{"past Options' max", 2, map[string]string{mq.PropertyReconsumeTime: "3"}, dlq, "", 3},
		{"delayed, below the max", 16, map[string]string{mq.PropertyReconsumeTime: "2", mq.PropertyDelayLevel: "5"}, mq.ScheduleTopic, "5", 2},
		{"delayed, past the max: undelayed", 16, map[string]string{mq.PropertyReconsumeTime: "17", mq.PropertyDelayLevel: "18"}, dlq, "", 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := brokers[tc.maxTimes]
			m := &mq.Message{Topic: retry, Properties: maps.Clone(tc.props), Body: []byte("again")}
			res, err := b.Send(context.Background(), m, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := b.st.ReadMessage(res.CommitLogOffset)
			if err != nil {
				t.Fatal(err)
			}
			if res.Queue.Topic != tc.topic || s.Topic != tc.topic || s.ReconsumeTimes != tc.reconsume || s.Properties[mq.PropertyDelayLevel] != tc.level {
				t.Fatalf("stored in %s (result %s), reconsume times %d, DELAY %q; want %s, %d, %q",
					s.Topic, res.Queue.Topic, s.ReconsumeTimes, s.Properties[mq.PropertyDelayLevel], tc.topic, tc.reconsume, tc.level)
			}
			if tc.topic == dlq && s.QueueID != 0 {
				t.Fatalf("stored in DLQ queue %d, want 0", s.QueueID)
			}
			if _, ok := s.Properties[mq.PropertyReconsumeTime]; ok {
				t.Fatalf("%s kept in the stored properties %v", mq.PropertyReconsumeTime, s.Properties)
			}
			if !maps.Equal(m.Properties, tc.props) && (m.Properties != nil || tc.props != nil) {
				t.Fatalf("the caller's properties changed to %v", m.Properties)
			}
		})
	}

	b := openBroker(t, nil)
	for _, props := range []map[string]string{
		{mq.PropertyReconsumeTime: "x"},
		{mq.PropertyReconsumeTime: ""},
		{mq.PropertyReconsumeTime: "-1"},
		{mq.PropertyReconsumeTime: "2147483648"}, // past int32
		{mq.PropertyReconsumeTime: "1", mq.PropertyMaxReconsumeTimes: "many"},
		{mq.PropertyReconsumeTime: "1", mq.PropertyMaxReconsumeTimes: "99999999999"},
	} {
		if _, err := b.Send(context.Background(), &mq.Message{Topic: retry, Properties: props, Body: []byte("x")}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("send with %v: %v, want %v", props, err, mq.ErrInvalidArgument)
		}
		err := b.SendAsync(context.Background(), &mq.Message{Topic: retry, Properties: props, Body: []byte("x")}, nil, func(mq.SendResult, error) { t.Error("done called") })
		if !errors.Is(err, mq.ErrInvalidArgument) {
			t.Errorf("async send with %v: %v, want %v", props, err, mq.ErrInvalidArgument)
		}
	}
	for _, name := range []string{retry, dlq} {
		if n := b.st.MaxOffset(name, 0); n != 0 {
			t.Errorf("%d messages stored in %s by refused sends", n, name)
		}
	}
	if _, err := b.Topic(dlq); err == nil {
		t.Error("a refused send created the DLQ topic")
	}
}
