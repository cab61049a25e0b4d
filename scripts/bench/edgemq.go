//go:build !jetstreamonly

package main

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// openEdgeMQ opens a broker in dir with the flush policy of j and a one-queue topic.
func openEdgeMQ(j job, dir string) (*edge.Broker, error) {
	so := &store.Options{}
	if !j.Durable {
		so.Flush = commitlog.FlushAsync
	}
	b, err := edge.Open(dir, &edge.Options{Store: so})
	if err != nil {
		return nil, err
	}
	if err := b.CreateTopic(edge.TopicConfig{Name: topic, ReadQueues: 1, WriteQueues: 1}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func runEdgeMQ(ctx context.Context, j job, dir string) (result, error) {
	switch j.Work {
	case workSend:
		return edgeMQSend(ctx, j, dir)
	case workPull:
		return edgeMQPull(ctx, j, dir)
	case workLatency:
		if j.Consumer == consumerPushConsumer {
			return edgeMQPushLatency(ctx, j, dir)
		}
		return edgeMQLatency(ctx, j, dir)
	case workConsume:
		return edgeMQConsume(ctx, j, dir)
	}
	return result{}, fmt.Errorf("unknown workload %q", j.Work)
}

// pipelined returns a send that keeps up to window Broker.SendAsync calls in flight, and a
// flush that waits for all of them and reports the first error a done function got. As an
// application with a bounded window would, it keeps its messages in flight in window slots,
// each reused once its send is done, so that the harness makes no garbage of its own.
func pipelined(ctx context.Context, b *edge.Broker, body []byte, window int) (send, flush func() error) {
	type slot struct {
		m    mq.Message
		done func(mq.SendResult, error)
	}
	free := make(chan *slot, window)
	var (
		mu       sync.Mutex
		firstErr error
	)
	for range window {
		sl := new(slot)
		sl.done = func(_ mq.SendResult, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
			free <- sl
		}
		free <- sl
	}
	send = func() error {
		sl := <-free
		sl.m = mq.Message{Topic: topic, Body: body}
		if err := b.SendAsync(ctx, &sl.m, nil, sl.done); err != nil {
			free <- sl
			return err
		}
		return nil
	}
	flush = func() error {
		for range window {
			<-free
		}
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	return send, flush
}

// edgeMQSend calls Broker.Send from j.Producers goroutines, each message on its own, or
// (j.Pipelined) Broker.SendAsync from j.Producers goroutines with up to j.Window sends in
// flight in all.
func edgeMQSend(ctx context.Context, j job, dir string) (result, error) {
	var res result
	b, err := openEdgeMQ(j, dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	body := make([]byte, j.Size)
	send := func() error {
		_, err := b.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
		return err
	}
	const warmup = 1000
	var last mq.SendResult
	for range warmup {
		r, err := b.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
		if err != nil {
			return res, err
		}
		last = r
	}
	stored, err := b.ViewMessage(ctx, last.CommitLogOffset)
	if err != nil {
		return res, err
	}
	res.RecordBytes = int64(stored.StoreSize)
	var flush func() error
	if j.Pipelined {
		send, flush = pipelined(ctx, b, body, j.Window)
	}
	n, d, err := driveThen(j.Producers, j.N, j.Time, j.Profile, send, flush)
	res.Msgs, res.Seconds, res.Stored = n, d.Seconds(), n+warmup
	if err != nil {
		return res, err
	}
	ss, err := b.StoreStats()
	if err != nil {
		return res, err
	}
	logUsed := ss.MaxPos - ss.MinPos
	err = b.Close()
	b = nil
	if err != nil {
		return res, err
	}
	if err := measureDisk(&res, dir); err != nil {
		return res, err
	}
	// The log up to its end, a 20-byte entry per message, and every file but the log's and
	// the queues' (preallocated: their apparent size is not data).
	other, err := sizeExcept(dir, "commitlog", "consumequeue")
	res.DiskUsed = logUsed + 20*res.Stored + other
	return res, err
}

// sizeExcept returns the apparent size of the regular files in dir, except below the named
// subdirectories.
func sizeExcept(dir string, skip ...string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && slices.Contains(skip, d.Name()) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
