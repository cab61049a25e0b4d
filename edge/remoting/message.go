package remoting

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/edgemq/edgemq/edge/mq"
)

// Message system flag bits of a stored message (RocketMQ's MessageSysFlag).
const (
	SysFlagCompressed  int32 = 0x1  // the body is compressed (zlib unless the type bits say otherwise)
	SysFlagMultiTags   int32 = 0x2  // TAGS holds several tags
	SysFlagBornHostV6  int32 = 0x10 // the born host is IPv6: 16 address bytes
	SysFlagStoreHostV6 int32 = 0x20 // the store host is IPv6
	// SysFlagCompressionMask selects the compression type bits: 0 or 3 zlib, 1 LZ4, 2 ZSTD.
	SysFlagCompressionMask  int32 = 0x700
	sysFlagCompressionShift       = 8
	compressionZlib               = 3
)

// Magic codes of a stored-message record. V1 has a 1-byte topic length; V2, which Java
// brokers write for topics over 127 bytes, a 2-byte one.
const (
	MessageMagicV1 uint32 = 0xDAA320A7
	MessageMagicV2 uint32 = 0xDAA320AB
)

// Property keys the message fields of mq.Message travel in.
const (
	PropertyTags = "TAGS"
	PropertyKeys = "KEYS"
)

// Property string separators: name\x01value\x02.
const (
	propNameSep  = '\x01'
	propEntrySep = '\x02'
)

// Length limits of a stored record and a batch item.
const (
	// MaxPropertiesLen is the longest properties string: its length is a signed 16-bit
	// number.
	MaxPropertiesLen = math.MaxInt16
	// MaxRecordTopicLen is the longest topic of a V1 record: one length byte. Java
	// clients read the byte as signed, so they read topics of at most 127 bytes.
	MaxRecordTopicLen = math.MaxUint8
)

