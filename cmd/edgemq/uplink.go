package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/edgemq/edgemq/edge/uplink"
)

const upRulesWant = `[[uplink.up]] tables, each with name, topics and upstream (in a flag: ` +
	`the same as a TOML array of inline tables, [{name = "a", topics = ["T"], upstream = "10.0.0.1:9876"}])`

// ruleKey is a key of an [[uplink.up]] or [[uplink.down]] table: how it is read into a rule
// R, and written (the TOML literal, and whether the rule sets it).
type ruleKey[R any] struct {
	key   string
	read  func(r *R, v any) error
	write func(r *R) (string, bool)
}

// upRuleKeys are the keys of an [[uplink.up]] table.
var upRuleKeys = slices.Concat([]ruleKey[uplink.UpRule]{
	{"name", func(r *uplink.UpRule, v any) (err error) { r.Name, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return tomlQuote(r.Name), true }},
	{"topics", readTopics, func(r *uplink.UpRule) (string, bool) {
		q := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			q[i] = tomlQuote(t)
		}
		return "[" + strings.Join(q, ", ") + "]", true
	}},
}, upstreamKeys(func(r *uplink.UpRule) *uplink.Upstream { return &r.Upstream }), []ruleKey[uplink.UpRule]{
	{"topic_template", func(r *uplink.UpRule, v any) (err error) { r.TopicTemplate, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return tomlQuote(r.TopicTemplate), r.TopicTemplate != "" }},
	{"priority", func(r *uplink.UpRule, v any) (err error) { r.Priority, err = integer[int]().decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return strconv.Itoa(r.Priority), r.Priority != 0 }},
	{"batch_size", func(r *uplink.UpRule, v any) (err error) { r.BatchSize, err = integer[int]().decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return strconv.Itoa(r.BatchSize), r.BatchSize != 0 }},
	{"batch_bytes", func(r *uplink.UpRule, v any) (err error) { r.BatchBytes, err = size[int]().decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return size[int]().toml(r.BatchBytes), r.BatchBytes != 0 }},
	{"linger", func(r *uplink.UpRule, v any) (err error) { r.Linger, err = durationKind.decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return durationKind.toml(r.Linger), r.Linger != 0 }},
	{"compress", func(r *uplink.UpRule, v any) (err error) { r.Compress, err = boolKind.decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return strconv.FormatBool(r.Compress), r.Compress }},
	{"compress_over", func(r *uplink.UpRule, v any) (err error) { r.CompressOver, err = size[int]().decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return size[int]().toml(r.CompressOver), r.CompressOver != 0 }},
	{"rate_limit", func(r *uplink.UpRule, v any) (err error) { r.RateLimit, err = size[int64]().decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return size[int64]().toml(r.RateLimit), r.RateLimit != 0 }},
	{"overflow", func(r *uplink.UpRule, v any) error {
		s, err := text("").decode(v)
		if err == nil {
			r.Overflow, err = uplink.ParseOverflow(s)
		}
		return err
	}, func(r *uplink.UpRule) (string, bool) {
		return tomlQuote(r.Overflow.String()), r.Overflow != uplink.RejectNew
	}},
})

// upstreamKeys are the keys of a rule's upstream (where it is, its kind, its ACL account),
// the same in [[uplink.up]] and [[uplink.down]]; at picks the rule's Upstream.
func upstreamKeys[R any](at func(*R) *uplink.Upstream) []ruleKey[R] {
	return []ruleKey[R]{
		{"upstream", func(r *R, v any) (err error) { at(r).Addrs, err = text("").decode(v); return },
			func(r *R) (string, bool) { return tomlQuote(at(r).Addrs), true }},
		{"kind", func(r *R, v any) error {
			s, err := text("").decode(v)
			at(r).Kind = uplink.Kind(s)
			return err
		}, func(r *R) (string, bool) { return tomlQuote(string(at(r).Kind)), at(r).Kind != "" }},
		{"access_key", func(r *R, v any) (err error) { at(r).AccessKey, err = text("").decode(v); return },
			func(r *R) (string, bool) { return tomlQuote(at(r).AccessKey), at(r).AccessKey != "" }},
		{"secret_key", func(r *R, v any) (err error) { at(r).SecretKey, err = text("").decode(v); return },
			func(r *R) (string, bool) { return tomlQuote(at(r).SecretKey), at(r).SecretKey != "" }},
	}
}

// readTopics reads topics: an array of strings, or one string.
func readTopics(r *uplink.UpRule, v any) error {
	switch x := v.(type) {
	case string:
		r.Topics = []string{x}
		return nil
	case []any:
		r.Topics = nil
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want topic names; element %d is %s", i+1, tomlValue(e))
			}
			r.Topics = append(r.Topics, s)
		}
		return nil
	}
	return errors.New("want a topic name or an array of them")
}

