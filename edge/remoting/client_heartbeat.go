package remoting

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
)

// Heartbeat registers hb's client and groups with every broker the client knows, after
// looking up the routes of hb's subscribed topics so that their brokers are known (and,
// knowing none, asking the name server for the cluster's brokers). The client keeps hb,
// the last of its client id, and repeats it every Options.HeartbeatInterval, to brokers
// it learns of later and to a broker it reconnects to. hb.OnChange is called, from a
// connection's goroutine, when a broker announces a change to one of hb's consumer groups
// (NOTIFY_CONSUMER_IDS_CHANGED).
//
// It fails when a broker refuses the heartbeat, or when no broker could be reached.
//
// Apache RocketMQ's brokers know a client by its connection: two consumers of one group
// with different client ids must use two Clients there.
func (c *Client) Heartbeat(ctx context.Context, hb mq.Heartbeat) error {
	if hb.ClientID == "" {
		return fmt.Errorf("%w: heartbeat without a client id", mq.ErrInvalidArgument)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClientClosed
	}
	c.hbs[hb.ClientID] = hb
	c.mu.Unlock()
	for _, cd := range hb.Consumers {
		for _, s := range cd.Subscriptions {
			if _, err := c.Route(ctx, s.Topic); err != nil && !errors.Is(err, mq.ErrTopicNotExist) {
				c.lg.Debug("remoting client: heartbeat: route", "topic", s.Topic, "err", err)
			}
		}
	}
	addrs := c.brokerAddrs()
	if len(addrs) == 0 {
		if err := c.learnCluster(ctx); err != nil {
			return fmt.Errorf("remoting: heartbeat: no broker known: %w", err)
		}
		addrs = c.brokerAddrs()
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: heartbeat: no broker known", mq.ErrUnavailable)
	}
	body := EncodeHeartbeat(hb)
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { errs[i] = c.sendHeartbeat(ctx, addr, body) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		var re *ResponseError
		if errors.As(err, &re) {
			return err // a broker refused it: the heartbeat is wrong
		}
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		return errors.Join(errs...)
	}
	return nil
}

// sendHeartbeat sends a heartbeat body to addr.
func (c *Client) sendHeartbeat(ctx context.Context, addr string, body []byte) error {
	req := NewRequest(HeartBeat, nil, body)
	resp, err := c.invoke(ctx, addr, req, c.opts.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code == Success && resp.Fields()[ExtStreams] == "1" {
		if cc := c.liveConn(addr); cc != nil {
			cc.streams.Store(true)
		}
	}
	return respError(addr, req.Code, resp, Success)
}

// heartbeats returns the heartbeats kept, as bodies.
func (c *Client) heartbeats() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for _, id := range slices.Sorted(maps.Keys(c.hbs)) {
		out = append(out, EncodeHeartbeat(c.hbs[id]))
	}
	return out
}

// heartbeatAll repeats the heartbeats kept to every broker known.
func (c *Client) heartbeatAll(ctx context.Context) {
	bodies := c.heartbeats()
	if len(bodies) == 0 {
		return
	}
	for _, addr := range c.brokerAddrs() {
		for _, b := range bodies {
			if err := c.sendHeartbeat(ctx, addr, b); err != nil && ctx.Err() == nil {
				c.lg.Warn("remoting client: heartbeat", "addr", addr, "err", err)
			}
		}
	}
}

// goHeartbeatAddr sends the heartbeats kept to addr, in a goroutine of the client: a
// broker just learned of, or reconnected to.
func (c *Client) goHeartbeatAddr(addr string) {
	bodies := c.heartbeats()
	if len(bodies) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Go(func() {
		for _, b := range bodies {
			if err := c.sendHeartbeat(c.ctx, addr, b); err != nil && c.ctx.Err() == nil {
				c.lg.Warn("remoting client: heartbeat", "addr", addr, "err", err)
			}
		}
	})
}

// Unregister removes clientID from group at every broker known (UNREGISTER_CLIENT), or
// from all its groups with group "", and stops repeating its heartbeat (for group "", or
// when group was its only one).
func (c *Client) Unregister(ctx context.Context, clientID, group string) error {
	if clientID == "" {
		return fmt.Errorf("%w: unregister without a client id", mq.ErrInvalidArgument)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClientClosed
	}
	hb, had := c.hbs[clientID]
	var headers []UnregisterHeader
	if group == "" {
		delete(c.hbs, clientID)
		for _, cd := range hb.Consumers {
			headers = append(headers, UnregisterHeader{ClientID: clientID, ConsumerGroup: cd.Group})
		}
		for _, p := range hb.Producers {
			headers = append(headers, UnregisterHeader{ClientID: clientID, ProducerGroup: p})
		}
	} else {
		isProducer := slices.Contains(hb.Producers, group)
		isConsumer := slices.ContainsFunc(hb.Consumers, func(cd mq.ConsumerData) bool { return cd.Group == group })
		if had {
			hb.Consumers = slices.DeleteFunc(slices.Clone(hb.Consumers), func(cd mq.ConsumerData) bool { return cd.Group == group })
			hb.Producers = slices.DeleteFunc(slices.Clone(hb.Producers), func(p string) bool { return p == group })
			if len(hb.Consumers) == 0 && len(hb.Producers) == 0 {
				delete(c.hbs, clientID)
			} else {
				c.hbs[clientID] = hb
			}
		}
		h := UnregisterHeader{ClientID: clientID}
		if isProducer {
			h.ProducerGroup = group
		}
		if isConsumer || !isProducer {
			h.ConsumerGroup = group
		}
		headers = append(headers, h)
	}
	c.mu.Unlock()
	if len(headers) == 0 {
		return nil
	}
	var errs []error
	for _, addr := range c.brokerAddrs() {
		for _, h := range headers {
			req := NewRequest(UnregisterClient, h.Ext(), nil)
			resp, err := c.invoke(ctx, addr, req, c.opts.RequestTimeout)
			if err == nil {
				err = respError(addr, req.Code, resp, Success)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
