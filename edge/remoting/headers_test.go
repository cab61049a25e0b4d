package remoting

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// extHeader is what every header type has.
type extHeader interface{ Ext() map[string]string }

// parser wraps a ParseXxx function.
func parser[H extHeader](parse func(map[string]string) (H, error)) func(map[string]string) (extHeader, error) {
	return func(ext map[string]string) (extHeader, error) { return parse(ext) }
}

func parseSend(code int16) func(map[string]string) (extHeader, error) {
	return func(ext map[string]string) (extHeader, error) { return ParseSendHeader(code, ext) }
}

// Headers as rocketmq-client-go's internal/request.go Encode methods write them (sample
// values), and as Java's *RequestHeader classes name their fields.
var (
	goSendV1 = map[string]string{
		"producerGroup": "pg", "topic": "TopicTest", "queueId": "3", "sysFlag": "1", "bornTimestamp": "1700000000123",
		"flag": "-7", "reconsumeTimes": "2", "unitMode": "false", "maxReconsumeTimes": "16", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "batch": "false", "properties": "TAGS\x01a\x02", "bname": "broker-a",
	}
	goSendV2 = map[string]string{
		"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "1", "g": "1700000000123", "h": "-7",
		"i": "TAGS\x01a\x02", "j": "2", "k": "false", "l": "16", "m": "false", "n": "broker-a",
	}
	wantSend = SendHeader{
		ProducerGroup: "pg", Topic: "TopicTest", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3, SysFlag: 1,
		BornTimestamp: 1700000000123, Flag: -7, Properties: "TAGS\x01a\x02", ReconsumeTimes: 2, MaxReconsumeTimes: 16,
		BrokerName: "broker-a",
	}
	goPull = map[string]string{
		"consumerGroup": "cg", "topic": "T", "queueId": "1", "queueOffset": "42", "maxMsgNums": "32", "sysFlag": "3",
		"commitOffset": "40", "suspendTimeoutMillis": "20000", "subscription": "A || B", "subVersion": "1700000000000000000",
		"expressionType": "TAG", "bname": "broker-a",
	}
	wantPull = PullHeader{
		ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 42, MaxMsgNums: 32, SysFlag: PullCommitOffset | PullSuspend,
		CommitOffset: 40, SuspendTimeoutMillis: 20000, Subscription: "A || B", SubVersion: 1700000000000000000,
		ExpressionType: "TAG", BrokerName: "broker-a",
	}
)

// without returns ext without key.
func without(ext map[string]string, key string) map[string]string {
	m := maps.Clone(ext)
	delete(m, key)
	return m
}

// with returns ext with key set.
func with(ext map[string]string, key, v string) map[string]string {
	m := maps.Clone(ext)
	m[key] = v
	return m
}

