package edge

import (
	"errors"
	"fmt"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// RocketMQ sysflag bits the broker sets: compression type 2 (ZSTD) in bits 8-10.
const (
	sysFlagZstd       = 2 << 8
	sysFlagCompressMs = 7 << 8
)

// storeCopy fills s with what the store keeps of m, bound for queue q of m's topic.
func storeCopy(m *mq.Message, q int32, s *store.Message) {
	*s = store.Message{Topic: m.Topic, QueueID: q, Flag: m.Flag, Tags: m.Tags, Keys: m.Keys,
		Properties: m.Properties, Body: m.Body}
}

// ext returns the stored message s as consumers see it.
func (b *Broker) ext(s *store.Message) mq.MessageExt {
	return mq.MessageExt{
		Message: mq.Message{Topic: s.Topic, Flag: s.Flag, Tags: s.Tags, Keys: s.Keys,
			Properties: s.Properties, Body: s.Body},
		BrokerName: b.opts.BrokerName, QueueID: s.QueueID, QueueOffset: s.QueueOffset,
		SysFlag: s.SysFlag, BornTime: s.BornTime, BornHost: s.BornHost, StoreTime: s.StoreTime,
		StoreHost: b.opts.StoreHost, ReconsumeTimes: s.ReconsumeTimes,
		CommitLogOffset: s.Pos, StoreSize: s.Size,
	}
}

// appendErr translates the store's refusal of an append into the errors clients branch on:
// a message over the store's limits is mq.ErrMessageTooLarge, a closed store ErrClosed.
// Others (a full disk, a failed write) pass as they are.
func appendErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrMessageTooLarge), errors.Is(err, commitlog.ErrTooLarge):
		return fmt.Errorf("%w: %w", mq.ErrMessageTooLarge, err)
	case errors.Is(err, store.ErrInvalidMessage):
		return fmt.Errorf("%w: %w", mq.ErrInvalidArgument, err)
	case errors.Is(err, store.ErrClosed):
		return ErrClosed
	}
	return err
}
