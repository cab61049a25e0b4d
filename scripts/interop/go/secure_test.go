package interop

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The variables that hold the addresses of brokers with the ACL on, whose accounts are those
// of the secure* credentials below: secureEnv's with TLS permissive (TLS and plain clients),
// tlsEnv's with TLS only. run.sh sets them for edgemq only (see DIFFERENCES.md).
const (
	secureEnv = "INTEROP_SECURE_NAMESRV"
	tlsEnv    = "INTEROP_TLS_NAMESRV"
)

// The accounts of run.sh's ACL file for the secure broker.
var (
	// secureApp may publish to and subscribe from any topic, in any group.
	secureApp = primitive.Credentials{AccessKey: "interop-app", SecretKey: "interop-app-secret"}
	// secureReader may only subscribe.
	secureReader = primitive.Credentials{AccessKey: "interop-reader", SecretKey: "interop-reader-secret"}
)

func needSecure(t *testing.T, env string) string {
	t.Helper()
	addr := os.Getenv(env)
	if addr == "" {
		t.Skipf("%s is unset: no broker with TLS and an ACL (run.sh starts one beside edgemq serve; DIFFERENCES.md)", env)
	}
	return addr
}

// secureSendAndConsume sends three messages with credentials (and TLS when tls, to the
// TLS-only broker), and a push consumer with the same settings reads them back.
func secureSendAndConsume(t *testing.T, scenario string, tls bool) {
	addr := needSecure(t, map[bool]string{false: secureEnv, true: tlsEnv}[tls])
	topic, group := names(scenario)
	ns := primitive.NewPassthroughResolver([]string{addr})
	p := newProducer(t, group, producer.WithNsResolver(ns), producer.WithCredentials(secureApp), producer.WithTls(tls))
	var want []string
	for i, m := range sample(topic, scenario) {
		res := sendSync(t, p, m)
		if res.MsgID == "" {
			t.Fatalf("message %d: no MsgID", i)
		}
		want = append(want, res.MsgID)
	}
	col := newCollector()
	c, err := startPushConsumer(group, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, col.consume("c"),
		consumer.WithNsResolver(ns), consumer.WithCredentials(secureApp), consumer.WithTls(tls))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	gs, ok := col.waitIDs(readBackTimeout, want)
	if !ok {
		t.Fatalf("after %v, missing %v; got:%s", readBackTimeout, missing(gs, want), describe(gs))
	}
}

// TestSecureACL: with credentials, a producer and a push consumer work through the ACL.
func TestSecureACL(t *testing.T) { secureSendAndConsume(t, "secure_acl", false) }

// tlsChildEnv marks the process that runs TestSecureTLS's clients.
const tlsChildEnv = "INTEROP_TLS_CHILD"

// TestSecureTLS: the same over TLS (WithTls), against a broker that speaks only TLS. The
// clients run in a process of their own: rocketmq-client-go's WithTls sets a process-wide
// default (its DefaultRemotingClientConfig), so every later client of this process would
// speak TLS too.
func TestSecureTLS(t *testing.T) {
	needSecure(t, tlsEnv)
	if os.Getenv(tlsChildEnv) != "" {
		secureSendAndConsume(t, "secure_tls", true)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSecureTLS$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), tlsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSecureTLS") {
		// run.sh reads "--- PASS" lines as rows: the child's are not the parent's.
		t.Fatalf("the TLS clients' process: %v\n%s", err, strings.ReplaceAll(string(out), "--- ", "-- "))
	}
}

// TestSecureACLRefused: a wrong secret, no credentials, and an account without PUB are
// answered NO_PERMISSION (code 16).
func TestSecureACLRefused(t *testing.T) {
	addr := needSecure(t, secureEnv)
	topic, group := names("secure_refused")
	ns := primitive.NewPassthroughResolver([]string{addr})
	for _, tc := range []struct {
		name string
		opts []producer.Option
	}{
		{"wrong secret", []producer.Option{producer.WithCredentials(primitive.Credentials{AccessKey: secureApp.AccessKey, SecretKey: "not-the-secret"})}},
		{"no credentials", nil},
		{"no PUB permission", []producer.Option{producer.WithCredentials(secureReader)}},
	} {
		p := newProducer(t, group, append([]producer.Option{producer.WithNsResolver(ns)}, tc.opts...)...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("refused")))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "CODE: 16") {
			t.Errorf("%s: SendSync error %v, want CODE: 16 (NO_PERMISSION)", tc.name, err)
		}
	}
}
