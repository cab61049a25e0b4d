package edge

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/store/meta"
)

// Topic permissions, RocketMQ's PermName bits.
const (
	PermInherit int32 = 1
	PermWrite   int32 = 2
	PermRead    int32 = 4
	// PermReadWrite is the permission of a normal topic.
	PermReadWrite = PermRead | PermWrite
)

// Reserved topic names and prefixes.
const (
	// RetryPrefix starts the retry topic of a consumer group: %RETRY%<group>.
	RetryPrefix = "%RETRY%"
	// DLQPrefix starts the dead-letter topic of a consumer group: %DLQ%<group>.
	DLQPrefix = "%DLQ%"
	// ScheduleTopic holds delayed messages until they are due, one queue per delay level.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// DefaultTopic is RocketMQ's template topic for auto-creation (TBW102).
	DefaultTopic = "TBW102"
)

const (
	maxTopicLen       = 127
	maxSystemTopicLen = 255
	maxQueues         = 1024
)

// TopicConfig describes a topic.
type TopicConfig struct {
	Name        string
	ReadQueues  int32 // queues consumers read; default Options.DefaultQueues
	WriteQueues int32 // queues producers write; default Options.DefaultQueues
	Perm        int32 // PermRead|PermWrite (default) and PermInherit bits
	Order       bool  // ordered topic: producers should pick queues by key
}

// RetryTopic returns the retry topic of group.
func RetryTopic(group string) string { return RetryPrefix + group }

// DLQTopic returns the dead-letter topic of group.
func DLQTopic(group string) string { return DLQPrefix + group }

// ValidateTopic checks a topic name a user may create or send to: 1 to 127 characters of
// [A-Za-z0-9_%|-], not a retry, DLQ or system topic.
func ValidateTopic(name string) error {
	if err := validateName(name, maxTopicLen); err != nil {
		return err
	}
	if isSystemTopic(name) {
		return fmt.Errorf("%w: %q is reserved", ErrInvalidTopic, name)
	}
	return nil
}

