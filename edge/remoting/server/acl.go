package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/BurntSushi/toml"

	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// ACL is RocketMQ's plain ACL: accounts with a secret key, each allowed to publish to and
// subscribe from topics and consumer groups. A request must carry an account's AccessKey
// and a Signature by its secret key (see remoting.Credentials); the server answers any
// other NO_PERMISSION (16), with a remark saying why, and carries nothing out. What each
// request needs follows RocketMQ's broker:
//
//	SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE  PUB on the topic (SUB on the group
//	                                       for a retry topic %RETRY%<group>)
//	PULL_MESSAGE, LITE_PULL_MESSAGE,       SUB on the topic and on the group
//	QUERY/UPDATE_CONSUMER_OFFSET
//	HEART_BEAT                             SUB on every consumer group and subscribed topic
//	CONSUMER_SEND_MSG_BACK, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP  SUB on the group
//	QUERY_MESSAGE                          SUB on the topic
//	LOCK_BATCH_MQ, UNLOCK_BATCH_MQ         SUB on the group and the queues' topics (RocketMQ
//	                                       checks nothing)
//	creating, changing or deleting topics and groups, resetting offsets  an admin account
//	GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO  nothing: no signature needed
//	anything else                          a valid signature
//
// An admin account may do everything. A request from an address of
// globalWhiteRemoteAddresses needs nothing; one naming an account whose
// whiteRemoteAddress matches its address needs no signature, but still its permissions.
//
// The accounts file is TOML with the keys of RocketMQ's plain_acl.yml:
//
//	globalWhiteRemoteAddresses = ["10.10.103.*"]
//	[[accounts]]
//	accessKey = "RocketMQ"
//	secretKey = "12345678"
//	whiteRemoteAddress = ""
//	admin = false
//	defaultTopicPerm = "DENY"       # PUB, SUB, PUB|SUB (or SUB|PUB), DENY; absent: DENY
//	defaultGroupPerm = "SUB"
//	topicPerms = ["topicA=DENY", "topicB=PUB|SUB"]
//	groupPerms = ["groupA=DENY", "groupB=SUB"]
//
// Addresses are an IP, "*", a CIDR prefix (10.0.0.0/8), or IPv4 with each part a number,
// "*", a range "1-100" or a set "{1,2}". An ACL is safe for concurrent use; Reload swaps
// the accounts at once, and a file that does not load leaves the old ones in force.
type ACL struct {
	path  string
	mu    sync.Mutex // serialises Reload
	table atomic.Pointer[aclTable]
}

// LoadACL reads the accounts file at path. Errors wrap ErrACL.
func LoadACL(path string) (*ACL, error) {
	a := &ACL{path: path}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the accounts file again and, if it loads, puts it in force. Errors wrap
// ErrACL; the accounts in force then stay.
func (a *ACL) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrACL, err)
	}
	t, err := parseACL(string(b))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrACL, a.path, err)
	}
	a.table.Store(t)
	return nil
}

// Path returns the accounts file's path.
func (a *ACL) Path() string { return a.path }

// Accounts returns how many accounts are in force.
func (a *ACL) Accounts() int { return len(a.table.Load().accounts) }

// perm is a permission of RocketMQ's ACL (its Permission bits).
type perm byte

const (
	permDeny perm = 1
	permPub  perm = 1 << 2
	permSub  perm = 1 << 3
)

// allows reports whether an account's owned permission grants need.
func (owned perm) allows(need perm) bool {
	return owned&permDeny == 0 && owned&need != 0
}

func parsePerm(s string) (perm, error) {
	switch strings.TrimSpace(s) {
	case "PUB":
		return permPub, nil
	case "SUB":
		return permSub, nil
	case "PUB|SUB", "SUB|PUB":
		return permPub | permSub, nil
	case "DENY", "":
		return permDeny, nil
	}
	return 0, fmt.Errorf("permission %q is not PUB, SUB, PUB|SUB or DENY", s)
}

type account struct {
	secret       string
	white        addrPattern // nil: none
	admin        bool
	defaultTopic perm
	defaultGroup perm
	topics       map[string]perm
	groups       map[string]perm
}

type aclTable struct {
	globalWhite []addrPattern
	accounts    map[string]*account
}