// ParseProperties reads a properties string, name\x01value\x02 repeated (the last \x02
// may be missing). An entry without exactly one \x01 is skipped, as both RocketMQ clients
// do; it never fails. The map is nil when there are no entries.
func ParseProperties(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := make(map[string]string, strings.Count(s, string(propEntrySep))+1)
	for s != "" {
		var entry string
		entry, s, _ = strings.Cut(s, string(propEntrySep))
		name, value, ok := strings.Cut(entry, string(propNameSep))
		if !ok || strings.IndexByte(value, propNameSep) >= 0 {
			continue
		}
		m[name] = value
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// AppendProperties appends p as a properties string, in key order, each entry ending in
// \x02.
func AppendProperties(dst []byte, p map[string]string) []byte {
	var arr [16]string
	keys := arr[:0]
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendProperty(dst, k, p[k])
	}
	return dst
}

func appendProperty(dst []byte, k, v string) []byte {
	dst = append(dst, k...)
	dst = append(dst, propNameSep)
	dst = append(dst, v...)
	return append(dst, propEntrySep)
}

// FormatMessageProperties returns the properties string of m as it travels: m.Properties
// with TAGS and KEYS set from m.Tags and m.Keys when those are not empty.
func FormatMessageProperties(m *mq.Message) string {
	if m == nil {
		return ""
	}
	var buf [256]byte // most properties strings fit: one allocation, the string's
	return string(appendMessageProperties(buf[:0], m))
}

// formatProperties is FormatMessageProperties(m) with uniq, when not empty, as the
// UNIQ_KEY property in place of m's own.
func formatProperties(m *mq.Message, uniq string) string {
	var buf [256]byte // most properties strings fit: one allocation, the string's
	return string(appendMessagePropertiesUniq(buf[:0], m, uniq))
}

// appendMessageProperties appends FormatMessageProperties(m) without building a map.
func appendMessageProperties(dst []byte, m *mq.Message) []byte {
	return appendMessagePropertiesUniq(dst, m, "")
}

// appendMessagePropertiesUniq appends formatProperties(m, uniq).
func appendMessagePropertiesUniq(dst []byte, m *mq.Message, uniq string) []byte {
	var arr [16]string
	keys := arr[:0]
	for k := range m.Properties {
		if !(k == PropertyTags && m.Tags != "" || k == PropertyKeys && m.Keys != "" || k == mq.PropertyUniqKey && uniq != "") {
			keys = append(keys, k)
		}
	}
	if m.Tags != "" {
		keys = append(keys, PropertyTags)
	}
	if m.Keys != "" {
		keys = append(keys, PropertyKeys)
	}
	if uniq != "" {
		keys = append(keys, mq.PropertyUniqKey)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := m.Properties[k]
		switch {
		case k == PropertyTags && m.Tags != "":
			v = m.Tags
		case k == PropertyKeys && m.Keys != "":
			v = m.Keys
		case k == mq.PropertyUniqKey && uniq != "":
			v = uniq
		}
		dst = appendProperty(dst, k, v)
	}
	return dst
}

// appendPropertyList appends props, in key order, with m.Tags and m.Keys merged in as TAGS
// and KEYS (in place of props' own), as appendMessageProperties does.
func appendPropertyList(dst []byte, m *mq.Message, props []Property) []byte {
	var pending [2][2]string // KEYS before TAGS: key order
	np := 0
	if m.Keys != "" {
		pending[np] = [2]string{PropertyKeys, m.Keys}
		np++
	}
	if m.Tags != "" {
		pending[np] = [2]string{PropertyTags, m.Tags}
		np++
	}
	i := 0
	for _, p := range props {
		for i < np && pending[i][0] < string(p.Key) {
			dst = appendProperty(dst, pending[i][0], pending[i][1])
			i++
		}
		if string(p.Key) == PropertyTags && m.Tags != "" || string(p.Key) == PropertyKeys && m.Keys != "" {
			continue
		}
		dst = append(dst, p.Key...)
		dst = append(dst, propNameSep)
		dst = append(dst, p.Value...)
		dst = append(dst, propEntrySep)
	}
	for ; i < np; i++ {
		dst = appendProperty(dst, pending[i][0], pending[i][1])
	}
	return dst
}

// SetMessageProperties sets m's Tags, Keys and Properties from a properties string: TAGS
// and KEYS go to their fields, the rest to Properties (nil when none are left), entries
// read as ParseProperties reads them. A nil m is left alone.
func SetMessageProperties(m *mq.Message, s string) {
	if m == nil {
		return
	}
	m.Tags, m.Keys = "", ""
	var p map[string]string
	for s != "" {
		var entry string
		entry, s, _ = strings.Cut(s, string(propEntrySep))
		name, value, ok := strings.Cut(entry, string(propNameSep))
		if !ok || strings.IndexByte(value, propNameSep) >= 0 {
			continue
		}
		switch name {
		case PropertyTags:
			m.Tags = value
		case PropertyKeys:
			m.Keys = value
		default:
			if p == nil { // sized for this entry and those left
				p = make(map[string]string, strings.Count(s, string(propEntrySep))+1)
			}
			p[name] = value
		}
	}
	m.Properties = p
}

// Stored-message record (a pull body holds records back to back), big-endian; hosts are
// 4 address bytes + i32 port, or 16 + 4 with the V6 sysflag bits:
//
//	TOTALSIZE i32 | MAGIC i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 |
//	PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST | STORETIMESTAMP i64 |
//	STOREHOST | RECONSUMETIMES i32 | PREPAREDTRANSACTIONOFFSET i64 |
//	BODYLEN i32 + body | TOPICLEN u8 (V2: i16) + topic | PROPLEN i16 + properties
const (
	recordFixedV4 = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 // with IPv4 hosts
	hostV4        = 4 + 4
	hostV6        = 16 + 4
)

// hostIsV6 reports whether a is written with 16 address bytes.
func hostIsV6(a netip.AddrPort) bool {
	addr := a.Addr()
	return addr.Is6() && !addr.Is4In6()
}

func appendHost(dst []byte, a netip.AddrPort) []byte {
	addr := a.Addr().Unmap()
	switch {
	case addr.Is6():
		b := addr.As16()
		dst = append(dst, b[:]...)
	case addr.Is4():
		b := addr.As4()
		dst = append(dst, b[:]...)
	default:
		dst = append(dst, 0, 0, 0, 0)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(a.Port()))
}

// BodyCRC returns the BODYCRC of a record: the CRC-32 (IEEE) of the body with the top bit
// cleared, as RocketMQ computes it.
func BodyCRC(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

// AppendMessageExt appends m as a V1 stored-message record: a pull body is such records
// back to back. The SYSFLAG is m.SysFlag with the IPv6 host bits set to match m's
// hosts; TOTALSIZE and BODYCRC are computed; TAGS and KEYS are merged into the
// properties; the prepared-transaction offset is 0. An invalid host is written as
// 0.0.0.0. A topic over MaxRecordTopicLen bytes is an error wrapping mq.ErrInvalidTopic,
// properties over MaxPropertiesLen bytes or a body over 2 GiB one wrapping
// mq.ErrMessageTooLarge; dst is then returned unchanged.
func AppendMessageExt(dst []byte, m *mq.MessageExt) ([]byte, error) {
	return appendMessageExt(dst, m, nil, false)
}

// Property is one message property, its name and value as bytes.
type Property struct {
	Key, Value []byte
}

// AppendMessageExtProps is AppendMessageExt with the properties given in key order as
// props, in place of m.Properties (ignored): a broker encodes a stored message's properties
// straight from its bytes. TAGS and KEYS are merged in as AppendMessageExt does.
func AppendMessageExtProps(dst []byte, m *mq.MessageExt, props []Property) ([]byte, error) {
	return appendMessageExt(dst, m, props, true)
}

// appendMessageExt is AppendMessageExt, with props in place of m.Properties if byProps.
func appendMessageExt(dst []byte, m *mq.MessageExt, props []Property, byProps bool) ([]byte, error) {
	if m == nil {
		return dst, fmt.Errorf("%w: nil message", ErrMalformed)
	}
	if len(m.Topic) > MaxRecordTopicLen {
		return dst, fmt.Errorf("%w: topic of %d bytes, at most %d in a record", mq.ErrInvalidTopic, len(m.Topic), MaxRecordTopicLen)
	}
	start := len(dst)
	sysFlag := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	size := recordFixedV4 + 4 + len(m.Body) + 1 + len(m.Topic) + 2
	if hostIsV6(m.BornHost) {
		sysFlag |= SysFlagBornHostV6
		size += hostV6 - hostV4
	}
	if hostIsV6(m.StoreHost) {
		sysFlag |= SysFlagStoreHostV6
		size += hostV6 - hostV4
	}
	dst = binary.BigEndian.AppendUint32(dst, 0) // TOTALSIZE, set below
	dst = binary.BigEndian.AppendUint32(dst, MessageMagicV1)
	dst = binary.BigEndian.AppendUint32(dst, uint32(BodyCRC(m.Body)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.QueueID))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Flag))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.QueueOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(sysFlag))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.BornTime))
	dst = appendHost(dst, m.BornHost)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.StoreTime))
	dst = appendHost(dst, m.StoreHost)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = binary.BigEndian.AppendUint64(dst, 0) // PREPAREDTRANSACTIONOFFSET
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	propAt := len(dst)
	dst = append(dst, 0, 0)
	if byProps {
		dst = appendPropertyList(dst, &m.Message, props)
	} else {
		dst = appendMessageProperties(dst, &m.Message)
	}
	propLen := len(dst) - propAt - 2
	if propLen > MaxPropertiesLen {
		return dst[:start], fmt.Errorf("%w: properties of %d bytes, at most %d", mq.ErrMessageTooLarge, propLen, MaxPropertiesLen)
	}
	size += propLen
	if size > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: record of %d bytes", mq.ErrMessageTooLarge, size)
	}
	binary.BigEndian.PutUint16(dst[propAt:], uint16(propLen))
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// decoder reads big-endian fields, failing once for all with ErrMalformed.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: %s of %d bytes, %d left", ErrMalformed, field, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(field string) uint8 {
	if b := d.take(1, field); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) i16(field string) int16 {
	if b := d.take(2, field); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) i32(field string) int32 {
	if b := d.take(4, field); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) i64(field string) int64 {
	if b := d.take(8, field); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// DecodeMessages reads the stored-message records of a pull (or query) body, V1 or V2.
// Each record must be exactly as long as its TOTALSIZE says. The BODYCRC is not checked,
// as clients do not check it; a body with SysFlagCompressed set is returned as stored (see
// DecompressBody). Bodies alias body: the caller owns the messages and body, and must not
// change body while it uses them. TAGS and KEYS go to the messages' Tags and Keys.
// BrokerName is empty: the body does not name it.
//
// The topics and properties of all the records share one string, and records of one topic
// one topic string: a pull costs a few allocations, and each message one more for its
// properties map, if it has properties.
func DecodeMessages(body []byte) ([]mq.MessageExt, error) {
	return decodeMessages(body, false)
}

// decodeMessages is DecodeMessages; with owned, nothing ever writes body (a frame a
// Reader read), and the messages' topics and properties are strings of its memory, not
// copies: a pull costs no allocation for them.
func decodeMessages(body []byte, owned bool) ([]mq.MessageExt, error) {
	n := 0 // records, as far as their sizes can be followed: the slice's capacity
	for off := 0; off+4 <= len(body); n++ {
		size := int(int32(binary.BigEndian.Uint32(body[off:])))
		if size < recordFixedV4 {
			n++
			break
		}
		off += size
	}
	if len(body) == 0 {
		return nil, nil
	}
	n = max(n, 1)
	msgs := make([]mq.MessageExt, 0, n)
	var arr [64]recordStrings // a pull's records, usually: no allocation
	strs := arr[:0]
	if n > len(arr) && !owned {
		strs = make([]recordStrings, 0, n)
	}
	total := 0
	var lastTopic []byte
	for off := 0; off < len(body); {
		msgs = append(msgs, mq.MessageExt{})
		rs, size, err := decodeRecord(body[off:], &msgs[len(msgs)-1])
		if err != nil {
			return nil, fmt.Errorf("message %d at byte %d: %w", len(msgs)-1, off, err)
		}
		off += size
		if owned {
			m := &msgs[len(msgs)-1]
			m.Topic = headString(rs.topic, true)
			SetMessageProperties(&m.Message, headString(rs.props, true))
			continue
		}
		if lastTopic != nil && bytes.Equal(rs.topic, lastTopic) {
			rs.sameTopic = true
		} else {
			total += len(rs.topic)
			lastTopic = rs.topic
		}
		total += len(rs.props)
		strs = append(strs, rs)
	}
	if owned {
		return msgs, nil
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, rs := range strs {
		if !rs.sameTopic {
			sb.Write(rs.topic)
		}
		sb.Write(rs.props)
	}
	all := sb.String()
	at := 0
	topic := ""
	for i, rs := range strs {
		if !rs.sameTopic {
			topic = all[at : at+len(rs.topic)]
			at += len(rs.topic)
		}
		msgs[i].Topic = topic
		SetMessageProperties(&msgs[i].Message, all[at:at+len(rs.props)])
		at += len(rs.props)
	}
	return msgs, nil
}

// recordStrings are the topic and properties of a record, not yet strings.
type recordStrings struct {
	topic, props []byte
	sameTopic    bool // the topic is the previous record's
}

// decodeRecord reads the record at the start of b into m and returns its topic and
// properties (which the caller sets) and its length. It reads fields by offset, with no
// decoder state behind a pointer: a pull decodes many records, often while the collector
// runs, and every pointer write then costs a write barrier.
func decodeRecord(b []byte, m *mq.MessageExt) (recordStrings, int, error) {
	var rs recordStrings
	if len(b) < 4 {
		return rs, 0, fmt.Errorf("%w: TOTALSIZE of 4 bytes, %d left", ErrMalformed, len(b))
	}
	size := int32(binary.BigEndian.Uint32(b))
	if size < recordFixedV4 || int64(size) > int64(len(b)) {
		return rs, 0, fmt.Errorf("%w: TOTALSIZE %d, %d bytes left", ErrMalformed, size, len(b))
	}
	r := b[:size:size]
	magic := binary.BigEndian.Uint32(r[4:])
	if magic != MessageMagicV1 && magic != MessageMagicV2 {
		return rs, 0, fmt.Errorf("%w: MAGIC %#x", ErrMalformed, magic)
	}
	// The fixed fields up to BORNTIMESTAMP: recordFixedV4 covers them.
	m.StoreSize = size
	m.QueueID = int32(binary.BigEndian.Uint32(r[12:]))
	m.Flag = int32(binary.BigEndian.Uint32(r[16:]))
	m.QueueOffset = int64(binary.BigEndian.Uint64(r[20:]))
	m.CommitLogOffset = int64(binary.BigEndian.Uint64(r[28:]))
	m.SysFlag = int32(binary.BigEndian.Uint32(r[36:]))
	m.BornTime = int64(binary.BigEndian.Uint64(r[40:]))
	pos := 48
	var err error
	if m.BornHost, pos, err = readHost(r, pos, m.SysFlag&SysFlagBornHostV6 != 0, "BORNHOST"); err != nil {
		return rs, 0, err
	}
	if pos+8 > len(r) {
		return rs, 0, fmt.Errorf("%w: STORETIMESTAMP of 8 bytes, %d left", ErrMalformed, len(r)-pos)
	}
	m.StoreTime = int64(binary.BigEndian.Uint64(r[pos:]))
	if m.StoreHost, pos, err = readHost(r, pos+8, m.SysFlag&SysFlagStoreHostV6 != 0, "STOREHOST"); err != nil {
		return rs, 0, err
	}
	// RECONSUMETIMES i32, PREPAREDTRANSACTIONOFFSET i64, BODYLEN i32
	if pos+16 > len(r) {
		return rs, 0, fmt.Errorf("%w: RECONSUMETIMES to BODYLEN of 16 bytes, %d left", ErrMalformed, len(r)-pos)
	}
	m.ReconsumeTimes = int32(binary.BigEndian.Uint32(r[pos:]))
	bodyLen := int(int32(binary.BigEndian.Uint32(r[pos+12:])))
	pos += 16
	if bodyLen < 0 || bodyLen > len(r)-pos {
		return rs, 0, fmt.Errorf("%w: body of %d bytes, %d left", ErrMalformed, bodyLen, len(r)-pos)
	}
	if bodyLen > 0 {
		m.Body = r[pos : pos+bodyLen : pos+bodyLen]
	}
	pos += bodyLen
	var topicLen int
	if magic == MessageMagicV2 {
		if pos+2 > len(r) {
			return rs, 0, fmt.Errorf("%w: TOPICLEN of 2 bytes, %d left", ErrMalformed, len(r)-pos)
		}
		topicLen = int(int16(binary.BigEndian.Uint16(r[pos:])))
		pos += 2
	} else {
		if pos+1 > len(r) {
			return rs, 0, fmt.Errorf("%w: TOPICLEN of 1 byte, %d left", ErrMalformed, len(r)-pos)
		}
		topicLen = int(r[pos])
		pos++
	}
	if topicLen < 0 || topicLen > len(r)-pos {
		return rs, 0, fmt.Errorf("%w: topic of %d bytes, %d left", ErrMalformed, topicLen, len(r)-pos)
	}
	rs.topic = r[pos : pos+topicLen]
	pos += topicLen
	if pos+2 > len(r) {
		return rs, 0, fmt.Errorf("%w: PROPLEN of 2 bytes, %d left", ErrMalformed, len(r)-pos)
	}
	propLen := int(int16(binary.BigEndian.Uint16(r[pos:])))
	pos += 2
	if propLen < 0 || propLen > len(r)-pos {
		return rs, 0, fmt.Errorf("%w: properties of %d bytes, %d left", ErrMalformed, propLen, len(r)-pos)
	}
	rs.props = r[pos : pos+propLen]
	if pos += propLen; pos != len(r) {
		return rs, 0, fmt.Errorf("%w: %d bytes after the properties of a record of %d", ErrMalformed, len(r)-pos, size)
	}
	return rs, int(size), nil
}

// readHost reads a host (4 or, with v6, 16 address bytes and an i32 port) at r[pos:] and
// returns it and the position after it.
func readHost(r []byte, pos int, v6 bool, field string) (netip.AddrPort, int, error) {
	n := 4
	if v6 {
		n = 16
	}
	if pos+n+4 > len(r) {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %s of %d bytes, %d left", ErrMalformed, field, n+4, len(r)-pos)
	}
	port := int32(binary.BigEndian.Uint32(r[pos+n:]))
	if port < 0 || port > math.MaxUint16 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %s port %d", ErrMalformed, field, port)
	}
	var a netip.Addr
	if v6 {
		a = netip.AddrFrom16([16]byte(r[pos : pos+16]))
	} else {
		a = netip.AddrFrom4([4]byte(r[pos : pos+4]))
	}
	return netip.AddrPortFrom(a, uint16(port)), pos + n + 4, nil
}

// Batch item (SEND_BATCH_MESSAGE body: items back to back), big-endian:
//
//	TOTALSIZE i32 | MAGIC i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODYLEN i32 + body |
//	PROPLEN i16 + properties
const batchItemFixed = 4 + 4 + 4 + 4 + 4 + 2

// AppendBatch appends msgs as the body of a batch send, TAGS and KEYS merged into each
// item's properties. The topic travels in the send header, not in the items. Properties
// over MaxPropertiesLen bytes or an item over 2 GiB are an error wrapping
// mq.ErrMessageTooLarge, a nil message one wrapping ErrMalformed; dst is then returned
// unchanged.
func AppendBatch(dst []byte, msgs []*mq.Message) ([]byte, error) {
	start := len(dst)
	for i, m := range msgs {
		if m == nil {
			return dst[:start], fmt.Errorf("%w: batch message %d is nil", ErrMalformed, i)
		}
		at := len(dst)
		dst = binary.BigEndian.AppendUint32(dst, 0) // TOTALSIZE, set below
		dst = binary.BigEndian.AppendUint32(dst, 0) // MAGIC
		dst = binary.BigEndian.AppendUint32(dst, 0) // BODYCRC
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.Flag))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
		propAt := len(dst)
		dst = append(dst, 0, 0)
		dst = appendMessageProperties(dst, m)
		propLen := len(dst) - propAt - 2
		if propLen > MaxPropertiesLen {
			return dst[:start], fmt.Errorf("%w: batch message %d: properties of %d bytes, at most %d", mq.ErrMessageTooLarge, i, propLen, MaxPropertiesLen)
		}
		if len(dst)-at > math.MaxInt32 {
			return dst[:start], fmt.Errorf("%w: batch message %d of %d bytes", mq.ErrMessageTooLarge, i, len(dst)-at)
		}
		binary.BigEndian.PutUint16(dst[propAt:], uint16(propLen))
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	}
	return dst, nil
}

