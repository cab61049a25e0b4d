package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/store"
)

// A target is what the admin and client commands work on: the broker of a data dir opened
// in-process (localTarget), or a running server reached over TCP (remoteTarget, -server).
// Each command is written once against it.
type target interface {
	// The data path, as *edge.Broker and *remoting.Client both have it.
	Route(ctx context.Context, topic string) (mq.TopicRoute, error)
	Send(ctx context.Context, m *mq.Message, sel mq.QueueSelector) (mq.SendResult, error)
	SendAsync(ctx context.Context, m *mq.Message, sel mq.QueueSelector, done func(mq.SendResult, error)) error
	Pull(ctx context.Context, req mq.PullRequest) (mq.PullResult, error)
	CommitOffset(ctx context.Context, group string, q mq.MessageQueue, offset int64) error
	QueryOffset(ctx context.Context, group string, q mq.MessageQueue) (int64, error)
	MinOffset(ctx context.Context, q mq.MessageQueue) (int64, error)
	MaxOffset(ctx context.Context, q mq.MessageQueue) (int64, error)

	// Topics returns every topic, system topics too, sorted by name.
	Topics(ctx context.Context) ([]edge.TopicConfig, error)
	// Topic returns a topic's config; mq.ErrTopicNotExist if there is none.
	Topic(ctx context.Context, name string) (edge.TopicConfig, error)
	// CreateTopic creates a topic (0 queues: the broker's default); UpdateTopic replaces
	// its config.
	CreateTopic(ctx context.Context, cfg edge.TopicConfig) error
	UpdateTopic(ctx context.Context, cfg edge.TopicConfig) error
	DeleteTopic(ctx context.Context, name string) error
	// Queues returns the offsets of the queues of topic that hold or held messages, sorted
	// by queue id.
	Queues(ctx context.Context, topic string) ([]edge.QueueInfo, error)
	// Groups returns the consumer groups (at least those with offsets), sorted.
	Groups(ctx context.Context) ([]string, error)
	// GroupOffsets returns the offsets of group on each read queue of topic.
	GroupOffsets(ctx context.Context, group, topic string) ([]groupOffset, error)
	// ResetOffsets moves group's offsets on topic.
	ResetOffsets(ctx context.Context, group, topic string, where edge.ResetWhere, at time.Time) error
	// IsSystemTopic reports whether a topic is the broker's own (retry, schedule, ...):
	// the commands hide those unless -all. Call it after Topics.
	IsSystemTopic(name string) bool
	// StoreStats describes the commit log.
	StoreStats(ctx context.Context) (edge.StoreStats, error)
	Close() error
}

// groupOffset is a group's offset on one queue, and the queue's.
type groupOffset struct {
	QueueID              int32
	MinOffset, MaxOffset int64
	ConsumerOffset       int64 // -1: none
}

// targetFlags are the flags of a command that works on a target: the config flags (-data,
// -config, ...) and -server.
type targetFlags struct {
	fs     *flag.FlagSet
	load   func() (*config, error)
	server *string
}

// serverDoc ends the help of each command that works on a target.
const serverDoc = `

With -server ip:port (default $EDGEMQ_SERVER) it works on a running server, edgemq serve
or Apache RocketMQ (its name server's address), instead of a data dir, and prints the same.` + clientSecurityDoc

// serverEnv names the environment variable that is -server's default.
const serverEnv = "EDGEMQ_SERVER"

func addTargetFlags(fs *flag.FlagSet) *targetFlags {
	return &targetFlags{fs: fs, load: commonFlags(fs),
		server: fs.String("server", "", "work on the running server at this name server `address` (ip:port) instead of a data dir;\n"+
			"default $"+serverEnv+" (an explicit -data wins over it). EdgeMQ or Apache RocketMQ")}
}

// serverAddr returns the server address the command works on, "" for the data dir.
func (tf *targetFlags) serverAddr() (string, error) {
	given := map[string]bool{}
	tf.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["server"] {
		if given["data"] {
			return "", usageError("give -server or -data, not both")
		}
		if strings.TrimSpace(*tf.server) == "" {
			return "", usageError("-server: want a name server address ip:port")
		}
		return *tf.server, nil
	}
	if given["data"] {
		return "", nil
	}
	return os.Getenv(serverEnv), nil
}

// open opens the target: the server of -server, else the data dir for access a, its config
// adjusted by tune (may be nil).
func (tf *targetFlags) open(ctx context.Context, a access, tune func(*config)) (target, error) {
	addr, err := tf.serverAddr()
	if err != nil {
		return nil, err
	}
	c, err := tf.load()
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(c)
	}
	if addr != "" {
		return dialTarget(ctx, addr, c)
	}
	b, err := c.openBroker(a)
	if err != nil {
		return nil, err
	}
	return localTarget{b}, nil
}