func TestHeaders(t *testing.T) {
	batch := wantSend
	batch.Batch, batch.UnitMode = true, true
	noMax := wantSend
	noMax.MaxReconsumeTimes = -1
	noOptional := SendHeader{ProducerGroup: "pg", Topic: "TopicTest", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 3, SysFlag: 1, BornTimestamp: 1700000000123, Flag: -7, MaxReconsumeTimes: -1}
	v2Min := map[string]string{"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "1", "g": "1700000000123", "h": "-7"}

	tests := []struct {
		name  string
		parse func(map[string]string) (extHeader, error)
		ext   map[string]string
		want  extHeader
		// exact: Ext() of want gives ext back exactly.
		exact bool
	}{
		{"send v1 as Go writes it", parseSend(SendMessage), goSendV1, wantSend, true},
		{"send v2 as Go writes it", parseSend(SendMessageV2), goSendV2, wantSend, false},
		{"batch v2", parseSend(SendBatchMessage), with(with(goSendV2, "m", "true"), "k", "TRUE"), batch, false},
		{"send v2 code with a v1 header", parseSend(SendMessageV2), goSendV1, wantSend, false},
		{"send v1 code with a v2 header", parseSend(SendMessage), goSendV2, wantSend, false},
		{"send v2 bname for n", parseSend(SendMessageV2), with(without(goSendV2, "n"), "bname", "broker-a"), wantSend, false},
		{"send without maxReconsumeTimes", parseSend(SendMessage), without(goSendV1, "maxReconsumeTimes"), noMax, true},
		{"send v2 required only", parseSend(SendBatchMessage), v2Min, noOptional, false},
		{"send reply", parser(ParseSendResponseHeader),
			map[string]string{"msgId": "0A00000500002A9F0000000000000000", "queueId": "2", "queueOffset": "9", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
			SendResponseHeader{MsgID: "0A00000500002A9F0000000000000000", QueueID: 2, QueueOffset: 9, Region: "DefaultRegion", TraceOn: true}, true},
		{"send reply, region default", parser(ParseSendResponseHeader),
			map[string]string{"msgId": "a,b", "queueId": "0", "queueOffset": "0", "transactionId": "tx"},
			SendResponseHeader{MsgID: "a,b", TransactionID: "tx"}, false},
		{"pull as Go writes it", parser(ParsePullHeader), goPull, wantPull, true},
		{"pull, Java optional fields", parser(ParsePullHeader), with(without(without(without(goPull, "subscription"), "expressionType"), "bname"), "maxMsgBytes", "1024"),
			PullHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 42, MaxMsgNums: 32, SysFlag: 3, CommitOffset: 40,
				SuspendTimeoutMillis: 20000, SubVersion: 1700000000000000000, MaxMsgBytes: 1024}, true},
		{"pull reply", parser(ParsePullResponseHeader),
			map[string]string{"suggestWhichBrokerId": "0", "nextBeginOffset": "43", "minOffset": "0", "maxOffset": "100"},
			PullResponseHeader{NextBeginOffset: 43, MaxOffset: 100}, true},
		{"pull, EdgeMQ's stream budget", parser(ParsePullHeader), with(with(goPull, "edgemqPushMsgs", "968"), "edgemqPushBytes", "104857600"),
			func() PullHeader { h := wantPull; h.PushMsgs, h.PushBytes = 968, 100<<20; return h }(), true},
		{"pull reply, more to come", parser(ParsePullResponseHeader),
			map[string]string{"suggestWhichBrokerId": "0", "nextBeginOffset": "43", "minOffset": "0", "maxOffset": "100", "edgemqMore": "1"},
			PullResponseHeader{NextBeginOffset: 43, MaxOffset: 100, More: true}, true},
		{"query offset as Go writes it", parser(ParseQueryOffsetHeader),
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "0", "bname": "b"},
			QueryOffsetHeader{ConsumerGroup: "cg", Topic: "T", SetZeroIfNotFound: true, BrokerName: "b"}, false},
		{"query offset, setZeroIfNotFound false", parser(ParseQueryOffsetHeader),
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "7", "setZeroIfNotFound": "false"},
			QueryOffsetHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 7}, true},
		{"update offset as Go writes it", parser(ParseUpdateOffsetHeader),
			map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "1", "commitOffset": "99", "bname": "b"},
			UpdateOffsetHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, CommitOffset: 99, BrokerName: "b"}, true},
		{"offset reply", parser(ParseOffsetResponseHeader), map[string]string{"offset": "-1"}, OffsetResponseHeader{Offset: -1}, true},
		{"send back as Go writes it", parser(ParseSendBackHeader),
			map[string]string{"group": "cg", "offset": "1234", "delayLevel": "-1", "originMsgId": "ID", "originTopic": "T",
				"unitMode": "false", "maxReconsumeTimes": "16", "bname": "b"},
			SendBackHeader{Offset: 1234, Group: "cg", DelayLevel: -1, OriginMsgID: "ID", OriginTopic: "T", MaxReconsumeTimes: 16, BrokerName: "b"}, true},
		{"send back, required only", parser(ParseSendBackHeader),
			map[string]string{"group": "cg", "offset": "1234", "delayLevel": "0"},
			SendBackHeader{Offset: 1234, Group: "cg", MaxReconsumeTimes: -1}, false},
		{"search offset as Go writes it", parser(ParseSearchOffsetHeader),
			map[string]string{"topic": "T", "queueId": "2", "timestamp": "1700000000000", "bname": "b"},
			SearchOffsetHeader{Topic: "T", QueueID: 2, Timestamp: 1700000000000, BrokerName: "b"}, true},
		{"search offset, boundary", parser(ParseSearchOffsetHeader),
			map[string]string{"topic": "T", "queueId": "2", "timestamp": "0", "boundaryType": "upper"},
			SearchOffsetHeader{Topic: "T", QueueID: 2, BoundaryType: "upper"}, true},
		{"get max offset as Go writes it", parser(ParseGetOffsetHeader),
			map[string]string{"topic": "T", "queueId": "2", "bname": "b"}, GetOffsetHeader{Topic: "T", QueueID: 2, BrokerName: "b"}, true},
		{"consumer list", parser(ParseConsumerListHeader), map[string]string{"consumerGroup": "cg"}, ConsumerListHeader{ConsumerGroup: "cg"}, true},
		{"end pull stream", parser(ParseEndPullStreamHeader), map[string]string{"edgemqStream": "-7"}, EndPullStreamHeader{Opaque: -7}, true},
		{"unregister as Java writes it", parser(ParseUnregisterHeader),
			map[string]string{"clientID": "10.0.0.1@123#456", "producerGroup": "pg", "consumerGroup": "cg"},
			UnregisterHeader{ClientID: "10.0.0.1@123#456", ProducerGroup: "pg", ConsumerGroup: "cg"}, true},
		{"unregister consumer only", parser(ParseUnregisterHeader),
			map[string]string{"clientID": "c", "consumerGroup": "cg"}, UnregisterHeader{ClientID: "c", ConsumerGroup: "cg"}, true},
		{"create topic as Go writes it", parser(ParseCreateTopicHeader),
			map[string]string{"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
				"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"},
			CreateTopicHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG"}, true},
		{"create topic, Java attributes", parser(ParseCreateTopicHeader),
			map[string]string{"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "2", "perm": "7",
				"topicFilterType": "MULTI_TAG", "topicSysFlag": "1", "order": "true", "attributes": "+message.type=NORMAL", "force": "false"},
			CreateTopicHeader{Topic: "T", DefaultTopic: "TBW102", ReadQueueNums: 1, WriteQueueNums: 2, Perm: 7,
				TopicFilterType: "MULTI_TAG", TopicSysFlag: 1, Order: true, Attributes: "+message.type=NORMAL"}, false},
		{"route", parser(ParseTopicHeader), map[string]string{"topic": "T"}, TopicHeader{Topic: "T"}, true},
		{"delete topic, Java extra fields", parser(ParseTopicHeader), map[string]string{"topic": "T", "lo": "false"}, TopicHeader{Topic: "T"}, false},
		{"view message", parser(ParseViewMessageHeader), map[string]string{"offset": "9876543210"}, ViewMessageHeader{Offset: 9876543210}, true},
		{"view message with topic", parser(ParseViewMessageHeader), map[string]string{"offset": "1", "topic": "T"}, ViewMessageHeader{Offset: 1, Topic: "T"}, true},
		{"query message as Go writes it", parser(ParseQueryMessageHeader),
			map[string]string{"topic": "T", "key": "order-1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9223372036854775807"},
			QueryMessageHeader{Topic: "T", Key: "order-1", MaxNum: 32, EndTimestamp: 9223372036854775807}, true},
		{"query message reply", parser(ParseQueryMessageResponseHeader),
			map[string]string{"indexLastUpdateTimestamp": "5", "indexLastUpdatePhyoffset": "6"},
			QueryMessageResponseHeader{IndexLastUpdateTimestamp: 5, IndexLastUpdatePhyoffset: 6}, true},
		{"reset offset (220)", parser(ParseResetOffsetHeader),
			map[string]string{"topic": "T", "group": "g", "timestamp": "17", "isForce": "true"},
			ResetOffsetHeader{Topic: "T", Group: "g", Timestamp: 17, IsForce: true, QueueID: -1, Offset: -1}, true},
		{"reset offset of a queue (222)", parser(ParseResetOffsetHeader),
			map[string]string{"topic": "T", "group": "g", "timestamp": "0", "isForce": "false", "queueId": "3", "offset": "100"},
			ResetOffsetHeader{Topic: "T", Group: "g", QueueID: 3, Offset: 100}, true},
		{"end transaction as Go writes it", parser(ParseEndTransactionHeader),
			map[string]string{"producerGroup": "pg", "tranStateTableOffset": "3", "commitLogOffset": "400", "commitOrRollback": "8",
				"fromTransactionCheck": "false", "msgId": "M", "transactionId": "X", "bname": "b"},
			EndTransactionHeader{ProducerGroup: "pg", TranStateTableOffset: 3, CommitLogOffset: 400, CommitOrRollback: TransactionCommitType,
				MsgID: "M", TransactionID: "X", BrokerName: "b"}, true},
		{"check transaction state as Java writes it", parser(ParseCheckTransactionStateHeader),
			map[string]string{"topic": "T", "tranStateTableOffset": "3", "commitLogOffset": "400", "msgId": "M", "transactionId": "M",
				"offsetMsgId": "7F00000100002A9F0000000000000190", "bname": "b"},
			CheckTransactionStateHeader{Topic: "T", TranStateTableOffset: 3, CommitLogOffset: 400, MsgID: "M", TransactionID: "M",
				OffsetMsgID: "7F00000100002A9F0000000000000190", BrokerName: "b"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.parse(tc.ext)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			ext := tc.want.Ext()
			if tc.exact && !maps.Equal(ext, tc.ext) {
				t.Fatalf("Ext() = %q, want %q", ext, tc.ext)
			}
			back, err := tc.parse(ext)
			if err != nil || !reflect.DeepEqual(back, tc.want) {
				t.Fatalf("parse(Ext()) = %+v, %v; want %+v", back, err, tc.want)
			}
		})
	}
}

