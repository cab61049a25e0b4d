package remoting_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge/mq"
)

// BenchmarkClientSend measures a sync send of a 100-byte message over the client to a
// server on loopback: time and the client's and server's allocations together per send.
func BenchmarkClientSend(b *testing.B) {
	tb := startBroker(b, "", "")
	tb.createTopic("B", 4)
	c := dial(b, tb.addr, nil)
	ctx := context.Background()
	body := make([]byte, 100)
	if _, err := c.Send(ctx, &mq.Message{Topic: "B", Body: body}, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.SetParallelism(32) // 64 sends in flight on one connection, as a busy producer has
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Send(ctx, &mq.Message{Topic: "B", Body: body}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPushConsume measures a PushConsumer over the client consuming b.N pre-filled
// 100-byte messages from a server on loopback (pull batch 32, consume batch 1).
func BenchmarkPushConsume(b *testing.B) {
	tb := startBroker(b, "", "")
	tb.createTopic("B", 4)
	body := make([]byte, 100)
	batch := make([]*mq.Message, 32)
	for i := range batch {
		batch[i] = &mq.Message{Topic: "B", Body: body}
	}
	for n := 0; n < b.N; n += len(batch) {
		if _, err := tb.b.SendBatch(context.Background(), batch[:min(len(batch), b.N-n)], nil); err != nil {
			b.Fatal(err)
		}
	}
	c := dial(b, tb.addr, nil)
	want := int64(b.N)
	var got atomic.Int64
	all := make(chan struct{})
	pc, err := consumer.NewPushConsumer(c, &consumer.Options{Group: "bg", FromWhere: consumer.ConsumeFromFirstOffset, PullBatchSize: 32, OffsetDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if err := pc.Subscribe("B", "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		if v := got.Add(int64(len(msgs))); v >= want && v-int64(len(msgs)) < want {
			close(all)
		}
		return consumer.ConsumeSuccess, nil
	})); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	if err := pc.Start(); err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), want)
	}
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc.Shutdown(ctx)
}