func validateName(name string, maxLen int) error {
	if name == "" || len(name) > maxLen {
		return fmt.Errorf("%w: %q must be 1 to %d characters", ErrInvalidTopic, name, maxLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|') {
			return fmt.Errorf("%w: %q has %q; allowed are A-Z a-z 0-9 _ - %% |", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

func isSystemTopic(name string) bool {
	return strings.HasPrefix(name, RetryPrefix) || strings.HasPrefix(name, DLQPrefix) ||
		name == ScheduleTopic || name == DefaultTopic || strings.HasPrefix(name, "RMQ_SYS_")
}

// topic is a topic's config and its round-robin cursor.
type topic struct {
	cfg      TopicConfig
	rr       atomic.Uint32
	sendable bool      // the name passes validateSendTopic: sends need not check it again
	in       *counters // the name's send counters in Broker.stats, found once
}

func (t *topicTable) newTopic(cfg TopicConfig) *topic {
	return &topic{cfg: cfg, sendable: validateSendTopic(cfg.Name) == nil, in: counter(&t.b.stats.topics, cfg.Name)}
}

// topicTable holds the topics in memory, backed by the meta store.
type topicTable struct {
	b  *Broker
	mu sync.RWMutex // guards m; writers also write meta under it so both agree
	m  map[string]*topic
}

func newTopicTable(b *Broker) (*topicTable, error) {
	t := &topicTable{b: b, m: map[string]*topic{}}
	stored, err := b.meta.Topics()
	if err != nil {
		return nil, fmt.Errorf("edge: load topics: %w", err)
	}
	for _, s := range stored {
		t.m[s.Name] = t.newTopic(TopicConfig{Name: s.Name, ReadQueues: s.ReadQueues, WriteQueues: s.WriteQueues, Perm: s.Perm, Order: s.Order})
	}
	// More delay levels than when the schedule topic was made: it needs a queue for each.
	if tp, ok := t.m[ScheduleTopic]; ok && tp.cfg.WriteQueues < int32(len(b.opts.DelayLevels)) {
		cfg := tp.cfg
		cfg.ReadQueues, cfg.WriteQueues = int32(len(b.opts.DelayLevels)), int32(len(b.opts.DelayLevels))
		if _, err := t.put(cfg, false); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *topicTable) get(name string) (*topic, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tp, ok := t.m[name]
	return tp, ok
}

// put stores cfg, replacing any topic of that name; create refuses an existing one.
func (t *topicTable) put(cfg TopicConfig, create bool) (*topic, error) {
	if cfg.ReadQueues == 0 {
		cfg.ReadQueues = t.b.opts.DefaultQueues
	}
	if cfg.WriteQueues == 0 {
		cfg.WriteQueues = t.b.opts.DefaultQueues
	}
	if cfg.Perm == 0 {
		cfg.Perm = PermReadWrite
	}
	if cfg.ReadQueues < 0 || cfg.ReadQueues > maxQueues || cfg.WriteQueues < 0 || cfg.WriteQueues > maxQueues {
		return nil, fmt.Errorf("%w: %d read and %d write queues, each must be 1..%d", ErrInvalidArgument, cfg.ReadQueues, cfg.WriteQueues, maxQueues)
	}
	if cfg.Perm&^(PermRead|PermWrite|PermInherit) != 0 {
		return nil, fmt.Errorf("%w: permission %d", ErrInvalidArgument, cfg.Perm)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[cfg.Name]; ok && create {
		return old, fmt.Errorf("%w: %q", ErrTopicExists, cfg.Name)
	}
	err := t.b.meta.PutTopic(meta.Topic{Name: cfg.Name, ReadQueues: cfg.ReadQueues, WriteQueues: cfg.WriteQueues,
		Perm: cfg.Perm, Order: cfg.Order, Created: t.b.clock.Now().UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("edge: store topic %q: %w", cfg.Name, err)
	}
	tp := t.newTopic(cfg)
	if old, ok := t.m[cfg.Name]; ok {
		tp.rr.Store(old.rr.Load())
	}
	t.m[cfg.Name] = tp
	return tp, nil
}

// ensure returns the topic, creating system topics (retry, DLQ, schedule) as needed and user
// topics when auto-creation is on.
func (t *topicTable) ensure(name string) (*topic, error) {
	if tp, ok := t.get(name); ok {
		return tp, nil
	}
	switch {
	case strings.HasPrefix(name, RetryPrefix) || strings.HasPrefix(name, DLQPrefix):
		if err := validateName(name, maxSystemTopicLen); err != nil {
			return nil, err
		}
		tp, err := t.put(TopicConfig{Name: name, ReadQueues: 1, WriteQueues: 1, Perm: PermReadWrite}, true)
		if err != nil && tp != nil {
			return tp, nil // created meanwhile
		}
		return tp, err
	case name == ScheduleTopic:
		n := int32(len(t.b.opts.DelayLevels))
		tp, err := t.put(TopicConfig{Name: name, ReadQueues: n, WriteQueues: n, Perm: PermReadWrite}, true)
		if err != nil && tp != nil {
			return tp, nil
		}
		return tp, err
	}
	if err := ValidateTopic(name); err != nil {
		return nil, err
	}
	if t.b.opts.NoAutoCreateTopics {
		return nil, fmt.Errorf("%w: %q", ErrTopicNotExist, name)
	}
	tp, err := t.put(TopicConfig{Name: name}, true)
	if err != nil && tp != nil {
		return tp, nil
	}
	return tp, err
}

func (t *topicTable) delete(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[name]; !ok {
		return fmt.Errorf("%w: %q", ErrTopicNotExist, name)
	}
	if err := t.b.meta.DeleteTopic(name); err != nil {
		return fmt.Errorf("edge: delete topic %q: %w", name, err)
	}
	delete(t.m, name)
	return nil
}

func (t *topicTable) list() []TopicConfig {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]TopicConfig, 0, len(t.m))
	for _, tp := range t.m {
		out = append(out, tp.cfg)
	}
	slices.SortFunc(out, func(a, b TopicConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// CreateTopic creates a topic; zero queue counts and permission take their defaults. It fails
// with ErrTopicExists if the topic exists, ErrInvalidTopic for a bad or reserved name.
func (b *Broker) CreateTopic(cfg TopicConfig) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := ValidateTopic(cfg.Name); err != nil {
		return err
	}
	_, err := b.topics.put(cfg, true)
	return err
}

// UpdateTopic creates or replaces a topic's config. Messages already stored in queues beyond
// new, smaller queue counts stay readable by offset but are no longer served to new pulls.
func (b *Broker) UpdateTopic(cfg TopicConfig) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := ValidateTopic(cfg.Name); err != nil {
		return err
	}
	_, err := b.topics.put(cfg, false)
	return err
}

// DeleteTopic deletes a topic's config. Its messages stay in the store until retention
// removes them; a topic created again with the same name continues its queue offsets.
func (b *Broker) DeleteTopic(name string) error {
	if err := b.check(); err != nil {
		return err
	}
	return b.topics.delete(name)
}

// Topic returns a topic's config.
func (b *Broker) Topic(name string) (TopicConfig, bool) {
	tp, ok := b.topics.get(name)
	if !ok {
		return TopicConfig{}, false
	}
	return tp.cfg, true
}

// Topics lists every topic, system topics included, sorted by name.
func (b *Broker) Topics() []TopicConfig { return b.topics.list() }
