package uplink

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestForwardKeepsEveryField: whichever way a rule sends (zstd batches, plain batches,
// one by one), each message arrives upstream with its flag, tags, keys, body and every
// property as stored locally, byte for byte: properties whose names sort around TAGS, KEYS
// and UNIQ_KEY, non-ASCII and empty values, binary and empty bodies, a UNIQ_KEY of its
// own or its local offset message id, properties over a batch item's 32 KiB (sent on
// their own); only the delay properties (REAL_TOPIC, REAL_QID) are left behind.
func TestForwardKeepsEveryField(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name     string
		compress bool
		batch    int
		code     int16 // the request that must carry them
	}{
		{"zstd batches", true, 64, remoting.SendBatchZstd},
		{"plain batches", false, 64, remoting.SendBatchMessage},
		{"one by one", false, 1, remoting.SendMessageV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := openLocal(t, t.TempDir(), nil)
			h := startHub(t, "")
			for _, b := range []*edge.Broker{local, h.b} {
				if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 2, WriteQueues: 2}); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			for i := range n {
				m := &mq.Message{Topic: "T", Flag: int32(i - 100)}
				switch i % 4 {
				case 0: // nothing but a body
					m.Body = []byte{byte(i)}
				case 1: // empty body, tags and keys only
					m.Tags, m.Keys = "tag", fmt.Sprintf("k%d k%d", i, i+1)
				case 2: // properties around TAGS, KEYS and UNIQ_KEY, a binary body
					m.Tags, m.Keys = fmt.Sprintf("t%d", i%3), fmt.Sprintf("key%d", i)
					m.Properties = map[string]string{"A": "1", "KEYSX": "after keys", "M": "", "TAGSX": "after tags",
						"UNIQ_KEYX": "after uniq", "Z": "größe 21°C", mq.PropertyUniqKey: fmt.Sprintf("U%08d", i)}
					for b := range 256 {
						m.Body = append(m.Body, byte(b+i))
					}
					if i == 10 { // properties no batch item carries (over 32 KiB): sent on its own
						m.Properties["big"] = strings.Repeat("p", 40_000)
					}
				case 3: // a delayed message, delivered to T when due
					m.Properties = map[string]string{"seq": fmt.Sprint(i)}
					m.Body = []byte(fmt.Sprintf("delayed %d", i))
					if i%8 == 3 {
						m.SetDelayLevel(1)
					} else { // one that carries a delay's properties
						m.Properties[mq.PropertyRealTopic], m.Properties[mq.PropertyRealQueueID] = "R", "1"
					}
				}
				if _, err := local.Send(ctx, m, mq.QueueIndex(i%2)); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			waitFor(t, 30*time.Second, "the delayed messages delivered", func() bool { return count(t, local, "T") == n })
			u := startUplink(t, local, Options{Up: []UpRule{{Name: "r", Topics: []string{"T"}, Compress: tc.compress,
				CompressOver: 1 << 20, BatchSize: tc.batch, Upstream: Upstream{Addrs: h.addr, Kind: KindEdgeMQ}}}})
			waitFor(t, 30*time.Second, "all forwarded", func() bool { return u.Stats().Up[0].Forwarded == n })
			want, got := readAll(t, local, "T"), readAll(t, h.b, "T")
			for q, ws := range want {
				gs := got[q]
				if len(gs) != len(ws) {
					t.Fatalf("queue %d: %d local messages, %d upstream", q, len(ws), len(gs))
				}
				for i := range ws {
					w, g := &ws[i], &gs[i]
					props := maps.Clone(w.Properties)
					if props == nil {
						props = map[string]string{}
					}
					delete(props, mq.PropertyDelayLevel)
					delete(props, mq.PropertyRealTopic)
					delete(props, mq.PropertyRealQueueID)
					if props[mq.PropertyUniqKey] == "" {
						props[mq.PropertyUniqKey] = w.OffsetMsgID()
					}
					if g.Flag != w.Flag || g.Tags != w.Tags || g.Keys != w.Keys || string(g.Body) != string(w.Body) ||
						!reflect.DeepEqual(g.Properties, props) {
						t.Fatalf("queue %d offset %d:\ngot  flag %d tags %q keys %q props %q body %q\nwant flag %d tags %q keys %q props %q body %q",
							q, i, g.Flag, g.Tags, g.Keys, g.Properties, g.Body, w.Flag, w.Tags, w.Keys, props, w.Body)
					}
				}
			}
			if req := h.srv.Stats().Requests; req[tc.code] == 0 {
				t.Fatalf("hub requests %v: want them sent as %d", req, tc.code)
			}
		})
	}
}
