package server

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestSendAndPull: single sends (V1 and V2 headers, compressed or not) and a batch are
// stored with their tags, keys, properties, born time and born host, and a pull returns
// them as V1 records with the four offset fields.
func TestSendAndPull(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())

	r := c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, "TAGS\x01tg\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02"), []byte("one"))
	if r.Ext["queueId"] != "0" || r.Ext["queueOffset"] != "0" || len(r.Ext["msgId"]) != 32 || r.Ext["MSG_REGION"] != msgRegion || r.Ext["TRACE_ON"] != "true" {
		t.Fatalf("send reply ext %v", r.Ext)
	}
	v1 := map[string]string{"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "1", "bornTimestamp": "1700000000001", "flag": "7", "properties": "TAGS\x01big\x02", "reconsumeTimes": "0"}
	big := bytes.Repeat([]byte("z"), 8000)
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	zw.Write(big)
	zw.Close()
	r = c.mustCall(remoting.Success, remoting.SendMessage, v1, zb.Bytes())
	if r.Ext["queueOffset"] != "1" {
		t.Fatalf("compressed send: queueOffset %q, want 1", r.Ext["queueOffset"])
	}
	batch := appendBatchItem(nil, "b1", "TAGS\x01tg\x02")
	batch = appendBatchItem(batch, "b2", "TAGS\x01other\x02")
	ext := sendExt("T", 0, "")
	ext["m"] = "true"
	r = c.mustCall(remoting.Success, remoting.SendBatchMessage, ext, batch)
	if ids := strings.Split(r.Ext["msgId"], ","); len(ids) != 2 || r.Ext["queueOffset"] != "2" {
		t.Fatalf("batch reply %v: want two ids, queueOffset 2", r.Ext)
	}

	r = c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil)
	if r.Ext["nextBeginOffset"] != "4" || r.Ext["minOffset"] != "0" || r.Ext["maxOffset"] != "4" || r.Ext["suggestWhichBrokerId"] != "0" {
		t.Fatalf("pull ext %v", r.Ext)
	}
	recs := decodeRecords(t, r.Body)
	if len(recs) != 4 {
		t.Fatalf("pulled %d records, want 4", len(recs))
	}
	want := []struct {
		body, tags string
		born       int64
	}{{"one", "tg", 1700000000000}, {string(big), "big", 1700000000001}, {"b1", "tg", 1700000000000}, {"b2", "other", 1700000000000}}
	local := c.nc.LocalAddr().String()
	for i, w := range want {
		rec := recs[i]
		if rec.body != w.body || rec.props["TAGS"] != w.tags || rec.bornTime != w.born || rec.bornHost != local || rec.queueOffset != int64(i) || rec.topic != "T" {
			t.Errorf("record %d: %q tags %q born %d at %s offset %d topic %s; want %.10q %q %d %s %d T", i, rec.body[:min(10, len(rec.body))],
				rec.props["TAGS"], rec.bornTime, rec.bornHost, rec.queueOffset, rec.topic, w.body, w.tags, w.born, local, i)
		}
	}
	if recs[0].props["KEYS"] != "k1" || recs[0].props["UNIQ_KEY"] != "U1" {
		t.Errorf("record 0 properties %v", recs[0].props)
	}
	// A TAG subscription filters; the next pull at the end finds nothing.
	r = c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "tg"), nil)
	if recs := decodeRecords(t, r.Body); len(recs) != 2 {
		t.Errorf("pull of tg: %d records, want 2", len(recs))
	}
	c.mustCall(remoting.PullNotFound, remoting.PullMessage, pullHeader("g", "T", 0, 4, pullSubscription, 0, "*"), nil)
	c.mustCall(remoting.PullOffsetMoved, remoting.PullMessage, pullHeader("g", "T", 0, 9, pullSubscription, 0, "*"), nil)
	// A delayed message's reply names the queue it will be delivered to.
	r = c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 2, "DELAY\x012\x02"), []byte("later"))
	if r.Ext["queueId"] != "2" {
		t.Errorf("delayed send: queueId %s, want 2", r.Ext["queueId"])
	}
	// Lite pull is the same request.
	c.mustCall(remoting.Success, remoting.LitePullMessage, pullHeader("g", "T", 0, 3, pullSubscription|16, 0, "*"), nil)
}

// appendBatchItem appends one item of a SEND_BATCH_MESSAGE body.
func appendBatchItem(dst []byte, body, props string) []byte {
	be := binary.BigEndian
	size := 20 + len(body) + 2 + len(props)
	dst = be.AppendUint32(dst, uint32(size))
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, 0)
	dst = be.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, body...)
	dst = be.AppendUint16(dst, uint16(len(props)))
	return append(dst, props...)
}

