package edge

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"unsafe"

	"github.com/edgemq/edgemq/store"
)

// Message is a message as stored and pulled: topic, queue, tags, keys, properties, body, flag
// and the fields the store sets (queue offset, store time, position).
type Message = store.Message

// Message properties the broker reads or writes, RocketMQ's names.
const (
	PropertyDelayLevel        = "DELAY"
	PropertyRealTopic         = "REAL_TOPIC"
	PropertyRealQueueID       = "REAL_QID"
	PropertyRetryTopic        = "RETRY_TOPIC"
	PropertyOriginMessageID   = "ORIGIN_MESSAGE_ID"
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	PropertyUniqKey           = "UNIQ_KEY"
)

// RocketMQ sysflag bits the broker sets.
const (
	SysFlagCompressed = 0x1
	// sysFlagZstd is RocketMQ's compression type 2 (ZSTD) in bits 8-10.
	sysFlagZstd       = 2 << 8
	sysFlagCompressMs = 7 << 8
)

// SetDelayLevel asks the broker to deliver m after delay level level (1-based, Options.
// DelayLevels); 0 delivers it at once.
func SetDelayLevel(m *Message, level int) {
	if level <= 0 {
		delete(m.Properties, PropertyDelayLevel)
		return
	}
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	m.Properties[PropertyDelayLevel] = strconv.Itoa(level)
}

// DelayLevel returns m's delay level, 0 when it has none.
func DelayLevel(m *Message) (int, error) {
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

// QueueSelector picks a write queue in [0, queues) for a message. Send uses round robin when
// none is given. It is given a copy of the message: changes it makes are not stored.
type QueueSelector func(queues int32, m *Message) int32

// QueueID selects one queue by number.
func QueueID(id int32) QueueSelector { return func(int32, *Message) int32 { return id } }

// ShardingKey selects a queue by a hash of key, so messages with one key always land on one
// queue, in order, as ordered consumers need.
func ShardingKey(key string) QueueSelector {
	h := fnv.New32a()
	h.Write([]byte(key))
	sum := h.Sum32()
	return func(queues int32, _ *Message) int32 { return int32(sum % uint32(queues)) }
}

// MessageID returns RocketMQ's offsetMsgId of the message stored at pos on host: 32 upper-case
// hex characters of the IPv4 address, the port (i32) and the position (i64); 56 with IPv6.
func MessageID(host netip.AddrPort, pos int64) string {
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

// ParseMessageID returns the host and position of a message id made by MessageID.
func ParseMessageID(id string) (netip.AddrPort, int64, error) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: message id %q", ErrInvalidArgument, id)
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
