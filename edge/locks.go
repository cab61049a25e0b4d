package edge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

type lockKey struct {
	group, topic string
	queue        int32
}

type lockEntry struct {
	client string
	last   time.Time // granted or last renewed
}

// lockTable holds the queue locks of orderly consumers: per (group, queue) the client that
// owns it and when it last locked it (RocketMQ's RebalanceLockManager). A lock older than
// Options.LockLifetime is free.
type lockTable struct {
	b  *Broker
	mu sync.Mutex // guards m
	m  map[lockKey]lockEntry
}

func newLockTable(b *Broker) *lockTable { return &lockTable{b: b, m: map[lockKey]lockEntry{}} }

// expire drops the locks that are older than LockLifetime at now; they are free anyway.
func (t *lockTable) expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m {
		if now.Sub(e.last) > t.b.opts.LockLifetime {
			delete(t.m, k)
		}
	}
}

// releaseClient frees the locks client holds in group, or in every group when group is "".
func (t *lockTable) releaseClient(group, client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.m {
		if e.client == client && (group == "" || k.group == group) {
			delete(t.m, k)
		}
	}
}

func (b *Broker) validateLockRequest(group, clientID string, qs []mq.MessageQueue) error {
	if err := mq.ValidateGroup(group); err != nil {
		return err
	}
	if clientID == "" {
		return fmt.Errorf("%w: empty client id", mq.ErrInvalidArgument)
	}
	for _, q := range qs {
		if err := mq.ValidateSubscribedTopic(q.Topic); err != nil {
			return err
		}
		if err := b.checkBrokerName(q.BrokerName); err != nil {
			return err
		}
		if q.QueueID < 0 {
			return fmt.Errorf("%w: queue %d of topic %q", mq.ErrInvalidArgument, q.QueueID, q.Topic)
		}
	}
	return nil
}

// LockQueues locks qs for clientID in group, for orderly consumption (RocketMQ's
// LOCK_BATCH_MQ), and returns the queues granted, in request order. A queue is granted when
// it is free, already the caller's (the lock is renewed), or its lock was last renewed more
// than Options.LockLifetime ago. Clients renew their locks every 20 s.
//
// As in RocketMQ, a lock outlives its owner's heartbeat expiry. Unlike RocketMQ, a client's
// locks are freed at once when it leaves its group through Unregister (which a network
// server calls when a client's connection closes), so the queues of a crashed orderly
// consumer do not stall for the lock lifetime.
//
// Errors: ErrClosed, ctx.Err(); mq.ErrInvalidArgument for a bad group name (see
// mq.ValidateGroup), an empty client id or a negative queue id, mq.ErrInvalidQueue for a queue of another broker, mq.ErrInvalidTopic
// for a topic that is not a valid user, retry or dead-letter topic. The topics need not
// exist. Nothing is locked on error.
func (b *Broker) LockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) ([]mq.MessageQueue, error) {
	if err := b.checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := b.validateLockRequest(group, clientID, qs); err != nil {
		return nil, err
	}
	t := b.locks
	now := time.Now()
	granted := make([]mq.MessageQueue, 0, len(qs))
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range qs {
		k := lockKey{group, q.Topic, q.QueueID}
		if e, ok := t.m[k]; ok && e.client != clientID && now.Sub(e.last) <= b.opts.LockLifetime {
			continue
		}
		t.m[k] = lockEntry{client: clientID, last: now}
		granted = append(granted, q)
	}
	return granted, nil
}

// UnlockQueues frees the locks clientID holds on qs in group (RocketMQ's UNLOCK_BATCH_MQ);
// other clients' locks are left alone. Errors as LockQueues.
func (b *Broker) UnlockQueues(ctx context.Context, group, clientID string, qs []mq.MessageQueue) error {
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if err := b.validateLockRequest(group, clientID, qs); err != nil {
		return err
	}
	t := b.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range qs {
		k := lockKey{group, q.Topic, q.QueueID}
		if e, ok := t.m[k]; ok && e.client == clientID {
			delete(t.m, k)
		}
	}
	return nil
}