func TestSendHeaderExtV2(t *testing.T) {
	if got := wantSend.ExtV2(); !maps.Equal(got, with(with(goSendV2, "k", "false"), "m", "false")) {
		t.Fatalf("ExtV2() = %q, want %q", got, goSendV2)
	}
	if got := wantSend.Ext(); !maps.Equal(got, goSendV1) {
		t.Fatalf("Ext() = %q, want %q", got, goSendV1)
	}
}

func TestHeadersMalformed(t *testing.T) {
	tests := []struct {
		name  string
		parse func(map[string]string) (extHeader, error)
		ext   map[string]string
		field string
	}{
		{"send v1 no producerGroup", parseSend(SendMessage), without(goSendV1, "producerGroup"), "producerGroup"},
		{"send v1 no defaultTopic", parseSend(SendMessage), without(goSendV1, "defaultTopic"), "defaultTopic"},
		{"send v1 bad queueId", parseSend(SendMessage), with(goSendV1, "queueId", "x"), "queueId"},
		{"send v1 queueId over int32", parseSend(SendMessage), with(goSendV1, "queueId", "2147483648"), "queueId"},
		{"send v1 bad bornTimestamp", parseSend(SendMessage), with(goSendV1, "bornTimestamp", "1.5"), "bornTimestamp"},
		{"send v1 bad reconsumeTimes", parseSend(SendMessage), with(goSendV1, "reconsumeTimes", ""), "reconsumeTimes"},
		{"send v2 no topic", parseSend(SendMessageV2), without(goSendV2, "b"), "header field b"},
		{"send v2 no flag", parseSend(SendBatchMessage), without(goSendV2, "h"), "header field h"},
		{"send v2 bad sysFlag", parseSend(SendMessageV2), with(goSendV2, "f", " 1"), "header field f"},
		{"send v2 bad maxReconsumeTimes", parseSend(SendMessageV2), with(goSendV2, "l", "sixteen"), "header field l"},
		{"send nothing", parseSend(SendMessage), nil, "producerGroup"},
		{"send reply no msgId", parser(ParseSendResponseHeader), map[string]string{"queueId": "0", "queueOffset": "0"}, "msgId"},
		{"send reply bad queueOffset", parser(ParseSendResponseHeader), map[string]string{"msgId": "", "queueId": "0", "queueOffset": "-"}, "queueOffset"},
		{"pull no subVersion", parser(ParsePullHeader), without(goPull, "subVersion"), "subVersion"},
		{"pull no suspendTimeoutMillis", parser(ParsePullHeader), without(goPull, "suspendTimeoutMillis"), "suspendTimeoutMillis"},
		{"pull bad queueOffset", parser(ParsePullHeader), with(goPull, "queueOffset", "9223372036854775808"), "queueOffset"},
		{"pull bad maxMsgBytes", parser(ParsePullHeader), with(goPull, "maxMsgBytes", "x"), "maxMsgBytes"},
		{"pull reply no maxOffset", parser(ParsePullResponseHeader), map[string]string{"suggestWhichBrokerId": "0", "nextBeginOffset": "0", "minOffset": "0"}, "maxOffset"},
		{"query offset no queueId", parser(ParseQueryOffsetHeader), map[string]string{"consumerGroup": "cg", "topic": "T"}, "queueId"},
		{"update offset no commitOffset", parser(ParseUpdateOffsetHeader), map[string]string{"consumerGroup": "cg", "topic": "T", "queueId": "0"}, "commitOffset"},
		{"offset reply empty", parser(ParseOffsetResponseHeader), map[string]string{"offset": ""}, "offset"},
		{"send back no offset", parser(ParseSendBackHeader), map[string]string{"group": "cg", "delayLevel": "0"}, "offset"},
		{"send back no delayLevel", parser(ParseSendBackHeader), map[string]string{"group": "cg", "offset": "0"}, "delayLevel"},
		{"search no timestamp", parser(ParseSearchOffsetHeader), map[string]string{"topic": "T", "queueId": "0"}, "timestamp"},
		{"get offset no topic", parser(ParseGetOffsetHeader), map[string]string{"queueId": "0"}, "topic"},
		{"consumer list no group", parser(ParseConsumerListHeader), map[string]string{"group": "cg"}, "consumerGroup"},
		{"end pull stream no opaque", parser(ParseEndPullStreamHeader), map[string]string{"opaque": "3"}, "edgemqStream"},
		{"end pull stream opaque over int32", parser(ParseEndPullStreamHeader), map[string]string{"edgemqStream": "2147483648"}, "edgemqStream"},
		{"unregister no clientID", parser(ParseUnregisterHeader), map[string]string{"clientId": "c"}, "clientID"},
		{"create topic no perm", parser(ParseCreateTopicHeader), map[string]string{"topic": "T", "defaultTopic": "D", "readQueueNums": "1", "writeQueueNums": "1", "topicFilterType": "SINGLE_TAG"}, "perm"},
		{"create topic no filter type", parser(ParseCreateTopicHeader), map[string]string{"topic": "T", "defaultTopic": "D", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, "topicFilterType"},
		{"create topic bad topicSysFlag", parser(ParseCreateTopicHeader), map[string]string{"topic": "T", "defaultTopic": "D", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "", "topicSysFlag": "x"}, "topicSysFlag"},
		{"route no topic", parser(ParseTopicHeader), map[string]string{}, "topic"},
		{"view no offset", parser(ParseViewMessageHeader), map[string]string{"topic": "T"}, "offset"},
		{"query message no key", parser(ParseQueryMessageHeader), map[string]string{"topic": "T", "maxNum": "1", "beginTimestamp": "0", "endTimestamp": "1"}, "key"},
		{"query message bad maxNum", parser(ParseQueryMessageHeader), map[string]string{"topic": "T", "key": "k", "maxNum": "many", "beginTimestamp": "0", "endTimestamp": "1"}, "maxNum"},
		{"query message reply no phyoffset", parser(ParseQueryMessageResponseHeader), map[string]string{"indexLastUpdateTimestamp": "1"}, "indexLastUpdatePhyoffset"},
		{"reset offset no group", parser(ParseResetOffsetHeader), map[string]string{"topic": "T", "timestamp": "0"}, "group"},
		{"reset offset bad offset", parser(ParseResetOffsetHeader), map[string]string{"topic": "T", "group": "g", "timestamp": "0", "offset": "x"}, "offset"},
		{"end transaction no msgId", parser(ParseEndTransactionHeader), map[string]string{"producerGroup": "pg", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8"}, "msgId"},
		{"check transaction state no commitLogOffset", parser(ParseCheckTransactionStateHeader), map[string]string{"tranStateTableOffset": "0"}, "commitLogOffset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.parse(tc.ext)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %+v, %v; want ErrMalformed", got, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// A send header written straight into a frame encodes as its ExtV2 map does, in both
// header encodings.
func TestSendHeaderV2WriteExt(t *testing.T) {
	full := SendHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3,
		SysFlag: 0x301, BornTimestamp: 1700000000123, Flag: -7, Properties: "UNIQ_KEY\x01abc\x02TAGS\x01t\x02",
		ReconsumeTimes: 2, UnitMode: true, MaxReconsumeTimes: 16, Batch: true, BrokerName: "b1"}
	for _, tc := range []struct {
		name string
		h    SendHeader
	}{
		{"full", full},
		{"zero", SendHeader{MaxReconsumeTimes: -1}},
		{"no max reconsume, no broker", SendHeader{ProducerGroup: "pg", Topic: "T", MaxReconsumeTimes: -1, Properties: "a\x01\"quoted\"\x02"}},
		{"max reconsume 0", SendHeader{Topic: "T", MaxReconsumeTimes: 0, BrokerName: "b"}},
	} {
		for _, ser := range []SerializeType{RocketMQ, JSON} {
			byMap := &Command{Code: SendMessageV2, Language: LanguageGo, Version: Version, Opaque: 9, Ext: tc.h.ExtV2(), Body: []byte("x"), Serialize: ser}
			h := tc.h
			direct := &Command{Code: SendMessageV2, Language: LanguageGo, Version: Version, Opaque: 9, Header: (*sendHeaderV2)(&h), Body: []byte("x"), Serialize: ser}
			want, err := byMap.AppendFrame(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := direct.AppendFrame(nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s, serialize %d: got %q (%v), want %q", tc.name, ser, got, err, want)
			}
		}
	}
}

// A pull header written straight into a frame encodes as its Ext map does, in both header
// encodings.
func TestPullHeaderWriteExt(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    PullHeader
	}{
		{"full", PullHeader{ConsumerGroup: "g", Topic: "T", QueueID: 2, QueueOffset: 1 << 40, MaxMsgNums: 32, SysFlag: 0xf,
			CommitOffset: 77, SuspendTimeoutMillis: 15000, Subscription: "a || b", SubVersion: 5, ExpressionType: "TAG",
			MaxMsgBytes: 1 << 20, BrokerName: "b1"}},
		{"streamed", PullHeader{ConsumerGroup: "g", Topic: "T", MaxMsgNums: 32, SysFlag: 2, SuspendTimeoutMillis: 15000,
			PushMsgs: 968, PushBytes: 100 << 20}},
		{"streamed, no byte budget", PullHeader{ConsumerGroup: "g", Topic: "T", MaxMsgNums: 32, SysFlag: 2, PushMsgs: 1}},
		{"zero", PullHeader{}},
		{"no optional fields", PullHeader{ConsumerGroup: "g\"quoted\"", Topic: "T", MaxMsgNums: 1, CommitOffset: -1}},
	} {
		for _, ser := range []SerializeType{RocketMQ, JSON} {
			byMap := &Command{Code: PullMessage, Language: LanguageGo, Version: Version, Opaque: 3, Ext: tc.h.Ext(), Serialize: ser}
			h := tc.h
			direct := &Command{Code: PullMessage, Language: LanguageGo, Version: Version, Opaque: 3, Header: &h, Serialize: ser}
			want, err := byMap.AppendFrame(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := direct.AppendFrame(nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s, serialize %d: got %q (%v), want %q", tc.name, ser, got, err, want)
			}
		}
	}
}
