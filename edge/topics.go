package edge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/meta"
)

const maxQueues = 1024

// TopicConfig describes a topic.
type TopicConfig struct {
	Name        string
	ReadQueues  int32 // queues consumers read; default Options.DefaultQueues
	WriteQueues int32 // queues producers write; default Options.DefaultQueues
	Perm        int32 // mq.PermRead|mq.PermWrite (default) and mq.PermInherit bits
	Order       bool  // ordered topic: producers should pick queues by key
	// Durability is when a send to the topic returns: store.DurabilityDefault (the store's
	// flush policy), store.DurabilitySync (once an fsync covers the message) or
	// store.DurabilityAsync (once written: a power cut may lose the sends of the last
	// store.Options.FlushInterval; with the sync flush policy consumers see a message once
	// it is durable, up to that much after Send returned).
	Durability store.Durability
}

// DurabilityAttr is the topic attribute, as RocketMQ's "+key=value" topic attributes carry
// it, that sets TopicConfig.Durability: "sync", "async" or "default".
const DurabilityAttr = "durability"

// topic is a topic's config and its round-robin cursor.
type topic struct {
	cfg TopicConfig
	rr  atomic.Uint32
	// isSendable(cfg.Name), found once.
	sendable bool
	in       *counters // the name's send counters in Broker.stats, found once
}

func (t *topicTable) newTopic(cfg TopicConfig) *topic {
	return &topic{cfg: cfg, sendable: isSendable(cfg.Name), in: counter(&t.b.stats.topics, cfg.Name)}
}

// isSendable reports whether producers may send to a topic of this name: a user topic, or a
// retry topic (clients whose send-back fails send to %RETRY%<group> themselves).
func isSendable(name string) bool { return mq.IsRetryTopic(name) || !mq.IsSystemTopic(name) }

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
		d, err := store.ParseDurability(s.Durability)
		if err != nil { // a value from a newer version: the safe choice
			b.lg.Warn("topic has an unknown durability: acknowledging its sends once durable", "topic", s.Name, "err", err)
			d = store.DurabilitySync
		}
		t.m[s.Name] = t.newTopic(TopicConfig{Name: s.Name, ReadQueues: s.ReadQueues, WriteQueues: s.WriteQueues, Perm: s.Perm, Order: s.Order, Durability: d})
	}
	// More delay levels than when the schedule topic was made: it needs a queue for each.
	if tp, ok := t.m[mq.ScheduleTopic]; ok && tp.cfg.WriteQueues < int32(len(b.opts.DelayLevels)) {
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
		cfg.Perm = mq.PermReadWrite
	}
	if cfg.ReadQueues < 0 || cfg.ReadQueues > maxQueues || cfg.WriteQueues < 0 || cfg.WriteQueues > maxQueues {
		return nil, fmt.Errorf("%w: %d read and %d write queues, each must be 1..%d", mq.ErrInvalidArgument, cfg.ReadQueues, cfg.WriteQueues, maxQueues)
	}
	if cfg.Perm&^(mq.PermRead|mq.PermWrite|mq.PermInherit) != 0 {
		return nil, fmt.Errorf("%w: permission %d", mq.ErrInvalidArgument, cfg.Perm)
	}
	durability := ""
	switch cfg.Durability {
	case store.DurabilityDefault:
	case store.DurabilitySync, store.DurabilityAsync:
		durability = cfg.Durability.String()
	default:
		return nil, fmt.Errorf("%w: durability %v", mq.ErrInvalidArgument, cfg.Durability)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[cfg.Name]; ok && create {
		return old, fmt.Errorf("%w: %q", ErrTopicExists, cfg.Name)
	}
	err := t.b.meta.PutTopic(meta.Topic{Name: cfg.Name, ReadQueues: cfg.ReadQueues, WriteQueues: cfg.WriteQueues,
		Perm: cfg.Perm, Order: cfg.Order, Created: t.b.opts.Now().UnixMilli(), Durability: durability})
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
// topics when auto-creation is on. It validates the name of a topic it creates, once.
func (t *topicTable) ensure(name string) (*topic, error) {
	if tp, ok := t.get(name); ok {
		return tp, nil
	}
	cfg, err := t.configFor(name)
	if err != nil {
		return nil, err
	}
	tp, err := t.put(cfg, true)
	if err != nil && tp != nil {
		return tp, nil // created meanwhile
	}
	return tp, err
}

// configFor validates name and returns the config ensure gives a topic of that name:
// system topics (retry, DLQ, schedule) always, user topics when auto-creation is on.
func (t *topicTable) configFor(name string) (TopicConfig, error) {
	var cfg TopicConfig
	switch {
	case mq.IsRetryTopic(name) || mq.IsDLQTopic(name):
		if err := mq.ValidateSubscribedTopic(name); err != nil {
			return cfg, err
		}
		cfg = TopicConfig{Name: name, ReadQueues: 1, WriteQueues: 1, Perm: mq.PermReadWrite}
	case name == mq.TransHalfTopic || name == mq.TransOpTopic:
		cfg = TopicConfig{Name: name, ReadQueues: 1, WriteQueues: 1, Perm: mq.PermReadWrite}
	case name == mq.ScheduleTopic:
		n := int32(len(t.b.opts.DelayLevels))
		cfg = TopicConfig{Name: name, ReadQueues: n, WriteQueues: n, Perm: mq.PermReadWrite}
	default:
		if err := mq.ValidateTopic(name); err != nil {
			return cfg, err
		}
		if t.b.opts.NoAutoCreateTopics {
			return cfg, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, name)
		}
		cfg = TopicConfig{Name: name, ReadQueues: t.b.opts.DefaultQueues, WriteQueues: t.b.opts.DefaultQueues, Perm: mq.PermReadWrite}
	}
	return cfg, nil
}

