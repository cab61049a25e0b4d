package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// namesrvEnv names the variable that holds the name server's ip:port.
const namesrvEnv = "INTEROP_NAMESRV"

var (
	// namesrv is the name server address from namesrvEnv; empty means skip.
	namesrv string
	// runID makes this run's topic and group names unique on a broker that keeps old ones.
	runID string
	// instanceSeq numbers the client instances of this process, so that every producer and
	// consumer gets its own client id (ip@instance) and its own connections.
	instanceSeq atomic.Int64
)

func TestMain(m *testing.M) {
	rlog.SetLogLevel("warn")
	namesrv = os.Getenv(namesrvEnv)
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role))
	}
	runID = strconv.FormatInt(time.Now().UnixMilli(), 36)
	if namesrv == "" {
		fmt.Fprintf(os.Stderr, "interop: %s is unset, so every test skips; run scripts/interop/run.sh, "+
			"or set it to a name server's ip:port\n", namesrvEnv)
	}
	os.Exit(m.Run())
}

// needBroker skips t when no name server is configured.
func needBroker(t *testing.T) {
	t.Helper()
	if namesrv == "" {
		t.Skipf("%s is unset: no broker to test against (scripts/interop/run.sh sets it)", namesrvEnv)
	}
}

// names returns a topic and a consumer group unique to this run and scenario.
func names(scenario string) (topic, group string) {
	return "interop_" + scenario + "_" + runID, "interop_g_" + scenario + "_" + runID
}

func instanceName(what string) string {
	return fmt.Sprintf("interop-%s-%d-%d", what, os.Getpid(), instanceSeq.Add(1))
}

func resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{namesrv})
}

// newProducer starts a producer with its own client instance; t's cleanup shuts it down.
func newProducer(t *testing.T, group string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	all := append([]producer.Option{
		producer.WithNsResolver(resolver()),
		producer.WithGroupName("interop_p_" + group),
		producer.WithInstanceName(instanceName("p")),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}, opts...)
	p, err := rocketmq.NewProducer(all...)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// sendSync sends msgs (one message, or a batch when several) and fails t on error or a status
// other than SendOK. A broker that sheds load answers SYSTEM_BUSY (code 2; Apache RocketMQ does
// when a send waited over 200 ms in its queue, which a loaded 2-core machine sees), which the Go
// producer does not retry, so sendSync retries it as the Java producer does: up to 5 times.
func sendSync(t *testing.T, p rocketmq.Producer, msgs ...*primitive.Message) *primitive.SendResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := p.SendSync(ctx, msgs...)
		cancel()
		if err != nil && attempt < 5 && strings.HasPrefix(err.Error(), "CODE: 2,") {
			t.Logf("SendSync to %s: %v; again", msgs[0].Topic, err)
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond) // back off from a busy broker
			continue
		}
		if err != nil {
			t.Fatalf("SendSync to %s: %v", msgs[0].Topic, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("SendSync to %s: status %d, want SendOK", msgs[0].Topic, res.Status)
		}
		return res
	}
}

// startTimeout bounds how long a consumer's Start is retried while its topic has no route yet
// (an auto-created topic reaches the name server with the broker's next registration).
const startTimeout = 45 * time.Second

// startPush builds and starts a push consumer of topic, retrying Start (with a new consumer each
// time: a failed Start shuts the consumer down) until the topic has a route or startTimeout
// passes. t's cleanup shuts it down.
func startPush(t *testing.T, group, topic string, sel consumer.MessageSelector,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error),
	opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	c, err := startPushConsumer(group, topic, sel, f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

func startPushConsumer(group, topic string, sel consumer.MessageSelector,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error),
	opts ...consumer.Option) (rocketmq.PushConsumer, error) {
	deadline := time.Now().Add(startTimeout)
	for {
		all := append([]consumer.Option{
			consumer.WithNsResolver(resolver()),
			consumer.WithGroupName(group),
			consumer.WithInstance(instanceName("c")),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		}, opts...)
		c, err := rocketmq.NewPushConsumer(all...)
		if err != nil {
			return nil, fmt.Errorf("new push consumer %s: %w", group, err)
		}
		if err := c.Subscribe(topic, sel, f); err != nil {
			return nil, fmt.Errorf("subscribe %s to %s: %w", group, topic, err)
		}
		err = c.Start()
		if err == nil {
			return c, nil
		}
		_ = c.Shutdown()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("start push consumer %s of %s for %v: %w", group, topic, startTimeout, err)
		}
		time.Sleep(time.Second) // retry poll: the route appears on the broker's schedule
	}
}

// waitRoute polls the name server (GET_ROUTEINFO_BY_TOPIC, request 105) until topic has a
// route with a writable queue, and fails t after timeout.
func waitRoute(t *testing.T, topic string, timeout time.Duration) {
	t.Helper()
	a, err := admin.NewAdmin(admin.WithResolver(resolver()))
	if err != nil {
		t.Fatalf("new admin: %v", err)
	}
	defer a.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mqs, err := a.FetchPublishMessageQueues(ctx, topic)
		cancel()
		if err == nil && len(mqs) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s has no route after %v: %v", topic, timeout, err)
		}
		time.Sleep(time.Second) // retry poll: the route appears on the broker's schedule
	}
}

// got is one delivery as a consumer saw it.
type got struct {
	msg *primitive.MessageExt
	at  time.Time
	by  string // member that consumed it (clustering and broadcasting tests)
}