// aclFile is the accounts file as read.
type aclFile struct {
	GlobalWhiteRemoteAddresses []string `toml:"globalWhiteRemoteAddresses"`
	Accounts                   []struct {
		AccessKey          string   `toml:"accessKey"`
		SecretKey          string   `toml:"secretKey"`
		WhiteRemoteAddress string   `toml:"whiteRemoteAddress"`
		Admin              bool     `toml:"admin"`
		DefaultTopicPerm   string   `toml:"defaultTopicPerm"`
		DefaultGroupPerm   string   `toml:"defaultGroupPerm"`
		TopicPerms         []string `toml:"topicPerms"`
		GroupPerms         []string `toml:"groupPerms"`
	} `toml:"accounts"`
}

// minKeyLen is the shortest access and secret key, as RocketMQ requires.
const minKeyLen = 6

func parseACL(text string) (*aclTable, error) {
	var f aclFile
	md, err := toml.Decode(text, &f)
	if err != nil {
		return nil, err
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("unknown key %s", u[0])
	}
	t := &aclTable{accounts: map[string]*account{}}
	for _, s := range f.GlobalWhiteRemoteAddresses {
		p, err := parseAddrPattern(s)
		if err != nil {
			return nil, fmt.Errorf("globalWhiteRemoteAddresses: %v", err)
		}
		t.globalWhite = append(t.globalWhite, p)
	}
	for i, fa := range f.Accounts {
		if len(fa.AccessKey) < minKeyLen || len(fa.SecretKey) < minKeyLen {
			return nil, fmt.Errorf("accounts[%d]: accessKey and secretKey need at least %d characters", i, minKeyLen)
		}
		if _, dup := t.accounts[fa.AccessKey]; dup {
			return nil, fmt.Errorf("accounts[%d]: accessKey %q appears twice", i, fa.AccessKey)
		}
		a := &account{secret: fa.SecretKey, admin: fa.Admin, topics: map[string]perm{}, groups: map[string]perm{}}
		if fa.WhiteRemoteAddress != "" {
			if a.white, err = parseAddrPattern(fa.WhiteRemoteAddress); err != nil {
				return nil, fmt.Errorf("accounts[%d].whiteRemoteAddress: %v", i, err)
			}
		}
		if a.defaultTopic, err = parsePerm(fa.DefaultTopicPerm); err != nil {
			return nil, fmt.Errorf("accounts[%d].defaultTopicPerm: %v", i, err)
		}
		if a.defaultGroup, err = parsePerm(fa.DefaultGroupPerm); err != nil {
			return nil, fmt.Errorf("accounts[%d].defaultGroupPerm: %v", i, err)
		}
		for _, r := range []struct {
			key  string
			list []string
			m    map[string]perm
		}{{"topicPerms", fa.TopicPerms, a.topics}, {"groupPerms", fa.GroupPerms, a.groups}} {
			for _, s := range r.list {
				name, ps, ok := strings.Cut(s, "=")
				name = strings.TrimSpace(name)
				if !ok || name == "" {
					return nil, fmt.Errorf("accounts[%d].%s: %q is not name=PERM", i, r.key, s)
				}
				p, err := parsePerm(ps)
				if err != nil || strings.TrimSpace(ps) == "" {
					return nil, fmt.Errorf("accounts[%d].%s: %q: permission is not PUB, SUB, PUB|SUB or DENY", i, r.key, s)
				}
				r.m[name] = p
			}
		}
		t.accounts[fa.AccessKey] = a
	}
	return t, nil
}

// resource is a topic or a consumer group a request needs a permission on.
type resource struct {
	name  string
	group bool
	need  perm
}

func (r resource) String() string {
	if r.group {
		return "group " + r.name
	}
	return "topic " + r.name
}

// topicResource is what a request needs of a topic; a retry topic is its group's.
func topicResource(topic string, need perm) resource {
	if g, ok := strings.CutPrefix(topic, mq.RetryPrefix); ok {
		return resource{name: g, group: true, need: permSub}
	}
	return resource{name: topic, need: need}
}