func (t *topicTable) delete(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[name]; !ok {
		return fmt.Errorf("%w: %q", mq.ErrTopicNotExist, name)
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

// CreateTopic creates a topic; zero queue counts and permission take their defaults. Errors:
// ErrClosed; ErrTopicExists if the topic exists; mq.ErrInvalidTopic for a bad or reserved
// name (see mq.ValidateTopic); mq.ErrInvalidArgument for queue counts outside 1..1024 or a
// permission with bits other than mq.PermRead, mq.PermWrite and mq.PermInherit.
func (b *Broker) CreateTopic(cfg TopicConfig) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := mq.ValidateTopic(cfg.Name); err != nil {
		return err
	}
	_, err := b.topics.put(cfg, true)
	return err
}

// UpdateTopic creates or replaces a topic's config. Messages already stored in queues beyond
// new, smaller queue counts stay readable by offset but are no longer served to new pulls.
// Errors as CreateTopic's, but for ErrTopicExists.
func (b *Broker) UpdateTopic(cfg TopicConfig) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := mq.ValidateTopic(cfg.Name); err != nil {
		return err
	}
	_, err := b.topics.put(cfg, false)
	return err
}

// DeleteTopic deletes a topic's config. Its messages stay in the store until retention
// removes them; a topic created again with the same name continues its queue offsets.
// Errors: ErrClosed, mq.ErrTopicNotExist.
func (b *Broker) DeleteTopic(name string) error {
	if err := b.check(); err != nil {
		return err
	}
	return b.topics.delete(name)
}

// Topic returns a topic's config. Errors: ErrClosed; mq.ErrTopicNotExist.
func (b *Broker) Topic(name string) (TopicConfig, error) {
	if err := b.check(); err != nil {
		return TopicConfig{}, err
	}
	tp, ok := b.topics.get(name)
	if !ok {
		return TopicConfig{}, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, name)
	}
	return tp.cfg, nil
}

// Route returns the route of topic: this broker, at Options.StoreHost, with the topic's
// queues and permission (what a name server answers for a topic this broker serves).
//
// Two topics have a route before they exist, as RocketMQ's name server answers them: a
// group's retry topic %RETRY%<group>, which is made on its first lookup (consumers look it
// up before their first heartbeat, which would make it, and a consumer that finds no route
// for a topic it subscribes to may refuse to start), and, unless
// Options.NoAutoCreateTopics, RocketMQ's template topic mq.DefaultTopic (TBW102), with
// Options.DefaultQueues queues and permission read, write and inherit, which tells
// producers that a send to a topic without a route will create it.
//
// Errors: ErrClosed, ctx.Err(), mq.ErrTopicNotExist; mq.ErrInvalidTopic for a retry topic
// whose name is not valid.
func (b *Broker) Route(ctx context.Context, topic string) (mq.TopicRoute, error) {
	if err := b.checkCtx(ctx); err != nil {
		return mq.TopicRoute{}, err
	}
	tp, ok := b.topics.get(topic)
	var cfg TopicConfig
	switch {
	case ok:
		cfg = tp.cfg
	case mq.IsRetryTopic(topic):
		tp, err := b.topics.ensure(topic)
		if err != nil {
			return mq.TopicRoute{}, err
		}
		cfg = tp.cfg
	case topic == mq.DefaultTopic && !b.opts.NoAutoCreateTopics:
		cfg = TopicConfig{Name: topic, ReadQueues: b.opts.DefaultQueues, WriteQueues: b.opts.DefaultQueues,
			Perm: mq.PermReadWrite | mq.PermInherit}
	default:
		return mq.TopicRoute{}, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, topic)
	}
	name := b.opts.BrokerName
	return mq.TopicRoute{
		Topic:   topic,
		Brokers: []mq.BrokerData{{Name: name, Addrs: map[int64]string{mq.MasterID: b.opts.StoreHost.String()}}},
		Queues:  []mq.QueueData{{BrokerName: name, ReadQueues: cfg.ReadQueues, WriteQueues: cfg.WriteQueues, Perm: cfg.Perm}},
	}, nil
}

// Topics lists every topic, system topics included, sorted by name. None after Close.
func (b *Broker) Topics() []TopicConfig {
	if b.check() != nil {
		return nil
	}
	return b.topics.list()
}
