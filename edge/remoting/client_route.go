package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// Route returns the brokers and queues of topic, as the name servers last answered: a
// route is fetched again when it is older than Options.RouteRefresh (the maintenance loop
// refreshes the routes in use that often) or after a request to one of its brokers
// failed on the network. When no name server can be reached, the last route fetched is
// returned; a topic the name server does not know is mq.ErrTopicNotExist.
func (c *Client) Route(ctx context.Context, topic string) (mq.TopicRoute, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return mq.TopicRoute{}, ErrClientClosed
	}
	cr := c.routes[topic]
	var last mq.TopicRoute
	if cr != nil {
		last = cloneRoute(cr.route)
		if !cr.stale && time.Since(cr.fetched) < c.opts.RouteRefresh {
			c.mu.Unlock()
			return last, nil
		}
	}
	c.mu.Unlock()
	r, err := c.fetchRoute(ctx, topic)
	if err != nil {
		if cr != nil && !errors.Is(err, mq.ErrTopicNotExist) && ctx.Err() == nil {
			c.lg.Warn("remoting client: route lookup failed: using the last route", "topic", topic, "err", err)
			return last, nil
		}
		return mq.TopicRoute{}, err
	}
	return r, nil
}

// writeTargets are the write queues of a route (mq.TopicRoute.WriteQueues) and the master
// address of each, computed once per route fetched; shared, never changed.
type writeTargets struct {
	queues []mq.MessageQueue
	addrs  []string
}

func newWriteTargets(r *mq.TopicRoute) *writeTargets {
	wt := &writeTargets{queues: r.WriteQueues()}
	wt.addrs = make([]string, len(wt.queues))
	for i, q := range wt.queues {
		wt.addrs[i] = r.MasterAddr(q.BrokerName)
	}
	return wt
}

// cachedWriteTargets returns the write targets of topic's route from the cache while the
// route is fresh, without copying it; nil when it must be fetched.
func (c *Client) cachedWriteTargets(topic string) *writeTargets {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cr := c.routes[topic]; !c.closed && cr != nil && !cr.stale && time.Since(cr.fetched) < c.opts.RouteRefresh {
		if cr.targets == nil {
			cr.targets = newWriteTargets(&cr.route)
		}
		return cr.targets
	}
	return nil
}

// writeTargets returns the write targets of topic's route, as Route fetches it: from the
// cache while the route is fresh, without copying it.
func (c *Client) writeTargets(ctx context.Context, topic string) (*writeTargets, error) {
	if wt := c.cachedWriteTargets(topic); wt != nil {
		return wt, nil
	}
	r, err := c.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	return newWriteTargets(&r), nil
}

// WriteQueues returns the write queues of topic's route, as Route(ctx, topic) followed by
// mq.TopicRoute.WriteQueues, without copying the cached route.
func (c *Client) WriteQueues(ctx context.Context, topic string) ([]mq.MessageQueue, error) {
	return c.AppendWriteQueues(ctx, nil, topic)
}

// AppendWriteQueues appends the write queues of topic's route to dst, as WriteQueues lists
// them, and returns the extended slice: a producer lists them for every send, into a
// buffer of its own.
func (c *Client) AppendWriteQueues(ctx context.Context, dst []mq.MessageQueue, topic string) ([]mq.MessageQueue, error) {
	wt, err := c.writeTargets(ctx, topic)
	if err != nil {
		return dst, err
	}
	return append(dst, wt.queues...), nil
}

func cloneRoute(r mq.TopicRoute) mq.TopicRoute {
	r.Queues = slices.Clone(r.Queues)
	r.Brokers = slices.Clone(r.Brokers)
	for i := range r.Brokers {
		r.Brokers[i].Addrs = maps.Clone(r.Brokers[i].Addrs)
	}
	return r
}

// fetchRoute asks a name server for topic's route and caches it; a topic it does not
// know is dropped from the cache. Brokers the client did not know get its heartbeats.
func (c *Client) fetchRoute(ctx context.Context, topic string) (mq.TopicRoute, error) {
	req := NewRequest(GetRouteInfoByTopic, TopicHeader{Topic: topic}.Ext(), nil)
	resp, addr, err := c.invokeNamesrv(ctx, req)
	if err != nil {
		return mq.TopicRoute{}, err
	}
	if err := respError(addr, req.Code, resp, Success); err != nil {
		if errors.Is(err, mq.ErrTopicNotExist) {
			c.mu.Lock()
			delete(c.routes, topic)
			c.mu.Unlock()
		}
		return mq.TopicRoute{}, err
	}
	r, err := DecodeRoute(resp.Body)
	if err != nil {
		return mq.TopicRoute{}, fmt.Errorf("remoting: route of %q from %s: %w", topic, addr, err)
	}
	r.Topic = topic
	c.mu.Lock()
	c.routes[topic] = &cachedRoute{route: r, fetched: time.Now()}
	fresh := c.learnBrokersLocked(r.Brokers)
	c.mu.Unlock()
	for _, a := range fresh {
		c.goHeartbeatAddr(a)
	}
	return cloneRoute(r), nil
}

