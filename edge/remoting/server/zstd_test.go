package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
	"github.com/klauspost/compress/zstd"
)

// TestZstdBatch: a SEND_BATCH_ZSTD batch is stored as the same batch sent plain would be,
// properties and all, and answered with the first message's id.
func TestZstdBatch(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	var msgs []*mq.Message
	for i := range 50 {
		msgs = append(msgs, &mq.Message{Topic: "T", Flag: 7, Tags: "tag", Keys: fmt.Sprintf("k%d", i),
			Properties: map[string]string{mq.PropertyUniqKey: fmt.Sprintf("UNIQ%04d", i), "seq": fmt.Sprint(i)},
			Body:       fmt.Appendf(nil, `{"ts":%d,"temp":21.%d,"dev":"gw-17"}`, int64(1700000000000)+int64(i), i%10)})
	}
	body, err := zbatch.Append(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	r := c.mustCall(remoting.Success, remoting.SendBatchZstd, sendExt("T", 1, ""), body)
	rh, err := remoting.ParseSendResponseHeader(r.Ext)
	if err != nil || rh.QueueID != 1 || rh.QueueOffset != 0 || strings.Contains(rh.MsgID, ",") || rh.MsgID == "" {
		t.Fatalf("reply %+v, %v: want queue 1, offset 0 and one message id", rh, err)
	}
	res, err := b.Pull(context.Background(), mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", QueueID: 1}, MaxMsgs: 100, Filter: "*"})
	if err != nil || len(res.Messages) != len(msgs) {
		t.Fatalf("pulled %d, %v: want %d", len(res.Messages), err, len(msgs))
	}
	for i, m := range res.Messages {
		w := msgs[i]
		if string(m.Body) != string(w.Body) || m.Flag != w.Flag || m.Tags != w.Tags || m.Keys != w.Keys ||
			m.Properties[mq.PropertyUniqKey] != w.Properties[mq.PropertyUniqKey] || m.Properties["seq"] != w.Properties["seq"] {
			t.Fatalf("message %d stored as %+v, sent %+v", i, m.Message, *w)
		}
	}
}

// TestZstdBatchRefusals: a bomb and a body that is not zstd are refused MESSAGE_ILLEGAL and
// store nothing; with NoZstdBatch the code is not supported, and plain batches still go.
func TestZstdBatchRefusals(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{MaxFrameSize: 1 << 20})
	c := dial(t, s.Addr())
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, 256<<20), nil)
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	r := c.mustCall(remoting.MessageIllegal, remoting.SendBatchZstd, sendExt("T", 0, ""), bomb)
	if !strings.Contains(r.Remark, "too large") {
		t.Errorf("bomb remark %q: want it to say too large", r.Remark)
	}
	c.mustCall(remoting.MessageIllegal, remoting.SendBatchZstd, sendExt("T", 0, ""), []byte("not zstd at all"))
	plain, _ := remoting.AppendBatch(nil, []*mq.Message{{Topic: "T", Body: []byte("x")}})
	c.mustCall(remoting.MessageIllegal, remoting.SendBatchZstd, sendExt("T", 0, ""), plain) // a plain body under the zstd code
	if qs, err := b.Queues("T"); err == nil && len(qs) > 0 && qs[0].MaxOffset != 0 {
		t.Fatalf("queue 0 of T holds %d messages after refusals", qs[0].MaxOffset)
	}

	off := startServer(t, b, Options{NoZstdBatch: true})
	c2 := dial(t, off.Addr())
	good, _ := zbatch.Append(nil, []*mq.Message{{Topic: "T", Body: []byte("x")}})
	c2.mustCall(remoting.RequestCodeNotSupported, remoting.SendBatchZstd, sendExt("T", 0, ""), good)
	c2.mustCall(remoting.Success, remoting.SendBatchMessage, sendExt("T", 0, ""), plain)
	c.mustCall(remoting.Success, remoting.SendBatchZstd, sendExt("T", 0, ""), good)
	if qs, err := b.Queues("T"); err != nil || qs[0].MaxOffset != 2 {
		t.Fatalf("queue 0 of T: %+v %v: want the plain batch and the zstd batch the first server took", qs, err)
	}
}

// zstdBatchItems is a SEND_BATCH_ZSTD body of two messages, a fuzz seed.
func zstdBatchItems(t testing.TB) []byte {
	body, err := zbatch.Append(nil, []*mq.Message{{Topic: "T", Body: []byte("a"), Tags: "a"}, {Topic: "T", Body: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}
