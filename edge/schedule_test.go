package edge

import (
	"bytes"
	"context"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/meta"
)

var schedT0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// schedBroker opens a broker in dir (a new temp dir when "") on a ManualClock at start.
func schedBroker(t *testing.T, dir string, start time.Time, o *Options) (*Broker, *ManualClock) {
	t.Helper()
	clk := NewManualClock(start)
	var opts Options
	if o != nil {
		opts = *o
	}
	opts.Clock = clk
	if dir == "" {
		dir = t.TempDir()
	}
	return openBrokerAt(t, dir, &opts), clk
}

// schedWait polls cond for up to 5 s.
func schedWait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// schedWaitMax waits until (topic, queue) holds n messages.
func schedWaitMax(t testing.TB, b *Broker, topic string, queue int32, n int64) {
	t.Helper()
	schedWait(t, fmt.Sprintf("%d messages in %s/%d", n, topic, queue), func() bool { return b.st.MaxOffset(topic, queue) >= n })
	if got := b.st.MaxOffset(topic, queue); got != n {
		t.Fatalf("%s/%d holds %d messages, want %d", topic, queue, got, n)
	}
}

// schedWaitIdle waits until the scheduler sleeps until at (zero: with no timer).
func schedWaitIdle(t testing.TB, b *Broker, at time.Time) {
	t.Helper()
	want := int64(0)
	if !at.IsZero() {
		want = at.UnixMilli()
	}
	schedWait(t, fmt.Sprintf("the scheduler to sleep until %v", at), func() bool { return b.sched.wake.Load() == want })
}

// schedQuiet checks that (topic, queue) still holds n messages a moment later.
func schedQuiet(t testing.TB, b *Broker, topic string, queue int32, n int64) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	if got := b.st.MaxOffset(topic, queue); got != n {
		t.Fatalf("%s/%d holds %d messages, want %d", topic, queue, got, n)
	}
}

// schedRead returns every message of (topic, queue).
func schedRead(t testing.TB, b *Broker, topic string, queue int32) []store.Message {
	t.Helper()
	res, err := b.st.GetMessages(topic, queue, 0, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Messages
}

func schedSend(t testing.TB, b *Broker, topic string, queue int32, level int, body string) mq.SendResult {
	t.Helper()
	m := &mq.Message{Topic: topic, Body: []byte(body)}
	m.SetDelayLevel(level)
	res, err := b.Send(context.Background(), m, mq.QueueIndex(int(queue)))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestDelayedMessageDeliveredWhenDue(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil)
	born := netip.MustParseAddrPort("10.1.2.3:4567")
	// Stored as the send path stores it, with what only a remote producer or a send-back
	// sets (born time and host, reconsume times).
	m := &store.Message{Topic: "T", QueueID: 1, Tags: "tg", Keys: "k1 k2", Flag: 7, BornTime: schedT0.UnixMilli() - 1234, BornHost: born,
		ReconsumeTimes: 2, Properties: map[string]string{"a": "b", mq.PropertyUniqKey: "U1", mq.PropertyDelayLevel: "3"}, Body: []byte("hello")}
	bornTime := m.BornTime
	if err := b.prepare(m); err != nil { // level 3: 10 s
		t.Fatal(err)
	}
	if err := b.st.Append([]*store.Message{m}); err != nil {
		t.Fatal(err)
	}
	if res := b.result(m); res.Queue.Topic != mq.ScheduleTopic || res.Queue.QueueID != 2 {
		t.Fatalf("send result %+v: want its place in the schedule topic's level-3 queue", res)
	}
	schedWaitMax(t, b, mq.ScheduleTopic, 2, 1)
	due := schedT0.Add(10 * time.Second)
	schedWaitIdle(t, b, due)
	if n := b.st.MaxOffset("T", 1); n != 0 {
		t.Fatalf("delayed message in its topic at once")
	}
	clk.Advance(10*time.Second - time.Millisecond)
	schedQuiet(t, b, "T", 1, 0)
	clk.Advance(time.Millisecond)
	schedWaitMax(t, b, "T", 1, 1)

	got := schedRead(t, b, "T", 1)[0]
	want := map[string]string{"a": "b", mq.PropertyUniqKey: "U1"}
	if !maps.Equal(got.Properties, want) {
		t.Fatalf("properties %v, want %v", got.Properties, want)
	}
	if string(got.Body) != "hello" || got.Tags != "tg" || got.Keys != "k1 k2" || got.Flag != 7 || got.SysFlag != 0 ||
		got.BornTime != bornTime || got.BornHost != born || got.ReconsumeTimes != 2 || got.QueueID != 1 || got.QueueOffset != 0 {
		t.Fatalf("delivered %+v", got)
	}
	if got.StoreTime != due.UnixMilli() {
		t.Fatalf("delivered at %v, want %v", time.UnixMilli(got.StoreTime).UTC(), due)
	}
	schedWaitIdle(t, b, time.Time{})
}

func TestDelayedCompressedMessageStaysCompressed(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, &Options{CompressOver: 100})
	body := bytes.Repeat([]byte("compress me "), 100)
	m := &mq.Message{Topic: "Z", Body: body}
	m.SetDelayLevel(1)
	if _, err := b.Send(context.Background(), m, mq.QueueIndex(0)); err != nil {
		t.Fatal(err)
	}
	schedWaitMax(t, b, mq.ScheduleTopic, 0, 1)
	clk.Advance(time.Second)
	schedWaitMax(t, b, "Z", 0, 1)
	got := schedRead(t, b, "Z", 0)[0]
	if got.SysFlag&mq.SysFlagCompressed == 0 || len(got.Body) >= len(body) {
		t.Fatalf("delivered sysflag %#x, %d body bytes: not compressed", got.SysFlag, len(got.Body))
	}
	if err := b.decompress(&got); err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("decompressed body differs (%v)", err)
	}
}

