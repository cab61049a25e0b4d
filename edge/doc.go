// Package edge is EdgeMQ's message broker: a RocketMQ-style broker that runs in the program
// that opens it, over a message store in a data dir (package store).
//
//	b, err := edge.Open("/var/lib/edgemq", nil)
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//	res, err := b.Send(ctx, &mq.Message{Topic: "Telemetry", Tags: "temp", Body: data}, nil)
//	pr, err := b.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "Telemetry"},
//		Filter: "*", Suspend: true})
//
// A *Broker speaks the client–broker contract of package edge/mq: its methods take and
// return mq's messages, queues, requests and results, and fail with mq's errors. The
// consumers of package consumer run on it in-process through their Broker interface.
//
// It does what Apache RocketMQ 4.x's broker does for its clients, with the same semantics:
//
//   - topics with read and write queue counts and permissions, made on first send unless
//     Options.NoAutoCreateTopics;
//   - sends of one message or a batch (one queue, in order), returning once stored (on
//     disk, with the store's default sync flush) or with a callback (SendAsync), to a queue
//     chosen by round robin or an mq.QueueSelector, a network server's sends and batches
//     stored from their properties as sent (SendEncodedAsyncFrom,
//     SendBatchItemsAsyncFrom); large bodies compressed (zstd);
//     delivery delayed by delay level; transactional messages, held until their
//     producer commits or rolls back the transaction (EndTransaction), asked about
//     (SetTransactionChecker) when it does not say;
//   - pulls filtered by TAG expression, with long polling: a pull that finds nothing waits
//     until a matching message arrives, the periodic sweep finds its queue grown, its wait
//     runs out, or its ctx ends (with Options.ShortPolling, only the sweep or the wait);
//   - consumer offsets, committed directly or riding on a pull, written to disk every
//     Options.OffsetPersistInterval and on Close, queried (a new group reads a new queue from its first message) and reset
//     to the first, the last, or a time;
//   - consumer groups kept by heartbeats, with member expiry, change notifications, and
//     pulls filtered by the members' subscriptions; producer groups;
//   - queue locks for orderly consumption;
//   - failed messages sent back to %RETRY%<group> with growing delays, and to %DLQ%<group>
//     past their maximum reconsume count;
//   - counters per topic and group, consumer lag, and the state of queues and store.
//
// Errors wrap mq's sentinels (mq.ErrTopicNotExist, mq.ErrInvalidArgument, ...), which
// clients branch on with errors.Is; the broker's own are ErrClosed and ErrTopicExists. Bad
// input is an error, never a panic, and changes nothing (but see Send).
//
// The broker reads its wall clock from Options.Now (default time.Now): store times, and so
// retention by age, and topics' creation times. Delays, the lifetimes of heartbeats and
// locks, waits and periodic work run on the time package's clock and timers. Tests
// of a program that embeds a broker may run it in a testing/synctest bubble, whose fake
// clock runs hours of delays and timeouts in no time.
package edge
