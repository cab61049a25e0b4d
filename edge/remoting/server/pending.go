package server

// Wire formats the server needs until package remoting provides them.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// parseProperties decodes RocketMQ's properties string: k\x01v\x02 repeated.
func parseProperties(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, "\x02") {
		k, v, ok := strings.Cut(kv, "\x01")
		if ok && k != "" {
			m[k] = v
		}
	}
	return m
}

func appendProperties(dst []byte, m *mq.Message) []byte {
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	add := func(k, v string) {
		dst = append(dst, k...)
		dst = append(dst, 1)
		dst = append(dst, v...)
		dst = append(dst, 2)
	}
	if m.Tags != "" {
		add("TAGS", m.Tags)
	}
	if m.Keys != "" {
		add("KEYS", m.Keys)
	}
	for _, k := range keys {
		if k != "TAGS" && k != "KEYS" {
			add(k, m.Properties[k])
		}
	}
	return dst
}

// decodeBatch decodes a SEND_BATCH_MESSAGE body.
func decodeBatch(body []byte) ([]*mq.Message, error) {
	var out []*mq.Message
	for len(body) > 0 {
		if len(body) < 20 {
			return nil, fmt.Errorf("%w: batch item of %d bytes", remoting.ErrMalformed, len(body))
		}
		size := int(int32(binary.BigEndian.Uint32(body)))
		if size < 22 || size > len(body) {
			return nil, fmt.Errorf("%w: batch item size %d", remoting.ErrMalformed, size)
		}
		item := body[:size]
		body = body[size:]
		flag := int32(binary.BigEndian.Uint32(item[12:]))
		bl := int(int32(binary.BigEndian.Uint32(item[16:])))
		if bl < 0 || 20+bl+2 > size {
			return nil, fmt.Errorf("%w: batch item body length %d", remoting.ErrMalformed, bl)
		}
		b := item[20 : 20+bl]
		pl := int(binary.BigEndian.Uint16(item[20+bl:]))
		if 22+bl+pl > size {
			return nil, fmt.Errorf("%w: batch item properties length %d", remoting.ErrMalformed, pl)
		}
		m := &mq.Message{Flag: flag, Body: b}
		setProperties(m, parseProperties(string(item[22+bl:22+bl+pl])))
		out = append(out, m)
	}
	return out, nil
}

// appendMessageExt appends m as a V1 commit-log record.
func appendMessageExt(dst []byte, m *mq.MessageExt) []byte {
	props := appendProperties(nil, &m.Message)
	born, store := m.BornHost, m.StoreHost
	sys := m.SysFlag
	hostLen := func(a netip.AddrPort, bit int32) int {
		if a.Addr().Unmap().Is4() || !a.IsValid() {
			return 8
		}
		sys |= bit
		return 20
	}
	bl, sl := hostLen(born, 0x10), hostLen(store, 0x20)
	total := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + bl + 8 + sl + 4 + 8 + 4 + len(m.Body) + 1 + len(m.Topic) + 2 + len(props)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(total))
	dst = be.AppendUint32(dst, 0xDAA320A7)
	dst = be.AppendUint32(dst, crc32.ChecksumIEEE(m.Body))
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = be.AppendUint32(dst, uint32(sys))
	dst = be.AppendUint64(dst, uint64(m.BornTime))
	appendHost := func(a netip.AddrPort, n int) {
		ad := a.Addr().Unmap()
		if n == 8 {
			var ip [4]byte
			if a.IsValid() {
				ip = ad.As4()
			}
			dst = append(dst, ip[:]...)
		} else {
			ip := ad.As16()
			dst = append(dst, ip[:]...)
		}
		dst = be.AppendUint32(dst, uint32(a.Port()))
	}
	appendHost(born, bl)
	dst = be.AppendUint64(dst, uint64(m.StoreTime))
	appendHost(store, sl)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, 0)
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	dst = be.AppendUint16(dst, uint16(len(props)))
	return append(dst, props...)
}

// encodeRoute encodes a route as RocketMQ's TopicRouteData, compact.
func encodeRoute(r mq.TopicRoute) []byte {
	var b strings.Builder
	b.WriteString(`{"orderTopicConf":"","queueDatas":[`)
	for i, q := range r.Queues {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"brokerName":%q,"readQueueNums":%d,"writeQueueNums":%d,"perm":%d,"topicSysFlag":0}`, q.BrokerName, q.ReadQueues, q.WriteQueues, q.Perm)
	}
	b.WriteString(`],"brokerDatas":[`)
	for i, bd := range r.Brokers {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"cluster":%q,"brokerName":%q,"brokerAddrs":{`, bd.Cluster, bd.Name)
		ids := make([]int64, 0, len(bd.Addrs))
		for id := range bd.Addrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for j, id := range ids {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%d":%q`, id, bd.Addrs[id])
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`],"filterServerTable":{}}`)
	return []byte(b.String())
}

// decodeHeartbeat decodes HeartbeatData leniently (Go and Java forms).
func decodeHeartbeat(body []byte) (mq.Heartbeat, error) {
	var raw struct {
		ClientID        string `json:"clientID"`
		ProducerDataSet []struct {
			GroupName string `json:"groupName"`
		} `json:"producerDataSet"`
		ConsumerDataSet []struct {
			GroupName           string `json:"groupName"`
			ConsumeType         string `json:"consumeType"`
			MessageModel        string `json:"messageModel"`
			ConsumeFromWhere    string `json:"consumeFromWhere"`
			SubscriptionDataSet []struct {
				Topic      string          `json:"topic"`
				SubString  string          `json:"subString"`
				SubVersion json.RawMessage `json:"subVersion"`
			} `json:"subscriptionDataSet"`
		} `json:"consumerDataSet"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return mq.Heartbeat{}, fmt.Errorf("%w: heartbeat: %v", remoting.ErrMalformed, err)
	}
	hb := mq.Heartbeat{ClientID: raw.ClientID}
	for _, p := range raw.ProducerDataSet {
		hb.Producers = append(hb.Producers, p.GroupName)
	}
	for _, c := range raw.ConsumerDataSet {
		cd := mq.ConsumerData{Group: c.GroupName, FromWhere: c.ConsumeFromWhere}
		if c.MessageModel == "BROADCASTING" {
			cd.Model = mq.Broadcasting
		}
		if c.ConsumeType == "CONSUME_ACTIVELY" {
			cd.ConsumeType = mq.ConsumeActively
		}
		for _, sd := range c.SubscriptionDataSet {
			v, _ := strconv.ParseInt(strings.Trim(string(sd.SubVersion), `"`), 10, 64)
			cd.Subscriptions = append(cd.Subscriptions, mq.Subscription{Topic: sd.Topic, Expression: sd.SubString, SubVersion: v})
		}
		hb.Consumers = append(hb.Consumers, cd)
	}
	return hb, nil
}
