package store

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// PayloadVersion is the version of the message codec below, recorded in every commitlog
// segment header and in the meta store's settings.
const PayloadVersion = 1

// Message is one stored message. The store sets QueueOffset, StoreTime, Pos and Size.
type Message struct {
	Topic          string
	QueueID        int32
	QueueOffset    int64 // set by the store: dense per (topic, queue), from 0
	Flag           int32
	SysFlag        int32 // RocketMQ sysflag bits; SysFlagCompressed marks a compressed body
	BornTime       int64 // unix ms, set by the producer (0: the store time)
	StoreTime      int64 // unix ms, set by the store
	BornHost       netip.AddrPort
	ReconsumeTimes int32
	Tags           string
	Keys           string
	Properties     map[string]string
	// EncodedProperties, when not empty, are the message's properties encoded already
	// (AppendProperties), which the record holds as they are, in place of Properties: the
	// record is the one Properties holding the same pairs gives. Properties must then be
	// empty. The store never sets it: a message read back has its properties in Properties.
	EncodedProperties []byte
	Body              []byte

	Pos  int64 // commitlog position: a stable global id, set by the store
	Size int32 // bytes of the record in the commitlog, set by the store

	// Durability is when the store may acknowledge the message; it is not stored.
	Durability Durability
}

// Durability is when an append is acknowledged, per message (a topic's choice): a batch is
// acknowledged as its strictest message asks.
type Durability int8

const (
	// DurabilityDefault follows the store's flush policy (Options.Flush).
	DurabilityDefault Durability = iota
	// DurabilitySync acknowledges once an fsync covers the message, whatever the store's
	// flush policy. (In a store with the async policy, readers may see it before.)
	DurabilitySync
	// DurabilityAsync acknowledges once the message is written, whatever the store's flush
	// policy: a power cut may lose what was acknowledged in the last Options.FlushInterval
	// (and up to Options.FlushBytes). In a store with the sync policy the message reaches
	// readers once durable, so its Append returns before readers see it, by at most about
	// FlushInterval (an fsync that another append asks for comes sooner).
	DurabilityAsync
)

// String returns "default", "sync" or "async", as ParseDurability reads them.
func (d Durability) String() string {
	switch d {
	case DurabilityDefault:
		return "default"
	case DurabilitySync:
		return "sync"
	case DurabilityAsync:
		return "async"
	}
	return fmt.Sprintf("Durability(%d)", int8(d))
}

// ParseDurability parses "sync", "async", or "default" or "" (DurabilityDefault).
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "", "default":
		return DurabilityDefault, nil
	case "sync":
		return DurabilitySync, nil
	case "async":
		return DurabilityAsync, nil
	}
	return 0, fmt.Errorf("%w: unknown durability %q (want sync, async or default)", ErrOptions, s)
}

// Presence bits, the first byte of a payload (store/FORMAT.md).
const (
	hasFlag       = 1 << iota // uvarint flag
	hasSysFlag                // uvarint sysflag
	hasReconsume              // uvarint reconsume times
	hasBornHost               // u8 length (6 or 18) + address bytes + u16 port
	hasTags                   // uvarint length + bytes
	hasKeys                   // uvarint length + bytes
	hasProperties             // uvarint count, then per pair uvarint length + key, uvarint length + value
	hasBornDelta              // zigzag varint bornTime - storeTime
)

// appendPayload appends m's payload encoding to dst.
func (m *Message) appendPayload(dst []byte) []byte {
	var bits byte
	bornDelta := int64(0)
	if m.BornTime != 0 {
		bornDelta = m.BornTime - m.StoreTime
	}
	for _, c := range []struct {
		on  bool
		bit byte
	}{
		{m.Flag != 0, hasFlag}, {m.SysFlag != 0, hasSysFlag}, {m.ReconsumeTimes != 0, hasReconsume},
		{m.BornHost.IsValid(), hasBornHost}, {m.Tags != "", hasTags}, {m.Keys != "", hasKeys},
		{len(m.Properties) > 0 || len(m.EncodedProperties) > 0, hasProperties}, {bornDelta != 0, hasBornDelta},
	} {
		if c.on {
			bits |= c.bit
		}
	}
	dst = append(dst, bits)
	dst = binary.AppendUvarint(dst, uint64(uint32(m.QueueID)))
	dst = binary.AppendUvarint(dst, uint64(m.QueueOffset))
	dst = appendStr(dst, m.Topic)
	if bits&hasFlag != 0 {
		dst = binary.AppendUvarint(dst, uint64(uint32(m.Flag)))
	}
	if bits&hasSysFlag != 0 {
		dst = binary.AppendUvarint(dst, uint64(uint32(m.SysFlag)))
	}
	if bits&hasReconsume != 0 {
		dst = binary.AppendUvarint(dst, uint64(uint32(m.ReconsumeTimes)))
	}
	if bits&hasBornHost != 0 {
		a := m.BornHost.Addr().Unmap()
		if a.Is4() {
			b := a.As4()
			dst = append(dst, 4)
			dst = append(dst, b[:]...)
		} else {
			b := a.As16()
			dst = append(dst, 16)
			dst = append(dst, b[:]...)
		}
		dst = binary.BigEndian.AppendUint16(dst, m.BornHost.Port())
	}
	if bits&hasTags != 0 {
		dst = appendStr(dst, m.Tags)
	}
	if bits&hasKeys != 0 {
		dst = appendStr(dst, m.Keys)
	}
	switch {
	case len(m.EncodedProperties) > 0: // checked by Append (propertiesSize)
		dst = append(dst, m.EncodedProperties...)
	case bits&hasProperties != 0:
		var arr [16]string
		keys := arr[:0]
		for k := range m.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = binary.AppendUvarint(dst, uint64(len(keys)))
		for _, k := range keys {
			dst = appendStr(dst, k)
			dst = appendStr(dst, m.Properties[k])
		}
	}
	if bits&hasBornDelta != 0 {
		dst = binary.AppendVarint(dst, bornDelta)
	}
	return append(dst, m.Body...)
}

