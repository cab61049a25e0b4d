package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
)

// waitNote returns the next request the server sent c, failing after 10 s.
func waitNote(t *testing.T, c *client) *remoting.Command {
	t.Helper()
	select {
	case n := <-c.notes:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification in 10 s")
	}
	return nil
}

// TestClosedConnectionLeavesGroup: when a client's connection closes, the broker drops it
// from its group but keeps its queue locks until they expire (the client may live on and
// consume them, as RocketMQ's broker assumes), and the other members are sent
// NOTIFY_CONSUMER_IDS_CHANGED (oneway, naming the group); a join is announced the same way,
// to the newcomer too.
func TestClosedConnectionLeavesGroup(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	c1.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*"))
	c2.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c2", "g", "T", "*"))
	n := waitNote(t, c1)
	if n.Code != remoting.NotifyConsumerIDsChanged || !n.IsOneway() || n.Ext["consumerGroup"] != "g" {
		t.Fatalf("c1 got code %d oneway %v ext %v, want 40 oneway for g", n.Code, n.IsOneway(), n.Ext)
	}
	// The newcomer hears of its own join too, as RocketMQ's broker tells every connection of
	// the group.
	if n := waitNote(t, c2); n.Code != remoting.NotifyConsumerIDsChanged || n.Ext["consumerGroup"] != "g" {
		t.Fatalf("c2 got code %d ext %v on joining, want 40 for g", n.Code, n.Ext)
	}
	lock := []byte(`{"consumerGroup":"g","clientId":"c1","mqSet":[{"topic":"T","brokerName":"edgemq","queueId":0}]}`)
	c1.mustCall(remoting.Success, remoting.LockBatchMQ, nil, lock)

	c1.close()
	n = waitNote(t, c2)
	if n.Code != remoting.NotifyConsumerIDsChanged || n.Ext["consumerGroup"] != "g" {
		t.Fatalf("c2 got code %d ext %v, want 40 for g", n.Code, n.Ext)
	}
	ids, err := b.ConsumerIDs(context.Background(), "", "g")
	if err != nil || len(ids) != 1 || ids[0] != "c2" {
		t.Fatalf("members after c1 left: %v %v, want [c2]", ids, err)
	}
	got, err := b.LockQueues(context.Background(), "g", "c2", []mq.MessageQueue{{Topic: "T"}})
	if err != nil || len(got) != 0 {
		t.Fatalf("c1's lock freed when its connection closed: c2 got %v %v", got, err)
	}
}

// TestLastRequestsBeforeClose: requests a client sends just before it closes its
// connection (a consumer's last offset commit, oneway) are carried out.
func TestLastRequestsBeforeClose(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("x"))
	for i := range 20 {
		req := remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "T",
			"queueId": "0", "commitOffset": strconv.Itoa(i + 1)}, nil)
		req.Flag = remoting.FlagOneway
		c.write(req)
		wait := c.write(remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil))
		if i < 19 {
			c.wait(wait)
		}
	}
	c.close()
	waitConns(t, s, 0)
	if off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "T"}); err != nil || off != 20 {
		t.Errorf("offset after the client closed: %d %v, want 20", off, err)
	}
}

// TestClientOnTwoConnections: a client that heartbeats on two connections stays in its
// group until both close.
func TestClientOnTwoConnections(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	a, a2 := dial(t, s.Addr()), dial(t, s.Addr())
	for _, c := range []*client{a, a2} {
		c.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*"))
	}
	a.close()
	waitConns(t, s, 1)
	if ids, _ := b.ConsumerIDs(context.Background(), "", "g"); len(ids) != 1 {
		t.Fatalf("c1 left its group with a connection still open: %v", ids)
	}
	a2.close()
	waitConns(t, s, 0)
	if ids, _ := b.ConsumerIDs(context.Background(), "", "g"); len(ids) != 0 {
		t.Fatalf("c1 still a member after its last connection closed: %v", ids)
	}
}

// waitConns waits until s has n connections (they close asynchronously).
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	waitConnsTB(t, s, n)
}

// rawFrame builds a frame by hand: length word, type byte and header length, header, body.
func rawFrame(frameLen int32, serialize byte, headerLen int, header, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(frameLen))
	b = binary.BigEndian.AppendUint32(b, uint32(serialize)<<24|uint32(headerLen))
	b = append(b, header...)
	return append(b, body...)
}

