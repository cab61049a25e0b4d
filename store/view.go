package store

import (
	"fmt"
	"net/netip"
	"sync"
	"unsafe"
)

// View is a stored message read in place: its byte slices alias the store's memory and are
// valid only until the callback that was handed the View returns. A reader that encodes
// messages at once (a broker answering a pull) reads them so, without copying them first.
type View struct {
	Topic          []byte
	QueueID        int32
	QueueOffset    int64
	Flag           int32
	SysFlag        int32
	BornTime       int64 // unix ms
	StoreTime      int64 // unix ms
	BornHost       netip.AddrPort
	ReconsumeTimes int32
	Tags           []byte
	Keys           []byte
	Body           []byte
	Pos            int64 // commitlog position
	Size           int32 // bytes of the record in the commitlog

	props  []byte // the properties' pairs as stored: uvarint length + bytes, key then value
	nprops uint32
}

// Properties yields the message's properties in key order (as stored), aliasing the
// store's memory as the View does.
func (v *View) Properties(yield func(k, val []byte) bool) {
	d := decoder{b: v.props}
	for range v.nprops {
		k := d.bytes()
		val := d.bytes()
		if d.err != nil || !yield(k, val) {
			return
		}
	}
}

// NumProperties returns how many properties the message has.
func (v *View) NumProperties() int { return int(v.nprops) }

// decodeView decodes a payload into v without copying or allocating; v aliases p.
func decodeView(p []byte, storeTime int64, v *View) error {
	d := decoder{b: p}
	bits := d.byte()
	*v = View{StoreTime: storeTime, BornTime: storeTime}
	v.QueueID = int32(d.u32())
	v.QueueOffset = d.i64()
	v.Topic = d.bytes()
	if bits&hasFlag != 0 {
		v.Flag = int32(d.u32())
	}
	if bits&hasSysFlag != 0 {
		v.SysFlag = int32(d.u32())
	}
	if bits&hasReconsume != 0 {
		v.ReconsumeTimes = int32(d.u32())
	}
	if bits&hasBornHost != 0 {
		v.BornHost = d.host()
	}
	if bits&hasTags != 0 {
		v.Tags = d.bytes()
	}
	if bits&hasKeys != 0 {
		v.Keys = d.bytes()
	}
	if bits&hasProperties != 0 {
		n := d.u32()
		if d.err == nil && uint64(n) > uint64(len(d.b)) { // every pair takes at least 2 bytes
			d.fail("property count")
		}
		start := d.b
		for i := uint32(0); i < n && d.err == nil; i++ {
			d.bytes()
			d.bytes()
		}
		if d.err == nil {
			v.props, v.nprops = start[:len(start)-len(d.b)], n
		}
	}
	if bits&hasBornDelta != 0 {
		delta := d.varint()
		if d.err == nil && delta == 0 { // the encoder writes no field for a zero delta
			d.fail("born time delta")
		}
		v.BornTime = storeTime + delta
	}
	if d.err != nil {
		return d.err
	}
	if v.QueueOffset < 0 || v.QueueID < 0 || len(v.Topic) == 0 {
		return fmt.Errorf("%w: queue id %d offset %d topic %q", ErrBadRecord, v.QueueID, v.QueueOffset, v.Topic)
	}
	v.Body = d.b
	return nil
}

// copyTo sets the fields of m, a zero Message, to the message v reads, copying its strings
// and body into *arena, so that m aliases neither v nor the store (one allocation for many
// messages, not several per message); Pos and Size are v's. topic is used for the topic
// when equal to v.Topic. It sets field by field: assigning a whole Message in the heap
// takes a bulk write barrier while the GC runs (in profiles, nearly as much as decoding).
func (v *View) copyTo(m *Message, arena *[]byte, topic string) {
	if string(v.Topic) != topic {
		topic = arenaString(arena, v.Topic)
	}
	m.Topic, m.QueueID, m.QueueOffset, m.Flag, m.SysFlag = topic, v.QueueID, v.QueueOffset, v.Flag, v.SysFlag
	m.BornTime, m.StoreTime, m.ReconsumeTimes = v.BornTime, v.StoreTime, v.ReconsumeTimes
	if v.BornHost.IsValid() {
		m.BornHost = v.BornHost
	}
	m.Tags, m.Keys, m.Pos, m.Size = arenaString(arena, v.Tags), arenaString(arena, v.Keys), v.Pos, v.Size
	if v.props != nil {
		m.Properties = make(map[string]string, v.nprops)
		for k, val := range v.Properties {
			m.Properties[arenaString(arena, k)] = arenaString(arena, val)
		}
	}
	start := len(*arena)
	*arena = append(*arena, v.Body...)
	m.Body = (*arena)[start:len(*arena):len(*arena)]
}

// arenaString copies b into the arena and returns it as a string. The arena's bytes are never
// written again (a full arena is replaced, not reused), so the string stays immutable.
func arenaString(arena *[]byte, b []byte) string {
	if len(b) == 0 {
		return ""
	}
	start := len(*arena)
	*arena = append(*arena, b...)
	return unsafe.String(&(*arena)[start], len(b))
}

// views holds the Views that reads decode into, so that a read allocates none.
var views = sync.Pool{New: func() any { return new(View) }}

// putView clears v, which may alias a reader's copy buffer, and returns it to views.
func putView(v *View) {
	*v = View{}
	views.Put(v)
}
