package edge

import (
	"context"
	"errors"
	"github.com/edgemq/edgemq/edge/mq"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestSendStoresAndReportsWhere(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	m := &mq.Message{Topic: "Telemetry", Tags: "temp", Keys: "dev1", Body: []byte("21.5")}
	res, err := b.Send(ctx, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.QueueOffset != 0 || res.Queue.Topic != "Telemetry" || res.Queue.BrokerName != "edgemq" || len(res.MsgID()) != 32 {
		t.Fatalf("result %+v", res)
	}
	host, pos, err := mq.ParseOffsetMsgID(res.MsgID())
	if err != nil || pos != res.CommitLogOffset || host != b.opts.StoreHost {
		t.Fatalf("message id %s: %v %d %v", res.MsgID(), host, pos, err)
	}
	cfg, err := b.Topic("Telemetry")
	if err != nil || cfg.ReadQueues != 4 || cfg.WriteQueues != 4 || cfg.Perm != mq.PermReadWrite {
		t.Fatalf("auto-created topic %+v %v", cfg, err)
	}
	// Round robin over the four queues.
	seen := map[int32]bool{}
	for i := 0; i < 4; i++ {
		r, err := b.Send(ctx, &mq.Message{Topic: "Telemetry", Body: []byte("x")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Queue.QueueID] = true
	}
	if len(seen) != 4 {
		t.Fatalf("round robin used queues %v", seen)
	}
	// A sharding key always lands on one queue.
	q := int32(-1)
	for i := 0; i < 10; i++ {
		r, err := b.Send(ctx, &mq.Message{Topic: "Orders", Body: []byte("o")}, mq.ShardingKey("order-42"))
		if err != nil {
			t.Fatal(err)
		}
		if q >= 0 && r.Queue.QueueID != q {
			t.Fatalf("sharding key moved from queue %d to %d", q, r.Queue.QueueID)
		}
		q = r.Queue.QueueID
	}
	if got := b.TopicStats("Telemetry"); got.MessagesIn != 5 || got.BytesIn != 8 {
		t.Fatalf("stats %+v", got)
	}
}

func TestSendBatchLandsOnOneQueueInOrder(t *testing.T) {
	b := openBroker(t, nil)
	var batch []*mq.Message
	for i := 0; i < 10; i++ {
		batch = append(batch, &mq.Message{Topic: "B", Body: []byte{byte(i)}})
	}
	res, err := b.SendBatch(context.Background(), batch, mq.QueueIndex(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Queue.QueueID != 2 || r.QueueOffset != int64(i) {
			t.Fatalf("message %d: %+v", i, r)
		}
	}
}

func TestSendBadInputChangesNothing(t *testing.T) {
	b := openBroker(t, &Options{NoAutoCreateTopics: true, MaxMessageSize: 1000})
	ctx := context.Background()
	if err := b.CreateTopic(TopicConfig{Name: "T", WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *mq.Message
		sel  mq.QueueSelector
		want error
	}{
		{"empty topic", &mq.Message{Topic: ""}, nil, mq.ErrInvalidTopic},
		{"bad character", &mq.Message{Topic: "a b"}, nil, mq.ErrInvalidTopic},
		{"too long", &mq.Message{Topic: strings.Repeat("t", 128)}, nil, mq.ErrInvalidTopic},
		{"DLQ topic", &mq.Message{Topic: "%DLQ%g"}, nil, mq.ErrInvalidTopic},
		{"bare retry prefix", &mq.Message{Topic: "%RETRY%"}, nil, mq.ErrInvalidTopic},
		{"schedule topic", &mq.Message{Topic: mq.ScheduleTopic}, nil, mq.ErrInvalidTopic},
		{"unknown topic", &mq.Message{Topic: "Nope"}, nil, mq.ErrTopicNotExist},
		{"queue out of range", &mq.Message{Topic: "T"}, mq.QueueIndex(2), mq.ErrInvalidQueue},
		{"negative queue", &mq.Message{Topic: "T"}, mq.QueueIndex(-1), mq.ErrInvalidQueue},
		{"nil message", nil, nil, mq.ErrInvalidArgument},
		{"too large", &mq.Message{Topic: "T", Body: make([]byte, 1001)}, nil, mq.ErrMessageTooLarge},
		{"bad delay", &mq.Message{Topic: "T", Properties: map[string]string{mq.PropertyDelayLevel: "x"}}, nil, mq.ErrInvalidArgument},
		// The store refuses it (properties beyond its slack) after the queue is chosen.
		{"huge properties", &mq.Message{Topic: "T", Properties: map[string]string{"p": strings.Repeat("x", 70<<10)}}, mq.QueueIndex(1), mq.ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Send(ctx, tc.m, tc.sel); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err := b.SendAsync(ctx, tc.m, tc.sel, func(mq.SendResult, error) { t.Error("done called") }); !errors.Is(err, tc.want) {
				t.Fatalf("SendAsync: got %v, want %v", err, tc.want)
			}
		})
	}
	if n := b.st.Log().Written(); n != 64 {
		t.Fatalf("log grew to %d after rejected sends", n)
	}
	if _, err := b.Topic("Nope"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("rejected send created a topic: %v", err)
	}
	if err := b.CreateTopic(TopicConfig{Name: "T"}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("create existing: %v", err)
	}
	if err := b.UpdateTopic(TopicConfig{Name: "T", Perm: mq.PermRead}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, &mq.Message{Topic: "T"}, nil); !errors.Is(err, mq.ErrNoPermission) {
		t.Fatalf("send to read-only topic: %v", err)
	}
}

func TestSendToRetryTopic(t *testing.T) {
	b := openBroker(t, &Options{NoAutoCreateTopics: true})
	res, err := b.Send(context.Background(), &mq.Message{Topic: mq.RetryTopic("g"), Body: []byte("again")}, nil)
	if err != nil || res.Queue.QueueID != 0 {
		t.Fatalf("send to retry topic: %+v %v", res, err)
	}
	if cfg, err := b.Topic(mq.RetryTopic("g")); err != nil || cfg.WriteQueues != 1 {
		t.Fatalf("retry topic %+v %v", cfg, err)
	}
}

func TestTopicsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	b := openBrokerAt(t, dir, nil)
	if err := b.CreateTopic(TopicConfig{Name: "Kept", ReadQueues: 3, WriteQueues: 2, Order: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(TopicConfig{Name: "Gone"}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic("Gone"); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitOffset(context.Background(), "g", mq.MessageQueue{Topic: "Kept", QueueID: 1}, 7); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openBrokerAt(t, dir, nil)
	cfg, err := b.Topic("Kept")
	if err != nil || cfg.ReadQueues != 3 || cfg.WriteQueues != 2 || !cfg.Order {
		t.Fatalf("after reopen: %+v %v", cfg, err)
	}
	if _, err := b.Topic("Gone"); err == nil {
		t.Fatal("deleted topic came back")
	}
	if off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "Kept", QueueID: 1}); err != nil || off != 7 {
		t.Fatalf("offset after reopen: %d %v", off, err)
	}
}

func TestCompressedBodyComesBackWhole(t *testing.T) {
	b := openBroker(t, &Options{CompressOver: 100})
	body := []byte(strings.Repeat("temperature=21.5;", 100))
	res, err := b.Send(context.Background(), &mq.Message{Topic: "Z", Body: body}, mq.QueueIndex(0))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := b.st.ReadMessage(res.CommitLogOffset)
	if err != nil {
		t.Fatal(err)
	}
	if stored.SysFlag&mq.SysFlagCompressed == 0 || len(stored.Body) >= len(body) {
		t.Fatalf("stored body not compressed: %d bytes, sysflag %x", len(stored.Body), stored.SysFlag)
	}
	if err := b.decompress(stored); err != nil || string(stored.Body) != string(body) || stored.SysFlag != 0 {
		t.Fatalf("decompressed: %v, %d bytes, sysflag %x", err, len(stored.Body), stored.SysFlag)
	}
}

func TestClosedBroker(t *testing.T) {
	b := openBroker(t, nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(context.Background(), &mq.Message{Topic: "T"}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestQueueOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, nil)
		start := time.Now()
		for i := 0; i < 5; i++ {
			if _, err := b.Send(context.Background(), &mq.Message{Topic: "O", Body: []byte("x")}, mq.QueueIndex(0)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		ctx := context.Background()
		q0 := mq.MessageQueue{Topic: "O", QueueID: 0}
		if n, err := b.MaxOffset(ctx, q0); n != 5 || err != nil {
			t.Fatalf("MaxOffset %d %v", n, err)
		}
		if n, err := b.MinOffset(ctx, q0); n != 0 || err != nil {
			t.Fatalf("MinOffset %d %v", n, err)
		}
		if n, err := b.SearchOffset(ctx, q0, start.Add(2*time.Second)); n != 2 || err != nil {
			t.Fatalf("SearchOffset %d %v", n, err)
		}
		if _, err := b.MaxOffset(ctx, mq.MessageQueue{Topic: "O", QueueID: 9}); !errors.Is(err, mq.ErrInvalidQueue) {
			t.Fatalf("queue out of range: %v", err)
		}
		if _, err := b.MaxOffset(ctx, mq.MessageQueue{Topic: "O", BrokerName: "other"}); !errors.Is(err, mq.ErrInvalidQueue) {
			t.Fatalf("another broker's queue: %v", err)
		}
		if _, err := b.MaxOffset(ctx, mq.MessageQueue{Topic: "Nope"}); !errors.Is(err, mq.ErrTopicNotExist) {
			t.Fatalf("unknown topic: %v", err)
		}
	})
}

// TestSendRefusesExistingSystemTopics: a DLQ or the schedule topic, once the broker created
// it, still refuses a user's send (sends skip the name check only for topics that pass it).
func TestSendRefusesExistingSystemTopics(t *testing.T) {
	b := openBroker(t, nil)
	ctx := context.Background()
	for _, name := range []string{mq.DLQPrefix + "g", mq.ScheduleTopic} {
		if _, err := b.topics.ensure(name); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Send(ctx, &mq.Message{Topic: name, Body: []byte("x")}, nil); !errors.Is(err, mq.ErrInvalidTopic) {
			t.Fatalf("send to existing %s: %v, want %v", name, err, mq.ErrInvalidTopic)
		}
		if err := b.SendAsync(ctx, &mq.Message{Topic: name, Body: []byte("x")}, nil, func(mq.SendResult, error) {}); !errors.Is(err, mq.ErrInvalidTopic) {
			t.Fatalf("async send to existing %s: %v, want %v", name, err, mq.ErrInvalidTopic)
		}
	}
	if _, err := b.Send(ctx, &mq.Message{Topic: mq.RetryTopic("g"), Body: []byte("x")}, nil); err != nil {
		t.Fatalf("send to a retry topic: %v", err)
	}
}
