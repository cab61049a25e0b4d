package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/edge/uplink"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
)

var update = flag.Bool("update", false, "rewrite configs/edgemq.toml from the settings table")

const exampleConfig = "../../configs/edgemq.toml"

// TestExampleConfigIsTheTable: configs/edgemq.toml is what the settings table generates, so
// it documents every key, with its default and doc, and nothing else. With -update (go
// generate ./cmd/edgemq) it rewrites the file instead.
func TestExampleConfigIsTheTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeExampleConfig(&b); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(exampleConfig, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(b.String(), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("configs/edgemq.toml differs from the settings table (run go generate ./cmd/edgemq); "+
					"line %d:\n got %q\nwant %q", i+1, g, w)
			}
		}
	}
}

// uncommented returns the example file with every key's line uncommented.
func uncommented(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^#([a-z_]+ = )`).ReplaceAll(b, []byte("$1"))
}

// TestExampleConfigDefaultsAreTheDefaults: the defaults the file states, uncommented, parse
// to the packages' defaults, so the file never lies about them.
func TestExampleConfigDefaultsAreTheDefaults(t *testing.T) {
	c := newConfig()
	if err := parseConfig(c, uncommented(t), "edgemq.toml"); err != nil {
		t.Fatal(err)
	}
	checked := make(map[string]bool)
	eo, so, cl, sv := edge.DefaultOptions, store.DefaultOptions, commitlog.DefaultOptions, server.DefaultOptions
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"data_dir", c.dataDir, "./data"},
		{"log_level", c.logLevel, slog.LevelInfo},
		{"log_format", c.logFormat, logText},
		{"log_timestamps", c.logTimestamps, timestampsAuto},
		{"store.segment_size", c.store.SegmentSize, cl.SegmentSize},
		{"store.flush", c.store.Flush, cl.Flush},
		{"store.flush_interval", c.store.FlushInterval, cl.FlushInterval},
		{"store.linger", c.store.Linger, cl.Linger},
		{"store.flush_bytes", c.store.FlushBytes, cl.FlushBytes},
		{"store.queue_flush_interval", c.store.QueueFlushInterval, so.QueueFlushInterval},
		{"store.queue_flush_bytes", c.store.QueueFlushBytes, so.QueueFlushBytes},
		{"store.queue_segment_entries", c.store.QueueSegmentEntries, so.QueueSegmentEntries},
		{"store.max_dispatch_lag", c.store.MaxDispatchLag, so.MaxDispatchLag},
		{"store.resident_bytes", c.store.ResidentBytes, cl.ResidentBytes},
		{"store.queue_resident_bytes", c.store.QueueResidentBytes, cqueue.DefaultOptions.ResidentBytes},
		{"store.prefault_bytes", c.store.PrefaultBytes, cl.PrefaultBytes},
		{"store.prefault_rate", c.store.PrefaultRate, cl.PrefaultRate},
		{"store.write_buffer", c.store.WriteBuffer, cl.WriteBuffer},
		{"store.zero_ahead", c.store.ZeroAhead, cl.ZeroAhead},
		{"store.max_age", c.store.MaxAge, cl.MaxAge},
		{"store.max_bytes", c.store.MaxBytes, cl.MaxBytes},
		{"store.max_used_ratio", c.store.MaxUsedRatio, cl.MaxUsedRatio},
		{"store.on_full", c.store.OnFull, cl.OnFull},
		{"store.max_broken_bytes", c.store.MaxBrokenBytes, 2 * cl.SegmentSize},
		{"store.retention_interval", c.store.RetentionInterval, cl.RetentionInterval},
		{"store.max_pull_bytes", c.store.MaxPullBytes, so.MaxPullBytes},
		{"broker.max_message_size", c.broker.MaxMessageSize, eo.MaxMessageSize},
		{"broker.compress_over", c.broker.CompressOver, eo.CompressOver},
		{"broker.default_queues", c.broker.DefaultQueues, eo.DefaultQueues},
		{"broker.auto_create_topics", c.broker.NoAutoCreateTopics, eo.NoAutoCreateTopics},
		{"broker.default_suspend", c.broker.DefaultSuspend, eo.DefaultSuspend},
		{"broker.max_suspend", c.broker.MaxSuspend, eo.MaxSuspend},
		{"broker.short_polling", c.broker.ShortPolling, eo.ShortPolling},
		{"broker.short_polling_wait", c.broker.ShortPollingWait, eo.ShortPollingWait},
		{"broker.hold_check_interval", c.broker.HoldCheckInterval, eo.HoldCheckInterval},
		{"broker.offset_persist_interval", c.broker.OffsetPersistInterval, eo.OffsetPersistInterval},
		{"broker.heartbeat_timeout", c.broker.HeartbeatTimeout, eo.HeartbeatTimeout},
		{"broker.heartbeat_check_interval", c.broker.HeartbeatCheckInterval, eo.HeartbeatCheckInterval},
		{"broker.lock_lifetime", c.broker.LockLifetime, eo.LockLifetime},
		{"broker.max_reconsume_times", c.broker.MaxReconsumeTimes, eo.MaxReconsumeTimes},
		{"broker.delay_levels", c.broker.DelayLevels, eo.DelayLevels},
		{"broker.transaction_timeout", c.broker.TransactionTimeout, eo.TransactionTimeout},
		{"broker.transaction_check_interval", c.broker.TransactionCheckInterval, eo.TransactionCheckInterval},
		{"broker.transaction_check_max", c.broker.TransactionCheckMax, eo.TransactionCheckMax},
		{"broker.store_host", c.broker.StoreHost, eo.StoreHost},
		{"broker.broker_name", c.broker.BrokerName, eo.BrokerName},
		{"broker.new_queue_window", c.broker.NewQueueWindow, eo.NewQueueWindow},
		{"server.listen", c.server.Listen, sv.Listen},
		{"server.vip_listen", c.server.VIPListen, sv.VIPListen},
		{"server.advertise", c.server.Advertise, sv.Advertise},
		{"server.cluster_name", c.server.ClusterName, sv.ClusterName},
		{"server.max_frame_size", c.server.MaxFrameSize, sv.MaxFrameSize},
		{"server.max_conns", c.server.MaxConns, sv.MaxConns},
		{"server.max_inflight", c.server.MaxInFlight, sv.MaxInFlight},
		{"server.idle_timeout", c.server.IdleTimeout, sv.IdleTimeout},
		{"server.write_timeout", c.server.WriteTimeout, sv.WriteTimeout},
		{"server.tls_mode", c.security.tlsMode, tlsOff},
		{"server.tls_cert", c.security.tlsCert, ""},
		{"server.tls_key", c.security.tlsKey, ""},
		{"server.tls_client_ca", c.security.tlsClientCA, ""},
		{"server.acl", c.security.acl, ""},
		{"server.zstd_batch", !c.server.NoZstdBatch, true},
		{"server.stream_pulls", !c.server.NoStreamPulls, true},
		{"server.shutdown_timeout", c.shutdownTimeout, 10 * time.Second},
		{"http.listen", c.httpListen, "127.0.0.1:9877"},
		{"uplink.gateway", c.uplink.Gateway, ""},
		{"uplink.rate_limit", c.uplink.RateLimit, uplink.DefaultOptions.RateLimit},
		{"uplink.backoff_min", c.uplink.BackoffMin, uplink.DefaultOptions.BackoffMin},
		{"uplink.backoff_max", c.uplink.BackoffMax, uplink.DefaultOptions.BackoffMax},
		{"uplink.send_timeout", c.uplink.SendTimeout, uplink.DefaultOptions.SendTimeout},
		{"uplink.scan_interval", c.uplink.ScanInterval, uplink.DefaultOptions.ScanInterval},
		{"uplink.pace_delay", c.uplink.PaceDelay, uplink.DefaultOptions.PaceDelay},
		{"uplink.up", len(c.uplink.Up), 0},
		{"uplink.down", len(c.uplink.Down), 0},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: file says %v, default is %v", tc.name, tc.got, tc.want)
		}
		checked[tc.name] = true
	}
	for _, s := range settings {
		if name := s.describe().name(); !checked[name] {
			t.Errorf("%s: this test does not check its default", name)
		}
	}
}

