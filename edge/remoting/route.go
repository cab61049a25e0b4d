package remoting

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/edgemq/edgemq/edge/mq"
)

// Topic route JSON (GET_ROUTEINFO_BY_TOPIC reply body), compact, in this order:
//
//	{"orderTopicConf":"","queueDatas":[{"brokerName":"b","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],
//	 "brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"0":"10.0.0.5:10911"}}],"filterServerTable":{}}
//
// The Go client takes brokerAddrs apart by hand: it strips the braces, splits on commas and
// at the first colon, and removes quotes, so the object must be compact and present.
// queueDatas is always an array.

// EncodeRoute returns r as topic route JSON (see AppendRoute).
func EncodeRoute(r mq.TopicRoute) []byte { return AppendRoute(nil, r) }

// AppendRoute appends r as the topic route JSON a name server answers, in the compact form
// every RocketMQ client reads: queueDatas and brokerDatas always arrays, brokerAddrs
// always an object with its ids in order, orderTopicConf empty, filterServerTable {}.
func AppendRoute(dst []byte, r mq.TopicRoute) []byte {
	dst = append(dst, `{"orderTopicConf":"","queueDatas":[`...)
	for i, q := range r.Queues {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"brokerName":`...)
		dst = appendJSONString(dst, q.BrokerName)
		dst = append(dst, `,"readQueueNums":`...)
		dst = strconv.AppendInt(dst, int64(q.ReadQueues), 10)
		dst = append(dst, `,"writeQueueNums":`...)
		dst = strconv.AppendInt(dst, int64(q.WriteQueues), 10)
		dst = append(dst, `,"perm":`...)
		dst = strconv.AppendInt(dst, int64(q.Perm), 10)
		dst = append(dst, `,"topicSysFlag":0}`...)
	}
	dst = append(dst, `],"brokerDatas":[`...)
	for i, b := range r.Brokers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"cluster":`...)
		dst = appendJSONString(dst, b.Cluster)
		dst = append(dst, `,"brokerName":`...)
		dst = appendJSONString(dst, b.Name)
		dst = append(dst, `,"brokerAddrs":{`...)
		ids := make([]int64, 0, len(b.Addrs))
		for id := range b.Addrs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for j, id := range ids {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, id, 10)
			dst = append(dst, `":`...)
			dst = appendJSONString(dst, b.Addrs[id])
		}
		dst = append(dst, "}}"...)
	}
	return append(dst, `],"filterServerTable":{}}`...)
}

type routeJSON struct {
	QueueDatas []struct {
		BrokerName     string `json:"brokerName"`
		ReadQueueNums  int32  `json:"readQueueNums"`
		WriteQueueNums int32  `json:"writeQueueNums"`
		Perm           int32  `json:"perm"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		Cluster     string            `json:"cluster"`
		BrokerName  string            `json:"brokerName"`
		BrokerAddrs map[string]string `json:"brokerAddrs"`
	} `json:"brokerDatas"`
}

// DecodeRoute reads topic route JSON, standard or as fastjson writes it for older clients
// (broker ids as unquoted numbers). The route's Topic is empty: the request names it.
// orderTopicConf, topicSysFlag, filterServerTable and unknown fields are ignored.
func DecodeRoute(body []byte) (mq.TopicRoute, error) {
	var r mq.TopicRoute
	body = quoteNumericKeys(body)
	if !isJSONObject(body) {
		return r, fmt.Errorf("%w: route is not a JSON object", ErrMalformed)
	}
	var rj routeJSON
	if err := json.Unmarshal(body, &rj); err != nil {
		return r, fmt.Errorf("%w: route: %v", ErrMalformed, err)
	}
	for _, q := range rj.QueueDatas {
		r.Queues = append(r.Queues, mq.QueueData{BrokerName: q.BrokerName, ReadQueues: q.ReadQueueNums, WriteQueues: q.WriteQueueNums, Perm: q.Perm})
	}
	for _, b := range rj.BrokerDatas {
		bd := mq.BrokerData{Cluster: b.Cluster, Name: b.BrokerName}
		for k, addr := range b.BrokerAddrs {
			id, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return mq.TopicRoute{}, fmt.Errorf("%w: route: broker id %q of %s", ErrMalformed, k, b.BrokerName)
			}
			if bd.Addrs == nil {
				bd.Addrs = make(map[int64]string, len(b.BrokerAddrs))
			}
			bd.Addrs[id] = addr
		}
		r.Brokers = append(r.Brokers, bd)
	}
	return r, nil
}

// quoteNumericKeys returns b with object keys that are bare numbers (fastjson's Long map
// keys: {0:"addr"}) quoted. Strings are skipped whole; b is returned as is when it has no
// such key.
func quoteNumericKeys(b []byte) []byte {
	var out []byte
	last := 0 // b[last:] not yet copied to out
	var stack []byte
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			continue
		case '[':
			stack = append(stack, c)
			continue
		case ']', '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		case '{':
			stack = append(stack, c)
		case ',':
			if len(stack) == 0 || stack[len(stack)-1] != '{' {
				continue
			}
		default:
			continue
		}
		// After { or a comma in an object: a key follows.
		j := skipSpace(b, i+1)
		k := j
		for k < len(b) && (b[k] >= '0' && b[k] <= '9' || b[k] == '-') {
			k++
		}
		if k == j || skipSpace(b, k) >= len(b) || b[skipSpace(b, k)] != ':' {
			continue
		}
		out = append(out, b[last:j]...)
		out = append(out, '"')
		out = append(out, b[j:k]...)
		out = append(out, '"')
		last = k
		i = k - 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
