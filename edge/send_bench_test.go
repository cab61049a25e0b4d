package edge

import (
	"context"
	"runtime"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
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

// BenchmarkSendLoop100 calls Send in a loop from one goroutine, 100-byte messages, async
// flush: the yardstick of BenchmarkSendAsyncWindow100.
func BenchmarkSendLoop100(b *testing.B) {
	br := openBroker(b, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, MaxUsedRatio: -1}})
	body := make([]byte, 100)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(100)
	for b.Loop() {
		if _, err := br.Send(ctx, &mq.Message{Topic: "Bench", Body: body}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendAsyncWindow100 keeps up to 4096 SendAsync calls in flight from one goroutine,
// as the embedded benchmark's pipelined sender does (a slot per send in flight, reused once
// its done ran), 100-byte messages, async flush.
func BenchmarkSendAsyncWindow100(b *testing.B) {
	br := openBroker(b, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, MaxUsedRatio: -1}})
	body := make([]byte, 100)
	ctx := context.Background()
	const window = 4096
	free := sendWindow(b, window)
	b.ReportAllocs()
	b.SetBytes(100)
	for b.Loop() {
		sl := <-free
		sl.m = mq.Message{Topic: "Bench", Body: body}
		if err := br.SendAsync(ctx, &sl.m, nil, sl.done); err != nil {
			b.Fatal(err)
		}
	}
	for range window {
		<-free
	}
}

// BenchmarkSendAsync64Window100 calls SendAsync from 64 goroutines sharing a window of 1024
// sends in flight (a slot per send, reused once its done ran), 100-byte messages, async
// flush: 64 producers each in the broker's best mode for a sender that need not wait, as
// the embedded benchmark's JetStream side runs js.PublishAsync from 64 goroutines.
func BenchmarkSendAsync64Window100(b *testing.B) {
	br := openBroker(b, &Options{Store: &store.Options{Flush: commitlog.FlushAsync, MetaNoSync: true, MaxUsedRatio: -1}})
	body := make([]byte, 100)
	ctx := context.Background()
	const window = 1024
	free := sendWindow(b, window)
	b.ReportAllocs()
	b.SetBytes(100)
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sl := <-free
			sl.m = mq.Message{Topic: "Bench", Body: body}
			if err := br.SendAsync(ctx, &sl.m, nil, sl.done); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for range window {
		<-free
	}
}

// windowSlot is a send in flight of a windowed benchmark: its message and done function,
// reused once done ran.
type windowSlot struct {
	m    mq.Message
	done func(mq.SendResult, error)
}

// sendWindow returns a window of n free slots: a slot's done function puts it back.
func sendWindow(b *testing.B, n int) chan *windowSlot {
	free := make(chan *windowSlot, n)
	for range n {
		sl := new(windowSlot)
		sl.done = func(_ mq.SendResult, err error) {
			if err != nil {
				b.Error(err)
			}
			free <- sl
		}
		free <- sl
	}
	return free
}