// dialTarget connects to the server at addr.
func dialTarget(ctx context.Context, addr string, c *config) (target, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cred, tc, err := clientSecurity()
	if err != nil {
		return nil, err
	}
	cl, err := remoting.Dial(dctx, addr, &remoting.Options{RequestTimeout: 10 * time.Second, Credentials: cred, TLS: tc})
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", addr, err)
	}
	return remoteTarget{Client: cl, defaultQueues: c.broker.DefaultQueues, system: map[string]bool{}}, nil
}

// localTarget is the broker of a data dir, in-process.
type localTarget struct{ *edge.Broker }

func (t localTarget) Topics(context.Context) ([]edge.TopicConfig, error) {
	ts := t.Broker.Topics()
	slices.SortFunc(ts, func(a, b edge.TopicConfig) int { return strings.Compare(a.Name, b.Name) })
	return ts, nil
}

func (t localTarget) Topic(_ context.Context, name string) (edge.TopicConfig, error) {
	return t.Broker.Topic(name)
}

func (t localTarget) CreateTopic(_ context.Context, cfg edge.TopicConfig) error {
	return t.Broker.CreateTopic(cfg)
}

func (t localTarget) UpdateTopic(_ context.Context, cfg edge.TopicConfig) error {
	return t.Broker.UpdateTopic(cfg)
}

func (t localTarget) DeleteTopic(_ context.Context, name string) error {
	return t.Broker.DeleteTopic(name)
}

func (t localTarget) Queues(_ context.Context, topic string) ([]edge.QueueInfo, error) {
	qs, err := t.Broker.Queues(topic)
	if err != nil {
		return nil, err
	}
	// Only the topic's own (Queues("") lists every topic's), and those that held messages.
	return slices.DeleteFunc(qs, func(q edge.QueueInfo) bool { return q.Topic != topic || q.MaxOffset == 0 }), nil
}

func (t localTarget) Groups(context.Context) ([]string, error) {
	return slices.Sorted(slices.Values(t.Broker.Groups())), nil
}

func (t localTarget) GroupOffsets(ctx context.Context, group, topic string) ([]groupOffset, error) {
	ls, err := t.Broker.Lag(group, topic)
	if err != nil {
		return nil, err
	}
	out := make([]groupOffset, 0, len(ls))
	for _, l := range ls {
		minOff, err := t.Broker.MinOffset(ctx, mq.MessageQueue{Topic: topic, QueueID: l.QueueID})
		if err != nil {
			return nil, err
		}
		out = append(out, groupOffset{QueueID: l.QueueID, MinOffset: minOff, MaxOffset: l.MaxOffset, ConsumerOffset: l.ConsumerOffset})
	}
	return out, nil
}

func (t localTarget) ResetOffsets(_ context.Context, group, topic string, where edge.ResetWhere, at time.Time) error {
	_, err := t.Broker.ResetOffsets(group, topic, where, at)
	return err
}

func (t localTarget) IsSystemTopic(name string) bool { return mq.IsSystemTopic(name) }

func (t localTarget) StoreStats(context.Context) (edge.StoreStats, error) {
	return t.Broker.StoreStats()
}

// remoteTarget is a server reached over TCP with RocketMQ's admin requests.
type remoteTarget struct {
	*remoting.Client
	defaultQueues int32           // queues of a topic created without a count; 0: the server's default
	system        map[string]bool // the cluster's own topics besides mq.IsSystemTopic's, set by Topics
}