// TestDefaultsAreValidFlags: each setting's default, as help shows it, is a valid flag value
// that sets what the file's default sets.
func TestDefaultsAreValidFlags(t *testing.T) {
	for _, s := range settings {
		d := s.describe()
		fromFlag, err := s.fromFlag(d.defText)
		if err != nil {
			t.Errorf("-%s %s: %v", d.flag, d.defText, err)
			continue
		}
		var v map[string]any
		if _, err := toml.Decode("v = "+d.defTOML, &v); err != nil {
			t.Errorf("%s = %s: %v", d.name(), d.defTOML, err)
			continue
		}
		fromFile, err := s.fromTOML(v["v"])
		if err != nil {
			t.Errorf("%s = %s: %v", d.name(), d.defTOML, err)
			continue
		}
		a, b := newConfig(), newConfig()
		fromFlag(a)
		fromFile(b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("-%s %s and %s = %s set different configs", d.flag, d.defText, d.name(), d.defTOML)
		}
	}
}

// TestConfigRoundTrip: every key, set in a file to a value other than its default, reaches
// the broker's and the store's options.
func TestConfigRoundTrip(t *testing.T) {
	const file = "testdata/every-key.toml"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := newConfig()
	if err := parseConfig(c, data, file); err != nil {
		t.Fatal(err)
	}
	got := c.options()
	if got.Logger == nil || got.Store.Logger == nil {
		t.Fatal("options without a logger")
	}
	got.Logger, got.Store.Logger = nil, nil
	want := &edge.Options{
		Store: &store.Options{
			SegmentSize:         1 << 20,
			Flush:               commitlog.FlushAsync,
			FlushInterval:       250 * time.Millisecond,
			Linger:              3 * time.Millisecond,
			FlushBytes:          1 << 20,
			QueueFlushInterval:  2 * time.Second,
			QueueFlushBytes:     16 << 20,
			QueueSegmentEntries: 4096,
			MaxDispatchLag:      -1,
			ResidentBytes:       1 << 20,
			QueueResidentBytes:  -1,
			PrefaultBytes:       128 << 10,
			PrefaultRate:        8 << 20,
			WriteBuffer:         1 << 20,
			ZeroAhead:           64 << 10,
			MaxAge:              24 * time.Hour,
			MaxBytes:            1 << 30,
			MaxUsedRatio:        0.9,
			OnFull:              commitlog.DropOldest,
			MaxBrokenBytes:      1 << 20,
			RetentionInterval:   30 * time.Second,
			MaxPullBytes:        512 << 10,
			MaxMessageSize:      256 << 10,
		},
		MaxMessageSize:           256 << 10,
		CompressOver:             1024,
		DefaultQueues:            8,
		NoAutoCreateTopics:       true,
		DefaultSuspend:           5 * time.Second,
		MaxSuspend:               20 * time.Second,
		ShortPolling:             true,
		ShortPollingWait:         500 * time.Millisecond,
		HoldCheckInterval:        2 * time.Second,
		OffsetPersistInterval:    10 * time.Second,
		HeartbeatTimeout:         90 * time.Second,
		HeartbeatCheckInterval:   15 * time.Second,
		LockLifetime:             45 * time.Second,
		MaxReconsumeTimes:        3,
		DelayLevels:              []time.Duration{time.Second, time.Minute, time.Hour},
		TransactionTimeout:       3 * time.Second,
		TransactionCheckInterval: 45 * time.Second,
		TransactionCheckMax:      5,
		StoreHost:                netip.MustParseAddrPort("[::1]:9876"),
		BrokerName:               "gateway-7",
		NewQueueWindow:           2 * time.Minute,
	}
	if !reflect.DeepEqual(got.Store, want.Store) {
		t.Errorf("store options:\n got %+v\nwant %+v", *got.Store, *want.Store)
	}
	got.Store, want.Store = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("broker options:\n got %+v\nwant %+v", *got, *want)
	}
	wantServer := server.Options{
		Listen:        "127.0.0.1:19876",
		VIPListen:     "off",
		Advertise:     "192.168.1.7:9876",
		ClusterName:   "Edge",
		MaxFrameSize:  4 << 20,
		MaxConns:      64,
		MaxInFlight:   32,
		IdleTimeout:   time.Minute,
		WriteTimeout:  10 * time.Second,
		NoZstdBatch:   true,
		NoStreamPulls: true,
	}
	wantUplink := uplink.Options{Gateway: "gw-7", RateLimit: 1 << 20, BackoffMin: time.Second, BackoffMax: 2 * time.Minute,
		SendTimeout: 5 * time.Second, ScanInterval: time.Minute, PaceDelay: 150 * time.Millisecond, Up: []uplink.UpRule{
			{Name: "alarms", Topics: []string{"alarm", "fire-*"}, Upstream: uplink.Upstream{Addrs: "10.0.0.1:9876;10.0.0.2:9876",
				Kind: uplink.KindRocketMQ, AccessKey: "ak", SecretKey: "sk"}, TopicTemplate: "{gateway}-{topic}", Priority: 10,
				BatchSize: 8, BatchBytes: 64 << 10, Linger: 5 * time.Millisecond, Compress: true, CompressOver: 512,
				RateLimit: 65536, Overflow: uplink.DropOldest},
			{Name: "telemetry", Topics: []string{"telemetry"}, Upstream: uplink.Upstream{Addrs: "10.0.0.9:9876", Kind: uplink.KindEdgeMQ}},
		},
		Down: []uplink.DownRule{{Name: "cmd", Topic: "Commands", Upstream: uplink.Upstream{Addrs: "10.0.0.1:9876",
			Kind: uplink.KindRocketMQ, AccessKey: "ak", SecretKey: "sk"}, Group: "gw7_cmd", LocalTopic: "commands", BatchSize: 16}}}
	if !reflect.DeepEqual(c.uplink, wantUplink) {
		t.Errorf("uplink options:\n got %+v\nwant %+v", c.uplink, wantUplink)
	}
	if !reflect.DeepEqual(c.server, wantServer) || c.shutdownTimeout != 5*time.Second {
		t.Errorf("server options:\n got %+v, shutdown_timeout %v\nwant %+v, 5s", c.server, c.shutdownTimeout, wantServer)
	}
	if c.httpListen != "off" {
		t.Errorf("http.listen: got %q, want off", c.httpListen)
	}
	wantSecurity := security{tlsMode: tlsPermissive, tlsCert: "/etc/edgemq/cert.pem", tlsKey: "/etc/edgemq/key.pem",
		tlsClientCA: "/etc/edgemq/clients.pem", acl: "/etc/edgemq/acl.toml"}
	if c.security != wantSecurity {
		t.Errorf("security:\n got %+v\nwant %+v", c.security, wantSecurity)
	}
	if c.dataDir != "/var/lib/edgemq" || c.logLevel != slog.LevelDebug || c.logFormat != logJSON || c.logTimestamps != timestampsOn {
		t.Errorf("data_dir %q, log_level %v, log_format %v, log_timestamps %v", c.dataDir, c.logLevel, c.logFormat, c.logTimestamps)
	}

	// The file sets every key of the table, and not to its default: else the comparison
	// above would pass for a key that sets nothing.
	var m map[string]any
	if _, err := toml.Decode(string(data), &m); err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		d := s.describe()
		tbl := m
		if d.section != "" {
			tbl, _ = m[d.section].(map[string]any)
		}
		v, ok := tbl[d.key]
		if !ok {
			t.Errorf("%s does not set %s", file, d.name())
			continue
		}
		var def map[string]any
		toml.Decode("v = "+d.defTOML, &def)
		set, _ := s.fromTOML(v)
		setDef, _ := s.fromTOML(def["v"])
		a, b := newConfig(), newConfig()
		set(a)
		setDef(b)
		if reflect.DeepEqual(a, b) {
			t.Errorf("%s sets %s to its default", file, d.name())
		}
	}
}

