package mq

import (
	"fmt"
	"strings"
)

// Topic permissions, RocketMQ's PermName bits.
const (
	PermInherit int32 = 1
	PermWrite   int32 = 2
	PermRead    int32 = 4
	// PermReadWrite is the permission of a normal topic.
	PermReadWrite = PermRead | PermWrite
)

// Reserved topic names and prefixes.
const (
	// RetryPrefix starts the retry topic of a consumer group: %RETRY%<group>.
	RetryPrefix = "%RETRY%"
	// DLQPrefix starts the dead-letter topic of a consumer group: %DLQ%<group>.
	DLQPrefix = "%DLQ%"
	// ScheduleTopic holds delayed messages until they are due, one queue per delay level.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// DefaultTopic is RocketMQ's template topic for auto-creation (TBW102).
	DefaultTopic = "TBW102"
	// TransHalfTopic holds the half messages of transactions whose outcome is not known
	// yet, in one queue, hidden from consumers.
	TransHalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// TransOpTopic records, in one queue, the transactions whose outcome is known: each
	// message's body is the queue offset of a half message, in decimal.
	TransOpTopic = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// TransCheckGroup is the group whose offsets record how far the broker has settled the
	// half and op topics.
	TransCheckGroup = "CID_SYS_RMQ_TRANS"
)

// Name limits.
const (
	// MaxTopicLen is the longest user topic name.
	MaxTopicLen = 127
	// MaxSystemTopicLen is the longest retry or dead-letter topic name.
	MaxSystemTopicLen = 255
	// MaxGroupLen is the longest consumer group name: its retry topic %RETRY%<group> must
	// fit in MaxSystemTopicLen.
	MaxGroupLen = MaxSystemTopicLen - len(RetryPrefix)
)

// RetryTopic returns the retry topic of group.
func RetryTopic(group string) string { return RetryPrefix + group }

// DLQTopic returns the dead-letter topic of group.
func DLQTopic(group string) string { return DLQPrefix + group }

// IsRetryTopic reports whether topic is a group's retry topic.
func IsRetryTopic(topic string) bool {
	return strings.HasPrefix(topic, RetryPrefix) && len(topic) > len(RetryPrefix)
}

// IsDLQTopic reports whether topic is a group's dead-letter topic.
func IsDLQTopic(topic string) bool {
	return strings.HasPrefix(topic, DLQPrefix) && len(topic) > len(DLQPrefix)
}

// IsSystemTopic reports whether topic is reserved for the broker: retry and dead-letter
// topics, the schedule topic, TBW102 and RMQ_SYS_*.
func IsSystemTopic(topic string) bool {
	return strings.HasPrefix(topic, RetryPrefix) || strings.HasPrefix(topic, DLQPrefix) ||
		topic == ScheduleTopic || topic == DefaultTopic || strings.HasPrefix(topic, "RMQ_SYS_")
}

// ValidateTopic checks a topic name a user may create or send to: 1 to 127 characters of
// [A-Za-z0-9_%|-], not a system topic. Errors wrap ErrInvalidTopic.
func ValidateTopic(name string) error {
	if err := validateName(name, MaxTopicLen); err != nil {
		return err
	}
	if IsSystemTopic(name) {
		return fmt.Errorf("%w: %q is reserved", ErrInvalidTopic, name)
	}
	return nil
}

// ValidateSubscribedTopic checks a topic a consumer may read: a user topic, or a retry or
// dead-letter topic (up to 255 characters). Errors wrap ErrInvalidTopic.
func ValidateSubscribedTopic(name string) error {
	if IsRetryTopic(name) || IsDLQTopic(name) {
		return validateName(name, MaxSystemTopicLen)
	}
	return ValidateTopic(name)
}

// ValidateGroup checks a consumer group name: 1 to MaxGroupLen characters of
// [A-Za-z0-9_%|-] (RocketMQ's Validators.checkGroup). Errors wrap ErrInvalidArgument.
func ValidateGroup(name string) error { return validateGroupLen(name, MaxGroupLen) }

// ValidateProducerGroup checks a producer group name: as ValidateGroup, up to 255
// characters.
func ValidateProducerGroup(name string) error { return validateGroupLen(name, MaxSystemTopicLen) }

func validateGroupLen(name string, maxLen int) error {
	if validateName(name, maxLen) != nil {
		return fmt.Errorf("%w: group %q must be 1 to %d characters of A-Z a-z 0-9 _ - %% |", ErrInvalidArgument, name, maxLen)
	}
	return nil
}

func validateName(name string, maxLen int) error {
	if name == "" || len(name) > maxLen {
		return fmt.Errorf("%w: %q must be 1 to %d characters", ErrInvalidTopic, name, maxLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '|') {
			return fmt.Errorf("%w: %q has %q; allowed are A-Z a-z 0-9 _ - %% |", ErrInvalidTopic, name, c)
		}
	}
	return nil
}
