package mq

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"unsafe"
)

// Message properties that brokers and clients read or write, RocketMQ's names.
const (
	// PropertyDelayLevel (DELAY) delays delivery by a delay level (1-based).
	PropertyDelayLevel = "DELAY"
	// PropertyRealTopic and PropertyRealQueueID name where a delayed message goes when due.
	PropertyRealTopic   = "REAL_TOPIC"
	PropertyRealQueueID = "REAL_QID"
	// PropertyRetryTopic is the original topic of a message in a retry topic.
	PropertyRetryTopic = "RETRY_TOPIC"
	// PropertyOriginMessageID is the id of the message a retry copy was made from.
	PropertyOriginMessageID = "ORIGIN_MESSAGE_ID"
	// PropertyMaxReconsumeTimes is the reconsume limit of a retry copy: past it, the copy
	// goes to the dead-letter topic.
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	// PropertyReconsumeTime carries the reconsume count of a message a client sends to a
	// retry topic itself (when send-back failed); the broker stores it as the message's
	// ReconsumeTimes and drops the property.
	PropertyReconsumeTime = "RECONSUME_TIME"
	// PropertyUniqKey is the unique id a RocketMQ producer gives each message.
	PropertyUniqKey = "UNIQ_KEY"
	// PropertyTransactionPrepared ("true") marks the half message of a transaction: the
	// broker holds it until its producer commits or rolls the transaction back.
	PropertyTransactionPrepared = "TRAN_MSG"
	// PropertyProducerGroup is the producer group of a transaction's half message, which
	// the broker asks about a transaction whose outcome it does not learn.
	PropertyProducerGroup = "PGROUP"
)

// SysFlagCompressed marks a compressed body in a stored message's SysFlag.
const SysFlagCompressed = 0x1

// Message is a message as a producer sends it.
type Message struct {
	Topic string
	// Flag is the application's own integer, stored and delivered untouched.
	Flag int32
	// Tags is the message's tag, which consumers filter on ("TagA"; RocketMQ's TAGS).
	Tags string
	// Keys are the message's business keys, space-separated (RocketMQ's KEYS).
	Keys string
	// Properties are the message's other properties. The broker reads the ones named by the
	// Property constants.
	Properties map[string]string
	Body       []byte
}

// SetDelayLevel asks the broker to deliver m after delay level level (1-based: 1 s, 5 s,
// 10 s, 30 s, 1 m, ... with the default levels); 0 or less delivers it at once.
func (m *Message) SetDelayLevel(level int) {
	if level <= 0 {
		delete(m.Properties, PropertyDelayLevel)
		return
	}
	m.SetProperty(PropertyDelayLevel, strconv.Itoa(level))
}

// DelayLevel returns m's delay level, 0 when it has none. A level that is not a
// non-negative integer is an error wrapping ErrInvalidArgument.
func (m *Message) DelayLevel() (int, error) {
	s, ok := m.Properties[PropertyDelayLevel]
	if !ok || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: delay level %q", ErrInvalidArgument, s)
	}
	return n, nil
}

// SetProperty sets one property, making the map if m has none.
func (m *Message) SetProperty(key, value string) {
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	m.Properties[key] = value
}

// MessageExt is a message as a consumer receives it: the message, where it is stored, and
// what the broker recorded about it (RocketMQ's MessageExt).
type MessageExt struct {
	Message
	BrokerName  string
	QueueID     int32
	QueueOffset int64 // dense per queue, from 0
	// SysFlag holds RocketMQ's system flag bits; a broker delivers bodies uncompressed.
	SysFlag        int32
	BornTime       int64 // unix ms, when the producer made it (the store time if unknown)
	BornHost       netip.AddrPort
	StoreTime      int64 // unix ms, when the broker stored it
	StoreHost      netip.AddrPort
	ReconsumeTimes int32 // how many times it was consumed and sent back before
	// CommitLogOffset is the message's position in its broker's commit log: a stable id,
	// which send-back and the offset message id use.
	CommitLogOffset int64
	StoreSize       int32 // bytes of the stored record
}

// Queue returns the queue m was read from.
func (m *MessageExt) Queue() MessageQueue {
	return MessageQueue{Topic: m.Topic, BrokerName: m.BrokerName, QueueID: m.QueueID}
}

// OffsetMsgID returns RocketMQ's offset message id of m: its store host and commit-log
// offset (see OffsetMsgID).
func (m *MessageExt) OffsetMsgID() string { return OffsetMsgID(m.StoreHost, m.CommitLogOffset) }

// MsgID returns m's id as RocketMQ consumers see it: its UNIQ_KEY property when the
// producer set one, else its offset message id.
func (m *MessageExt) MsgID() string {
	if id := m.Properties[PropertyUniqKey]; id != "" {
		return id
	}
	return m.OffsetMsgID()
}

// OffsetMsgID returns RocketMQ's offsetMsgId of the message stored at commit-log offset pos
// on host: upper-case hex of the IPv4 address, the port (i32) and the offset (i64), 32
// characters; 56 with IPv6.
func OffsetMsgID(host netip.AddrPort, pos int64) string {
	const hexdig = "0123456789ABCDEF"
	a := host.Addr().Unmap()
	var raw [28]byte
	n := 0
	if a.Is4() {
		ip := a.As4()
		n = copy(raw[:], ip[:])
	} else {
		ip := a.As16()
		n = copy(raw[:], ip[:])
	}
	binary.BigEndian.PutUint32(raw[n:], uint32(host.Port()))
	binary.BigEndian.PutUint64(raw[n+4:], uint64(pos))
	n += 12
	out := make([]byte, 2*n)
	for i, c := range raw[:n] {
		out[2*i], out[2*i+1] = hexdig[c>>4], hexdig[c&15]
	}
	return unsafe.String(&out[0], len(out))
}

// fromHex is the value of the hex digit c (either case).
func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ParseOffsetMsgID returns the store host and commit-log offset of an offset message id.
// Errors wrap ErrInvalidArgument.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	var raw [28]byte
	if len(id) != 32 && len(id) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: message id %q", ErrInvalidArgument, id)
	}
	b := raw[:len(id)/2]
	for i := range b {
		hi, ok1 := fromHex(id[2*i])
		lo, ok2 := fromHex(id[2*i+1])
		if !ok1 || !ok2 {
			return netip.AddrPort{}, 0, fmt.Errorf("%w: message id %q", ErrInvalidArgument, id)
		}
		b[i] = hi<<4 | lo
	}
	n := len(b) - 12
	a, _ := netip.AddrFromSlice(b[:n])
	port := binary.BigEndian.Uint32(b[n:])
	pos := int64(binary.BigEndian.Uint64(b[n+4:]))
	if port > 65535 || pos < 0 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: message id %q", ErrInvalidArgument, id)
	}
	return netip.AddrPortFrom(a, uint16(port)), pos, nil
}
