// Package consumer is EdgeMQ's RocketMQ-style push consumer: push on pull.
//
//	pc, err := consumer.NewPushConsumer(b, &consumer.Options{Group: "billing"})
//	err = pc.Subscribe("Orders", "new || paid", consumer.ConcurrentListener(handle))
//	err = pc.Start()
//	defer pc.Shutdown(ctx)
//
// NewPullConsumer is the lite pull API on the same machinery: Subscribe (rebalanced across
// the group) and Unsubscribe, or Assign queues; Poll for batches; Pause and Resume queues;
// Seek (OffsetForTimestamp finds where); and commit with CommitSync or automatically every
// PersistInterval (Committed reads what is committed).
//
// It talks to a broker through the Broker interface, which *edge.Broker satisfies
// in-process; a network client can satisfy it too, and the same consumer code runs over it.
// A broker that is also an AsyncPuller (the network client of edge/remoting) gets its pulls
// in chains: the callback of a pull that found messages hands them to the listeners and
// sends the queue's next pull, on the goroutine that read the reply. A concurrent
// consumer's chained pull also asks the broker to stream (mq.PullRequest.PushMsgs, off
// with Options.NoStreamPulls): an EdgeMQ broker answers it again each time messages
// arrive, within what the queue may take in before flow control would pause it, so that
// a message stored while an answer travels finds the pull parked rather than a round trip
// away; Apache RocketMQ's broker answers once, and the chain goes on as with any broker.
// A queue dropped (rebalance, shutdown) ends its pull's context, and the client then ends
// the stream at the broker too.
//
// The mechanisms and their defaults (Options has every number):
//
//   - rebalance every 20 s and at once when the broker reports a membership change: sorted
//     queues and members, allocated by one of six strategies (averagely, by circle, by
//     config, by machine room, machine-room nearby, consistent hash); broadcasting takes
//     every queue; clustering groups also subscribe to %RETRY%<group>;
//   - one pull loop per assigned queue, long polling at the broker, with flow control
//     (more than 1000 cached messages, 100 MiB, or a concurrent offset span over 2000: retry
//     once the cache is down to half, or after 50 ms at most), 1 s while suspended, 3 s
//     after an error, and RocketMQ's handling of NO_NEW_MSG, NO_MATCHED_MSG and
//     OFFSET_ILLEGAL;
//   - a cache per queue (RocketMQ's ProcessQueue), ordered by queue offset, whose smallest
//     cached offset is the commit point;
//   - concurrent consumption on 20..64 goroutines in batches of ConsumeMessageBatchMaxSize,
//     with ackIndex, send-back of failures (falling back to a plain send to the retry topic,
//     then to consuming locally again after 5 s), and consume timeouts;
//   - orderly consumption under broker locks renewed every 20 s, one goroutine per queue at
//     a time, SUSPEND_CURRENT_QUEUE_A_MOMENT, and COMMIT / ROLLBACK with auto-commit off;
//   - offsets at the broker (riding on pulls and sent every 5 s) in clustering, in an
//     atomically written local file in broadcasting; an admin's offset reset at the broker
//     (RESET_CONSUMER_CLIENT_OFFSET) moves the running consumer's queues to the new offsets;
//   - hooks around each consume, and per-topic pull and consume statistics with lag.
//
// Where RocketMQ's users hit traps, EdgeMQ does better:
//
//   - A poison message in an orderly queue: RocketMQ's default retries it forever and the
//     queue stalls. Here, once it has been reconsumed MaxReconsumeTimes times (16, so
//     delivered 17 times in all), it goes to the group's dead-letter topic and the queue
//     moves on.
//   - An offset pinned by one stuck message: the commit point is the smallest offset still
//     in flight, so one hung listener holds back the whole queue's offset. Messages
//     consuming longer than ConsumeTimeout are sent back to the retry topic and dropped
//     from the cache, and the batches queued behind them are handed to other workers,
//     which releases the offset.
//   - Duplicates around rebalance: a queue leaving a member has its offset persisted before
//     it is dropped, a member that shuts down persists its offsets before it leaves the
//     group, and the broker frees an orderly queue's lock as soon as its owner unregisters
//     (RocketMQ waits up to 60 s), so the next owner starts where the last one stopped. An
//     orderly queue whose listener hangs stays locked by its owner until the listener
//     returns, then passes on with what it consumed committed. One window remains: in
//     concurrent consumption a member that joins may read a queue's offset before the old
//     owner has persisted it, and consume again what was consumed since the old owner's
//     last commit (its last pull, or PersistInterval). Messages in flight when a member
//     crashes are consumed again too (at least once): listeners should be idempotent.
package consumer
