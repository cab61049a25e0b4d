package server

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/zbatch"
	"github.com/edgemq/edgemq/store"
	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/vfs"
)

// fsyncGate is a vfs.FS whose commitlog files' Syncs wait while it is held, so that a test
// sees what the server answers while an fsync is in flight.
type fsyncGate struct {
	vfs.FS
	held    *atomic.Bool
	fail    *atomic.Bool  // Syncs fail with EIO
	waiting *atomic.Int32 // Syncs waiting at the gate
	open    chan struct{} // closed by release
}

func newFsyncGate() fsyncGate {
	return fsyncGate{FS: vfs.OS, held: new(atomic.Bool), fail: new(atomic.Bool), waiting: new(atomic.Int32), open: make(chan struct{})}
}

// release lets the waiting Syncs go, and every later one pass.
func (g fsyncGate) release() {
	if g.held.CompareAndSwap(true, false) {
		close(g.open)
	}
}

func (g fsyncGate) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "commitlog") {
		return f, err
	}
	return gatedFile{f, g}, nil
}

type gatedFile struct {
	vfs.File
	g fsyncGate
}

func (f gatedFile) Sync() error {
	if f.g.held.Load() {
		f.g.waiting.Add(1)
		<-f.g.open
		f.g.waiting.Add(-1)
	}
	if f.g.fail.Load() {
		return &os.PathError{Op: "fdatasync", Path: "segment", Err: syscall.EIO}
	}
	return f.File.Sync()
}

// TestSendsAnsweredOnceDurable: the server answers a send that must be durable only
// once an fsync covers it, whatever path the send takes (SEND_MESSAGE, SEND_MESSAGE_V2, a
// batch, a zstd batch, and with the sync flush policy a transaction's half message), and
// meanwhile it answers a send that need not wait: with the store's sync flush policy, sends
// to a default topic must wait (and no pull, parked or not, brings their messages before
// the fsync) while those to a topic of durability async need not; with the async policy,
// sends to a topic of durability sync must wait (readers may see them before: the store's
// documented choice) while those to a default topic need not.
func TestSendsAnsweredOnceDurable(t *testing.T) {
	msgs := []*mq.Message{{Topic: "T", Body: []byte("b1")}, {Topic: "T", Body: []byte("b2")}}
	plain, err := remoting.AppendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	// zstd's encoder and the server's decoder are made once per process, here: a bubble's
	// channels must not outlive it.
	zstd, err := zbatch.Append(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zbatch.Decode(zstd, o.MaxFrameSize); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		flush      commitlog.FlushMode
		durT, durA store.Durability // of topic T, whose sends wait, and of A, whose do not
	}{
		{commitlog.FlushSync, store.DurabilityDefault, store.DurabilityAsync},
		{commitlog.FlushAsync, store.DurabilitySync, store.DurabilityDefault},
	} {
		t.Run(mode.flush.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				testSendsAnsweredOnceDurable(t, mode.flush, mode.durT, mode.durA, plain, zstd)
			})
		})
	}
}

