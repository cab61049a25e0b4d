package remoting

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
)

// The admin requests of RocketMQ's mqadmin, as the Client sends them. They work against
// EdgeMQ and Apache RocketMQ alike: topics are created and deleted on every master the
// name servers know, stats are asked of the brokers of a topic's route.

// TopicConfig is a topic's config as the admin requests carry it.
type TopicConfig struct {
	Name        string
	ReadQueues  int32 // queues consumers read; 0 in CreateTopic: the broker's default
	WriteQueues int32 // queues producers write; 0 in CreateTopic: the broker's default
	Perm        int32 // mq.PermRead, mq.PermWrite bits
	Order       bool
	// Attributes are the topic's attributes (RocketMQ 5), such as EdgeMQ's "durability";
	// CreateTopic sends them as "+key=value" each.
	Attributes map[string]string
}

// QueueStats is one queue's offsets, as GET_TOPIC_STATS_INFO answers them.
type QueueStats struct {
	Queue     mq.MessageQueue
	MinOffset int64 // first offset still stored
	MaxOffset int64 // next offset to be written
}

// GroupQueueStats is a consumer group's progress on one queue, as GET_CONSUME_STATS
// answers it.
type GroupQueueStats struct {
	Queue          mq.MessageQueue
	BrokerOffset   int64 // the queue's max offset
	ConsumerOffset int64 // the group's committed offset; 0 also when it has none
}

// masters returns the master address of every broker the name servers know.
func (c *Client) masters(ctx context.Context) ([]string, error) {
	if err := c.learnCluster(ctx); err != nil {
		return nil, err
	}
	addrs := c.brokerAddrs()
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: the name servers know no broker", mq.ErrUnavailable)
	}
	return addrs, nil
}

