package server

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
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

// TestPullBodiesOfRepliesInFlight: many pulls in flight on one connection, on queues that
// hold different messages (records of a few bytes to over 4 KiB, which the writer writes
// from the body's own memory), of batches from one message to more than the queue holds
// past the offset, each get the records of their own queue and offset, whatever room
// their bodies were first given.
func TestPullBodiesOfRepliesInFlight(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	const queues, per = 4, 12
	want := make([][]string, queues) // bodies by queue and offset
	for q := range queues {
		for i := range per {
			body := fmt.Sprintf("q%d-m%d-", q, i) + strings.Repeat("x", (q*per+i)*97%6000)
			c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("PF", q, ""), []byte(body))
			want[q] = append(want[q], body)
		}
	}
	type pull struct {
		q, off int
		ch     chan *remoting.Command
	}
	for round := range 5 {
		var pulls []pull
		for k := range 64 {
			q, off := (k+round)%queues, (k*7+round)%per
			h := pullHeader("g", "PF", q, int64(off), int(remoting.PullSubscription), 0, "*")
			h["maxMsgNums"] = strconv.Itoa(1 + k%per)
			pulls = append(pulls, pull{q, off, c.write(remoting.NewRequest(remoting.PullMessage, h, nil))})
		}
		for _, p := range pulls {
			r := c.wait(p.ch)
			if r.Code != remoting.Success {
				t.Fatalf("pull of queue %d at %d: reply %d %q", p.q, p.off, r.Code, r.Remark)
			}
			for i, rec := range decodeRecords(t, r.Body) {
				if rec.queueID != int32(p.q) || rec.queueOffset != int64(p.off+i) || rec.body != want[p.q][p.off+i] {
					t.Fatalf("pull of queue %d at %d: record %d is queue %d offset %d body %.12q, want offset %d body %.12q",
						p.q, p.off, i, rec.queueID, rec.queueOffset, rec.body, p.off+i, want[p.q][p.off+i])
				}
			}
		}
	}
}

// TestPullBodiesAcrossConnections: connections pulling at once, each many pulls in flight
// of records over 4 KiB (written from the reply body's own memory), each get the records of
// their own queue and offset while other users of the reply bodies' pool overwrite every
// buffer they get from it: a reply's body is put back only once it is written.
func TestPullBodiesAcrossConnections(t *testing.T) {
	b := openBroker(t, nil)
	s := startServer(t, b, Options{})
	const queues, per, conns, rounds, inFlight = 4, 16, 4, 100, 24
	want := make([][]string, queues) // bodies by queue and offset
	{
		c := dial(t, s.Addr())
		for q := range queues {
			for i := range per {
				body := fmt.Sprintf("q%d-m%d-", q, i) + strings.Repeat(strconv.Itoa(q*per+i), 4500/len(strconv.Itoa(q*per+i)))
				c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("PX", q, ""), []byte(body))
				want[q] = append(want[q], body)
			}
		}
	}
	clients := make([]*client, conns)
	for i := range clients {
		clients[i] = dial(t, s.Addr())
	}
	stop := make(chan struct{})
	var scribblers sync.WaitGroup
	for range 2 {
		scribblers.Go(func() {
			var held [4]*[]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range held {
					held[i] = pullBodies.Get().(*[]byte)
					b := (*held[i])[:cap(*held[i])]
					for j := range b {
						b[j] = 'Z'
					}
				}
				for _, bp := range held {
					pullBodies.Put(bp)
				}
				runtime.Gosched()
			}
		})
	}
	defer func() {
		close(stop)
		scribblers.Wait()
	}()
	var wg sync.WaitGroup
	for g, c := range clients {
		wg.Go(func() {
			type pull struct {
				q, off int
				ch     chan *remoting.Command
			}
			for round := range rounds {
				var pulls []pull
				for k := range inFlight {
					q, off := (g+k+round)%queues, (k*5+round+g)%per
					h := pullHeader("g", "PX", q, int64(off), int(remoting.PullSubscription), 0, "*")
					h["maxMsgNums"] = strconv.Itoa(1 + (k+g)%4)
					pulls = append(pulls, pull{q, off, c.write(remoting.NewRequest(remoting.PullMessage, h, nil))})
				}
				for _, p := range pulls {
					r := c.wait(p.ch)
					if r.Code != remoting.Success {
						t.Errorf("connection %d, pull of queue %d at %d: reply %d %q", g, p.q, p.off, r.Code, r.Remark)
						return
					}
					msgs, err := remoting.DecodeMessages(r.Body)
					if err != nil {
						t.Errorf("connection %d, pull of queue %d at %d: %v", g, p.q, p.off, err)
						return
					}
					for i, m := range msgs {
						if m.QueueID != int32(p.q) || m.QueueOffset != int64(p.off+i) || string(m.Body) != want[p.q][p.off+i] {
							t.Errorf("connection %d, pull of queue %d at %d: record %d is queue %d offset %d body %.12q, want offset %d body %.12q",
								g, p.q, p.off, i, m.QueueID, m.QueueOffset, m.Body, p.off+i, want[p.q][p.off+i])
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}
