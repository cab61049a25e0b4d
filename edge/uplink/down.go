package uplink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// PropertyDownSource is the property a down rule gives each message it stores locally:
// "<upstream broker>/<queue id>/<queue offset>", so that after a crash it recognises what it
// stored before its cursor moved, and stores every upstream message once.
const PropertyDownSource = "EDGEMQ_DOWN_SRC"

// DownRule mirrors an upstream topic into a local one: as a member of Group, it pulls the
// queues of the topic the group's allocation gives it from the upstream, stores what it
// pulled locally (upstream queue i into local write queue i mod n, so that each upstream
// queue keeps its order), makes it durable, and only then moves its cursor and commits the
// group's offset upstream.
type DownRule struct {
	// Name identifies the rule and its cursors: as UpRule.Name, distinct from every rule's.
	Name string
	// Upstream is where the topic is read.
	Upstream Upstream
	// Topic is the upstream topic. Required.
	Topic string
	// Group is the upstream consumer group the rule is a member of and whose offsets it
	// commits: gateways with the same rule and group divide the topic's queues. Default
	// "<gateway>_<name>".
	Group string
	// LocalTopic is the local topic the messages go to. Default Topic.
	LocalTopic string
	// BatchSize is the most messages per pull, 1..1024. Default 32.
	BatchSize int
}

// fill sets a down rule's defaults and checks it.
func (d *DownRule) fill(gateway string) error {
	if err := checkName(d.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if err := mq.ValidateTopic(d.Topic); err != nil {
		return fmt.Errorf("topic: %w", err)
	}
	if d.LocalTopic == "" {
		d.LocalTopic = d.Topic
	}
	if err := mq.ValidateTopic(d.LocalTopic); err != nil {
		return fmt.Errorf("local topic: %w", err)
	}
	if d.Group == "" {
		d.Group = gateway + "_" + d.Name
	}
	if err := mq.ValidateGroup(d.Group); err != nil {
		return fmt.Errorf("group: %w", err)
	}
	if err := d.Upstream.fill(); err != nil {
		return err
	}
	if d.BatchSize == 0 {
		d.BatchSize = DefaultBatchSize
	}
	if d.BatchSize < 1 || d.BatchSize > maxBatchSize {
		return fmt.Errorf("batch size %d not in 1..%d", d.BatchSize, maxBatchSize)
	}
	return nil
}

// down is a down rule at work: a member of its group at the upstream.
type down struct {
	u        *Uplink
	cfg      DownRule
	clientID string        // the rule's member id in its group
	kick     chan struct{} // capacity 1: the group's members changed upstream

	received, failures atomic.Int64

	mu     sync.Mutex // guards client, queues and lastEr; a leaf
	client *remoting.Client
	queues map[mq.MessageQueue]*downQueue // the queues the group's allocation gives the rule
	lastEr string
	lastAt time.Time
}

// downQueue mirrors one upstream queue while the rule holds it.
type downQueue struct {
	d     *down
	q     mq.MessageQueue // upstream
	index int             // in the route's read queues: the local queue is index mod n
	bo    backoff

	ctx    context.Context // ends the queue's pulls: at Close, or when a rebalance takes it away
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned: its last batch is stored and committed

	// unrecorded: a batch is (or may be) stored locally and the cursor not moved past it
	// yet; owned by run.
	unrecorded bool

	cursor atomic.Int64 // next upstream offset to store; -1 until known
	max    atomic.Int64 // the upstream queue's max offset at the last pull
	state  atomic.Int32
}

// leaveTimeout bounds leaving the group at Close: an upstream that cannot be reached then
// drops the member when its connection ends anyway.
const leaveTimeout = 2 * time.Second

// downStrategy divides a group's queues among its members as RocketMQ's clients do by
// default (AllocateMessageQueueAveragely), so that down rules and RocketMQ consumers of one
// group agree on who reads which queue.
var downStrategy consumer.AllocateStrategy = consumer.AllocateAveragely{}

// downClientID is the member id of down rule name of gateway in its group: one per rule
// and process, as a RocketMQ client's "ip@instance" is.
func downClientID(gateway, name string) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s@%s-%d-%s", host, gateway, os.Getpid(), name)
}

