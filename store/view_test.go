package store

import (
	"bytes"
	"maps"
	"net/netip"
	"reflect"
	"testing"
)

// viewMessage copies v into a Message, as GetMessages would return it.
func viewMessage(v *View) Message {
	m := Message{Topic: string(v.Topic), QueueID: v.QueueID, QueueOffset: v.QueueOffset, Flag: v.Flag, SysFlag: v.SysFlag,
		BornTime: v.BornTime, StoreTime: v.StoreTime, BornHost: v.BornHost, ReconsumeTimes: v.ReconsumeTimes,
		Tags: string(v.Tags), Keys: string(v.Keys), Body: bytes.Clone(v.Body), Pos: v.Pos, Size: v.Size}
	for k, val := range v.Properties {
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[string(k)] = string(val)
	}
	return m
}

// TestGetViewsMatchesGetMessages checks that GetViews hands over, in order, the messages
// GetMessages returns, with the same result, filtered or not.
func TestGetViewsMatchesGetMessages(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	full := &Message{Topic: "T", Flag: 7, SysFlag: 0x10, BornTime: 12345, BornHost: netip.MustParseAddrPort("[2001:db8::1]:10911"),
		ReconsumeTimes: 3, Tags: "odd", Keys: "K1 K2", Properties: map[string]string{"UNIQ_KEY": "ABC", "a": "", "z": "last"}, Body: []byte("payload")}
	if err := s.Append([]*Message{full}); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "T", 0, 1, 40)
	waitDispatched(t, s)
	for _, tc := range []struct {
		name   string
		filter Filter
		offset int64
		max    int
	}{
		{"all", nil, 0, 32},
		{"odd", tagsFilter{"odd"}, 0, 32},
		{"none", tagsFilter{"nothing"}, 3, 32},
		{"at the end", nil, 41, 32},
		{"past the end", nil, 50, 32},
		{"one", nil, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := s.GetMessages("T", 0, tc.offset, tc.max, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []Message
			res, err := s.GetViews("T", 0, tc.offset, tc.max, tc.filter, func(v *View) { got = append(got, viewMessage(v)) })
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != nil {
				t.Fatalf("GetViews returned %d messages", len(res.Messages))
			}
			if res.Status != want.Status || res.NextBeginOffset != want.NextBeginOffset || res.MinOffset != want.MinOffset || res.MaxOffset != want.MaxOffset {
				t.Fatalf("result %+v, want %+v", res, want)
			}
			if len(got) != len(want.Messages) {
				t.Fatalf("%d views, want %d messages", len(got), len(want.Messages))
			}
			for i := range got {
				g, w := got[i], want.Messages[i]
				if !maps.Equal(g.Properties, w.Properties) || !bytes.Equal(g.Body, w.Body) {
					t.Fatalf("view %d: %+v, want %+v", i, g, w)
				}
				g.Properties, w.Properties, g.Body, w.Body = nil, nil, nil, nil
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("view %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
	if _, err := s.GetViews("T", 0, 0, 1, nil, nil); err == nil {
		t.Fatal("GetViews without a visit function")
	}
}

// TestGetViewsAllocs checks that reading messages in place allocates nothing per message.
func TestGetViewsAllocs(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	appendN(t, s, "T", 0, 0, 64)
	waitDispatched(t, s)
	n := 0
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := s.GetViews("T", 0, 0, 32, tagsFilter{"odd", "even"}, func(v *View) { n += len(v.Body) }); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 { // the View, the filter and the function: none per message
		t.Fatalf("GetViews of 32 messages allocated %v times", allocs)
	}
}
