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
// exactly, keys in strictly increasing order, every length in as few bytes as it takes),
// and m must then have no map entries.
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
	b := m.EncodedProperties
	bad := func(what string) error {
		return fmt.Errorf("%w: encoded properties (%d bytes): %s", ErrInvalidMessage, len(m.EncodedProperties), what)
	}
	// uvarint reads a length or count as AppendProperties writes it: in as few bytes as
	// it takes, so that the record is the one the map gives.
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(v) {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() ([]byte, bool) {
		n, ok := uvarint()
		if !ok || n > uint64(len(b)) {
			return nil, false
		}
		s := b[:n]
		b = b[n:]
		return s, true
	}
	n, ok := uvarint()
	if !ok || n == 0 || n > uint64(len(b)) { // a pair takes 2 bytes at least
		return 0, bad("no property count")
	}
	var prev []byte
	for i := uint64(0); i < n; i++ {
		k, ok := str()
		if !ok {
			return 0, bad(fmt.Sprintf("key %d cut or not minimally encoded", i))
		}
		if _, ok := str(); !ok {
			return 0, bad(fmt.Sprintf("value %d cut or not minimally encoded", i))
		}
		if i > 0 && string(k) <= string(prev) {
			return 0, bad(fmt.Sprintf("key %q after %q", k, prev))
		}
		prev = k
	}
	if len(b) != 0 {
		return 0, bad(fmt.Sprintf("%d bytes after %d properties", len(b), n))
	}
	return len(m.EncodedProperties), nil
}
