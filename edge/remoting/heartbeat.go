package remoting

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/edgemq/edgemq/edge/mq"
)

// HeartbeatData is the HEART_BEAT body as the wire carries it (RocketMQ's HeartbeatData),
// with what package mq's Heartbeat does not keep: expression types, tag sets, unit mode.
type HeartbeatData struct {
	ClientID  string
	Producers []string // producer group names
	Consumers []ConsumerData
}

// ConsumerData is one consumer group of a heartbeat.
type ConsumerData struct {
	Group            string
	ConsumeType      mq.ConsumeType
	MessageModel     mq.MessageModel
	ConsumeFromWhere string // CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET, CONSUME_FROM_TIMESTAMP
	UnitMode         bool
	Subscriptions    []SubscriptionData
}

// SubscriptionData is one subscription of a consumer group.
type SubscriptionData struct {
	Topic string
	// SubString is the filter expression: "*", "A || B", or SQL92 text.
	SubString string
	// ExpressionType is TAG (also when empty) or SQL92.
	ExpressionType  string
	Tags            []string // the tags of a TAG expression
	SubVersion      int64    // Go clients send nanoseconds, Java clients milliseconds
	ClassFilterMode bool
}

// Expression types of a subscription.
const (
	ExpressionTag   = "TAG"
	ExpressionSQL92 = "SQL92"
)