// rulesKind is the kind of an array of rule tables with keys; what names a rule in errors.
func rulesKind[R any](keys []ruleKey[R], what, want string) kind[[]R] {
	decode := func(v any) ([]R, error) {
		var tables []map[string]any
		switch x := v.(type) {
		case []map[string]any:
			tables = x
		case []any:
			for _, e := range x {
				m, ok := e.(map[string]any)
				if !ok {
					return nil, errors.New("want " + want)
				}
				tables = append(tables, m)
			}
		default:
			return nil, errors.New("want " + want)
		}
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.key
		}
		rules := []R{}
		for i, m := range tables {
			var r R
			for _, k := range slices.Sorted(maps.Keys(m)) {
				j := slices.IndexFunc(keys, func(u ruleKey[R]) bool { return u.key == k })
				if j < 0 {
					return nil, fmt.Errorf("%s %d: unknown key %s: the keys are %s", what, i+1, k, list(names))
				}
				if err := keys[j].read(&r, m[k]); err != nil {
					return nil, fmt.Errorf("%s %d: %s = %s: %w", what, i+1, k, tomlValue(m[k]), err)
				}
			}
			rules = append(rules, r)
		}
		return rules, nil
	}
	format := func(rules []R) string {
		q := make([]string, len(rules))
		for i := range rules {
			var kv []string
			for _, k := range keys {
				if v, ok := k.write(&rules[i]); ok {
					kv = append(kv, k.key+" = "+v)
				}
			}
			q[i] = "{" + strings.Join(kv, ", ") + "}"
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return kind[[]R]{
		name:   "tables",
		want:   want,
		decode: decode,
		parse: func(s string) ([]R, error) {
			var v map[string]any
			if _, err := toml.Decode("v = "+s, &v); err != nil {
				return nil, errors.New("want " + want)
			}
			return decode(v["v"])
		},
		toml: format,
		text: format,
	}
}

// upRulesKind reads [[uplink.up]] tables (or an array of inline tables); in a flag, the
// same array as TOML. The rules themselves are checked by uplink.Start.
var upRulesKind = rulesKind(upRuleKeys, "up rule", upRulesWant)

const downRulesWant = `[[uplink.down]] tables, each with name, topic and upstream (in a flag: ` +
	`the same as a TOML array of inline tables, [{name = "cmd", topic = "Commands", upstream = "10.0.0.1:9876"}])`

// downRuleKeys are the keys of an [[uplink.down]] table.
var downRuleKeys = slices.Concat([]ruleKey[uplink.DownRule]{
	{"name", func(r *uplink.DownRule, v any) (err error) { r.Name, err = text("").decode(v); return },
		func(r *uplink.DownRule) (string, bool) { return tomlQuote(r.Name), true }},
	{"topic", func(r *uplink.DownRule, v any) (err error) { r.Topic, err = text("").decode(v); return },
		func(r *uplink.DownRule) (string, bool) { return tomlQuote(r.Topic), true }},
}, upstreamKeys(func(r *uplink.DownRule) *uplink.Upstream { return &r.Upstream }), []ruleKey[uplink.DownRule]{
	{"group", func(r *uplink.DownRule, v any) (err error) { r.Group, err = text("").decode(v); return },
		func(r *uplink.DownRule) (string, bool) { return tomlQuote(r.Group), r.Group != "" }},
	{"local_topic", func(r *uplink.DownRule, v any) (err error) { r.LocalTopic, err = text("").decode(v); return },
		func(r *uplink.DownRule) (string, bool) { return tomlQuote(r.LocalTopic), r.LocalTopic != "" }},
	{"batch_size", func(r *uplink.DownRule, v any) (err error) { r.BatchSize, err = integer[int]().decode(v); return },
		func(r *uplink.DownRule) (string, bool) { return strconv.Itoa(r.BatchSize), r.BatchSize != 0 }},
})

// downRulesKind reads [[uplink.down]] tables, as upRulesKind.
var downRulesKind = rulesKind(downRuleKeys, "down rule", downRulesWant)

// downDoc is the doc of uplink.down.
const downDoc = "The down rules: each [[uplink.down]] table mirrors an upstream topic into a local one: " +
	"the queues of the topic its group gives this gateway (gateways and RocketMQ consumers of one group " +
	"divide the queues as RocketMQ's clients do), in order, each upstream message stored locally once (across crashes), " +
	"synced before the cursor moves and the group's offset is committed upstream. Keys: name (required; " +
	"names the rule's stored cursors, distinct from the up rules'), topic (required: the upstream topic), " +
	"upstream (required), kind, access_key and secret_key (as in [[uplink.up]]), group (the upstream " +
	"consumer group; default <gateway>_<name>), local_topic (default: topic), batch_size (1..1024; " +
	"default 32). Example: [[uplink.down]] name = \"cmd\" topic = \"Commands\" upstream = \"10.0.0.1:9876\"."

// upDoc is the doc of uplink.up.
const upDoc = "The up rules: each [[uplink.up]] table forwards local topics to an upstream broker (Apache " +
	"RocketMQ, or another EdgeMQ as hub), store-and-forward: in order per queue, at least once, each " +
	"message with its id, keys, tags and properties, resuming after restarts and days offline where the " +
	"upstream last acknowledged. Keys: name (required; names the rule's stored cursors), topics (required: " +
	"names, or prefixes ending in *), upstream (required: the name servers, ip:port;ip:port), kind (rocketmq " +
	"or edgemq; default rocketmq), access_key and secret_key (the upstream's ACL account: requests are signed with it), " +
	"topic_template (the upstream topic, {topic} and {gateway} replaced; default {topic}), priority " +
	"(higher goes first; default 0), batch_size (1..1024; default 32), batch_bytes (default 256KiB; with a rate_limit, at most a quarter second of it), " +
	"linger (wait for a fuller batch; default 0s), compress (to an edgemq hub: batches compressed " +
	"whole with zstd, plain if the hub does not take them; to rocketmq: zlib bodies of at least " +
	"compress_over, default 1KiB, sent one by one, which RocketMQ 4.x and 5.x consumers decode; " +
	"default false), rate_limit (bytes per second; default 0: none), " +
	"overflow (reject_new: retention keeps what is not forwarded and a full disk refuses new messages; " +
	"drop_oldest: retention deletes as configured and counts what was not forwarded as lost; default " +
	"reject_new). Example: [[uplink.up]] name = \"alarms\" topics = [\"alarm\"] upstream = " +
	"\"10.0.0.1:9876\" priority = 10."
