package edge

import "time"

// PullRequest asks for messages of one queue. The pull half of RocketMQ's PULL_MESSAGE.
type PullRequest struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64 // queue offset to read from
	// MaxMsgs is the most messages to return: 1..1024, default (0) 32.
	MaxMsgs int
	// Filter is a TAG expression ("*", "A", "A || B"). Empty means: filter by the group's
	// heartbeat subscription to the topic (RocketMQ's push consumers send none); a group
	// with none gets ErrSubscriptionNotExist.
	Filter string
	// CommitOffset, when > 0, is stored as the group's offset of the queue before reading
	// (RocketMQ's commit-offset piggyback).
	CommitOffset int64
	// Suspend lets a pull that finds nothing wait for a message (long polling) up to
	// MaxWait or until ctx ends.
	Suspend bool
	// MaxWait bounds a suspended pull; 0 means Options.DefaultSuspend. It is capped at
	// Options.MaxSuspend (Options.ShortPollingWait with short polling).
	MaxWait time.Duration
}

// PullStatus is the outcome of a pull, as RocketMQ's PullStatus.
type PullStatus int

const (
	// PullFound: messages are returned.
	PullFound PullStatus = iota
	// PullNoNewMsg: nothing at or after the offset (RocketMQ PULL_NOT_FOUND, code 19).
	PullNoNewMsg
	// PullNoMatchedMsg: messages were there but none matched the filter; pull again from
	// NextBeginOffset (PULL_RETRY_IMMEDIATELY, code 20).
	PullNoMatchedMsg
	// PullOffsetIllegal: the offset is below the queue's min or beyond its max; continue from
	// NextBeginOffset (PULL_OFFSET_MOVED, code 21).
	PullOffsetIllegal
)

var pullStatusNames = [...]string{"FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL"}

func (s PullStatus) String() string {
	if int(s) < len(pullStatusNames) {
		return pullStatusNames[s]
	}
	return "PullStatus(?)"
}

// PullResult is the answer to a pull. NextBeginOffset, MinOffset and MaxOffset are always
// set.
type PullResult struct {
	Status          PullStatus
	Messages        []Message
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
}

// MessageModel is how a consumer group shares messages.
type MessageModel int

const (
	// Clustering: each message goes to one member of the group.
	Clustering MessageModel = iota
	// Broadcasting: every member gets every message.
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeType says how a consumer reads.
type ConsumeType int

const (
	// ConsumePassively is a push consumer (CONSUME_PASSIVELY).
	ConsumePassively ConsumeType = iota
	// ConsumeActively is a pull consumer (CONSUME_ACTIVELY).
	ConsumeActively
)

// Subscription is a member's interest in a topic.
type Subscription struct {
	Topic      string
	Expression string // TAG expression: "*", "A || B"
	// SubVersion orders subscription updates: a heartbeat replaces a stored subscription
	// only with a version at least as new.
	SubVersion int64
}

// ConsumerData is one consumer group a client belongs to, as a heartbeat tells it.
type ConsumerData struct {
	Group         string
	Model         MessageModel
	ConsumeType   ConsumeType
	FromWhere     string // the client's consume-from-where setting, kept for admin views
	Subscriptions []Subscription
}

// Heartbeat registers a client with the broker: its consumer groups with their
// subscriptions, and its producer groups. Clients send one every 30 s; a member not heard
// from for Options.HeartbeatTimeout is dropped.
type Heartbeat struct {
	ClientID  string
	Consumers []ConsumerData
	Producers []string
	// OnChange, if set, is called when the members or subscriptions of one of the client's
	// consumer groups change (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED). It is called from a
	// broker goroutine, never while the broker holds a lock; it must not block for long.
	OnChange func(group string)
}

// Member is one client of a consumer group.
type Member struct {
	ClientID      string
	Model         MessageModel
	ConsumeType   ConsumeType
	FromWhere     string
	Subscriptions []Subscription
	LastHeartbeat time.Time
}

// MessageQueue names one queue of a topic.
type MessageQueue struct {
	Topic   string
	QueueID int32
}

// SendBackRequest returns a message a consumer failed to consume: RocketMQ's
// CONSUMER_SEND_MSG_BACK.
type SendBackRequest struct {
	// Pos is the commitlog position of the message (the physical offset).
	Pos   int64
	Group string
	// DelayLevel: 0 lets the broker choose (3 + reconsume times), > 0 is that level,
	// -1 sends the message straight to the dead-letter queue.
	DelayLevel int32
	// MaxReconsumeTimes sends the message to the dead-letter queue once its reconsume count
	// reaches it; 0 means Options.MaxReconsumeTimes.
	MaxReconsumeTimes int32
	// OriginMsgID is the id the consumer saw; kept in the copy's ORIGIN_MESSAGE_ID when the
	// message has none yet. Optional.
	OriginMsgID string
}
