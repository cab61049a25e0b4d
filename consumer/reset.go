package consumer

import (
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// offsetMove is an offset reset the broker sent: the group's new offsets of queues of a
// topic.
type offsetMove struct {
	topic   string
	offsets map[mq.MessageQueue]int64
}

// onReset is the heartbeat's OnReset: an admin moved the group's stored offsets of topic
// (RocketMQ's RESET_CONSUMER_CLIENT_OFFSET). The service loop applies it.
func (pc *PushConsumer) onReset(group, topic string, offs map[mq.MessageQueue]int64) {
	if group != pc.opts.Group || len(offs) == 0 {
		return
	}
	pc.resetMu.Lock()
	pc.resets = append(pc.resets, offsetMove{topic: topic, offsets: offs})
	pc.resetMu.Unlock()
	pc.service.reset.trigger()
}

// applyResets moves the assigned queues that the resets name to their new offsets, as
// RocketMQ's client does (MQClientInstance.resetOffset): each is removed (its pull stops, its
// cached messages are dropped, and a consume run still going no longer moves its offset),
// with its offset set to the new one and persisted, and the rebalance that follows at once
// adds it back from there. Messages handed to the listener before the reset may still be
// consumed once. Queues not assigned here are left alone: the broker already holds their
// new offsets, which their next owner reads.
func (pc *PushConsumer) applyResets() time.Time {
	pc.resetMu.Lock()
	moves := pc.resets
	pc.resets = nil
	pc.resetMu.Unlock()
	if len(moves) == 0 {
		return time.Time{}
	}
	pc.rbMu.Lock()
	for _, mv := range moves {
		for _, qs := range pc.snapshot() {
			off, ok := mv.offsets[qs.queue]
			if !ok || off < 0 {
				continue
			}
			pc.opts.Logger.Info("consumer: offset reset by the broker", "group", pc.opts.Group, "queue", qs.queue, "offset", off)
			pc.removeQueue(qs, off)
		}
	}
	pc.rbMu.Unlock()
	pc.rebalance()
	return time.Time{}
}
