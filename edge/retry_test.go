package edge

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"
)

// retryMsg stores a message to send back and returns it as stored.
func retryMsg(t *testing.T, b *Broker, m *Message) *Message {
	t.Helper()
	res, err := b.Send(context.Background(), m, QueueID(0))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := b.st.ReadMessage(res.Pos)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func retrySendBack(t *testing.T, b *Broker, req SendBackRequest) (SendResult, *Message) {
	t.Helper()
	res, err := b.SendBack(context.Background(), req)
	if err != nil {
		t.Fatalf("SendBack %+v: %v", req, err)
	}
	m, err := b.st.ReadMessage(res.Pos)
	if err != nil {
		t.Fatal(err)
	}
	return res, m
}

// TestSendBackRetriesWithGrowingDelay follows one message through 16 failed consumptions:
// retry levels 3, 4, ... 18, each delivered to %RETRY%g after its delay, then the DLQ.
func TestSendBackRetriesWithGrowingDelay(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil)
	props := map[string]string{"p": "v", PropertyUniqKey: "U"}
	orig := retryMsg(t, b, &Message{Topic: "T", Tags: "tg", Keys: "k", Flag: 3, Properties: maps.Clone(props), Body: []byte("payload")})
	originID := MessageID(b.opts.StoreHost, orig.Pos)
	retry := RetryTopic("g")
	cur := orig
	for i := int32(0); i < 16; i++ {
		level := int(3 + i)
		_, s := retrySendBack(t, b, SendBackRequest{Pos: cur.Pos, Group: "g"})
		if s.Topic != ScheduleTopic || s.QueueID != int32(level-1) || s.Properties[PropertyDelayLevel] != strconv.Itoa(level) ||
			s.Properties[PropertyRealTopic] != retry || s.Properties[PropertyRealQueueID] != "0" {
			t.Fatalf("reconsume %d: schedule copy %s/%d with %v, want level %d for %s", i, s.Topic, s.QueueID, s.Properties, level, retry)
		}
		schedWaitIdle(t, b, clk.Now().Add(b.opts.DelayLevels[level-1]))
		clk.Advance(b.opts.DelayLevels[level-1])
		schedWaitMax(t, b, retry, 0, int64(i+1))
		got := schedRead(t, b, retry, 0)[i]
		want := maps.Clone(props)
		want[PropertyRetryTopic] = "T"
		want[PropertyOriginMessageID] = originID
		if !maps.Equal(got.Properties, want) {
			t.Fatalf("reconsume %d: properties %v, want %v", i, got.Properties, want)
		}
		if got.ReconsumeTimes != i+1 || string(got.Body) != "payload" || got.Tags != "tg" || got.Keys != "k" || got.Flag != 3 || got.BornTime != orig.BornTime {
			t.Fatalf("reconsume %d: retry message %+v", i, got)
		}
		cur = &got
	}
	if cfg, ok := b.Topic(retry); !ok || cfg.ReadQueues != 1 || cfg.WriteQueues != 1 {
		t.Fatalf("retry topic %+v %v", cfg, ok)
	}
	// Reconsumed 16 times: the DLQ, at once.
	res, d := retrySendBack(t, b, SendBackRequest{Pos: cur.Pos, Group: "g"})
	if res.Topic != DLQTopic("g") || d.Topic != DLQTopic("g") || d.QueueID != 0 || d.ReconsumeTimes != 17 ||
		d.Properties[PropertyDelayLevel] != "" || d.Properties[PropertyOriginMessageID] != originID || string(d.Body) != "payload" {
		t.Fatalf("after 16 reconsumes: %+v stored %+v", res, d)
	}
	if cfg, ok := b.Topic(DLQTopic("g")); !ok || cfg.ReadQueues != 1 || cfg.WriteQueues != 1 {
		t.Fatalf("DLQ topic %+v %v", cfg, ok)
	}
}

func TestSendBackDeadLetter(t *testing.T) {
	b, _ := schedBroker(t, "", schedT0, nil)
	orig := retryMsg(t, b, &Message{Topic: "T", Body: []byte("x")})
	res, d := retrySendBack(t, b, SendBackRequest{Pos: orig.Pos, Group: "g", DelayLevel: -1})
	if res.Topic != DLQTopic("g") || d.Topic != DLQTopic("g") || d.ReconsumeTimes != 1 || d.Properties[PropertyRetryTopic] != "T" {
		t.Fatalf("DelayLevel -1: %+v stored %+v", res, d)
	}
	schedWaitMax(t, b, DLQTopic("g"), 0, 1)
}

