package meta

//go:generate go run github.com/tinylib/msgp -tests=false -io=false

// The types in this file are stored as msgp maps keyed by the field tags
// below, so fields may be added later without breaking old files: decoding
// skips unknown keys and leaves missing fields zero. Do not rename a tag.

// Topic is a topic's configuration, stored under its name.
type Topic struct {
	// Name is the topic name; it is the key and must be 1..MaxNameLen bytes.
	Name string `msg:"name"`
	// ReadQueues is the number of queues consumers read from.
	ReadQueues int32 `msg:"read_queues"`
	// WriteQueues is the number of queues producers write to.
	WriteQueues int32 `msg:"write_queues"`
	// Perm holds RocketMQ permission bits (2 write, 4 read, 1 inherit).
	Perm int32 `msg:"perm"`
	// Order marks an ordered topic.
	Order bool `msg:"order"`
	// SysFlag holds RocketMQ topic system flags.
	SysFlag int32 `msg:"sys_flag"`
	// Created is when the topic was created, in Unix milliseconds.
	Created int64 `msg:"created"`
	// Durability is when a send to the topic is acknowledged: "" (the broker's flush
	// policy), "sync" or "async".
	Durability string `msg:"durability,omitempty"`
}

// Group is a subscription group's configuration, stored under its name.
type Group struct {
	// Name is the group name; it is the key and must be 1..MaxNameLen bytes.
	Name string `msg:"name"`
	// ConsumeEnable allows the group to consume.
	ConsumeEnable bool `msg:"consume_enable"`
	// BroadcastEnable marks a broadcasting group.
	BroadcastEnable bool `msg:"broadcast_enable"`
	// RetryQueues is the number of queues of the group's retry topic.
	RetryQueues int32 `msg:"retry_queues"`
	// MaxReconsumeTimes is how often a message is redelivered before it goes
	// to the group's dead-letter topic.
	MaxReconsumeTimes int32 `msg:"max_reconsume_times"`
	// ConsumeFromMinEnable lets a new group start at a queue's minimum offset.
	ConsumeFromMinEnable bool `msg:"consume_from_min_enable"`
}

// UplinkCursor is how far an uplink has forwarded one local queue, stored
// under (Name, Topic, QueueID).
type UplinkCursor struct {
	// Name identifies the uplink; 1..MaxNameLen bytes.
	Name string `msg:"name"`
	// Topic is the local topic; 1..MaxNameLen bytes.
	Topic string `msg:"topic"`
	// QueueID is the local queue; it must not be negative.
	QueueID int32 `msg:"queue_id"`
	// Offset is the next queue offset to forward.
	Offset int64 `msg:"offset"`
	// Updated is when the cursor last moved, in Unix milliseconds.
	Updated int64 `msg:"updated"`
}

// Settings are store-wide settings fixed when a data directory is created.
type Settings struct {
	// SchemaVersion is the version of the data directory's layout.
	SchemaVersion int32 `msg:"schema_version"`
	// FlushPolicy names how the commit log is flushed (for example "sync"
	// or "async").
	FlushPolicy string `msg:"flush_policy"`
	// SegmentSize is the commit-log segment size in bytes.
	SegmentSize int64 `msg:"segment_size"`
}