// routeMasters returns the master address of each broker of topic's route, by broker name.
func (c *Client) routeMasters(ctx context.Context, topic string) ([]mq.BrokerData, error) {
	r, err := c.fetchRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	var bs []mq.BrokerData
	for _, b := range r.Brokers {
		if b.Addrs[mq.MasterID] != "" {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return nil, fmt.Errorf("%w: the route of %q has no master", mq.ErrUnavailable, topic)
	}
	slices.SortFunc(bs, func(a, b mq.BrokerData) int { return strings.Compare(a.Name, b.Name) })
	return bs, nil
}

// adminCall sends a request to addr and returns its reply, whose code must be Success.
func (c *Client) adminCall(ctx context.Context, addr string, code int16, ext map[string]string, body []byte) (*Command, error) {
	req := NewRequest(code, ext, body)
	resp, err := c.invoke(ctx, addr, req, c.opts.RequestTimeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != Success {
		return nil, CodeError(addr, code, resp.Code, resp.Remark)
	}
	return resp, nil
}

// CreateTopic creates the topic, or replaces its config, on every master the name servers
// know (UPDATE_AND_CREATE_TOPIC), as mqadmin updateTopic -c does.
func (c *Client) CreateTopic(ctx context.Context, cfg TopicConfig) error {
	if err := mq.ValidateTopic(cfg.Name); err != nil {
		return err
	}
	addrs, err := c.masters(ctx)
	if err != nil {
		return err
	}
	h := CreateTopicHeader{Topic: cfg.Name, DefaultTopic: "TBW102", ReadQueueNums: cfg.ReadQueues, WriteQueueNums: cfg.WriteQueues,
		Perm: cfg.Perm, TopicFilterType: "SINGLE_TAG", Order: cfg.Order, Attributes: FormatAttributes(cfg.Attributes)}
	for _, a := range addrs {
		if _, err := c.adminCall(ctx, a, UpdateAndCreateTopic, h.Ext(), nil); err != nil {
			return err
		}
	}
	c.dropRoute(cfg.Name)
	return nil
}

// DeleteTopic deletes the topic from every master the name servers know
// (DELETE_TOPIC_IN_BROKER), then from the name servers (DELETE_TOPIC_IN_NAMESRV), as
// mqadmin deleteTopic does.
func (c *Client) DeleteTopic(ctx context.Context, topic string) error {
	addrs, err := c.masters(ctx)
	if err != nil {
		return err
	}
	ext := TopicHeader{Topic: topic}.Ext()
	for _, a := range addrs {
		if _, err := c.adminCall(ctx, a, DeleteTopicInBroker, ext, nil); err != nil {
			return err
		}
	}
	for _, a := range c.namesrvs {
		if _, err := c.adminCall(ctx, a, DeleteTopicInNamesrv, ext, nil); err != nil {
			return err
		}
	}
	c.dropRoute(topic)
	return nil
}

// dropRoute forgets the cached route of topic: its queues changed.
func (c *Client) dropRoute(topic string) {
	c.mu.Lock()
	delete(c.routes, topic)
	c.mu.Unlock()
}

// TopicList returns the names of every topic the name servers know, system topics too
// (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted.
func (c *Client) TopicList(ctx context.Context) ([]string, error) {
	req := NewRequest(GetAllTopicListFromNameServer, nil, nil)
	resp, addr, err := c.invokeNamesrv(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := respError(addr, req.Code, resp, Success); err != nil {
		return nil, err
	}
	var body struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("remoting: topic list from %s: %w: %v", addr, ErrMalformed, err)
	}
	slices.Sort(body.TopicList)
	return slices.Compact(body.TopicList), nil
}

// TopicConfig returns the config of topic from the first broker of its route
// (GET_TOPIC_CONFIG). A broker that does not answer that request (RocketMQ before 5) is
// read from the route instead: queues and permission, Order false. A topic that does not
// exist is mq.ErrTopicNotExist.
func (c *Client) TopicConfig(ctx context.Context, topic string) (TopicConfig, error) {
	bs, err := c.routeMasters(ctx, topic)
	if err != nil {
		return TopicConfig{}, err
	}
	addr := bs[0].Addrs[mq.MasterID]
	resp, err := c.adminCall(ctx, addr, GetTopicConfig, TopicHeader{Topic: topic}.Ext(), nil)
	if errors.Is(err, errors.ErrUnsupported) {
		r, err := c.Route(ctx, topic)
		if err != nil {
			return TopicConfig{}, err
		}
		for _, q := range r.Queues {
			if q.BrokerName == bs[0].Name {
				return TopicConfig{Name: topic, ReadQueues: q.ReadQueues, WriteQueues: q.WriteQueues, Perm: q.Perm}, nil
			}
		}
		return TopicConfig{}, fmt.Errorf("%w: the route of %q has no queues on %s", mq.ErrTopicNotExist, topic, bs[0].Name)
	}
	if err != nil {
		return TopicConfig{}, err
	}
	var j struct {
		TopicName      string            `json:"topicName"`
		ReadQueueNums  json.RawMessage   `json:"readQueueNums"`
		WriteQueueNums json.RawMessage   `json:"writeQueueNums"`
		Perm           json.RawMessage   `json:"perm"`
		Order          bool              `json:"order"`
		Attributes     map[string]string `json:"attributes"`
	}
	// RocketMQ 5 wraps the config: {"topicConfig":{...},"mappingDetail":...}.
	var wrapped struct {
		TopicConfig json.RawMessage `json:"topicConfig"`
	}
	body := resp.Body
	if json.Unmarshal(body, &wrapped) == nil && isJSONObject(wrapped.TopicConfig) {
		body = wrapped.TopicConfig
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return TopicConfig{}, fmt.Errorf("remoting: topic config from %s: %w: %v", addr, ErrMalformed, err)
	}
	cfg := TopicConfig{Name: cmp.Or(j.TopicName, topic), Order: j.Order}
	if len(j.Attributes) > 0 {
		cfg.Attributes = j.Attributes
	}
	for _, f := range []struct {
		dst  *int32
		raw  json.RawMessage
		name string
	}{{&cfg.ReadQueues, j.ReadQueueNums, "readQueueNums"}, {&cfg.WriteQueues, j.WriteQueueNums, "writeQueueNums"}, {&cfg.Perm, j.Perm, "perm"}} {
		n, err := jsonInt(f.raw, 32, f.name)
		if err != nil {
			return TopicConfig{}, fmt.Errorf("remoting: topic config from %s: %w", addr, err)
		}
		*f.dst = int32(n)
	}
	return cfg, nil
}

// TopicStats returns the offsets of each queue of topic on every broker of its route
// (GET_TOPIC_STATS_INFO), sorted by broker and queue id.
func (c *Client) TopicStats(ctx context.Context, topic string) ([]QueueStats, error) {
	bs, err := c.routeMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []QueueStats
	for _, b := range bs {
		addr := b.Addrs[mq.MasterID]
		resp, err := c.adminCall(ctx, addr, GetTopicStatsInfo, TopicHeader{Topic: topic}.Ext(), nil)
		if err != nil {
			return nil, err
		}
		entries, err := parseQueueTable(resp.Body, "offsetTable")
		if err != nil {
			return nil, fmt.Errorf("remoting: topic stats from %s: %w", addr, err)
		}
		for _, e := range entries {
			var v struct {
				MinOffset json.RawMessage `json:"minOffset"`
				MaxOffset json.RawMessage `json:"maxOffset"`
			}
			if err := json.Unmarshal(e.value, &v); err != nil {
				return nil, fmt.Errorf("remoting: topic stats from %s: %w: %v", addr, ErrMalformed, err)
			}
			qs := QueueStats{Queue: e.queue}
			if qs.MinOffset, err = jsonInt(v.MinOffset, 64, "minOffset"); err != nil {
				return nil, err
			}
			if qs.MaxOffset, err = jsonInt(v.MaxOffset, 64, "maxOffset"); err != nil {
				return nil, err
			}
			out = append(out, qs)
		}
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return compareQueues(a.Queue, b.Queue) })
	return out, nil
}

func compareQueues(a, b mq.MessageQueue) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
}