// rocketmqSystemTopics are the topics Apache RocketMQ's brokers make for themselves, besides
// those named rmq_sys_* and those named for a cluster or broker.
var rocketmqSystemTopics = []string{"BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
	"RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}

// withGroup calls f; if the server does not know group, it creates the group and calls f
// again. EdgeMQ knows every group; Apache RocketMQ may serve only those it was told of.
func (t remoteTarget) withGroup(ctx context.Context, group string, f func() error) error {
	err := f()
	if errors.Is(err, mq.ErrGroupNotExist) {
		if err := t.Client.CreateGroup(ctx, group); err != nil {
			return fmt.Errorf("create consumer group %s: %w", group, err)
		}
		err = f()
	}
	return err
}

func (t remoteTarget) Pull(ctx context.Context, req mq.PullRequest) (res mq.PullResult, err error) {
	err = t.withGroup(ctx, req.Group, func() error {
		res, err = t.Client.Pull(ctx, req)
		return err
	})
	return res, err
}

func (t remoteTarget) CommitOffset(ctx context.Context, group string, q mq.MessageQueue, offset int64) error {
	return t.withGroup(ctx, group, func() error { return t.Client.CommitOffset(ctx, group, q, offset) })
}

func (t remoteTarget) IsSystemTopic(name string) bool {
	return mq.IsSystemTopic(name) || strings.HasPrefix(name, "rmq_sys_") || t.system[name]
}

func (t remoteTarget) Topics(ctx context.Context) ([]edge.TopicConfig, error) {
	names, err := t.Client.TopicList(ctx)
	if err != nil {
		return nil, err
	}
	if len(t.system) == 0 {
		for _, n := range rocketmqSystemTopics {
			t.system[n] = true
		}
		bs, err := t.Client.ClusterBrokers(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			t.system[b.Name], t.system[b.Cluster], t.system[b.Cluster+"_REPLY_TOPIC"] = true, true, true
		}
	}
	out := make([]edge.TopicConfig, 0, len(names))
	for _, n := range names {
		cfg, err := t.Topic(ctx, n)
		if errors.Is(err, mq.ErrTopicNotExist) {
			continue // deleted meanwhile, or a name server's topic of no broker
		}
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", n, err)
		}
		out = append(out, cfg)
	}
	return out, nil
}

func (t remoteTarget) Topic(ctx context.Context, name string) (edge.TopicConfig, error) {
	cfg, err := t.Client.TopicConfig(ctx, name)
	if err != nil {
		return edge.TopicConfig{}, err
	}
	d, err := store.ParseDurability(cfg.Attributes[edge.DurabilityAttr])
	if err != nil {
		return edge.TopicConfig{}, fmt.Errorf("topic %s: %w", name, err)
	}
	return edge.TopicConfig{Name: cfg.Name, ReadQueues: cfg.ReadQueues, WriteQueues: cfg.WriteQueues, Perm: cfg.Perm, Order: cfg.Order, Durability: d}, nil
}

func (t remoteTarget) CreateTopic(ctx context.Context, cfg edge.TopicConfig) error {
	if _, err := t.Topic(ctx, cfg.Name); err == nil {
		return fmt.Errorf("%w: %q", edge.ErrTopicExists, cfg.Name)
	} else if !errors.Is(err, mq.ErrTopicNotExist) {
		return err
	}
	if cfg.Perm == 0 {
		cfg.Perm = mq.PermRead | mq.PermWrite
	}
	if cfg.ReadQueues == 0 {
		cfg.ReadQueues = t.defaultQueues
	}
	if cfg.WriteQueues == 0 {
		cfg.WriteQueues = t.defaultQueues
	}
	return t.UpdateTopic(ctx, cfg)
}

func (t remoteTarget) UpdateTopic(ctx context.Context, cfg edge.TopicConfig) error {
	// The attribute goes only where it means something: a broker that does not know it
	// (Apache RocketMQ) refuses it.
	var attrs map[string]string
	if cfg.Durability != store.DurabilityDefault {
		attrs = map[string]string{edge.DurabilityAttr: cfg.Durability.String()}
	} else if old, err := t.Topic(ctx, cfg.Name); err == nil && old.Durability != store.DurabilityDefault {
		attrs = map[string]string{edge.DurabilityAttr: store.DurabilityDefault.String()}
	}
	return t.Client.CreateTopic(ctx, remoting.TopicConfig{Name: cfg.Name, ReadQueues: cfg.ReadQueues,
		WriteQueues: cfg.WriteQueues, Perm: cfg.Perm, Order: cfg.Order, Attributes: attrs})
}

func (t remoteTarget) DeleteTopic(ctx context.Context, name string) error {
	return t.Client.DeleteTopic(ctx, name)
}