// DecodeBatch reads the body of a batch send. Each item must be exactly as long as its
// TOTALSIZE says; MAGIC and BODYCRC are ignored. The messages have no Topic (it is the
// send header's); TAGS and KEYS go to Tags and Keys; bodies alias body.
func DecodeBatch(body []byte) ([]*mq.Message, error) {
	var msgs []*mq.Message
	for off := 0; off < len(body); {
		b := body[off:]
		d := &decoder{b: b}
		size := d.i32("TOTALSIZE")
		if d.err == nil && (size < batchItemFixed || int64(size) > int64(len(b))) {
			d.err = fmt.Errorf("%w: TOTALSIZE %d, %d bytes left", ErrMalformed, size, len(b))
		}
		if d.err != nil {
			return nil, fmt.Errorf("batch message %d at byte %d: %w", len(msgs), off, d.err)
		}
		d.b = b[4:size]
		d.i32("MAGIC")
		d.i32("BODYCRC")
		m := &mq.Message{Flag: d.i32("FLAG")}
		if mb := d.take(int(d.i32("BODYLEN")), "body"); len(mb) > 0 {
			m.Body = mb
		}
		props := d.take(int(d.i16("PROPLEN")), "properties")
		if d.err == nil && len(d.b) != 0 {
			d.err = fmt.Errorf("%w: %d bytes after the properties of an item of %d", ErrMalformed, len(d.b), size)
		}
		if d.err != nil {
			return nil, fmt.Errorf("batch message %d at byte %d: %w", len(msgs), off, d.err)
		}
		SetMessageProperties(m, string(props))
		msgs = append(msgs, m)
		off += int(size)
	}
	return msgs, nil
}

