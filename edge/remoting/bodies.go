package remoting

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/edgemq/edgemq/edge/mq"
)

// LockRequest is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ:
//
//	{"consumerGroup":"cg","clientId":"ip@pid","onlyThisBroker":false,"mqSet":[{"topic":"T","brokerName":"b","queueId":0}]}
type LockRequest struct {
	ConsumerGroup  string
	ClientID       string
	OnlyThisBroker bool
	Queues         []mq.MessageQueue
}

type queueJSON struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

func appendQueues(dst []byte, qs []mq.MessageQueue) []byte {
	dst = append(dst, '[')
	for i, q := range qs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"topic":`...)
		dst = appendJSONString(dst, q.Topic)
		dst = append(dst, `,"brokerName":`...)
		dst = appendJSONString(dst, q.BrokerName)
		dst = append(dst, `,"queueId":`...)
		dst = strconv.AppendInt(dst, int64(q.QueueID), 10)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func toQueues(qs []queueJSON) []mq.MessageQueue {
	var out []mq.MessageQueue
	for _, q := range qs {
		out = append(out, mq.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	return out
}

// decodeObject unmarshals a JSON object body into v.
func decodeObject(body []byte, what string, v any) error {
	if !isJSONObject(body) {
		return fmt.Errorf("%w: %s is not a JSON object", ErrMalformed, what)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	return nil
}

// EncodeLockRequest returns r as a lock or unlock body.
func EncodeLockRequest(r LockRequest) []byte {
	dst := append([]byte(nil), `{"consumerGroup":`...)
	dst = appendJSONString(dst, r.ConsumerGroup)
	dst = append(dst, `,"clientId":`...)
	dst = appendJSONString(dst, r.ClientID)
	dst = append(dst, `,"onlyThisBroker":`...)
	dst = strconv.AppendBool(dst, r.OnlyThisBroker)
	dst = append(dst, `,"mqSet":`...)
	dst = appendQueues(dst, r.Queues)
	return append(dst, '}')
}

// DecodeLockRequest reads a lock or unlock body; consumerGroup and clientId are required.
// Errors wrap ErrMalformed.
func DecodeLockRequest(body []byte) (LockRequest, error) {
	var j struct {
		ConsumerGroup  *string     `json:"consumerGroup"`
		ClientID       *string     `json:"clientId"`
		OnlyThisBroker bool        `json:"onlyThisBroker"`
		MQSet          []queueJSON `json:"mqSet"`
	}
	if err := decodeObject(body, "lock request", &j); err != nil {
		return LockRequest{}, err
	}
	if j.ConsumerGroup == nil {
		return LockRequest{}, fmt.Errorf("%w: lock request has no consumerGroup", ErrMalformed)
	}
	if j.ClientID == nil {
		return LockRequest{}, fmt.Errorf("%w: lock request has no clientId", ErrMalformed)
	}
	return LockRequest{ConsumerGroup: *j.ConsumerGroup, ClientID: *j.ClientID, OnlyThisBroker: j.OnlyThisBroker, Queues: toQueues(j.MQSet)}, nil
}

// EncodeLockReply returns the LOCK_BATCH_MQ reply body naming the queues locked:
// {"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":0}]}.
func EncodeLockReply(locked []mq.MessageQueue) []byte {
	dst := append([]byte(nil), `{"lockOKMQSet":`...)
	dst = appendQueues(dst, locked)
	return append(dst, '}')
}

// DecodeLockReply reads a LOCK_BATCH_MQ reply body. Errors wrap ErrMalformed.
func DecodeLockReply(body []byte) ([]mq.MessageQueue, error) {
	var j struct {
		LockOKMQSet []queueJSON `json:"lockOKMQSet"`
	}
	if err := decodeObject(body, "lock reply", &j); err != nil {
		return nil, err
	}
	return toQueues(j.LockOKMQSet), nil
}

// EncodeConsumerList returns the GET_CONSUMER_LIST_BY_GROUP reply body:
// {"consumerIdList":["id1","id2"]}.
func EncodeConsumerList(ids []string) []byte {
	dst := append([]byte(nil), `{"consumerIdList":[`...)
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, id)
	}
	return append(dst, "]}"...)
}

// DecodeConsumerList reads a GET_CONSUMER_LIST_BY_GROUP reply body. Errors wrap
// ErrMalformed.
func DecodeConsumerList(body []byte) ([]string, error) {
	var j struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if err := decodeObject(body, "consumer list", &j); err != nil {
		return nil, err
	}
	return j.ConsumerIDList, nil
}
