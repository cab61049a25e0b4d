package producer_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/producer"
	"github.com/edgemq/edgemq/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openBroker opens an in-process broker with topic T of 4 queues; t.Cleanup closes it.
func openBroker(t *testing.T) *edge.Broker {
	t.Helper()
	b, err := edge.Open(t.TempDir(), &edge.Options{
		Store:          &store.Options{SegmentSize: 4 << 20, MaxMessageSize: 64 << 10, QueueSegmentEntries: 1024, MetaNoSync: true},
		MaxMessageSize: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	return b
}

func newProducer(t *testing.T, b producer.Broker, o *producer.Options) *producer.Producer {
	t.Helper()
	p, err := producer.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var uniqIDPattern = regexp.MustCompile(`^[0-9A-F]{32}$`)

// TestUniqID: ids are 32 upper-case hex digits, share the host and process prefix, and
// differ.
func TestUniqID(t *testing.T) {
	p := newProducer(t, openBroker(t), nil)
	seen := map[string]bool{}
	first := p.NewUniqID()
	for range 10000 {
		id := p.NewUniqID()
		if !uniqIDPattern.MatchString(id) || id[:20] != first[:20] || seen[id] {
			t.Fatalf("id %q (first %q): not 32 hex digits, another prefix, or seen before", id, first)
		}
		seen[id] = true
	}
}

// TestProducerInProcess: the producer over the in-process broker: sync round robin,
// sharding key, async, oneway, batch; m is not changed; the message id is the UNIQ_KEY.
func TestProducerInProcess(t *testing.T) {
	b := openBroker(t)
	p := newProducer(t, b, nil)
	ctx := t.Context()
	var queues []int32
	for i := range 8 {
		m := &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "m%d", i)}
		res, err := p.Send(ctx, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Properties != nil {
			t.Fatalf("Send changed the message: %v", m.Properties)
		}
		if !uniqIDPattern.MatchString(res.UniqID) || res.MsgID() != res.UniqID {
			t.Fatalf("result ids %q / %q", res.UniqID, res.MsgID())
		}
		queues = append(queues, res.Queue.QueueID)
	}
	if !slices.Equal(queues, []int32{0, 1, 2, 3, 0, 1, 2, 3}) {
		t.Fatalf("round robin: %v", queues)
	}
	want := int32(-1)
	for range 5 {
		res, err := p.Send(ctx, &mq.Message{Topic: "T", Body: []byte("k")}, mq.ShardingKey("order-9"))
		if err != nil {
			t.Fatal(err)
		}
		if want >= 0 && res.Queue.QueueID != want {
			t.Fatalf("sharding key: queue %d, then %d", want, res.Queue.QueueID)
		}
		want = res.Queue.QueueID
	}
	done := make(chan error, 1)
	if err := p.SendAsync(ctx, &mq.Message{Topic: "T", Body: []byte("a")}, nil, func(_ mq.SendResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("async: %v", err)
	}
	q2 := mq.MessageQueue{Topic: "T", BrokerName: "edgemq", QueueID: 2}
	before, _ := b.MaxOffset(ctx, q2)
	if err := p.SendOneway(ctx, &mq.Message{Topic: "T", Body: []byte("o")}, mq.QueueIndex(2)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := b.MaxOffset(ctx, q2); n != before+1; n, _ = b.MaxOffset(ctx, q2) {
		if time.Now().After(deadline) {
			t.Fatal("oneway message not stored")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rs, err := p.SendBatch(ctx, []*mq.Message{{Topic: "T", Body: []byte("b0")}, {Topic: "T", Body: []byte("b1")}}, nil)
	if err != nil || len(rs) != 2 || rs[1].QueueOffset != rs[0].QueueOffset+1 || rs[0].UniqID == rs[1].UniqID {
		t.Fatalf("SendBatch = %+v, %v", rs, err)
	}
	if _, err := p.Send(ctx, &mq.Message{Topic: "T", Body: make([]byte, 5<<20)}, nil); !errors.Is(err, mq.ErrMessageTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	p.Close()
	if _, err := p.Send(ctx, &mq.Message{Topic: "T"}, nil); !errors.Is(err, producer.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// twoBrokers shows one in-process broker as two, "edgemq" and "edgemq-b", each with the
// topic's queues, and fails every send to "edgemq": what a producer sees of a cluster with
// one broker down.
type twoBrokers struct {
	*edge.Broker
	mu    sync.Mutex
	tried []string // the broker of each send
}

func (tw *twoBrokers) Route(ctx context.Context, topic string) (mq.TopicRoute, error) {
	r, err := tw.Broker.Route(ctx, topic)
	if err != nil {
		return r, err
	}
	b := r.Brokers[0]
	b.Name = "edgemq-b"
	q := r.Queues[0]
	q.BrokerName = "edgemq-b"
	r.Brokers = append(r.Brokers, b)
	r.Queues = append(r.Queues, q)
	return r, nil
}

// queue returns the broker and the real selector of the index sel picks.
func (tw *twoBrokers) queue(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (string, mq.QueueSelector, error) {
	r, err := tw.Route(ctx, m.Topic)
	if err != nil {
		return "", nil, err
	}
	qs := r.WriteQueues()
	i := sel(len(qs), m)
	tw.mu.Lock()
	tw.tried = append(tw.tried, qs[i].BrokerName)
	tw.mu.Unlock()
	if qs[i].BrokerName == "edgemq" {
		return "edgemq", nil, fmt.Errorf("%w: broker edgemq is down", mq.ErrUnavailable)
	}
	return qs[i].BrokerName, mq.QueueIndex(int(qs[i].QueueID)), nil
}

func (tw *twoBrokers) Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error) {
	_, real, err := tw.queue(ctx, m, sel)
	if err != nil {
		return mq.SendResult{}, err
	}
	return tw.Broker.Send(ctx, m, real)
}

func (tw *twoBrokers) SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error {
	_, real, err := tw.queue(ctx, m, sel)
	if err != nil {
		go done(mq.SendResult{}, err) // as a network client: the failure comes in done
		return nil
	}
	return tw.Broker.SendAsync(ctx, m, real, done)
}

func (tw *twoBrokers) triedBrokers() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return slices.Clone(tw.tried)
}

// TestProducerRetriesOnAnotherBroker: a send that fails on one broker is retried on the
// other's queue, sync and async; with retries off it fails.
func TestProducerRetriesOnAnotherBroker(t *testing.T) {
	tw := &twoBrokers{Broker: openBroker(t)}
	p := newProducer(t, tw, nil)
	ctx := t.Context()
	for i := range 4 {
		tw.tried = nil
		if _, err := p.Send(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "m%d", i)}, nil); err != nil {
			t.Fatalf("send %d: %v (tried %v)", i, err, tw.triedBrokers())
		}
		if tried := tw.triedBrokers(); len(tried) > 2 || tried[len(tried)-1] != "edgemq-b" {
			t.Fatalf("send %d tried %v; want at most one failure, then edgemq-b", i, tried)
		}
	}
	ap := newProducer(t, tw, nil) // its round robin starts on edgemq
	for i := range 4 {
		tw.mu.Lock()
		tw.tried = nil
		tw.mu.Unlock()
		done := make(chan error, 1)
		if err := ap.SendAsync(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "a%d", i)}, nil, func(_ mq.SendResult, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("async send %d: %v", i, err)
		}
		if tried := tw.triedBrokers(); i == 0 && !slices.Equal(tried, []string{"edgemq", "edgemq-b"}) {
			t.Fatalf("async send %d tried %v; want edgemq, then edgemq-b", i, tried)
		}
	}
	noRetry := newProducer(t, tw, &producer.Options{RetryTimes: -1})
	failed := 0
	for i := range 8 {
		if _, err := noRetry.Send(ctx, &mq.Message{Topic: "T", Body: fmt.Appendf(nil, "n%d", i)}, nil); err != nil {
			if !errors.Is(err, mq.ErrUnavailable) {
				t.Fatalf("send without retries: %v", err)
			}
			failed++
		}
	}
	if failed != 4 {
		t.Fatalf("without retries %d of 8 round-robin sends failed, want the 4 to edgemq", failed)
	}
}

// inlineBroker answers every send at once, from inside the call, as a broker with async
// flush does; it routes topic T to 4 queues.
type inlineBroker struct{ producer.Broker }

func (inlineBroker) AppendWriteQueues(_ context.Context, dst []mq.MessageQueue, topic string) ([]mq.MessageQueue, error) {
	for i := range 4 {
		dst = append(dst, mq.MessageQueue{Topic: topic, BrokerName: "b", QueueID: int32(i)})
	}
	return dst, nil
}

func (inlineBroker) SendAsyncUniq(_ context.Context, m *mq.Message, sel mq.QueueSelector, uniq string, done func(mq.SendResult, error)) error {
	done(mq.SendResult{Queue: mq.MessageQueue{Topic: m.Topic, QueueID: int32(sel(4, m))}, UniqID: uniq}, nil)
	return nil
}

// TestSendAsyncAllocs: an async send's own state is reused between sends: what one
// allocates is its unique id.
func TestSendAsyncAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: sync.Pool drops items at random")
	}
	p := newProducer(t, inlineBroker{}, nil)
	ctx := context.Background()
	m := &mq.Message{Topic: "T", Body: []byte("x")}
	var got mq.SendResult
	done := func(r mq.SendResult, err error) {
		if err != nil {
			t.Error(err)
		}
		got = r
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.SendAsync(ctx, m, nil, done); err != nil {
			t.Fatal(err)
		}
	})
	if !uniqIDPattern.MatchString(got.UniqID) {
		t.Errorf("result's unique id %q", got.UniqID)
	}
	if allocs > 1 {
		t.Errorf("SendAsync allocates %v times, want 1 (its unique id)", allocs)
	}
}
