package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"testing"
)

// encodedOf returns props encoded by AppendProperties, in key order.
func encodedOf(props map[string]string) []byte {
	var list []Property
	for _, k := range slices.Sorted(maps.Keys(props)) {
		list = append(list, Property{Key: k, Value: props[k]})
	}
	return AppendProperties(nil, list)
}

// TestEncodedPropertiesSamePayload: a message whose properties are encoded already is
// encoded into the bytes of the same message with its properties in the map.
func TestEncodedPropertiesSamePayload(t *testing.T) {
	for _, tc := range codecCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.m.appendPayload(nil)
			m := *tc.m
			m.EncodedProperties, m.Properties = encodedOf(m.Properties), nil
			if len(tc.m.Properties) == 0 && m.EncodedProperties != nil {
				t.Fatalf("no properties encoded as %x", m.EncodedProperties)
			}
			if got := m.appendPayload(nil); !bytes.Equal(got, want) {
				t.Fatalf("payload\n%x\nwant\n%x", got, want)
			}
		})
	}
}

// TestAppendEncodedProperties: Append stores a message with encoded properties as the same
// record, byte for byte, as the message with its properties in the map, and reads it back
// with them in the map.
func TestAppendEncodedProperties(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	props := map[string]string{"UNIQ_KEY": "C0A8011400012A", "": "empty key", "a": "", "temp": "21.5°C"}
	mk := func() *Message {
		return &Message{Topic: "T", Tags: "telemetry", Keys: "k1", BornTime: 1764633600000, Body: []byte("body")}
	}
	old, raw := mk(), mk()
	old.Properties = props
	raw.EncodedProperties = encodedOf(props)
	if err := s.Append([]*Message{old, raw}); err != nil {
		t.Fatal(err)
	}
	r := s.log.NewReader()
	defer r.Close()
	var payloads [2][]byte
	for i, m := range []*Message{old, raw} {
		rec, err := r.Read(m.Pos)
		if err != nil {
			t.Fatal(err)
		}
		payloads[i] = bytes.Clone(rec.Payload)
	}
	// The payloads differ in the queue offset (1 byte: 0 and 1) alone.
	if payloads[0][2] != 0 || payloads[1][2] != 1 {
		t.Fatalf("queue offsets: %x %x", payloads[0][:3], payloads[1][:3])
	}
	payloads[1][2] = 0
	if !bytes.Equal(payloads[0], payloads[1]) {
		t.Fatalf("records differ:\nmap     %x\nencoded %x", payloads[0], payloads[1])
	}
	res, err := s.GetMessages("T", 0, 1, 1, nil)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("GetMessages: %v, %d messages", err, len(res.Messages))
	}
	if got := res.Messages[0]; !maps.Equal(got.Properties, props) || got.EncodedProperties != nil {
		t.Fatalf("read back properties %q, encoded %x; want %q in the map", got.Properties, got.EncodedProperties, props)
	}
}

// TestAppendRefusesBadEncodedProperties: encoded properties that are not as
// AppendProperties writes them are refused, and nothing of the batch is stored.
func TestAppendRefusesBadEncodedProperties(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	good := AppendProperties(nil, []Property{{"a", "1"}, {"b", "2"}})
	for _, tc := range []struct {
		name  string
		enc   []byte
		props map[string]string
	}{
		{"count 0", []byte{0}, nil},
		{"count over the pairs", append([]byte{3}, good[1:]...), nil},
		{"count under the pairs", append([]byte{1}, good[1:]...), nil},
		{"cut in a value", good[:len(good)-1], nil},
		{"a length past the end", []byte{1, 1, 'a', 9, 'x'}, nil},
		{"bad count varint", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, nil},
		{"a length in more bytes than it takes", []byte{1, 0x81, 0x00, 'a', 0}, nil},
		{"keys out of order", AppendProperties(nil, []Property{{"b", "1"}, {"a", "2"}}), nil},
		{"a key twice", AppendProperties(nil, []Property{{"a", "1"}, {"a", "2"}}), nil},
		{"encoded and a map", good, map[string]string{"c": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := &Message{Topic: "T", Body: []byte("fine")}
			bad := &Message{Topic: "T", EncodedProperties: tc.enc, Properties: tc.props, Body: []byte("bad")}
			err := s.Append([]*Message{ok, bad})
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("Append: %v, want %v", err, ErrInvalidMessage)
			}
			if n := s.MaxOffset("T", 0); n != 0 {
				t.Fatalf("queue holds %d messages after a refused batch", n)
			}
		})
	}
	if err := s.Append([]*Message{{Topic: "T", EncodedProperties: good}}); err != nil {
		t.Fatalf("good encoding: %v", err)
	}
}

// FuzzEncodedProperties: whatever bytes a caller puts in EncodedProperties, Append either
// refuses them or stores a record that decodes, with the properties read back encoding to
// the same bytes (so the record is the one the map would give).
func FuzzEncodedProperties(f *testing.F) {
	f.Add(AppendProperties(nil, []Property{{"UNIQ_KEY", "U1"}, {"a", ""}}))
	f.Add(encodedOf(codecCases()[2].m.Properties))
	f.Add([]byte{0})
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Fuzz(func(t *testing.T, enc []byte) {
		m := &Message{Topic: "T", Tags: "t", EncodedProperties: enc, Body: []byte("body")}
		if _, err := m.propertiesSize(); err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("refused with %v, want %v", err, ErrInvalidMessage)
			}
			return
		}
		p := m.appendPayload(nil)
		var got Message
		if err := decodeMessage(p, 1, &got); err != nil {
			t.Fatalf("accepted encoding %x gives a record that does not decode: %v", enc, err)
		}
		if again := encodedOf(got.Properties); !bytes.Equal(again, enc) {
			t.Fatalf("accepted encoding %x reads back as %q, which encodes as %x", enc, got.Properties, again)
		}
		if string(got.Body) != "body" || got.Tags != "t" {
			t.Fatalf("read back tags %q body %q", got.Tags, got.Body)
		}
	})
}
