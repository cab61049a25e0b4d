package consumer

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// TestHostileOptions: every constructor refuses options out of range with an error naming
// the field, never a panic, and takes nil options and a zero Options for defaults.
func TestHostileOptions(t *testing.T) {
	b := testBroker(t, nil)
	long := strings.Repeat("g", 300)
	for _, tc := range []struct {
		name string
		o    *Options
		says string
	}{
		{"nil options", nil, "Group is required"},
		{"no group", &Options{}, "Group is required"},
		{"bad group", &Options{Group: "a b"}, "Group"},
		{"300-character group", &Options{Group: long}, "Group"},
		{"PullBatchSize 2000", &Options{Group: "g", PullBatchSize: 2000}, "PullBatchSize"},
		{"negative PullBatchSize", &Options{Group: "g", PullBatchSize: -1}, "PullBatchSize"},
		{"batch 1025", &Options{Group: "g", ConsumeMessageBatchMaxSize: 1025}, "ConsumeMessageBatchMaxSize"},
		{"min over max", &Options{Group: "g", ConsumeGoroutinesMin: 9, ConsumeGoroutinesMax: 3}, "ConsumeGoroutinesMin"},
		{"negative min", &Options{Group: "g", ConsumeGoroutinesMin: -1}, "ConsumeGoroutinesMin"},
		{"negative threshold", &Options{Group: "g", PullThresholdForQueue: -5}, "thresholds"},
		{"MaxReconsumeTimes -2", &Options{Group: "g", MaxReconsumeTimes: -2}, "thresholds"},
		{"negative PullInterval", &Options{Group: "g", PullInterval: -time.Second}, "PullInterval"},
		{"negative interval", &Options{Group: "g", RebalanceInterval: math.MinInt64}, "negative"},
		{"negative CallTimeout", &Options{Group: "g", CallTimeout: -1}, "negative"},
		{"PullExpiry under BrokerSuspend", &Options{Group: "g", PullExpiry: time.Second}, "PullExpiry"},
		{"bad model", &Options{Group: "g", Model: 7}, "Model"},
		{"bad FromWhere", &Options{Group: "g", FromWhere: -1}, "FromWhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPushConsumer(consumerBroker(t, b), tc.o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("NewPushConsumer: %v, want %v naming %q", err, ErrInvalidOptions, tc.says)
			}
			if _, err := NewPullConsumer(consumerBroker(t, b), tc.o, nil); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("NewPullConsumer: %v, want %v naming %q", err, ErrInvalidOptions, tc.says)
			}
		})
	}
	if _, err := NewPushConsumer(nil, &Options{Group: "g"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("NewPushConsumer(nil broker): %v", err)
	}
	if _, err := NewPullConsumer(nil, &Options{Group: "g"}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("NewPullConsumer(nil broker): %v", err)
	}
	if _, err := NewPullConsumer(consumerBroker(t, b), &Options{Group: "g"}, &PullOptions{PullThresholdForAll: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("NewPullConsumer(negative PullThresholdForAll): %v", err)
	}
	if _, err := NewPushConsumer(consumerBroker(t, b), &Options{Group: "g", MaxReconsumeTimes: -1}); err != nil {
		t.Errorf("MaxReconsumeTimes -1 (16): %v", err)
	}
}

// TestHostileCalls: the consumers' entry points refuse hostile arguments with an error and
// never panic: empty or malformed topics and expressions, nil listeners, nil contexts,
// queues that do not exist, calls in the wrong state, and a broker that is a typed nil.
func TestHostileCalls(t *testing.T) { overNet(t, true, testHostileCalls) }

func testHostileCalls(t *testing.T) {
	b := testBroker(t, nil)
	createTopic(t, b, "T", 2)
	ctx := context.Background()

	pc, err := NewPushConsumer(consumerBroker(t, b), fastOptions(t, "g"))
	if err != nil {
		t.Fatal(err)
	}
	var nilConcurrent ConcurrentListener
	var nilOrderly OrderlyListener
	for name, l := range map[string]Listener{"nil interface": nil, "nil ConcurrentListener": nilConcurrent, "nil OrderlyListener": nilOrderly} {
		if err := pc.Subscribe("T", "*", l); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Subscribe with a %s: %v", name, err)
		}
	}
	ok := newCounter().listener()
	for _, tc := range []struct{ topic, expr string }{{"", "*"}, {"T", "A ||"}, {"T", "||"}} {
		if err := pc.Subscribe(tc.topic, tc.expr, ok); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Subscribe(%q, %q): %v", tc.topic, tc.expr, err)
		}
	}
	if err := pc.Start(); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Start with no subscription: %v", err)
	}
	if err := pc.Shutdown(nil); err != nil {
		t.Errorf("Shutdown(nil) of a consumer never started: %v", err)
	}
	if err := pc.Subscribe("T", "*", ok); !errors.Is(err, ErrShutdown) {
		t.Errorf("Subscribe after Shutdown: %v", err)
	}

	// A broker that is a typed nil: Start's heartbeat fails, nothing panics.
	var nb *edge.Broker
	pn, err := NewPushConsumer(nb, fastOptions(t, "g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pn.Subscribe("T", "*", ok); err != nil {
		t.Fatal(err)
	}
	if err := pn.Start(); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Errorf("Start on a nil broker: %v", err)
	}

	lc, err := NewPullConsumer(consumerBroker(t, b), fastOptions(t, "g"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Subscribe("Nope", "*"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Errorf("Subscribe to an unknown topic: %v", err)
	}
	for _, queues := range [][]mq.MessageQueue{
		nil,
		{{Topic: "Nope"}},
		{{Topic: "T", QueueID: -1}},
		{{Topic: "T", QueueID: 2}},
		{{Topic: "T", BrokerName: "other"}},
		{{Topic: strings.Repeat("t", 300)}},
	} {
		if err := lc.Assign(queues); err == nil {
			t.Errorf("Assign(%v) succeeded", queues)
		}
	}
	if _, err := lc.Poll(ctx); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Poll before Start: %v", err)
	}
	if _, err := lc.Poll(nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Errorf("Poll(nil): %v", err)
	}
	if err := lc.Assign([]mq.MessageQueue{{Topic: "T"}}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	if err := lc.CommitSync(nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Errorf("CommitSync(nil): %v", err)
	}
	for _, off := range []int64{-1, math.MinInt64, math.MaxInt64} {
		if err := lc.Seek(mq.MessageQueue{Topic: "T"}, off); !errors.Is(err, ErrSeekOffset) {
			t.Errorf("Seek(%d): %v", off, err)
		}
	}
	if err := lc.Seek(mq.MessageQueue{Topic: "T", QueueID: 1}, 0); !errors.Is(err, ErrNotAssigned) {
		t.Errorf("Seek of a queue not assigned: %v", err)
	}
	if err := lc.Pause([]mq.MessageQueue{{Topic: "Nope"}}); !errors.Is(err, ErrNotAssigned) {
		t.Errorf("Pause of a queue not assigned: %v", err)
	}
	// RocketMQ's protocol answers a queue the topic lacks with INVALID_PARAMETER (29), the
	// code of every bad argument: over the network the error is mq.ErrInvalidArgument.
	wantQueueErr := mq.ErrInvalidQueue
	if isNet(t) {
		wantQueueErr = mq.ErrInvalidArgument
	}
	if _, err := lc.OffsetForTimestamp(mq.MessageQueue{Topic: "T", QueueID: 99}, time.Time{}); !errors.Is(err, wantQueueErr) {
		t.Errorf("OffsetForTimestamp of a queue the topic lacks: %v", err)
	}
	if _, err := lc.Committed(mq.MessageQueue{Topic: "Nope"}); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Errorf("Committed of an unknown topic: %v", err)
	}
	if err := lc.Shutdown(nil); err != nil {
		t.Errorf("Shutdown(nil): %v", err)
	}
	if _, err := lc.Poll(ctx); !errors.Is(err, ErrShutdown) {
		t.Errorf("Poll after Shutdown: %v", err)
	}
}