// cursorName is the name a down rule's cursors are stored under.
func (d *down) cursorName() string { return "down:" + d.cfg.Name }

// cursorKeys are the stored cursors' topics for upstream queue q: the next upstream offset,
// and the local queue's end before the last store (where a crash's unrecorded batch may be).
func cursorKeys(q mq.MessageQueue) (upKey, localKey string) {
	k := q.Topic + "@" + q.BrokerName
	return k, k + "#local"
}

// fail records err as the rule's last error.
func (d *down) fail(err error) {
	d.failures.Add(1)
	d.mu.Lock()
	d.lastEr, d.lastAt = err.Error(), d.u.now()
	d.mu.Unlock()
}

// run rebalances the rule's queues at once, every ScanInterval and whenever the upstream
// says the group's members changed, until the Uplink closes; then it stops every queue and
// leaves the group.
func (d *down) run() {
	u := d.u
	defer u.wg.Done()
	defer d.leave()
	bo := backoff{min: u.opts.BackoffMin, max: u.opts.BackoffMax}
	for u.ctx.Err() == nil {
		wait := u.opts.ScanInterval
		if err := d.rebalance(); err != nil {
			if u.ctx.Err() != nil {
				return
			}
			d.fail(err)
			wait = bo.next()
		} else {
			bo.reset()
		}
		t := time.NewTimer(wait)
		select {
		case <-u.ctx.Done():
		case <-t.C:
		case <-d.kick:
		}
		t.Stop()
	}
}

// connect returns the rule's client, dialing the upstream and joining the group (a
// heartbeat the client repeats) if it has none.
func (d *down) connect() (*remoting.Client, error) {
	u := d.u
	d.mu.Lock()
	c := d.client
	d.mu.Unlock()
	if c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.opts.SendTimeout)
	defer cancel()
	c, err := remoting.Dial(ctx, d.cfg.Upstream.Addrs, &remoting.Options{Logger: u.lg, RequestTimeout: u.opts.SendTimeout,
		Credentials: d.cfg.Upstream.credentials()})
	if err != nil {
		return nil, err
	}
	if err := c.Heartbeat(ctx, d.heartbeat()); err != nil {
		c.Close()
		return nil, fmt.Errorf("join group %s: %w", d.cfg.Group, err)
	}
	d.mu.Lock()
	d.client = c
	d.mu.Unlock()
	return c, nil
}

// heartbeat is the rule's membership of its group: a clustering pull consumer of the topic.
func (d *down) heartbeat() mq.Heartbeat {
	return mq.Heartbeat{ClientID: d.clientID,
		Consumers: []mq.ConsumerData{{Group: d.cfg.Group, Model: mq.Clustering, ConsumeType: mq.ConsumeActively,
			FromWhere: "CONSUME_FROM_FIRST_OFFSET", Subscriptions: []mq.Subscription{{Topic: d.cfg.Topic, Expression: "*"}}}},
		OnChange: func(string) {
			select {
			case d.kick <- struct{}{}:
			default:
			}
		}}
}

