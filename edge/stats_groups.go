package edge

import (
	"cmp"
	"slices"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
)

// GroupTopic names a consumer group and a topic it has committed offsets on.
type GroupTopic struct {
	Group, Topic string
}

// GroupTopics returns every (group, topic) pair with a committed offset on at least one of
// the topic's queues, sorted by group then topic: the pairs Lag has something to say of,
// whether or not the group's consumers are connected. Errors: ErrClosed.
func (b *Broker) GroupTopics() ([]GroupTopic, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	t := b.offsets
	seen := map[GroupTopic]struct{}{}
	t.mu.Lock()
	for k := range t.m {
		if k.group != mq.TransCheckGroup { // the transaction checker's progress, not a consumer's
			seen[GroupTopic{k.group, k.topic}] = struct{}{}
		}
	}
	t.mu.Unlock()
	out := make([]GroupTopic, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b GroupTopic) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic))
	})
	return out, nil
}
