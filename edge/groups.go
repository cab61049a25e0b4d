package edge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store/meta"
)

// member is one client of a consumer group, as its last heartbeat told it.
type member struct {
	model       mq.MessageModel
	consumeType mq.ConsumeType
	fromWhere   string
	subs        map[string]mq.Subscription // by topic
	last        time.Time                  // last heartbeat
	onChange    func(group string)
	onReset     func(group, topic string, offsets map[mq.MessageQueue]int64)
}

// consumerGroup is a group the broker has seen. It stays known when its last member leaves.
type consumerGroup struct {
	model   mq.MessageModel // of the latest heartbeat
	members map[string]*member
}

// groupRegistry is the client registry: consumer groups and their members, and producer
// groups, kept up by heartbeats (RocketMQ's ConsumerManager and ProducerManager).
//
// Goroutines: run, the expiry loop, started by Open and stopped by Close; and the
// notifier's delivery goroutines, at most one per (client, group) at a time, which run
// waits for before it returns.
type groupRegistry struct {
	b         *Broker
	mu        sync.RWMutex                    // guards groups and producers
	groups    map[string]*consumerGroup       // every consumer group seen, stored ones included
	producers map[string]map[string]time.Time // producer group -> client -> last heartbeat
	notes     notifier
}

func newGroupRegistry(b *Broker) *groupRegistry {
	g := &groupRegistry{b: b, groups: map[string]*consumerGroup{}, producers: map[string]map[string]time.Time{}}
	g.notes.init()
	stored, err := b.meta.Groups()
	if err != nil {
		// Not fatal: the groups are known again on their members' next heartbeat.
		b.lg.Error("load consumer groups", "err", err)
	}
	for _, sg := range stored {
		model := mq.Clustering
		if sg.BroadcastEnable {
			model = mq.Broadcasting
		}
		g.groups[sg.Name] = &consumerGroup{model: model, members: map[string]*member{}}
	}
	return g
}

// run drops members and producers not heard from for Options.HeartbeatTimeout, checking
// every Options.HeartbeatCheckInterval, until the broker closes. It also drops expired queue
// locks, which are as good as free. Before it returns it stops the notifier and waits for
// callbacks in flight.
func (g *groupRegistry) run() {
	defer g.b.wg.Done()
	defer g.notes.stop()
	for {
		t := time.NewTimer(g.b.opts.HeartbeatCheckInterval)
		select {
		case <-g.b.done:
			t.Stop()
			return
		case <-t.C:
			now := time.Now()
			g.expire(now)
			g.b.locks.expire(now)
		}
	}
}

// close releases the registry's state; every goroutine has stopped.
func (g *groupRegistry) close() {
	g.notes.stop() // no-op after run; Open may have failed before starting it
	g.mu.Lock()
	clear(g.groups)
	clear(g.producers)
	g.mu.Unlock()
}

// expire drops members and producers whose last heartbeat is more than HeartbeatTimeout
// before now, and tells the remaining members of a changed group.
func (g *groupRegistry) expire(now time.Time) {
	timeout := g.b.opts.HeartbeatTimeout
	var notes []note
	g.mu.Lock()
	for name, cg := range g.groups {
		changed := false
		for id, m := range cg.members {
			if now.Sub(m.last) > timeout {
				delete(cg.members, id)
				changed = true
				g.b.lg.Info("consumer expired", "group", name, "client", id, "last", m.last)
			}
		}
		if changed {
			notes = cg.notesLocked(name, "", notes)
		}
	}
	for name, clients := range g.producers {
		for id, last := range clients {
			if now.Sub(last) > timeout {
				delete(clients, id)
			}
		}
		if len(clients) == 0 {
			delete(g.producers, name)
		}
	}
	g.mu.Unlock()
	g.notes.post(notes)
}

// notesLocked appends a change notification for every member of cg except the client
// except; none for a broadcasting group (RocketMQ notifies only clustering groups).
func (cg *consumerGroup) notesLocked(group, except string, notes []note) []note {
	if cg.model == mq.Broadcasting {
		return notes
	}
	for id, m := range cg.members {
		if id != except && m.onChange != nil {
			notes = append(notes, note{noteKey{client: id, group: group}, m.onChange})
		}
	}
	return notes
}