// adminCodes are the requests only an admin account may make: they create, change or
// delete topics, groups, offsets or the broker's config.
var adminCodes = map[int16]bool{
	remoting.UpdateAndCreateTopic:             true,
	remoting.DeleteTopicInBroker:              true,
	remoting.DeleteTopicInNamesrv:             true,
	remoting.UpdateAndCreateSubscriptionGroup: true,
	remoting.DeleteSubscriptionGroup:          true,
	remoting.UpdateBrokerConfig:               true,
	remoting.InvokeBrokerToResetOffset:        true,
}

// openCodes need no signature: a client finds the broker before anything else, as from
// RocketMQ's name server, which checks no ACL.
var openCodes = map[int16]bool{
	remoting.GetRouteInfoByTopic:  true,
	remoting.GetBrokerClusterInfo: true,
}

// resources returns what req needs, read from it with the parsers its handler uses, so
// that both see the same topic and group. A request whose header or body does not parse
// needs nothing here: its handler refuses it, changing nothing.
func resources(req *remoting.Command) []resource {
	group := func(g string) resource { return resource{name: g, group: true, need: permSub} }
	switch req.Code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage, remoting.SendBatchZstd:
		if h, err := req.ParseSendHeader(); err == nil {
			return []resource{topicResource(h.Topic, permPub)}
		}
	case remoting.ConsumerSendMsgBack:
		if h, err := remoting.ParseSendBackHeader(req.Fields()); err == nil {
			return []resource{group(h.Group)}
		}
	case remoting.PullMessage, remoting.LitePullMessage:
		if h, err := req.ParsePullHeader(); err == nil {
			return []resource{topicResource(h.Topic, permSub), group(h.ConsumerGroup)}
		}
	case remoting.QueryConsumerOffset:
		if h, err := remoting.ParseQueryOffsetHeader(req.Fields()); err == nil {
			return []resource{topicResource(h.Topic, permSub), group(h.ConsumerGroup)}
		}
	case remoting.UpdateConsumerOffset:
		if h, err := remoting.ParseUpdateOffsetHeader(req.Fields()); err == nil {
			return []resource{topicResource(h.Topic, permSub), group(h.ConsumerGroup)}
		}
	case remoting.QueryMessage:
		if h, err := remoting.ParseQueryMessageHeader(req.Fields()); err == nil {
			return []resource{topicResource(h.Topic, permSub)}
		}
	case remoting.UnregisterClient:
		if h, err := remoting.ParseUnregisterHeader(req.Fields()); err == nil && h.ConsumerGroup != "" {
			return []resource{group(h.ConsumerGroup)}
		}
	case remoting.GetConsumerListByGroup:
		if h, err := remoting.ParseConsumerListHeader(req.Fields()); err == nil {
			return []resource{group(h.ConsumerGroup)}
		}
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		if lr, err := remoting.DecodeLockRequest(req.Body); err == nil {
			rs := []resource{group(lr.ConsumerGroup)}
			for _, q := range lr.Queues {
				rs = append(rs, topicResource(q.Topic, permSub))
			}
			return rs
		}
	case remoting.HeartBeat:
		if hb, err := remoting.DecodeHeartbeat(req.Body); err == nil {
			var rs []resource
			for _, c := range hb.Consumers {
				rs = append(rs, group(c.Group))
				for _, sub := range c.Subscriptions {
					rs = append(rs, topicResource(sub.Topic, permSub))
				}
			}
			return rs
		}
	}
	return nil
}

// check returns why the request req from host may not be carried out, or nil.
func (t *aclTable) check(host string, req *remoting.Command) error {
	return t.checkFor(host, req, resources(req))
}

// checkFor is check with what req needs given: rs.
func (t *aclTable) checkFor(host string, req *remoting.Command, rs []resource) error {
	if openCodes[req.Code] {
		return nil
	}
	ip := net.ParseIP(host)
	for _, p := range t.globalWhite {
		if p.match(ip) {
			return nil
		}
	}
	ak := req.Fields()[remoting.ExtAccessKey]
	if ak == "" {
		return errors.New("acl: no AccessKey in the request")
	}
	a, ok := t.accounts[ak]
	if !ok {
		return fmt.Errorf("acl: no account for AccessKey %s", ak)
	}
	if (a.white == nil || !a.white.match(ip)) && !remoting.VerifySignature(a.secret, req) {
		return fmt.Errorf("acl: check signature failed for AccessKey %s", ak)
	}
	if a.admin {
		return nil
	}
	if adminCodes[req.Code] {
		return fmt.Errorf("acl: request code %d needs an admin account; AccessKey %s is not", req.Code, ak)
	}
	for _, r := range rs {
		owned, ok := a.topics[r.name]
		def := a.defaultTopic
		if r.group {
			owned, ok = a.groups[r.name]
			def = a.defaultGroup
		}
		if !ok {
			owned = def
		}
		if !owned.allows(r.need) {
			return fmt.Errorf("acl: AccessKey %s has no %s permission on %s", ak, permName(r.need), r)
		}
	}
	return nil
}

