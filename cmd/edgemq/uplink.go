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

// upRuleKey is a key of an [[uplink.up]] table: how it is read, and written (the TOML
// literal, and whether the rule sets it).
type upRuleKey struct {
	key   string
	read  func(r *uplink.UpRule, v any) error
	write func(r *uplink.UpRule) (string, bool)
}

// upRuleKeys are the keys of an [[uplink.up]] table, each with how it is read and written.
var upRuleKeys = []upRuleKey{
	{"name", func(r *uplink.UpRule, v any) (err error) { r.Name, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return tomlQuote(r.Name), true }},
	{"topics", readTopics, func(r *uplink.UpRule) (string, bool) {
		q := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			q[i] = tomlQuote(t)
		}
		return "[" + strings.Join(q, ", ") + "]", true
	}},
	{"upstream", func(r *uplink.UpRule, v any) (err error) { r.Upstream.Addrs, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) { return tomlQuote(r.Upstream.Addrs), true }},
	{"kind", func(r *uplink.UpRule, v any) error {
		s, err := text("").decode(v)
		r.Upstream.Kind = uplink.Kind(s)
		return err
	}, func(r *uplink.UpRule) (string, bool) {
		return tomlQuote(string(r.Upstream.Kind)), r.Upstream.Kind != ""
	}},
	{"access_key", func(r *uplink.UpRule, v any) (err error) { r.Upstream.AccessKey, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) {
			return tomlQuote(r.Upstream.AccessKey), r.Upstream.AccessKey != ""
		}},
	{"secret_key", func(r *uplink.UpRule, v any) (err error) { r.Upstream.SecretKey, err = text("").decode(v); return },
		func(r *uplink.UpRule) (string, bool) {
			return tomlQuote(r.Upstream.SecretKey), r.Upstream.SecretKey != ""
		}},
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

// upRulesKind reads [[uplink.up]] tables (or an array of inline tables); in a flag, the
// same array as TOML. The rules themselves are checked by uplink.Start.
var upRulesKind = kind[[]uplink.UpRule]{
	name:   "tables",
	want:   upRulesWant,
	decode: decodeUpRules,
	parse: func(s string) ([]uplink.UpRule, error) {
		var v map[string]any
		if _, err := toml.Decode("v = "+s, &v); err != nil {
			return nil, errors.New("want " + upRulesWant)
		}
		return decodeUpRules(v["v"])
	},
	toml: formatUpRules,
	text: formatUpRules,
}

// decodeUpRules reads the tables of uplink.up as the TOML decoder gives them.
func decodeUpRules(v any) ([]uplink.UpRule, error) {
	var tables []map[string]any
	switch x := v.(type) {
	case []map[string]any:
		tables = x
	case []any:
		for _, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, errors.New("want " + upRulesWant)
			}
			tables = append(tables, m)
		}
	default:
		return nil, errors.New("want " + upRulesWant)
	}
	rules := []uplink.UpRule{}
	for i, m := range tables {
		var r uplink.UpRule
		for _, k := range slices.Sorted(maps.Keys(m)) {
			j := slices.IndexFunc(upRuleKeys, func(u upRuleKey) bool { return u.key == k })
			if j < 0 {
				return nil, fmt.Errorf("up rule %d: unknown key %s: the keys are %s", i+1, k, list(upRuleKeyNames()))
			}
			if err := upRuleKeys[j].read(&r, m[k]); err != nil {
				return nil, fmt.Errorf("up rule %d: %s = %s: %w", i+1, k, tomlValue(m[k]), err)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// formatUpRules writes rules as a TOML array of inline tables.
func formatUpRules(rules []uplink.UpRule) string {
	q := make([]string, len(rules))
	for i := range rules {
		var kv []string
		for _, k := range upRuleKeys {
			if v, ok := k.write(&rules[i]); ok {
				kv = append(kv, k.key+" = "+v)
			}
		}
		q[i] = "{" + strings.Join(kv, ", ") + "}"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func upRuleKeyNames() []string {
	names := make([]string, len(upRuleKeys))
	for i, k := range upRuleKeys {
		names[i] = k.key
	}
	return names
}

// upDoc is the doc of uplink.up.
const upDoc = "The up rules: each [[uplink.up]] table forwards local topics to an upstream broker (Apache " +
	"RocketMQ, or another EdgeMQ as hub), store-and-forward: in order per queue, at least once, each " +
	"message with its id, keys, tags and properties, resuming after restarts and days offline where the " +
	"upstream last acknowledged. Keys: name (required; names the rule's stored cursors), topics (required: " +
	"names, or prefixes ending in *), upstream (required: the name servers, ip:port;ip:port), kind (rocketmq " +
	"or edgemq; default rocketmq), access_key and secret_key (kept; requests are not signed yet), " +
	"topic_template (the upstream topic, {topic} and {gateway} replaced; default {topic}), priority " +
	"(higher goes first; default 0), batch_size (1..1024; default 32), batch_bytes (default 256KiB), " +
	"linger (wait for a fuller batch; default 0s), compress (zlib bodies of at least compress_over, " +
	"default 1KiB, sent one by one; default false), rate_limit (bytes per second; default 0: none), " +
	"overflow (reject_new: retention keeps what is not forwarded and a full disk refuses new messages; " +
	"drop_oldest: retention deletes as configured and counts what was not forwarded as lost; default " +
	"reject_new). Example: [[uplink.up]] name = \"alarms\" topics = [\"alarm\"] upstream = " +
	"\"10.0.0.1:9876\" priority = 10."
