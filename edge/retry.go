package edge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// SendBack returns a message that a consumer of req.Group failed to consume, as RocketMQ's
// consumerSendMsgBack. The message is found by its commit-log offset req.CommitLogOffset
// (req.BrokerName must be this broker's, or empty). A copy of it is stored:
//
//   - in the group's dead-letter topic mq.DLQTopic(group) (one queue, no delay) when the
//     message has been reconsumed req.MaxReconsumeTimes times (Options.MaxReconsumeTimes when
//     0), or when req.DelayLevel is negative;
//   - otherwise in the group's retry topic mq.RetryTopic(group), queue 0, after delay level
//     req.DelayLevel, or 3 + its reconsume times when 0 (so 10 s, 30 s, 1 m, ... 2 h with the
//     default levels), clamped to the last level.
//
// The copy keeps the body (compressed or not), flag, sysflag, tags, keys, properties and
// born time and host. Its reconsume times are one more than the message's; it carries the
// original topic in RETRY_TOPIC and the original message id in ORIGIN_MESSAGE_ID (each kept
// if the message had one already: req.OriginMsgID or else the offset message id of the
// message), and req.MaxReconsumeTimes, if given, in MAX_RECONSUME_TIMES. Errors: ErrClosed,
// ctx.Err(), and (wrapped) mq.ErrInvalidArgument (a bad group name, see mq.ValidateGroup; a
// negative maximum), mq.ErrInvalidQueue (another broker's name), mq.ErrMessageNotFound
// (nothing stored at the offset, or deleted by retention), mq.ErrNoPermission (the retry or
// DLQ topic is not writable). Nothing is stored on error.
func (b *Broker) SendBack(ctx context.Context, req mq.SendBackRequest) error {
	_, err := b.sendBack(ctx, req)
	return err
}

// sendBack is SendBack, returning where the copy was stored.
func (b *Broker) sendBack(ctx context.Context, req mq.SendBackRequest) (mq.SendResult, error) {
	if err := b.checkCtx(ctx); err != nil {
		return mq.SendResult{}, err
	}
	if err := b.checkBrokerName(req.BrokerName); err != nil {
		return mq.SendResult{}, err
	}
	if err := mq.ValidateGroup(req.Group); err != nil {
		return mq.SendResult{}, err
	}
	if req.MaxReconsumeTimes < 0 {
		return mq.SendResult{}, fmt.Errorf("%w: negative max reconsume times %d", mq.ErrInvalidArgument, req.MaxReconsumeTimes)
	}
	m, err := b.readMessage(req.CommitLogOffset)
	if err != nil {
		return mq.SendResult{}, err
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
	for _, k := range []string{mq.PropertyDelayLevel, mq.PropertyRealTopic, mq.PropertyRealQueueID, mq.PropertyReconsumeTime} {
		delete(c.Properties, k)
	}
	if c.Properties[mq.PropertyRetryTopic] == "" {
		c.Properties[mq.PropertyRetryTopic] = m.Topic
	}
	if c.Properties[mq.PropertyOriginMessageID] == "" {
		id := req.OriginMsgID
		if id == "" {
			id = mq.OffsetMsgID(b.opts.StoreHost, req.CommitLogOffset)
		}
		c.Properties[mq.PropertyOriginMessageID] = id
	}
	if req.MaxReconsumeTimes > 0 {
		c.Properties[mq.PropertyMaxReconsumeTimes] = strconv.Itoa(int(req.MaxReconsumeTimes))
	}
	if m.ReconsumeTimes >= maxTimes || req.DelayLevel < 0 {
		c.Topic = mq.DLQTopic(req.Group)
	} else {
		c.Topic = mq.RetryTopic(req.Group)
		level := int(req.DelayLevel)
		if level == 0 {
			level = 3 + int(m.ReconsumeTimes)
		}
		c.Properties[mq.PropertyDelayLevel] = strconv.Itoa(min(level, len(b.opts.DelayLevels)))
	}
	tp, err := b.topics.ensure(c.Topic)
	if err != nil {
		return mq.SendResult{}, err
	}
	if tp.cfg.Perm&mq.PermWrite == 0 {
		return mq.SendResult{}, fmt.Errorf("%w: topic %q is not writable", mq.ErrNoPermission, c.Topic)
	}
	if err := b.prepare(&c); err != nil {
		return mq.SendResult{}, err
	}
	if err := b.st.Append([]*store.Message{&c}); err != nil {
		return mq.SendResult{}, appendErr(err)
	}
	tp.in.add(1, int64(len(m.Body)))
	return b.result(&c), nil
}

// readMessage reads the message at commit-log offset pos. A position that holds no message
// (never written, deleted, damaged) is mq.ErrMessageNotFound.
func (b *Broker) readMessage(pos int64) (*store.Message, error) {
	if pos < 0 {
		return nil, fmt.Errorf("%w: negative commit-log offset %d", mq.ErrMessageNotFound, pos)
	}
	m, err := b.st.ReadMessage(pos)
	if err != nil {
		var ce *commitlog.CorruptError
		if errors.Is(err, commitlog.ErrPositionGone) || errors.Is(err, commitlog.ErrNoRecord) ||
			errors.Is(err, store.ErrBadRecord) || errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: commit-log offset %d: %v", mq.ErrMessageNotFound, pos, err)
		}
		if errors.Is(err, store.ErrClosed) {
			return nil, ErrClosed
		}
		return nil, err
	}
	return m, nil
}

// ViewMessage returns the message stored at commit-log offset pos, as a consumer would
// receive it (RocketMQ's VIEW_MESSAGE_BY_ID; mq.ParseOffsetMsgID turns an offset message
// id into its offset). Errors: ErrClosed, ctx.Err(), mq.ErrMessageNotFound.
func (b *Broker) ViewMessage(ctx context.Context, pos int64) (mq.MessageExt, error) {
	if err := b.checkCtx(ctx); err != nil {
		return mq.MessageExt{}, err
	}
	m, err := b.readMessage(pos)
	if err != nil {
		return mq.MessageExt{}, err
	}
	if err := b.decompress(m); err != nil {
		return mq.MessageExt{}, err
	}
	return b.ext(m), nil
}
