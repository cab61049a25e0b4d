package mq

import "slices"

// TopicRoute says which brokers serve a topic and with how many queues: RocketMQ's
// TopicRouteData, as a name server answers GET_ROUTEINFO_BY_TOPIC.
type TopicRoute struct {
	Topic   string
	Brokers []BrokerData
	Queues  []QueueData
}

// BrokerData names a broker and its addresses.
type BrokerData struct {
	Cluster string
	Name    string
	// Addrs maps broker ids to addresses ("ip:port"); id 0 is the master.
	Addrs map[int64]string
}

// MasterID is the broker id of a master.
const MasterID = 0

// QueueData is a topic's queues on one broker.
type QueueData struct {
	BrokerName  string
	ReadQueues  int32
	WriteQueues int32
	Perm        int32 // PermRead, PermWrite, PermInherit bits
}

// ReadQueues returns the queues consumers read: for each readable broker entry, queue ids
// 0..ReadQueues-1, sorted by broker name then queue id.
func (r *TopicRoute) ReadQueues() []MessageQueue {
	var out []MessageQueue
	for _, qd := range r.Queues {
		if qd.Perm&PermRead == 0 {
			continue
		}
		for i := int32(0); i < qd.ReadQueues; i++ {
			out = append(out, MessageQueue{Topic: r.Topic, BrokerName: qd.BrokerName, QueueID: i})
		}
	}
	slices.SortFunc(out, CompareQueues)
	return out
}

// WriteQueues returns the queues producers write: for each writable broker entry whose
// broker has a master, queue ids 0..WriteQueues-1, sorted by broker name then queue id.
// A QueueSelector's index points into this list.
func (r *TopicRoute) WriteQueues() []MessageQueue {
	var out []MessageQueue
	for _, qd := range r.Queues {
		if qd.Perm&PermWrite == 0 || r.MasterAddr(qd.BrokerName) == "" {
			continue
		}
		for i := int32(0); i < qd.WriteQueues; i++ {
			out = append(out, MessageQueue{Topic: r.Topic, BrokerName: qd.BrokerName, QueueID: i})
		}
	}
	slices.SortFunc(out, CompareQueues)
	return out
}

// MasterAddr returns the master address of broker name, or "" if the route has none.
func (r *TopicRoute) MasterAddr(name string) string {
	i := slices.IndexFunc(r.Brokers, func(b BrokerData) bool { return b.Name == name })
	if i < 0 {
		return ""
	}
	return r.Brokers[i].Addrs[MasterID]
}
