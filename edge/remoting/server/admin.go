package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
)

// The admin requests of RocketMQ's mqadmin. Their bodies are RocketMQ's admin JSON, in
// which a map keyed by a message queue has the queue object as its key, as the Java tools
// read it.

// appendQueueKey appends a message queue as a JSON object, fields in RocketMQ's order.
func appendQueueKey(b *strings.Builder, broker, topic string, id int32) {
	fmt.Fprintf(b, `{"brokerName":%s,"queueId":%d,"topic":%s}`, jsonString(broker), id, jsonString(topic))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func bodyReply(req *remoting.Command, body []byte) *remoting.Command {
	resp := req.Reply(remoting.Success, "")
	resp.Body = body
	return resp
}

// updateTopic answers UPDATE_AND_CREATE_TOPIC: the topic is created or its queues and
// permission replaced.
func (s *Server) updateTopic(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseCreateTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	cfg := edge.TopicConfig{Name: h.Topic, ReadQueues: h.ReadQueueNums, WriteQueues: h.WriteQueueNums, Perm: h.Perm, Order: h.Order}
	if old, err := s.b.Topic(h.Topic); err == nil {
		cfg.Durability = old.Durability // kept unless the attributes say
	}
	set, unset, err := remoting.ParseAttributes(h.Attributes)
	if err != nil {
		return errReply(req, fmt.Errorf("%w: %w", mq.ErrInvalidArgument, err))
	}
	if slices.Contains(unset, edge.DurabilityAttr) {
		cfg.Durability = store.DurabilityDefault
	}
	if v, ok := set[edge.DurabilityAttr]; ok { // other attributes (RocketMQ's message.type) mean nothing here
		if cfg.Durability, err = store.ParseDurability(v); err != nil {
			return errReply(req, fmt.Errorf("%w: topic attribute %s: %w", mq.ErrInvalidArgument, edge.DurabilityAttr, err))
		}
	}
	if err := s.b.UpdateTopic(cfg); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// deleteTopic answers DELETE_TOPIC_IN_BROKER and DELETE_TOPIC_IN_NAMESRV (mqadmin sends
// both; the second finds the topic gone): a topic that does not exist is no error.
func (s *Server) deleteTopic(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	if err := s.b.DeleteTopic(h.Topic); err != nil && !errors.Is(err, mq.ErrTopicNotExist) {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// topicStats answers GET_TOPIC_STATS_INFO: each queue's min and max offsets.
func (s *Server) topicStats(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	topic := h.Topic
	cfg, err := s.b.Topic(topic)
	if err != nil {
		return errReply(req, err)
	}
	broker := s.b.Options().BrokerName
	var b strings.Builder
	b.WriteString(`{"offsetTable":{`)
	for q := int32(0); q < max(cfg.ReadQueues, cfg.WriteQueues); q++ {
		mqq := mq.MessageQueue{Topic: topic, QueueID: q}
		minOff, err := s.b.MinOffset(c.ctx, mqq)
		if err != nil {
			return errReply(req, err)
		}
		maxOff, err := s.b.MaxOffset(c.ctx, mqq)
		if err != nil {
			return errReply(req, err)
		}
		if q > 0 {
			b.WriteByte(',')
		}
		appendQueueKey(&b, broker, topic, q)
		fmt.Fprintf(&b, `:{"lastUpdateTimestamp":0,"maxOffset":%d,"minOffset":%d}`, maxOff, minOff)
	}
	b.WriteString(`},"topicPutTps":0.0}`)
	return bodyReply(req, []byte(b.String()))
}

// runtimeInfo answers GET_BROKER_RUNTIME_INFO with a table of the broker's state.
func (s *Server) runtimeInfo(c *conn, req *remoting.Command) *remoting.Command {
	o := s.b.Options()
	t := map[string]string{
		"brokerName":         o.BrokerName,
		"brokerVersion":      strconv.Itoa(int(remoting.Version)),
		"brokerVersionDesc":  "EdgeMQ",
		"clusterName":        s.opts.ClusterName,
		"bootTimestamp":      strconv.FormatInt(s.started.UnixMilli(), 10),
		"runtime":            time.Since(s.started).Round(time.Second).String(),
		"topicCount":         strconv.Itoa(len(s.b.Topics())),
		"consumerGroupCount": strconv.Itoa(len(s.b.Groups())),
	}
	var in, out int64
	for _, tc := range s.b.Topics() {
		in += s.b.TopicStats(tc.Name).MessagesIn
	}
	for _, g := range s.b.Groups() {
		out += s.b.GroupStats(g).MessagesOut
	}
	t["msgPutTotalTodayNow"] = strconv.FormatInt(in, 10)
	t["msgGetTotalTodayNow"] = strconv.FormatInt(out, 10)
	// What mqadmin clusterList reads and the broker does not measure: the counters since
	// the start stand for "today", the rates and queues are zero.
	for _, k := range []string{"msgPutTotalTodayMorning", "msgGetTotalTodayMorning", "msgPutTotalYesterdayMorning",
		"msgGetTotalYesterdayMorning", "sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "ackThreadPoolQueueSize",
		"sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueHeadWaitTimeMills",
		"pageCacheLockTimeMills", "timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps"} {
		t[k] = "0"
	}
	t["putTps"], t["getTransferredTps"] = "0.0 0.0 0.0", "0.0 0.0 0.0"
	t["brokerActive"] = "true"
	if st, err := s.b.StoreStats(); err == nil {
		t["commitLogMinOffset"] = strconv.FormatInt(st.MinPos, 10)
		t["commitLogMaxOffset"] = strconv.FormatInt(st.MaxPos, 10)
		t["commitLogDurableOffset"] = strconv.FormatInt(st.DurablePos, 10)
		t["commitLogDiskBytes"] = strconv.FormatInt(st.SegmentBytes, 10)
		for k, v := range recoveryTable(st.Recovery) {
			t[k] = v
		}
	}
	s.mu.Lock()
	t["connections"] = strconv.Itoa(len(s.conns))
	s.mu.Unlock()
	t["goroutines"] = strconv.Itoa(runtime.NumGoroutine()) // EdgeMQ's own: a leak shows here
	body, _ := json.Marshal(struct {
		Table map[string]string `json:"table"`
	}{t})
	return bodyReply(req, body)
}

// Runtime-info keys of what the store's recovery cut when the broker opened: EdgeMQ's own,
// beside RocketMQ's (mqadmin brokerStatus lists them as they are).
const (
	KeyRecoveryRecords       = "edgemqRecoveryRecords"
	KeyRecoveryBytes         = "edgemqRecoveryBytes"
	KeyRecoveryQueueEntries  = "edgemqRecoveryQueueEntries"
	KeyRecoveryQueues        = "edgemqRecoveryQueues"
	KeyRecoveryEmptyRemoved  = "edgemqRecoveryEmptySegmentsRemoved"
	KeyRecoveryBrokenMade    = "edgemqRecoveryBrokenMade"
	KeyRecoveryBrokenDeleted = "edgemqRecoveryBrokenDeleted"
	KeyBrokenFiles           = "edgemqBrokenFiles"
	KeyBrokenBytes           = "edgemqBrokenBytes"
)

// recoveryTable gives r under the runtime-info keys above.
func recoveryTable(r store.RecoveryStats) map[string]string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	return map[string]string{
		KeyRecoveryRecords: i(r.Records), KeyRecoveryBytes: i(r.Bytes),
		KeyRecoveryQueueEntries: i(r.QueueEntries), KeyRecoveryQueues: i(int64(r.Queues)),
		KeyRecoveryEmptyRemoved: i(int64(r.EmptyRemoved)), KeyRecoveryBrokenMade: i(int64(r.BrokenMade)),
		KeyRecoveryBrokenDeleted: i(int64(r.BrokenDeleted)), KeyBrokenFiles: i(int64(r.BrokenFiles)),
		KeyBrokenBytes: i(r.BrokenBytes),
	}
}

// consumeStats answers GET_CONSUME_STATS: for each queue of the topic (or of every topic
// the group has offsets on or subscribes to), the broker's max offset and the group's.
func (s *Server) consumeStats(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseConsumerListHeader(req.Fields()) // consumerGroup, and an optional topic
	if err != nil {
		return errReply(req, err)
	}
	group, topic := h.ConsumerGroup, req.Fields()["topic"]
	members, err := s.b.Members(group)
	if err != nil {
		return errReply(req, err)
	}
	var topics []string
	if topic != "" {
		topics = []string{topic}
	} else {
		subscribed := map[string]bool{}
		for _, m := range members {
			for _, sub := range m.Subscriptions {
				subscribed[sub.Topic] = true
			}
		}
		for _, tc := range s.b.Topics() {
			if tc.Name == mq.ScheduleTopic {
				continue
			}
			lags, err := s.b.Lag(group, tc.Name)
			if err != nil {
				continue
			}
			if subscribed[tc.Name] || slices.ContainsFunc(lags, func(l edge.QueueLag) bool { return l.ConsumerOffset >= 0 }) {
				topics = append(topics, tc.Name)
			}
		}
	}
	broker := s.b.Options().BrokerName
	var b strings.Builder
	b.WriteString(`{"consumeTps":0.0,"offsetTable":{`)
	first := true
	for _, t := range topics {
		lags, err := s.b.Lag(group, t)
		if err != nil {
			return errReply(req, err)
		}
		for _, l := range lags {
			if !first {
				b.WriteByte(',')
			}
			first = false
			appendQueueKey(&b, broker, t, l.QueueID)
			co := max(l.ConsumerOffset, 0)
			fmt.Fprintf(&b, `:{"brokerOffset":%d,"consumerOffset":%d,"lastTimestamp":0,"pullOffset":%d}`, l.MaxOffset, co, co)
		}
	}
	b.WriteString(`}}`)
	return bodyReply(req, []byte(b.String()))
}

// consumerConnections answers GET_CONSUMER_CONNECTION_LIST: the group's members on this
// server's connections, with their subscriptions. A group without members is
// CONSUMER_NOT_ONLINE, as RocketMQ's broker answers.
func (s *Server) consumerConnections(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseConsumerListHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	group := h.ConsumerGroup
	members, err := s.b.Members(group)
	if err != nil && !errors.Is(err, mq.ErrGroupNotExist) {
		return errReply(req, err)
	}
	if len(members) == 0 {
		return req.Reply(remoting.ConsumerNotOnline, fmt.Sprintf("the consumer group[%s] not online", group))
	}
	type connection struct {
		ClientID   string `json:"clientId"`
		ClientAddr string `json:"clientAddr"`
		Language   string `json:"language"`
		Version    int    `json:"version"`
	}
	type subscription struct {
		ClassFilterMode bool     `json:"classFilterMode"`
		Topic           string   `json:"topic"`
		SubString       string   `json:"subString"`
		TagsSet         []string `json:"tagsSet"`
		CodeSet         []int32  `json:"codeSet"`
		SubVersion      int64    `json:"subVersion"`
		ExpressionType  string   `json:"expressionType"`
	}
	out := struct {
		ConnectionSet     []connection            `json:"connectionSet"`
		SubscriptionTable map[string]subscription `json:"subscriptionTable"`
		ConsumeType       string                  `json:"consumeType"`
		MessageModel      string                  `json:"messageModel"`
		ConsumeFromWhere  string                  `json:"consumeFromWhere"`
	}{ConnectionSet: []connection{}, SubscriptionTable: map[string]subscription{}}
	last := members[0]
	for _, m := range members {
		if m.LastHeartbeat.After(last.LastHeartbeat) {
			last = m
		}
		for _, ci := range s.clientConns(m.ClientID) {
			out.ConnectionSet = append(out.ConnectionSet, connection{m.ClientID, ci.addr, ci.lang.String(), int(ci.version)})
		}
		for _, sub := range m.Subscriptions {
			tags := []string{}
			if ftr, err := mq.ParseTagFilter(sub.Expression); err == nil {
				tags = append(tags, ftr.Tags()...)
			}
			out.SubscriptionTable[sub.Topic] = subscription{Topic: sub.Topic, SubString: sub.Expression, TagsSet: tags,
				CodeSet: []int32{}, SubVersion: sub.SubVersion, ExpressionType: "TAG"}
		}
	}
	out.ConsumeType, out.MessageModel, out.ConsumeFromWhere = last.ConsumeType.String(), last.Model.String(), last.FromWhere
	body, _ := json.Marshal(out)
	return bodyReply(req, body)
}

// clientInfo is what the server knows of a client's connection.
type clientInfo struct {
	addr    string
	lang    remoting.LanguageCode
	version int16
}

// connsOf returns the connections client id heartbeats on.
func (s *Server) connsOf(id string) []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.clients[id]))
}

