package mq

import "net/netip"

// SendResult says where a message was stored.
type SendResult struct {
	// Queue and QueueOffset say where the message is stored now: for a delayed message,
	// its delay level's queue of ScheduleTopic until it is due.
	Queue       MessageQueue
	QueueOffset int64
	// CommitLogOffset is the stored copy's position in the broker's commit log.
	CommitLogOffset int64
	// StoreHost is the broker's address, which the offset message id carries.
	StoreHost netip.AddrPort
	// UniqID is the message's UNIQ_KEY property, if its producer set one.
	UniqID string
}

// OffsetMsgID returns RocketMQ's offsetMsgId of the stored copy. It is computed on each
// call, so that a send whose caller does not need the id does not allocate one.
func (r SendResult) OffsetMsgID() string { return OffsetMsgID(r.StoreHost, r.CommitLogOffset) }

// MsgID returns the message's id as RocketMQ producers report it: UniqID when the message
// has one, else the offset message id.
func (r SendResult) MsgID() string {
	if r.UniqID != "" {
		return r.UniqID
	}
	return r.OffsetMsgID()
}

// SendBackRequest returns a message a consumer failed to consume: RocketMQ's
// CONSUMER_SEND_MSG_BACK. The broker stores a copy in the group's retry topic, delayed,
// or in its dead-letter topic.
type SendBackRequest struct {
	Group string
	// BrokerName and CommitLogOffset find the message: the broker that stores it and its
	// position there (MessageExt's fields).
	BrokerName      string
	CommitLogOffset int64
	// DelayLevel: 0 lets the broker choose (3 + reconsume times), > 0 is that level,
	// -1 sends the message straight to the dead-letter queue.
	DelayLevel int32
	// MaxReconsumeTimes sends the message to the dead-letter queue once its reconsume count
	// reaches it; 0 means the broker's default (16).
	MaxReconsumeTimes int32
	// OriginMsgID is the id the consumer saw; kept in the copy's ORIGIN_MESSAGE_ID when the
	// message has none yet. Optional.
	OriginMsgID string
}