// TestBadInput: input that is not a frame closes the connection with one log line and
// changes nothing else: the server answers other clients, the broker holds no message.
func TestBadInput(t *testing.T) {
	hdr := []byte(`{"code":310,"language":"GO","version":317,"opaque":1,"flag":0,"extFields":{}}`)
	for _, tc := range []struct {
		name  string
		bytes []byte
		log   string
	}{
		{"frame length below its header word", rawFrame(2, 0, 0, nil, nil), "connection closed: malformed frame"},
		{"negative frame length", rawFrame(-8, 0, 0, nil, nil), "connection closed: malformed frame"},
		{"header not JSON", rawFrame(int32(4+5), 0, 5, []byte("{{{{{"), nil), "connection closed: malformed frame"},
		{"header longer than the frame", rawFrame(int32(4+len(hdr)), 0, len(hdr)+10, hdr, nil), "connection closed: malformed frame"},
		{"unknown serialize type", rawFrame(int32(4+len(hdr)), 7, len(hdr), hdr, nil), "connection closed: malformed frame"},
		{"frame over the maximum", rawFrame(20<<20, 0, len(hdr), hdr, nil), "connection closed: frame too large"},
		{"binary header truncated", rawFrame(4+3, 1, 3, []byte{0, 10, 9}, nil), "connection closed: malformed frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := newLogCounter(t)
			b := openBroker(t, nil)
			s := startServer(t, b, Options{Logger: lc.logger()})
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(tc.bytes)
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := nc.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
				t.Fatalf("connection not closed: read %d, %v", n, err)
			}
			waitConns(t, s, 0)
			if got := lc.count(tc.log); got != 1 {
				t.Errorf("%d log lines %q, want 1", got, tc.log)
			}
			dial(t, s.Addr()).mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
			if qs, _ := b.Queues(""); len(qs) != 0 {
				t.Errorf("the broker holds queues %v", qs)
			}
		})
	}
}

// isTimeout reports a read deadline's error: the connection stayed open.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestOversizeSend: a 10 MiB send (a frame the server reads, a body above the broker's
// maximum) is answered MESSAGE_ILLEGAL and the connection goes on.
func TestOversizeSend(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	c.mustCall(remoting.MessageIllegal, remoting.SendMessageV2, sendExt("T", 0, ""), make([]byte, 10<<20))
	c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("small"))
	if n, _ := b.MaxOffset(context.Background(), mq.MessageQueue{Topic: "T"}); n != 1 {
		t.Errorf("queue holds %d messages, want 1", n)
	}
}

// TestIdleTimeout: half a frame, then nothing: the connection is closed after the idle
// timeout, and not before; a connection that sends whole frames stays.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := newLogCounter(t)
		b := openBroker(t, nil)
		s := pipeServer(t, b, Options{IdleTimeout: 30 * time.Second, Logger: lc.logger()})
		half, busy := pipeClient(t, s), pipeClient(t, s)
		frame, _ := remoting.NewRequest(remoting.HeartBeat, nil, heartbeatBody("c1", "g", "T", "*")).AppendFrame(nil)
		start := time.Now()
		closedAfter := make(chan time.Duration, 1)
		go func() {
			half.nc.Write(frame[:len(frame)/2])
			<-half.done
			closedAfter <- time.Since(start)
		}()
		for range 5 {
			time.Sleep(10 * time.Second)
			busy.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c2", "g", "T", "*"))
		}
		if got := <-closedAfter; got != 30*time.Second {
			t.Errorf("closed after %v, want the idle timeout, 30s", got)
		}
		if lc.count("connection closed: idle") != 1 {
			t.Errorf("%d idle log lines, want 1", lc.count("connection closed: idle"))
		}
		select {
		case <-busy.done:
			t.Fatal("the busy connection was closed")
		default:
		}
	})
}