// collector gathers deliveries from consumer callbacks (any goroutine) for a test to wait on.
type collector struct {
	mu      sync.Mutex
	got     []got
	changed chan struct{} // capacity 1: a delivery arrived since the last wait
}

func newCollector() *collector {
	return &collector{changed: make(chan struct{}, 1)}
}

func (c *collector) add(by string, msgs ...*primitive.MessageExt) {
	now := time.Now()
	c.mu.Lock()
	for _, m := range msgs {
		c.got = append(c.got, got{msg: m, at: now, by: by})
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// consume is a push consumer callback that records every message and reports success.
func (c *collector) consume(by string) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		c.add(by, msgs...)
		return consumer.ConsumeSuccess, nil
	}
}

func (c *collector) snapshot() []got {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]got(nil), c.got...)
}

// waitFor waits until done holds for the deliveries so far or timeout passes, and returns the
// deliveries and whether done held.
func (c *collector) waitFor(timeout time.Duration, done func([]got) bool) ([]got, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s := c.snapshot()
		if done(s) {
			return s, true
		}
		select {
		case <-c.changed:
		case <-timer.C:
			s = c.snapshot()
			return s, done(s)
		}
	}
}

// waitIDs waits until every id in want has been delivered at least once.
func (c *collector) waitIDs(timeout time.Duration, want []string) ([]got, bool) {
	return c.waitFor(timeout, func(gs []got) bool { return len(missing(gs, want)) == 0 })
}

// settle waits d for stray deliveries (a message that must not arrive, a duplicate) and returns
// everything delivered so far.
func (c *collector) settle(d time.Duration) []got {
	s, _ := c.waitFor(d, func([]got) bool { return false })
	return s
}

// missing returns the ids of want that are in no delivery of gs.
func missing(gs []got, want []string) []string {
	seen := make(map[string]bool, len(gs))
	for _, g := range gs {
		seen[g.msg.MsgId] = true
	}
	var out []string
	for _, id := range want {
		if !seen[id] {
			out = append(out, id)
		}
	}
	return out
}

// byID indexes deliveries by message id; duplicates stay in order of arrival.
func byID(gs []got) map[string][]got {
	m := make(map[string][]got, len(gs))
	for _, g := range gs {
		m[g.msg.MsgId] = append(m[g.msg.MsgId], g)
	}
	return m
}

// userProps are the properties a test sets itself: broker and client keys excluded.
type userProps map[string]string

// sent is a message as its producer built it, with the id it was given (UNIQ_KEY).
type sent struct {
	msg   *primitive.Message
	id    string
	props userProps
	at    time.Time // just before the send call
}

// newMsg builds a message with a tag, keys, a user flag and user properties.
func newMsg(topic string, body []byte, tag string, keys []string, props userProps) *primitive.Message {
	m := primitive.NewMessage(topic, body)
	if tag != "" {
		m.WithTag(tag)
	}
	if len(keys) > 0 {
		m.WithKeys(keys)
	}
	for k, v := range props {
		m.WithProperty(k, v)
	}
	return m
}

// checkDelivered compares a delivery with what was sent, byte for byte: body, flag, tags, keys,
// user properties and the message id (UNIQ_KEY).
func checkDelivered(t *testing.T, want sent, g *primitive.MessageExt) {
	t.Helper()
	if g.MsgId != want.id {
		t.Errorf("MsgId = %q, want UNIQ_KEY %q", g.MsgId, want.id)
	}
	if u := g.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex); u != want.id {
		t.Errorf("message %s: UNIQ_KEY = %q, want %q", want.id, u, want.id)
	}
	if g.Topic != want.msg.Topic {
		t.Errorf("message %s: topic = %q, want %q", want.id, g.Topic, want.msg.Topic)
	}
	if !bytes.Equal(g.Body, want.msg.Body) {
		t.Errorf("message %s: body differs: got %d bytes %s, want %d bytes %s", want.id,
			len(g.Body), abbrev(g.Body), len(want.msg.Body), abbrev(want.msg.Body))
	}
	if g.Flag != want.msg.Flag {
		t.Errorf("message %s: flag = %d, want %d", want.id, g.Flag, want.msg.Flag)
	}
	if g.GetTags() != want.msg.GetTags() {
		t.Errorf("message %s: tags = %q, want %q", want.id, g.GetTags(), want.msg.GetTags())
	}
	if g.GetKeys() != want.msg.GetKeys() {
		t.Errorf("message %s: keys = %q, want %q", want.id, g.GetKeys(), want.msg.GetKeys())
	}
	for k, v := range want.props {
		if gv := g.GetProperty(k); gv != v {
			t.Errorf("message %s: property %q = %q, want %q", want.id, k, gv, v)
		}
	}
}

func abbrev(b []byte) string {
	if len(b) <= 24 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q…", b[:24])
}

// ids returns the ids of ss.
func ids(ss []sent) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.id
	}
	return out
}

// describe lists deliveries for a failure message.
func describe(gs []got) string {
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "\n\t%s q%d@%d reconsume=%d topic=%s by=%s body=%s", g.msg.MsgId, g.msg.Queue.QueueId,
			g.msg.QueueOffset, g.msg.ReconsumeTimes, g.msg.Topic, g.by, abbrev(g.msg.Body))
	}
	return b.String()
}