// ConsumeStats returns group's progress on each queue of topic, on every broker of its
// route (GET_CONSUME_STATS), sorted by broker and queue id. A queue on which the group has
// no offset reads ConsumerOffset 0, as brokers answer. A group the broker does not know
// is mq.ErrGroupNotExist (SUBSCRIPTION_GROUP_NOT_EXIST).
func (c *Client) ConsumeStats(ctx context.Context, group, topic string) ([]GroupQueueStats, error) {
	bs, err := c.routeMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []GroupQueueStats
	for _, b := range bs {
		addr := b.Addrs[mq.MasterID]
		ext := map[string]string{"consumerGroup": group, "topic": topic}
		resp, err := c.adminCall(ctx, addr, GetConsumeStats, ext, nil)
		if err != nil {
			return nil, err
		}
		entries, err := parseQueueTable(resp.Body, "offsetTable")
		if err != nil {
			return nil, fmt.Errorf("remoting: consume stats from %s: %w", addr, err)
		}
		for _, e := range entries {
			var v struct {
				BrokerOffset   json.RawMessage `json:"brokerOffset"`
				ConsumerOffset json.RawMessage `json:"consumerOffset"`
			}
			if err := json.Unmarshal(e.value, &v); err != nil {
				return nil, fmt.Errorf("remoting: consume stats from %s: %w: %v", addr, ErrMalformed, err)
			}
			gs := GroupQueueStats{Queue: e.queue}
			if gs.BrokerOffset, err = jsonInt(v.BrokerOffset, 64, "brokerOffset"); err != nil {
				return nil, err
			}
			if gs.ConsumerOffset, err = jsonInt(v.ConsumerOffset, 64, "consumerOffset"); err != nil {
				return nil, err
			}
			out = append(out, gs)
		}
	}
	slices.SortFunc(out, func(a, b GroupQueueStats) int { return compareQueues(a.Queue, b.Queue) })
	return out, nil
}