// noteReset tells group's members that listen (OnReset) that its offsets of topic moved to
// offs (by queue id of broker).
func (g *groupRegistry) noteReset(group, topic, broker string, offs map[int32]int64) {
	byQueue := make(map[mq.MessageQueue]int64, len(offs))
	for q, off := range offs {
		byQueue[mq.MessageQueue{Topic: topic, BrokerName: broker, QueueID: q}] = off
	}
	var notes []note
	g.mu.RLock()
	if cg, ok := g.groups[group]; ok {
		for id, m := range cg.members {
			if fn := m.onReset; fn != nil {
				// Each member gets its own copy: a callback may keep or change it.
				own := maps.Clone(byQueue)
				notes = append(notes, note{noteKey{client: id, group: group, reset: topic}, func(group string) { fn(group, topic, own) }})
			}
		}
	}
	g.mu.RUnlock()
	g.notes.post(notes)
}

// subscription returns the subscription to topic that group's members declared; when they
// disagree, the one with the highest SubVersion.
func (g *groupRegistry) subscription(group, topic string) (mq.Subscription, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	cg, ok := g.groups[group]
	if !ok {
		return mq.Subscription{}, false
	}
	var best mq.Subscription
	found := false
	for _, m := range cg.members {
		if s, ok := m.subs[topic]; ok && (!found || s.SubVersion > best.SubVersion) {
			best, found = s, true
		}
	}
	return best, found
}

func validateHeartbeat(hb *mq.Heartbeat) error {
	if hb.ClientID == "" {
		return fmt.Errorf("%w: empty client id", mq.ErrInvalidArgument)
	}
	for _, p := range hb.Producers {
		if err := mq.ValidateProducerGroup(p); err != nil {
			return fmt.Errorf("producer %w", err)
		}
	}
	for _, cd := range hb.Consumers {
		if err := mq.ValidateGroup(cd.Group); err != nil {
			return fmt.Errorf("consumer %w", err)
		}
		if cd.Model != mq.Clustering && cd.Model != mq.Broadcasting {
			return fmt.Errorf("%w: group %q: message model %d", mq.ErrInvalidArgument, cd.Group, cd.Model)
		}
		if cd.ConsumeType != mq.ConsumePassively && cd.ConsumeType != mq.ConsumeActively {
			return fmt.Errorf("%w: group %q: consume type %d", mq.ErrInvalidArgument, cd.Group, cd.ConsumeType)
		}
		for _, s := range cd.Subscriptions {
			if err := mq.ValidateSubscribedTopic(s.Topic); err != nil {
				return fmt.Errorf("group %q subscription: %w", cd.Group, err)
			}
			if _, err := mq.ParseTagFilter(s.Expression); err != nil {
				return fmt.Errorf("group %q topic %q: %w", cd.Group, s.Topic, err)
			}
		}
	}
	return nil
}

// Heartbeat registers hb.ClientID as a member of each of hb.Consumers' groups, with its
// message model, consume type, consume-from-where and subscriptions, and as a producer of
// each of hb.Producers; each registration lives Options.HeartbeatTimeout from now.
//
// A stored subscription to a topic is replaced only by one with a SubVersion at least as
// high; topics missing from the heartbeat are dropped from the member. The first heartbeat
// of a clustering group creates its retry topic %RETRY%<group>; a group seen for the first
// time gets a stored config (consume enabled, one retry queue, Options.MaxReconsumeTimes).
// When a heartbeat adds a member to a clustering group or changes a member's topics or
// expressions, every member's OnChange is called, the sender's too: a remote client whose
// first rebalance ran before it could see itself in the group rebalances again at once
// rather than at its next periodic rebalance (RocketMQ notifies every connection of the
// group the same way).
//
// Errors: ErrClosed, ctx.Err(); mq.ErrInvalidArgument for an empty client id, a bad group
// name (1 to 248 characters of A-Z a-z 0-9 _ - % |; 255 for producer groups), model or
// consume type, or a tag expression that does not parse; mq.ErrInvalidTopic for a
// subscribed topic that is not a valid user, retry or dead-letter topic. A heartbeat refused
// for what it holds changes nothing.
func (b *Broker) Heartbeat(ctx context.Context, hb mq.Heartbeat) error {
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if err := validateHeartbeat(&hb); err != nil {
		return err
	}
	g := b.groups
	for _, cd := range hb.Consumers {
		if cd.Model == mq.Clustering {
			if _, err := b.topics.ensure(mq.RetryTopic(cd.Group)); err != nil {
				return fmt.Errorf("edge: create retry topic of group %q: %w", cd.Group, err)
			}
		}
		g.mu.RLock()
		_, known := g.groups[cd.Group]
		g.mu.RUnlock()
		if !known {
			if err := b.storeGroup(cd); err != nil {
				return err
			}
		}
	}

	now := time.Now()
	var notes []note
	g.mu.Lock()
	for _, cd := range hb.Consumers {
		cg, ok := g.groups[cd.Group]
		if !ok {
			cg = &consumerGroup{members: map[string]*member{}}
			g.groups[cd.Group] = cg
		}
		cg.model = cd.Model
		m, ok := cg.members[hb.ClientID]
		changed := !ok
		if !ok {
			m = &member{subs: map[string]mq.Subscription{}}
			cg.members[hb.ClientID] = m
		}
		m.model, m.consumeType, m.fromWhere, m.last, m.onChange, m.onReset = cd.Model, cd.ConsumeType, cd.FromWhere, now, hb.OnChange, hb.OnReset
		if m.updateSubs(cd.Subscriptions) {
			changed = true
		}
		if changed {
			notes = cg.notesLocked(cd.Group, "", notes)
		}
	}
	for _, p := range hb.Producers {
		clients, ok := g.producers[p]
		if !ok {
			clients = map[string]time.Time{}
			g.producers[p] = clients
		}
		clients[hb.ClientID] = now
	}
	g.mu.Unlock()
	g.notes.post(notes)
	return nil
}