// rebalance routes the topic, reads the group's members and takes the queues the
// allocation gives the rule: queues it no longer gets stop (their batch in flight stored
// and committed) before those it gets start, at the group's committed offset.
func (d *down) rebalance() error {
	u := d.u
	c, err := d.connect()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.opts.SendTimeout)
	defer cancel()
	r, err := c.Route(ctx, d.cfg.Topic)
	if err != nil {
		return fmt.Errorf("route of %s: %w", d.cfg.Topic, err)
	}
	all := r.ReadQueues()
	cids, err := c.ConsumerIDs(ctx, d.cfg.Topic, d.cfg.Group)
	if err != nil {
		return fmt.Errorf("members of %s: %w", d.cfg.Group, err)
	}
	if !slices.Contains(cids, d.clientID) {
		// Not (or no longer) a member there: join again, and divide after a backoff, keeping
		// the queues held meanwhile.
		if err := c.Heartbeat(ctx, d.heartbeat()); err != nil {
			return fmt.Errorf("join group %s: %w", d.cfg.Group, err)
		}
		return fmt.Errorf("not among the members of %s upstream: joined again", d.cfg.Group)
	}
	mine, err := downStrategy.Allocate(d.cfg.Group, d.clientID, all, cids)
	if err != nil {
		return fmt.Errorf("divide the queues of %s: %w", d.cfg.Topic, err)
	}
	want := map[mq.MessageQueue]bool{}
	for _, q := range mine {
		want[q] = true
	}
	var gone []*downQueue
	d.mu.Lock()
	for q, dq := range d.queues {
		if !want[q] {
			dq.cancel()
			gone = append(gone, dq)
			delete(d.queues, q)
		}
	}
	d.mu.Unlock()
	for _, dq := range gone {
		<-dq.done
		u.lg.Info("uplink: down queue handed over", "rule", d.cfg.Name, "queue", dq.q, "at", dq.cursor.Load())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, q := range all {
		if !want[q] || d.queues[q] != nil || u.ctx.Err() != nil {
			continue
		}
		dq := &downQueue{d: d, q: q, index: i, bo: backoff{min: u.opts.BackoffMin, max: u.opts.BackoffMax}, done: make(chan struct{})}
		dq.ctx, dq.cancel = context.WithCancel(u.ctx)
		dq.cursor.Store(-1)
		d.queues[q] = dq
		u.wg.Add(1)
		go dq.run(c)
	}
	return nil
}

// leave stops every queue the rule holds, each after its batch in flight, and leaves the
// group, so that the other members take the queues at once.
func (d *down) leave() {
	d.mu.Lock()
	qs := slices.Collect(maps.Values(d.queues))
	clear(d.queues)
	c := d.client
	d.mu.Unlock()
	for _, dq := range qs {
		dq.cancel()
	}
	for _, dq := range qs {
		<-dq.done
	}
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(leaveTimeout, d.u.opts.SendTimeout))
	defer cancel()
	if err := c.Unregister(ctx, d.clientID, d.cfg.Group); err != nil {
		d.u.lg.Debug("uplink: leave group", "rule", d.cfg.Name, "group", d.cfg.Group, "err", err)
	}
}

// run mirrors the queue until the rule lets it go or the Uplink closes.
func (dq *downQueue) run(c *remoting.Client) {
	d, u := dq.d, dq.d.u
	defer u.wg.Done()
	defer close(dq.done)
	defer dq.cancel()
	defer dq.stopped()
	for dq.ctx.Err() == nil {
		if err := dq.step(c); err != nil {
			if dq.ctx.Err() != nil {
				return
			}
			d.fail(err)
			dq.state.Store(fwdBackingOff)
			sleep(dq.ctx, dq.bo.next())
			continue
		}
		dq.bo.reset()
	}
}

// stoppedCleanly is the stored local end of a queue whose mirror stopped with nothing
// stored locally past its cursor: taken again, it need not look for a crash's batch.
const stoppedCleanly = -2

// stopped records that the queue stopped cleanly, unless a batch may be stored past its
// cursor.
func (dq *downQueue) stopped() {
	if dq.unrecorded || dq.cursor.Load() < 0 {
		return
	}
	_, localKey := cursorKeys(dq.q)
	err := dq.d.u.b.PutForwardCursors([]edge.ForwardCursor{{Name: dq.d.cursorName(), Topic: localKey, QueueID: dq.q.QueueID,
		Offset: stoppedCleanly, Updated: dq.d.u.now()}})
	if err != nil {
		dq.d.u.lg.Debug("uplink: record a clean stop", "rule", dq.d.cfg.Name, "queue", dq.q, "err", err)
	}
}