// ConsumerGroups returns the groups that consume topic (QUERY_TOPIC_CONSUME_BY_WHO), from
// every broker of its route, sorted.
func (c *Client) ConsumerGroups(ctx context.Context, topic string) ([]string, error) {
	bs, err := c.routeMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bs {
		addr := b.Addrs[mq.MasterID]
		resp, err := c.adminCall(ctx, addr, QueryTopicConsumeByWho, TopicHeader{Topic: topic}.Ext(), nil)
		if err != nil {
			return nil, err
		}
		var body struct {
			GroupList []string `json:"groupList"`
		}
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return nil, fmt.Errorf("remoting: consumer groups from %s: %w: %v", addr, ErrMalformed, err)
		}
		out = append(out, body.GroupList...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ResetOffsets moves group's offsets on every queue of topic, on every broker of its
// route, to the first message stored at or after timestamp (unix ms); timestamp -1 moves
// them to the end (INVOKE_BROKER_TO_RESET_OFFSET, forced). It returns the new offsets.
// The broker tells the group's running consumers (RESET_CONSUMER_CLIENT_OFFSET).
func (c *Client) ResetOffsets(ctx context.Context, group, topic string, timestamp int64) (map[mq.MessageQueue]int64, error) {
	bs, err := c.routeMasters(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[mq.MessageQueue]int64{}
	for _, b := range bs {
		addr := b.Addrs[mq.MasterID]
		h := ResetOffsetHeader{Topic: topic, Group: group, Timestamp: timestamp, IsForce: true, QueueID: -1, Offset: -1}
		resp, err := c.adminCall(ctx, addr, InvokeBrokerToResetOffset, h.Ext(), nil)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(resp.Body)) == 0 {
			continue
		}
		if err := decodeOffsetTable(resp.Body, out); err != nil {
			return nil, fmt.Errorf("remoting: reset offsets from %s: %w", addr, err)
		}
	}
	return out, nil
}

// decodeOffsetTable adds the entries of RocketMQ's ResetOffsetBody
// ({"offsetTable":{<queue>:<offset>,...}}) to out.
func decodeOffsetTable(body []byte, out map[mq.MessageQueue]int64) error {
	entries, err := parseQueueTable(body, "offsetTable")
	if err != nil {
		return err
	}
	for _, e := range entries {
		n, err := jsonInt(e.value, 64, "offset")
		if err != nil {
			return err
		}
		out[e.queue] = n
	}
	return nil
}

// BrokerRuntimeInfo returns the runtime table of every master the name servers know
// (GET_BROKER_RUNTIME_INFO), by address: string keys and values, as RocketMQ's brokers
// answer (commitLogMinOffset, commitLogMaxOffset, msgPutTotalTodayNow, ...).
func (c *Client) BrokerRuntimeInfo(ctx context.Context) (map[string]map[string]string, error) {
	addrs, err := c.masters(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, a := range addrs {
		resp, err := c.adminCall(ctx, a, GetBrokerRuntimeInfo, nil, nil)
		if err != nil {
			return nil, err
		}
		var body struct {
			Table map[string]string `json:"table"`
		}
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return nil, fmt.Errorf("remoting: runtime info from %s: %w: %v", a, ErrMalformed, err)
		}
		out[a] = body.Table
	}
	return out, nil
}

// queueEntry is one entry of a map keyed by message queue.
type queueEntry struct {
	queue mq.MessageQueue
	value json.RawMessage
}

// parseQueueTable reads field of the JSON object body: a map keyed by message queue,
// which RocketMQ writes with the queue object itself as the key, not valid JSON:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":3,...},...}}
//
// A body without field is an empty table.
func parseQueueTable(body []byte, field string) ([]queueEntry, error) {
	// The field's name cannot occur elsewhere followed by a colon: the keys and values of
	// the tables are queues (topic and broker names without quotes) and numbers.
	if !isJSONObject(body) {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	var rest []byte
	skip := func() {
		rest = bytes.TrimLeft(rest, " \t\r\n")
	}
	expect := func(c byte) bool {
		skip()
		if len(rest) > 0 && rest[0] == c {
			rest = rest[1:]
			return true
		}
		return false
	}
	key := []byte(strconv.Quote(field))
	for found, from := false, 0; !found; {
		i := bytes.Index(body[from:], key)
		if i < 0 {
			return nil, nil
		}
		from += i + len(key)
		rest = body[from:]
		found = expect(':')
	}
	// value decodes the JSON value at the start of rest.
	value := func() (json.RawMessage, error) {
		skip()
		dec := json.NewDecoder(bytes.NewReader(rest))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, field, err)
		}
		rest = rest[dec.InputOffset():]
		return raw, nil
	}
	if !expect('{') {
		return nil, fmt.Errorf("%w: %s is not an object", ErrMalformed, field)
	}
	var out []queueEntry
	if expect('}') {
		return out, nil
	}
	for {
		k, err := value()
		if err != nil {
			return nil, err
		}
		var q struct {
			Topic      string          `json:"topic"`
			BrokerName string          `json:"brokerName"`
			QueueID    json.RawMessage `json:"queueId"`
		}
		if !isJSONObject(k) {
			// A queue key may also come as a string holding the object.
			var s string
			if json.Unmarshal(k, &s) != nil || !isJSONObject([]byte(s)) {
				return nil, fmt.Errorf("%w: %s: a key is not a message queue", ErrMalformed, field)
			}
			k = json.RawMessage(s)
		}
		if err := json.Unmarshal(k, &q); err != nil {
			return nil, fmt.Errorf("%w: %s: key: %v", ErrMalformed, field, err)
		}
		id, err := jsonInt(q.QueueID, 32, "queueId")
		if err != nil {
			return nil, err
		}
		if !expect(':') {
			return nil, fmt.Errorf("%w: %s: want ':' after a key", ErrMalformed, field)
		}
		v, err := value()
		if err != nil {
			return nil, err
		}
		out = append(out, queueEntry{mq.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(id)}, v})
		if expect(',') {
			continue
		}
		if expect('}') {
			return out, nil
		}
		return nil, fmt.Errorf("%w: %s: want ',' or '}'", ErrMalformed, field)
	}
}

