package edge

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// sendEncoded stores a message through SendEncodedAsyncFrom and waits for its result.
func sendEncoded(t testing.TB, b *Broker, topic string, flag int32, body []byte, props string, queueID int32, o Origin) (mq.SendResult, error) {
	t.Helper()
	type out struct {
		res mq.SendResult
		err error
	}
	ch := make(chan out, 1)
	if err := b.SendEncodedAsyncFrom(context.Background(), topic, flag, body, props, queueID, o, func(r mq.SendResult, err error) { ch <- out{r, err} }); err != nil {
		return mq.SendResult{}, err
	}
	r := <-ch
	return r.res, r.err
}

// sendAsyncRef stores m through SendAsyncFrom and waits for its result.
func sendAsyncRef(t testing.TB, b *Broker, m *mq.Message, sel mq.QueueSelector, o Origin) (mq.SendResult, error) {
	t.Helper()
	type out struct {
		res mq.SendResult
		err error
	}
	ch := make(chan out, 1)
	if err := b.SendAsyncFrom(context.Background(), m, sel, o, func(r mq.SendResult, err error) { ch <- out{r, err} }); err != nil {
		return mq.SendResult{}, err
	}
	r := <-ch
	return r.res, r.err
}

// TestSendEncodedStoresAsSendAsync: a message sent in parts, its properties as they travel,
// is stored as SendAsyncFrom stores the message they make, with the same origin: flag, body
// (compressed over CompressOver alike), tags, keys and every property, born time and host,
// reconsume count; the results are the same, UNIQ_KEY included. With a delay level, or a
// transaction's mark, or to a retry topic (the message path), too. In both flush modes:
// acknowledged at once, and after the fsync. Both brokers read one fixed clock (a record's
// size depends on its store time, and so do the commit log offsets).
func TestSendEncodedStoresAsSendAsync(t *testing.T) {
	for _, flush := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
		t.Run(fmt.Sprint(flush), func(t *testing.T) {
			// A day ahead: the delayed messages stay in the schedule topic while the test
			// runs, whatever clock the schedule reads.
			now := time.Now().Add(24 * time.Hour).Truncate(time.Millisecond)
			opts := func() *Options {
				return &Options{CompressOver: 200, Now: func() time.Time { return now },
					Store: &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true, Flush: flush}}
			}
			enc, ref := openBroker(t, opts()), openBroker(t, opts())
			o := Origin{BornTime: 1_764_633_600_123, BornHost: netip.MustParseAddrPort("192.0.2.7:40123"), ReconsumeTimes: 2}
			for i := range 70 {
				var m *mq.Message
				switch i % 7 {
				case 5: // the message path: a delay level
					m = &mq.Message{Topic: "T", Flag: int32(i), Body: []byte("later"),
						Properties: map[string]string{mq.PropertyDelayLevel: "3", mq.PropertyUniqKey: fmt.Sprint(i)}}
				case 6: // the message path: a retry topic
					m = &mq.Message{Topic: mq.RetryTopic("g"), Flag: int32(i), Body: []byte("again"),
						Properties: map[string]string{mq.PropertyReconsumeTime: "1", mq.PropertyUniqKey: fmt.Sprint(i)}}
				default:
					m = variedMessage(i, i%7)
				}
				props := string(wireProps(m, i%2 == 1))
				if i%7 == 4 { // a malformed entry and a name given twice, which readers treat alike
					props += "broken\x02WAIT\x01false\x02"
					m.Properties["WAIT"] = "false"
				}
				q := int32(i % 5)
				if mq.IsRetryTopic(m.Topic) {
					q = 0 // its one queue
				}
				var sel mq.QueueSelector
				if q == 4 {
					q = -1 // round robin, as the reference's
				} else {
					sel = mq.QueueIndex(int(q))
				}
				got, err := sendEncoded(t, enc, m.Topic, m.Flag, m.Body, props, q, o)
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				want, err := sendAsyncRef(t, ref, m, sel, o)
				if err != nil {
					t.Fatalf("message %d, the reference: %v", i, err)
				}
				if got != want {
					t.Fatalf("message %d: result\n%+v\nwant\n%+v", i, got, want)
				}
			}
			for topic, queues := range map[string]int32{"T": 4, mq.ScheduleTopic: 3, mq.RetryTopic("g"): 1} {
				for q := range queues {
					queue := mq.MessageQueue{Topic: topic, QueueID: q}
					got, want := storedViews(t, enc, queue), storedViews(t, ref, queue)
					if len(got) != len(want) {
						t.Fatalf("%s queue %d: %d records, want %d", topic, q, len(got), len(want))
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s queue %d record %d:\ngot  %s\nwant %s", topic, q, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestSendEncodedHalfMessage: a transaction's half message goes the message path: it waits
// in the half topic, answered as in its real topic's queue.
func TestSendEncodedHalfMessage(t *testing.T) {
	b := openBroker(t, nil)
	res, err := sendEncoded(t, b, "T", 0, []byte("half"), "TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01U1\x02", 2, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue.Topic != "T" || res.Queue.QueueID != 2 || res.UniqID != "U1" {
		t.Fatalf("result %+v: want queue 2 of T, id U1", res)
	}
	if n := len(storedViews(t, b, mq.MessageQueue{Topic: "T", QueueID: 2})); n != 0 {
		t.Fatalf("a half message delivered to its topic: %d records", n)
	}
	if n := len(storedViews(t, b, mq.MessageQueue{Topic: mq.TransHalfTopic, QueueID: 0})); n != 1 {
		t.Fatalf("half topic holds %d records, want 1", n)
	}
}

// TestSendEncodedRefused: what SendAsyncFrom refuses is refused, nothing stored and no
// topic made, and done is never called.
func TestSendEncodedRefused(t *testing.T) {
	b := openBroker(t, nil)
	if err := b.CreateTopic(TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	never := func(mq.SendResult, error) { t.Error("done called for a refused send") }
	big := make([]byte, b.opts.MaxMessageSize+1)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		topic   string
		body    []byte
		props   string
		queueID int32
		o       Origin
		done    func(mq.SendResult, error)
		want    error
	}{
		{"body over the limit", ctx, "New", big, "", -1, Origin{}, never, mq.ErrMessageTooLarge},
		{"negative born time", ctx, "New", nil, "", -1, Origin{BornTime: -1}, never, mq.ErrInvalidArgument},
		{"negative reconsume count", ctx, "New", nil, "", -1, Origin{ReconsumeTimes: -1}, never, mq.ErrInvalidArgument},
		{"no done function", ctx, "New", nil, "", -1, Origin{}, nil, mq.ErrInvalidArgument},
		{"bad topic name", ctx, "bad/name", nil, "", -1, Origin{}, never, mq.ErrInvalidTopic},
		{"reserved topic", ctx, mq.ScheduleTopic, nil, "", -1, Origin{}, never, mq.ErrInvalidTopic},
		{"queue out of range", ctx, "T", nil, "", 4, Origin{}, never, mq.ErrInvalidQueue},
		{"bad delay level", ctx, "New", nil, "DELAY\x01soon\x02", -1, Origin{}, never, mq.ErrInvalidArgument},
		{"ended ctx", cancelled, "New", nil, "", -1, Origin{}, never, context.Canceled},
		{"nil ctx", nil, "New", nil, "", -1, Origin{}, never, mq.ErrInvalidArgument},
	} {
		err := b.SendEncodedAsyncFrom(tc.ctx, tc.topic, 0, tc.body, tc.props, tc.queueID, tc.o, tc.done)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range b.Topics() {
		if tc.Name == "New" || strings.Contains(tc.Name, "bad") {
			t.Fatalf("topic %q made by a refused send", tc.Name)
		}
	}
	if n := len(storedViews(t, b, mq.MessageQueue{Topic: "T", QueueID: 0})); n != 0 {
		t.Fatalf("%d records stored by refused sends", n)
	}
}

// TestSendEncodedAllocs pins the allocations of a send in parts (async flush, a chosen
// queue, properties with tags and a UNIQ_KEY) to none: no message, map or selector is made,
// and the encoded properties go into a pooled buffer.
func TestSendEncodedAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := openBroker(t, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, SegmentSize: 16 << 20}})
	ctx := context.Background()
	body := make([]byte, 100)
	props := "TAGS\x01t\x02UNIQ_KEY\x01C0A80001000000000000000000000001\x02WAIT\x01true\x02"
	var res mq.SendResult
	done := func(r mq.SendResult, err error) {
		if err != nil {
			t.Fatal(err)
		}
		res = r
	}
	send := func() {
		if err := b.SendEncodedAsyncFrom(ctx, "Allocs", 0, body, props, 1, Origin{}, done); err != nil {
			t.Fatal(err)
		}
	}
	send() // creates the topic and its queues
	if n := testing.AllocsPerRun(2000, send); n > 0.1 {
		t.Errorf("SendEncodedAsyncFrom: %.2f allocations per call, want 0", n)
	}
	if res.Queue.QueueID != 1 || res.UniqID != "C0A80001000000000000000000000001" {
		t.Errorf("result %+v", res)
	}
}