// finishing returns the context of storing a batch already pulled, and committing it: it
// outlives the queue's own (a batch in flight is finished when the queue stops) for at most
// SendTimeout.
func (dq *downQueue) finishing() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(dq.ctx), dq.d.u.opts.SendTimeout)
}

// step finds the cursor if it is not known yet, then pulls once and stores what it got.
func (dq *downQueue) step(c *remoting.Client) error {
	d, b, ctx := dq.d, dq.d.u.b, dq.ctx
	if dq.cursor.Load() < 0 {
		off, err := dq.resume(ctx, c)
		if err != nil {
			return err
		}
		// Record where the local queue ends before the first batch, and commit the start.
		if err := dq.store(ctx, c, off); err != nil {
			return err
		}
	}
	from := dq.cursor.Load()
	res, err := c.Pull(ctx, mq.PullRequest{Group: d.cfg.Group, Queue: dq.q, Offset: from, MaxMsgs: d.cfg.BatchSize,
		Filter: "*", Suspend: true, MaxWait: localWait})
	if err != nil {
		return fmt.Errorf("pull %s: %w", dq.q, err)
	}
	dq.max.Store(res.MaxOffset)
	dq.state.Store(fwdConnected)
	sctx, cancel := dq.finishing()
	defer cancel()
	switch res.Status {
	case mq.PullFound:
	case mq.PullOffsetIllegal:
		d.u.lg.Warn("uplink: down cursor out of the upstream queue's range: moved", "rule", d.cfg.Name, "queue", dq.q,
			"cursor", from, "to", res.NextBeginOffset)
		return dq.store(sctx, c, res.NextBeginOffset)
	default:
		if res.NextBeginOffset > from {
			return dq.store(sctx, c, res.NextBeginOffset)
		}
		return nil
	}
	dq.state.Store(fwdDraining)
	msgs := make([]*mq.Message, 0, len(res.Messages))
	for i := range res.Messages {
		m := &res.Messages[i]
		if m.QueueOffset < from {
			continue
		}
		props := maps.Clone(m.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if props[mq.PropertyUniqKey] == "" {
			props[mq.PropertyUniqKey] = m.OffsetMsgID()
		}
		props[PropertyDownSource] = source(dq.q, m.QueueOffset)
		msgs = append(msgs, &mq.Message{Topic: d.cfg.LocalTopic, Flag: m.Flag, Tags: m.Tags, Keys: m.Keys, Properties: props, Body: m.Body})
	}
	if len(msgs) == 0 {
		return dq.store(sctx, c, res.NextBeginOffset)
	}
	index := dq.index
	dq.unrecorded = true
	if _, err := b.SendBatch(sctx, msgs, func(n int, _ *mq.Message) int { return index % n }); err != nil {
		return fmt.Errorf("store locally: %w", err)
	}
	if err := b.Sync(); err != nil {
		return fmt.Errorf("sync locally: %w", err)
	}
	d.received.Add(int64(len(msgs)))
	return dq.store(sctx, c, res.Messages[len(res.Messages)-1].QueueOffset+1)
}

// store moves the cursor to next: durably in the meta store, with the local queue's end
// (where the next batch will go), then upstream as the group's offset (best effort).
func (dq *downQueue) store(ctx context.Context, c *remoting.Client, next int64) error {
	d, b := dq.d, dq.d.u.b
	lq, err := dq.localQueue()
	if err != nil {
		return err
	}
	end, err := b.MaxOffset(ctx, lq)
	if err != nil {
		end = 0 // the local topic does not exist yet: its first batch goes at 0
	}
	upKey, localKey := cursorKeys(dq.q)
	now := dq.d.u.now()
	if err := b.PutForwardCursors([]edge.ForwardCursor{
		{Name: d.cursorName(), Topic: upKey, QueueID: dq.q.QueueID, Offset: next, Updated: now},
		{Name: d.cursorName(), Topic: localKey, QueueID: dq.q.QueueID, Offset: end, Updated: now},
	}); err != nil {
		return fmt.Errorf("store cursor of %s: %w", dq.q, err)
	}
	dq.unrecorded = false
	dq.cursor.Store(next)
	cctx, cancel := context.WithTimeout(ctx, d.u.opts.SendTimeout)
	defer cancel()
	if err := c.CommitOffset(cctx, d.cfg.Group, dq.q, next); err != nil {
		d.u.lg.Debug("uplink: commit upstream offset", "rule", d.cfg.Name, "queue", dq.q, "err", err)
	}
	return nil
}

// localQueue is the local queue upstream queue dq.q goes to, as the local topic's route
// says now (the local topic is made by the first batch).
func (dq *downQueue) localQueue() (mq.MessageQueue, error) {
	b := dq.d.u.b
	n := int32(b.Options().DefaultQueues)
	if tc, err := b.Topic(dq.d.cfg.LocalTopic); err == nil {
		n = tc.WriteQueues
	}
	if n <= 0 {
		return mq.MessageQueue{}, fmt.Errorf("local topic %s has no write queue", dq.d.cfg.LocalTopic)
	}
	return mq.MessageQueue{Topic: dq.d.cfg.LocalTopic, BrokerName: b.Options().BrokerName, QueueID: int32(dq.index) % n}, nil
}

// resume returns where mirroring the queue starts: at the group's committed upstream
// offset (where the member that held the queue before stopped), or past it when the rule's
// own stored cursor, and anything a crash stored locally before that cursor moved, are
// further on; with neither, at the queue's first message. A queue whose mirror stopped
// cleanly has nothing stored past its cursor: the local queue is not read.
func (dq *downQueue) resume(ctx context.Context, c *remoting.Client) (int64, error) {
	d, b := dq.d, dq.d.u.b
	committed, err := c.QueryOffset(ctx, d.cfg.Group, dq.q)
	switch {
	case errors.Is(err, mq.ErrOffsetNotFound) || err == nil && committed < 0:
		committed = -1
	case err != nil:
		return 0, fmt.Errorf("group offset of %s: %w", dq.q, err)
	}
	cs, err := b.ForwardCursors(d.cursorName())
	if err != nil {
		return 0, err
	}
	upKey, localKey := cursorKeys(dq.q)
	off, localEnd := int64(-1), int64(-1)
	for _, cur := range cs {
		if cur.QueueID != dq.q.QueueID {
			continue
		}
		switch cur.Topic {
		case upKey:
			off = cur.Offset
		case localKey:
			localEnd = cur.Offset
		}
	}
	if off < 0 {
		if committed >= 0 {
			return committed, nil
		}
		off, err := c.MinOffset(ctx, dq.q)
		if err != nil {
			return 0, fmt.Errorf("min offset of %s: %w", dq.q, err)
		}
		return off, nil
	}
	if localEnd == stoppedCleanly {
		return max(off, committed), nil
	}
	// What the local queue got past localEnd from this upstream queue was stored before a
	// crash kept the cursor from moving.
	lq, err := dq.localQueue()
	if err != nil {
		return 0, err
	}
	prefix := source(dq.q, 0)
	prefix = prefix[:strings.LastIndexByte(prefix, '/')+1]
	for at := max(localEnd, 0); ; {
		res, err := b.Pull(ctx, mq.PullRequest{Group: "UPLINK_" + d.cfg.Name, Queue: lq, Offset: at, MaxMsgs: 256, Filter: "*"})
		if err != nil || res.Status != mq.PullFound {
			break // no local topic, or its end
		}
		for _, m := range res.Messages {
			if s, ok := strings.CutPrefix(m.Properties[PropertyDownSource], prefix); ok {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= off {
					off = n + 1
				}
			}
		}
		at = res.NextBeginOffset
	}
	return max(off, committed), nil
}

// source is the PropertyDownSource of the message at offset of upstream queue q.
func source(q mq.MessageQueue, offset int64) string {
	return q.BrokerName + "/" + strconv.Itoa(int(q.QueueID)) + "/" + strconv.FormatInt(offset, 10)
}