func TestDelayedMessagesDeliveredInDueOrder(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil)
	schedSend(t, b, "O", 0, 4, "A") // due at 30 s
	schedWaitMax(t, b, mq.ScheduleTopic, 3, 1)
	schedWaitIdle(t, b, schedT0.Add(30*time.Second))
	clk.Advance(26 * time.Second)
	schedSend(t, b, "O", 0, 1, "B") // 27 s
	schedSend(t, b, "O", 0, 2, "C") // 31 s
	schedSend(t, b, "O", 0, 3, "D") // 36 s
	for q := int32(0); q < 4; q++ {
		schedWaitMax(t, b, mq.ScheduleTopic, q, 1)
	}
	schedWaitIdle(t, b, schedT0.Add(27*time.Second))
	// All four fall due at once: they go out in due order, not level order.
	clk.Advance(10 * time.Second)
	schedWaitMax(t, b, "O", 0, 4)
	var order string
	for _, m := range schedRead(t, b, "O", 0) {
		order += string(m.Body)
	}
	if order != "BACD" {
		t.Fatalf("delivered in order %s, want BACD", order)
	}

	// Step by step: each level's messages come at their own times.
	start := clk.Now()
	schedSend(t, b, "P", 0, 2, "5s")
	schedSend(t, b, "P", 0, 1, "1s")
	schedWaitMax(t, b, mq.ScheduleTopic, 1, 2)
	schedWaitIdle(t, b, start.Add(time.Second))
	clk.Advance(time.Second)
	schedWaitMax(t, b, "P", 0, 1)
	schedWaitIdle(t, b, start.Add(5*time.Second))
	clk.Advance(4 * time.Second)
	schedWaitMax(t, b, "P", 0, 2)
	if ms := schedRead(t, b, "P", 0); string(ms[0].Body) != "1s" || string(ms[1].Body) != "5s" {
		t.Fatalf("delivered %q then %q", ms[0].Body, ms[1].Body)
	}
}

// TestDelayedManyBatches delivers more due messages than one round reads, across levels,
// still in due order.
func TestDelayedManyBatches(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil)
	const n = 3*scheduleBatch + 5
	for i := 0; i < n; i++ {
		schedSend(t, b, "M", 0, 4, fmt.Sprintf("a%03d", i)) // due at 30 s
	}
	clk.Advance(time.Second)
	for i := 0; i < n; i++ {
		schedSend(t, b, "M", 0, 3, fmt.Sprintf("b%03d", i)) // due at 11 s
	}
	schedWaitMax(t, b, mq.ScheduleTopic, 2, n)
	schedWaitMax(t, b, mq.ScheduleTopic, 3, n)
	clk.Advance(time.Minute)
	schedWaitMax(t, b, "M", 0, 2*n)
	for i, m := range schedRead(t, b, "M", 0) {
		want := fmt.Sprintf("b%03d", i)
		if i >= n {
			want = fmt.Sprintf("a%03d", i-n)
		}
		if string(m.Body) != want {
			t.Fatalf("message %d is %s, want %s", i, m.Body, want)
		}
	}
}