// storeGroup writes the default config of a group new to this process, unless one is stored.
func (b *Broker) storeGroup(cd mq.ConsumerData) error {
	if _, ok, err := b.meta.Group(cd.Group); err != nil {
		return fmt.Errorf("edge: load group %q: %w", cd.Group, err)
	} else if ok {
		return nil
	}
	err := b.meta.PutGroup(meta.Group{Name: cd.Group, ConsumeEnable: true, BroadcastEnable: cd.Model == mq.Broadcasting,
		RetryQueues: 1, MaxReconsumeTimes: b.opts.MaxReconsumeTimes, ConsumeFromMinEnable: true})
	if err != nil {
		return fmt.Errorf("edge: store group %q: %w", cd.Group, err)
	}
	return nil
}

// updateSubs makes subs the member's subscriptions, keeping a stored one that has a higher
// SubVersion, and reports whether a topic or an expression changed.
func (m *member) updateSubs(subs []mq.Subscription) bool {
	next := make(map[string]mq.Subscription, len(subs))
	for _, s := range subs {
		if old, ok := next[s.Topic]; ok && old.SubVersion > s.SubVersion {
			continue
		}
		if old, ok := m.subs[s.Topic]; ok && old.SubVersion > s.SubVersion {
			s = old
		}
		next[s.Topic] = s
	}
	changed := !maps.EqualFunc(m.subs, next, func(a, b mq.Subscription) bool { return a.Expression == b.Expression })
	m.subs = next
	return changed
}

// Unregister removes clientID from group, or from all its groups when group is "", as a
// producer and as a consumer, and frees the queue locks it holds in them; the group's other
// members are told. A network server calls it when a client's connection closes
// (RocketMQ's Go client never sends UNREGISTER_CLIENT). Unknown clients and groups are no
// error. Errors: ErrClosed, ctx.Err(), mq.ErrInvalidArgument for an empty client id.
func (b *Broker) Unregister(ctx context.Context, clientID, group string) error {
	return b.unregister(ctx, clientID, group, true)
}

// Disconnect removes clientID from all its groups, as a producer and as a consumer, as
// Unregister(ctx, clientID, "") does, but keeps the queue locks it holds: they expire
// after Options.LockLifetime unless renewed. A network server calls it when a client's
// connection closes: a connection may close under a client that lives on and still
// consumes the queues it locked (until its own lock expiry, shorter than the broker's),
// and another member must not lock them before then. RocketMQ's broker likewise keeps a
// client's locks when its channel closes. Errors: ErrClosed, ctx.Err(),
// mq.ErrInvalidArgument for an empty client id.
func (b *Broker) Disconnect(ctx context.Context, clientID string) error {
	return b.unregister(ctx, clientID, "", false)
}

func (b *Broker) unregister(ctx context.Context, clientID, group string, freeLocks bool) error {
	if err := b.checkCtx(ctx); err != nil {
		return err
	}
	if clientID == "" {
		return fmt.Errorf("%w: empty client id", mq.ErrInvalidArgument)
	}
	if group != "" {
		if err := mq.ValidateProducerGroup(group); err != nil { // consumer or producer group
			return err
		}
	}
	g := b.groups
	var notes []note
	g.mu.Lock()
	for name, cg := range g.groups {
		if group != "" && name != group {
			continue
		}
		if _, ok := cg.members[clientID]; ok {
			delete(cg.members, clientID)
			notes = cg.notesLocked(name, clientID, notes)
		}
	}
	for name, clients := range g.producers {
		if group != "" && name != group {
			continue
		}
		delete(clients, clientID)
		if len(clients) == 0 {
			delete(g.producers, name)
		}
	}
	g.mu.Unlock()
	if freeLocks {
		b.locks.releaseClient(group, clientID)
	}
	g.notes.post(notes)
	return nil
}

