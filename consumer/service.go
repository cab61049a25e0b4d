package consumer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// This file holds what the PushConsumer and the PullConsumer share: the heartbeat, the
// rebalance of subscribed topics, and the service loop that runs their periodic tasks.

// callCtx returns the context of one call to the broker made by a consumer's own
// goroutines: it ends after Options.CallTimeout, or when parent ends.
func (o *Options) callCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, o.CallTimeout)
}

// heartbeatOf builds a consumer's heartbeat: its group, model, consume type, where it starts,
// and its subscriptions (topic -> expression) in topic order.
func heartbeatOf(o *Options, subs map[string]string, ct mq.ConsumeType, onChange func(string)) mq.Heartbeat {
	list := make([]mq.Subscription, 0, len(subs))
	for _, t := range slices.Sorted(maps.Keys(subs)) {
		list = append(list, mq.Subscription{Topic: t, Expression: subs[t]})
	}
	from := [...]string{"CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"}[o.FromWhere]
	return mq.Heartbeat{
		ClientID: o.ClientID,
		Consumers: []mq.ConsumerData{{Group: o.Group, Model: o.Model, ConsumeType: ct,
			FromWhere: from, Subscriptions: list}},
		OnChange: onChange,
	}
}

// rebalance allocates the queues of each subscribed topic (topic -> expression), in topic
// order, and calls assign with the queues that are this member's (RocketMQ's
// RebalanceImpl.doRebalance): every readable queue of the topic's route in broadcasting, the
// share Options.Strategy gives this member of the group in clustering. A topic whose queues
// or members cannot be read now is left as it is, with a warning, until the next rebalance.
func rebalance(ctx context.Context, b Broker, o *Options, subs map[string]string, assign func(topic, expr string, mine []mq.MessageQueue)) {
	for _, topic := range slices.Sorted(maps.Keys(subs)) {
		mine, ok := allocate(ctx, b, o, topic)
		if ok {
			assign(topic, subs[topic], mine)
		}
	}
}

// allocate returns this member's queues of topic; false when they cannot be known now.
func allocate(parent context.Context, b Broker, o *Options, topic string) ([]mq.MessageQueue, bool) {
	ctx, cancel := o.callCtx(parent)
	defer cancel()
	route, err := b.Route(ctx, topic)
	if err != nil {
		if parent.Err() == nil {
			o.Logger.Warn("consumer: rebalance: route", "topic", topic, "err", err)
		}
		return nil, false
	}
	all := route.ReadQueues()
	if o.Model == mq.Broadcasting {
		return all, true
	}
	cids, err := b.ConsumerIDs(ctx, topic, o.Group)
	if err != nil || len(cids) == 0 || len(all) == 0 {
		if err != nil && parent.Err() == nil {
			o.Logger.Warn("consumer: rebalance: consumer ids", "group", o.Group, "err", err)
		}
		return nil, false
	}
	mine, err := o.Strategy.Allocate(o.Group, o.ClientID, all, cids)
	if err != nil {
		o.Logger.Warn("consumer: rebalance: allocate", "group", o.Group, "topic", topic, "err", err)
		return nil, false
	}
	return mine, true
}

// startOffset returns where a newly assigned queue starts (RocketMQ's
// computePullFromWhere): its offset in offsets' store, else where o.FromWhere says.
func startOffset(ctx context.Context, b Broker, offsets offsetStore, o *Options, queue mq.MessageQueue) (int64, error) {
	off, err := offsets.Read(ctx, queue, readFromStore)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		return off, nil
	}
	ctx, cancel := o.callCtx(ctx)
	defer cancel()
	retry := mq.IsRetryTopic(queue.Topic)
	switch o.FromWhere {
	case ConsumeFromFirstOffset:
		return b.MinOffset(ctx, queue)
	case ConsumeFromTimestamp:
		if retry {
			return b.MaxOffset(ctx, queue)
		}
		return b.SearchOffset(ctx, queue, o.ConsumeTimestamp)
	default:
		if retry {
			return 0, nil
		}
		return b.MaxOffset(ctx, queue)
	}
}

// task is one job of a service loop: run does it and returns when it is due next (zero:
// only when triggered).
type task struct {
	run  func() time.Time
	due  time.Time
	now  atomic.Bool // triggered: run at the loop's next turn
	loop *serviceLoop
}

// trigger makes the task run at once (well, at the loop's next turn).
func (t *task) trigger() {
	t.now.Store(true)
	wake(t.loop.kick)
}

// serviceLoop runs a consumer's periodic tasks on one goroutine: the heartbeat, the
// rebalance, offset commits, and the consumer's own checks. Each task runs when due or when
// triggered; tasks run one at a time, in the order they were added.
type serviceLoop struct {
	tasks []*task
	kick  chan struct{} // capacity 1: a task was triggered
}

func newServiceLoop() *serviceLoop { return &serviceLoop{kick: make(chan struct{}, 1)} }

// add adds a task first due at due (zero: only when triggered).
func (l *serviceLoop) add(due time.Time, run func() time.Time) *task {
	t := &task{run: run, due: due, loop: l}
	l.tasks = append(l.tasks, t)
	return t
}

// every adds a task that runs every d, first at first.
func (l *serviceLoop) every(first time.Time, d time.Duration, run func()) *task {
	return l.add(first, func() time.Time {
		run()
		return time.Now().Add(d)
	})
}

// run runs the tasks until done closes.
func (l *serviceLoop) run(done <-chan struct{}) {
	for {
		now := time.Now()
		var next time.Time
		for _, t := range l.tasks {
			select {
			case <-done:
				return
			default:
			}
			if t.now.Swap(false) || !t.due.IsZero() && !now.Before(t.due) {
				t.due = t.run()
				now = time.Now()
			}
			if !t.due.IsZero() && (next.IsZero() || t.due.Before(next)) {
				next = t.due
			}
		}
		var tm *time.Timer
		var tc <-chan time.Time
		if !next.IsZero() {
			tm = time.NewTimer(time.Until(next))
			tc = tm.C
		}
		select {
		case <-tc:
		case <-l.kick:
		case <-done:
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// wake sends on a capacity-1 signal channel without blocking.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleep waits d; false if stop or done (either may be nil) comes first.
func sleep(d time.Duration, stop, done <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-done:
		return false
	}
}

// quiet reports whether err only says that the consumer is stopping (its context ended).
func quiet(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
