package store

import (
	"encoding/binary"
	"fmt"
)

// Property is one message property, as AppendProperties takes it.
type Property struct {
	Key, Value string
}

// AppendProperties appends to dst props encoded as a record holds a message's properties
// (store/FORMAT.md, section 2: a uvarint count, then each key and value as a uvarint length
// and its bytes), for Message.EncodedProperties; no props append nothing. props must be in
// strictly increasing key order (each key once), as records hold them; Append refuses a
// message whose encoded properties are not.
//
// A caller that has a message's properties as bytes already (a broker storing the items of a
// batch send) encodes them so, in one buffer for many messages, instead of making a map of
// each message's that the store would encode the same way.
func AppendProperties(dst []byte, props []Property) []byte {
	if len(props) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(props)))
	for _, p := range props {
		dst = appendStr(dst, p.Key)
		dst = appendStr(dst, p.Value)
	}
	return dst
}

// propertiesSize checks m's properties, encoded or in the map, and returns the bytes they
// add to the record's tags, keys and properties for the store's size limit: for a map, its
// keys and values with 4 bytes each; for encoded properties, their length. Encoded properties
// must be as AppendProperties writes them (a count of at least one, pairs that fill them
// exactly, keys in strictly increasing order), and m must then have no map entries.
func (m *Message) propertiesSize() (int, error) {
	if len(m.EncodedProperties) == 0 {
		n := 0
		for k, v := range m.Properties {
			n += len(k) + len(v) + 4
		}
		return n, nil
	}
	if len(m.Properties) > 0 {
		return 0, fmt.Errorf("%w: encoded properties and a properties map", ErrInvalidMessage)
	}
	d := decoder{b: m.EncodedProperties}
	n := d.uvarint("property count")
	if d.err == nil && (n == 0 || n > uint64(len(d.b))) { // a pair takes 2 bytes at least
		return 0, fmt.Errorf("%w: encoded properties: count %d in %d bytes", ErrInvalidMessage, n, len(m.EncodedProperties))
	}
	var prev []byte
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.bytes()
		d.bytes()
		if d.err == nil && i > 0 && string(k) <= string(prev) {
			return 0, fmt.Errorf("%w: encoded properties: key %q after %q", ErrInvalidMessage, k, prev)
		}
		prev = k
	}
	if d.err != nil || len(d.b) != 0 {
		return 0, fmt.Errorf("%w: encoded properties: %d bytes do not hold %d pairs exactly", ErrInvalidMessage, len(m.EncodedProperties), n)
	}
	return len(m.EncodedProperties), nil
}
