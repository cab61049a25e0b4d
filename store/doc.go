// Package store is EdgeMQ's message store: a durable commitlog of message records, one
// consume queue per (topic, queue id) indexing it, the dispatcher that builds the queues from
// the log, and the meta store (package meta) beside them in one data dir:
//
//	<dir>/LOCK                          the data dir lock (package dirlock)
//	<dir>/meta.db                       offsets, topic and group configs, ... (package meta)
//	<dir>/commitlog/%020d.log           commitlog segments (package commitlog)
//	<dir>/consumequeue/<topic>/<id>/    consume queue files (package cqueue)
//	<dir>/dispatch                      the dispatch checkpoint
//
// Append assigns each message the next offset of its queue and writes the batch contiguously
// to the commitlog; with the default sync flush policy it returns once an fsync covers the
// batch (group commit). AppendAsync returns once the batch is written and calls back when
// the fsync that covers it completes, so that one caller can keep many batches in flight.
// Dispatching turns new records into queue entries and calls Options.OnArrival, the hook
// long polling hangs on. An acknowledgement (Append returning, AppendAsync's done) waits for
// its batch's dispatch, so that an acknowledged message is visible to every read (MaxOffset,
// GetMessages, OffsetByTime, a waiting pull). In async mode an append dispatches its records
// under the append lock as it writes them (with any waiting before them), when the dispatch
// token is free. Otherwise the acknowledging goroutine (the appender, or AppendAsync's
// acknowledgement goroutine) dispatches when the token is free, its own records and those
// written before them (of the appenders a group commit's fsync releases, the first to run
// dispatches them all), and else waits for the token's holder, who dispatches them; a
// dispatcher goroutine takes what is left. One of them dispatches at a time. In sync mode
// only durable records are dispatched, so no consumer ever sees a message a power cut could
// take back: the batch an fsync covers is dispatched after that fsync and before its
// acknowledgements go out.
//
// Options.Linger makes a sync-mode fsync wait a little for more appends (flash wear: each
// fsync rewrites the log's last page). A message's Durability (its topic's choice) may
// override the flush policy: an async message in a sync store is acknowledged once written,
// made durable by the next fsync, at the latest FlushInterval later, and dispatched then; a
// sync message in an async store is acknowledged after an fsync that covers it.
//
// GetMessages reads a queue from an offset through a tag filter and answers with RocketMQ's
// statuses (FOUND, NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE, ...), next begin offset, and min
// and max offsets. Records are checksummed; a damaged record or queue entry is reported in the
// log and skipped, never served.
//
// Recovery (Open): the commitlog keeps its longest whole prefix; consume-queue tails not
// backed by the log are cut; records after the dispatch checkpoint are dispatched again,
// checking the entries that are already there; a queue shorter than the checkpoint says is
// rebuilt from the log past its last good entry.
//
// The store knows nothing of consumer groups, the network or RocketMQ's wire format. The
// record and file formats are specified in store/FORMAT.md.
package store