// TestOneOfNamesAreThePackages: the names the file takes for flush, on_full and log_level
// mean what the packages' own parsers make of them.
func TestOneOfNamesAreThePackages(t *testing.T) {
	set := func(key, section, v string) *config {
		t.Helper()
		apply, err := lookup(section, key).fromTOML(v)
		if err != nil {
			t.Fatalf("%s = %q: %v", key, v, err)
		}
		c := newConfig()
		apply(c)
		return c
	}
	for _, name := range []string{"sync", "async"} {
		m, err := commitlog.ParseFlushMode(name)
		if c := set("flush", "store", name); err != nil || c.store.Flush != m {
			t.Errorf("flush %q: config %v, commitlog %v %v", name, c.store.Flush, m, err)
		}
	}
	for _, name := range []string{"fail", "dropOldest"} {
		p, err := commitlog.ParseOnFull(name)
		if c := set("on_full", "store", name); err != nil || c.store.OnFull != p {
			t.Errorf("on_full %q: config %v, commitlog %v %v", name, c.store.OnFull, p, err)
		}
	}
	for _, name := range []string{"debug", "info", "warn", "error"} {
		var l slog.Level
		err := l.UnmarshalText([]byte(name))
		if c := set("log_level", "", name); err != nil || c.logLevel != l {
			t.Errorf("log_level %q: config %v, slog %v %v", name, c.logLevel, l, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // the whole error; with prefix, its start
		prefix   bool
	}{
		{"syntax", "# comment\n[store]\nsegment_size = 64MiB\n",
			"t.toml:3: expected a top-level item to end with a newline, comment, or EOF, but got 'M' instead", false},
		{"duplicate key", "[store]\nflush = \"sync\"\n\nflush = \"async\"\n",
			"t.toml:4: Key 'store.flush' has already been defined.", false},
		{"duplicate section", "[store]\n[broker]\n[store]\n",
			"t.toml:3: Key 'store' has already been defined.", false},
		{"unknown key, a typo", "[store]\n\nsegmnet_size = \"1MiB\"\n",
			"t.toml:3: unknown key store.segmnet_size: did you mean segment_size?", false},
		{"unknown key", "[broker]\nflush = \"sync\"\nfoo = 1\n",
			"t.toml:2: unknown key broker.flush: flush belongs in [store]\n" +
				"t.toml:3: unknown key broker.foo: [broker] has max_message_size, compress_over, ", true},
		{"unknown top-level key", "frobnicate = 1\n",
			"t.toml:1: unknown key frobnicate: the top-level keys are data_dir, log_level, log_format and log_timestamps, and the sections [store], [broker], [server], [http] and [uplink]", false},
		{"a flat key of the old format", "max_age = \"1h\"\n",
			"t.toml:1: unknown key max_age: max_age belongs in [store]", false},
		{"a top-level key in a section", "[store]\ndata_dir = \"/d\"\n",
			"t.toml:2: unknown key store.data_dir: data_dir is a top-level key (above all sections)", false},
		{"unknown section, a typo", "data_dir = \"/d\"\n[stor]\nflush = \"sync\"\n",
			"t.toml:2: unknown section [stor]: did you mean [store]?", false},
		{"unknown section", "[relay]\nname = \"x\"\n[relay.rules]\ntopic = \"T\"\n",
			"t.toml:1: unknown section [relay]: the sections are [store], [broker], [server], [http] and [uplink]", false},
		{"unknown implied section", "\n[acl.accounts]\nname = \"x\"\n",
			"t.toml:2: unknown section [acl]: the sections are [store], [broker], [server], [http] and [uplink]", false},
		{"unknown array of tables", "[[relay]]\nname = \"a\"\n[[relay]]\nname = \"b\"\n",
			"t.toml:3: unknown section [relay]: the sections are [store], [broker], [server], [http] and [uplink]", false},
		{"an array of uplink sections", "[[uplink]]\nname = \"a\"\n",
			"t.toml:1: uplink = an array of tables: want the table [uplink]", false},
		{"unknown key of an up rule", "[[uplink.up]]\nname = \"a\"\ntopic = \"T\"\n",
			"t.toml:1: uplink.up = an array of tables: up rule 1: unknown key topic: the keys are name, topics, upstream, ", true},
		{"bad value in an up rule", "[[uplink.up]]\nname = \"a\"\n[[uplink.up]]\nname = \"b\"\nbatch_size = \"10\"\n",
			`t.toml:3: uplink.up = an array of tables: up rule 2: batch_size = "10": want a whole number`, false},
		{"unknown key of a down rule", "[[uplink.down]]\nname = \"a\"\ntopics = \"T\"\n",
			"t.toml:1: uplink.down = an array of tables: down rule 1: unknown key topics: the keys are name, topic, upstream, ", true},
		{"bad overflow", "[uplink]\nup = [{name = \"a\", overflow = \"drop\"}]\n",
			`t.toml:2: uplink.up = [a table]: up rule 1: overflow = "drop": uplink: invalid rule: overflow "drop" (want reject_new or drop_oldest)`, false},
		{"a subtable of a section", "[store.retention]\nmax_age = \"1h\"\n",
			"t.toml:1: unknown key store.retention: [store] has segment_size, flush, ", true},
		{"a section that is not a table", "store = 5\n",
			"t.toml:1: store = 5: want the table [store]", false},
		{"an array of sections", "[[broker]]\n",
			"t.toml:1: broker = an array of tables: want the table [broker]", false},
		{"wrong type", "[store]\nsegment_size = true\n",
			`t.toml:2: store.segment_size = true: want a size: a byte count, or a string such as "64MiB" (units KiB, MiB, GiB, TiB)`, false},
		{"bad size", "[store]\nsegment_size = \"64MB\"\n",
			`t.toml:2: store.segment_size = "64MB": want a size: a byte count, or a string such as "64MiB" (units KiB, MiB, GiB, TiB)`, false},
		{"size out of range", "[store]\nsegment_size = \"1KiB\"\n",
			`t.toml:2: store.segment_size = "1KiB": want 64KiB..2GiB`, false},
		{"a value not in the list", "[store]\nflush = \"fsync\"\n",
			`t.toml:2: store.flush = "fsync": want sync or async`, false},
		{"a table for a value", "[store]\nflush = { mode = \"sync\" }\n",
			`t.toml:2: store.flush = a table: want sync or async`, false},
		{"bad duration", "[store]\nmax_age = \"forever\"\n",
			`t.toml:2: store.max_age = "forever": want a duration such as "500ms", "10s" or "72h"`, false},
		{"duration as a number", "[store]\nflush_interval = 500\n",
			`t.toml:2: store.flush_interval = 500: want a duration such as "500ms", "10s" or "72h"`, false},
		{"zero for a default", "[store]\nmax_age = \"0s\"\n",
			`t.toml:2: store.max_age = "0s": want more than 0, or negative to turn it off`, false},
		{"negative duration", "[broker]\nmax_suspend = \"-1s\"\n",
			`t.toml:2: broker.max_suspend = "-1s": want more than 0`, false},
		{"ratio", "[store]\nmax_used_ratio = 1.5\n",
			`t.toml:2: store.max_used_ratio = 1.5: want more than 0 and at most 1, or negative to turn it off`, false},
		{"count out of range", "[broker]\ndefault_queues = 0\n",
			`t.toml:2: broker.default_queues = 0: want 1..1024`, false},
		{"count overflow", "[broker]\ndefault_queues = 4294967297\n",
			`t.toml:2: broker.default_queues = 4294967297: want -2147483648..2147483647`, false},
		{"float for a count", "[broker]\ndefault_queues = 4.0\n",
			`t.toml:2: broker.default_queues = 4.0: want a whole number`, false},
		{"string for a bool", "[broker]\nshort_polling = \"yes\"\n",
			`t.toml:2: broker.short_polling = "yes": want true or false`, false},
		{"bad address", "[broker]\nstore_host = \"localhost\"\n",
			`t.toml:2: broker.store_host = "localhost": want an address and port such as "127.0.0.1:10911" or "[::1]:10911"`, false},
		{"bad delay level", "[broker]\ndelay_levels = [\n  \"1s\",\n  5,\n]\n",
			`t.toml:2: broker.delay_levels = ["1s", 5]: want an array of durations such as ["1s", "5s"] (in a flag: 1s,5s); element 2 is 5`, false},
		{"no delay levels", "[broker]\ndelay_levels = []\n",
			`t.toml:2: broker.delay_levels = []: want 1 to 64 durations, each more than 0`, false},
		{"bad log level", "log_level = \"verbose\"\n",
			`t.toml:1: log_level = "verbose": want debug, info, warn or error`, false},
		{"empty data dir", "data_dir = \"\"\n",
			`t.toml:1: data_dir = "": want a path, not empty`, false},
		{"every error is reported", "log_level = \"loud\"\n[store]\nflush = \"sync\"\nmax_age = \"1d\"\n[broker]\ndefault_queues = -1\n",
			"t.toml:1: log_level = \"loud\": want debug, info, warn or error\n" +
				"t.toml:4: store.max_age = \"1d\": want a duration such as \"500ms\", \"10s\" or \"72h\"\n" +
				"t.toml:6: broker.default_queues = -1: want 1..1024", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseConfig(newConfig(), []byte(tc.in), "t.toml")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want && !(tc.prefix && strings.HasPrefix(got, tc.want)) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestConfigFormsOfValues: the forms a value may take in a file.
func TestConfigFormsOfValues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want func(c *config) any
		val  any
	}{
		{`segment_size = 1048576`, func(c *config) any { return c.store.SegmentSize }, int64(1 << 20)},
		{`segment_size = "1048576"`, func(c *config) any { return c.store.SegmentSize }, int64(1 << 20)},
		{`segment_size = "2 MiB"`, func(c *config) any { return c.store.SegmentSize }, int64(2 << 20)},
		{`segment_size = "1GiB"`, func(c *config) any { return c.store.SegmentSize }, int64(1 << 30)},
		{`max_bytes = "1TiB"`, func(c *config) any { return c.store.MaxBytes }, int64(1 << 40)},
		{`resident_bytes = "-1"`, func(c *config) any { return c.store.ResidentBytes }, int64(-1)},
		{`max_used_ratio = 1`, func(c *config) any { return c.store.MaxUsedRatio }, 1.0},
		{`max_age = "1h30m"`, func(c *config) any { return c.store.MaxAge }, 90 * time.Minute},
		{`max_age = "-1s"`, func(c *config) any { return c.store.MaxAge }, -time.Second},
	} {
		c := newConfig()
		if err := parseConfig(c, []byte("[store]\n"+tc.in+"\n"), "t.toml"); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := tc.want(c); got != tc.val {
			t.Errorf("%s: got %v, want %v", tc.in, got, tc.val)
		}
	}
	// Dotted keys and inline tables are TOML too.
	c := newConfig()
	if err := parseConfig(c, []byte("store.flush = \"async\"\nbroker = { default_queues = 2 }\n"), "t.toml"); err != nil {
		t.Fatal(err)
	}
	if c.store.Flush != commitlog.FlushAsync || c.broker.DefaultQueues != 2 {
		t.Fatalf("dotted key and inline table: flush %v, default_queues %d", c.store.Flush, c.broker.DefaultQueues)
	}
}

func TestSizeAndDurationText(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		text string
	}{{0, "0"}, {1, "1"}, {1000, "1000"}, {1 << 10, "1KiB"}, {1536, "1536"}, {64 << 20, "64MiB"}, {3 << 30, "3GiB"}, {1 << 40, "1TiB"}, {-1, "-1"}, {-(2 << 20), "-2MiB"}} {
		if got := formatSize(tc.n); got != tc.text {
			t.Errorf("formatSize(%d) = %q, want %q", tc.n, got, tc.text)
		}
		if n, ok := parseSize(tc.text); !ok || n != tc.n {
			t.Errorf("parseSize(%q) = %d %v, want %d", tc.text, n, ok, tc.n)
		}
	}
	for _, bad := range []string{"", "MiB", "1.5MiB", "1 MB", "1e3", "9223372036854775807KiB", "1  MiB"} {
		if n, ok := parseSize(bad); ok {
			t.Errorf("parseSize(%q) = %d, want an error", bad, n)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		text string
	}{{0, "0s"}, {72 * time.Hour, "72h"}, {90 * time.Minute, "90m"}, {500 * time.Millisecond, "500ms"}, {1500 * time.Millisecond, "1500ms"}, {-time.Second, "-1s"}, {3 * time.Microsecond, "3us"}, {7, "7ns"}} {
		if got := formatDuration(tc.d); got != tc.text {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.text)
		}
	}
}

// TestFlagsOverrideTheFile: defaults < config file < flags, whatever the order of the
// command line; a flag given twice takes its last value.
func TestFlagsOverrideTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "edgemq.toml")
	err := os.WriteFile(file, []byte(`
data_dir = "/from/file"
[store]
flush = "async"
max_age = "1h"
[broker]
default_queues = 8
short_polling = false
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	load := commonFlags(fs)
	err = fs.Parse([]string{"-store.flush", "sync", "-store.max_age=2h", "-config", file, "-data", "/from/flag",
		"-broker.short_polling", "-store.max_age", "3h", "-store.segment_size", "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"flag over file", c.store.Flush, commitlog.FlushSync},
		{"last flag", c.store.MaxAge, 3 * time.Hour},
		{"-data over data_dir", c.dataDir, "/from/flag"},
		{"bool flag", c.broker.ShortPolling, true},
		{"file over default", c.broker.DefaultQueues, int32(8)},
		{"flag over default", c.store.SegmentSize, int64(1 << 20)},
		{"unset: the options' default", c.store.FlushInterval, time.Duration(0)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	// No file, no flags: the defaults.
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	load = commonFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c, err := load(); err != nil || !reflect.DeepEqual(c, newConfig()) {
		t.Fatalf("no flags: %+v %v", c, err)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store.flush", "fsync"}, `invalid value "fsync" for flag -store.flush: want sync or async`},
		{[]string{"-store.segment_size", "1KiB"}, `invalid value "1KiB" for flag -store.segment_size: want 64KiB..2GiB`},
		{[]string{"-broker.delay_levels", "1s,x"}, `invalid value "1s,x" for flag -broker.delay_levels: want an array of durations`},
		{[]string{"-broker.short_polling=maybe"}, `invalid boolean value "maybe" for -broker.short_polling: want true or false`},
		{[]string{"-store.segmnet_size", "1MiB"}, `flag provided but not defined: -store.segmnet_size`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		commonFlags(fs)
		if err := fs.Parse(tc.args); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestCommandsReadTheConfigFile: a command reports a bad config file with its name and line,
// and opens the data dir a good one names.
func TestCommandsReadTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[store]\nflush = \"fsync\"\n"), 0o644)
	code, _, errOut := edgemq(t, "stats", "-config", bad)
	if want := "edgemq stats: " + bad + `:2: store.flush = "fsync": want sync or async`; code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stderr %q, want %q", code, errOut, want)
	}
	if code, _, errOut := edgemq(t, "stats", "-config", filepath.Join(dir, "missing.toml")); code != 1 || !strings.Contains(errOut, "missing.toml") {
		t.Fatalf("missing file: exit %d, %q", code, errOut)
	}

	data := filepath.Join(dir, "data")
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("data_dir = "+tomlQuote(data)+"\n[store]\nsegment_size = \"1MiB\"\n[broker]\nmax_message_size = \"256KiB\"\n"), 0o644)
	if code, out, errOut := edgemq(t, "send", "-config", good, "-topic", "T", "-create", "hello"); code != 0 {
		t.Fatalf("send: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := edgemq(t, "verify", "-config", good); code != 0 || !strings.Contains(out, "1 records") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	// The dir keeps its segment size: a flag asking for another fails, naming both. (verify,
	// which opens the store alone: edge.Open panics when store.Open fails.)
	code, _, errOut = edgemq(t, "verify", "-config", good, "-store.segment_size", "2MiB")
	if code != 1 || !strings.Contains(errOut, "1048576") || !strings.Contains(errOut, "2097152") {
		t.Fatalf("verify with another segment size: exit %d, %q", code, errOut)
	}
}

// TestHelpShowsEverySetting: `edgemq help <command>` shows every setting's flag with its
// default, for every command that opens a data dir.
func TestHelpShowsEverySetting(t *testing.T) {
	for _, c := range commands {
		if !opensDataDir(&c) {
			continue
		}
		_, out, _ := edgemq(t, "help", c.name)
		for _, s := range settings {
			d := s.describe()
			if !hasFlag(d, c.name) {
				if strings.Contains(out, "  -"+d.flag+" ") {
					t.Errorf("help %s has -%s, a flag of edgemq %s alone", c.name, d.flag, sectionCommand(d.section))
				}
				continue
			}
			if !strings.Contains(out, "  -"+d.flag+" ") && !strings.Contains(out, "  -"+d.flag+"\n") {
				t.Errorf("help %s lacks -%s", c.name, d.flag)
			}
			// flag.PrintDefaults states no empty default: the doc says what "" means.
			if !strings.Contains(out, d.summary()) || d.defText != "" && !strings.Contains(out, "(default "+d.defText+")") {
				t.Errorf("help %s lacks the help or default of -%s", c.name, d.flag)
			}
		}
	}
}
