// Package uplink forwards chosen local topics of an *edge.Broker to upstream brokers (an
// Apache RocketMQ cluster, or another EdgeMQ acting as hub), store-and-forward, through
// links that stay down for days.
//
// An up rule (UpRule) names local topics, the upstream's name servers and the upstream
// topic each local topic goes to. For every queue of every matching topic a forwarder reads
// the queue from its cursor, sends what it read upstream as one batch to one upstream queue
// (local queue i goes to upstream write queue i mod n, so one local queue's messages keep
// their order, ordered topics sent by sharding key included), and moves the cursor past the
// batch only once the upstream answered SEND_OK. The cursor is kept in the broker's meta
// store, so after a crash or restart forwarding resumes where the upstream last
// acknowledged: delivery is at least once, and the messages sent again are at most one
// batch per queue. Every forwarded message keeps its UNIQ_KEY (a message stored without
// one gets its local offset message id, the same on every attempt), keys, tags and
// properties; the delay properties are dropped, the delay having been served locally.
//
// An up rule's backlog age (RuleStats.OldestAge), cursor times and error times read the broker's
// clock (edge.Options.Now), so a gateway simulating days offline sees days-old backlogs.
//
// While a rule with Overflow RejectNew has not forwarded a message, the broker's retention
// keeps it (edge.Broker.HoldRetention): a full disk then refuses new messages. The hold
// starts at the broker's open when the broker is opened with the holds
// Options.RetentionHolds returns (edge.Options.RetentionHolds): retention then deletes
// nothing unforwarded before Start either, nor after a Start that failed. With
// DropOldest retention runs as configured, and messages it deletes before they were
// forwarded are counted as lost (RuleStats.Lost) and logged.
//
// A link that fails backs off exponentially with jitter (Options.BackoffMin to
// BackoffMax); a rule's state (Idle, Connected, Draining, BackingOff) and backlog are in
// Uplink.Stats. When rules of different priorities both have batches ready, the higher
// priority's go first, and a rule's bandwidth cap (and the Options' shared one) is a token
// bucket taken batch by batch, so a fresh alarm waits at most for the batches in flight;
// under a cap a batch holds at most a quarter second's worth of it. A rule waiting for new
// messages holds no one up.
//
// Without a cap, a bulk rule's TCP stream would fill a slow link's queue (a modem's or a
// shaper's, often a second's worth or more), and a fresh alarm would wait behind it. So
// where rules of different priorities share an upstream, the uplink paces the lower ones:
// from the batches the upstream acknowledges it estimates the link's delivery rate (body
// bytes acknowledged per second over a second or more of answers, so that answers that
// come in bursts do not read as a faster link; the best of the last 10 s) and its round
// trip (the shortest of the last 10 s, less each batch's own time on the link), and keeps
// the lower rules' bytes in flight, all their queues together, to the rate times the round
// trip plus Options.PaceDelay (default 200 ms) and a batch, and their batches to a quarter
// second of the rate (1 KB until the first answer). A link that gets faster is found out: a batch answered sooner raises the
// estimate, and the cap with it, round trip by round trip. Every 10 s without a shorter
// round trip, the lower rules let the link empty and send one batch alone to measure it
// again. On a fast link the cap is many batches and the drain rate stays as it was; a
// negative PaceDelay turns pacing off. On a 64 kbit/s link with a 300 ms round trip and
// 1 % loss, a high-priority message goes up within 2 s, half of them within 1 s, while a
// bulk rule drains a backlog, capped under the link's rate or not (the tests over network
// namespaces check it).
//
// A down rule (DownRule) mirrors an upstream topic into a local one: for each upstream queue
// it pulls from its cursor, stores the batch locally (upstream queue i into local queue
// i mod n), syncs the store, and only then moves its cursor in the meta store and commits
// the group's offset upstream. Each stored message carries PropertyDownSource (its upstream
// broker, queue and offset): after a crash between a local store and the cursor's move, the
// rule finds what it stored past its cursor and goes on after it, so every upstream message
// is stored locally once. A down rule is a member of its group upstream, as a RocketMQ
// consumer is (a client id per rule and process, heartbeats, NOTIFY_CONSUMER_IDS_CHANGED),
// and mirrors only the queues the group's allocation gives it (RocketMQ's default,
// AllocateMessageQueueAveragely): gateways with the same rule and group, and RocketMQ
// consumers of that group, divide the topic's queues. When the members change, a queue the
// rule loses stops after its batch in flight is stored and committed, and a queue it gains
// starts at the group's committed offset (or past it, where the rule's own cursor or a
// crash's stored batch is further on). A batch in flight when another member takes its
// queue before the commit may be stored by both. A down rule reads only its topic: a
// RocketMQ consumer sharing its group may find the group's retry queue allocated to the
// rule, which does not read it (RocketMQ's own rule that a group's members subscribe
// alike).
//
// Compression: a rule with Compress to an EdgeMQ hub sends each batch compressed whole
// with zstd, in EdgeMQ's own request (SEND_BATCH_ZSTD; every message keeps its properties
// inside the batch). A hub that does not take it (an older EdgeMQ, or one with
// server.zstd_batch off) answers REQUEST_CODE_NOT_SUPPORTED and stores nothing; the rule
// then sends plain batches until the Uplink restarts. To Apache RocketMQ, whose batch send
// has no compression, a rule with Compress sends each message on its own, zlib-compressing
// bodies of at least CompressOver bytes (the COMPRESSED sysflag): RocketMQ 4.x consumers
// decode zlib only, 5.x consumers zlib, zstd and LZ4, so zlib reaches both.
package uplink
