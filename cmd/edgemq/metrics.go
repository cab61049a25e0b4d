package main

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"strconv"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/uplink"
)

// handleMetrics answers GET /metrics: the broker's, the remoting server's and the process's
// metrics in the Prometheus text format. Before the broker is open (recovery) it has only
// the process's, and edgemq_ready 0.
func (m *monitor) handleMetrics(w http.ResponseWriter, r *http.Request) {
	var e expo
	m.writeMetrics(r.Context(), &e)
	w.Header().Set("Content-Type", contentType)
	w.Write(e.buf)
}

// writeMetrics writes every metric family to e.
func (m *monitor) writeMetrics(ctx context.Context, e *expo) {
	e.family("edgemq_build_info", "gauge", "Always 1: the version and Go version of the running binary.")
	e.sample("edgemq_build_info", 1, "version", version, "goversion", runtime.Version())
	e.one("edgemq_ready", "gauge", "1 once recovery finished and the listeners are up, 0 before and while stopping.", b2f(m.ready.Load()))
	m.processMetrics(e)
	if b := m.broker.Load(); b != nil {
		m.brokerMetrics(ctx, e, b)
	}
	if s := m.srv.Load(); s != nil {
		st := s.Stats()
		e.one("edgemq_remoting_connections", "gauge", "Client connections open now.", float64(st.Conns))
		e.one("edgemq_remoting_connections_accepted_total", "counter", "Client connections accepted.", float64(st.ConnsAccepted))
		e.family("edgemq_remoting_requests_total", "counter", "Requests read, by RocketMQ request code.")
		for _, c := range sortedCodes(st.Requests) {
			e.sample("edgemq_remoting_requests_total", float64(st.Requests[c]), "code", strconv.Itoa(int(c)))
		}
		e.family("edgemq_remoting_replies_total", "counter", "Replies sent, by RocketMQ response code (0: success).")
		for _, c := range sortedCodes(st.Replies) {
			e.sample("edgemq_remoting_replies_total", float64(st.Replies[c]), "code", strconv.Itoa(int(c)))
		}
		e.one("edgemq_remoting_pulls_answered_inline_total", "counter", "Parked pulls woken by a send on their own connection and answered with that send's reply, without a pull worker.", float64(st.PullsAnsweredInline))
		e.one("edgemq_remoting_pull_workers", "gauge", "Pull workers alive now: they answer parked pulls woken by other connections' sends or by their timeouts.", float64(st.PullWorkers))
		e.one("edgemq_remoting_pull_streams_ended_total", "counter", "Streamed pulls their consumers ended (END_PULL_STREAM) while parked.", float64(st.StreamsEnded))
	}
	if u := m.uplink.Load(); u != nil {
		uplinkMetrics(e, u.Stats())
	}
}

// uplinkStates are the states of a rule, each a sample of edgemq_uplink_state.
var uplinkStates = []uplink.State{uplink.Idle, uplink.Connected, uplink.Draining, uplink.BackingOff}