// ConsumerIDs returns the sorted client ids of group's members (RocketMQ's
// GET_CONSUMER_LIST_BY_GROUP). topic names the topic whose broker a network client asks;
// this broker knows every group, and does not use it. A known group without members has
// none; a group the broker has never seen gets mq.ErrGroupNotExist. Errors: ErrClosed,
// ctx.Err(), mq.ErrInvalidArgument for a bad group name (see mq.ValidateGroup),
// mq.ErrGroupNotExist.
func (b *Broker) ConsumerIDs(ctx context.Context, topic, group string) ([]string, error) {
	if err := b.checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return nil, err
	}
	if topic != "" {
		if err := mq.ValidateSubscribedTopic(topic); err != nil {
			return nil, err
		}
	}
	g := b.groups
	g.mu.RLock()
	defer g.mu.RUnlock()
	cg, ok := g.groups[group]
	if !ok {
		return nil, fmt.Errorf("%w: %q", mq.ErrGroupNotExist, group)
	}
	return slices.Sorted(maps.Keys(cg.members)), nil
}

// Members returns group's members sorted by client id, each with its subscriptions sorted by
// topic. Errors: ErrClosed, mq.ErrInvalidArgument for a bad group name, mq.ErrGroupNotExist
// for a group the broker has never seen.
func (b *Broker) Members(group string) ([]Member, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := mq.ValidateGroup(group); err != nil {
		return nil, err
	}
	g := b.groups
	g.mu.RLock()
	defer g.mu.RUnlock()
	cg, ok := g.groups[group]
	if !ok {
		return nil, fmt.Errorf("%w: %q", mq.ErrGroupNotExist, group)
	}
	out := make([]Member, 0, len(cg.members))
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		subs := slices.SortedFunc(maps.Values(m.subs), func(a, b mq.Subscription) int { return strings.Compare(a.Topic, b.Topic) })
		out = append(out, Member{ClientID: id, Model: m.model, ConsumeType: m.consumeType, FromWhere: m.fromWhere,
			Subscriptions: subs, LastHeartbeat: m.last})
	}
	return out, nil
}

// Groups returns the names of the consumer groups the broker knows, sorted: those seen in a
// heartbeat and those stored from earlier runs. None after Close.
func (b *Broker) Groups() []string {
	if b.check() != nil {
		return nil
	}
	g := b.groups
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.groups))
}

// ProducerGroups returns the sorted names of the producer groups with a live producer. None
// after Close.
func (b *Broker) ProducerGroups() []string {
	if b.check() != nil {
		return nil
	}
	g := b.groups
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.producers))
}

// Producers returns the sorted client ids of group's live producers: none for a group
// without, and after Close.
func (b *Broker) Producers(group string) []string {
	if b.check() != nil {
		return nil
	}
	g := b.groups
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.producers[group]))
}

// noteKey is what notifications coalesce on: one client's view of one group, or (reset set)
// of one group's offsets of a topic.
type noteKey struct{ client, group, reset string }

type note struct {
	key noteKey
	fn  func(group string)
}

// notifier delivers OnChange callbacks without holding the registry lock and without
// blocking the caller. A key has at most one delivery goroutine; changes that come while
// its callback runs are coalesced into one more call, so a slow client costs one goroutine
// and no queue.
type notifier struct {
	mu      sync.Mutex // guards the fields below
	stopped bool
	busy    map[noteKey]bool               // a delivery goroutine runs for the key
	again   map[noteKey]func(group string) // call once more when the running one returns
	idle    *sync.Cond                     // broadcast when busy empties
	wg      sync.WaitGroup                 // delivery goroutines
}

func (n *notifier) init() {
	n.busy = map[noteKey]bool{}
	n.again = map[noteKey]func(string){}
	n.idle = sync.NewCond(&n.mu)
}

// post schedules the notes' callbacks; dropped once the notifier has stopped.
func (n *notifier) post(notes []note) {
	if len(notes) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	for _, nt := range notes {
		if n.busy[nt.key] {
			n.again[nt.key] = nt.fn
			continue
		}
		n.busy[nt.key] = true
		n.wg.Add(1)
		go n.deliver(nt)
	}
}

