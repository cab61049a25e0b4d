package remoting

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// goldenRoute is the route example of the protocol: compact, as Java's name server writes
// it for standard-JSON clients and as rocketmq-client-go's internal/route.go decode reads
// it.
const goldenRoute = `{"orderTopicConf":"","queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
	`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":"10.0.0.5:10911"}}],"filterServerTable":{}}`

var goldenRouteData = mq.TopicRoute{
	Queues:  []mq.QueueData{{BrokerName: "broker-a", ReadQueues: 4, WriteQueues: 4, Perm: 6}},
	Brokers: []mq.BrokerData{{Cluster: "DefaultCluster", Name: "broker-a", Addrs: map[int64]string{0: "10.0.0.5:10911"}}},
}

// goBrokerAddrs parses brokerAddrs as rocketmq-client-go's TopicRouteData.decode does:
// strip the braces, split on commas, split at the first colon, remove quotes.
func goBrokerAddrs(raw string) map[int64]string {
	out := map[int64]string{}
	for _, s := range strings.Split(raw[1:len(raw)-1], ",") {
		i := strings.Index(s, ":")
		if i < 0 {
			continue
		}
		id, _ := strconv.ParseInt(strings.ReplaceAll(s[:i], `"`, ""), 10, 64)
		out[id] = strings.ReplaceAll(s[i+1:], `"`, "")
	}
	return out
}

func TestRouteGolden(t *testing.T) {
	if got := string(EncodeRoute(goldenRouteData)); got != goldenRoute {
		t.Fatalf("EncodeRoute:\n got %s\nwant %s", got, goldenRoute)
	}
	if got := string(AppendRoute([]byte("x"), goldenRouteData)); got != "x"+goldenRoute {
		t.Fatalf("AppendRoute = %s", got)
	}
	r, err := DecodeRoute([]byte(goldenRoute))
	if err != nil || !reflect.DeepEqual(r, goldenRouteData) {
		t.Fatalf("DecodeRoute = %+v, %v", r, err)
	}
}

func TestRouteAsTheGoClientReadsIt(t *testing.T) {
	route := mq.TopicRoute{
		Queues: []mq.QueueData{{BrokerName: "b", ReadQueues: 1, WriteQueues: 2, Perm: 7}, {BrokerName: "a", Perm: 4}},
		Brokers: []mq.BrokerData{
			{Cluster: "c", Name: "b", Addrs: map[int64]string{2: "10.0.0.7:10911", 0: "[::1]:10911", 1: "10.0.0.6:10911"}},
			{Cluster: "c", Name: "a"},
		},
	}
	body := EncodeRoute(route)
	var raw struct {
		QueueDatas  json.RawMessage
		BrokerDatas []struct{ BrokerAddrs json.RawMessage }
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.QueueDatas[0] != '[' {
		t.Fatalf("queueDatas %s", raw.QueueDatas)
	}
	for i, bd := range raw.BrokerDatas {
		want := route.Brokers[i].Addrs
		if want == nil {
			want = map[int64]string{}
		}
		if got := goBrokerAddrs(string(bd.BrokerAddrs)); !reflect.DeepEqual(got, want) {
			t.Errorf("broker %d: %s reads as %v, want %v", i, bd.BrokerAddrs, got, want)
		}
	}
	if !strings.Contains(string(body), `"brokerAddrs":{"0":"[::1]:10911","1":"10.0.0.6:10911","2":"10.0.0.7:10911"}`) {
		t.Fatalf("ids not in order: %s", body)
	}
	back, err := DecodeRoute(body)
	if err != nil || !reflect.DeepEqual(back, route) {
		t.Fatalf("DecodeRoute = %+v, %v", back, err)
	}
	if got := string(EncodeRoute(mq.TopicRoute{})); got != `{"orderTopicConf":"","queueDatas":[],"brokerDatas":[],"filterServerTable":{}}` {
		t.Fatalf("empty route: %s", got)
	}
}

func TestDecodeRouteJava(t *testing.T) {
	tests := []struct{ name, body string }{
		// fastjson for clients below version 401: Long map keys unquoted.
		{"fastjson", `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],` +
			`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`},
		{"standard JSON with extras", `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","zoneName":null}],` +
			`"orderTopicConf":"broker-a:4","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}],"topicQueueMappingByBroker":null}`},
		{"spaces", "{ \"queueDatas\" : [ { \"brokerName\" : \"broker-a\" , \"readQueueNums\" : 4 , \"writeQueueNums\" : 4 , \"perm\" : 6 } ] , " +
			"\"brokerDatas\" : [ { \"cluster\" : \"DefaultCluster\" , \"brokerName\" : \"broker-a\" , \"brokerAddrs\" : { 0 : \"10.0.0.5:10911\" } } ] }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeRoute([]byte(tc.body))
			if err != nil || !reflect.DeepEqual(r, goldenRouteData) {
				t.Fatalf("got %+v, %v", r, err)
			}
		})
	}
	// Unquoted keys are fixed only where they are keys.
	r, err := DecodeRoute([]byte(`{"brokerDatas":[{"cluster":"{0:x}, 1:","brokerName":"[2:y]","brokerAddrs":{-1:"a",7:"b,c"}}]}`))
	want := mq.TopicRoute{Brokers: []mq.BrokerData{{Cluster: "{0:x}, 1:", Name: "[2:y]", Addrs: map[int64]string{-1: "a", 7: "b,c"}}}}
	if err != nil || !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v, %v", r, err)
	}
}

