package main

//go:generate go test . -run TestExampleConfigIsTheTable -update

import (
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/edge/uplink"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
)

// A section is a [table] of the config file; "" is the top level, whose keys come first.
type section struct {
	name string
	doc  string
	// command is the one command whose flags the section's keys are (serve for [server]);
	// "" for every command that opens a data dir. Every command reads every key of a file.
	command string
}

// sections are the config file's tables, in the order configs/edgemq.toml lists them.
var sections = []section{
	{name: ""},
	{name: "store", doc: "The message store (packages store and store/commitlog): commitlog segments and " +
		"flushing, consume queues, memory, and retention."},
	{name: "broker", doc: "The broker (package edge): messages, topics, pulls and long polling, consumer " +
		"groups, retries and delayed messages."},
	{name: "server", command: "serve", doc: "The RocketMQ remoting server of edgemq serve (package " +
		"edge/remoting/server): its addresses and limits, and how long a stop waits. Its keys are flags " +
		"of edgemq serve alone; other commands accept and ignore them, so that one file serves all."},
	{name: "http", command: "serve", doc: "The HTTP listener of edgemq serve: Prometheus metrics (/metrics), " +
		"health (/healthz) and readiness (/readyz) probes, and a status page (/) with its JSON (/api/status). " +
		"Its keys are flags of edgemq serve alone."},
	{name: "uplink", command: "serve", doc: "Store-and-forward to upstream brokers (package edge/uplink): " +
		"the up rules that forward local topics to an Apache RocketMQ cluster or an EdgeMQ hub, and what " +
		"they share. Its keys are flags of edgemq serve alone."},
}

// defaultShutdownTimeout is server.shutdown_timeout's default; it belongs to the command.
const defaultShutdownTimeout = 10 * time.Second

// hostPort accepts host:port, the host possibly empty (every interface) and the port 0 (any
// free one).
func hostPort(s string) bool {
	_, _, err := net.SplitHostPort(s)
	return err == nil
}

// defaultDataDir is data_dir's default; it belongs to the command, not to a package.
const defaultDataDir = "./data"

