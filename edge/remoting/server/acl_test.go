package server

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// testACL is an accounts file: an admin, a producer of topic T, a consumer of T in
// group g, and one with no permission at all.
const testACL = `
[[accounts]]
accessKey = "admin-key"
secretKey = "admin-secret"
admin = true

[[accounts]]
accessKey = "producer"
secretKey = "producer-secret"
defaultTopicPerm = "DENY"
topicPerms = ["T=PUB", "Both=PUB|SUB"]

[[accounts]]
accessKey = "consumer"
secretKey = "consumer-secret"
defaultGroupPerm = "DENY"
topicPerms = ["T=SUB", "Both=SUB|PUB", "Denied=DENY"]
groupPerms = ["g=SUB"]

[[accounts]]
accessKey = "nobody"
secretKey = "nobody-secret"
whiteRemoteAddress = "10.1.2.*"

[[accounts]]
accessKey = "generous"
secretKey = "generous-secret"
defaultTopicPerm = "PUB|SUB"
defaultGroupPerm = "SUB"
topicPerms = ["Closed=DENY"]
groupPerms = ["closed=DENY"]
`

var (
	credAdmin    = remoting.Credentials{AccessKey: "admin-key", SecretKey: "admin-secret"}
	credProducer = remoting.Credentials{AccessKey: "producer", SecretKey: "producer-secret"}
	credConsumer = remoting.Credentials{AccessKey: "consumer", SecretKey: "consumer-secret"}
	credNobody   = remoting.Credentials{AccessKey: "nobody", SecretKey: "nobody-secret"}
	credGenerous = remoting.Credentials{AccessKey: "generous", SecretKey: "generous-secret"}
)