func permName(p perm) string {
	if p == permPub {
		return "PUB"
	}
	return "SUB"
}

// authorize answers req NO_PERMISSION when the ACL is on and refuses it; nil otherwise.
func (s *Server) authorize(c *conn, req *remoting.Command) *remoting.Command {
	if s.opts.ACL == nil {
		return nil
	}
	return s.authorizeFor(c, req, resources(req))
}

// authorizeFor is authorize with what req needs given: rs (a handler that finds out only
// once it has read the broker, as END_TRANSACTION the topic of its half message).
func (s *Server) authorizeFor(c *conn, req *remoting.Command, rs []resource) *remoting.Command {
	if s.opts.ACL == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(c.remote)
	if err != nil {
		host = c.remote
	}
	if err := s.opts.ACL.table.Load().checkFor(host, req, rs); err != nil {
		s.lg.Info("request refused by the ACL", "remote", c.remote, "code", req.Code, "err", err)
		return req.Reply(remoting.NoPermission, err.Error())
	}
	return nil
}

// addrPattern matches a client's IP address.
type addrPattern interface{ match(net.IP) bool }

type anyAddr struct{}

func (anyAddr) match(net.IP) bool { return true }

type cidrAddr struct{ n *net.IPNet }

func (p cidrAddr) match(ip net.IP) bool { return ip != nil && p.n.Contains(ip) }

// octets is an IPv4 pattern: per part, the values it allows.
type octets [4][256]bool

func (p *octets) match(ip net.IP) bool {
	v4 := ip.To4()
	if v4 == nil {
		return false
	}
	for i, b := range v4 {
		if !p[i][b] {
			return false
		}
	}
	return true
}

func parseAddrPattern(s string) (addrPattern, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "*":
		return anyAddr{}, nil
	case strings.Contains(s, "/"):
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("address %q: %v", s, err)
		}
		return cidrAddr{n}, nil
	case strings.Contains(s, ":"): // an IPv6 address
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("address %q is not an IP address", s)
		}
		bits := 8 * len(ip)
		return cidrAddr{&net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 4 {
		return nil, fmt.Errorf("address %q is not an IPv4 pattern", s)
	}
	p := new(octets)
	for i := range 4 {
		part := "*" // RocketMQ's 192.168.* covers the rest
		if i < len(parts) {
			part = parts[i]
		} else if parts[len(parts)-1] != "*" {
			return nil, fmt.Errorf("address %q is not an IPv4 pattern", s)
		}
		if err := p.setPart(i, part); err != nil {
			return nil, fmt.Errorf("address %q: %v", s, err)
		}
	}
	return p, nil
}

func (p *octets) setPart(i int, part string) error {
	switch {
	case part == "*":
		for v := range 256 {
			p[i][v] = true
		}
		return nil
	case strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}"):
		for _, e := range strings.Split(part[1:len(part)-1], ",") {
			v, err := octet(e)
			if err != nil {
				return err
			}
			p[i][v] = true
		}
		return nil
	case strings.Contains(part, "-"):
		lo, hi, _ := strings.Cut(part, "-")
		a, err := octet(lo)
		if err != nil {
			return err
		}
		b, err := octet(hi)
		if err != nil {
			return err
		}
		if a > b {
			return fmt.Errorf("range %q is empty", part)
		}
		for v := a; v <= b; v++ {
			p[i][v] = true
		}
		return nil
	}
	v, err := octet(part)
	if err != nil {
		return err
	}
	p[i][v] = true
	return nil
}

func octet(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v > 255 {
		return 0, fmt.Errorf("%q is not a number 0-255", s)
	}
	return v, nil
}