// TestSendErrors: the broker's refusals become RocketMQ's codes.
func TestSendErrors(t *testing.T) {
	b := openBroker(t, &edge.Options{NoAutoCreateTopics: true})
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(edge.TopicConfig{Name: "RO", Perm: mq.PermRead}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	for _, tc := range []struct {
		name string
		ext  map[string]string
		body []byte
		want int16
	}{
		{"unknown topic", sendExt("Nope", -1, ""), []byte("x"), remoting.TopicNotExist},
		{"read-only topic", sendExt("RO", -1, ""), []byte("x"), remoting.NoPermission},
		{"queue out of range", sendExt("T", 5, ""), []byte("x"), remoting.InvalidParameter},
		{"bad topic name", sendExt("a/b", -1, ""), []byte("x"), remoting.InvalidParameter},
		{"too large", sendExt("T", -1, ""), make([]byte, testMaxMessage+1), remoting.MessageIllegal},
		{"no topic field", map[string]string{"a": "pg"}, []byte("x"), remoting.InvalidParameter},
		{"bad queue number", map[string]string{"b": "T", "e": "x"}, []byte("x"), remoting.InvalidParameter},
		{"not zlib", func() map[string]string { e := sendExt("T", 0, ""); e["f"] = "1"; return e }(), []byte("plain"), remoting.MessageIllegal},
		{"zstd-compressed", func() map[string]string { e := sendExt("T", 0, ""); e["f"] = strconv.Itoa(1 | 2<<8); return e }(), []byte("x"), remoting.MessageIllegal},
		{"half message without a producer group", func() map[string]string { e := sendExt("T", 0, ""); e["a"] = ""; e["f"] = "4"; return e }(), []byte("x"), remoting.InvalidParameter},
	} {
		if r := c.call(remoting.SendMessageV2, tc.ext, tc.body); r.Code != tc.want {
			t.Errorf("%s: code %d %q, want %d", tc.name, r.Code, r.Remark, tc.want)
		}
	}
	// A body that inflates past the broker's maximum is refused before it is stored.
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	zw.Write(make([]byte, testMaxMessage+1))
	zw.Close()
	e := sendExt("T", 0, "")
	e["f"] = "1"
	c.mustCall(remoting.MessageIllegal, remoting.SendMessageV2, e, zb.Bytes())
	if n, _ := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: "T", QueueID: 0}); n != 0 {
		t.Errorf("refused sends stored %d messages", n)
	}
	ext := sendExt("T", 0, "")
	c.mustCall(remoting.MessageIllegal, remoting.SendBatchMessage, ext, []byte{0, 0, 0, 9, 1})
	ext["f"] = "4" // a batch of half messages
	c.mustCall(remoting.MessageIllegal, remoting.SendBatchMessage, ext, mustBatch(t, &mq.Message{Topic: "T", Body: []byte("x")}))
}

