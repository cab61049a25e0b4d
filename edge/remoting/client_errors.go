package remoting

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
)

// Errors of the Client.
var (
	// ErrClientClosed is returned by every call of a Client after Close. It wraps
	// mq.ErrUnavailable.
	ErrClientClosed = fmt.Errorf("remoting: client closed (%w)", mq.ErrUnavailable)
	// errClientConnClosed: the connection a request was sent on died before its reply.
	errClientConnClosed = fmt.Errorf("remoting: connection closed (%w)", mq.ErrUnavailable)
)

// ResponseError is a broker's or name server's answer to a request other than success:
// its response code and remark. It unwraps to the package mq error that the code means,
// when one does (see CodeError), so that callers branch with errors.Is.
type ResponseError struct {
	Addr    string // who answered
	Request int16  // the request code
	Code    int16  // the response code
	Remark  string
	err     error // the mq sentinel, or nil
}

func (e *ResponseError) Error() string {
	s := fmt.Sprintf("remoting: request %d to %s: response code %d", e.Request, e.Addr, e.Code)
	if e.err != nil {
		s += " (" + e.err.Error() + ")"
	}
	if e.Remark != "" {
		s += ": " + e.Remark
	}
	return s
}

// Unwrap returns the package mq error the code maps to, or nil.
func (e *ResponseError) Unwrap() error { return e.err }

// codeErrors maps RocketMQ response codes to package mq's errors.
var codeErrors = map[int16]error{
	SystemBusy:                mq.ErrUnavailable,
	FlushDiskTimeout:          mq.ErrUnavailable,
	SlaveNotAvailable:         mq.ErrUnavailable,
	FlushSlaveTimeout:         mq.ErrUnavailable,
	ServiceNotAvailable:       mq.ErrUnavailable,
	FlowControl:               mq.ErrUnavailable,
	PollingFull:               mq.ErrUnavailable,
	NoPermission:              mq.ErrNoPermission,
	TopicNotExist:             mq.ErrTopicNotExist,
	QueryNotFound:             mq.ErrOffsetNotFound,
	SubscriptionParseFailed:   mq.ErrInvalidArgument,
	SubscriptionNotExist:      mq.ErrSubscriptionNotExist,
	SubscriptionNotLatest:     mq.ErrSubscriptionNotExist,
	SubscriptionGroupNotExist: mq.ErrGroupNotExist,
	InvalidParameter:          mq.ErrInvalidArgument,
	VersionNotSupported:       errors.ErrUnsupported,
	RequestCodeNotSupported:   errors.ErrUnsupported,
}

// CodeError returns the error a response code means: for SUCCESS nil; else a
// *ResponseError that unwraps to
//
//	SYSTEM_BUSY (2), FLUSH_DISK_TIMEOUT (10), SLAVE_NOT_AVAILABLE (11),
//	FLUSH_SLAVE_TIMEOUT (12), SERVICE_NOT_AVAILABLE (14), FLOW_CONTROL (215),
//	POLLING_FULL (209)                                    mq.ErrUnavailable
//	MESSAGE_ILLEGAL (13)                                  mq.ErrMessageTooLarge when the
//	                                                      remark speaks of size, else
//	                                                      mq.ErrInvalidArgument
//	NO_PERMISSION (16)                                    mq.ErrNoPermission
//	TOPIC_NOT_EXIST (17)                                  mq.ErrTopicNotExist
//	QUERY_NOT_FOUND (22)                                  mq.ErrOffsetNotFound
//	SUBSCRIPTION_PARSE_FAILED (23), INVALID_PARAMETER (29) mq.ErrInvalidArgument
//	SUBSCRIPTION_NOT_EXIST (24), SUBSCRIPTION_NOT_LATEST (25) mq.ErrSubscriptionNotExist
//	SUBSCRIPTION_GROUP_NOT_EXIST (26)                     mq.ErrGroupNotExist
//	REQUEST_CODE_NOT_SUPPORTED (3), VERSION_NOT_SUPPORTED (15) errors.ErrUnsupported
//
// and to nothing for other codes (SYSTEM_ERROR 1, ...). The pull statuses 19, 20 and 21
// are not errors: Pull turns them into mq.PullStatus values.
func CodeError(addr string, request, code int16, remark string) error {
	if code == Success {
		return nil
	}
	e := &ResponseError{Addr: addr, Request: request, Code: code, Remark: remark, err: codeErrors[code]}
	if code == MessageIllegal {
		e.err = mq.ErrInvalidArgument
		r := strings.ToLower(remark)
		if strings.Contains(r, "size") || strings.Contains(r, "large") || strings.Contains(r, "too long") || strings.Contains(r, "length") {
			e.err = mq.ErrMessageTooLarge
		}
	}
	return e
}

// respError returns the error of resp, a reply from addr to request, when its code is
// not one of ok.
func respError(addr string, request int16, resp *Command, ok ...int16) error {
	for _, c := range ok {
		if resp.Code == c {
			return nil
		}
	}
	if resp.Code == Success {
		return &ResponseError{Addr: addr, Request: request, Code: resp.Code, Remark: "unexpected success", err: ErrMalformed}
	}
	return CodeError(addr, request, resp.Code, resp.Remark)
}