func TestSendBackMaxReconsumeTimes(t *testing.T) {
	b, _ := schedBroker(t, "", schedT0, nil)
	twice := retryMsg(t, b, &Message{Topic: "T", ReconsumeTimes: 2, Body: []byte("x")})
	_, d := retrySendBack(t, b, SendBackRequest{Pos: twice.Pos, Group: "g", MaxReconsumeTimes: 2})
	if d.Topic != DLQTopic("g") || d.Properties[PropertyMaxReconsumeTimes] != "2" || d.ReconsumeTimes != 3 {
		t.Fatalf("max 2 after 2: stored %+v", d)
	}
	_, s := retrySendBack(t, b, SendBackRequest{Pos: twice.Pos, Group: "g", MaxReconsumeTimes: 3})
	if s.Topic != ScheduleTopic || s.Properties[PropertyRealTopic] != RetryTopic("g") || s.Properties[PropertyDelayLevel] != "5" ||
		s.Properties[PropertyMaxReconsumeTimes] != "3" {
		t.Fatalf("max 3 after 2: stored %+v", s)
	}
	// Options.MaxReconsumeTimes is the default.
	b2, _ := schedBroker(t, "", schedT0, &Options{MaxReconsumeTimes: 2})
	twice = retryMsg(t, b2, &Message{Topic: "T", ReconsumeTimes: 2, Body: []byte("x")})
	if _, d := retrySendBack(t, b2, SendBackRequest{Pos: twice.Pos, Group: "g"}); d.Topic != DLQTopic("g") || d.Properties[PropertyMaxReconsumeTimes] != "" {
		t.Fatalf("Options max 2 after 2: stored %+v", d)
	}
}

func TestSendBackDelayLevels(t *testing.T) {
	b, _ := schedBroker(t, "", schedT0, nil)
	orig := retryMsg(t, b, &Message{Topic: "T", ReconsumeTimes: 20, Body: []byte("x")})
	for _, tc := range []struct {
		name       string
		req, level int32
	}{
		{"explicit", 5, 5},
		{"clamped", 99, 18},
		{"default clamped", 0, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := retrySendBack(t, b, SendBackRequest{Pos: orig.Pos, Group: "g", DelayLevel: tc.req, MaxReconsumeTimes: 100})
			if s.Topic != ScheduleTopic || s.QueueID != tc.level-1 || s.Properties[PropertyDelayLevel] != strconv.Itoa(int(tc.level)) {
				t.Fatalf("stored in %s/%d with DELAY %q, want level %d", s.Topic, s.QueueID, s.Properties[PropertyDelayLevel], tc.level)
			}
		})
	}
}

func TestSendBackKeepsOriginIDAndCompression(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, &Options{CompressOver: 100})
	body := bytes.Repeat([]byte("abc"), 200)
	orig := retryMsg(t, b, &Message{Topic: "T", Body: body})
	if orig.SysFlag&SysFlagCompressed == 0 {
		t.Fatal("original not compressed")
	}
	_, s := retrySendBack(t, b, SendBackRequest{Pos: orig.Pos, Group: "g", DelayLevel: 1, OriginMsgID: "CLIENT-ID"})
	if s.Properties[PropertyOriginMessageID] != "CLIENT-ID" || s.SysFlag != orig.SysFlag || !bytes.Equal(s.Body, orig.Body) {
		t.Fatalf("copy sysflag %#x origin %q", s.SysFlag, s.Properties[PropertyOriginMessageID])
	}
	clk.Advance(time.Second)
	schedWaitMax(t, b, RetryTopic("g"), 0, 1)
	r := schedRead(t, b, RetryTopic("g"), 0)[0]
	if err := b.decompress(&r); err != nil || !bytes.Equal(r.Body, body) {
		t.Fatalf("retry body differs (%v)", err)
	}
	// An id already there is kept.
	_, s2 := retrySendBack(t, b, SendBackRequest{Pos: r.Pos, Group: "g", OriginMsgID: "OTHER"})
	if s2.Properties[PropertyOriginMessageID] != "CLIENT-ID" || s2.Properties[PropertyRetryTopic] != "T" {
		t.Fatalf("second send-back properties %v", s2.Properties)
	}
}

func TestSendBackBadInput(t *testing.T) {
	b, _ := schedBroker(t, "", schedT0, nil)
	orig := retryMsg(t, b, &Message{Topic: "T", Body: []byte("some body")})
	end := b.st.Log().Written()
	for _, tc := range []struct {
		name string
		req  SendBackRequest
		want error
	}{
		{"empty group", SendBackRequest{Pos: orig.Pos}, ErrInvalidArgument},
		{"negative max", SendBackRequest{Pos: orig.Pos, Group: "g", MaxReconsumeTimes: -1}, ErrInvalidArgument},
		{"bad group", SendBackRequest{Pos: orig.Pos, Group: "a b"}, ErrInvalidTopic},
		{"past the end", SendBackRequest{Pos: end + 100, Group: "g"}, ErrMessageNotFound},
		{"far past the end", SendBackRequest{Pos: 1 << 40, Group: "g"}, ErrMessageNotFound},
		{"inside a record", SendBackRequest{Pos: orig.Pos + 3, Group: "g"}, ErrMessageNotFound},
		{"segment header", SendBackRequest{Pos: 0, Group: "g"}, ErrMessageNotFound},
		{"negative", SendBackRequest{Pos: -1, Group: "g"}, ErrMessageNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.SendBack(context.Background(), tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if n := b.st.Log().Written(); n != end {
		t.Fatalf("log grew from %d to %d after rejected send-backs", end, n)
	}
	b.Close()
	if _, err := b.SendBack(context.Background(), SendBackRequest{Pos: orig.Pos, Group: "g"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
