package edge

import (
	"time"

	"github.com/edgemq/edgemq/edge/mq"
)

// Member is one client of a consumer group, as Members reports it.
type Member struct {
	ClientID      string
	Model         mq.MessageModel
	ConsumeType   mq.ConsumeType
	FromWhere     string
	Subscriptions []mq.Subscription
	LastHeartbeat time.Time
}
