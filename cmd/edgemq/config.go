package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// config is everything a config file (configs/edgemq.conf documents every key) or the
// command line can set.
type config struct {
	dataDir  string
	logLevel slog.Level
	store    store.Options
	broker   edge.Options
}

// setting is one config key: its parser into the config.
type setting struct {
	key   string
	apply func(c *config, v string) error
}

var settings = []setting{
	{"data_dir", func(c *config, v string) error { c.dataDir = v; return nil }},
	{"log_level", func(c *config, v string) error { return c.logLevel.UnmarshalText([]byte(v)) }},
	{"segment_size", bytesSetting(func(c *config) *int64 { return &c.store.SegmentSize })},
	{"flush", func(c *config, v string) error {
		m, err := commitlog.ParseFlushMode(v)
		c.store.Flush = m
		return err
	}},
	{"flush_interval", durationSetting(func(c *config) *time.Duration { return &c.store.FlushInterval })},
	{"flush_bytes", bytesSetting(func(c *config) *int64 { return &c.store.FlushBytes })},
	{"queue_flush_interval", durationSetting(func(c *config) *time.Duration { return &c.store.QueueFlushInterval })},
	{"queue_flush_bytes", bytesSetting(func(c *config) *int64 { return &c.store.QueueFlushBytes })},
	{"queue_segment_entries", intSetting(func(c *config) *int { return &c.store.QueueSegmentEntries })},
	{"max_dispatch_lag", bytesSetting(func(c *config) *int64 { return &c.store.MaxDispatchLag })},
	{"resident_bytes", bytesSetting(func(c *config) *int64 { return &c.store.ResidentBytes })},
	{"queue_resident_bytes", bytesSetting(func(c *config) *int64 { return &c.store.QueueResidentBytes })},
	{"prefault_bytes", bytesSetting(func(c *config) *int64 { return &c.store.PrefaultBytes })},
	{"prefault_rate", bytesSetting(func(c *config) *int64 { return &c.store.PrefaultRate })},
	{"max_age", durationSetting(func(c *config) *time.Duration { return &c.store.MaxAge })},
	{"max_bytes", bytesSetting(func(c *config) *int64 { return &c.store.MaxBytes })},
	{"max_used_ratio", func(c *config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		c.store.MaxUsedRatio = f
		return err
	}},
	{"on_full", func(c *config, v string) error {
		p, err := commitlog.ParseOnFull(v)
		c.store.OnFull = p
		return err
	}},
	{"retention_interval", durationSetting(func(c *config) *time.Duration { return &c.store.RetentionInterval })},
	{"max_pull_bytes", intSetting(func(c *config) *int { return &c.store.MaxPullBytes })},
	{"max_message_size", intSetting(func(c *config) *int { return &c.broker.MaxMessageSize })},
	{"default_queues", func(c *config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		c.broker.DefaultQueues = int32(n)
		return err
	}},
	{"auto_create_topics", func(c *config, v string) error {
		on, err := strconv.ParseBool(v)
		c.broker.NoAutoCreateTopics = !on
		return err
	}},
	{"compress_over", intSetting(func(c *config) *int { return &c.broker.CompressOver })},
	{"default_suspend", durationSetting(func(c *config) *time.Duration { return &c.broker.DefaultSuspend })},
	{"max_suspend", durationSetting(func(c *config) *time.Duration { return &c.broker.MaxSuspend })},
	{"short_polling", func(c *config, v string) error {
		on, err := strconv.ParseBool(v)
		c.broker.ShortPolling = on
		return err
	}},
	{"short_polling_wait", durationSetting(func(c *config) *time.Duration { return &c.broker.ShortPollingWait })},
	{"hold_check_interval", durationSetting(func(c *config) *time.Duration { return &c.broker.HoldCheckInterval })},
	{"offset_persist_interval", durationSetting(func(c *config) *time.Duration { return &c.broker.OffsetPersistInterval })},
	{"heartbeat_timeout", durationSetting(func(c *config) *time.Duration { return &c.broker.HeartbeatTimeout })},
	{"heartbeat_check_interval", durationSetting(func(c *config) *time.Duration { return &c.broker.HeartbeatCheckInterval })},
	{"lock_lifetime", durationSetting(func(c *config) *time.Duration { return &c.broker.LockLifetime })},
	{"max_reconsume_times", func(c *config, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		c.broker.MaxReconsumeTimes = int32(n)
		return err
	}},
	{"delay_levels", func(c *config, v string) error {
		c.broker.DelayLevels = nil
		for _, f := range strings.Fields(v) {
			d, err := time.ParseDuration(f)
			if err != nil {
				return err
			}
			c.broker.DelayLevels = append(c.broker.DelayLevels, d)
		}
		return nil
	}},
	{"store_host", func(c *config, v string) error {
		ap, err := netip.ParseAddrPort(v)
		c.broker.StoreHost = ap
		return err
	}},
}

func durationSetting(field func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		*field(c) = d
		return err
	}
}

func intSetting(field func(*config) *int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := parseBytes(v)
		*field(c) = int(n)
		return err
	}
}

func bytesSetting(field func(*config) *int64) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := parseBytes(v)
		*field(c) = n
		return err
	}
}

// parseBytes parses a count with an optional KiB, MiB or GiB suffix.
func parseBytes(v string) (int64, error) {
	mult := int64(1)
	for _, s := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, s.suffix); ok {
			v, mult = strings.TrimSpace(n), s.m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number (optionally with KiB, MiB or GiB)", v)
	}
	return n * mult, nil
}

// set applies one key.
func (c *config) set(key, value string) error {
	for _, s := range settings {
		if s.key == key {
			if err := s.apply(c, value); err != nil {
				return fmt.Errorf("%s = %s: %w", key, value, err)
			}
			return nil
		}
	}
	keys := make([]string, len(settings))
	for i, s := range settings {
		keys[i] = s.key
	}
	sort.Strings(keys)
	return fmt.Errorf("unknown key %q (known: %s)", key, strings.Join(keys, ", "))
}

// loadConfig reads a config file: "key = value" lines; "#" starts a comment.
func loadConfig(c *config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return parseConfig(c, f, path)
}

func parseConfig(c *config, r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%s:%d: want key = value, got %q", name, n, line)
		}
		if err := c.set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	return sc.Err()
}

// options returns the broker options the config describes, logging to stderr.
func (c *config) options() *edge.Options {
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: c.logLevel}))
	o := c.broker
	so := c.store
	so.Logger = lg
	o.Store = &so
	o.Logger = lg
	return &o
}
