//go:build !jetstreamonly

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

const group = "bench"

// edgeMQPull pre-fills the topic's one queue and times batches of 32 pulled through it.
func edgeMQPull(ctx context.Context, j job, dir string) (result, error) {
	var res result
	b, err := openEdgeMQ(j, dir)
	if err != nil {
		return res, err
	}
	defer b.Close()
	body := make([]byte, j.Size)
	batch := make([]*mq.Message, 64)
	for sent := int64(0); sent < j.N; sent += int64(len(batch)) {
		batch = batch[:min(int64(len(batch)), j.N-sent)]
		for i := range batch {
			batch[i] = &mq.Message{Topic: topic, Body: body}
		}
		if _, err := b.SendBatch(ctx, batch, nil); err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
	}
	// Wait until the last message is dispatched to the consume queue.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		r, err := b.Pull(ctx, mq.PullRequest{Group: group, Queue: mq.MessageQueue{Topic: topic}, MaxMsgs: 1, Filter: "*"})
		if err != nil {
			return res, fmt.Errorf("pre-fill: %w", err)
		}
		if r.MaxOffset >= j.N {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("pre-fill: queue max offset %d of %d after 30 s", r.MaxOffset, j.N)
		}
	}
	sp, err := begin(j.Profile)
	if err != nil {
		return res, err
	}
	var got, off int64
	for got < j.N {
		req := mq.PullRequest{Group: group, Queue: mq.MessageQueue{Topic: topic}, Offset: off, MaxMsgs: 32, Filter: "*"}
		if j.Ack {
			req.CommitOffset = off // 0 is not committed; the first pull has nothing to commit
		}
		r, err := b.Pull(ctx, req)
		if err != nil {
			sp.end()
			return res, err
		}
		if r.Status != mq.PullFound {
			sp.end()
			return res, fmt.Errorf("pull at %d: %v after %d messages", off, r.Status, got)
		}
		got += int64(len(r.Messages))
		off = r.NextBeginOffset
	}
	d := sp.end()
	res.Msgs, res.Seconds = got, d.Seconds()
	return res, nil
}

// edgeMQLatency times paced Broker.Send calls (async flush) to one consumer doing long-poll
// pulls (Suspend) of up to 32 messages.
func edgeMQLatency(ctx context.Context, j job, dir string) (result, error) {
	b, err := openEdgeMQ(j, dir)
	if err != nil {
		return result{}, err
	}
	defer b.Close()
	p := newProbe(j)
	cctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		pullErr error
	)
	wg.Go(func() {
		var off int64
		for int(p.got.Load()) < p.total() {
			r, err := b.Pull(cctx, mq.PullRequest{Group: group, Queue: mq.MessageQueue{Topic: topic}, Offset: off, MaxMsgs: 32, Filter: "*", Suspend: true, MaxWait: time.Second})
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					pullErr = err
				}
				return
			}
			now := p.now()
			for _, m := range r.Messages {
				p.recv(m.Body, now)
			}
			off = r.NextBeginOffset
		}
	})
	res, err := p.run(j, func(body []byte) error {
		_, err := b.Send(ctx, &mq.Message{Topic: topic, Body: body}, nil)
		return err
	})
	cancel()
	wg.Wait()
	return res, errors.Join(err, pullErr)
}
