package edge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// SendBack returns a message that a consumer of req.Group failed to consume, as RocketMQ's
// consumerSendMsgBack. The message is found by its commitlog position req.Pos. A copy of it
// is stored:
//
//   - in the group's dead-letter topic DLQTopic(group) (one queue, no delay) when the message
//     has been reconsumed req.MaxReconsumeTimes times (Options.MaxReconsumeTimes when 0), or
//     when req.DelayLevel is negative;
//   - otherwise in the group's retry topic RetryTopic(group), queue 0, after delay level
//     req.DelayLevel, or 3 + its reconsume times when 0 (so 10 s, 30 s, 1 m, ... 2 h with the
//     default levels), clamped to the last level.
//
// The copy keeps the body (compressed or not), flag, sysflag, tags, keys, properties and
// born time and host. Its reconsume times are one more than the message's; it carries the
// original topic in RETRY_TOPIC and the original message id in ORIGIN_MESSAGE_ID (each kept
// if the message had one already: req.OriginMsgID or else the id of the message at req.Pos),
// and req.MaxReconsumeTimes, if given, in MAX_RECONSUME_TIMES. SendBack returns where the
// copy was stored, as Send does. Errors: ErrInvalidArgument (empty group, negative maximum),
// ErrMessageNotFound (nothing stored at req.Pos, or deleted by retention), ErrInvalidTopic
// (a group name unfit for a topic name), ErrNoPermission (the retry or DLQ topic is not
// writable).
func (b *Broker) SendBack(ctx context.Context, req SendBackRequest) (SendResult, error) {
	if err := b.check(); err != nil {
		return SendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return SendResult{}, err
	}
	if req.Group == "" {
		return SendResult{}, fmt.Errorf("%w: empty consumer group", ErrInvalidArgument)
	}
	if req.MaxReconsumeTimes < 0 {
		return SendResult{}, fmt.Errorf("%w: negative max reconsume times %d", ErrInvalidArgument, req.MaxReconsumeTimes)
	}
	m, err := b.st.ReadMessage(req.Pos)
	if err != nil {
		var ce *commitlog.CorruptError
		if errors.Is(err, commitlog.ErrPositionGone) || errors.Is(err, commitlog.ErrNoRecord) ||
			errors.Is(err, store.ErrBadRecord) || errors.As(err, &ce) || req.Pos < 0 {
			return SendResult{}, fmt.Errorf("%w: position %d: %v", ErrMessageNotFound, req.Pos, err)
		}
		return SendResult{}, err
	}
	maxTimes := req.MaxReconsumeTimes
	if maxTimes == 0 {
		maxTimes = b.opts.MaxReconsumeTimes
	}
	c := *m
	c.QueueID, c.QueueOffset, c.StoreTime, c.Pos, c.Size = 0, 0, 0, 0, 0
	c.ReconsumeTimes = m.ReconsumeTimes + 1
	c.Properties = maps.Clone(m.Properties)
	if c.Properties == nil {
		c.Properties = map[string]string{}
	}
	delete(c.Properties, PropertyDelayLevel)
	delete(c.Properties, PropertyRealTopic)
	delete(c.Properties, PropertyRealQueueID)
	if c.Properties[PropertyRetryTopic] == "" {
		c.Properties[PropertyRetryTopic] = m.Topic
	}
	if c.Properties[PropertyOriginMessageID] == "" {
		id := req.OriginMsgID
		if id == "" {
			id = MessageID(b.opts.StoreHost, req.Pos)
		}
		c.Properties[PropertyOriginMessageID] = id
	}
	if req.MaxReconsumeTimes > 0 {
		c.Properties[PropertyMaxReconsumeTimes] = strconv.Itoa(int(req.MaxReconsumeTimes))
	}
	if m.ReconsumeTimes >= maxTimes || req.DelayLevel < 0 {
		c.Topic = DLQTopic(req.Group)
	} else {
		c.Topic = RetryTopic(req.Group)
		level := int(req.DelayLevel)
		if level == 0 {
			level = 3 + int(m.ReconsumeTimes)
		}
		SetDelayLevel(&c, min(level, len(b.opts.DelayLevels)))
	}
	tp, err := b.topics.ensure(c.Topic)
	if err != nil {
		return SendResult{}, err
	}
	if tp.cfg.Perm&PermWrite == 0 {
		return SendResult{}, fmt.Errorf("%w: topic %q is not writable", ErrNoPermission, c.Topic)
	}
	s, err := b.prepare(&c, 0)
	if err != nil {
		return SendResult{}, err
	}
	if s == nil {
		c.QueueID = 0
		s = &c
	}
	res, err := b.store([]*Message{s}, []*Message{&c})
	if err != nil {
		return SendResult{}, err
	}
	return res[0], nil
}
