package uplink_test

import (
	"log"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/uplink"
)

// An embedded broker forwards its alarms ahead of its telemetry to a RocketMQ cluster, and
// mirrors the cluster's commands down. The Uplink closes before the broker.
func Example() {
	b, err := edge.Open("/var/lib/edgemq", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	up := uplink.Upstream{Addrs: "10.0.0.1:9876;10.0.0.2:9876", Kind: uplink.KindRocketMQ}
	u, err := uplink.Start(b, &uplink.Options{
		RateLimit: 256 << 10, // bytes per second, all rules together
		Up: []uplink.UpRule{
			{Name: "alarms", Topics: []string{"alarm"}, Upstream: up, Priority: 10},
			{Name: "telemetry", Topics: []string{"sensor-*"}, Upstream: up, TopicTemplate: "{gateway}-{topic}",
				Linger: 50 * time.Millisecond, Compress: true, Overflow: uplink.DropOldest},
		},
		Down: []uplink.DownRule{{Name: "commands", Topic: "Commands", Upstream: up}},
	})
	if err != nil {
		log.Fatal(err) // a rule that cannot work; an unreachable upstream is not an error
	}
	defer u.Close()
	for _, r := range u.Stats().Up {
		log.Printf("%s: %v, %d messages behind, the oldest %v old", r.Name, r.State, r.Backlog, r.OldestAge)
	}
}