// schedBodies counts the delivered bodies of (topic, queue).
func schedBodies(t testing.TB, b *Broker, topic string, queue int32) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range schedRead(t, b, topic, queue) {
		out[string(m.Body)]++
	}
	return out
}

// schedRestartSetup sends ten messages each of levels 1 (1 s), 3 (10 s) and 5 (1 m), lets
// the first two levels go out and closes the broker. Progress is written only by Close. It
// returns the data dir and the time.
func schedRestartSetup(t *testing.T) (string, time.Time) {
	dir := t.TempDir()
	b, clk := schedBroker(t, dir, schedT0, &Options{OffsetPersistInterval: time.Hour})
	for i := 0; i < 10; i++ {
		for _, l := range []int{1, 3, 5} {
			schedSend(t, b, "R", 0, l, fmt.Sprintf("l%d-%d", l, i))
		}
	}
	for _, q := range []int32{0, 2, 4} {
		schedWaitMax(t, b, mq.ScheduleTopic, q, 10)
	}
	clk.Advance(2 * time.Second)
	schedWaitMax(t, b, "R", 0, 10)
	clk.Advance(9 * time.Second)
	schedWaitMax(t, b, "R", 0, 20)
	schedWaitIdle(t, b, schedT0.Add(time.Minute))
	if p, err := b.meta.DelayProgress(); err != nil || len(p) != 0 {
		t.Fatalf("progress %v (%v) persisted before the interval", p, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, clk.Now()
}

func TestScheduleProgressPersistedEveryInterval(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil) // every 5 s
	schedSend(t, b, "I", 0, 1, "x")
	schedWaitMax(t, b, mq.ScheduleTopic, 0, 1)
	clk.Advance(time.Second)
	schedWaitMax(t, b, "I", 0, 1)
	schedWaitIdle(t, b, schedT0.Add(5*time.Second))
	if p, err := b.meta.DelayProgress(); err != nil || len(p) != 0 {
		t.Fatalf("progress %v (%v) persisted before the interval", p, err)
	}
	clk.Advance(4 * time.Second)
	schedWait(t, "progress persisted", func() bool {
		p, err := b.meta.DelayProgress()
		return err == nil && p[1] == 1
	})
	schedWaitIdle(t, b, time.Time{})
}

func TestScheduleRestartDeliversRestExactlyOnce(t *testing.T) {
	dir, now := schedRestartSetup(t)
	m, err := meta.Open(dir, &meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.DelayProgress()
	m.Close()
	if err != nil || p[1] != 10 || p[3] != 10 || p[5] != 0 {
		t.Fatalf("progress after Close %v (%v), want levels 1 and 3 at 10", p, err)
	}

	b, clk := schedBroker(t, dir, now, nil)
	schedWaitIdle(t, b, schedT0.Add(time.Minute)) // a round ran: nothing delivered again
	if n := b.st.MaxOffset("R", 0); n != 20 {
		t.Fatalf("%d messages after reopen, want 20", n)
	}
	clk.Advance(time.Minute)
	schedWaitMax(t, b, "R", 0, 30)
	got := schedBodies(t, b, "R", 0)
	for i := 0; i < 10; i++ {
		for _, l := range []int{1, 3, 5} {
			if k := fmt.Sprintf("l%d-%d", l, i); got[k] != 1 {
				t.Fatalf("%s delivered %d times, want once", k, got[k])
			}
		}
	}
}

// TestScheduleRestartAfterLostProgress reopens as after a crash that lost the last progress
// writes: the deliveries they covered come again, nothing is lost.
func TestScheduleRestartAfterLostProgress(t *testing.T) {
	dir, now := schedRestartSetup(t)
	m, err := meta.Open(dir, &meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = m.SetDelayProgress(map[int32]int64{1: 0, 3: 6}) // as persisted before the crash
	m.Close()
	if err != nil {
		t.Fatal(err)
	}

	b, clk := schedBroker(t, dir, now, nil)
	schedWaitMax(t, b, "R", 0, 34) // 10 + 4 again
	clk.Advance(time.Minute)
	schedWaitMax(t, b, "R", 0, 44)
	got := schedBodies(t, b, "R", 0)
	for i := 0; i < 10; i++ {
		for _, l := range []int{1, 3, 5} {
			k := fmt.Sprintf("l%d-%d", l, i)
			want := 1
			if l == 1 || l == 3 && i >= 6 {
				want = 2
			}
			if got[k] != want {
				t.Fatalf("%s delivered %d times, want %d", k, got[k], want)
			}
		}
	}
}

func TestScheduleSkipsUndeliverable(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, &Options{NoAutoCreateTopics: true})
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	prop := func(kv ...string) map[string]string {
		m := map[string]string{mq.PropertyDelayLevel: "1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	bad := []map[string]string{
		prop(), // no REAL_TOPIC
		prop(mq.PropertyRealTopic, "bad topic!", mq.PropertyRealQueueID, "0"), // invalid name
		prop(mq.PropertyRealTopic, "Nope", mq.PropertyRealQueueID, "0"),       // no such topic, no auto-creation
		prop(mq.PropertyRealTopic, "T", mq.PropertyRealQueueID, "x"),          // bad queue
		prop(mq.PropertyRealTopic, "T"),                                       // no queue
		prop(mq.PropertyRealTopic, mq.ScheduleTopic, mq.PropertyRealQueueID, "0"),
		prop(mq.PropertyRealTopic, mq.DefaultTopic, mq.PropertyRealQueueID, "0"),
	}
	var msgs []*store.Message
	for i, p := range bad {
		msgs = append(msgs, &store.Message{Topic: mq.ScheduleTopic, QueueID: 0, Properties: p, Body: []byte(fmt.Sprint("bad", i))})
	}
	msgs = append(msgs,
		&store.Message{Topic: mq.ScheduleTopic, QueueID: 0, Properties: prop(mq.PropertyRealTopic, "T", mq.PropertyRealQueueID, "1"), Body: []byte("good")},
		&store.Message{Topic: mq.ScheduleTopic, QueueID: 0, Properties: prop(mq.PropertyRealTopic, "T", mq.PropertyRealQueueID, "5"), Body: []byte("moved")})
	if err := b.st.Append(msgs); err != nil {
		t.Fatal(err)
	}
	schedWaitMax(t, b, mq.ScheduleTopic, 0, int64(len(msgs)))
	clk.Advance(time.Second)
	schedWaitMax(t, b, "T", 1, 2)
	if got := schedRead(t, b, "T", 1); string(got[0].Body) != "good" || string(got[1].Body) != "moved" {
		t.Fatalf("delivered %q, %q", got[0].Body, got[1].Body)
	}
	if b.st.MaxOffset("T", 0) != 0 || len(b.Topics()) != 1 {
		t.Fatalf("undeliverable messages went somewhere: topics %v", b.Topics())
	}
	// The level is not blocked.
	schedSend(t, b, "T", 0, 1, "after")
	clk.Advance(time.Second)
	schedWaitMax(t, b, "T", 0, 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Open(b.st.Dir(), &meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if p, err := m.DelayProgress(); err != nil || p[1] != int64(len(msgs))+1 {
		t.Fatalf("progress %v (%v), want level 1 at %d", p, err, len(msgs)+1)
	}
}

func TestScheduleArriveNeverBlocks(t *testing.T) {
	b, _ := schedBroker(t, "", schedT0, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			b.sched.arrive(store.Arrival{Topic: mq.ScheduleTopic})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("arrive blocked")
	}
}

func TestScheduleRetriesAfterReadError(t *testing.T) {
	b, clk := schedBroker(t, "", schedT0, nil)
	schedSend(t, b, "E", 0, 1, "x")
	schedWaitMax(t, b, mq.ScheduleTopic, 0, 1)
	schedWaitIdle(t, b, schedT0.Add(time.Second))
	b.st.Close() // every read fails from now on
	clk.Advance(time.Second)
	// The failed round sleeps a while before it tries again instead of spinning.
	schedWaitIdle(t, b, schedT0.Add(time.Second+scheduleRetryDelay))
	clk.Advance(scheduleRetryDelay)
	schedWaitIdle(t, b, schedT0.Add(time.Second+2*scheduleRetryDelay))
}
