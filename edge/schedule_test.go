package edge

import (
	"bytes"
	"context"
	"fmt"
	"github.com/edgemq/edgemq/edge/mq"
	"maps"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/meta"
)

// The scheduler's tests run in synctest bubbles: time moves only by the test's time.Sleep,
// once every goroutine of the test is blocked, so delays of hours take no time and a
// delivery due at d happens at d exactly.

// schedBroker opens a broker in dir (a new temp dir when ""). Call it in a bubble.
func schedBroker(t *testing.T, dir string, o *Options) *Broker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	return openBrokerAt(t, dir, o)
}

// schedHas checks, once the bubble is idle, that (topic, queue) holds n messages.
func schedHas(t testing.TB, b *Broker, topic string, queue int32, n int64) {
	t.Helper()
	synctest.Wait()
	if got := b.st.MaxOffset(topic, queue); got != n {
		t.Fatalf("at %v: %s/%d holds %d messages, want %d", time.Since(bubbleStart), topic, queue, got, n)
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
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		born := netip.MustParseAddrPort("10.1.2.3:4567")
		// Stored as the send path stores it, with what only a remote producer or a send-back
		// sets (born time and host, reconsume times).
		m := &store.Message{Topic: "T", QueueID: 1, Tags: "tg", Keys: "k1 k2", Flag: 7, BornTime: bubbleStart.UnixMilli() - 1234, BornHost: born,
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
		schedHas(t, b, mq.ScheduleTopic, 2, 1)
		schedHas(t, b, "T", 1, 0)
		time.Sleep(10*time.Second - time.Millisecond)
		schedHas(t, b, "T", 1, 0)
		time.Sleep(time.Millisecond)
		schedHas(t, b, "T", 1, 1)

		got := schedRead(t, b, "T", 1)[0]
		want := map[string]string{"a": "b", mq.PropertyUniqKey: "U1"}
		if !maps.Equal(got.Properties, want) {
			t.Fatalf("properties %v, want %v", got.Properties, want)
		}
		if string(got.Body) != "hello" || got.Tags != "tg" || got.Keys != "k1 k2" || got.Flag != 7 || got.SysFlag != 0 ||
			got.BornTime != bornTime || got.BornHost != born || got.ReconsumeTimes != 2 || got.QueueID != 1 || got.QueueOffset != 0 {
			t.Fatalf("delivered %+v", got)
		}
		if due := bubbleStart.Add(10 * time.Second); got.StoreTime != due.UnixMilli() {
			t.Fatalf("delivered at %v, want %v", time.UnixMilli(got.StoreTime).UTC(), due)
		}
	})
}

func TestDelayedCompressedMessageStaysCompressed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", &Options{CompressOver: 100})
		body := bytes.Repeat([]byte("compress me "), 100)
		m := &mq.Message{Topic: "Z", Body: body}
		m.SetDelayLevel(1)
		if _, err := b.Send(context.Background(), m, mq.QueueIndex(0)); err != nil {
			t.Fatal(err)
		}
		schedHas(t, b, mq.ScheduleTopic, 0, 1)
		time.Sleep(time.Second)
		schedHas(t, b, "Z", 0, 1)
		got := schedRead(t, b, "Z", 0)[0]
		if got.SysFlag&mq.SysFlagCompressed == 0 || len(got.Body) >= len(body) {
			t.Fatalf("delivered sysflag %#x, %d body bytes: not compressed", got.SysFlag, len(got.Body))
		}
		if err := b.decompress(&got); err != nil || !bytes.Equal(got.Body, body) {
			t.Fatalf("decompressed body differs (%v)", err)
		}
	})
}

func TestDelayedMessagesDeliveredInDueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		b := schedBroker(t, dir, nil)
		// Each level's messages come at their own times, whatever the level order.
		send := func(topic string, round int64) {
			schedSend(t, b, topic, 0, 4, "A") // due at 30 s
			schedHas(t, b, mq.ScheduleTopic, 3, round)
			time.Sleep(26 * time.Second)
			schedSend(t, b, topic, 0, 1, "B") // 27 s
			schedSend(t, b, topic, 0, 2, "C") // 31 s
			schedSend(t, b, topic, 0, 3, "D") // 36 s
			schedHas(t, b, topic, 0, 0)
		}
		start := time.Now()
		send("O", 1)
		var order string
		for _, at := range []time.Duration{27, 30, 31, 36} {
			time.Sleep(start.Add(at * time.Second).Sub(time.Now()))
			schedHas(t, b, "O", 0, int64(len(order)+1))
			m := schedRead(t, b, "O", 0)[len(order)]
			if m.StoreTime != start.Add(at*time.Second).UnixMilli() {
				t.Fatalf("%s delivered at %v, want %v", m.Body, time.UnixMilli(m.StoreTime).Sub(start), at*time.Second)
			}
			order += string(m.Body)
		}
		if order != "BACD" {
			t.Fatalf("delivered in order %s, want BACD", order)
		}

		// All four fall due while the broker is down: the first round after the restart
		// delivers them in due order, not level order.
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b = schedBroker(t, dir, nil)
		for q := int32(0); q < 4; q++ {
			schedHas(t, b, mq.ScheduleTopic, q, 1) // the first run's, delivered
		}
		send("P", 2)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		b = schedBroker(t, dir, nil)
		schedHas(t, b, "P", 0, 4)
		order = ""
		for _, m := range schedRead(t, b, "P", 0) {
			order += string(m.Body)
		}
		if order != "BACD" {
			t.Fatalf("delivered in order %s after the restart, want BACD", order)
		}
	})
}

// TestDelayedManyBatches delivers more due messages than one round reads, across levels,
// still in due order.
func TestDelayedManyBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		const n = 3*scheduleBatch + 5
		for i := 0; i < n; i++ {
			schedSend(t, b, "M", 0, 4, fmt.Sprintf("a%03d", i)) // due at 30 s
		}
		time.Sleep(time.Second)
		for i := 0; i < n; i++ {
			schedSend(t, b, "M", 0, 3, fmt.Sprintf("b%03d", i)) // due at 11 s
		}
		schedHas(t, b, mq.ScheduleTopic, 2, n)
		schedHas(t, b, mq.ScheduleTopic, 3, n)
		time.Sleep(time.Minute)
		schedHas(t, b, "M", 0, 2*n)
		for i, m := range schedRead(t, b, "M", 0) {
			want := fmt.Sprintf("b%03d", i)
			if i >= n {
				want = fmt.Sprintf("a%03d", i-n)
			}
			if string(m.Body) != want {
				t.Fatalf("message %d is %s, want %s", i, m.Body, want)
			}
		}
	})
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
// returns the data dir. Call it in a bubble.
func schedRestartSetup(t *testing.T) string {
	dir := t.TempDir()
	b := schedBroker(t, dir, &Options{OffsetPersistInterval: time.Hour})
	for i := 0; i < 10; i++ {
		for _, l := range []int{1, 3, 5} {
			schedSend(t, b, "R", 0, l, fmt.Sprintf("l%d-%d", l, i))
		}
	}
	for _, q := range []int32{0, 2, 4} {
		schedHas(t, b, mq.ScheduleTopic, q, 10)
	}
	time.Sleep(2 * time.Second)
	schedHas(t, b, "R", 0, 10)
	time.Sleep(9 * time.Second)
	schedHas(t, b, "R", 0, 20)
	if p, err := b.meta.DelayProgress(); err != nil || len(p) != 0 {
		t.Fatalf("progress %v (%v) persisted before the interval", p, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestScheduleProgressPersistedEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil) // every 5 s, counted from the open
		persisted := func() bool {
			synctest.Wait()
			p, err := b.meta.DelayProgress()
			if err != nil {
				t.Fatal(err)
			}
			return p[1] == 1
		}
		schedSend(t, b, "I", 0, 1, "x")
		schedHas(t, b, mq.ScheduleTopic, 0, 1)
		time.Sleep(time.Second)
		schedHas(t, b, "I", 0, 1)
		time.Sleep(4*time.Second - time.Millisecond)
		if persisted() {
			t.Fatal("progress persisted before the interval")
		}
		time.Sleep(time.Millisecond)
		if !persisted() {
			t.Fatal("progress not persisted at the interval")
		}
	})
}

func TestScheduleRestartDeliversRestExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := schedRestartSetup(t)
		m, err := meta.Open(dir, &meta.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.DelayProgress()
		m.Close()
		if err != nil || p[1] != 10 || p[3] != 10 || p[5] != 0 {
			t.Fatalf("progress after Close %v (%v), want levels 1 and 3 at 10", p, err)
		}

		b := schedBroker(t, dir, nil)
		schedHas(t, b, "R", 0, 20) // a round ran: nothing delivered again
		time.Sleep(time.Minute)
		schedHas(t, b, "R", 0, 30)
		got := schedBodies(t, b, "R", 0)
		for i := 0; i < 10; i++ {
			for _, l := range []int{1, 3, 5} {
				if k := fmt.Sprintf("l%d-%d", l, i); got[k] != 1 {
					t.Fatalf("%s delivered %d times, want once", k, got[k])
				}
			}
		}
	})
}

// TestScheduleRestartAfterLostProgress reopens as after a crash that lost the last progress
// writes: the deliveries they covered come again, nothing is lost.
func TestScheduleRestartAfterLostProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := schedRestartSetup(t)
		m, err := meta.Open(dir, &meta.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		err = m.SetDelayProgress(map[int32]int64{1: 0, 3: 6}) // as persisted before the crash
		m.Close()
		if err != nil {
			t.Fatal(err)
		}

		b := schedBroker(t, dir, nil)
		schedHas(t, b, "R", 0, 34) // 10 + 4 again
		time.Sleep(time.Minute)
		schedHas(t, b, "R", 0, 44)
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
	})
}

func TestScheduleSkipsUndeliverable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", &Options{NoAutoCreateTopics: true})
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
		schedHas(t, b, mq.ScheduleTopic, 0, int64(len(msgs)))
		time.Sleep(time.Second)
		schedHas(t, b, "T", 1, 2)
		if got := schedRead(t, b, "T", 1); string(got[0].Body) != "good" || string(got[1].Body) != "moved" {
			t.Fatalf("delivered %q, %q", got[0].Body, got[1].Body)
		}
		if b.st.MaxOffset("T", 0) != 0 || len(b.Topics()) != 1 {
			t.Fatalf("undeliverable messages went somewhere: topics %v", b.Topics())
		}
		// The level is not blocked.
		schedSend(t, b, "T", 0, 1, "after")
		time.Sleep(time.Second)
		schedHas(t, b, "T", 0, 1)
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
	})
}

func TestScheduleArriveNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := schedBroker(t, "", nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 1000; i++ {
				b.sched.arrive(store.Arrival{Topic: mq.ScheduleTopic})
			}
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("arrive blocked")
		}
	})
}

// TestScheduleRetriesAfterReadError: a round that cannot read the schedule topic logs, and
// the scheduler tries again after scheduleRetryDelay, not at once.
func TestScheduleRetriesAfterReadError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lg := newLogCounter(t)
		b := schedBroker(t, "", &Options{Logger: lg.logger()})
		const msg = "read delayed messages: retrying"
		schedSend(t, b, "E", 0, 1, "x")
		schedHas(t, b, mq.ScheduleTopic, 0, 1)
		b.st.Close() // every read fails from now on
		time.Sleep(time.Second)
		synctest.Wait()
		n := lg.count(msg)
		if n == 0 {
			t.Fatalf("no %q logged after a failed round", msg)
		}
		time.Sleep(scheduleRetryDelay - time.Millisecond)
		synctest.Wait()
		if got := lg.count(msg); got != n {
			t.Fatalf("%d %q logged %v after the failed round, want %d: no round before the retry delay", got, msg, scheduleRetryDelay-time.Millisecond, n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := lg.count(msg); got != 2*n {
			t.Fatalf("%d %q logged after the retry delay, want %d: one round more", got, msg, 2*n)
		}
	})
}