// settings is the one table of config keys. Each entry is the single source of its key's
// parsing and validation, default, flag, help text, and entry in configs/edgemq.toml
// (regenerate that with `go generate ./cmd/edgemq`). Keys are listed by section, in the
// order of the file.
//
// To add a key, add an item[T] here, T being the option field's type, with
//   - section and key: the TOML names, lower_snake_case; the flag is then -section.key;
//   - kind: how values are written: size, durationKind, integer, floatKind, boolKind, text,
//     oneOf, durationsKind or addrPortKind (a new Go type needs a kind in setting.go);
//   - def: the default from the owning package's DefaultOptions, never a literal;
//   - check: what the key accepts beyond its kind (positive, notNegative, positiveOrOff,
//     between, or a rule of its own), so that a bad value fails at load with its line; refuse
//     0 where the options read 0 as "the default";
//   - set: the assignment to the config's field;
//   - doc: sentences for configs/edgemq.toml; the first is also the flag's help.
//
// Then run go generate ./cmd/edgemq, and give the key a value other than its default in
// testdata/every-key.toml and in TestConfigRoundTrip's want, and a line in
// TestExampleConfigDefaultsAreTheDefaults: the tests fail until each is done. A new [section]
// goes in sections first.
var settings = []setting{
	item[string]{
		key:   "data_dir",
		flag:  "data",
		kind:  text("dir"),
		def:   defaultDataDir,
		check: rule[string]{"a path, not empty", func(s string) bool { return s != "" }},
		set:   func(c *config, v string) { c.dataDir = v },
		doc: "Where the store lives: commitlog, consume queues and meta.db. One process at a time " +
			"holds a data dir; a second one fails at once, naming the holder's pid.",
	},
	item[slog.Level]{
		key: "log_level",
		kind: oneOf("level", choice[slog.Level]{"debug", slog.LevelDebug}, choice[slog.Level]{"info", slog.LevelInfo},
			choice[slog.Level]{"warn", slog.LevelWarn}, choice[slog.Level]{"error", slog.LevelError}),
		def: slog.LevelInfo,
		set: func(c *config, v slog.Level) { c.logLevel = v },
		doc: "The least severe of the broker's reports that are written to stderr.",
	},
	item[logFormat]{
		key:  "log_format",
		kind: oneOf("format", choice[logFormat]{"text", logText}, choice[logFormat]{"json", logJSON}),
		def:  logText,
		set:  func(c *config, v logFormat) { c.logFormat = v },
		doc: "How reports are written to stderr, one a line. text: the level, the message, then " +
			"key=value pairs (quoted when they hold a space). json: a JSON object (time, level, msg, " +
			"and the pairs). Under systemd, text lines start with their syslog priority (<4>), " +
			"which journald takes as the line's priority and drops.",
	},
	item[logTimestamps]{
		key: "log_timestamps",
		kind: oneOf("when", choice[logTimestamps]{"auto", timestampsAuto}, choice[logTimestamps]{"on", timestampsOn},
			choice[logTimestamps]{"off", timestampsOff}),
		def: timestampsAuto,
		set: func(c *config, v logTimestamps) { c.logTimestamps = v },
		doc: "Whether reports start with the time. auto: when stderr is a terminal; under systemd it " +
			"is not, and journald stamps each line itself.",
	},

	// [store]: store.Options, and the commitlog defaults it passes on.
	item[int64]{
		section: "store", key: "segment_size",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.SegmentSize,
		check: between(size[int64](), 64<<10, 2<<30),
		set:   func(c *config, v int64) { c.store.SegmentSize = v },
		doc: "Size of each commitlog segment file, preallocated. A data dir keeps the size it " +
			"was created with, and a different value fails at open: leave it unset to open any " +
			"dir. At most 1GiB on 32-bit ARM, whose address space must hold the mapped segments.",
	},
	item[commitlog.FlushMode]{
		section: "store", key: "flush",
		kind: oneOf("mode", choice[commitlog.FlushMode]{"sync", commitlog.FlushSync},
			choice[commitlog.FlushMode]{"async", commitlog.FlushAsync}),
		def: commitlog.DefaultOptions.Flush,
		set: func(c *config, v commitlog.FlushMode) { c.store.Flush = v },
		doc: "The flush policy: when a send returns. sync: once an fsync covers it (concurrent sends share one: " +
			"group commit), so an acknowledged message survives a power cut. async: at once; a " +
			"flush runs every flush_interval or once flush_bytes are unflushed. A topic's durability " +
			"(edgemq topic create -durability) overrides it for that topic.",
	},
	item[time.Duration]{
		section: "store", key: "linger",
		kind:  durationKind,
		def:   commitlog.DefaultOptions.Linger,
		check: between(durationKind, 0, commitlog.MaxLinger),
		set:   func(c *config, v time.Duration) { c.store.Linger = v },
		doc: "With flush = \"sync\", how long an fsync waits for more sends to share it (ended early " +
			"once 4KiB of records wait). A send returns up to this much later, and a slow stream of " +
			"sends rewrites the log's last page (flash wear) once per linger instead of once per " +
			"send: at 10,000 sends a second 1ms halves the bytes written per message or better, for " +
			"about 1ms more on every send. On a slow SD card, whose fsyncs take milliseconds, 5ms " +
			"also makes sends faster from about 1,000 a second (ack p50 about 3ms instead of 25ms " +
			"on a card of 500 writes a second). 0: no wait beyond group commit.",
	},
	item[time.Duration]{
		section: "store", key: "flush_interval",
		kind:  durationKind,
		def:   commitlog.DefaultOptions.FlushInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.store.FlushInterval = v },
		doc: "How often an async commitlog flushes; with flush = \"sync\", the longest the sends " +
			"of a topic of durability async stay unflushed (what a power cut may lose of them).",
	},
	item[int64]{
		section: "store", key: "flush_bytes",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.FlushBytes,
		check: positive[int64](),
		set:   func(c *config, v int64) { c.store.FlushBytes = v },
		doc:   "An async commitlog also flushes once this much is unflushed.",
	},
	item[time.Duration]{
		section: "store", key: "queue_flush_interval",
		kind:  durationKind,
		def:   store.DefaultOptions.QueueFlushInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.store.QueueFlushInterval = v },
		doc: "How often consume queues are fsynced and the dispatch checkpoint written. Each time " +
			"costs the device about 80KB on ext4 (flash wear); recovery replays at most " +
			"queue_flush_bytes of log whatever the interval.",
	},
	item[int64]{
		section: "store", key: "queue_flush_bytes",
		kind:  size[int64](),
		def:   store.DefaultOptions.QueueFlushBytes,
		check: positive[int64](),
		set:   func(c *config, v int64) { c.store.QueueFlushBytes = v },
		doc: "Consume queues are also synced once this much log was dispatched since the last " +
			"time. It bounds what recovery after a crash dispatches again.",
	},
	item[int]{
		section: "store", key: "queue_segment_entries",
		kind:  integer[int](),
		def:   store.DefaultOptions.QueueSegmentEntries,
		check: between(integer[int](), 1, 1<<26),
		set:   func(c *config, v int) { c.store.QueueSegmentEntries = v },
		doc: "20-byte entries per consume-queue file (65536 make 1.25MiB). Only one file per " +
			"queue is mapped: lower it on 32-bit boxes with hundreds of queues.",
	},
	item[int64]{
		section: "store", key: "max_dispatch_lag",
		kind:  size[int64](),
		def:   store.DefaultOptions.MaxDispatchLag,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.MaxDispatchLag = v },
		doc: "Sends wait (at most 1s) while consume queues lag this much log behind. It bounds " +
			"what a restart replays and how stale consumers' view of the queues gets under a flood.",
	},
	item[int64]{
		section: "store", key: "resident_bytes",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.ResidentBytes,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.ResidentBytes = v },
		doc: "How much of the mapped commitlog stays in the process's resident set (RSS) behind " +
			"the write position. Older pages are dropped from the process, not from the page " +
			"cache, and read back from it by a consumer that needs them. Turned off, every " +
			"page stays resident: RSS grows to the mapped segments.",
	},
	item[int64]{
		section: "store", key: "queue_resident_bytes",
		kind:  size[int64](),
		def:   cqueue.DefaultOptions.ResidentBytes,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.QueueResidentBytes = v },
		doc:   "The same as resident_bytes, for each consume queue's mapped file.",
	},
	item[int64]{
		section: "store", key: "prefault_bytes",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.PrefaultBytes,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.PrefaultBytes = v },
		doc: "How far ahead of the write position a busy async commitlog is mapped for writing. " +
			"Sends then do not each take the page fault of a new page (about 4us on a VM) under " +
			"the append lock. The pages are dirty zeros until written: a flush meanwhile writes " +
			"up to this many zeros, which is why a slow log (prefault_rate) is not prefaulted, " +
			"and flush = \"sync\" never.",
	},
	item[int64]{
		section: "store", key: "write_buffer",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.WriteBuffer,
		check: atMostOrOff(size[int64](), commitlog.MaxWriteBuffer),
		set:   func(c *config, v int64) { c.store.WriteBuffer = v },
		doc: "The size of a buffer in which the commitlog gathers records and writes them to " +
			"its file in one write, instead of through its mapping: about a third of the CPU " +
			"per 1 KiB record, and no prefaulting. What a power cut keeps is unchanged (the " +
			"buffer is written before every fsync). With flush = \"sync\" a crash of the " +
			"process loses nothing more either (sends wait for an fsync, written first; an " +
			"async topic's send writes the buffer out before it is acknowledged); with " +
			"\"async\" records still in the buffer when the process dies are lost, though " +
			"their sends were acknowledged. 0: 1MiB with flush = \"sync\", none with " +
			"\"async\"; negative: none, write through the mapping.",
	},
	item[int64]{
		section: "store", key: "zero_ahead",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.ZeroAhead,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.ZeroAhead = v },
		doc: "With flush = \"sync\" and a write buffer: how far ahead of its records the " +
			"commitlog writes zeros into the segment file, this much at a time. A segment is " +
			"preallocated, and on ext4 the first fsync covering a write to a preallocated " +
			"block also commits the journal: sync-mode fsyncs take about half as long again " +
			"(here 350 against 220us, and sends over the network 71 against 89 k msgs/s). " +
			"The price: each segment is written twice, zeros then records, which where the " +
			"journal's commits are cheap adds up to a byte of device writes per byte of " +
			"records. At most a quarter of segment_size by default.",
	},
	item[int64]{
		section: "store", key: "prefault_rate",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.PrefaultRate,
		check: positive[int64](),
		set:   func(c *config, v int64) { c.store.PrefaultRate = v },
		doc:   "The write rate, bytes a second, from which the commitlog counts as busy and is prefaulted.",
	},
	item[time.Duration]{
		section: "store", key: "max_age",
		kind:  durationKind,
		def:   commitlog.DefaultOptions.MaxAge,
		check: positiveOrOff[time.Duration](),
		set:   func(c *config, v time.Duration) { c.store.MaxAge = v },
		doc:   "Retention: delete segments whose newest record is older than this.",
	},
	item[int64]{
		section: "store", key: "max_bytes",
		kind:  size[int64](),
		def:   commitlog.DefaultOptions.MaxBytes,
		check: notNegative[int64](),
		set:   func(c *config, v int64) { c.store.MaxBytes = v },
		doc: "Retention: the byte quota of all commitlog segments; the oldest go first. 0: no " +
			"quota; else at least two segments.",
	},
	item[float64]{
		section: "store", key: "max_used_ratio",
		kind: floatKind,
		def:  commitlog.DefaultOptions.MaxUsedRatio,
		check: rule[float64]{"more than 0 and at most 1, or negative to turn it off",
			func(v float64) bool { return v < 0 || v > 0 && v <= 1 }},
		set: func(c *config, v float64) { c.store.MaxUsedRatio = v },
		doc: "Retention: delete the oldest segments while the file system is fuller than this.",
	},
	item[commitlog.OnFull]{
		section: "store", key: "on_full",
		kind: oneOf("policy", choice[commitlog.OnFull]{"fail", commitlog.FailWrites},
			choice[commitlog.OnFull]{"dropOldest", commitlog.DropOldest}),
		def: commitlog.DefaultOptions.OnFull,
		set: func(c *config, v commitlog.OnFull) { c.store.OnFull = v },
		doc: "What a send does on a full disk. fail: return an error to the sender and keep " +
			"every message. dropOldest: delete the oldest segments to make room.",
	},
	item[int64]{
		section: "store", key: "max_broken_bytes",
		kind:  size[int64](),
		def:   2 * commitlog.DefaultOptions.SegmentSize,
		check: positiveOrOff[int64](),
		set:   func(c *config, v int64) { c.store.MaxBrokenBytes = v },
		doc: "Most bytes of the .broken files that recovery after a crash or power cut leaves " +
			"in the commitlog dir for inspection (cut bytes, segments moved aside); each start " +
			"deletes the oldest beyond it. Not counted in max_bytes. Unset: two segments (the " +
			"value below with the default segment_size). " +
			"Negative keeps none.",
	},
	item[time.Duration]{
		section: "store", key: "retention_interval",
		kind:  durationKind,
		def:   commitlog.DefaultOptions.RetentionInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.store.RetentionInterval = v },
		doc:   "How often retention runs.",
	},
	item[int]{
		section: "store", key: "max_pull_bytes",
		kind:  size[int](),
		def:   store.DefaultOptions.MaxPullBytes,
		check: positive[int](),
		set:   func(c *config, v int) { c.store.MaxPullBytes = v },
		doc:   "Most bytes of messages one pull returns. A pull always returns at least one message.",
	},

	// [broker]: edge.Options.
	item[int]{
		section: "broker", key: "max_message_size",
		kind:  size[int](),
		def:   edge.DefaultOptions.MaxMessageSize,
		check: positive[int](),
		// The store's too: verify opens the store alone, and it checks segments hold two.
		set: func(c *config, v int) { c.broker.MaxMessageSize, c.store.MaxMessageSize = v, v },
		doc: "The largest message body a send accepts. Segments must hold two of them: at most " +
			"about half of store.segment_size (less 64KiB). Left unset with segments too small " +
			"for the default, the command line takes the largest they hold, so that a data dir " +
			"made with small segments opens without its config.",
	},
	item[int]{
		section: "broker", key: "compress_over",
		kind:  size[int](),
		def:   edge.DefaultOptions.CompressOver,
		check: notNegative[int](),
		set:   func(c *config, v int) { c.broker.CompressOver = v },
		doc: "Compress (zstd) bodies larger than this before storing them; consumers get the " +
			"original bytes. 0: never.",
	},
	item[int32]{
		section: "broker", key: "default_queues",
		kind:  integer[int32](),
		def:   edge.DefaultOptions.DefaultQueues,
		check: between(integer[int32](), 1, 1024),
		set:   func(c *config, v int32) { c.broker.DefaultQueues = v },
		doc:   "Read and write queues of a topic created without counts, as on its first send.",
	},
	item[bool]{
		section: "broker", key: "auto_create_topics",
		kind: boolKind,
		def:  !edge.DefaultOptions.NoAutoCreateTopics,
		set:  func(c *config, v bool) { c.broker.NoAutoCreateTopics = !v },
		doc: "Create a topic on its first send. false: a send to an unknown topic fails. (edgemq " +
			"send never creates one unless given -create.)",
	},
	item[time.Duration]{
		section: "broker", key: "default_suspend",
		kind:  durationKind,
		def:   edge.DefaultOptions.DefaultSuspend,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.DefaultSuspend = v },
		doc:   "How long a pull that finds nothing waits for a message when it asks for no particular wait.",
	},
	item[time.Duration]{
		section: "broker", key: "max_suspend",
		kind:  durationKind,
		def:   edge.DefaultOptions.MaxSuspend,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.MaxSuspend = v },
		doc:   "The longest any pull waits.",
	},
	item[bool]{
		section: "broker", key: "short_polling",
		kind: boolKind,
		def:  edge.DefaultOptions.ShortPolling,
		set:  func(c *config, v bool) { c.broker.ShortPolling = v },
		doc: "Turn long polling off: a pull waits at most short_polling_wait, and parked pulls are " +
			"re-checked that often.",
	},
	item[time.Duration]{
		section: "broker", key: "short_polling_wait",
		kind:  durationKind,
		def:   edge.DefaultOptions.ShortPollingWait,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.ShortPollingWait = v },
		doc:   "The longest a pull waits with short_polling.",
	},
	item[time.Duration]{
		section: "broker", key: "hold_check_interval",
		kind:  durationKind,
		def:   edge.DefaultOptions.HoldCheckInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.HoldCheckInterval = v },
		doc:   "How often parked pulls are re-checked against their queues.",
	},
	item[time.Duration]{
		section: "broker", key: "offset_persist_interval",
		kind:  durationKind,
		def:   edge.DefaultOptions.OffsetPersistInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.OffsetPersistInterval = v },
		doc:   "How often consumer offsets are written to meta.db. They are also written on shutdown.",
	},
	item[time.Duration]{
		section: "broker", key: "heartbeat_timeout",
		kind:  durationKind,
		def:   edge.DefaultOptions.HeartbeatTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.HeartbeatTimeout = v },
		doc:   "A group member not heard from for this long is dropped.",
	},
	item[time.Duration]{
		section: "broker", key: "heartbeat_check_interval",
		kind:  durationKind,
		def:   edge.DefaultOptions.HeartbeatCheckInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.HeartbeatCheckInterval = v },
		doc:   "How often group members are checked against heartbeat_timeout.",
	},
	item[time.Duration]{
		section: "broker", key: "lock_lifetime",
		kind:  durationKind,
		def:   edge.DefaultOptions.LockLifetime,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.LockLifetime = v },
		doc:   "How long a queue lock of an orderly consumer lives unless renewed.",
	},
	item[int32]{
		section: "broker", key: "max_reconsume_times",
		kind:  integer[int32](),
		def:   edge.DefaultOptions.MaxReconsumeTimes,
		check: positive[int32](),
		set:   func(c *config, v int32) { c.broker.MaxReconsumeTimes = v },
		doc: "A message reconsumed this many times goes to its group's dead-letter topic " +
			"(%DLQ%group), unless the consumer gives its own maximum.",
	},
	item[[]time.Duration]{
		section: "broker", key: "delay_levels",
		kind: durationsKind,
		def:  edge.DefaultOptions.DelayLevels,
		check: rule[[]time.Duration]{"1 to 64 durations, each more than 0", func(ds []time.Duration) bool {
			for _, d := range ds {
				if d <= 0 {
					return false
				}
			}
			return len(ds) > 0 && len(ds) <= 64
		}},
		set: func(c *config, v []time.Duration) { c.broker.DelayLevels = v },
		doc: "The delays of the levels of delayed messages and retries, level 1 first.",
	},
	item[time.Duration]{
		section: "broker", key: "transaction_timeout",
		kind:  durationKind,
		def:   edge.DefaultOptions.TransactionTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.TransactionTimeout = v },
		doc: "How old a transaction's half message must be before the broker asks its producer " +
			"group for the outcome it was not told (CHECK_TRANSACTION_STATE).",
	},
	item[time.Duration]{
		section: "broker", key: "transaction_check_interval",
		kind:  durationKind,
		def:   edge.DefaultOptions.TransactionCheckInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.TransactionCheckInterval = v },
		doc:   "How long the broker waits between two checks of one open transaction.",
	},
	item[int32]{
		section: "broker", key: "transaction_check_max",
		kind:  integer[int32](),
		def:   edge.DefaultOptions.TransactionCheckMax,
		check: positive[int32](),
		set:   func(c *config, v int32) { c.broker.TransactionCheckMax = v },
		doc: "How many times the broker asks about one open transaction; one still open a check " +
			"interval after the last check is discarded as rolled back (logged).",
	},
	item[netip.AddrPort]{
		section: "broker", key: "store_host",
		kind: addrPortKind,
		def:  edge.DefaultOptions.StoreHost,
		set:  func(c *config, v netip.AddrPort) { c.broker.StoreHost = v },
		doc:  "The address written into message ids (RocketMQ's offsetMsgId) and topic routes.",
	},
	item[string]{
		section: "broker", key: "broker_name",
		kind: text("name"),
		def:  edge.DefaultOptions.BrokerName,
		check: rule[string]{"1 to 255 characters of A-Z a-z 0-9 _ - % |", func(s string) bool {
			return mq.ValidateProducerGroup(s) == nil
		}},
		set: func(c *config, v string) { c.broker.BrokerName = v },
		doc: "The name of this broker in topic routes and message queues.",
	},
	item[time.Duration]{
		section: "broker", key: "new_queue_window",
		kind:  durationKind,
		def:   edge.DefaultOptions.NewQueueWindow,
		check: positiveOrOff[time.Duration](),
		set:   func(c *config, v time.Duration) { c.broker.NewQueueWindow = v },
		doc: "A consumer group without an offset on a queue reads it from its first message when " +
			"that message is younger than this: a new topic's first messages, sent moments before " +
			"its consumers started, are not skipped. On a queue with older history a new group " +
			"starts where its consumers ask (by default, at new messages). Negative: never.",
	},

	// [server]: server.Options, and how long serve waits for connections when it stops.
	item[string]{
		section: "server", key: "listen",
		kind:  text("address"),
		def:   server.DefaultOptions.Listen,
		check: rule[string]{`host:port, such as ":9876" (every interface) or "127.0.0.1:9876"`, hostPort},
		set:   func(c *config, v string) { c.server.Listen = v },
		doc: "The address that answers both name-server and broker requests: a client needs only " +
			"this one name-server address (-n 127.0.0.1:9876, NAMESRV_ADDR). Port 0 takes any free port, " +
			"which the startup line reports. The default serves this machine alone; \":9876\" serves " +
			"every interface, best with tls_mode and acl (serve warns without them).",
	},
	item[string]{
		section: "server", key: "vip_listen",
		kind: text("address"),
		def:  server.DefaultOptions.VIPListen,
		check: rule[string]{`host:port, "" or "off"`, func(s string) bool {
			return s == "" || s == "off" || hostPort(s)
		}},
		set: func(c *config, v string) { c.server.VIPListen = v },
		doc: "The address of the VIP channel that older Java clients send to (the broker's port less " +
			"2). \"\": listen's host, port less 2 (any free port when listen's is 0). \"off\": none.",
	},
	item[string]{
		section: "server", key: "advertise",
		kind: text("address"),
		def:  server.DefaultOptions.Advertise,
		check: rule[string]{`"" or ip:port with a literal IP address`, func(s string) bool {
			host, port, err := net.SplitHostPort(s)
			p, perr := strconv.Atoi(port)
			return s == "" || err == nil && net.ParseIP(host) != nil && perr == nil && p > 0 && p <= 65535
		}},
		set: func(c *config, v string) { c.server.Advertise = v },
		doc: "The broker address that topic routes give clients. \"\": the address each asking " +
			"connection reached, with listen's port. Set it when clients reach the box through NAT.",
	},
	item[string]{
		section: "server", key: "cluster_name",
		kind:  text("name"),
		def:   server.DefaultOptions.ClusterName,
		check: rule[string]{"not empty", func(s string) bool { return s != "" }},
		set:   func(c *config, v string) { c.server.ClusterName = v },
		doc:   "The cluster's name in topic routes and cluster info.",
	},
	item[int]{
		section: "server", key: "max_frame_size",
		kind:  size[int](),
		def:   server.DefaultOptions.MaxFrameSize,
		check: between(size[int](), 1<<10, 1<<30),
		set:   func(c *config, v int) { c.server.MaxFrameSize = v },
		doc: "The largest frame a client may send; a larger one closes its connection. It must " +
			"carry the largest message with its header: at least broker.max_message_size plus 64KiB.",
	},
	item[int]{
		section: "server", key: "max_conns",
		kind:  integer[int](),
		def:   server.DefaultOptions.MaxConns,
		check: positive[int](),
		set:   func(c *config, v int) { c.server.MaxConns = v },
		doc: "How many client connections may be open at once, both addresses together. Past it a " +
			"new connection is closed at once, and logged.",
	},
	item[int]{
		section: "server", key: "max_inflight",
		kind:  integer[int](),
		def:   server.DefaultOptions.MaxInFlight,
		check: positive[int](),
		set:   func(c *config, v int) { c.server.MaxInFlight = v },
		doc: "How many requests of one connection are handled at once: parked pulls and pipelined " +
			"sends count, and one connection carries all of a client process's. Past it a request is " +
			"answered SYSTEM_BUSY.",
	},
	item[time.Duration]{
		section: "server", key: "idle_timeout",
		kind:  durationKind,
		def:   server.DefaultOptions.IdleTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.server.IdleTimeout = v },
		doc:   "A connection that sends no frame for this long is closed. RocketMQ's clients heartbeat every 30s.",
	},
	item[time.Duration]{
		section: "server", key: "write_timeout",
		kind:  durationKind,
		def:   server.DefaultOptions.WriteTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.server.WriteTimeout = v },
		doc: "A connection whose reply is not written in this long is closed: a client that does not " +
			"read cannot hold the server's memory.",
	},
	item[tlsMode]{
		section: "server", key: "tls_mode",
		kind: oneOf("mode", choice[tlsMode]{"off", tlsOff}, choice[tlsMode]{"on", tlsOn},
			choice[tlsMode]{"permissive", tlsPermissive}),
		def: defaultTLSMode,
		set: func(c *config, v tlsMode) { c.security.tlsMode = v },
		doc: "Whether both addresses speak TLS. off: plain TCP. on: TLS only, from the first byte, " +
			"as RocketMQ's clients with TLS on (Java: -Dtls.enable=true; Go: WithTls(true)). " +
			"permissive: TLS and plain clients alike, told apart by their first byte. on and " +
			"permissive need tls_cert and tls_key.",
	},
	item[string]{
		section: "server", key: "tls_cert",
		kind: text("file"),
		def:  defaultTLSFile,
		set:  func(c *config, v string) { c.security.tlsCert = v },
		doc:  "The server's certificate chain, a PEM file, for tls_mode on or permissive.",
	},
	item[string]{
		section: "server", key: "tls_key",
		kind: text("file"),
		def:  defaultTLSFile,
		set:  func(c *config, v string) { c.security.tlsKey = v },
		doc:  "The private key of tls_cert, a PEM file.",
	},
	item[string]{
		section: "server", key: "tls_client_ca",
		kind: text("file"),
		def:  defaultTLSFile,
		set:  func(c *config, v string) { c.security.tlsClientCA = v },
		doc: "CA certificates, a PEM file: when set, every TLS client must show a certificate they " +
			"signed. \"\": clients need none.",
	},
	item[string]{
		section: "server", key: "acl",
		kind: text("file"),
		def:  defaultACL,
		set:  func(c *config, v string) { c.security.acl = v },
		doc: "The accounts file of RocketMQ's plain ACL (TOML with the keys of RocketMQ's " +
			"plain_acl.yml; see the README's Security section). When set, every request must be " +
			"signed by an account allowed to make it (clients: AclClientRPCHook in Java, " +
			"WithCredentials in Go), else it is answered NO_PERMISSION. SIGHUP re-reads it; a file " +
			"that does not load leaves the accounts in force. \"\": no ACL.",
	},
	item[bool]{
		section: "server", key: "zstd_batch",
		kind: boolKind,
		def:  !server.DefaultOptions.NoZstdBatch,
		set:  func(c *config, v bool) { c.server.NoZstdBatch = !v },
		doc: "Take SEND_BATCH_ZSTD, EdgeMQ's batch send compressed whole with zstd, which gateways' " +
			"uplink rules with compress send to a hub. false: it is answered REQUEST_CODE_NOT_SUPPORTED, " +
			"as by Apache RocketMQ, and the gateways send plain batches.",
	},
	item[bool]{
		section: "server", key: "stream_pulls",
		kind: boolKind,
		def:  !server.DefaultOptions.NoStreamPulls,
		set:  func(c *config, v bool) { c.server.NoStreamPulls = !v },
		doc: "Stream the pulls of EdgeMQ's push consumers that ask for it: a queue's pull is answered " +
			"again each time messages arrive, within the budget the consumer names, so that a message " +
			"stored while an answer is on its way does not wait for the next pull. false: every pull is " +
			"answered once, as by Apache RocketMQ (whose clients never ask).",
	},
	item[time.Duration]{
		section: "server", key: "shutdown_timeout",
		kind:  durationKind,
		def:   defaultShutdownTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.shutdownTimeout = v },
		doc: "How long a stop (SIGTERM, SIGINT) waits for the requests being handled and their " +
			"replies; then the connections are closed at once. The store is closed after either, and " +
			"always cleanly. Keep it below systemd's TimeoutStopSec.",
	},

	// [http]: serve's metrics, probes and status page.
	item[string]{
		section: "http", key: "listen",
		kind:  text("address"),
		def:   defaultHTTPListen,
		check: rule[string]{`host:port, such as "127.0.0.1:9877", or "off"`, func(s string) bool { return s == "off" || hostPort(s) }},
		set:   func(c *config, v string) { c.httpListen = v },
		doc: "The address of the HTTP listener: /metrics (Prometheus), /healthz, /readyz, the status page " +
			"at / and its JSON at /api/status. It has no authentication: keep it on loopback, or behind a " +
			"firewall or reverse proxy. \"off\": none.",
	},

	// [uplink]: uplink.Options.
	item[string]{
		section: "uplink", key: "gateway",
		kind: text("name"),
		def:  "",
		set:  func(c *config, v string) { c.uplink.Gateway = v },
		doc: "The value of {gateway} in the up rules' topic templates: 1 to 64 characters of A-Z a-z " +
			"0-9 _ -. \"\": the broker's name (broker.broker_name).",
	},
	item[int64]{
		section: "uplink", key: "rate_limit",
		kind:  size[int64](),
		def:   uplink.DefaultOptions.RateLimit,
		check: notNegative[int64](),
		set:   func(c *config, v int64) { c.uplink.RateLimit = v },
		doc: "The most message bytes per second all up rules send together; 0: no cap. Under a cap the " +
			"rules of higher priority go first, batch by batch.",
	},
	item[time.Duration]{
		section: "uplink", key: "backoff_min",
		kind:  durationKind,
		def:   uplink.DefaultOptions.BackoffMin,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.uplink.BackoffMin = v },
		doc: "The first wait after an upstream could not be reached or refused a batch; each further " +
			"failure doubles it, up to backoff_max, each wait drawn between half and all of it.",
	},
	item[time.Duration]{
		section: "uplink", key: "backoff_max",
		kind:  durationKind,
		def:   uplink.DefaultOptions.BackoffMax,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.uplink.BackoffMax = v },
		doc:   "The longest wait between two attempts to reach an upstream.",
	},
	item[time.Duration]{
		section: "uplink", key: "send_timeout",
		kind:  durationKind,
		def:   uplink.DefaultOptions.SendTimeout,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.uplink.SendTimeout = v },
		doc:   "How long a batch's send, or a connection attempt, may take before it counts as failed.",
	},
	item[time.Duration]{
		section: "uplink", key: "scan_interval",
		kind:  durationKind,
		def:   uplink.DefaultOptions.ScanInterval,
		check: positive[time.Duration](),
		set:   func(c *config, v time.Duration) { c.uplink.ScanInterval = v },
		doc: "How often local topics are matched against the up rules again, for topics and queues " +
			"created since.",
	},
	item[time.Duration]{
		section: "uplink", key: "pace_delay",
		kind:  durationKind,
		def:   uplink.DefaultOptions.PaceDelay,
		check: positiveOrOff[time.Duration](),
		set:   func(c *config, v time.Duration) { c.uplink.PaceDelay = v },
		doc: "Where up rules of different priorities share an upstream, about how long a higher " +
			"priority's message waits in the link's queue behind the lower rules' batches: their bytes " +
			"in flight are kept to the link's measured rate times its round trip plus this, so that a " +
			"slow link's queue stays short without a rate_limit. Negative: no pacing.",
	},
	item[[]uplink.UpRule]{
		section: "uplink", key: "up",
		kind: upRulesKind,
		def:  nil,
		set:  func(c *config, v []uplink.UpRule) { c.uplink.Up = v },
		doc:  upDoc,
	},
	item[[]uplink.DownRule]{
		section: "uplink", key: "down",
		kind: downRulesKind,
		def:  nil,
		set:  func(c *config, v []uplink.DownRule) { c.uplink.Down = v },
		doc:  downDoc,
	},
}
