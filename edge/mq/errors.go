package mq

import "errors"

// The errors a broker answers with. A broker returns them wrapped with details (use
// errors.Is); a network client returns them for the matching RocketMQ response codes.
var (
	// ErrTopicNotExist: the topic does not exist and may not be created (TOPIC_NOT_EXIST).
	ErrTopicNotExist = errors.New("mq: topic does not exist")
	// ErrInvalidTopic: a topic name that is empty, too long, uses characters outside
	// [A-Za-z0-9_%|-], or is reserved for the broker (see ValidateTopic).
	ErrInvalidTopic = errors.New("mq: invalid topic name")
	// ErrNoPermission: the topic's permission forbids the read or the write (NO_PERMISSION).
	ErrNoPermission = errors.New("mq: no permission")
	// ErrInvalidQueue: a queue outside the topic's queues, or of another broker.
	ErrInvalidQueue = errors.New("mq: no such queue")
	// ErrInvalidArgument: other bad input, such as a negative offset, an empty group or
	// client id, a batch size out of range, a malformed message id or filter expression
	// (INVALID_PARAMETER).
	ErrInvalidArgument = errors.New("mq: invalid argument")
	// ErrMessageTooLarge: a body over the broker's maximum message size (MESSAGE_ILLEGAL).
	ErrMessageTooLarge = errors.New("mq: message too large")
	// ErrSubscriptionNotExist: a pull without a filter from a group that has no subscription
	// to the topic (SUBSCRIPTION_NOT_EXIST).
	ErrSubscriptionNotExist = errors.New("mq: no subscription for the topic in the group")
	// ErrGroupNotExist: a consumer group the broker has never seen
	// (SUBSCRIPTION_GROUP_NOT_EXIST).
	ErrGroupNotExist = errors.New("mq: consumer group does not exist")
	// ErrOffsetNotFound: the group has no offset stored for the queue (QUERY_NOT_FOUND).
	ErrOffsetNotFound = errors.New("mq: no offset stored for the queue")
	// ErrMessageNotFound: no message is stored at the given commit-log offset, or it was
	// deleted.
	ErrMessageNotFound = errors.New("mq: message not found")
	// ErrUnavailable: the broker cannot serve the request now: it is closing, or unreachable
	// (SERVICE_NOT_AVAILABLE).
	ErrUnavailable = errors.New("mq: broker unavailable")
)

// ErrWouldBlock is returned by a call that must not wait (an AsyncPuller's PullAsync) when it
// would have to: a route to look up, a connection to open. The caller makes the blocking
// call instead.
var ErrWouldBlock = errors.New("mq: the call would block")
