package server

import (
	"fmt"
	"runtime/debug"

	"github.com/edgemq/edgemq/edge/remoting"
)

// handler answers one request; nil means no reply.
type handler func(s *Server, c *conn, req *remoting.Command) *remoting.Command

// handlers holds what the server answers, by request code, but sends (dispatchSend).
// Codes not here get REQUEST_CODE_NOT_SUPPORTED.
var handlers map[int16]handler

func init() {
	handlers = map[int16]handler{
		// producers: sends go to dispatchSend
		remoting.EndTransaction: (*Server).endTransaction,
		// consumers
		remoting.PullMessage:             (*Server).pull,
		remoting.LitePullMessage:         (*Server).pull,
		remoting.EndPullStream:           (*Server).endPullStream,
		remoting.HeartBeat:               (*Server).heartbeat,
		remoting.UnregisterClient:        (*Server).unregister,
		remoting.GetConsumerListByGroup:  (*Server).consumerList,
		remoting.QueryConsumerOffset:     (*Server).queryOffset,
		remoting.UpdateConsumerOffset:    (*Server).updateOffset,
		remoting.LockBatchMQ:             (*Server).lock,
		remoting.UnlockBatchMQ:           (*Server).unlock,
		remoting.ConsumerSendMsgBack:     (*Server).sendBack,
		remoting.GetMaxOffset:            (*Server).maxOffset,
		remoting.GetMinOffset:            (*Server).minOffset,
		remoting.SearchOffsetByTimestamp: (*Server).searchOffset,
		// name server
		remoting.GetRouteInfoByTopic:           (*Server).route,
		remoting.GetBrokerClusterInfo:          (*Server).clusterInfo,
		remoting.GetAllTopicListFromNameServer: (*Server).topicList,
		// admin
		remoting.UpdateAndCreateTopic:             (*Server).updateTopic,
		remoting.DeleteTopicInBroker:              (*Server).deleteTopic,
		remoting.DeleteTopicInNamesrv:             (*Server).deleteTopic,
		remoting.GetTopicStatsInfo:                (*Server).topicStats,
		remoting.GetTopicConfig:                   (*Server).topicConfigReply,
		remoting.QueryTopicConsumeByWho:           (*Server).consumedBy,
		remoting.GetBrokerRuntimeInfo:             (*Server).runtimeInfo,
		remoting.GetConsumeStats:                  (*Server).consumeStats,
		remoting.GetConsumerConnectionList:        (*Server).consumerConnections,
		remoting.ViewMessageByID:                  (*Server).viewMessage,
		remoting.QueryMessage:                     (*Server).queryMessage,
		remoting.InvokeBrokerToResetOffset:        (*Server).resetOffset,
		remoting.UpdateAndCreateSubscriptionGroup: (*Server).updateGroup,
		remoting.GetAllSubscriptionGroupConfig:    (*Server).groupConfigs,
	}
}

// dispatch answers req. A handler's panic is a bug of ours, not the client's: it is logged
// and answered SYSTEM_ERROR, and the server goes on.
func (s *Server) dispatch(c *conn, req *remoting.Command) (resp *remoting.Command) {
	if resp := s.authorize(c, req); resp != nil {
		return resp
	}
	h, ok := handlers[req.Code]
	if !ok {
		s.lg.Debug("request code not supported", "remote", c.remote, "code", req.Code)
		return req.Reply(remoting.RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", req.Code))
	}
	defer func() {
		if p := recover(); p != nil {
			s.lg.Error("request handler panicked", "remote", c.remote, "code", req.Code, "panic", p, "stack", string(debug.Stack()))
			resp = req.Reply(remoting.SystemError, "server: internal error")
		}
	}()
	return h(s, c, req)
}

// guard runs f, the handling of req: a panic is answered as in dispatch.
func (s *Server) guard(c *conn, req *remoting.Command, f func() (*remoting.Command, bool)) (resp *remoting.Command, wait bool) {
	defer func() {
		if p := recover(); p != nil {
			s.lg.Error("request handler panicked", "remote", c.remote, "code", req.Code, "panic", p, "stack", string(debug.Stack()))
			resp, wait = req.Reply(remoting.SystemError, "server: internal error"), false
		}
	}()
	return f()
}

// dispatchSend hands a send of size bytes to the broker in the reader's goroutine, so that
// a connection's sends are stored in the order they came; its answer is queued at once
// when the broker refuses it, else when the store acknowledges it. A panic is answered as
// in dispatch.
func (s *Server) dispatchSend(c *conn, req *remoting.Command, size int64) {
	accepted := false
	defer func() {
		if p := recover(); p != nil {
			s.lg.Error("request handler panicked", "remote", c.remote, "code", req.Code, "panic", p, "stack", string(debug.Stack()))
			if !accepted {
				s.refused(c, req, size, req.Reply(remoting.SystemError, "server: internal error"))
			}
		}
	}()
	if resp := s.authorize(c, req); resp != nil {
		s.refused(c, req, size, resp)
		return
	}
	var reply *remoting.Command
	if reply, accepted = s.send(c, req, size); !accepted {
		s.refused(c, req, size, reply)
	}
}

// refused answers a send the broker did not take.
func (s *Server) refused(c *conn, req *remoting.Command, size int64, reply *remoting.Command) {
	s.reqBytes.Add(-size)
	c.answer(req, reply, nil)
	c.handlers.Done()
}