// TestSlowReader: a client that does not read its replies is disconnected after the write
// timeout; the server's other clients go on.
func TestSlowReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := newLogCounter(t)
		b := openBroker(t, nil)
		s := pipeServer(t, b, Options{WriteTimeout: 5 * time.Second, Logger: lc.logger()})
		a, bpipe := net.Pipe()
		s.admit(bpipe, false)
		frame, _ := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil).AppendFrame(nil)
		start := time.Now()
		if _, err := a.Write(frame); err != nil { // read by the server; its reply is never read
			t.Fatal(err)
		}
		other := pipeClient(t, s)
		other.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := lc.count("connection closed: slow reader"); got != 1 {
			t.Fatalf("%d slow-reader log lines after %v, want 1", got, time.Since(start))
		}
		if _, err := a.Read(make([]byte, 1)); err == nil {
			t.Error("slow reader's connection still open")
		}
		a.Close()
		other.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
	})
}

// TestMaxInFlight: past MaxInFlight requests being handled on a connection, a request is
// answered SYSTEM_BUSY; once they are answered, requests are handled again.
func TestMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{MaxInFlight: 2})
		c := pipeClient(t, s)
		var parked []chan *remoting.Command
		for range 2 {
			parked = append(parked, c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, 10000, "*"), nil)))
		}
		synctest.Wait()
		c.mustCall(remoting.SystemBusy, remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil)
		for _, ch := range parked {
			if r := c.wait(ch); r.Code != remoting.PullNotFound {
				t.Errorf("parked pull: code %d, want 19", r.Code)
			}
		}
		synctest.Wait()
		c.mustCall(remoting.Success, remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil)
	})
}

// TestRequestBytesBudget: past the server's budget of request bytes in flight (all
// connections together), a request is answered SYSTEM_BUSY; once the others are answered,
// it is taken.
func TestRequestBytesBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, nil)
		s := pipeServer(t, b, Options{})
		s.maxReqBytes = 2 * requestOverhead
		parker, sender := pipeClient(t, s), pipeClient(t, s)
		parked := parker.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSuspend|pullSubscription, 10000, "*"), nil))
		synctest.Wait()
		body := make([]byte, requestOverhead+1)
		sender.mustCall(remoting.SystemBusy, remoting.SendMessageV2, sendExt("T", 0, ""), body)
		sender.mustCall(remoting.Success, remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil) // fits
		if r := parker.wait(parked); r.Code != remoting.PullNotFound {
			t.Errorf("parked pull: %d", r.Code)
		}
		synctest.Wait()
		sender.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), body)
		synctest.Wait() // the handler returns after its reply is queued
		if s.reqBytes.Load() != 0 {
			t.Errorf("%d request bytes counted with none in flight", s.reqBytes.Load())
		}
	})
}

