package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"maps"
	"slices"
)

// The extension fields of RocketMQ's plain ACL (its SessionCredentials): a signed request
// carries the access key, the signature and, when the credentials have one, the security
// token.
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
)

// Credentials are an account of RocketMQ's plain ACL, as its clients' SessionCredentials
// (Java) and primitive.Credentials (Go). The zero value signs nothing.
type Credentials struct {
	AccessKey string
	SecretKey string
	// SecurityToken is optional; when set, requests carry it and the signature covers it.
	SecurityToken string
}

// IsZero reports whether c has no access key: requests go unsigned.
func (c Credentials) IsZero() bool { return c.AccessKey == "" }

// Sign adds the access key, the security token (when set) and then the signature to
// req's extension fields, as RocketMQ's Java AclClientRPCHook does: the signature covers
// every other extension field, the access key and token included.
func (c Credentials) Sign(req *Command) {
	if req.Fields() == nil {
		req.Ext = map[string]string{}
	}
	req.Ext[ExtAccessKey] = c.AccessKey
	if c.SecurityToken != "" {
		req.Ext[ExtSecurityToken] = c.SecurityToken
	}
	delete(req.Ext, ExtSignature)
	req.Ext[ExtSignature] = Signature(c.SecretKey, req.Ext, req.Body)
}

// Signature returns RocketMQ's ACL signature of a request: base64 (standard, padded) of
// HMAC-SHA1 keyed by secretKey over the values of ext in the order of their keys (byte
// order, which is Java's TreeMap order for the ASCII keys of request headers), without
// the Signature field and the fields named in skip, followed by body.
// The values are concatenated without separators, as RocketMQ does: the signature binds
// their concatenation, not where one value ends and the next begins.
func Signature(secretKey string, ext map[string]string, body []byte, skip ...string) string {
	keys := slices.Sorted(maps.Keys(ext))
	mac := hmac.New(sha1.New, []byte(secretKey))
	for _, k := range keys {
		if k == ExtSignature || slices.Contains(skip, k) {
			continue
		}
		mac.Write([]byte(ext[k]))
	}
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// uniqueKeyQuery is the extension field that Java clients up to 4.9.3 add to QUERY_MESSAGE
// after signing it (MixAll.UNIQUE_MSG_QUERY_FLAG).
const uniqueKeyQuery = "_UNIQUE_KEY_QUERY"

// version493 is the protocol version of RocketMQ 4.9.3 (MQVersion.Version.V4_9_3's ordinal).
const version493 = 399

// VerifySignature reports whether req carries a valid signature by secretKey, as
// RocketMQ's broker checks it. Both clients' signatures are accepted: Java's
// AclClientRPCHook signs every extension field but Signature; rocketmq-client-go's ACL
// interceptor signs the same fields without the SecurityToken it adds after signing. As
// RocketMQ does, the _UNIQUE_KEY_QUERY field of clients up to version 4.9.3 is not signed.
func VerifySignature(secretKey string, req *Command) bool {
	sig, ok := req.Fields()[ExtSignature]
	if !ok || sig == "" {
		return false
	}
	var skip []string
	if req.Version <= version493 {
		skip = append(skip, uniqueKeyQuery)
	}
	if hmac.Equal([]byte(sig), []byte(Signature(secretKey, req.Fields(), req.Body, skip...))) {
		return true
	}
	if _, ok := req.Fields()[ExtSecurityToken]; ok {
		return hmac.Equal([]byte(sig), []byte(Signature(secretKey, req.Fields(), req.Body, append(skip, ExtSecurityToken)...)))
	}
	return false
}