// ClusterBrokers returns every broker of every cluster the name servers know
// (GET_BROKER_CLUSTER_INFO), sorted by name: its cluster, name and addresses by broker id.
func (c *Client) ClusterBrokers(ctx context.Context) ([]mq.BrokerData, error) {
	req := NewRequest(GetBrokerClusterInfo, nil, nil)
	resp, addr, err := c.invokeNamesrv(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := respError(addr, req.Code, resp, Success); err != nil {
		return nil, err
	}
	var info struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
	}
	if err := json.Unmarshal(quoteNumericKeys(resp.Body), &info); err != nil {
		return nil, fmt.Errorf("remoting: cluster info from %s: %w: %v", addr, ErrMalformed, err)
	}
	var out []mq.BrokerData
	for name, b := range info.BrokerAddrTable {
		bd := mq.BrokerData{Cluster: b.Cluster, Name: name, Addrs: map[int64]string{}}
		for id, a := range b.BrokerAddrs {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				bd.Addrs[n] = a
			}
		}
		out = append(out, bd)
	}
	slices.SortFunc(out, func(a, b mq.BrokerData) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateGroup creates a consumer group, or replaces its config with RocketMQ's defaults,
// on every master the name servers know (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), as mqadmin
// updateSubGroup does: for brokers that serve only the groups they know (Apache RocketMQ
// with autoCreateSubscriptionGroup off, or before a member's first heartbeat).
func (c *Client) CreateGroup(ctx context.Context, group string) error {
	if err := mq.ValidateGroup(group); err != nil {
		return err
	}
	addrs, err := c.masters(ctx)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(struct {
		GroupName              string `json:"groupName"`
		ConsumeEnable          bool   `json:"consumeEnable"`
		ConsumeFromMinEnable   bool   `json:"consumeFromMinEnable"`
		ConsumeBroadcastEnable bool   `json:"consumeBroadcastEnable"`
		RetryQueueNums         int    `json:"retryQueueNums"`
		RetryMaxTimes          int    `json:"retryMaxTimes"`
		BrokerID               int    `json:"brokerId"`
		WhichBrokerWhenSlowly  int    `json:"whichBrokerWhenConsumeSlowly"`
		NotifyIDsChanged       bool   `json:"notifyConsumerIdsChangedEnable"`
	}{group, true, true, true, 1, 16, 0, 1, true})
	for _, a := range addrs {
		if _, err := c.adminCall(ctx, a, UpdateAndCreateSubscriptionGroup, nil, body); err != nil {
			return err
		}
	}
	return nil
}

// FormatAttributes writes topic attributes as UPDATE_AND_CREATE_TOPIC carries them:
// "+key=value" each, sorted by key, comma-separated; "" for none.
func FormatAttributes(attrs map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString("+" + k + "=" + attrs[k])
	}
	return b.String()
}

// ParseAttributes reads topic attributes as UPDATE_AND_CREATE_TOPIC carries them: set has
// each "+key=value", unset each "-key". An item of neither form is ErrMalformed.
func ParseAttributes(s string) (set map[string]string, unset []string, err error) {
	set = map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case item[0] == '+':
			k, v, ok := strings.Cut(item[1:], "=")
			if !ok || k == "" {
				return nil, nil, fmt.Errorf("%w: topic attribute %q: want +key=value", ErrMalformed, item)
			}
			set[k] = v
		case item[0] == '-' && len(item) > 1:
			unset = append(unset, item[1:])
		default:
			return nil, nil, fmt.Errorf("%w: topic attribute %q: want +key=value or -key", ErrMalformed, item)
		}
	}
	return set, unset, nil
}
