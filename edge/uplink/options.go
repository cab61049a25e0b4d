package uplink

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// Kind is the kind of upstream broker.
type Kind string

const (
	// KindRocketMQ is an Apache RocketMQ cluster (4.x or 5.x), reached through its name
	// servers.
	KindRocketMQ Kind = "rocketmq"
	// KindEdgeMQ is another EdgeMQ acting as hub (its address serves as name server).
	KindEdgeMQ Kind = "edgemq"
)

// Overflow is what happens when the local disk fills before a rule's backlog drains.
type Overflow int

const (
	// RejectNew keeps every message not yet forwarded: retention does not delete them, and
	// a full disk refuses new messages.
	RejectNew Overflow = iota
	// DropOldest lets retention delete the oldest messages, forwarded or not; those not
	// forwarded are counted as lost (RuleStats.Lost) and logged.
	DropOldest
)

// String returns "reject_new" or "drop_oldest", as ParseOverflow reads them.
func (o Overflow) String() string {
	switch o {
	case RejectNew:
		return "reject_new"
	case DropOldest:
		return "drop_oldest"
	}
	return fmt.Sprintf("Overflow(%d)", int(o))
}

// ParseOverflow parses "reject_new" (or "") and "drop_oldest".
func ParseOverflow(s string) (Overflow, error) {
	switch s {
	case "reject_new", "":
		return RejectNew, nil
	case "drop_oldest":
		return DropOldest, nil
	}
	return 0, fmt.Errorf("%w: overflow %q (want reject_new or drop_oldest)", ErrInvalidRule, s)
}

// Upstream is the broker a rule talks to.
type Upstream struct {
	// Addrs are the upstream's name servers, "ip:port" separated by ';' (an EdgeMQ hub's
	// own address). Required.
	Addrs string
	// Kind is KindRocketMQ or KindEdgeMQ. Default KindRocketMQ.
	Kind Kind
	// AccessKey and SecretKey are the upstream's ACL credentials: when AccessKey is set,
	// every request to the upstream is signed with them as RocketMQ's plain ACL wants
	// (Apache RocketMQ with ACL on, or an EdgeMQ hub with server.acl).
	AccessKey, SecretKey string
}

// UpRule forwards local topics upstream.
type UpRule struct {
	// Name identifies the rule and its cursors: 1..64 characters of A-Z a-z 0-9 _ -.
	// Renaming a rule starts its topics over from their first stored message.
	Name string
	// Topics are the local topics forwarded: names, or prefixes ending in '*' ("sensor-*")
	// matching the topics that exist now and those created later. At least one.
	Topics []string
	// Upstream is where they go.
	Upstream Upstream
	// TopicTemplate names the upstream topic of a local one: "{topic}" is the local
	// topic, "{gateway}" Options.Gateway. Default "{topic}".
	TopicTemplate string
	// Priority: when rules both have batches ready, the higher priority's are sent first.
	// Default 0.
	Priority int
	// BatchSize is the most messages per batch, 1..1024. Default 32.
	BatchSize int
	// BatchBytes is the most body bytes per batch (one message is always sent, whatever
	// its size). Default 256 KiB. Under a rate cap (RateLimit, or the Options' shared one,
	// the smaller) it is at most a quarter second's worth of the cap, so that a message of
	// a higher priority waits at most that long behind one batch.
	BatchBytes int
	// Linger is how long a forwarder that read fewer than BatchSize messages waits for
	// more before sending. Default 0: send at once.
	Linger time.Duration
	// Compress compresses what the rule sends. To an EdgeMQ hub (KindEdgeMQ) each batch
	// goes compressed whole with zstd (SEND_BATCH_ZSTD); a hub that answers it is not
	// supported gets plain batches from then on, until the Uplink restarts. To Apache
	// RocketMQ each message goes on its own, its body zlib-compressed when it has at least
	// CompressOver bytes (the COMPRESSED sysflag, which RocketMQ's 4.x and 5.x consumers
	// decode). Default false: batches, uncompressed.
	Compress bool
	// CompressOver is the smallest body compressed one by one, with Compress: to RocketMQ,
	// and to a hub a batch of one message. Default 1 KiB.
	CompressOver int
	// RateLimit caps the body bytes per second this rule sends. Default 0: no cap. On a
	// slow link, capping a bulk rule under the link's rate (counting the wire's overhead
	// per message) keeps the link's queue short, so that a higher priority's message does
	// not wait behind it.
	RateLimit int64
	// Overflow is what a full local disk does to the rule's backlog. Default RejectNew.
	Overflow Overflow
}