// uplinkMetrics writes the uplink's families, labelled by rule: those of up rules, then
// those of down rules; state and failures have both, told apart by direction.
func uplinkMetrics(e *expo, st uplink.Stats) {
	e.family("edgemq_uplink_state", "gauge", "A rule's link state: 1 for the current one (idle, connected, draining, backing_off), 0 for the others.")
	stateSamples := func(rule, dir string, cur uplink.State) {
		for _, s := range uplinkStates {
			e.sample("edgemq_uplink_state", b2f(s == cur), "rule", rule, "direction", dir, "state", s.String())
		}
	}
	for _, r := range st.Up {
		stateSamples(r.Name, "up", r.State)
	}
	for _, d := range st.Down {
		stateSamples(d.Name, "down", d.State)
	}
	e.family("edgemq_uplink_failures_total", "counter", "Failed dials, sends, pulls and local reads or stores of a rule.")
	for _, r := range st.Up {
		e.sample("edgemq_uplink_failures_total", float64(r.Failures), "rule", r.Name, "direction", "up")
	}
	for _, d := range st.Down {
		e.sample("edgemq_uplink_failures_total", float64(d.Failures), "rule", d.Name, "direction", "down")
	}
	for _, f := range []struct {
		name, typ, help string
		v               func(uplink.RuleStats) float64
	}{
		{"edgemq_uplink_backlog_messages", "gauge", "Messages of an up rule's topics stored and not yet acknowledged upstream.",
			func(r uplink.RuleStats) float64 { return float64(r.Backlog) }},
		{"edgemq_uplink_backlog_bytes", "gauge", "Commit log bytes from an up rule's oldest message not yet forwarded to the log's end: an upper bound of its backlog's size.",
			func(r uplink.RuleStats) float64 { return float64(r.BacklogBytes) }},
		{"edgemq_uplink_oldest_age_seconds", "gauge", "How long ago an up rule's oldest message not yet forwarded was stored (0 with no backlog).",
			func(r uplink.RuleStats) float64 { return r.OldestAge.Seconds() }},
		{"edgemq_uplink_forwarded_messages_total", "counter", "Messages of an up rule the upstream acknowledged.",
			func(r uplink.RuleStats) float64 { return float64(r.Forwarded) }},
		{"edgemq_uplink_forwarded_bytes_total", "counter", "Body bytes of an up rule the upstream acknowledged.",
			func(r uplink.RuleStats) float64 { return float64(r.ForwardedBytes) }},
		{"edgemq_uplink_batches_total", "counter", "Sends of an up rule the upstream acknowledged.",
			func(r uplink.RuleStats) float64 { return float64(r.Batches) }},
		{"edgemq_uplink_resent_messages_total", "counter", "Messages an up rule sent again after a failed attempt: an upper bound of the duplicates upstream.",
			func(r uplink.RuleStats) float64 { return float64(r.Resent) }},
		{"edgemq_uplink_lost_messages_total", "counter", "Messages of an up rule that retention deleted before they were forwarded.",
			func(r uplink.RuleStats) float64 { return float64(r.Lost) }},
		{"edgemq_uplink_rejected_messages_total", "counter", "Messages of an up rule the upstream refused as too large, skipped.",
			func(r uplink.RuleStats) float64 { return float64(r.Rejected) }},
	} {
		e.family(f.name, f.typ, f.help)
		for _, r := range st.Up {
			e.sample(f.name, f.v(r), "rule", r.Name)
		}
	}
	e.family("edgemq_uplink_lag_messages", "gauge", "Messages of a down rule's upstream topic not yet stored locally, as of each queue's last pull.")
	for _, d := range st.Down {
		e.sample("edgemq_uplink_lag_messages", float64(d.Lag), "rule", d.Name)
	}
	e.family("edgemq_uplink_received_messages_total", "counter", "Messages a down rule stored locally.")
	for _, d := range st.Down {
		e.sample("edgemq_uplink_received_messages_total", float64(d.Received), "rule", d.Name)
	}
}

