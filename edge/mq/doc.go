// Package mq is the contract between RocketMQ-style clients and a broker: the message as
// producers send it and consumers receive it, message queues named by topic, broker and
// queue id, topic routes, pull, send, send-back and heartbeat requests and their results,
// TAG filter expressions, topic and group names, and the errors a broker answers with.
//
// It imports only the standard library, so that a program that only produces or consumes
// (package consumer, and a network client of a broker) links no message store. The
// in-process broker (package edge) speaks it, and a client of a remote broker, EdgeMQ or
// Apache RocketMQ, speaks the same types over the wire: the same consumer code runs on
// both.
//
// The names and numbers are RocketMQ's: a message's properties (TAGS, KEYS, UNIQ_KEY,
// DELAY, RETRY_TOPIC, ...), the retry and dead-letter topics of a group (%RETRY%<group>,
// %DLQ%<group>), topic permissions (read 4, write 2, inherit 1), pull statuses, and the
// offset message id (store host and commit-log offset in hex).
package mq