// TestPullErrors: a pull of an unknown topic, at a negative offset, of a queue out of
// range, or without a subscription gets the broker's answer as a code, and the connection
// goes on.
func TestPullErrors(t *testing.T) {
	b := openBrokerT(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	for _, tc := range []struct {
		name string
		ext  map[string]string
		want int16
	}{
		{"unknown topic", pullHeader("g", "Nope", 0, 0, pullSubscription, 0, "*"), remoting.TopicNotExist},
		{"negative offset", pullHeader("g", "T", 0, -1, pullSubscription, 0, "*"), remoting.InvalidParameter},
		{"queue out of range", pullHeader("g", "T", 3, 0, pullSubscription, 0, "*"), remoting.InvalidParameter},
		{"no subscription", pullHeader("g", "T", 0, 0, 0, 0, ""), remoting.SubscriptionNotExist},
		{"bad group", pullHeader("a b", "T", 0, 0, pullSubscription, 0, "*"), remoting.InvalidParameter},
		{"SQL92", func() map[string]string {
			e := pullHeader("g", "T", 0, 0, pullSubscription, 0, "a > 1")
			e["expressionType"] = "SQL92"
			return e
		}(), remoting.SystemError},
		{"missing offset", map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0"}, remoting.InvalidParameter},
	} {
		if r := c.call(remoting.PullMessage, tc.ext, nil); r.Code != tc.want {
			t.Errorf("%s: code %d %q, want %d", tc.name, r.Code, r.Remark, tc.want)
		}
	}
	c.mustCall(remoting.PullNotFound, remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil)
}

// TestOffsetsAndGroups: heartbeat, consumer list, offsets, max/min/search offsets, locks,
// unregister, send-back, each a round trip.
func TestOffsetsAndGroups(t *testing.T) {
	b := openBroker(t, &edge.Options{NewQueueWindow: -1})
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	for i := range 3 {
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 1, ""), []byte("m"+strconv.Itoa(i)))
	}
	hb := c.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*"))
	if hb.Version < 401 {
		t.Errorf("heartbeat reply version %d, want >= 401", hb.Version)
	}
	r := c.mustCall(remoting.Success, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil)
	var list struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.ConsumerIDList) != 1 || list.ConsumerIDList[0] != "c1" {
		t.Fatalf("consumer list %s: %v", r.Body, err)
	}
	c.mustCall(remoting.SystemError, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "nobody"}, nil)

	q := map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "1"}
	c.mustCall(remoting.QueryNotFound, remoting.QueryConsumerOffset, q, nil)
	c.mustCall(remoting.Success, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "1", "commitOffset": "2"}, nil)
	if r := c.mustCall(remoting.Success, remoting.QueryConsumerOffset, q, nil); r.Ext["offset"] != "2" {
		t.Errorf("query offset %q, want 2", r.Ext["offset"])
	}
	// A pull without the subscription bit filters by the heartbeat's subscription.
	if r := c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "T", 1, 0, 0, 0, ""), nil); len(decodeRecords(t, r.Body)) != 3 {
		t.Error("pull by heartbeat subscription")
	}
	// The commit-offset bit stores the offset.
	c.mustCall(remoting.Success, remoting.PullMessage, func() map[string]string {
		e := pullHeader("g", "T", 1, 1, pullCommitOffset, 0, "")
		e["commitOffset"] = "3"
		return e
	}(), nil)
	if r := c.mustCall(remoting.Success, remoting.QueryConsumerOffset, q, nil); r.Ext["offset"] != "3" {
		t.Errorf("offset after a pull's commit %q, want 3", r.Ext["offset"])
	}
	tq := map[string]string{"topic": "T", "queueId": "1"}
	if r := c.mustCall(remoting.Success, remoting.GetMaxOffset, tq, nil); r.Ext["offset"] != "3" {
		t.Errorf("max offset %q, want 3", r.Ext["offset"])
	}
	if r := c.mustCall(remoting.Success, remoting.GetMinOffset, tq, nil); r.Ext["offset"] != "0" {
		t.Errorf("min offset %q, want 0", r.Ext["offset"])
	}
	if r := c.mustCall(remoting.Success, remoting.SearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "1", "timestamp": "0"}, nil); r.Ext["offset"] != "0" {
		t.Errorf("search offset at 0: %q, want 0", r.Ext["offset"])
	}
	c.mustCall(remoting.TopicNotExist, remoting.GetMaxOffset, map[string]string{"topic": "Nope", "queueId": "0"}, nil)
	c.mustCall(remoting.InvalidParameter, remoting.GetMinOffset, map[string]string{"topic": "T", "queueId": "99"}, nil)

	// Locks: granted to the first client only; unlock frees them.
	lock := func(client string) []byte {
		return []byte(`{"consumerGroup":"g","clientId":"` + client + `","onlyThisBroker":true,"mqSet":[{"topic":"T","brokerName":"edgemq","queueId":0},{"topic":"T","brokerName":"edgemq","queueId":1}]}`)
	}
	locked := func(r *remoting.Command) int {
		t.Helper()
		qs, err := remoting.DecodeLockReply(r.Body)
		if err != nil {
			t.Fatalf("lock reply %s: %v", r.Body, err)
		}
		for _, q := range qs {
			if q.BrokerName != "edgemq" || q.Topic != "T" {
				t.Errorf("lock reply queue %v", q)
			}
		}
		return len(qs)
	}
	if n := locked(c.mustCall(remoting.Success, remoting.LockBatchMQ, nil, lock("c1"))); n != 2 {
		t.Fatalf("c1 locked %d queues, want 2", n)
	}
	if n := locked(c.mustCall(remoting.Success, remoting.LockBatchMQ, nil, lock("c2"))); n != 0 {
		t.Fatalf("c2 locked %d queues, want 0", n)
	}
	c.mustCall(remoting.Success, remoting.UnlockBatchMQ, nil, lock("c1"))
	if n := locked(c.mustCall(remoting.Success, remoting.LockBatchMQ, nil, lock("c2"))); n != 2 {
		t.Fatalf("c2 locked %d queues after c1 unlocked, want 2", n)
	}
	c.mustCall(remoting.InvalidParameter, remoting.LockBatchMQ, nil, []byte("{"))

	// Send-back: the message at a commit-log offset goes to %RETRY%g.
	pr := c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "T", 1, 0, pullSubscription, 0, "*"), nil)
	rec := decodeRecords(t, pr.Body)[0]
	c.mustCall(remoting.Success, remoting.ConsumerSendMsgBack, map[string]string{"group": "g", "offset": strconv.FormatInt(rec.commitLog, 10),
		"delayLevel": "-1", "originMsgId": "X", "originTopic": "T", "maxReconsumeTimes": "16", "unitMode": "false"}, nil)
	if n, _ := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: mq.DLQTopic("g")}); n != 1 {
		t.Errorf("DLQ holds %d messages after a send-back at level -1, want 1", n)
	}
	c.mustCall(remoting.SystemError, remoting.ConsumerSendMsgBack, map[string]string{"group": "g", "offset": "99999999", "delayLevel": "0"}, nil)

	c.mustCall(remoting.Success, remoting.UnregisterClient, map[string]string{"clientID": "c1", "consumerGroup": "g"}, nil)
	c.mustCall(remoting.SystemError, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil)
	c.mustCall(remoting.InvalidParameter, remoting.HeartBeat, nil, []byte("not json"))
}

