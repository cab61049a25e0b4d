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
	// PushMsgs, when > 0 on a suspended pull sent with an AsyncPuller, asks the broker to
	// stream: to answer the pull again each time messages arrive after its last answer,
	// until it has answered with PushMsgs messages, or PushBytes bytes of bodies when that
	// is > 0, or it waited MaxWait for one. Each answer but the last has More set. A broker
	// that does not stream (Apache RocketMQ's, the in-process one) answers once, and the
	// pull is an ordinary one. The budget is the caller's flow control: what it can take
	// in before it would have paused pulling.
	PushMsgs  int
	PushBytes int64
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
	// More: the pull streams (PullRequest.PushMsgs) and the broker answers it again; the
	// caller sends no next pull but continues from NextBeginOffset with the next answer.
	More bool
}
