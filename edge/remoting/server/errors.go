package server

import (
	"context"
	"errors"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// ErrACL is returned by LoadACL and ACL.Reload for an accounts file that does not read or
// parse; the error names the file and what is wrong.
var ErrACL = errors.New("server: invalid ACL file")

// ErrTLS is returned by LoadTLS for a certificate, key or CA file that does not load.
var ErrTLS = errors.New("server: invalid TLS files")

// errCodes maps the broker's errors to RocketMQ's response codes, first match wins. What
// is not here is SYSTEM_ERROR (1).
var errCodes = []struct {
	err  error
	code int16
}{
	{mq.ErrTopicNotExist, remoting.TopicNotExist},
	{mq.ErrNoPermission, remoting.NoPermission},
	{mq.ErrMessageTooLarge, remoting.MessageIllegal},
	{mq.ErrSubscriptionNotExist, remoting.SubscriptionNotExist},
	{mq.ErrGroupNotExist, remoting.SubscriptionGroupNotExist},
	{mq.ErrOffsetNotFound, remoting.QueryNotFound},
	// RocketMQ answers a bad topic name and a queue id out of range INVALID_PARAMETER.
	{mq.ErrInvalidTopic, remoting.InvalidParameter},
	{mq.ErrInvalidQueue, remoting.InvalidParameter},
	{mq.ErrInvalidArgument, remoting.InvalidParameter},
	{remoting.ErrMalformed, remoting.InvalidParameter},
	{mq.ErrUnavailable, remoting.ServiceNotAvailable}, // edge.ErrClosed wraps it
	{edge.ErrClosed, remoting.ServiceNotAvailable},
	{context.Canceled, remoting.ServiceNotAvailable}, // the connection or the server is closing
	{context.DeadlineExceeded, remoting.ServiceNotAvailable},
}

// errCode returns the response code of err.
func errCode(err error) int16 {
	for _, e := range errCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return remoting.SystemError
}

// errReply answers req with err's code and err as the remark.
func errReply(req *remoting.Command, err error) *remoting.Command {
	return req.Reply(errCode(err), err.Error())
}
