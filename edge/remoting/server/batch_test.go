package server

import (
	"bytes"
	"testing"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// TestBatchRefusals: a batch the broker refuses (one message too large, or a retry topic's
// message without its counts) is answered at once with the refusal, stores nothing, and
// the connection goes on.
func TestBatchRefusals(t *testing.T) {
	b := openBroker(t, &edge.Options{MaxMessageSize: 8 << 10})
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	batch := func(sizes ...int) []byte {
		var msgs []*mq.Message
		for _, n := range sizes {
			msgs = append(msgs, &mq.Message{Topic: "T", Body: bytes.Repeat([]byte("b"), n)})
		}
		body, err := remoting.AppendBatch(nil, msgs)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	c.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), batch(10, 30))
	for _, sizes := range [][]int{{9000}, {10, 20 << 10, 30}} {
		r := c.mustCall(remoting.MessageIllegal, remoting.SendBatchMessage, sendExt("T", 0, ""), batch(sizes...))
		if want := "message too large"; !bytes.Contains([]byte(r.Remark), []byte(want)) {
			t.Errorf("batch %v: remark %q, want it to say %q", sizes, r.Remark, want)
		}
	}
	c.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), batch(10))
	if qs, err := b.Queues("T"); err != nil || len(qs) == 0 || qs[0].MaxOffset != 3 {
		t.Errorf("queue 0 of T: %+v %v, want the 3 messages of the accepted batches", qs, err)
	}
}
