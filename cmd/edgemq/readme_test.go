package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgemq/edgemq/consumer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
)

// readmeEmbedding holds the Go snippets of the README's Embedding section, verbatim between
// the README markers: TestREADMESnippets checks that they are the README's, and runs them.
func readmeEmbedding(ctx context.Context, dir string, reading []byte, next int64) error {
	// README begin
	b, err := edge.Open(dir, nil) // dir: the data dir, such as "/var/lib/edgemq"; nil: every default
	if err != nil {
		return err
	}
	defer b.Close()

	res, err := b.Send(ctx, &mq.Message{Topic: "Telemetry", Tags: "temp", Body: reading}, nil)
	if err != nil {
		return err
	}
	fmt.Println("stored in queue", res.Queue.QueueID, "at offset", res.QueueOffset, "id", res.MsgID())

	// Or keep many sends in flight: they share fsyncs, and done runs once each is durable.
	err = b.SendAsync(ctx, &mq.Message{Topic: "Telemetry", Body: reading}, nil,
		func(res mq.SendResult, err error) { /* must not block */ })
	if err != nil {
		return err
	}

	pr, err := b.Pull(ctx, mq.PullRequest{
		Group: "dashboard", Queue: mq.MessageQueue{Topic: "Telemetry", QueueID: 0}, Offset: next,
		Filter: "temp || humidity", Suspend: true, // wait for new messages (long polling)
	})
	if err != nil {
		return err
	}
	for _, m := range pr.Messages {
		fmt.Println(m.QueueOffset, string(m.Body))
	}
	next = pr.NextBeginOffset

	pc, err := consumer.NewPushConsumer(b, &consumer.Options{Group: "dashboard"})
	if err != nil {
		return err
	}
	err = pc.Subscribe("Telemetry", "temp", consumer.ConcurrentListener(
		func(ctx context.Context, msgs []*consumer.Message, cc *consumer.ConcurrentlyContext) (consumer.ConsumeConcurrentlyStatus, error) {
			// ... a failure (or consumer.ReconsumeLater) sends the messages back for a retry
			return consumer.ConsumeSuccess, nil
		}))
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	defer pc.Shutdown(ctx)
	// README end
	_ = next
	return nil
}

// TestREADMESnippets: every Go block of the README is in readmeEmbedding (or is its import
// block), so the README's code compiles; and it runs.
func TestREADMESnippets(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// README begin\n")
	code, _, _ = strings.Cut(code, "// README end\n")
	code = normalize(code)
	imports := normalize(string(src[strings.Index(string(src), "import (") : strings.Index(string(src), "\n)\n")+3]))
	blocks := strings.Split(string(readme), "```go\n")[1:]
	if len(blocks) < 3 {
		t.Fatalf("README has %d Go blocks, want the imports, the broker and the consumer", len(blocks))
	}
	for _, blk := range blocks {
		blk, _, _ = strings.Cut(blk, "```")
		n := normalize(blk)
		if !strings.Contains(code, n) && !strings.Contains(imports, strings.TrimSuffix(strings.TrimPrefix(n, "import (\n"), ")\n")) {
			t.Errorf("README Go block is not in readmeEmbedding (readme_test.go):\n%s", blk)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := readmeEmbedding(ctx, filepath.Join(t.TempDir(), "data"), []byte("21.5"), 0); err != nil {
		t.Fatal(err)
	}
}

// normalize trims each line's indentation, so that code compares across nesting levels.
func normalize(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString(strings.TrimSpace(l))
		b.WriteByte('\n')
	}
	return b.String()
}