func TestDecodeRouteMalformed(t *testing.T) {
	for _, body := range []string{
		``, `null`, `[]`, `{`, `{"queueDatas":{}}`, `{"queueDatas":[{"readQueueNums":1.5}]}`,
		`{"queueDatas":[{"perm":"6"}]}`, `{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}`,
		`{"brokerDatas":[{"brokerAddrs":{"99999999999999999999":"a"}}]}`, `{"brokerDatas":[{"brokerAddrs":{"0":1}}]}`,
		`{"brokerDatas":[{"brokerAddrs":{0x:"a"}}]}`,
	} {
		if r, err := DecodeRoute([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %+v, %v; want ErrMalformed", body, r, err)
		}
	}
}

// goHeartbeat is a heartbeat as rocketmq-client-go writes it (internal/model.go
// heartbeatData with utils.Set: codeSet as strings, subVersion in ns).
const goHeartbeat = `{"clientID":"192.168.1.2@12345","producerDataSet":[],"consumerDataSet":[{"groupName":"cg",` +
	`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",` +
	`"subscriptionDataSet":[{"classFilterMode":false,"topic":"TopicTest","subString":"TagA || TagB","tagsSet":["TagA","TagB"],` +
	`"codeSet":["2598919","2598920"],"subVersion":1700000000000000000,"expressionType":"TAG"},` +
	`{"classFilterMode":false,"topic":"%RETRY%cg","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1700000000000000001,"expressionType":"TAG"}],` +
	`"unitMode":false}]}`

// javaHeartbeat is a heartbeat as the Java client's fastjson writes it: fields sorted,
// codeSet as ints, subVersion in ms, extra fields.
const javaHeartbeat = `{"clientID":"10.0.0.1@4242#8317","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",` +
	`"consumeType":"CONSUME_ACTIVELY","groupName":"jg","messageModel":"BROADCASTING","subscriptionDataSet":[{"classFilterMode":false,` +
	`"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],` +
	`"unitMode":true}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"pg"}]}`

func TestDecodeHeartbeat(t *testing.T) {
	tests := []struct {
		name string
		body string
		want mq.Heartbeat
		data HeartbeatData
	}{
		{"go", goHeartbeat,
			mq.Heartbeat{ClientID: "192.168.1.2@12345", Consumers: []mq.ConsumerData{{
				Group: "cg", Model: mq.Clustering, ConsumeType: mq.ConsumePassively, FromWhere: "CONSUME_FROM_LAST_OFFSET",
				Subscriptions: []mq.Subscription{
					{Topic: "TopicTest", Expression: "TagA || TagB", SubVersion: 1700000000000000000},
					{Topic: "%RETRY%cg", Expression: "*", SubVersion: 1700000000000000001},
				}}}},
			HeartbeatData{ClientID: "192.168.1.2@12345", Consumers: []ConsumerData{{
				Group: "cg", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
				Subscriptions: []SubscriptionData{
					{Topic: "TopicTest", SubString: "TagA || TagB", ExpressionType: "TAG", Tags: []string{"TagA", "TagB"}, SubVersion: 1700000000000000000},
					{Topic: "%RETRY%cg", SubString: "*", ExpressionType: "TAG", Tags: []string{}, SubVersion: 1700000000000000001},
				}}}}},
		{"java", javaHeartbeat,
			mq.Heartbeat{ClientID: "10.0.0.1@4242#8317", Producers: []string{"CLIENT_INNER_PRODUCER", "pg"}, Consumers: []mq.ConsumerData{{
				Group: "jg", Model: mq.Broadcasting, ConsumeType: mq.ConsumeActively, FromWhere: "CONSUME_FROM_FIRST_OFFSET",
				Subscriptions: []mq.Subscription{{Topic: "T", Expression: "TagA", SubVersion: 1700000000000}}}}},
			HeartbeatData{ClientID: "10.0.0.1@4242#8317", Producers: []string{"CLIENT_INNER_PRODUCER", "pg"}, Consumers: []ConsumerData{{
				Group: "jg", ConsumeType: mq.ConsumeActively, MessageModel: mq.Broadcasting, ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET", UnitMode: true,
				Subscriptions: []SubscriptionData{{Topic: "T", SubString: "TagA", ExpressionType: "TAG", Tags: []string{"TagA"}, SubVersion: 1700000000000}}}}}},
		{"producer only, defaults, tags without subString, subVersion as string", `{"clientID":"c","producerDataSet":[{"groupName":"p"}],` +
			`"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","tagsSet":["A","B"],"subVersion":"5"}]}]}`,
			mq.Heartbeat{ClientID: "c", Producers: []string{"p"}, Consumers: []mq.ConsumerData{{Group: "g",
				Subscriptions: []mq.Subscription{{Topic: "T", Expression: "A || B", SubVersion: 5}}}}},
			HeartbeatData{ClientID: "c", Producers: []string{"p"}, Consumers: []ConsumerData{{Group: "g",
				Subscriptions: []SubscriptionData{{Topic: "T", Tags: []string{"A", "B"}, SubVersion: 5}}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := DecodeHeartbeatData([]byte(tc.body))
			if err != nil || !reflect.DeepEqual(data, tc.data) {
				t.Fatalf("DecodeHeartbeatData = %+v, %v\nwant %+v", data, err, tc.data)
			}
			hb, err := DecodeHeartbeat([]byte(tc.body))
			if err != nil || !reflect.DeepEqual(hb, tc.want) {
				t.Fatalf("DecodeHeartbeat = %+v, %v\nwant %+v", hb, err, tc.want)
			}
			back, err := DecodeHeartbeat(EncodeHeartbeat(hb))
			if err != nil || !reflect.DeepEqual(back, hb) {
				t.Fatalf("round trip = %+v, %v", back, err)
			}
		})
	}
}

func TestEncodeHeartbeatGolden(t *testing.T) {
	hb := mq.Heartbeat{ClientID: "10.0.0.1@7", Producers: []string{"pg"}, Consumers: []mq.ConsumerData{{
		Group: "cg", Model: mq.Broadcasting, ConsumeType: mq.ConsumeActively, FromWhere: "CONSUME_FROM_LAST_OFFSET",
		Subscriptions: []mq.Subscription{{Topic: "T", Expression: "A || B", SubVersion: 1}, {Topic: "U"}},
	}}}
	want := `{"clientID":"10.0.0.1@7","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"cg",` +
		`"consumeType":"CONSUME_ACTIVELY","messageModel":"BROADCASTING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","unitMode":false,` +
		`"subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"A || B","tagsSet":["A","B"],"codeSet":[65,66],"subVersion":1,"expressionType":"TAG"},` +
		`{"classFilterMode":false,"topic":"U","subString":"*","tagsSet":[],"codeSet":[],"subVersion":0,"expressionType":"TAG"}]}]}`
	if got := string(EncodeHeartbeat(hb)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := string(EncodeHeartbeat(mq.Heartbeat{ClientID: "c"})); got != `{"clientID":"c","producerDataSet":[],"consumerDataSet":[]}` {
		t.Fatalf("empty: %s", got)
	}
}

func TestDecodeHeartbeatMalformed(t *testing.T) {
	tests := []struct{ name, body, field string }{
		{"not an object", `[]`, "not a JSON object"},
		{"bad JSON", `{"clientID":`, "heartbeat"},
		{"no clientID", `{"producerDataSet":[]}`, "clientID"},
		{"empty clientID", `{"clientID":""}`, "clientID"},
		{"producer without group", `{"clientID":"c","producerDataSet":[{}]}`, "producerDataSet[0]"},
		{"consumer without group", `{"clientID":"c","consumerDataSet":[{"groupName":"g"},{}]}`, "consumerDataSet[1]"},
		{"unknown consume type", `{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":"PUSH"}]}`, "consumerDataSet[0].consumeType"},
		{"consume type an object", `{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":{}}]}`, "consumeType"},
		{"unknown model", `{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"ALL"}]}`, "messageModel"},
		{"subscription without topic", `{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"subString":"*"}]}]}`, "subscriptionDataSet[0] has no topic"},
		{"bad subVersion", `{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","subVersion":1.5}]}]}`, "subVersion"},
		{"tags not strings", `{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","tagsSet":[1]}]}]}`, "heartbeat"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hb, err := DecodeHeartbeat([]byte(tc.body))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %+v, %v; want ErrMalformed", hb, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestJavaStringHash(t *testing.T) {
	// Values of Java's String.hashCode.
	for s, want := range map[string]int32{"": 0, "A": 65, "hello": 99162322, "TagA": 2598919,
		"polygenelubricants": -2147483648, "é": 233, "😀": 1772899} {
		if got := JavaStringHash(s); got != want {
			t.Errorf("%q: got %d, want %d", s, got, want)
		}
	}
}

func TestLockBodies(t *testing.T) {
	req := LockRequest{ConsumerGroup: "cg", ClientID: "10.0.0.1@1", OnlyThisBroker: true, Queues: []mq.MessageQueue{
		{Topic: "T", BrokerName: "broker-a", QueueID: 0}, {Topic: "T", BrokerName: "broker-a", QueueID: 3}}}
	want := `{"consumerGroup":"cg","clientId":"10.0.0.1@1","onlyThisBroker":true,"mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":3}]}`
	if got := string(EncodeLockRequest(req)); got != want {
		t.Fatalf("EncodeLockRequest:\n got %s\nwant %s", got, want)
	}
	if got, err := DecodeLockRequest([]byte(want)); err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("DecodeLockRequest = %+v, %v", got, err)
	}
	// As the Go client writes it (consumer.go lockBatchRequestBody: no onlyThisBroker), and
	// Java's fastjson (fields sorted).
	for _, body := range []string{
		`{"consumerGroup":"cg","clientId":"10.0.0.1@1","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":3}]}`,
		`{"clientId":"10.0.0.1@1","consumerGroup":"cg","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"},{"brokerName":"broker-a","queueId":3,"topic":"T"}],"onlyThisBroker":false}`,
	} {
		r := req
		r.OnlyThisBroker = false
		if got, err := DecodeLockRequest([]byte(body)); err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: %+v, %v", body, got, err)
		}
	}
	reply := `{"lockOKMQSet":[{"topic":"T","brokerName":"broker-a","queueId":3}]}`
	if got := string(EncodeLockReply(req.Queues[1:])); got != reply {
		t.Fatalf("EncodeLockReply = %s", got)
	}
	if got, err := DecodeLockReply([]byte(reply)); err != nil || !reflect.DeepEqual(got, req.Queues[1:]) {
		t.Fatalf("DecodeLockReply = %+v, %v", got, err)
	}
	if got := string(EncodeLockReply(nil)); got != `{"lockOKMQSet":[]}` {
		t.Fatalf("empty reply %s", got)
	}
	if got, err := DecodeLockReply([]byte(`{"lockOKMQSet":[]}`)); err != nil || got != nil {
		t.Fatalf("empty reply: %v, %v", got, err)
	}
	for _, body := range []string{`[]`, `{"consumerGroup":"g"}`, `{"clientId":"c"}`, `{"consumerGroup":"g","clientId":"c","mqSet":[{"queueId":"1"}]}`, `{"consumerGroup":1}`} {
		if got, err := DecodeLockRequest([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", body, got, err)
		}
	}
	for _, body := range []string{`null`, `{"lockOKMQSet":{}}`, `{"lockOKMQSet":[{"queueId":2147483648}]}`} {
		if got, err := DecodeLockReply([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %+v, %v; want ErrMalformed", body, got, err)
		}
	}
}

func TestConsumerList(t *testing.T) {
	ids := []string{"10.0.0.1@1", "10.0.0.2@2#99"}
	want := `{"consumerIdList":["10.0.0.1@1","10.0.0.2@2#99"]}`
	if got := string(EncodeConsumerList(ids)); got != want {
		t.Fatalf("got %s", got)
	}
	if got, err := DecodeConsumerList([]byte(want)); err != nil || !reflect.DeepEqual(got, ids) {
		t.Fatalf("DecodeConsumerList = %v, %v", got, err)
	}
	if got := string(EncodeConsumerList(nil)); got != `{"consumerIdList":[]}` {
		t.Fatalf("empty: %s", got)
	}
	for _, body := range []string{``, `null`, `"x"`, `{"consumerIdList":"x"}`, `{"consumerIdList":[1]}`} {
		if got, err := DecodeConsumerList([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, %v; want ErrMalformed", body, got, err)
		}
	}
}