func (t remoteTarget) Queues(ctx context.Context, topic string) ([]edge.QueueInfo, error) {
	st, err := t.Client.TopicStats(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []edge.QueueInfo
	for _, q := range st {
		if q.MaxOffset > 0 {
			out = append(out, edge.QueueInfo{Topic: topic, QueueID: q.Queue.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset})
		}
	}
	return out, nil
}

func (t remoteTarget) Groups(ctx context.Context) ([]string, error) {
	topics, err := t.Client.TopicList(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, topic := range topics {
		gs, err := t.Client.ConsumerGroups(ctx, topic)
		if errors.Is(err, mq.ErrTopicNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the groups of topic %s: %w", topic, err)
		}
		out = append(out, gs...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (t remoteTarget) GroupOffsets(ctx context.Context, group, topic string) ([]groupOffset, error) {
	st, err := t.Client.TopicStats(ctx, topic)
	if err != nil {
		return nil, err
	}
	cfg, err := t.Topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	cs, err := t.Client.ConsumeStats(ctx, group, topic)
	if err != nil && !errors.Is(err, mq.ErrGroupNotExist) {
		return nil, err
	}
	consumer := map[int32]int64{}
	for _, c := range cs {
		consumer[c.Queue.QueueID] = c.ConsumerOffset
	}
	var out []groupOffset
	for _, q := range st {
		if q.Queue.QueueID >= cfg.ReadQueues {
			continue
		}
		g := groupOffset{QueueID: q.Queue.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, ConsumerOffset: -1}
		co, ok := consumer[g.QueueID]
		if !ok || co == 0 {
			// Brokers answer 0 for "no offset" too: ask the queue's own.
			co, err = t.Client.QueryOffset(ctx, group, q.Queue)
			if errors.Is(err, mq.ErrOffsetNotFound) {
				co, err = -1, nil
			}
			if err != nil {
				return nil, err
			}
		}
		g.ConsumerOffset = co
		out = append(out, g)
	}
	return out, nil
}

func (t remoteTarget) ResetOffsets(ctx context.Context, group, topic string, where edge.ResetWhere, at time.Time) error {
	ts := at.UnixMilli()
	switch where {
	case edge.ResetToFirst:
		ts = 0
	case edge.ResetToLast:
		ts = -1
	}
	err := t.withGroup(ctx, group, func() error {
		_, err := t.Client.ResetOffsets(ctx, group, topic, ts)
		return err
	})
	var re *remoting.ResponseError
	if errors.As(err, &re) && re.Code == remoting.ConsumerNotOnline {
		// Apache RocketMQ's broker resets only through the group's running consumers;
		// without any, the offsets are committed directly, as mqadmin then does.
		return t.resetByCommit(ctx, group, topic, where, at)
	}
	return err
}

// resetByCommit moves group's offsets on each read queue of topic by committing them.
func (t remoteTarget) resetByCommit(ctx context.Context, group, topic string, where edge.ResetWhere, at time.Time) error {
	r, err := t.Client.Route(ctx, topic)
	if err != nil {
		return err
	}
	for _, q := range r.ReadQueues() {
		var off int64
		switch where {
		case edge.ResetToFirst:
			off, err = t.Client.MinOffset(ctx, q)
		case edge.ResetToLast:
			off, err = t.Client.MaxOffset(ctx, q)
		default:
			off, err = t.Client.SearchOffset(ctx, q, at)
		}
		if err == nil {
			err = t.CommitOffset(ctx, group, q, off)
		}
		if err != nil {
			return fmt.Errorf("reset %s queue %d: %w", topic, q.QueueID, err)
		}
	}
	return nil
}

func (t remoteTarget) StoreStats(ctx context.Context) (edge.StoreStats, error) {
	infos, err := t.Client.BrokerRuntimeInfo(ctx)
	if err != nil {
		return edge.StoreStats{}, err
	}
	var st edge.StoreStats
	// With several brokers: the sum of their segments, the first one's positions.
	for i, addr := range slices.Sorted(maps.Keys(infos)) {
		tb := infos[addr]
		num := func(k string) int64 { n, _ := strconv.ParseInt(tb[k], 10, 64); return n }
		st.SegmentBytes += num("commitLogDiskBytes")
		if i == 0 {
			st.MinPos, st.MaxPos = num("commitLogMinOffset"), num("commitLogMaxOffset")
			st.DurablePos = cmp.Or(num("commitLogDurableOffset"), st.MaxPos)
		}
		// Recovery: summed over the brokers (an Apache RocketMQ broker has none of these).
		r := &st.Recovery
		r.Records += num(server.KeyRecoveryRecords)
		r.Bytes += num(server.KeyRecoveryBytes)
		r.QueueEntries += num(server.KeyRecoveryQueueEntries)
		r.Queues += int(num(server.KeyRecoveryQueues))
		r.EmptyRemoved += int(num(server.KeyRecoveryEmptyRemoved))
		r.BrokenMade += int(num(server.KeyRecoveryBrokenMade))
		r.BrokenDeleted += int(num(server.KeyRecoveryBrokenDeleted))
		r.BrokenFiles += int(num(server.KeyBrokenFiles))
		r.BrokenBytes += num(server.KeyBrokenBytes)
	}
	return st, nil
}