// heartbeatJSON is the body as read. Numbers and enum names are read leniently; codeSet
// (strings of hashes from Go, ints from Java) is not read: tags are compared as strings.
type heartbeatJSON struct {
	ClientID  *string `json:"clientID"`
	Producers []struct {
		GroupName *string `json:"groupName"`
	} `json:"producerDataSet"`
	Consumers []struct {
		GroupName     *string         `json:"groupName"`
		ConsumeType   json.RawMessage `json:"consumeType"`
		MessageModel  json.RawMessage `json:"messageModel"`
		FromWhere     json.RawMessage `json:"consumeFromWhere"`
		UnitMode      bool            `json:"unitMode"`
		Subscriptions []struct {
			ClassFilterMode bool            `json:"classFilterMode"`
			Topic           *string         `json:"topic"`
			SubString       string          `json:"subString"`
			Tags            []string        `json:"tagsSet"`
			SubVersion      json.RawMessage `json:"subVersion"`
			ExpressionType  string          `json:"expressionType"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

// DecodeHeartbeatData reads a HEART_BEAT body, as the Go or the Java client writes it.
// clientID, and the groupName of every producer and consumer and the topic of every
// subscription, are required; consumeType (CONSUME_PASSIVELY, the default, or
// CONSUME_ACTIVELY) and messageModel (CLUSTERING, the default, or BROADCASTING) are enum
// names; subVersion is a number or a string holding one; unknown fields are ignored.
// Errors wrap ErrMalformed.
func DecodeHeartbeatData(body []byte) (HeartbeatData, error) {
	var hd HeartbeatData
	if !isJSONObject(body) {
		return hd, fmt.Errorf("%w: heartbeat is not a JSON object", ErrMalformed)
	}
	var hj heartbeatJSON
	if err := json.Unmarshal(body, &hj); err != nil {
		return hd, fmt.Errorf("%w: heartbeat: %v", ErrMalformed, err)
	}
	if hj.ClientID == nil || *hj.ClientID == "" {
		return hd, fmt.Errorf("%w: heartbeat: no clientID", ErrMalformed)
	}
	hd.ClientID = *hj.ClientID
	for i, p := range hj.Producers {
		if p.GroupName == nil {
			return HeartbeatData{}, fmt.Errorf("%w: heartbeat: producerDataSet[%d] has no groupName", ErrMalformed, i)
		}
		hd.Producers = append(hd.Producers, *p.GroupName)
	}
	for i, c := range hj.Consumers {
		if c.GroupName == nil {
			return HeartbeatData{}, fmt.Errorf("%w: heartbeat: consumerDataSet[%d] has no groupName", ErrMalformed, i)
		}
		cd := ConsumerData{Group: *c.GroupName, UnitMode: c.UnitMode}
		field := func(name string) string { return fmt.Sprintf("consumerDataSet[%d].%s", i, name) }
		ct, err := jsonEnum(c.ConsumeType, field("consumeType"), "CONSUME_PASSIVELY", "CONSUME_ACTIVELY")
		if err != nil {
			return HeartbeatData{}, err
		}
		cd.ConsumeType = mq.ConsumeType(ct)
		mm, err := jsonEnum(c.MessageModel, field("messageModel"), "CLUSTERING", "BROADCASTING")
		if err != nil {
			return HeartbeatData{}, err
		}
		cd.MessageModel = mq.MessageModel(mm)
		if cd.ConsumeFromWhere, _, err = jsonText(c.FromWhere, field("consumeFromWhere")); err != nil {
			return HeartbeatData{}, err
		}
		for j, s := range c.Subscriptions {
			sfield := fmt.Sprintf("consumerDataSet[%d].subscriptionDataSet[%d]", i, j)
			if s.Topic == nil {
				return HeartbeatData{}, fmt.Errorf("%w: heartbeat: %s has no topic", ErrMalformed, sfield)
			}
			v, err := jsonInt(s.SubVersion, 64, sfield+".subVersion")
			if err != nil {
				return HeartbeatData{}, err
			}
			cd.Subscriptions = append(cd.Subscriptions, SubscriptionData{
				Topic: *s.Topic, SubString: s.SubString, ExpressionType: s.ExpressionType,
				Tags: s.Tags, SubVersion: v, ClassFilterMode: s.ClassFilterMode,
			})
		}
		hd.Consumers = append(hd.Consumers, cd)
	}
	return hd, nil
}

// jsonEnum reads an enum name among names, returning its index; absent or null is 0.
func jsonEnum(raw json.RawMessage, field string, names ...string) (int, error) {
	s, ok, err := jsonText(raw, field)
	if err != nil || !ok {
		return 0, err
	}
	for i, n := range names {
		if s == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: heartbeat: %s %q is not one of %s", ErrMalformed, field, s, strings.Join(names, ", "))
}

// DecodeHeartbeat reads a HEART_BEAT body (see DecodeHeartbeatData) as an mq.Heartbeat.
// A subscription's Expression is its subString, or its tags joined with " || " when the
// subString is empty.
func DecodeHeartbeat(body []byte) (mq.Heartbeat, error) {
	hd, err := DecodeHeartbeatData(body)
	if err != nil {
		return mq.Heartbeat{}, err
	}
	return hd.Heartbeat(), nil
}

// Heartbeat returns hd as an mq.Heartbeat.
func (hd HeartbeatData) Heartbeat() mq.Heartbeat {
	hb := mq.Heartbeat{ClientID: hd.ClientID, Producers: hd.Producers}
	for _, c := range hd.Consumers {
		cd := mq.ConsumerData{Group: c.Group, Model: c.MessageModel, ConsumeType: c.ConsumeType, FromWhere: c.ConsumeFromWhere}
		for _, s := range c.Subscriptions {
			expr := s.SubString
			if expr == "" && len(s.Tags) > 0 {
				expr = strings.Join(s.Tags, " || ")
			}
			cd.Subscriptions = append(cd.Subscriptions, mq.Subscription{Topic: s.Topic, Expression: expr, SubVersion: s.SubVersion})
		}
		hb.Consumers = append(hb.Consumers, cd)
	}
	return hb
}

// EncodeHeartbeat returns hb as a HEART_BEAT body, TAG subscriptions with their tag sets
// and Java's codeSet (the tags' Java String.hashCode), which both Go and Java brokers read.
func EncodeHeartbeat(hb mq.Heartbeat) []byte {
	hd := HeartbeatData{ClientID: hb.ClientID, Producers: hb.Producers}
	for _, c := range hb.Consumers {
		cd := ConsumerData{Group: c.Group, ConsumeType: c.ConsumeType, MessageModel: c.Model, ConsumeFromWhere: c.FromWhere}
		for _, s := range c.Subscriptions {
			sd := SubscriptionData{Topic: s.Topic, SubString: s.Expression, ExpressionType: ExpressionTag, SubVersion: s.SubVersion}
			if sd.SubString == "" {
				sd.SubString = "*"
			}
			if f, err := mq.ParseTagFilter(s.Expression); err == nil {
				sd.Tags = f.Tags()
			}
			cd.Subscriptions = append(cd.Subscriptions, sd)
		}
		hd.Consumers = append(hd.Consumers, cd)
	}
	return hd.Encode()
}

// Encode returns hd as a HEART_BEAT body:
//
//	{"clientID":"ip@pid","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg",
//	 "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
//	 "unitMode":false,"subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"A || B",
//	 "tagsSet":["A","B"],"codeSet":[65,66],"subVersion":1,"expressionType":"TAG"}]}]}
func (hd HeartbeatData) Encode() []byte {
	dst := append([]byte(nil), `{"clientID":`...)
	dst = appendJSONString(dst, hd.ClientID)
	dst = append(dst, `,"producerDataSet":[`...)
	for i, p := range hd.Producers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"groupName":`...)
		dst = appendJSONString(dst, p)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"consumerDataSet":[`...)
	for i, c := range hd.Consumers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"groupName":`...)
		dst = appendJSONString(dst, c.Group)
		dst = append(dst, `,"consumeType":`...)
		dst = appendJSONString(dst, c.ConsumeType.String())
		dst = append(dst, `,"messageModel":`...)
		dst = appendJSONString(dst, c.MessageModel.String())
		dst = append(dst, `,"consumeFromWhere":`...)
		dst = appendJSONString(dst, c.ConsumeFromWhere)
		dst = append(dst, `,"unitMode":`...)
		dst = strconv.AppendBool(dst, c.UnitMode)
		dst = append(dst, `,"subscriptionDataSet":[`...)
		for j, s := range c.Subscriptions {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"classFilterMode":`...)
			dst = strconv.AppendBool(dst, s.ClassFilterMode)
			dst = append(dst, `,"topic":`...)
			dst = appendJSONString(dst, s.Topic)
			dst = append(dst, `,"subString":`...)
			dst = appendJSONString(dst, s.SubString)
			dst = append(dst, `,"tagsSet":[`...)
			for k, t := range s.Tags {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = appendJSONString(dst, t)
			}
			dst = append(dst, `],"codeSet":[`...)
			for k, t := range s.Tags {
				if k > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendInt(dst, int64(JavaStringHash(t)), 10)
			}
			dst = append(dst, `],"subVersion":`...)
			dst = strconv.AppendInt(dst, s.SubVersion, 10)
			dst = append(dst, `,"expressionType":`...)
			exprType := s.ExpressionType
			if exprType == "" {
				exprType = ExpressionTag
			}
			dst = appendJSONString(dst, exprType)
			dst = append(dst, '}')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

// JavaStringHash returns Java's String.hashCode of s: over its UTF-16 code units, as a
// Java broker computes a tag's code (the tagsCode of its consume queue).
func JavaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
