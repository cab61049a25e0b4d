// Package producer is EdgeMQ's RocketMQ-style producer: sync, async, oneway and batch
// sends, queue selection (round robin, a selector such as a hash of a key for ordered
// messages), delay levels, retries on another queue and broker, and RocketMQ's message ids.
//
//	p, err := producer.New(b, nil) // b: an *edge.Broker, or a *remoting.Client
//	res, err := p.Send(ctx, &mq.Message{Topic: "Orders", Tags: "new", Body: body}, nil)
//	fmt.Println(res.MsgID())
//	defer p.Close()
//
// It sends through the Broker interface, which the in-process broker (*edge.Broker) and
// the network client of EdgeMQ and Apache RocketMQ (*remoting.Client) both satisfy, so one
// producer runs in both places; it imports only package mq, and a program that only
// produces over the network links no message store. The broker chooses nothing: the
// producer reads the topic's route, picks the queue, and passes its index in the route's
// write queues (mq.TopicRoute.WriteQueues) as the selector, so that a retry can avoid the
// broker that failed.
//
// Every message gets a unique id in its UNIQ_KEY property, as RocketMQ's producers make
// it: 32 upper-case hex digits of the host's IPv4 address, the process id, a per-process
// random number (Java's class-loader hash), the milliseconds since the start of the month
// and a counter. Consumers see it as the message id (mq.MessageExt.MsgID); the offset
// message id of where it is stored is in the send result (mq.SendResult.OffsetMsgID).
//
// A delayed message is an mq.Message with a delay level (m.SetDelayLevel(3): 10 s with the
// default levels), sent as any other.
package producer