// TestRoutes: the name-server side: a topic's route points at the address the client
// reached; %RETRY% and TBW102 have routes; an unknown topic is TOPIC_NOT_EXIST.
func TestRoutes(t *testing.T) {
	b := openBroker(t, nil)
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 3}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, b, Options{ClusterName: "C"})
	c := dial(t, s.Addr())
	r := c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	want := `{"orderTopicConf":"","queueDatas":[{"brokerName":"edgemq","readQueueNums":2,"writeQueueNums":3,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"C","brokerName":"edgemq","brokerAddrs":{"0":"` + s.Addr().String() + `"}}],"filterServerTable":{}}`
	if string(r.Body) != want {
		t.Errorf("route\n got %s\nwant %s", r.Body, want)
	}
	c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
	r = c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
	if !strings.Contains(string(r.Body), `"perm":7`) {
		t.Errorf("TBW102 route %s: want perm 7", r.Body)
	}
	c.mustCall(remoting.TopicNotExist, remoting.GetRouteInfoByTopic, map[string]string{"topic": "Nope"}, nil)
	c.mustCall(remoting.TopicNotExist, remoting.GetRouteInfoByTopic, map[string]string{"topic": "bad name"}, nil)
	c.mustCall(remoting.InvalidParameter, remoting.GetRouteInfoByTopic, nil, nil)

	adv := startServer(t, b, Options{Advertise: "10.0.0.5:10911"})
	r = dial(t, adv.Addr()).mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if !strings.Contains(string(r.Body), `"brokerAddrs":{"0":"10.0.0.5:10911"}`) {
		t.Errorf("advertised route %s", r.Body)
	}
}

// TestUnknownCode: a code the server does not serve gets REQUEST_CODE_NOT_SUPPORTED and
// the connection still works; a oneway request gets no reply.
func TestUnknownCode(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	r := c.mustCall(remoting.RequestCodeNotSupported, 9999, nil, nil)
	if !strings.Contains(r.Remark, "9999") {
		t.Errorf("remark %q does not name the code", r.Remark)
	}
	ow := remoting.NewRequest(9998, nil, nil)
	ow.Flag = remoting.FlagOneway
	ch := c.write(ow)
	c.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*"))
	select {
	case r := <-ch:
		t.Errorf("a oneway request got reply %d", r.Code)
	default:
	}
}

// TestReplyInRequestEncoding: a request in RocketMQ's binary header encoding is answered
// in it.
func TestReplyInRequestEncoding(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	req := remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "%RETRY%g", "queueId": "0"}, nil)
	req.Serialize = remoting.RocketMQ
	c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
	r := c.wait(c.write(req))
	if r.Code != remoting.Success || r.Serialize != remoting.RocketMQ || r.Ext["offset"] != "0" {
		t.Errorf("reply code %d, encoding %v, ext %v; want 0 in ROCKETMQ with offset 0", r.Code, r.Serialize, r.Ext)
	}
}

// mustBatch is the body of a batch send of msgs.
func mustBatch(t *testing.T, msgs ...*mq.Message) []byte {
	t.Helper()
	body, err := remoting.AppendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestEndPullStreamRequest: END_PULL_STREAM for an opaque that names no streamed pull of
// the connection changes nothing and is answered SUCCESS (a stream may end as its client
// ends it); without its field it is answered INVALID_PARAMETER.
func TestEndPullStreamRequest(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	c.mustCall(remoting.Success, remoting.EndPullStream, remoting.EndPullStreamHeader{Opaque: 12345}.Ext(), nil)
	r := c.mustCall(remoting.InvalidParameter, remoting.EndPullStream, map[string]string{"opaque": "1"}, nil)
	if !strings.Contains(r.Remark, "edgemqStream") {
		t.Errorf("remark %q does not name the missing field", r.Remark)
	}
	if n := s.Stats().StreamsEnded; n != 0 {
		t.Errorf("StreamsEnded = %d, want 0", n)
	}
}