// brokerMetrics writes the broker's families: traffic, lag, store and disk.
func (m *monitor) brokerMetrics(ctx context.Context, e *expo, b *edge.Broker) {
	topics := b.Topics()
	sortTopics(topics)
	type pair struct {
		name string
		st   edge.TopicStats
	}
	ts := make([]pair, 0, len(topics))
	for _, t := range topics {
		if !mq.IsSystemTopic(t.Name) || mq.IsRetryTopic(t.Name) {
			ts = append(ts, pair{t.Name, b.TopicStats(t.Name)})
		}
	}
	for _, f := range []struct {
		name, help string
		v          func(edge.TopicStats) int64
	}{
		{"edgemq_topic_messages_in_total", "Messages sent to a topic.", func(s edge.TopicStats) int64 { return s.MessagesIn }},
		{"edgemq_topic_bytes_in_total", "Body bytes sent to a topic.", func(s edge.TopicStats) int64 { return s.BytesIn }},
		{"edgemq_topic_messages_out_total", "Messages pulled from a topic, all groups together.", func(s edge.TopicStats) int64 { return s.MessagesOut }},
		{"edgemq_topic_bytes_out_total", "Body bytes pulled from a topic, all groups together.", func(s edge.TopicStats) int64 { return s.BytesOut }},
	} {
		e.family(f.name, "counter", f.help)
		for _, t := range ts {
			e.sample(f.name, float64(f.v(t.st)), "topic", t.name)
		}
	}
	lags := brokerLags(ctx, b)
	groups := lagGroups(b, lags)
	e.family("edgemq_group_messages_out_total", "counter", "Messages a consumer group pulled.")
	for _, g := range groups {
		e.sample("edgemq_group_messages_out_total", float64(b.GroupStats(g).MessagesOut), "group", g)
	}
	e.family("edgemq_group_bytes_out_total", "counter", "Body bytes a consumer group pulled.")
	for _, g := range groups {
		e.sample("edgemq_group_bytes_out_total", float64(b.GroupStats(g).BytesOut), "group", g)
	}
	e.family("edgemq_group_lag_messages", "gauge", "Messages stored but not yet consumed by a group, per queue of the topics it has offsets on.")
	for _, l := range lags {
		e.sample("edgemq_group_lag_messages", float64(l.Lag), "group", l.Group, "topic", l.Topic, "queue", strconv.Itoa(int(l.QueueID)))
	}

	if st, err := b.TransactionStats(); err == nil {
		e.one("edgemq_transactions_open", "gauge", "Transactions whose half message is stored and whose end is not known yet.", float64(st.Open))
		e.one("edgemq_transactions_committed_total", "counter", "Transactions their producers committed.", float64(st.Committed))
		e.one("edgemq_transactions_rolled_back_total", "counter", "Transactions their producers rolled back.", float64(st.RolledBack))
		e.one("edgemq_transactions_discarded_total", "counter", "Transactions discarded as rolled back after their last check went unanswered.", float64(st.Discarded))
		e.one("edgemq_transaction_checks_total", "counter", "Checks of open transactions asked of their producer groups.", float64(st.Checks))
	}
	if st, err := b.StoreStats(); err == nil {
		e.one("edgemq_store_commitlog_bytes", "gauge", "Size of the commit log's segment files.", float64(st.SegmentBytes))
		e.one("edgemq_store_flush_lag_bytes", "gauge", "Commit log bytes written but not yet fsynced.", float64(max(0, st.MaxPos-st.DurablePos)))
		e.one("edgemq_store_dispatch_lag_bytes", "gauge", "Commit log bytes fsynced but not yet in their consume queues.", float64(max(0, st.DurablePos-st.DispatchedPos)))
		e.family("edgemq_store_fsync_duration_seconds", "histogram", "Latency of the commit log flusher's fsyncs.")
		e.histogram("edgemq_store_fsync_duration_seconds", st.Fsyncs.Bounds, st.Fsyncs.Counts, st.Fsyncs.Sum)
		e.one("edgemq_store_retention_deleted_segments_total", "counter", "Commit log segments deleted by retention or to make room on a full disk.", float64(st.SegmentsDeleted))
		e.one("edgemq_store_retention_deleted_bytes_total", "counter", "Bytes of the commit log segments deleted by retention or to make room on a full disk.", float64(st.BytesDeleted))
		r := st.Recovery
		e.one("edgemq_recovery_cut_records_total", "counter", "Commit log records the recovery at start cut (after a crash or power cut).", float64(r.Records))
		e.one("edgemq_recovery_cut_bytes_total", "counter", "Commit log bytes the recovery at start cut.", float64(r.Bytes))
		e.one("edgemq_recovery_cut_queue_entries_total", "counter", "Consume queue entries the recovery at start cut.", float64(r.QueueEntries))
		e.one("edgemq_recovery_empty_segments_removed_total", "counter", "Empty segment files the recovery at start removed.", float64(r.EmptyRemoved))
		e.one("edgemq_recovery_broken_files_made_total", "counter", "The .broken files the recovery at start made to keep cut bytes.", float64(r.BrokenMade))
		e.one("edgemq_recovery_broken_files_deleted_total", "counter", "The .broken files the recovery at start deleted to stay within store.max_broken_bytes.", float64(r.BrokenDeleted))
		e.one("edgemq_store_broken_files", "gauge", "The .broken files in the commit log's directory, as of the start.", float64(r.BrokenFiles))
		e.one("edgemq_store_broken_bytes", "gauge", "Bytes of the .broken files in the commit log's directory, as of the start.", float64(r.BrokenBytes))
	}
	if d, err := b.DiskStats(); err == nil {
		e.one("edgemq_disk_total_bytes", "gauge", "Size of the file system holding the data dir.", float64(d.TotalBytes))
		e.one("edgemq_disk_free_bytes", "gauge", "Free space of the file system holding the data dir, for unprivileged writers.", float64(d.FreeBytes))
		e.one("edgemq_disk_used_bytes", "gauge", "Space of the file system holding the data dir not free for the broker.", float64(d.UsedBytes()))
	}
	healthy := 1.0
	if b.Health(m.stall) != nil {
		healthy = 0
	}
	e.one("edgemq_store_healthy", "gauge", "1 while the store passes its health check (no disk failure, flusher and dispatcher making progress).", healthy)
}

// processMetrics writes the process's families, named as Prometheus's own clients name them.
func (m *monitor) processMetrics(e *expo) {
	if rss, ok := residentBytes(); ok {
		e.one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(rss))
	}
	e.one("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.", float64(m.started.UnixNano())/1e9)
	e.one("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// brokerLags returns the lag of every group on each queue of every topic it has committed
// offsets on, as stats -group G -topic T gives it.
func brokerLags(ctx context.Context, b *edge.Broker) []lagJSON {
	pairs, err := b.GroupTopics()
	if err != nil {
		return nil
	}
	var out []lagJSON
	for _, p := range pairs {
		ls, err := groupLag(ctx, localTarget{b}, p.Group, p.Topic)
		if err != nil {
			continue // the topic was deleted
		}
		out = append(out, ls...)
	}
	return out
}

// lagGroups returns the groups the broker knows (heartbeats, stored configs) and those
// with offsets in lags, sorted.
func lagGroups(b *edge.Broker, lags []lagJSON) []string {
	gs := b.Groups()
	for _, l := range lags {
		gs = append(gs, l.Group)
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}
