package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// stdin is what send reads when it is given no bodies; tests replace it.
var stdin io.Reader = os.Stdin

const sendDoc = `
Each argument is the body of one message; without arguments, each line of stdin is.
An acknowledged message prints its id, queue and offset; with the default store.flush =
"sync" it is on disk by then.

The topic must exist (edgemq topic create makes one), or -create creates it, with
broker.default_queues queues, and a new data dir if there is none.

-sharding_key and -message_keys are different things. A sharding key picks the queue:
messages with one sharding key go to one queue, in the order sent, which is what ordered
topics need. Message keys (RocketMQ's KEYS) are stored with the message for looking it up
and are shown by consume; they do not choose a queue.

Examples:
  edgemq send -topic Orders -sharding_key order-42 -tags new '{"id": 42}'
  edgemq send -topic Telemetry -create < readings.txt
  edgemq send -topic Orders -message_keys "order-42 customer-7" -- -body-starting-with-a-dash`

func sendCommand(fs *flag.FlagSet) runFunc {
	tf := addTargetFlags(fs)
	topic := fs.String("topic", "", "`topic` to send to (required)")
	createTopic := fs.Bool("create", false, "create the topic if it does not exist (and the data dir)")
	tags := fs.String("tags", "", "the messages' `tag`, which consumers filter on")
	keys := fs.String("message_keys", "", "message `keys`, space-separated, stored with each message for lookup; they do not pick the queue")
	shard := fs.String("sharding_key", "", "sharding `key`: messages with one sharding key go to one queue, in order")
	queue := fs.Int("queue", -1, "queue `id` to send to (default: round robin, or by -sharding_key)")
	delay := fs.Int("delay", 0, "delay `level` (1..18 with the default broker.delay_levels: 1s 5s 10s 30s 1m ... 2h)")
	inflight := fs.Int("inflight", 1024, "sends in flight at once, sharing fsyncs (`n`; 1: wait for each). With -server,\n"+
		"sends to one queue (-queue, -sharding_key) go one at a time, in order")
	jsonOut := jsonFlag(fs)
	return func(ctx context.Context, args []string, out, _ io.Writer) (err error) {
		if *topic == "" {
			return usageError("-topic is required")
		}
		if *inflight < 1 {
			return usageError("-inflight must be at least 1")
		}
		if *queue >= 0 && *shard != "" {
			return usageError("give -queue or -sharding_key, not both")
		}
		if *delay < 0 {
			return usageError("-delay must be 0 or more")
		}
		a := readWrite
		if *createTopic {
			a = create
		}
		// The CLI never creates a topic by sending to it: a typo would make a new one.
		b, err := tf.open(ctx, a, func(c *config) { c.broker.NoAutoCreateTopics = true })
		if err != nil {
			return err
		}
		defer b.Close()
		if _, err := b.Topic(ctx, *topic); errors.Is(err, mq.ErrTopicNotExist) {
			if !*createTopic {
				return fmt.Errorf("topic %q does not exist: create it with 'edgemq topic create -name %s', or send with -create", *topic, *topic)
			}
			if err := b.CreateTopic(ctx, edge.TopicConfig{Name: *topic}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		var sel mq.QueueSelector
		switch {
		case *queue >= 0:
			sel = mq.QueueIndex(*queue)
		case *shard != "":
			sel = mq.ShardingKey(*shard)
		}
		n := *inflight
		if _, remote := b.(remoteTarget); remote && sel != nil {
			// A server may store the sends in flight on one connection in any order: the
			// messages of one queue go one at a time, so that they keep their order.
			n = 1
		}
		w := newSendWindow(n, out, *jsonOut)
		defer func() { err = cmp.Or(err, w.wait()) }()
		send := func(body string) error {
			m := &mq.Message{Topic: *topic, Tags: *tags, Keys: *keys, Body: []byte(body)}
			m.SetDelayLevel(*delay)
			return w.send(ctx, b, m, sel)
		}
		if len(args) > 0 {
			for _, a := range args {
				if err := send(a); err != nil {
					return err
				}
			}
			return nil
		}
		lines, readErr := readLines(ctx, stdin)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case l, ok := <-lines:
				if !ok {
					return <-readErr
				}
				if err := send(l); err != nil {
					return err
				}
			}
		}
	}
}

// readLines reads r line by line in a goroutine, which sends each line, then closes lines
// after sending the read error (nil at EOF) on errc. It returns when r is done or ctx ends;
// a goroutine blocked in a read of a terminal at an interrupt ends with the process.
func readLines(ctx context.Context, r io.Reader) (lines <-chan string, errc <-chan error) {
	lc := make(chan string)
	ec := make(chan error, 1)
	go func() {
		defer close(lc)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			select {
			case lc <- sc.Text():
			case <-ctx.Done():
				ec <- ctx.Err()
				return
			}
		}
		ec <- sc.Err()
	}()
	return lc, ec
}

// sendWindow keeps up to n Broker.SendAsync calls in flight and prints each result as it is
// acknowledged (in the order the messages were stored).
type sendWindow struct {
	slots  chan struct{}
	out    io.Writer
	asJSON bool
	mu     sync.Mutex // guards err and out
	err    error      // the first failed acknowledgement
}

func newSendWindow(n int, out io.Writer, asJSON bool) *sendWindow {
	return &sendWindow{slots: make(chan struct{}, n), out: out, asJSON: asJSON}
}

// send sends m once a slot is free; it returns the error of a refused send, or of an earlier
// send whose acknowledgement failed.
func (w *sendWindow) send(ctx context.Context, b target, m *mq.Message, sel mq.QueueSelector) error {
	w.slots <- struct{}{}
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err == nil {
		err = b.SendAsync(ctx, m, sel, w.done)
	}
	if err != nil {
		<-w.slots
	}
	return err
}

// sentJSON is an acknowledgement as send -json prints it, one a line.
type sentJSON struct {
	MsgID           string `json:"msgId"`
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queueId"`
	QueueOffset     int64  `json:"queueOffset"`
	CommitLogOffset int64  `json:"commitLogOffset"`
}

func (w *sendWindow) done(res mq.SendResult, err error) {
	w.mu.Lock()
	if err != nil {
		w.err = cmp.Or(w.err, err)
	} else if w.asJSON {
		line, _ := json.Marshal(sentJSON{res.MsgID(), res.Queue.Topic, res.Queue.QueueID, res.QueueOffset, res.CommitLogOffset})
		w.out.Write(append(line, '\n'))
	} else {
		fmt.Fprintf(w.out, "%s queue=%d offset=%d\n", res.MsgID(), res.Queue.QueueID, res.QueueOffset)
	}
	w.mu.Unlock()
	<-w.slots
}

// wait waits for every send in flight and returns the first failed acknowledgement.
func (w *sendWindow) wait() error {
	for range cap(w.slots) {
		w.slots <- struct{}{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
