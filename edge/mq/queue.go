package mq

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
)

// MessageQueue names one queue: a topic's queue on one broker.
type MessageQueue struct {
	Topic      string
	BrokerName string
	QueueID    int32
}

// String formats q as RocketMQ's MessageQueue.toString does; consistent hashing keys on it.
func (q MessageQueue) String() string {
	return fmt.Sprintf("MessageQueue [topic=%s, brokerName=%s, queueId=%d]", q.Topic, q.BrokerName, q.QueueID)
}

// CompareQueues orders queues by topic, broker name, then queue id, as RocketMQ sorts them
// before allocating them to a group's members.
func CompareQueues(a, b MessageQueue) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), strings.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
}

// QueueSelector chooses the queue of a send among the n write queues of the message's
// topic: it returns an index in [0, n). The queues are those of the topic's route,
// writable, sorted by broker name then queue id (TopicRoute.WriteQueues), so with one
// broker index i is queue id i. It is given a copy of the message, for the call only (it
// must not keep it): changes to it are not sent. A nil selector means round robin.
type QueueSelector func(n int, m *Message) int

// QueueIndex selects the write queue at index i (queue id i on a single broker).
func QueueIndex(i int) QueueSelector {
	if i >= 0 && i < len(queueIndexes) {
		return queueIndexes[i] // a producer choosing queues round robin allocates nothing
	}
	return func(int, *Message) int { return i }
}

// queueIndexes are the selectors of the first indexes, made once.
var queueIndexes = func() (s [64]QueueSelector) {
	for i := range s {
		s[i] = func(int, *Message) int { return i }
	}
	return s
}()

// ShardingKey selects a queue by a hash of key, so that messages with one key always land
// on one queue, in order, as ordered consumers need.
func ShardingKey(key string) QueueSelector {
	h := fnv.New32a()
	h.Write([]byte(key))
	sum := h.Sum32()
	return func(n int, _ *Message) int { return int(sum % uint32(n)) }
}

// SelectQueue calls sel for a send of m among n write queues, giving it a copy of m (from a
// pool: a selector has the message only for its call), and returns its choice, which the
// caller checks against n. m does not escape: a message passed to a function value would
// move to the heap, the caller's with a selector or without. A nil sel or m chooses -1, no
// queue.
func SelectQueue(sel QueueSelector, n int, m *Message) int {
	if sel == nil || m == nil {
		return -1
	}
	cp := selectorCopies.Get().(*Message)
	*cp = *m
	i := sel(n, cp)
	*cp = Message{}
	selectorCopies.Put(cp)
	return i
}

// selectorCopies keeps the copies of messages that selectors are given.
var selectorCopies = sync.Pool{New: func() any { return new(Message) }}