// TestManyConnections: 10,000 connections (1,000 with -short) opened and dropped, some with
// garbage or half a frame, past MaxConns: each is answered, refused or closed with a log
// line, the server ends with no connection, no goroutine of theirs and no heap they grew,
// and still answers.
func TestManyConnections(t *testing.T) {
	lc := newLogCounter(t)
	b := openBroker(t, nil)
	s := startServer(t, b, Options{MaxConns: 100, Logger: lc.logger()})
	frame, _ := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil).AppendFrame(nil)
	inputs := [][]byte{nil, frame, frame[:7], []byte("GET / HTTP/1.1\r\n\r\n"), rawFrame(2, 0, 0, nil, nil)}
	total := 10000
	if testing.Short() {
		total = 1000
	}
	heapBefore := heapInUse()
	var wg sync.WaitGroup
	for i := range total {
		if i%200 == 0 {
			wg.Wait() // in waves: the refusals need some connections open
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			nc.Write(inputs[i%len(inputs)])
			if i%len(inputs) == 1 { // a whole request: answered or refused
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				r, err := remoting.NewReader(nc, 0).Read()
				if err == nil && r.Code != remoting.Success {
					t.Errorf("reply %d", r.Code)
				}
				if err != nil && !isClosedErr(err) {
					t.Errorf("neither a reply nor a closed connection: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	waitConns(t, s, 0)
	// The log counter keeps one line per connection; everything else the connections
	// allocated must be garbage now.
	if grown := heapInUse() - heapBefore; grown > heapSlack {
		t.Errorf("heap in use grew by %d bytes over %d connections, want at most %d", grown, total, heapSlack)
	}
	// One line per connection: refused, closed by the client, or closed on bad input.
	lines := lc.count("connection refused: too many connections") + lc.count("connection closed") +
		lc.count("connection closed: malformed frame") + lc.count("connection closed: frame too large")
	if lines != total {
		t.Errorf("%d connection log lines, want %d (refused %d)", lines, total, lc.count("connection refused: too many connections"))
	}
	dial(t, s.Addr()).mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g"}, nil)
	if qs, _ := b.Queues(""); len(qs) != 0 {
		t.Errorf("the broker holds queues %v", qs)
	}
}

// heapSlack is how much the heap in use may grow over TestManyConnections: the log
// counter's lines and the runtime's own caches, far below one buffer per connection.
const heapSlack = 8 << 20

// heapInUse returns the heap bytes in use after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

func isClosedErr(err error) bool {
	var ne net.Error
	return errors.Is(err, remoting.ErrMalformed) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") ||
		strings.Contains(err.Error(), "EOF") || errors.As(err, &ne) && !ne.Timeout()
}

// TestVIPAddress: the VIP address answers the same requests, and routes it gives point at
// the main address.
func TestVIPAddress(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{VIPListen: "127.0.0.1:0"})
	if s.VIPAddr() == nil || s.VIPAddr().String() == s.Addr().String() {
		t.Fatalf("VIPAddr %v, Addr %v", s.VIPAddr(), s.Addr())
	}
	c := dial(t, s.VIPAddr())
	c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("x"))
	r := c.mustCall(remoting.Success, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if !bytes.Contains(r.Body, []byte(`"0":"`+s.Addr().String()+`"`)) {
		t.Errorf("route on the VIP address %s, want the main address %v", r.Body, s.Addr())
	}
	off := startServer(t, b, Options{VIPListen: vipOff})
	if off.VIPAddr() != nil {
		t.Error("VIP address with VIPListen off")
	}
	// The default VIP address of a server on port 0 is any free port.
	def, err := Start(b, Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if def.VIPAddr() == nil {
		t.Error("no default VIP address")
	}
}

// TestOptions: Start refuses options out of range, naming the option.
func TestOptions(t *testing.T) {
	b := openBroker(t, nil)
	for _, tc := range []struct {
		o    Options
		name string
	}{
		{Options{MaxConns: -1}, "MaxConns"},
		{Options{MaxInFlight: -1}, "MaxInFlight"},
		{Options{IdleTimeout: -time.Second}, "IdleTimeout"},
		{Options{WriteTimeout: -time.Second}, "WriteTimeout"},
		{Options{MaxFrameSize: 10}, "MaxFrameSize"},
		{Options{Listen: "nonsense"}, "Listen"},
		{Options{Listen: "127.0.0.1:0", VIPListen: "bad"}, "VIPListen"},
		{Options{Listen: "127.0.0.1:0", Advertise: "localhost:10911"}, "Advertise"},
		{Options{Listen: "127.0.0.1:0", Advertise: "10.0.0.1:0"}, "Advertise"},
	} {
		s, err := Start(b, tc.o)
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Start(%+v) = %v, want %v naming %s", tc.o, err, ErrOptions, tc.name)
		}
		if s != nil {
			s.Close()
		}
	}
	if _, err := Start(nil, Options{}); !errors.Is(err, ErrOptions) {
		t.Errorf("Start(nil broker) = %v", err)
	}
}

// TestAdmin: mqadmin's requests, each a round trip.
func TestAdmin(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{ClusterName: "C"})
	c := dial(t, s.Addr())
	c.mustCall(remoting.Success, remoting.UpdateAndCreateTopic, map[string]string{"topic": "A", "defaultTopic": "TBW102",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, nil)
	if cfg, err := b.Topic("A"); err != nil || cfg.ReadQueues != 2 || cfg.WriteQueues != 2 {
		t.Fatalf("topic A: %+v %v", cfg, err)
	}
	c.mustCall(remoting.InvalidParameter, remoting.UpdateAndCreateTopic, map[string]string{"topic": "A", "defaultTopic": "TBW102",
		"readQueueNums": "2000", "writeQueueNums": "2", "perm": "6"}, nil)
	r := c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("A", 1, "KEYS\x01k\x02"), []byte("hello"))
	msgID := r.Ext["msgId"]

	r = c.mustCall(remoting.Success, remoting.GetAllTopicListFromNameServer, nil, nil)
	var tl struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(r.Body, &tl); err != nil || !containsStr(tl.TopicList, "A") {
		t.Errorf("topic list %s %v", r.Body, err)
	}
	r = c.mustCall(remoting.Success, remoting.GetTopicStatsInfo, map[string]string{"topic": "A"}, nil)
	want := `{"offsetTable":{{"brokerName":"edgemq","queueId":0,"topic":"A"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},` +
		`{"brokerName":"edgemq","queueId":1,"topic":"A"}:{"lastUpdateTimestamp":0,"maxOffset":1,"minOffset":0}},"topicPutTps":0.0}`
	if string(r.Body) != want {
		t.Errorf("topic stats\n got %s\nwant %s", r.Body, want)
	}
	c.mustCall(remoting.TopicNotExist, remoting.GetTopicStatsInfo, map[string]string{"topic": "Nope"}, nil)
	r = c.mustCall(remoting.Success, remoting.GetTopicConfig, map[string]string{"topic": "A"}, nil)
	if want := `{"topicName":"A","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}`; string(r.Body) != want {
		t.Errorf("topic config\n got %s\nwant %s", r.Body, want)
	}
	c.mustCall(remoting.TopicNotExist, remoting.GetTopicConfig, map[string]string{"topic": "Nope"}, nil)

	r = c.mustCall(remoting.Success, remoting.GetBrokerRuntimeInfo, nil, nil)
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(r.Body, &kv); err != nil || kv.Table["msgPutTotalTodayNow"] != "1" || kv.Table["brokerName"] != "edgemq" {
		t.Errorf("runtime info %s %v", r.Body, err)
	}
	r = c.mustCall(remoting.Success, remoting.GetBrokerClusterInfo, nil, nil)
	wantCluster := `{"brokerAddrTable":{"edgemq":{"cluster":"C","brokerName":"edgemq","brokerAddrs":{"0":"` + s.Addr().String() + `"}}},"clusterAddrTable":{"C":["edgemq"]}}`
	if string(r.Body) != wantCluster {
		t.Errorf("cluster info\n got %s\nwant %s", r.Body, wantCluster)
	}

	// A consumer: connection list and consume stats.
	c.mustCall(remoting.Success, remoting.HeartBeat, nil, heartbeatBody("c1", "g", "A", "*"))
	c.mustCall(remoting.Success, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "A", "queueId": "1", "commitOffset": "1"}, nil)
	r = c.mustCall(remoting.Success, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "g"}, nil)
	var cc struct {
		ConnectionSet []struct {
			ClientID, ClientAddr, Language string
			Version                        int
		} `json:"connectionSet"`
		SubscriptionTable map[string]struct{ SubString string } `json:"subscriptionTable"`
		MessageModel      string                                `json:"messageModel"`
	}
	if err := json.Unmarshal(r.Body, &cc); err != nil || len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != "c1" ||
		cc.ConnectionSet[0].ClientAddr != c.nc.LocalAddr().String() || cc.ConnectionSet[0].Language != "GO" ||
		cc.SubscriptionTable["A"].SubString != "*" || cc.MessageModel != "CLUSTERING" {
		t.Errorf("consumer connections %s %v", r.Body, err)
	}
	c.mustCall(remoting.ConsumerNotOnline, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": "nobody"}, nil)
	r = c.mustCall(remoting.Success, remoting.GetConsumeStats, map[string]string{"consumerGroup": "g"}, nil)
	if !strings.Contains(string(r.Body), `{"brokerName":"edgemq","queueId":1,"topic":"A"}:{"brokerOffset":1,"consumerOffset":1,`) {
		t.Errorf("consume stats %s", r.Body)
	}
	c.mustCall(remoting.SubscriptionGroupNotExist, remoting.GetConsumeStats, map[string]string{"consumerGroup": "nobody"}, nil)

	// Messages by id; offsets reset by time.
	host, pos, err := mq.ParseOffsetMsgID(msgID)
	if err != nil || host.String() != s.Addr().String() {
		t.Fatalf("message id %s: host %v, %v; want the server's address %v", msgID, host, err, s.Addr())
	}
	r = c.mustCall(remoting.Success, remoting.QueryTopicConsumeByWho, map[string]string{"topic": "A"}, nil)
	if string(r.Body) != `{"groupList":["g"]}` {
		t.Errorf("consumers of A: %s", r.Body)
	}
	r = c.mustCall(remoting.Success, remoting.ViewMessageByID, map[string]string{"offset": itoa(pos)}, nil)
	if recs := decodeRecords(t, r.Body); len(recs) != 1 || recs[0].body != "hello" || recs[0].props["KEYS"] != "k" {
		t.Errorf("view message: %+v", recs)
	}
	c.mustCall(remoting.SystemError, remoting.ViewMessageByID, map[string]string{"offset": "123456789"}, nil)
	qm := map[string]string{"topic": "A", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9223372036854775807"}
	r = c.mustCall(remoting.Success, remoting.QueryMessage, qm, nil)
	if recs := decodeRecords(t, r.Body); len(recs) != 1 || recs[0].body != "hello" || r.Ext["indexLastUpdateTimestamp"] == "" {
		t.Errorf("query message by key: %+v, ext %v", recs, r.Ext)
	}
	qm["key"] = "nope"
	c.mustCall(remoting.QueryNotFound, remoting.QueryMessage, qm, nil)
	r = c.mustCall(remoting.Success, remoting.InvokeBrokerToResetOffset, map[string]string{"topic": "A", "group": "g", "timestamp": "0", "isForce": "true"}, nil)
	if want := `{"offsetTable":{{"brokerName":"edgemq","queueId":0,"topic":"A"}:0,{"brokerName":"edgemq","queueId":1,"topic":"A"}:0}}`; string(r.Body) != want {
		t.Errorf("reset offset\n got %s\nwant %s", r.Body, want)
	}
	if off, err := b.QueryOffset(context.Background(), "g", mq.MessageQueue{Topic: "A", QueueID: 1}); err != nil || off != 0 {
		t.Errorf("offset after reset: %d %v, want 0", off, err)
	}
	// The group's running member is told (RESET_CONSUMER_CLIENT_OFFSET) on its connection.
	for {
		n := waitNote(t, c)
		if n.Code == remoting.NotifyConsumerIDsChanged {
			continue
		}
		if n.Code != remoting.ResetConsumerClientOffset || n.Ext["group"] != "g" || n.Ext["topic"] != "A" || string(n.Body) != string(r.Body) {
			t.Errorf("notification %d %v %s, want 220 for g and A with the new offsets", n.Code, n.Ext, n.Body)
		}
		break
	}

	c.mustCall(remoting.Success, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"g2","consumeBroadcastEnable":false,"retryMaxTimes":3}`))
	if ids, err := b.ConsumerIDs(context.Background(), "", "g2"); err != nil || len(ids) != 0 {
		t.Errorf("group g2 after UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: %v %v", ids, err)
	}
	r = c.mustCall(remoting.Success, remoting.GetAllSubscriptionGroupConfig, nil, nil)
	var groups struct {
		Table map[string]struct {
			GroupName              string
			ConsumeEnable          bool
			ConsumeBroadcastEnable bool
			RetryMaxTimes          int32
			RetryQueueNums         int32
		} `json:"subscriptionGroupTable"`
	}
	if err := json.Unmarshal(r.Body, &groups); err != nil {
		t.Fatalf("group configs %s: %v", r.Body, err)
	}
	if g2 := groups.Table["g2"]; g2.GroupName != "g2" || !g2.ConsumeEnable || g2.ConsumeBroadcastEnable || g2.RetryMaxTimes != 3 || g2.RetryQueueNums != 1 {
		t.Errorf("g2's config %+v", g2)
	}
	if _, ok := groups.Table["g"]; !ok {
		t.Errorf("group configs %s: no g", r.Body)
	}
	c.mustCall(remoting.InvalidParameter, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"a b"}`))
	c.mustCall(remoting.InvalidParameter, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`[`))

	c.mustCall(remoting.Success, remoting.DeleteTopicInBroker, map[string]string{"topic": "A"}, nil)
	c.mustCall(remoting.Success, remoting.DeleteTopicInNamesrv, map[string]string{"topic": "A"}, nil)
	if _, err := b.Topic("A"); !errors.Is(err, mq.ErrTopicNotExist) {
		t.Errorf("topic A after delete: %v", err)
	}
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPullAnsweredByReader: a pull that finds messages, with nothing queued for the writer,
// is answered by the connection's reader itself, which reads the next request once the
// answer is written. A client that does not read that answer holds the reader no longer
// than inlineWriteWait: the writer writes the rest, and the reader reads on; the client is
// cut after WriteTimeout, as by the writer.
func TestPullAnsweredByReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := newLogCounter(t)
		b := openBrokerT(t, nil)
		if _, err := b.Send(context.Background(), &mq.Message{Topic: "T", Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
		s := pipeServer(t, b, Options{WriteTimeout: 5 * time.Second, Logger: lc.logger()})
		a, bpipe := net.Pipe()
		s.admit(bpipe, false)
		pull, _ := remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 0, pullSubscription, 0, "*"), nil).AppendFrame(nil)
		next, _ := remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T", "queueId": "0"}, nil).AppendFrame(nil)
		if _, err := a.Write(pull); err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := a.Write(next)
			wrote <- err
		}()
		synctest.Wait()
		select {
		case err := <-wrote:
			t.Fatalf("the reader read the next request (%v) before the pull's answer was written", err)
		default:
		}
		r := remoting.NewReader(a, 0)
		if resp, err := r.Read(); err != nil || resp.Code != remoting.Success || len(resp.Body) == 0 {
			t.Fatalf("pull answer: %+v, %v", resp, err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if resp, err := r.Read(); err != nil || resp.Code != remoting.Success {
			t.Fatalf("next answer: %+v, %v", resp, err)
		}

		// The same pull again, its answer never read.
		if _, err := a.Write(pull); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(inlineWriteWait)
		mustBeRead(t, a, next) // the answer is the writer's now
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := lc.count("connection closed: slow reader"); got != 1 {
			t.Fatalf("%d slow-reader log lines, want 1", got)
		}
		if _, err := a.Read(make([]byte, 1)); err == nil {
			t.Error("slow reader's connection still open")
		}
		a.Close()
	})
}