// learnBrokersLocked records the master addresses of bs and returns those it did not
// know.
func (c *Client) learnBrokersLocked(bs []mq.BrokerData) []string {
	var fresh []string
	for _, b := range bs {
		addr := b.Addrs[mq.MasterID]
		if addr == "" {
			continue
		}
		if !c.isBrokerAddrLocked(addr) {
			fresh = append(fresh, addr)
		}
		c.brokers[b.Name] = addr
	}
	return fresh
}

// refreshRoutes fetches the route of every cached topic again.
func (c *Client) refreshRoutes(ctx context.Context) {
	c.mu.Lock()
	topics := slices.Collect(maps.Keys(c.routes))
	c.mu.Unlock()
	for _, t := range topics {
		if _, err := c.fetchRoute(ctx, t); err != nil && ctx.Err() == nil {
			c.lg.Debug("remoting client: route refresh", "topic", t, "err", err)
		}
	}
}

// brokerAddr returns the master address of q's broker, fetching q's topic's route when
// the broker is not known yet. A queue without a broker name goes to the only broker
// known, if there is just one.
func (c *Client) brokerAddr(ctx context.Context, q mq.MessageQueue) (string, error) {
	if a, ok := c.knownBroker(q.BrokerName); ok {
		return a, nil
	}
	if q.Topic != "" {
		if _, err := c.Route(ctx, q.Topic); err != nil {
			return "", err
		}
		if a, ok := c.knownBroker(q.BrokerName); ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: no master address known for broker %q of topic %q", mq.ErrUnavailable, q.BrokerName, q.Topic)
}

func (c *Client) knownBroker(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" && len(c.brokers) == 1 {
		for _, a := range c.brokers {
			return a, true
		}
	}
	a, ok := c.brokers[name]
	return a, ok && a != ""
}

// brokerName returns the name of the broker whose master is at addr, "" if none.
func (c *Client) brokerName(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, a := range c.brokers {
		if a == addr {
			return name
		}
	}
	return ""
}

// brokerAddrs returns the master addresses of every broker known, sorted.
func (c *Client) brokerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := map[string]bool{}
	for _, a := range c.brokers {
		set[a] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// learnCluster asks a name server for every broker of every cluster
// (GET_BROKER_CLUSTER_INFO): how a client that knows no topic route yet finds brokers to
// heartbeat.
func (c *Client) learnCluster(ctx context.Context) error {
	req := NewRequest(GetBrokerClusterInfo, nil, nil)
	resp, addr, err := c.invokeNamesrv(ctx, req)
	if err != nil {
		return err
	}
	if err := respError(addr, req.Code, resp, Success); err != nil {
		return err
	}
	var info struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
	}
	if err := json.Unmarshal(quoteNumericKeys(resp.Body), &info); err != nil {
		return fmt.Errorf("remoting: cluster info from %s: %w: %v", addr, ErrMalformed, err)
	}
	var bs []mq.BrokerData
	for name, b := range info.BrokerAddrTable {
		if a := b.BrokerAddrs["0"]; a != "" {
			bs = append(bs, mq.BrokerData{Cluster: b.Cluster, Name: name, Addrs: map[int64]string{mq.MasterID: a}})
		}
	}
	c.mu.Lock()
	c.learnBrokersLocked(bs)
	c.mu.Unlock()
	return nil
}

// anyBroker returns the master address of a broker of topic's route, chosen at random
// (RocketMQ's clients ask a random broker of the topic for a group's members); with topic
// "", of any broker known.
func (c *Client) anyBroker(ctx context.Context, topic string) (string, error) {
	if topic != "" {
		r, err := c.Route(ctx, topic)
		if err != nil {
			return "", err
		}
		var addrs []string
		for _, b := range r.Brokers {
			if a := b.Addrs[mq.MasterID]; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) > 0 {
			return addrs[rand.IntN(len(addrs))], nil
		}
		return "", fmt.Errorf("%w: the route of %q has no master", mq.ErrUnavailable, topic)
	}
	addrs := c.brokerAddrs()
	if len(addrs) == 0 {
		if err := c.learnCluster(ctx); err != nil {
			return "", err
		}
		addrs = c.brokerAddrs()
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%w: no broker known", mq.ErrUnavailable)
	}
	return addrs[rand.IntN(len(addrs))], nil
}
