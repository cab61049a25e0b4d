package edge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// maxKeyScan bounds the messages one MessagesByKey reads.
const maxKeyScan = 1 << 20

// MessagesByKey returns up to maxMsgs messages of topic stored from from to to (inclusive)
// whose keys (mq.Message.Keys, space-separated) include key, or whose mq.PropertyUniqKey is
// key: RocketMQ's QUERY_MESSAGE, which mqadmin's queryMsgByKey sends. The broker keeps no
// key index: it reads the topic's queues, each from its first message stored at or after
// from, queue by queue, at most 1,048,576 messages in all; the messages come in queue
// order, oldest first. Errors: ErrClosed, ctx.Err(), mq.ErrTopicNotExist, and
// mq.ErrInvalidArgument for an empty key or maxMsgs below 1.
func (b *Broker) MessagesByKey(ctx context.Context, topic, key string, maxMsgs int, from, to time.Time) ([]mq.MessageExt, error) {
	if err := b.checkCtx(ctx); err != nil {
		return nil, err
	}
	if key == "" || maxMsgs < 1 {
		return nil, fmt.Errorf("%w: key %q, max %d", mq.ErrInvalidArgument, key, maxMsgs)
	}
	tp, ok := b.topics.get(topic)
	if !ok {
		return nil, fmt.Errorf("%w: %q", mq.ErrTopicNotExist, topic)
	}
	var out []mq.MessageExt
	scanned := 0
	fromMs, toMs := from.UnixMilli(), to.UnixMilli()
	for q := int32(0); q < max(tp.cfg.ReadQueues, tp.cfg.WriteQueues); q++ {
		off, err := b.st.OffsetByTime(topic, q, fromMs)
		if err != nil {
			return nil, err
		}
		for len(out) < maxMsgs && scanned < maxKeyScan {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			g, err := b.st.GetMessages(topic, q, off, 32, nil)
			if err != nil {
				return nil, err
			}
			if g.Status == store.OffsetTooSmall || g.Status == store.OffsetFoundNull {
				if g.NextBeginOffset <= off {
					break
				}
				off = g.NextBeginOffset
				continue
			}
			if g.Status != store.Found {
				break
			}
			past := false
			for i := range g.Messages {
				m := &g.Messages[i]
				scanned++
				if m.StoreTime > toMs {
					past = true
					break
				}
				if m.Properties[mq.PropertyUniqKey] != key && !slices.Contains(strings.Fields(m.Keys), key) {
					continue
				}
				if err := b.decompress(m); err != nil {
					return nil, err
				}
				out = append(out, b.ext(m))
				if len(out) == maxMsgs {
					break
				}
			}
			if past || g.NextBeginOffset <= off {
				break
			}
			off = g.NextBeginOffset
		}
	}
	return out, nil
}