// header is the part of a payload dispatch needs, decoded without allocating.
type header struct {
	queueID     int32
	queueOffset int64
	topic       []byte // aliases the payload
	tags        []byte // aliases the payload
}

// decodeHeader decodes the routing fields of a payload.
func decodeHeader(p []byte) (header, error) {
	var h header
	d := decoder{b: p}
	bits := d.byte()
	h.queueID = int32(d.u32())
	h.queueOffset = d.i64()
	h.topic = d.bytes()
	if bits&hasFlag != 0 {
		d.u32()
	}
	if bits&hasSysFlag != 0 {
		d.u32()
	}
	if bits&hasReconsume != 0 {
		d.u32()
	}
	if bits&hasBornHost != 0 {
		d.host()
	}
	if bits&hasTags != 0 {
		h.tags = d.bytes()
	}
	if d.err != nil {
		return header{}, d.err
	}
	if h.queueOffset < 0 || h.queueID < 0 || len(h.topic) == 0 {
		return header{}, fmt.Errorf("%w: queue id %d offset %d topic length %d", ErrBadRecord, h.queueID, h.queueOffset, len(h.topic))
	}
	return h, nil
}

// decodeMessage decodes a payload into m. Strings and the body are copied: m does not alias p.
func decodeMessage(p []byte, storeTime int64, m *Message) error {
	if err := decodeFields(p, storeTime, m, func(b []byte) string { return string(b) }); err != nil {
		return err
	}
	m.Body = append([]byte(nil), m.Body...)
	return nil
}

// decodeFields decodes a payload into m, making strings with str. m.Body aliases p.
func decodeFields(p []byte, storeTime int64, m *Message, str func([]byte) string) error {
	var v View
	if err := decodeView(p, storeTime, &v); err != nil {
		return err
	}
	*m = Message{Topic: str(v.Topic), QueueID: v.QueueID, QueueOffset: v.QueueOffset, Flag: v.Flag,
		SysFlag: v.SysFlag, BornTime: v.BornTime, StoreTime: v.StoreTime, BornHost: v.BornHost,
		ReconsumeTimes: v.ReconsumeTimes, Body: v.Body}
	if v.Tags != nil {
		m.Tags = str(v.Tags)
	}
	if v.Keys != nil {
		m.Keys = str(v.Keys)
	}
	if v.props != nil {
		m.Properties = make(map[string]string, v.nprops)
		for k, val := range v.Properties {
			m.Properties[str(k)] = str(val)
		}
	}
	return nil
}

// decoder reads varints and strings, remembering the first error; it never reads past b.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or malformed %s", ErrBadRecord, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("presence bits")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.uvarint("integer")
	if v > 1<<32-1 {
		d.fail("32-bit integer")
		return 0
	}
	return uint32(v)
}

func (d *decoder) i64() int64 {
	v := d.uvarint("offset")
	if v > 1<<63-1 {
		d.fail("offset")
		return 0
	}
	return int64(v)
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("time delta")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint("length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("string")
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) host() netip.AddrPort {
	if len(d.b) < 1 {
		d.fail("born host")
		return netip.AddrPort{}
	}
	n := int(d.b[0])
	if (n != 4 && n != 16) || len(d.b) < 1+n+2 {
		d.fail("born host")
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(d.b[1 : 1+n])
	if n == 16 && a.Is4In6() { // the encoder writes IPv4 as 4 bytes
		d.fail("born host")
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(d.b[1+n:])
	d.b = d.b[1+n+2:]
	return netip.AddrPortFrom(a, port)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// TagHash returns the consume-queue tag code of tags: Java's String.hashCode over UTF-16
// code units, sign-extended, as RocketMQ stores it; 0 for no tag.
func TagHash(tags string) int64 {
	if tags == "" {
		return 0
	}
	var h int32
	for _, r := range tags {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return int64(h)
}

func tagHashBytes(tags []byte) int64 {
	if len(tags) == 0 {
		return 0
	}
	var h int32
	ascii := true
	for _, c := range tags {
		if c >= 0x80 {
			ascii = false
			break
		}
		h = 31*h + int32(c)
	}
	if ascii {
		return int64(h)
	}
	return TagHash(string(tags))
}