// Options configures an Uplink. A zero field takes its default; nil Options forwards
// nothing.
type Options struct {
	// Up are the up rules.
	Up []UpRule
	// Down are the down rules.
	Down []DownRule
	// Gateway is the value of "{gateway}" in topic templates: 1..64 characters of
	// A-Z a-z 0-9 _ -. Default the broker's name.
	Gateway string
	// RateLimit caps the body bytes per second of all rules together. Default 0: no cap.
	RateLimit int64
	// BackoffMin and BackoffMax bound the wait after a failed send or dial: it starts at
	// BackoffMin and doubles after each further failure up to BackoffMax, each wait
	// jittered to between half and all of it. Defaults 500 ms and 60 s.
	BackoffMin, BackoffMax time.Duration
	// SendTimeout bounds one batch's send. Default 10 s.
	SendTimeout time.Duration
	// ScanInterval is how often topics are matched again against the rules, for topics and
	// queues created meanwhile, and down rules divide their group's queues again (they also
	// do at once when the upstream says the group's members changed). Default 10 s.
	ScanInterval time.Duration
	// PaceDelay bounds, roughly, how long a higher priority's message waits in the link's
	// queue behind the batches of lower-priority rules to the same upstream (by Addrs):
	// while they drain, their body bytes in flight are kept to the link's measured delivery
	// rate times its round trip plus PaceDelay and one batch, and their batches to a
	// quarter second of that rate. Default 200 ms; negative: no pacing (the lower rules
	// fill the link's queue, which on a slow link may hold seconds).
	PaceDelay time.Duration
	// Logger receives link state changes and losses. Default: discard.
	Logger *slog.Logger
}

// DefaultOptions are the defaults of Options.
var DefaultOptions = Options{
	BackoffMin:   500 * time.Millisecond,
	BackoffMax:   60 * time.Second,
	SendTimeout:  10 * time.Second,
	ScanInterval: 10 * time.Second,
	PaceDelay:    200 * time.Millisecond,
}

// Rule defaults.
const (
	DefaultBatchSize    = 32
	DefaultBatchBytes   = 256 << 10
	DefaultCompressOver = 1 << 10
	DefaultTemplate     = "{topic}"
	maxBatchSize        = 1024
	maxNameLen          = 64
)

// Validate reports the first rule or option that cannot work, as Start would, without a
// broker: brokerName stands for the broker's name (Gateway's default). The error wraps
// ErrInvalidRule and names the rule and the field.
func (o *Options) Validate(brokerName string) error {
	_, err := o.withDefaults(brokerName)
	return err
}

// RetentionHolds returns the retention holds (edge.Options.RetentionHolds) of the RejectNew
// up rules, for the broker the Uplink will run on: from the broker's open until Start, the
// messages those rules have not forwarded stay, and Start takes over. brokerName stands for
// the broker's name (Gateway's default). Options that do not validate hold nothing.
func (o *Options) RetentionHolds(brokerName string) []edge.RetentionHold {
	r, err := o.withDefaults(brokerName)
	if err != nil {
		return nil
	}
	var holds []edge.RetentionHold
	for _, u := range r.Up {
		if u.Overflow == RejectNew {
			holds = append(holds, edge.RetentionHold{Name: u.Name, Match: u.matches})
		}
	}
	return holds
}

// withDefaults returns the options with defaults filled in and every rule checked, or an
// error wrapping ErrInvalidRule that names the rule and field.
func (o *Options) withDefaults(brokerName string) (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	d := DefaultOptions
	if r.Gateway == "" {
		r.Gateway = brokerName
	}
	if r.BackoffMin == 0 {
		r.BackoffMin = d.BackoffMin
	}
	if r.BackoffMax == 0 {
		r.BackoffMax = d.BackoffMax
	}
	if r.SendTimeout == 0 {
		r.SendTimeout = d.SendTimeout
	}
	if r.ScanInterval == 0 {
		r.ScanInterval = d.ScanInterval
	}
	if r.PaceDelay == 0 {
		r.PaceDelay = d.PaceDelay
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case r.BackoffMin < 0 || r.BackoffMax < r.BackoffMin:
		return r, fmt.Errorf("%w: backoff %v..%v (want 0 < min <= max)", ErrInvalidRule, r.BackoffMin, r.BackoffMax)
	case r.SendTimeout < 0, r.ScanInterval < 0:
		return r, fmt.Errorf("%w: negative SendTimeout or ScanInterval", ErrInvalidRule)
	case r.RateLimit < 0:
		return r, fmt.Errorf("%w: negative RateLimit %d", ErrInvalidRule, r.RateLimit)
	case checkName(r.Gateway) != nil:
		return r, fmt.Errorf("%w: gateway %q: %v", ErrInvalidRule, r.Gateway, checkName(r.Gateway))
	}
	r.Up = append([]UpRule(nil), r.Up...)
	seen := map[string]bool{}
	for i := range r.Up {
		u := &r.Up[i]
		if err := u.fill(r.Gateway); err != nil {
			return r, fmt.Errorf("%w: up rule %d (%q): %w", ErrInvalidRule, i+1, u.Name, err)
		}
		if seen[u.Name] {
			return r, fmt.Errorf("%w: up rule %d: name %q used twice", ErrInvalidRule, i+1, u.Name)
		}
		seen[u.Name] = true
		// On a capped link a batch carries at most a quarter second of the cap, so that a
		// higher priority's message waits at most that long behind one batch.
		if q := quarterSecond(minCap(u.RateLimit, r.RateLimit)); q > 0 && u.BatchBytes > q {
			u.BatchBytes = q
		}
	}
	r.Down = append([]DownRule(nil), r.Down...)
	for i := range r.Down {
		d := &r.Down[i]
		if err := d.fill(r.Gateway); err != nil {
			return r, fmt.Errorf("%w: down rule %d (%q): %w", ErrInvalidRule, i+1, d.Name, err)
		}
		if seen[d.Name] {
			return r, fmt.Errorf("%w: down rule %d: name %q used twice", ErrInvalidRule, i+1, d.Name)
		}
		seen[d.Name] = true
	}
	return r, nil
}