func testSendsAnsweredOnceDurable(t *testing.T, flush commitlog.FlushMode, durT, durA store.Durability, plain, zstd []byte) {
	g := newFsyncGate()
	b := openBroker(t, &edge.Options{Store: &store.Options{FS: g, Flush: flush, FlushInterval: time.Hour, SegmentSize: 4 << 20,
		MaxMessageSize: testMaxMessage, QueueSegmentEntries: 1024, MetaNoSync: true}})
	for _, tc := range []edge.TopicConfig{{Name: "T", ReadQueues: 1, WriteQueues: 1, Durability: durT},
		{Name: "A", ReadQueues: 1, WriteQueues: 1, Durability: durA}} {
		if err := b.CreateTopic(tc); err != nil {
			t.Fatal(err)
		}
	}
	s := pipeServer(t, b, Options{})
	c := pipeClient(t, s)
	c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("before")) // opens the queue
	// A consumer waits for what comes after it, parked at the broker.
	parked := c.write(remoting.NewRequest(remoting.PullMessage, pullHeader("g", "T", 0, 1, pullSuspend|pullSubscription, 20000, "*"), nil))
	synctest.Wait()

	half := v1SendExt("T")
	half["sysFlag"] = strconv.Itoa(sysFlagTxPrepared)
	type namedSend struct {
		name string
		req  *remoting.Command
	}
	sends := []namedSend{
		{"SEND_MESSAGE", remoting.NewRequest(remoting.SendMessage, v1SendExt("T"), []byte("v1"))},
		{"SEND_MESSAGE_V2", remoting.NewRequest(remoting.SendMessageV2, sendExt("T", 0, ""), []byte("v2"))},
		{"SEND_BATCH_MESSAGE", remoting.NewRequest(remoting.SendBatchMessage, sendExt("T", 0, ""), plain)},
		{"SEND_BATCH_ZSTD", remoting.NewRequest(remoting.SendBatchZstd, sendExt("T", 0, ""), zstd)},
	}
	if flush == commitlog.FlushSync { // to the half topic, of the store's durability
		sends = append(sends, namedSend{"a half message", remoting.NewRequest(remoting.SendMessage, half, []byte("half"))})
	}

	g.held.Store(true)
	defer g.release()
	replies := make([]chan *remoting.Command, len(sends))
	for i, sd := range sends {
		replies[i] = c.write(sd.req)
	}
	// A send that need not wait is answered once written: the gate holds nothing else.
	async := c.write(remoting.NewRequest(remoting.SendMessageV2, sendExt("A", 0, ""), []byte("async")))
	synctest.Wait()
	for i, sd := range sends {
		select {
		case r := <-replies[i]:
			t.Fatalf("%s answered (code %d %q) while the fsync that covers it was in flight", sd.name, r.Code, r.Remark)
		default:
		}
	}
	if g.waiting.Load() == 0 {
		t.Fatal("the sends started no fsync")
	}
	if flush == commitlog.FlushSync {
		select {
		case r := <-parked:
			t.Fatalf("a parked pull was answered (code %d, %d bytes) while the fsync of what it found was in flight", r.Code, len(r.Body))
		default:
		}
		if r := c.call(remoting.PullMessage, pullHeader("g", "T", 0, 1, pullSubscription, 0, "*"), nil); r.Code == remoting.Success {
			t.Fatalf("a pull found %d messages not yet durable", len(decodeRecords(t, r.Body)))
		}
	}
	select {
	case r := <-async:
		if r.Code != remoting.Success {
			t.Fatalf("the send to topic A answered %d %q", r.Code, r.Remark)
		}
	default:
		t.Fatal("the send to topic A, which waits for no fsync, was not answered while one was in flight")
	}

	g.release()
	for i, sd := range sends {
		if r := c.wait(replies[i]); r.Code != remoting.Success {
			t.Fatalf("%s answered %d %q after the fsync, want success", sd.name, r.Code, r.Remark)
		}
	}
	r := c.wait(parked)
	if r.Code != remoting.Success {
		t.Fatalf("the parked pull answered %d %q after the fsync, want its messages", r.Code, r.Remark)
	}
	if recs := decodeRecords(t, r.Body); len(recs) == 0 || recs[0].body != "v1" {
		t.Fatalf("the parked pull brought %+v, want the first send after it (v1) first", recs)
	}
}

// TestSendAnsweredErrorOnFailedFsync: with the sync flush policy, a send whose fsync fails
// is answered with an error, never success (its durability is unknown), and so are the
// sends after it while the log stays failed.
func TestSendAnsweredErrorOnFailedFsync(t *testing.T) {
	g := newFsyncGate()
	b := openBroker(t, &edge.Options{Store: &store.Options{FS: g, FlushInterval: time.Hour, SegmentSize: 4 << 20,
		MaxMessageSize: testMaxMessage, QueueSegmentEntries: 1024, MetaNoSync: true}})
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, b, Options{})
	c := dial(t, s.Addr())
	c.mustCall(remoting.Success, remoting.SendMessageV2, sendExt("T", 0, ""), []byte("before"))
	g.fail.Store(true)
	for i, body := range []string{"lost?", "after"} {
		r := c.call(remoting.SendMessageV2, sendExt("T", 0, ""), []byte(body))
		if r.Code == remoting.Success {
			t.Fatalf("send %d answered success with its fsync failing", i)
		}
		if r.Code != remoting.SystemError || r.Remark == "" {
			t.Errorf("send %d answered %d %q, want SYSTEM_ERROR with the cause", i, r.Code, r.Remark)
		}
	}
}