// clientConns returns the connections client id heartbeats on, sorted by address.
func (s *Server) clientConns(id string) []clientInfo {
	cs := s.connsOf(id)
	out := make([]clientInfo, 0, len(cs))
	for _, c := range cs {
		c.mu.Lock()
		out = append(out, clientInfo{addr: c.remote, lang: c.lang, version: c.version})
		c.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b clientInfo) int { return strings.Compare(a.addr, b.addr) })
	return out
}

// viewMessage answers VIEW_MESSAGE_BY_ID (the client turns the offset message id into its
// commit-log offset): the message as a V1 record.
func (s *Server) viewMessage(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseViewMessageHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	m, err := s.b.ViewMessage(c.ctx, h.Offset)
	if err != nil {
		return errReply(req, err)
	}
	return bodyReply(req, s.appendRecords(c, nil, []mq.MessageExt{m}))
}

// resetOffset answers INVOKE_BROKER_TO_RESET_OFFSET: the group's offsets of the topic move
// to the first message stored at or after the timestamp, and the new offsets are returned.
// As RocketMQ's brokers, the group's connected members are then sent
// RESET_CONSUMER_CLIENT_OFFSET with the new offsets (by the broker, through their
// heartbeats' OnReset: see heartbeat), so that running consumers move too.
func (s *Server) resetOffset(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseResetOffsetHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	topic := h.Topic
	where, at := edge.ResetToTimestamp, time.UnixMilli(h.Timestamp)
	if h.Timestamp < 0 {
		where = edge.ResetToLast
	}
	offs, err := s.b.ResetOffsets(h.Group, topic, where, at)
	if err != nil {
		return errReply(req, err)
	}
	broker := s.b.Options().BrokerName
	byQueue := make(map[mq.MessageQueue]int64, len(offs))
	for q, off := range offs {
		byQueue[mq.MessageQueue{Topic: topic, BrokerName: broker, QueueID: q}] = off
	}
	return bodyReply(req, offsetTableBody(byQueue))
}

