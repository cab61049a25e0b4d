package server

// Wire formats the server needs until package remoting provides them.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// encodeRoute encodes a route as RocketMQ's TopicRouteData, compact.
func encodeRoute(r mq.TopicRoute) []byte {
	var b strings.Builder
	b.WriteString(`{"orderTopicConf":"","queueDatas":[`)
	for i, q := range r.Queues {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"brokerName":%q,"readQueueNums":%d,"writeQueueNums":%d,"perm":%d,"topicSysFlag":0}`, q.BrokerName, q.ReadQueues, q.WriteQueues, q.Perm)
	}
	b.WriteString(`],"brokerDatas":[`)
	for i, bd := range r.Brokers {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"cluster":%q,"brokerName":%q,"brokerAddrs":{`, bd.Cluster, bd.Name)
		ids := make([]int64, 0, len(bd.Addrs))
		for id := range bd.Addrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for j, id := range ids {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%d":%q`, id, bd.Addrs[id])
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`],"filterServerTable":{}}`)
	return []byte(b.String())
}

// decodeHeartbeat decodes HeartbeatData leniently (Go and Java forms).
func decodeHeartbeat(body []byte) (mq.Heartbeat, error) {
	var raw struct {
		ClientID        string `json:"clientID"`
		ProducerDataSet []struct {
			GroupName string `json:"groupName"`
		} `json:"producerDataSet"`
		ConsumerDataSet []struct {
			GroupName           string `json:"groupName"`
			ConsumeType         string `json:"consumeType"`
			MessageModel        string `json:"messageModel"`
			ConsumeFromWhere    string `json:"consumeFromWhere"`
			SubscriptionDataSet []struct {
				Topic      string          `json:"topic"`
				SubString  string          `json:"subString"`
				SubVersion json.RawMessage `json:"subVersion"`
			} `json:"subscriptionDataSet"`
		} `json:"consumerDataSet"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return mq.Heartbeat{}, fmt.Errorf("%w: heartbeat: %v", remoting.ErrMalformed, err)
	}
	hb := mq.Heartbeat{ClientID: raw.ClientID}
	for _, p := range raw.ProducerDataSet {
		hb.Producers = append(hb.Producers, p.GroupName)
	}
	for _, c := range raw.ConsumerDataSet {
		cd := mq.ConsumerData{Group: c.GroupName, FromWhere: c.ConsumeFromWhere}
		if c.MessageModel == "BROADCASTING" {
			cd.Model = mq.Broadcasting
		}
		if c.ConsumeType == "CONSUME_ACTIVELY" {
			cd.ConsumeType = mq.ConsumeActively
		}
		for _, sd := range c.SubscriptionDataSet {
			v, _ := strconv.ParseInt(strings.Trim(string(sd.SubVersion), `"`), 10, 64)
			cd.Subscriptions = append(cd.Subscriptions, mq.Subscription{Topic: sd.Topic, Expression: sd.SubString, SubVersion: v})
		}
		hb.Consumers = append(hb.Consumers, cd)
	}
	return hb, nil
}
