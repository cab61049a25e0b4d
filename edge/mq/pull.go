package mq

import "time"

// PullRequest asks for messages of one queue: RocketMQ's PULL_MESSAGE.
type PullRequest struct {
	Group  string
	Queue  MessageQueue
	Offset int64 // queue offset to read from
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
	// MaxWait, the broker's own cap, or until ctx ends.
	Suspend bool
	// MaxWait bounds a suspended pull; 0 means the broker's default (15 s).
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
	if s >= 0 && int(s) < len(pullStatusNames) {
		return pullStatusNames[s]
	}
	return "PullStatus(?)"
}

// PullResult is the answer to a pull. NextBeginOffset, MinOffset and MaxOffset are always
// set; the caller continues from NextBeginOffset whatever the status.
type PullResult struct {
	Status          PullStatus
	Messages        []MessageExt
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
}
