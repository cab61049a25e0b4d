package edge

import (
	"context"
	"github.com/edgemq/edgemq/edge/mq"
	"testing"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// BenchmarkSendAsync100 sends 100-byte messages from parallel goroutines with async flush.
func BenchmarkSendAsync100(b *testing.B) {
	br := openBroker(b, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, MaxUsedRatio: -1}})
	body := make([]byte, 100)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(100)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := br.Send(ctx, &mq.Message{Topic: "Bench", Tags: "temp", Body: body}, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
