// Command gomember is one member of a consumer group in its own process: EdgeMQ's
// PushConsumer over EdgeMQ's remoting client, for the interop suite's mixed groups, where it
// shares a group with Apache RocketMQ's Java DefaultMQPushConsumer (ConsumerMember). It
// speaks ConsumerMember's protocol:
//
//	gomember NAMESRV GROUP TOPIC CLUSTERING|BROADCASTING NAME
//
// It prints READY once started, "ALLOC q,q,..." (sorted queue ids of TOPIC) after every
// rebalance, "MSG i queueId" per message (i is the message's user property "i") and STOPPED
// after a clean shutdown, which "stop" or the end of stdin asks for. Errors go to stderr.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

var outMu sync.Mutex

func say(line string) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Println(line)
}

// printingStrategy is AllocateAveragely, printing the allocations of one topic.
type printingStrategy struct {
	consumer.AllocateAveragely
	topic string
}

func (s printingStrategy) Allocate(group, cid string, mqs []mq.MessageQueue, cids []string) ([]mq.MessageQueue, error) {
	mine, err := s.AllocateAveragely.Allocate(group, cid, mqs, cids)
	if err != nil || len(mqs) == 0 || mqs[0].Topic != s.topic {
		return mine, err
	}
	ids := make([]int, 0, len(mine))
	for _, q := range mine {
		ids = append(ids, int(q.QueueID))
	}
	slices.Sort(ids)
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = strconv.Itoa(id)
	}
	say("ALLOC " + strings.Join(strs, ","))
	return mine, nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gomember:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("usage: gomember NAMESRV GROUP TOPIC CLUSTERING|BROADCASTING NAME")
	}
	ns, group, topic, model, name := args[0], args[1], args[2], args[3], args[4]
	o := &consumer.Options{
		Group:     group,
		FromWhere: consumer.ConsumeFromFirstOffset,
		Strategy:  printingStrategy{topic: topic},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	switch model {
	case "CLUSTERING":
	case "BROADCASTING":
		o.Model = mq.Broadcasting
		dir, err := os.MkdirTemp("", "gomember-offsets-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.OffsetDir = dir
		o.ClientID = name
	default:
		return fmt.Errorf("model %q: want CLUSTERING or BROADCASTING", model)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The Java members poll the name server every second (Interop.ROUTE_POLL_MS).
	c, err := remoting.Dial(ctx, ns, &remoting.Options{RouteRefresh: time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	pc, err := consumer.NewPushConsumer(c, o)
	if err != nil {
		return err
	}
	err = pc.Subscribe(topic, "*", consumer.ConcurrentListener(func(_ context.Context, msgs []*consumer.Message, _ *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
		for _, m := range msgs {
			say("MSG " + m.Properties["i"] + " " + strconv.Itoa(int(m.QueueID)))
		}
		return consumer.ConsumeSuccess, nil
	}))
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	say("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && strings.TrimSpace(in.Text()) != "stop" {
	}
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := pc.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "gomember: shutdown:", err)
	}
	say("STOPPED")
	return nil
}