// writeACL writes an accounts file and loads it.
func writeACL(t testing.TB, text string) *ACL {
	t.Helper()
	p := filepath.Join(t.TempDir(), "acl.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := LoadACL(p)
	if err != nil {
		t.Fatalf("LoadACL: %v", err)
	}
	return a
}

// signedReq returns a request signed with cred (unsigned when cred is zero).
func signedReq(cred remoting.Credentials, code int16, ext map[string]string, body []byte) *remoting.Command {
	req := remoting.NewRequest(code, maps.Clone(ext), body)
	if !cred.IsZero() {
		cred.Sign(req)
	}
	return req
}

func TestParseACLErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"short key", "[[accounts]]\naccessKey = \"ab\"\nsecretKey = \"12345678\"\n", "at least 6"},
		{"duplicate", "[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\n[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\n", "twice"},
		{"bad perm", "[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\ndefaultTopicPerm = \"ALL\"\n", "defaultTopicPerm"},
		{"bad resource", "[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\ntopicPerms = [\"T\"]\n", "name=PERM"},
		{"empty resource perm", "[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\ngroupPerms = [\"g=\"]\n", "groupPerms"},
		{"unknown key", "[[accounts]]\naccessKey = \"abcdef\"\nsecretKey = \"12345678\"\nadmn = true\n", "unknown key"},
		{"bad address", "globalWhiteRemoteAddresses = [\"10.1.300.*\"]\n", "0-255"},
		{"not toml", "[[accounts]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseACL(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAddrPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"*", []string{"1.2.3.4", "::1"}, nil},
		{"192.168.1.7", []string{"192.168.1.7"}, []string{"192.168.1.8", "::1"}},
		{"192.168.*", []string{"192.168.0.1", "192.168.255.255"}, []string{"192.169.0.1"}},
		{"192.168.1.1-10", []string{"192.168.1.1", "192.168.1.10"}, []string{"192.168.1.11", "192.168.1.0"}},
		{"10.{1,3}.*.*", []string{"10.1.0.0", "10.3.9.9"}, []string{"10.2.0.0"}},
		{"10.0.0.0/8", []string{"10.200.1.1"}, []string{"11.0.0.1"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1"}},
	} {
		p, err := parseAddrPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		for _, a := range tc.yes {
			if !p.match(net.ParseIP(a)) {
				t.Errorf("%s does not match %s", tc.pattern, a)
			}
		}
		for _, a := range tc.no {
			if p.match(net.ParseIP(a)) {
				t.Errorf("%s matches %s", tc.pattern, a)
			}
		}
	}
	for _, bad := range []string{"", "1.2.3", "1.2.3.4.5", "1.2.3.x", "1.2.3.9-1", "1.2.3.{1,300}", "10.0.0.0/33", "fe80::zz"} {
		if _, err := parseAddrPattern(bad); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

// v1SendExt is a SEND_MESSAGE header (the long form) for topic, queue 0.
func v1SendExt(topic string) map[string]string {
	return map[string]string{"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "", "reconsumeTimes": "0", "unitMode": "false"}
}

// TestACLPermissions: what each account may do, request by request.
func TestACLPermissions(t *testing.T) {
	a := writeACL(t, testACL)
	tab := a.table.Load()
	send := func(topic string) map[string]string { return sendExt(topic, 0, "") }
	pull := func(group, topic string) map[string]string { return pullHeader(group, topic, 0, 0, 0, 0, "*") }
	offset := func(group, topic string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "1"}
	}
	v1 := func(topic string) map[string]string { return v1SendExt(topic) }
	// A header in the other form than its code says is read in that form (ParseSendHeader).
	v1Short := func(topic string) map[string]string { return sendExt(topic, 0, "") }
	query := func(topic string) map[string]string {
		return map[string]string{"topic": topic, "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
	}
	sendBack := func(group string) map[string]string {
		return map[string]string{"group": group, "offset": "0", "delayLevel": "0", "originMsgId": "X", "originTopic": "T"}
	}
	for _, tc := range []struct {
		name string
		cred remoting.Credentials
		host string
		code int16
		ext  map[string]string
		body []byte
		ok   bool
	}{
		{"admin sends anywhere", credAdmin, "", remoting.SendMessageV2, send("X"), []byte("m"), true},
		{"admin creates topics", credAdmin, "", remoting.UpdateAndCreateTopic, map[string]string{"topic": "X"}, nil, true},
		{"producer sends to T", credProducer, "", remoting.SendMessageV2, send("T"), []byte("m"), true},
		{"producer sends V1 to T", credProducer, "", remoting.SendMessage, v1("T"), []byte("m"), true},
		{"producer batch to T", credProducer, "", remoting.SendBatchMessage, send("T"), []byte("m"), true},
		{"producer zstd batch to T", credProducer, "", remoting.SendBatchZstd, send("T"), []byte("m"), true},
		{"producer zstd batch not to X", credProducer, "", remoting.SendBatchZstd, send("X"), []byte("m"), false},
		{"producer not to X", credProducer, "", remoting.SendMessageV2, send("X"), []byte("m"), false},
		{"producer V1 not to X", credProducer, "", remoting.SendMessage, v1("X"), []byte("m"), false},
		{"producer V1 code, short header, not to X", credProducer, "", remoting.SendMessage, v1Short("X"), []byte("m"), false},
		{"producer V2 code, long header, not to X", credProducer, "", remoting.SendMessageV2, v1("X"), []byte("m"), false},
		{"producer V2 code, long header, to T", credProducer, "", remoting.SendMessageV2, v1("T"), []byte("m"), true},
		{"producer does not pull", credProducer, "", remoting.PullMessage, pull("g", "T"), nil, false},
		{"producer cannot create topics", credProducer, "", remoting.UpdateAndCreateTopic, map[string]string{"topic": "X"}, nil, false},
		{"producer cannot reset offsets", credProducer, "", remoting.InvokeBrokerToResetOffset, map[string]string{"topic": "T", "group": "g"}, nil, false},
		{"producer cannot delete", credProducer, "", remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, nil, false},
		{"producer reads max offsets", credProducer, "", remoting.GetMaxOffset, map[string]string{"topic": "X", "queueId": "0"}, nil, true},
		{"producer sends to a retry topic needs SUB on the group", credProducer, "", remoting.SendMessageV2, send("%RETRY%g"), nil, false},
		{"consumer pulls T in g", credConsumer, "", remoting.PullMessage, pull("g", "T"), nil, true},
		{"consumer lite-pulls T in g", credConsumer, "", remoting.LitePullMessage, pull("g", "T"), nil, true},
		{"consumer not in g2", credConsumer, "", remoting.PullMessage, pull("g2", "T"), nil, false},
		{"consumer not of X", credConsumer, "", remoting.PullMessage, pull("g", "X"), nil, false},
		{"consumer not of a denied topic", credConsumer, "", remoting.PullMessage, pull("g", "Denied"), nil, false},
		{"consumer does not send to T", credConsumer, "", remoting.SendMessageV2, send("T"), []byte("m"), false},
		{"consumer sends to Both", credConsumer, "", remoting.SendMessageV2, send("Both"), []byte("m"), true},
		{"consumer sends to its retry topic", credConsumer, "", remoting.SendMessageV2, send("%RETRY%g"), []byte("m"), true},
		{"consumer commits offsets", credConsumer, "", remoting.UpdateConsumerOffset, offset("g", "T"), nil, true},
		{"consumer queries offsets", credConsumer, "", remoting.QueryConsumerOffset, offset("g", "T"), nil, true},
		{"consumer not of g2's offsets", credConsumer, "", remoting.UpdateConsumerOffset, offset("g2", "T"), nil, false},
		{"consumer heartbeats", credConsumer, "", remoting.HeartBeat, nil, heartbeatBody("c", "g", "T", "*"), true},
		{"consumer heartbeat of g2", credConsumer, "", remoting.HeartBeat, nil, heartbeatBody("c", "g2", "T", "*"), false},
		{"consumer heartbeat subscribing X", credConsumer, "", remoting.HeartBeat, nil, heartbeatBody("c", "g", "X", "*"), false},
		{"producer heartbeat", credProducer, "", remoting.HeartBeat, nil, []byte(`{"clientID":"p","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[]}`), true},
		{"heartbeat that does not decode: its handler refuses it", credConsumer, "", remoting.HeartBeat, nil, []byte("{"), true},
		{"consumer sends back in g", credConsumer, "", remoting.ConsumerSendMsgBack, sendBack("g"), nil, true},
		{"consumer sends back in g2", credConsumer, "", remoting.ConsumerSendMsgBack, sendBack("g2"), nil, false},
		{"consumer lists g", credConsumer, "", remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil, true},
		{"consumer lists g2", credConsumer, "", remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "g2"}, nil, false},
		{"consumer unregisters from g2", credConsumer, "", remoting.UnregisterClient, map[string]string{"clientID": "c", "consumerGroup": "g2"}, nil, false},
		{"consumer queries messages of T", credConsumer, "", remoting.QueryMessage, query("T"), nil, true},
		{"consumer queries messages of X", credConsumer, "", remoting.QueryMessage, query("X"), nil, false},
		{"generous default perms", credGenerous, "", remoting.PullMessage, pull("any", "any"), nil, true},
		{"generous sends", credGenerous, "", remoting.SendMessage, v1("Open"), []byte("m"), true},
		{"generous denied topic", credGenerous, "", remoting.SendMessage, v1("Closed"), []byte("m"), false},
		{"generous denied topic, V1 code with the short header", credGenerous, "", remoting.SendMessage, v1Short("Closed"), []byte("m"), false},
		{"generous denied topic, V2 code with the long header", credGenerous, "", remoting.SendMessageV2, v1("Closed"), []byte("m"), false},
		{"generous denied group", credGenerous, "", remoting.PullMessage, pull("closed", "any"), nil, false},
		{"nobody: no default permission", credNobody, "", remoting.SendMessageV2, send("T"), []byte("m"), false},
		{"nobody reads offsets", credNobody, "", remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil, true},
		{"unsigned route lookup", remoting.Credentials{}, "", remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil, true},
		{"unsigned cluster info", remoting.Credentials{}, "", remoting.GetBrokerClusterInfo, nil, nil, true},
		{"unsigned topic list", remoting.Credentials{}, "", remoting.GetAllTopicListFromNameServer, nil, nil, false},
		{"unsigned send", remoting.Credentials{}, "", remoting.SendMessageV2, send("T"), nil, false},
		{"unknown account", remoting.Credentials{AccessKey: "stranger", SecretKey: "producer-secret"}, "", remoting.SendMessageV2, send("T"), nil, false},
		{"wrong secret", remoting.Credentials{AccessKey: "producer", SecretKey: "admin-secret"}, "", remoting.SendMessageV2, send("T"), nil, false},
		{"wrong secret of admin", remoting.Credentials{AccessKey: "admin-key", SecretKey: "producer-secret"}, "", remoting.UpdateAndCreateTopic, map[string]string{"topic": "X"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host
			if host == "" {
				host = "127.0.0.1"
			}
			err := tab.check(host, signedReq(tc.cred, tc.code, tc.ext, tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("check = %v, want allowed %v", err, tc.ok)
			}
		})
	}

	// An account's white address needs no signature, but its permissions still count.
	forged := signedReq(remoting.Credentials{AccessKey: "nobody", SecretKey: "wrong-secret"}, remoting.GetMaxOffset, map[string]string{"topic": "T"}, nil)
	if err := tab.check("10.1.2.3", forged); err != nil {
		t.Errorf("white address: %v", err)
	}
	if err := tab.check("10.1.3.3", forged); err == nil {
		t.Error("a forged signature passes from outside the white address")
	}
	if err := tab.check("10.1.2.3", signedReq(remoting.Credentials{AccessKey: "nobody", SecretKey: "wrong-secret"}, remoting.SendMessageV2, send("T"), nil)); err == nil {
		t.Error("a white address gets permissions its account lacks")
	}
	// A global white address needs nothing.
	g := writeACL(t, "globalWhiteRemoteAddresses = [\"192.168.7.*\"]\n"+testACL).table.Load()
	if err := g.check("192.168.7.9", signedReq(remoting.Credentials{}, remoting.UpdateAndCreateTopic, nil, nil)); err != nil {
		t.Errorf("global white address: %v", err)
	}
	if err := g.check("192.168.8.9", signedReq(remoting.Credentials{}, remoting.UpdateAndCreateTopic, nil, nil)); err == nil {
		t.Error("an address outside the global white list passes unsigned")
	}
}

// TestACLReload: Reload puts a new file in force; a broken one leaves the old.
func TestACLReload(t *testing.T) {
	a := writeACL(t, testACL)
	req := func() *remoting.Command {
		return signedReq(credProducer, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("m"))
	}
	if err := a.table.Load().check("127.0.0.1", req()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.Path(), []byte("[[accounts]]\naccessKey = \"other-key\"\nsecretKey = \"other-secret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if a.Accounts() != 1 || a.table.Load().check("127.0.0.1", req()) == nil {
		t.Fatal("the reloaded file is not in force")
	}
	if err := os.WriteFile(a.Path(), []byte("[[accounts]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("a broken file reloads")
	}
	if a.Accounts() != 1 {
		t.Fatalf("after a failed reload %d accounts, want the old 1", a.Accounts())
	}
}

// aclState is what a test sees of a broker: topics, groups, members, offsets, messages
// and locks.
func aclState(t testing.TB, b *edge.Broker) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	gcs, _ := b.GroupConfigs()
	fmt.Fprintf(&sb, "groups %v %v %v\nconfigs %+v\n", b.Groups(), b.ProducerGroups(), b.Producers("pg"), gcs)
	for _, g := range b.Groups() {
		ms, _ := b.Members(g)
		fmt.Fprintf(&sb, "members %s %+v\n", g, ms)
	}
	for _, tc := range b.Topics() {
		fmt.Fprintf(&sb, "topic %+v\n", tc)
		for q := range max(tc.ReadQueues, tc.WriteQueues) {
			mqq := mq.MessageQueue{Topic: tc.Name, QueueID: q}
			lo, _ := b.MinOffset(ctx, mqq)
			hi, _ := b.MaxOffset(ctx, mqq)
			fmt.Fprintf(&sb, "  queue %d [%d,%d)", q, lo, hi)
			for _, g := range []string{"g", "g2"} {
				off, err := b.QueryOffset(ctx, g, mqq)
				fmt.Fprintf(&sb, " %s=%d/%v", g, off, err)
			}
			sb.WriteString("\n")
		}
	}
	qs := []mq.MessageQueue{{Topic: "T", BrokerName: b.Options().BrokerName, QueueID: 0}}
	locked, _ := b.LockQueues(ctx, "g", "probe", qs) // 0 while c1 holds the lock
	if len(locked) > 0 {
		b.UnlockQueues(ctx, "g", "probe", locked)
	}
	fmt.Fprintf(&sb, "probe locks %d\n", len(locked))
	return sb.String()
}

// TestACLRefusesChangesUnsigned: with the ACL on, no request of any code the server
// handles changes anything unless validly signed by an account allowed to make it: sent
// unsigned, with a bad signature, by an unknown account or by an account without the
// permission, it is answered NO_PERMISSION and the broker's state is as before. Each is
// then sent by the admin account, to show that the request would have been carried out.
func TestACLRefusesChangesUnsigned(t *testing.T) {
	b := openBroker(t, &edge.Options{NewQueueWindow: -1})
	a := writeACL(t, testACL)
	s := startServer(t, b, Options{ACL: a})
	c := dial(t, s.Addr())
	admin := func(code int16, ext map[string]string, body []byte) *remoting.Command {
		t.Helper()
		req := signedReq(credAdmin, code, ext, body)
		return c.call(code, req.Ext, req.Body)
	}
	for i := range 3 {
		if r := admin(remoting.SendMessageV2, sendExt("T", 0, ""), []byte("m"+strconv.Itoa(i))); r.Code != remoting.Success {
			t.Fatalf("admin send: %d %s", r.Code, r.Remark)
		}
	}
	admin(remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*"))
	admin(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "1"}, nil)
	qs := []mq.MessageQueue{{Topic: "T", BrokerName: b.Options().BrokerName, QueueID: 0}}
	if got, err := b.LockQueues(context.Background(), "g", "c1", qs); err != nil || len(got) != 1 {
		t.Fatalf("lock: %v %v", got, err)
	}
	pr := admin(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil)
	first := decodeRecords(t, pr.Body)[0]
	lockBody := func(client string) []byte {
		return []byte(`{"consumerGroup":"g","clientId":"` + client + `","onlyThisBroker":true,"mqSet":[{"topic":"T","brokerName":"` +
			b.Options().BrokerName + `","queueId":0}]}`)
	}
	batch, err := remoting.AppendBatch(nil, []*mq.Message{{Topic: "T", Body: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	halfExt := sendExt("T", 0, "TRAN_MSG\x01true\x02PGROUP\x01pg\x02")
	halfExt["f"] = "4"
	hr, err := remoting.ParseSendResponseHeader(admin(remoting.SendMessageV2, halfExt, []byte("half")).Ext)
	if err != nil {
		t.Fatal(err)
	}
	_, halfPos, err := mq.ParseOffsetMsgID(hr.MsgID)
	if err != nil {
		t.Fatal(err)
	}
	commitHalf := remoting.EndTransactionHeader{ProducerGroup: "pg", TranStateTableOffset: hr.QueueOffset, CommitLogOffset: halfPos,
		CommitOrRollback: remoting.TransactionCommitType, MsgID: hr.MsgID}.Ext()
	commitPull := pullHeader("g", "T", 0, 1, pullCommitOffset, 0, "")
	commitPull["commitOffset"] = "3"

	// Every handled code; those that change state first (as the admin shows), then the
	// readers, then the deletions.
	reqs := []struct {
		code    int16
		ext     map[string]string
		body    []byte
		changes bool
	}{
		{remoting.SendMessage, v1SendExt("T"), []byte("v1"), true},
		{remoting.SendMessageV2, sendExt("T", 0, ""), []byte("v2"), true},
		{remoting.SendBatchMessage, sendExt("T", 0, ""), batch, true},
		{remoting.SendMessageV2, sendExt("NewTopic", 0, ""), []byte("auto-created"), true},
		{remoting.EndTransaction, commitHalf, nil, true},
		{remoting.HeartBeat, nil, heartbeatBody("c2", "g2", "T", "*"), true},
		{remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "2"}, nil, true},
		{remoting.PullMessage, commitPull, nil, true},
		{remoting.LitePullMessage, func() map[string]string { e := maps.Clone(commitPull); e["commitOffset"] = "4"; return e }(), nil, true},
		{remoting.ConsumerSendMsgBack, map[string]string{"group": "g", "offset": strconv.FormatInt(first.commitLog, 10), "delayLevel": "-1",
			"originMsgId": "X", "originTopic": "T", "maxReconsumeTimes": "16", "unitMode": "false"}, nil, true},
		{remoting.UnlockBatchMQ, nil, lockBody("c1"), true},
		{remoting.LockBatchMQ, nil, lockBody("c1"), true},
		{remoting.UpdateAndCreateTopic, map[string]string{"topic": "Made", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
			"perm": "6", "topicFilterType": "SINGLE_TAG"}, nil, true},
		{remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"made-group","consumeEnable":true}`), true},
		{remoting.InvokeBrokerToResetOffset, map[string]string{"topic": "T", "group": "g", "timestamp": "0", "isForce": "true"}, nil, true},
		{remoting.UnregisterClient, map[string]string{"clientID": "c2", "consumerGroup": "g2"}, nil, true},
		{remoting.EndPullStream, remoting.EndPullStreamHeader{Opaque: 1}.Ext(), nil, false}, // no stream of this connection
		{remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "g"}, nil, false},
		{remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0"}, nil, false},
		{remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil, false},
		{remoting.GetMinOffset, map[string]string{"topic": "T", "queueId": "0"}, nil, false},
		{remoting.SearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "0", "timestamp": "0"}, nil, false},
		{remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil, false},
		{remoting.GetBrokerClusterInfo, nil, nil, false},
		{remoting.GetAllTopicListFromNameServer, nil, nil, false},
		{remoting.GetTopicStatsInfo, map[string]string{"topic": "T"}, nil, false},
		{remoting.GetTopicConfig, map[string]string{"topic": "T"}, nil, false},
		{remoting.QueryTopicConsumeByWho, map[string]string{"topic": "T"}, nil, false},
		{remoting.GetBrokerRuntimeInfo, nil, nil, false},
		{remoting.GetConsumeStats, map[string]string{"consumerGroup": "g", "topic": "T"}, nil, false},
		{remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "g"}, nil, false},
		{remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(first.commitLog, 10)}, nil, false},
		{remoting.QueryMessage, map[string]string{"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9999999999999"}, nil, false},
		{remoting.GetAllSubscriptionGroupConfig, nil, nil, false},
		{remoting.DeleteTopicInNamesrv, map[string]string{"topic": "Made"}, nil, true},
		{remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, nil, true},
	}
	covered := map[int16]bool{}
	for _, r := range reqs {
		covered[r.code] = true
	}
	for _, code := range slices.Sorted(maps.Keys(handlers)) {
		if !covered[code] {
			t.Errorf("request code %d is handled but not tried", code)
		}
	}
	badSig := func(ext map[string]string, body []byte) map[string]string {
		req := signedReq(credProducer, 0, ext, body)
		req.Ext[remoting.ExtSignature] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="
		return req.Ext
	}
	for _, r := range reqs {
		name := fmt.Sprintf("code %d", r.code)
		before := aclState(t, b)
		for _, try := range []struct {
			how string
			ext map[string]string
		}{
			{"unsigned", r.ext},
			{"bad signature", badSig(r.ext, r.body)},
			{"unknown account", signedReq(remoting.Credentials{AccessKey: "stranger", SecretKey: "admin-secret"}, r.code, r.ext, r.body).Ext},
			{"wrong secret", signedReq(remoting.Credentials{AccessKey: "admin-key", SecretKey: "wrong-secret"}, r.code, r.ext, r.body).Ext},
			{"other body", signedReq(credAdmin, r.code, r.ext, append(slices.Clone(r.body), 'x')).Ext},
			{"no permission", signedReq(credNobody, r.code, r.ext, r.body).Ext},
		} {
			resp := c.call(r.code, try.ext, r.body)
			open := openCodes[r.code]
			readOnly := !r.changes && try.how == "no permission" // a valid signature reads
			if !open && !readOnly && resp.Code != remoting.NoPermission {
				t.Errorf("%s %s: reply %d %q, want NO_PERMISSION", name, try.how, resp.Code, resp.Remark)
			}
			if after := aclState(t, b); after != before {
				t.Fatalf("%s %s changed the broker:\nbefore:\n%s\nafter:\n%s", name, try.how, before, after)
			}
		}
		resp := admin(r.code, r.ext, r.body)
		if resp.Code == remoting.NoPermission {
			t.Errorf("%s by the admin: %s", name, resp.Remark)
		}
		if after := aclState(t, b); (after != before) != r.changes {
			t.Errorf("%s by the admin: changed %v, want %v (reply %d %q)", name, after != before, r.changes, resp.Code, resp.Remark)
		}
	}
}

// TestExampleACLLoads: configs/acl.toml loads.
func TestExampleACLLoads(t *testing.T) {
	a, err := LoadACL(filepath.Join("..", "..", "..", "configs", "acl.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Accounts() != 2 {
		t.Errorf("%d accounts, want 2", a.Accounts())
	}
}

// FuzzACLCheck: whatever the code, extension fields and body, the check does not panic, and
// a request that is unsigned or signed with a wrong secret passes only where RocketMQ's
// name server would (route lookups).
func FuzzACLCheck(f *testing.F) {
	tab := func() *aclTable {
		t, err := parseACL(testACL)
		if err != nil {
			f.Fatal(err)
		}
		return t
	}()
	f.Add(int16(remoting.SendMessageV2), "b", "T", []byte("m"), "producer")
	f.Add(int16(remoting.HeartBeat), "x", "y", heartbeatBody("c", "g", "T", "*"), "consumer")
	f.Add(int16(remoting.LockBatchMQ), "", "", []byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T"}]}`), "admin-key")
	f.Add(int16(remoting.PullMessage), "topic", "%RETRY%g", []byte{}, "generous")
	f.Add(int16(remoting.GetRouteInfoByTopic), "topic", "T", []byte(nil), "")
	f.Fuzz(func(t *testing.T, code int16, k, v string, body []byte, ak string) {
		ext := map[string]string{k: v}
		open := openCodes[code]
		unsigned := remoting.NewRequest(code, ext, body)
		if err := tab.check("127.0.0.1", unsigned); err == nil && !open {
			t.Fatalf("an unsigned request of code %d passes: %v", code, ext)
		}
		forged := signedReq(remoting.Credentials{AccessKey: ak, SecretKey: "not-any-accounts-secret"}, code, ext, body)
		if err := tab.check("127.0.0.1", forged); err == nil && !open {
			t.Fatalf("a request signed with a wrong secret passes: code %d %v", code, forged.Ext)
		}
		// A valid signature: the answer depends on the account, but never panics.
		tab.check("127.0.0.1", signedReq(credAdmin, code, ext, body))
		tab.check("127.0.0.1", signedReq(credConsumer, code, ext, body))
	})
}
