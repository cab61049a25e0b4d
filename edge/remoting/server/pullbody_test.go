package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestPullBodyFromStore checks that a pull reply's records, encoded straight from the
// store, are byte for byte the records of the messages the broker's Pull returns
// (compressed bodies inflated, tags, keys and properties merged, hosts and offsets alike).
func TestPullBodyFromStore(t *testing.T) {
	b := openBroker(t, &edge.Options{CompressOver: 200})
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	bodies := [][]byte{[]byte("small"), bytes.Repeat([]byte("temperature=21.5;"), 40), nil}
	props := []string{"UNIQ_KEY\x01U1\x02TAGS\x01a\x02KEYS\x01k1 k2\x02zz\x01last\x02", "TAGS\x01b\x02A\x01first\x02", ""}
	for i := range bodies {
		c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("PB", 0, props[i]), bodies[i])
	}
	for _, sub := range []string{"*", "a"} {
		t.Run(sub, func(t *testing.T) {
			reply := c.mustCall(remoting.Success, remoting.PullMessage, pullHeader("g", "PB", 0, 0, int(remoting.PullSubscription), 0, sub), nil)
			got, err := remoting.DecodeMessages(reply.Body)
			if err != nil || len(got) == 0 {
				t.Fatalf("decode: %d records, %v", len(got), err)
			}
			res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g2", Queue: mq.MessageQueue{Topic: "PB"}, Filter: sub, MaxMsgs: 32})
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for i := range res.Messages {
				res.Messages[i].StoreHost = got[0].StoreHost
				if want, err = remoting.AppendMessageExt(want, &res.Messages[i]); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(reply.Body, want) {
				t.Fatalf("pull body of %d bytes (%d records) differs from the %d bytes of the broker's %d messages",
					len(reply.Body), len(got), len(want), len(res.Messages))
			}
		})
	}
}
