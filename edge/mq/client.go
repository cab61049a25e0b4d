package mq

// MessageModel is how a consumer group shares messages.
type MessageModel int

const (
	// Clustering: each message goes to one member of the group.
	Clustering MessageModel = iota
	// Broadcasting: every member gets every message.
	Broadcasting
)

func (m MessageModel) String() string {
	switch m {
	case Clustering:
		return "CLUSTERING"
	case Broadcasting:
		return "BROADCASTING"
	}
	return "MessageModel(?)"
}

// ConsumeType says how a consumer reads.
type ConsumeType int

const (
	// ConsumePassively is a push consumer (CONSUME_PASSIVELY).
	ConsumePassively ConsumeType = iota
	// ConsumeActively is a pull consumer (CONSUME_ACTIVELY).
	ConsumeActively
)

func (c ConsumeType) String() string {
	switch c {
	case ConsumePassively:
		return "CONSUME_PASSIVELY"
	case ConsumeActively:
		return "CONSUME_ACTIVELY"
	}
	return "ConsumeType(?)"
}

// Subscription is a consumer's interest in a topic.
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

// Heartbeat registers a client with a broker: its consumer groups with their
// subscriptions, and its producer groups. Clients send one every 30 s; a member not heard
// from for the broker's heartbeat timeout (120 s) is dropped.
type Heartbeat struct {
	ClientID  string
	Consumers []ConsumerData
	Producers []string
	// OnChange, if set, is called when the members or subscriptions of one of the client's
	// consumer groups change (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED). It is called from a
	// goroutine of the broker or of the connection, never while a lock is held; it must not
	// block for long.
	OnChange func(group string)
	// OnReset, if set, is called when an admin moves the stored offsets of one of the
	// client's consumer groups on a topic (RocketMQ's RESET_CONSUMER_CLIENT_OFFSET), with the
	// queues' new offsets, so that a running consumer moves too rather than commit its old
	// positions again. It is called as OnChange is.
	OnReset func(group, topic string, offsets map[MessageQueue]int64)
}