func (n *notifier) deliver(nt note) {
	defer n.wg.Done()
	for {
		nt.fn(nt.key.group)
		n.mu.Lock()
		fn, ok := n.again[nt.key]
		delete(n.again, nt.key)
		if !ok || n.stopped {
			delete(n.busy, nt.key)
			if len(n.busy) == 0 {
				n.idle.Broadcast()
			}
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		nt.fn = fn
	}
}

// wait returns once no callback runs or is due. For tests.
func (n *notifier) wait() {
	n.mu.Lock()
	for len(n.busy) > 0 {
		n.idle.Wait()
	}
	n.mu.Unlock()
}

// stop drops later notes and waits for the callbacks in flight.
func (n *notifier) stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.wg.Wait()
}

// GroupConfig is a consumer group's stored config, as RocketMQ's admin tools set and show
// it (SubscriptionGroupConfig). The broker keeps it for them: its own retry and dead-letter
// handling goes by what consumers send (mq.SendBackRequest's maximum) and Options.
type GroupConfig struct {
	Name                 string
	ConsumeEnable        bool  // the group may consume
	BroadcastEnable      bool  // the group may consume in broadcasting mode
	RetryQueues          int32 // queues of the retry topic
	MaxReconsumeTimes    int32 // redeliveries before the dead-letter topic
	ConsumeFromMinEnable bool  // a new group may start at a queue's minimum offset
}

// CreateGroup makes a consumer group known before its first member's heartbeat, or
// replaces its stored config (RocketMQ's UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): ConsumerIDs
// and Members then answer it with no members rather than mq.ErrGroupNotExist, and its retry
// topic %RETRY%<group> is made. Its members' heartbeats say whether it is clustering or
// broadcasting. Zero RetryQueues and MaxReconsumeTimes take 1 and
// Options.MaxReconsumeTimes. Errors: ErrClosed; mq.ErrInvalidArgument for a bad name (see
// mq.ValidateGroup) or negative counts; an error storing the config.
func (b *Broker) CreateGroup(cfg GroupConfig) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := mq.ValidateGroup(cfg.Name); err != nil {
		return err
	}
	if cfg.RetryQueues < 0 || cfg.MaxReconsumeTimes < 0 {
		return fmt.Errorf("%w: group %q: %d retry queues, max reconsume times %d", mq.ErrInvalidArgument, cfg.Name, cfg.RetryQueues, cfg.MaxReconsumeTimes)
	}
	setDefault(&cfg.RetryQueues, 1)
	setDefault(&cfg.MaxReconsumeTimes, b.opts.MaxReconsumeTimes)
	if _, err := b.topics.ensure(mq.RetryTopic(cfg.Name)); err != nil {
		return fmt.Errorf("edge: create retry topic of group %q: %w", cfg.Name, err)
	}
	err := b.meta.PutGroup(meta.Group{Name: cfg.Name, ConsumeEnable: cfg.ConsumeEnable, BroadcastEnable: cfg.BroadcastEnable,
		RetryQueues: cfg.RetryQueues, MaxReconsumeTimes: cfg.MaxReconsumeTimes, ConsumeFromMinEnable: cfg.ConsumeFromMinEnable})
	if err != nil {
		return fmt.Errorf("edge: store group %q: %w", cfg.Name, err)
	}
	g := b.groups
	g.mu.Lock()
	if _, ok := g.groups[cfg.Name]; !ok {
		g.groups[cfg.Name] = &consumerGroup{model: mq.Clustering, members: map[string]*member{}}
	}
	g.mu.Unlock()
	return nil
}

// GroupConfigs returns the stored configs of the consumer groups, sorted by name: those
// made by CreateGroup and those written on a group's first heartbeat. Errors: ErrClosed, an
// error reading them.
func (b *Broker) GroupConfigs() ([]GroupConfig, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	stored, err := b.meta.Groups()
	if err != nil {
		return nil, fmt.Errorf("edge: load groups: %w", err)
	}
	out := make([]GroupConfig, len(stored))
	for i, sg := range stored {
		out[i] = GroupConfig{Name: sg.Name, ConsumeEnable: sg.ConsumeEnable, BroadcastEnable: sg.BroadcastEnable,
			RetryQueues: sg.RetryQueues, MaxReconsumeTimes: sg.MaxReconsumeTimes, ConsumeFromMinEnable: sg.ConsumeFromMinEnable}
	}
	slices.SortFunc(out, func(a, b GroupConfig) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
