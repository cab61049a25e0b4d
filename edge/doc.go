// Package edge is EdgeMQ's broker and its embedding API: a RocketMQ-style broker that runs
// in-process over a store (package store).
//
//	b, err := edge.Open("/var/lib/edgemq", nil)
//	defer b.Close()
//	res, err := b.Send(ctx, &edge.Message{Topic: "Telemetry", Tags: "temp", Body: data}, nil)
//	pr, err := b.Pull(ctx, edge.PullRequest{Group: "g", Topic: "Telemetry", QueueID: 0,
//		Offset: 0, Filter: "*", Suspend: true})
//
// It provides what RocketMQ's broker provides to its clients, with the same semantics (see
// the seeds' PullMessageProcessor and PullRequestHoldService):
//
//   - topics with read and write queue counts and permissions, created on first send;
//   - sends of one message or a batch (one queue, in order), queue choice by round robin or
//     a selector, optional zstd compression, and delayed delivery by level;
//   - pulls with tag filters (hash first, then exact tag) and long polling: a pull that
//     finds nothing parks in the hold queue of its (topic, queue) until a matching message
//     arrives, the periodic sweep, its timeout, or its ctx ends;
//   - consumer offsets in memory, committed directly or riding on a pull, persisted every
//     5 s and on Close, and reset to first, last or a timestamp;
//   - consumer groups from heartbeats, with member expiry and change notifications, and
//     pulls filtered by the member's heartbeat subscription;
//   - queue locks for orderly consumption;
//   - send-back of failed messages to %RETRY%<group> with growing delays, and after the
//     maximum reconsume count to %DLQ%<group>;
//   - per-topic and per-group counters and consumer lag.
//
// A later layer (edge/remoting) puts RocketMQ's wire protocol in front of this API; no
// feature exists only on the wire. Time comes from the time package.
package edge
