// Package consumer is EdgeMQ's RocketMQ-style consumer side: the push consumer of the seeds
// (push on pull: a pull loop per assigned queue feeding a ProcessQueue and a consume
// service), concurrent and orderly consumption, rebalance with six allocation strategies,
// offset stores, and a lite pull consumer. It talks to a broker through the small Broker
// interface, which *edge.Broker satisfies in-process.
package consumer