// offsetTableBody is RocketMQ's ResetOffsetBody: {"offsetTable":{<queue>:<offset>,...}},
// the queues in order.
func offsetTableBody(offs map[mq.MessageQueue]int64) []byte {
	var b strings.Builder
	b.WriteString(`{"offsetTable":{`)
	for i, q := range slices.SortedFunc(maps.Keys(offs), mq.CompareQueues) {
		if i > 0 {
			b.WriteByte(',')
		}
		appendQueueKey(&b, q.BrokerName, q.Topic, q.QueueID)
		fmt.Fprintf(&b, `:%d`, offs[q])
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// groupConfigJSON is RocketMQ's SubscriptionGroupConfig, the fields the broker keeps and
// the constants it does not.
type groupConfigJSON struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  *bool             `json:"consumeEnable"`
	ConsumeFromMinEnable           *bool             `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         *bool             `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32             `json:"retryQueueNums"`
	RetryMaxTimes                  int32             `json:"retryMaxTimes"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32             `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int32             `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes"`
}

func groupConfigOf(g edge.GroupConfig) groupConfigJSON {
	return groupConfigJSON{GroupName: g.Name, ConsumeEnable: &g.ConsumeEnable, ConsumeFromMinEnable: &g.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: &g.BroadcastEnable, RetryQueueNums: g.RetryQueues, RetryMaxTimes: g.MaxReconsumeTimes,
		WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15, Attributes: map[string]string{}}
}

// updateGroup answers UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the group in the body is made
// known (with its retry topic) and its config stored. Absent switches take RocketMQ's
// defaults (on).
func (s *Server) updateGroup(c *conn, req *remoting.Command) *remoting.Command {
	var j groupConfigJSON
	if err := json.Unmarshal(req.Body, &j); err != nil {
		return req.Reply(remoting.InvalidParameter, "server: subscription group config: "+err.Error())
	}
	on := func(b *bool) bool { return b == nil || *b }
	cfg := edge.GroupConfig{Name: j.GroupName, ConsumeEnable: on(j.ConsumeEnable), BroadcastEnable: on(j.ConsumeBroadcastEnable),
		RetryQueues: j.RetryQueueNums, MaxReconsumeTimes: j.RetryMaxTimes, ConsumeFromMinEnable: on(j.ConsumeFromMinEnable)}
	if err := s.b.CreateGroup(cfg); err != nil {
		return errReply(req, err)
	}
	return req.Reply(remoting.Success, "")
}

// groupConfigs answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group's stored config.
func (s *Server) groupConfigs(c *conn, req *remoting.Command) *remoting.Command {
	cfgs, err := s.b.GroupConfigs()
	if err != nil {
		return errReply(req, err)
	}
	table := make(map[string]groupConfigJSON, len(cfgs))
	for _, g := range cfgs {
		table[g.Name] = groupConfigOf(g)
	}
	body, _ := json.Marshal(struct {
		Table       map[string]groupConfigJSON `json:"subscriptionGroupTable"`
		DataVersion struct {
			Counter   int64 `json:"counter"`
			Timestamp int64 `json:"timestamp"`
		} `json:"dataVersion"`
	}{Table: table})
	return bodyReply(req, body)
}

// maxQueryMsgs caps the messages QUERY_MESSAGE returns (RocketMQ's maxMsgsNumBatch).
const maxQueryMsgs = 64

// queryMessage answers QUERY_MESSAGE (mqadmin queryMsgByKey, and a message looked up by
// its unique key): the topic's messages with the key stored in the time range, as V1
// records; QUERY_NOT_FOUND when there are none. The broker reads the range: it keeps no
// key index.
func (s *Server) queryMessage(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseQueryMessageHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	n := int(h.MaxNum)
	if n <= 0 || n > maxQueryMsgs {
		n = maxQueryMsgs
	}
	msgs, err := s.b.MessagesByKey(c.ctx, h.Topic, h.Key, n, time.UnixMilli(h.BeginTimestamp), time.UnixMilli(h.EndTimestamp))
	if err != nil {
		return errReply(req, err)
	}
	if len(msgs) == 0 {
		return req.Reply(remoting.QueryNotFound, "can not find message, maybe time range not correct")
	}
	body := s.appendRecords(c, nil, msgs)
	rh := remoting.QueryMessageResponseHeader{IndexLastUpdateTimestamp: time.Now().UnixMilli()}
	if st, err := s.b.StoreStats(); err == nil {
		rh.IndexLastUpdatePhyoffset = st.MaxPos
	}
	resp := bodyReply(req, body)
	resp.Ext = rh.Ext()
	return resp
}

// topicConfigJSON is RocketMQ's TopicConfig as its admin tools read it.
type topicConfigJSON struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

func topicConfig(cfg edge.TopicConfig) topicConfigJSON {
	attrs := map[string]string{}
	if cfg.Durability != store.DurabilityDefault {
		attrs[edge.DurabilityAttr] = cfg.Durability.String()
	}
	return topicConfigJSON{TopicName: cfg.Name, ReadQueueNums: cfg.ReadQueues, WriteQueueNums: cfg.WriteQueues, Perm: cfg.Perm,
		TopicFilterType: "SINGLE_TAG", Order: cfg.Order, Attributes: attrs}
}

// topicConfigReply answers GET_TOPIC_CONFIG (mqadmin topicStatus and others read a topic's
// config from each broker of its route first).
func (s *Server) topicConfigReply(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	cfg, err := s.b.Topic(h.Topic)
	if err != nil {
		return errReply(req, err)
	}
	body, _ := json.Marshal(topicConfig(cfg))
	return bodyReply(req, body)
}

// consumersOf returns the groups that consume topic: those whose members subscribe to it,
// or that have an offset stored on one of its queues.
func (s *Server) consumersOf(topic string) []string {
	var out []string
	for _, g := range s.b.Groups() {
		members, _ := s.b.Members(g)
		subscribed := slices.ContainsFunc(members, func(m edge.Member) bool {
			return slices.ContainsFunc(m.Subscriptions, func(sub mq.Subscription) bool { return sub.Topic == topic })
		})
		if !subscribed {
			lags, err := s.b.Lag(g, topic)
			subscribed = err == nil && slices.ContainsFunc(lags, func(l edge.QueueLag) bool { return l.ConsumerOffset >= 0 })
		}
		if subscribed {
			out = append(out, g)
		}
	}
	return out
}

// consumedBy answers QUERY_TOPIC_CONSUME_BY_WHO: the groups that consume the topic.
func (s *Server) consumedBy(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	groups := s.consumersOf(h.Topic)
	if groups == nil {
		groups = []string{}
	}
	body, _ := json.Marshal(struct {
		GroupList []string `json:"groupList"`
	}{groups})
	return bodyReply(req, body)
}