// fill sets a rule's defaults and checks it.
func (u *UpRule) fill(gateway string) error {
	if err := checkName(u.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if len(u.Topics) == 0 {
		return fmt.Errorf("no topics")
	}
	u.Topics = append([]string(nil), u.Topics...)
	if u.TopicTemplate == "" {
		u.TopicTemplate = DefaultTemplate
	}
	for _, t := range u.Topics {
		name, pattern := strings.CutSuffix(t, "*")
		if pattern && name == "" {
			continue // every topic
		}
		if err := mq.ValidateTopic(name); err != nil {
			return fmt.Errorf("topic %q: %w", t, err)
		}
		if strings.Contains(name, "*") {
			return fmt.Errorf("topic %q: '*' only at the end", t)
		}
		if !pattern {
			if err := mq.ValidateTopic(u.upstreamTopic(gateway, name)); err != nil {
				return fmt.Errorf("upstream topic of %q by template %q: %w", t, u.TopicTemplate, err)
			}
		}
	}
	if s := strings.NewReplacer("{topic}", "", "{gateway}", "").Replace(u.TopicTemplate); strings.ContainsAny(s, "{}") {
		return fmt.Errorf("template %q: the placeholders are {topic} and {gateway}", u.TopicTemplate)
	}
	if !strings.Contains(u.TopicTemplate, "{topic}") && len(u.Topics) > 1 {
		return fmt.Errorf("template %q without {topic} would merge %d topics", u.TopicTemplate, len(u.Topics))
	}
	if err := u.Upstream.fill(); err != nil {
		return err
	}
	if u.BatchSize == 0 {
		u.BatchSize = DefaultBatchSize
	}
	if u.BatchBytes == 0 {
		u.BatchBytes = DefaultBatchBytes
	}
	if u.CompressOver == 0 {
		u.CompressOver = DefaultCompressOver
	}
	switch {
	case u.BatchSize < 1 || u.BatchSize > maxBatchSize:
		return fmt.Errorf("batch size %d not in 1..%d", u.BatchSize, maxBatchSize)
	case u.BatchBytes < 0, u.CompressOver < 0, u.Linger < 0, u.RateLimit < 0:
		return fmt.Errorf("negative batch bytes, compress over, linger or rate limit")
	case u.Overflow != RejectNew && u.Overflow != DropOldest:
		return fmt.Errorf("overflow %v", u.Overflow)
	}
	return nil
}

// matches reports whether local topic t is one of the rule's.
func (u *UpRule) matches(t string) bool {
	for _, p := range u.Topics {
		if name, pattern := strings.CutSuffix(p, "*"); pattern && strings.HasPrefix(t, name) || p == t {
			return true
		}
	}
	return false
}

// upstreamTopic applies the rule's template to local topic t.
func (u *UpRule) upstreamTopic(gateway, t string) string {
	return strings.NewReplacer("{topic}", t, "{gateway}", gateway).Replace(u.TopicTemplate)
}

// minCap returns the smaller of two rate caps, 0 (no cap) counting as none.
func minCap(a, b int64) int64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

func checkName(s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("%q must be 1 to %d characters", s, maxNameLen)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%q must be characters of A-Z a-z 0-9 _ -", s)
		}
	}
	return nil
}

func checkAddrs(s string) error {
	list := strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
	if len(list) == 0 {
		return fmt.Errorf("none given")
	}
	for _, a := range list {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("%q is not host:port", a)
		}
	}
	return nil
}

// fill sets the upstream's defaults and checks it: its addresses, its kind, and that
// its credentials come as a pair.
func (up *Upstream) fill() error {
	if err := checkAddrs(up.Addrs); err != nil {
		return fmt.Errorf("upstream addrs: %w", err)
	}
	switch up.Kind {
	case "":
		up.Kind = KindRocketMQ
	case KindRocketMQ, KindEdgeMQ:
	default:
		return fmt.Errorf("upstream kind %q (want rocketmq or edgemq)", up.Kind)
	}
	if (up.AccessKey == "") != (up.SecretKey == "") {
		return fmt.Errorf("upstream access key and secret key: both or neither")
	}
	return nil
}

// credentials returns the upstream's ACL credentials for the remoting client.
func (up Upstream) credentials() remoting.Credentials {
	return remoting.Credentials{AccessKey: up.AccessKey, SecretKey: up.SecretKey}
}
