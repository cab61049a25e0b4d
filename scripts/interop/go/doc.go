// Package interop checks a RocketMQ-compatible broker with the unmodified Go client,
// github.com/apache/rocketmq-client-go/v2.
//
// The package holds only tests. They talk to the name server at INTEROP_NAMESRV (a literal
// ip:port; the Go client rejects host names) and skip when it is unset:
//
//	INTEROP_NAMESRV=127.0.0.1:9876 go test -count=1 ./...
//
// Each test makes its own topic and consumer groups, named with a run id, so the suite can run
// again and again against the same broker. Topics are created the way most Go programs get
// them: the first send auto-creates the topic through the TBW102 route (Apache RocketMQ's
// autoCreateTopicEnable, on by default), so every test sends before it starts a consumer and
// retries a consumer's Start until the topic has a route.
//
// Tests that need a second member of a consumer group run the test binary again as a child
// process: the Go client has one client id per process and instance name, and a separate
// process is what a second member is in real deployments.
//
// Run the suite without -race: the race detector reports data races inside rocketmq-client-go
// itself (its pull consumer's PullFrom, its orderly process queue), not in these tests.
package interop