// zlibReaders keeps zlib readers between inflations (each holds a decompressor's tables).
var zlibReaders sync.Pool

// newZlibReader returns a zlib reader of data, from the pool when it has one; the caller
// puts it back when done.
func newZlibReader(data []byte) (io.ReadCloser, error) {
	if zr, ok := zlibReaders.Get().(io.ReadCloser); ok {
		if err := zr.(zlib.Resetter).Reset(bytes.NewReader(data), nil); err != nil {
			zlibReaders.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return zlib.NewReader(bytes.NewReader(data))
}

// Inflate decompresses a zlib stream (RocketMQ's compressed bodies) of at most maxSize
// bytes. Output over maxSize is an error wrapping mq.ErrMessageTooLarge, found without
// allocating more than maxSize+1 bytes whatever the input claims; a corrupt stream one
// wrapping ErrMalformed.
func Inflate(data []byte, maxSize int) ([]byte, error) {
	maxSize = min(max(maxSize, 0), math.MaxInt32) // no body is larger
	zr, err := newZlibReader(data)
	if err != nil {
		return nil, fmt.Errorf("%w: zlib: %v", ErrMalformed, err)
	}
	defer zlibReaders.Put(zr)
	limit := int64(maxSize) + 1
	// Start from a guess of four times the input and grow by doubling, never past limit.
	buf := make([]byte, min(limit, max(int64(4*len(data)), 512)))
	n := 0
	for {
		if n == len(buf) {
			if int64(n) >= limit {
				return nil, fmt.Errorf("%w: inflated body over %d bytes", mq.ErrMessageTooLarge, maxSize)
			}
			nb := make([]byte, min(limit, 2*int64(len(buf))))
			copy(nb, buf)
			buf = nb
		}
		m, err := zr.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: zlib: %v", ErrMalformed, err)
		}
	}
	if n > maxSize {
		return nil, fmt.Errorf("%w: inflated body over %d bytes", mq.ErrMessageTooLarge, maxSize)
	}
	return buf[:n:n], nil
}

// DecompressBody inflates m's body if its SysFlag marks it compressed, and clears the
// flag. Only zlib (compression type 0 or 3) is supported; another type is an error
// wrapping ErrMalformed. See Inflate for maxSize.
func DecompressBody(m *mq.MessageExt, maxSize int) error {
	if m == nil || m.SysFlag&SysFlagCompressed == 0 {
		return nil
	}
	if t := (m.SysFlag & SysFlagCompressionMask) >> sysFlagCompressionShift; t != 0 && t != compressionZlib {
		return fmt.Errorf("%w: compression type %d", ErrMalformed, t)
	}
	body, err := Inflate(m.Body, maxSize)
	if err != nil {
		return err
	}
	m.Body = body
	m.SysFlag &^= SysFlagCompressed | SysFlagCompressionMask
	return nil
}
