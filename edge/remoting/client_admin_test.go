package remoting_test

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
)

// TestClientAdmin runs every admin request of the client against an EdgeMQ server and
// checks each against the broker's own view.
func TestClientAdmin(t *testing.T) {
	tb := startBroker(t, "", "")
	c := dial(t, tb.addr, nil)
	ctx := ctxT(t, 30*time.Second)

	// CreateTopic, TopicConfig, TopicList
	if err := c.CreateTopic(ctx, remoting.TopicConfig{Name: "Orders", ReadQueues: 3, WriteQueues: 2, Perm: mq.PermRead | mq.PermWrite, Order: true}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if cfg, err := tb.b.Topic("Orders"); err != nil || cfg.ReadQueues != 3 || cfg.WriteQueues != 2 || !cfg.Order {
		t.Fatalf("broker's topic after CreateTopic: %+v, %v", cfg, err)
	}
	cfg, err := c.TopicConfig(ctx, "Orders")
	if want := (remoting.TopicConfig{Name: "Orders", ReadQueues: 3, WriteQueues: 2, Perm: mq.PermRead | mq.PermWrite, Order: true}); err != nil || !reflect.DeepEqual(cfg, want) {
		t.Fatalf("TopicConfig = %+v, %v; want %+v", cfg, err, want)
	}
	// The durability attribute: set, read back, kept by an update that does not name it,
	// refused when unknown.
	async := map[string]string{edge.DurabilityAttr: "async"}
	tel := remoting.TopicConfig{Name: "Telemetry", ReadQueues: 1, WriteQueues: 1, Perm: mq.PermRead | mq.PermWrite, Attributes: async}
	if err := c.CreateTopic(ctx, tel); err != nil {
		t.Fatalf("CreateTopic with durability async: %v", err)
	}
	if got, err := c.TopicConfig(ctx, "Telemetry"); err != nil || !reflect.DeepEqual(got, tel) {
		t.Fatalf("TopicConfig = %+v, %v; want %+v", got, err, tel)
	}
	upd := tel
	upd.Attributes, upd.WriteQueues, upd.ReadQueues = nil, 2, 2
	if err := c.CreateTopic(ctx, upd); err != nil {
		t.Fatalf("CreateTopic (update): %v", err)
	}
	if got, err := tb.b.Topic("Telemetry"); err != nil || got.Durability != store.DurabilityAsync || got.WriteQueues != 2 {
		t.Fatalf("broker's topic after an update without attributes: %+v, %v; want durability async kept", got, err)
	}
	upd.Attributes = map[string]string{edge.DurabilityAttr: "eventually"}
	if err := c.CreateTopic(ctx, upd); err == nil {
		t.Fatal("CreateTopic with durability eventually: no error")
	}
	if _, err := c.TopicConfig(ctx, "Nope"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("TopicConfig(Nope): %v, want %v", err, mq.ErrTopicNotExist)
	}
	// Again: an update, which the client sees at once (its cached route is dropped).
	if _, err := c.Route(ctx, "Orders"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(ctx, remoting.TopicConfig{Name: "Orders", ReadQueues: 2, WriteQueues: 2, Perm: mq.PermRead | mq.PermWrite}); err != nil {
		t.Fatalf("CreateTopic (update): %v", err)
	}
	if r, err := c.Route(ctx, "Orders"); err != nil || len(r.ReadQueues()) != 2 {
		t.Fatalf("Route after the update: %+v, %v", r, err)
	}
	if err := c.CreateTopic(ctx, remoting.TopicConfig{Name: "bad topic!"}); !errors.Is(err, mq.ErrInvalidTopic) {
		t.Fatalf("CreateTopic(bad name): %v", err)
	}
	list, err := c.TopicList(ctx)
	if err != nil || !slices.Contains(list, "Orders") || !slices.IsSorted(list) {
		t.Fatalf("TopicList = %v, %v", list, err)
	}

	// TopicStats, after sends
	qs := []mq.MessageQueue{{Topic: "Orders", BrokerName: "edgemq", QueueID: 0}, {Topic: "Orders", BrokerName: "edgemq", QueueID: 1}}
	for i := range 3 {
		if _, err := c.Send(ctx, &mq.Message{Topic: "Orders", Body: []byte(strconv.Itoa(i))}, mq.QueueIndex(1)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.TopicStats(ctx, "Orders")
	want := []remoting.QueueStats{{Queue: qs[0], MinOffset: 0, MaxOffset: 0}, {Queue: qs[1], MinOffset: 0, MaxOffset: 3}}
	if err != nil || !slices.Equal(st, want) {
		t.Fatalf("TopicStats = %+v, %v; want %+v", st, err, want)
	}

	// ConsumeStats, ConsumerGroups: a group known by its heartbeat, with an offset
	if _, err := c.ConsumeStats(ctx, "nobody", "Orders"); !errors.Is(err, mq.ErrGroupNotExist) {
		t.Fatalf("ConsumeStats(unknown group): %v, want %v", err, mq.ErrGroupNotExist)
	}
	hb := mq.Heartbeat{ClientID: "c1", Consumers: []mq.ConsumerData{{Group: "g", Subscriptions: []mq.Subscription{{Topic: "Orders", Expression: "*"}}}}}
	if err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitOffset(ctx, "g", qs[1], 2); err != nil {
		t.Fatal(err)
	}
	cs, err := c.ConsumeStats(ctx, "g", "Orders")
	wantCS := []remoting.GroupQueueStats{{Queue: qs[0], BrokerOffset: 0, ConsumerOffset: 0}, {Queue: qs[1], BrokerOffset: 3, ConsumerOffset: 2}}
	if err != nil || !slices.Equal(cs, wantCS) {
		t.Fatalf("ConsumeStats = %+v, %v; want %+v", cs, err, wantCS)
	}
	if gs, err := c.ConsumerGroups(ctx, "Orders"); err != nil || !slices.Equal(gs, []string{"g"}) {
		t.Fatalf("ConsumerGroups = %v, %v", gs, err)
	}

	// ResetOffsets: to the start (timestamp 0), then to the end (-1)
	offs, err := c.ResetOffsets(ctx, "g", "Orders", 0)
	if err != nil || offs[qs[0]] != 0 || offs[qs[1]] != 0 || len(offs) != 2 {
		t.Fatalf("ResetOffsets(0) = %v, %v", offs, err)
	}
	if lags, _ := tb.b.Lag("g", "Orders"); lags[1].ConsumerOffset != 0 {
		t.Fatalf("broker's offset after the reset to 0: %+v", lags)
	}
	if offs, err = c.ResetOffsets(ctx, "g", "Orders", -1); err != nil || offs[qs[1]] != 3 {
		t.Fatalf("ResetOffsets(-1) = %v, %v", offs, err)
	}
	if lags, _ := tb.b.Lag("g", "Orders"); lags[1].ConsumerOffset != 3 {
		t.Fatalf("broker's offset after the reset to the end: %+v", lags)
	}

	// CreateGroup
	if err := c.CreateGroup(ctx, "made"); err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	if !slices.Contains(tb.b.Groups(), "made") {
		t.Fatalf("broker's groups after CreateGroup: %v", tb.b.Groups())
	}
	if err := c.CreateGroup(ctx, "bad group!"); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("CreateGroup(bad name): %v", err)
	}

	// ClusterBrokers
	if bs, err := c.ClusterBrokers(ctx); err != nil || len(bs) != 1 || bs[0].Name != "edgemq" || bs[0].Cluster == "" || bs[0].Addrs[mq.MasterID] != tb.addr {
		t.Fatalf("ClusterBrokers = %+v, %v", bs, err)
	}

	// BrokerRuntimeInfo
	infos, err := c.BrokerRuntimeInfo(ctx)
	if err != nil || len(infos) != 1 {
		t.Fatalf("BrokerRuntimeInfo = %v, %v", infos, err)
	}
	ss, _ := tb.b.StoreStats()
	if info := infos[tb.addr]; info["commitLogMaxOffset"] != strconv.FormatInt(ss.MaxPos, 10) || info["brokerName"] != "edgemq" {
		t.Fatalf("runtime info of %s: %v; store %+v", tb.addr, infos, ss)
	}

	// DeleteTopic
	if err := c.DeleteTopic(ctx, "Orders"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := tb.b.Topic("Orders"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("broker's topic after DeleteTopic: %v", err)
	}
	if _, err := c.TopicConfig(ctx, "Orders"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Fatalf("TopicConfig after DeleteTopic: %v", err)
	}
}
