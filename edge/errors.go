package edge

import (
	"errors"

	"github.com/edgemq/edgemq/store"
)

var (
	// ErrClosed is returned by every call on a Broker after Close.
	ErrClosed = errors.New("edge: broker closed")
	// ErrInvalidTopic is returned for a topic name that is empty, longer than 127 characters
	// (255 for retry and DLQ topics), uses characters outside [A-Za-z0-9_%|-], or is reserved.
	ErrInvalidTopic = errors.New("edge: invalid topic name")
	// ErrTopicNotExist is returned for a topic that does not exist (and may not be
	// auto-created).
	ErrTopicNotExist = errors.New("edge: topic does not exist")
	// ErrTopicExists is returned by CreateTopic for a topic that exists already.
	ErrTopicExists = errors.New("edge: topic exists")
	// ErrNoPermission is returned when a topic's permission forbids the read or the write.
	ErrNoPermission = errors.New("edge: no permission")
	// ErrInvalidQueue is returned for a queue id outside the topic's queues.
	ErrInvalidQueue = errors.New("edge: queue id out of range")
	// ErrInvalidArgument is returned for other bad input: negative offsets, empty groups or
	// client ids, MaxMsgs out of range, bad delay levels, malformed message ids.
	ErrInvalidArgument = errors.New("edge: invalid argument")
	// ErrMessageTooLarge is returned by Send for a body over Options.MaxMessageSize.
	ErrMessageTooLarge = store.ErrMessageTooLarge
	// ErrSubscriptionNotExist is returned by Pull without a filter when the group has no
	// heartbeat subscription for the topic.
	ErrSubscriptionNotExist = errors.New("edge: no subscription for the topic in the group")
	// ErrGroupNotExist is returned for a consumer group the broker has never seen.
	ErrGroupNotExist = errors.New("edge: consumer group does not exist")
	// ErrMessageNotFound is returned by SendBack and ViewMessage when no message is stored at
	// the given position.
	ErrMessageNotFound = errors.New("edge: message not found")
)
