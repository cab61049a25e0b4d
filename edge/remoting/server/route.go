package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// brokerAddr returns the address routes give for this broker: Options.Advertise, else the
// address c reached, with the main address's port (a client on the VIP port is sent to the
// main one, and derives the VIP port from it).
func (s *Server) brokerAddr(c *conn) string {
	if s.opts.Advertise != "" {
		return s.opts.Advertise
	}
	port := 0
	if s.mainTCP != nil {
		port = s.mainTCP.Port
	}
	if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		return net.JoinHostPort(ap.Addr().Unmap().String(), strconv.Itoa(port))
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) // not TCP: a test's pipe
}

// storeHost returns the address offset message ids given to c name: the address routes give
// it for this broker (brokerAddr), where VIEW_MESSAGE_BY_ID finds the message.
func (s *Server) storeHost(c *conn) netip.AddrPort {
	if ap, err := netip.ParseAddrPort(s.brokerAddr(c)); err == nil {
		return ap
	}
	return s.b.Options().StoreHost
}

// route answers GET_ROUTEINFO_BY_TOPIC as a name server: this broker, at brokerAddr, with
// the topic's queues; TOPIC_NOT_EXIST for a topic it does not serve.
func (s *Server) route(c *conn, req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseTopicHeader(req.Fields())
	if err != nil {
		return errReply(req, err)
	}
	topic := h.Topic
	r, err := s.b.Route(c.ctx, topic)
	if err != nil {
		if errors.Is(err, mq.ErrTopicNotExist) || errors.Is(err, mq.ErrInvalidTopic) {
			return req.Reply(remoting.TopicNotExist, fmt.Sprintf("No topic route info in name server for the topic: %s", topic))
		}
		return errReply(req, err)
	}
	addr := s.brokerAddr(c)
	for i := range r.Brokers {
		r.Brokers[i].Cluster = s.opts.ClusterName
		r.Brokers[i].Addrs = map[int64]string{mq.MasterID: addr}
	}
	resp := req.Reply(remoting.Success, "")
	resp.Body = remoting.EncodeRoute(r)
	return resp
}

// clusterInfo answers GET_BROKER_CLUSTER_INFO: one cluster of this one broker.
func (s *Server) clusterInfo(c *conn, req *remoting.Command) *remoting.Command {
	name := s.b.Options().BrokerName
	addr := s.brokerAddr(c)
	body := fmt.Sprintf(`{"brokerAddrTable":{%q:{"cluster":%q,"brokerName":%q,"brokerAddrs":{"0":%q}}},"clusterAddrTable":{%q:[%q]}}`,
		name, s.opts.ClusterName, name, addr, s.opts.ClusterName, name)
	resp := req.Reply(remoting.Success, "")
	resp.Body = []byte(body)
	return resp
}

// topicList answers GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic, system topics too.
func (s *Server) topicList(c *conn, req *remoting.Command) *remoting.Command {
	names := []string{}
	for _, t := range s.b.Topics() {
		names = append(names, t.Name)
	}
	body, _ := json.Marshal(struct {
		TopicList []string `json:"topicList"`
	}{names})
	resp := req.Reply(remoting.Success, "")
	resp.Body = body
	return resp
}