// TestRepliesWrittenByReader checks that the answers to requests the reader handled are
// written by the reader itself once it has gone through what it read, with no writer
// goroutine: the answers to requests read together in one write, a lone request's at once.
func TestRepliesWrittenByReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBrokerT(t, &edge.Options{Store: &store.Options{SegmentSize: 4 << 20, MaxMessageSize: testMaxMessage,
			QueueSegmentEntries: 1024, MetaNoSync: true, Flush: commitlog.FlushAsync}})
		s := pipeServer(t, b, Options{})
		a, bp := net.Pipe()
		c := newConn(s, bp, false) // its reader alone: no writer runs
		done := make(chan error, 1)
		go func() { done <- c.readLoop() }()
		var frames []byte
		for i := range 3 {
			req := remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte("m"))
			req.Opaque = int32(i + 1)
			var err error
			if frames, err = req.AppendFrame(frames); err != nil {
				t.Fatal(err)
			}
		}
		read := func(want ...int32) {
			t.Helper()
			buf := make([]byte, 64<<10)
			a.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := a.Read(buf) // a pipe's read returns one write's bytes at most
			if err != nil {
				t.Fatal(err)
			}
			r := remoting.NewReader(bytes.NewReader(buf[:n]), 0)
			for _, op := range want {
				resp, err := r.Read()
				if err != nil {
					t.Fatalf("answer %d not in the write: %v", op, err)
				}
				if resp.Code != remoting.Success || resp.Opaque != op {
					t.Fatalf("answer %d: code %d opaque %d", op, resp.Code, resp.Opaque)
				}
			}
			if _, err := r.Read(); err == nil {
				t.Fatal("more answers in the write than requests")
			}
		}
		if _, err := a.Write(frames[:len(frames)/3*2]); err != nil { // two sends read together
			t.Fatal(err)
		}
		read(1, 2)
		if _, err := a.Write(frames[len(frames)/3*2:]); err != nil {
			t.Fatal(err)
		}
		read(3)
		a.Close()
		<-done
		c.handlers.Wait()
	})
}
