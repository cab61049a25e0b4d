package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/store"
)

// TestPullViewsMatchesPull checks that PullViews hands over the messages Pull returns, with
// the same result: compressed bodies inflated, a filter applied, the stats counted.
func TestPullViewsMatchesPull(t *testing.T) {
	b := openBroker(t, &Options{CompressOver: 100})
	ctx := context.Background()
	big := []byte(strings.Repeat("temperature=21.5;", 100))
	for i, m := range []*mq.Message{
		{Topic: "V", Tags: "a", Keys: "k1", Body: []byte("one"), Properties: map[string]string{"UNIQ_KEY": "U1", "x": "y"}},
		{Topic: "V", Tags: "b", Body: big},
		{Topic: "V", Tags: "a", Flag: 3, Body: big},
	} {
		if _, err := b.Send(ctx, m, mq.QueueIndex(0)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i, filter := range []string{"*", "a", "c"} {
		t.Run(filter, func(t *testing.T) {
			group := fmt.Sprint("g", i)
			req := mq.PullRequest{Group: group, Queue: mq.MessageQueue{Topic: "V"}, Filter: filter, MaxMsgs: 32}
			want, err := b.Pull(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			req.Group = "v" + group
			before := b.GroupStats(req.Group)
			var got []mq.MessageExt
			res, err := b.PullViews(ctx, req, func(v *store.View) {
				m := mq.MessageExt{Message: mq.Message{Topic: string(v.Topic), Flag: v.Flag, Tags: string(v.Tags), Keys: string(v.Keys),
					Body: bytes.Clone(v.Body)}, QueueID: v.QueueID, QueueOffset: v.QueueOffset, SysFlag: v.SysFlag,
					BornTime: v.BornTime, BornHost: v.BornHost, StoreTime: v.StoreTime, CommitLogOffset: v.Pos, StoreSize: v.Size}
				for k, val := range v.Properties {
					if m.Properties == nil {
						m.Properties = map[string]string{}
					}
					m.Properties[string(k)] = string(val)
				}
				got = append(got, m)
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != nil || res.Status != want.Status || res.NextBeginOffset != want.NextBeginOffset ||
				res.MinOffset != want.MinOffset || res.MaxOffset != want.MaxOffset {
				t.Fatalf("result %+v, want %+v", res, want)
			}
			if len(got) != len(want.Messages) {
				t.Fatalf("%d views, want %d messages", len(got), len(want.Messages))
			}
			var n, size int64
			for i := range got {
				w := want.Messages[i]
				w.BrokerName, w.StoreHost = "", got[i].StoreHost
				if g := got[i]; g.Topic != w.Topic || g.Tags != w.Tags || g.Keys != w.Keys || g.Flag != w.Flag || !bytes.Equal(g.Body, w.Body) ||
					g.SysFlag != w.SysFlag || g.QueueOffset != w.QueueOffset || g.BornTime != w.BornTime || g.StoreTime != w.StoreTime ||
					g.CommitLogOffset != w.CommitLogOffset || g.StoreSize != w.StoreSize || len(g.Properties) != len(w.Properties) {
					t.Fatalf("view %d: %+v, want %+v", i, g, w)
				}
				n, size = n+1, size+int64(len(w.Body))
			}
			if st := b.GroupStats(req.Group); st.MessagesOut-before.MessagesOut != n || st.BytesOut-before.BytesOut != size {
				t.Fatalf("stats: %+v, want %d messages, %d bytes more than %+v", st, n, size, before)
			}
		})
	}
	if _, err := b.PullViews(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "V"}}, nil); !errors.Is(err, mq.ErrInvalidArgument) {
		t.Fatalf("PullViews without a function: %v", err)
	}
}

// TestPullViewsLongPoll checks that a suspended PullViews wakes with the message that
// arrives while it waits.
func TestPullViewsLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t, nil)
		ctx := context.Background()
		if err := b.CreateTopic(TopicConfig{Name: "L", ReadQueues: 1, WriteQueues: 1}); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() {
			var bodies []string
			res, err := b.PullViews(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "L"}, Filter: "*", Suspend: true, MaxWait: time.Minute},
				func(v *store.View) { bodies = append(bodies, string(v.Body)) })
			if err != nil || res.Status != mq.PullFound {
				done <- res.Status.String() + " " + errString(err)
				return
			}
			done <- strings.Join(bodies, ",")
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, err := b.Send(ctx, &mq.Message{Topic: "L", Body: []byte("late")}, nil); err != nil {
			t.Fatal(err)
		}
		if got := <-done; got != "late" {
			t.Fatalf("got %q, want the late message", got)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
