package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// TestConfigFileDocumentsEveryKey parses configs/edgemq.conf: every key in it is known, and
// every known key is in it.
func TestConfigFileDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../configs/edgemq.conf")
	if err != nil {
		t.Fatal(err)
	}
	var c config
	if err := parseConfig(&c, strings.NewReader(string(b)), "edgemq.conf"); err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if !strings.Contains(string(b), "\n"+s.key+" = ") {
			t.Errorf("key %q is not documented in configs/edgemq.conf", s.key)
		}
	}
}

// TestConfigFileDefaultsAreTheDefaults: the values the file states are the built-in
// defaults, so the file never lies about them.
func TestConfigFileDefaultsAreTheDefaults(t *testing.T) {
	b, _ := os.ReadFile("../../configs/edgemq.conf")
	var c config
	if err := parseConfig(&c, strings.NewReader(string(b)), "edgemq.conf"); err != nil {
		t.Fatal(err)
	}
	eo, so := edge.DefaultOptions, store.DefaultOptions
	cl := commitlog.DefaultOptions
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"segment_size", c.store.SegmentSize, cl.SegmentSize},
		{"flush", c.store.Flush, cl.Flush},
		{"flush_interval", c.store.FlushInterval, cl.FlushInterval},
		{"flush_bytes", c.store.FlushBytes, cl.FlushBytes},
		{"queue_flush_interval", c.store.QueueFlushInterval, so.QueueFlushInterval},
		{"queue_segment_entries", c.store.QueueSegmentEntries, so.QueueSegmentEntries},
		{"max_age", c.store.MaxAge, cl.MaxAge},
		{"max_bytes", c.store.MaxBytes, cl.MaxBytes},
		{"max_used_ratio", c.store.MaxUsedRatio, cl.MaxUsedRatio},
		{"on_full", c.store.OnFull, cl.OnFull},
		{"retention_interval", c.store.RetentionInterval, cl.RetentionInterval},
		{"max_pull_bytes", c.store.MaxPullBytes, so.MaxPullBytes},
		{"max_message_size", c.broker.MaxMessageSize, eo.MaxMessageSize},
		{"default_queues", c.broker.DefaultQueues, eo.DefaultQueues},
		{"auto_create_topics", c.broker.NoAutoCreateTopics, eo.NoAutoCreateTopics},
		{"compress_over", c.broker.CompressOver, eo.CompressOver},
		{"default_suspend", c.broker.DefaultSuspend, eo.DefaultSuspend},
		{"max_suspend", c.broker.MaxSuspend, eo.MaxSuspend},
		{"short_polling", c.broker.ShortPolling, eo.ShortPolling},
		{"short_polling_wait", c.broker.ShortPollingWait, eo.ShortPollingWait},
		{"hold_check_interval", c.broker.HoldCheckInterval, eo.HoldCheckInterval},
		{"offset_persist_interval", c.broker.OffsetPersistInterval, eo.OffsetPersistInterval},
		{"heartbeat_timeout", c.broker.HeartbeatTimeout, eo.HeartbeatTimeout},
		{"heartbeat_check_interval", c.broker.HeartbeatCheckInterval, eo.HeartbeatCheckInterval},
		{"lock_lifetime", c.broker.LockLifetime, eo.LockLifetime},
		{"max_reconsume_times", c.broker.MaxReconsumeTimes, eo.MaxReconsumeTimes},
		{"delay_levels", c.broker.DelayLevels, eo.DelayLevels},
		{"store_host", c.broker.StoreHost, eo.StoreHost},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: file says %v, default is %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, in := range []string{
		"nonsense",
		"no_such_key = 1",
		"flush = sometimes",
		"segment_size = 64MB",
		"max_age = forever",
		"store_host = localhost",
		"on_full = panic",
	} {
		var c config
		if err := parseConfig(&c, strings.NewReader(in), "test.conf"); err == nil {
			t.Errorf("%q parsed without error", in)
		}
	}
	var c config
	if err := parseConfig(&c, strings.NewReader("# comment\n\nmax_age = 1h # trailing\nsegment_size = 2 MiB\n"), "t"); err != nil {
		t.Fatal(err)
	}
	if c.store.MaxAge != time.Hour || c.store.SegmentSize != 2<<20 {
		t.Fatalf("parsed %v %d", c.store.MaxAge, c.store.SegmentSize)
	}
}
