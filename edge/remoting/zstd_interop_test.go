package remoting_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
)

// TestSendBatchZstdInterop: the cluster INTEROP_NAMESRV names refuses SEND_BATCH_ZSTD as
// not supported and stores nothing when it is Apache RocketMQ (INTEROP_TARGET rocketmq, the
// default), and stores the batch when it is edgemq serve (INTEROP_TARGET edgemq).
func TestSendBatchZstdInterop(t *testing.T) {
	ns := os.Getenv("INTEROP_NAMESRV")
	if ns == "" {
		t.Skip("INTEROP_NAMESRV not set")
	}
	edgemq := os.Getenv("INTEROP_TARGET") == "edgemq"
	ctx := ctxT(t, time.Minute)
	c := dial(t, ns, interopOptions())
	topic := "EdgeZstd" + strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)
	if err := c.CreateTopic(ctx, remoting.TopicConfig{Name: topic, ReadQueues: 1, WriteQueues: 1, Perm: mq.PermRead | mq.PermWrite}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteTopic(ctx, topic)
	waitFor(t, 30*time.Second, "the topic's route", func() bool { _, err := c.Route(ctx, topic); return err == nil })
	msgs := []*mq.Message{{Topic: topic, Body: []byte("a"), Properties: map[string]string{mq.PropertyUniqKey: "U1"}},
		{Topic: topic, Body: []byte("b"), Properties: map[string]string{mq.PropertyUniqKey: "U2"}}}
	_, err := c.SendBatchWith(ctx, msgs, mq.QueueIndex(0), remoting.SendBatchZstd, zbatch.Append)
	q := mq.MessageQueue{Topic: topic, QueueID: 0}
	if r, rerr := c.Route(ctx, topic); rerr == nil && len(r.Queues) > 0 {
		q.BrokerName = r.Queues[0].BrokerName
	}
	n, oerr := c.MaxOffset(ctx, q)
	t.Logf("SEND_BATCH_ZSTD: %v; max offset %d (%v)", err, n, oerr)
	switch {
	case edgemq && (err != nil || n != 2):
		t.Fatalf("edgemq serve: %v, %d stored: want the batch of 2", err, n)
	case !edgemq && (!errors.Is(err, errors.ErrUnsupported) || n != 0):
		t.Fatalf("RocketMQ: %v, %d stored: want REQUEST_CODE_NOT_SUPPORTED and nothing stored", err, n)
	}
}
