package remoting

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// readGoldenFrame reads one captured frame of testdata/acl.
func readGoldenFrame(t testing.TB, name string) *Command {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "acl", name))
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := NewReader(bytes.NewReader(b), DefaultMaxFrameSize).Read()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cmd
}

// The captured clients' credentials (testdata/acl/README.md).
var goldenCreds = Credentials{AccessKey: "RocketMQ", SecretKey: "12345678"}

const goldenToken = "token-0123"

func TestVerifySignatureGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		code int16
		// javaStyle: the signature covers every field but Signature (Java); otherwise it
		// leaves SecurityToken out (rocketmq-client-go).
		javaStyle bool
	}{
		{"acl-java.frame", SendMessageV2, true},
		{"acl-java-token.frame", SendMessageV2, true},
		{"acl-go-10.frame", SendMessage, true},
		{"acl-go-105.frame", GetRouteInfoByTopic, true},
		{"acl-go-10-token.frame", SendMessage, false},
		{"acl-go-105-token.frame", GetRouteInfoByTopic, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cmd := readGoldenFrame(t, tc.file)
			if cmd.Code != tc.code {
				t.Fatalf("code = %d, want %d", cmd.Code, tc.code)
			}
			if got := cmd.Ext[ExtAccessKey]; got != goldenCreds.AccessKey {
				t.Fatalf("AccessKey = %q, want %q", got, goldenCreds.AccessKey)
			}
			if !VerifySignature(goldenCreds.SecretKey, cmd) {
				t.Fatalf("signature %q does not verify", cmd.Ext[ExtSignature])
			}
			all := Signature(goldenCreds.SecretKey, cmd.Ext, cmd.Body)
			if got := all == cmd.Ext[ExtSignature]; got != tc.javaStyle {
				t.Errorf("signature over every field = %v, want %v", got, tc.javaStyle)
			}
			if VerifySignature("12345679", cmd) {
				t.Error("verifies with another secret key")
			}
			body := bytes.Clone(cmd.Body)
			if len(body) > 0 {
				body[0] ^= 1
				bad := *cmd
				bad.Body = body
				if VerifySignature(goldenCreds.SecretKey, &bad) {
					t.Error("verifies with a changed body")
				}
			}
			for k := range cmd.Ext {
				if k == ExtSignature {
					continue
				}
				bad := *cmd
				bad.Ext = cloneExt(cmd.Ext)
				bad.Ext[k] += "x"
				if VerifySignature(goldenCreds.SecretKey, &bad) && !(k == ExtSecurityToken && !tc.javaStyle) {
					t.Errorf("verifies with field %s changed", k)
				}
			}
		})
	}
}

func cloneExt(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestSignLikeJava: Credentials.Sign of the Java client's request without its
// credentials gives the Java client's signature.
func TestSignLikeJava(t *testing.T) {
	for _, tc := range []struct {
		file  string
		token string
	}{{"acl-java.frame", ""}, {"acl-java-token.frame", goldenToken}} {
		cmd := readGoldenFrame(t, tc.file)
		want := cmd.Ext[ExtSignature]
		req := *cmd
		req.Ext = cloneExt(cmd.Ext)
		for _, k := range []string{ExtAccessKey, ExtSecurityToken, ExtSignature} {
			delete(req.Ext, k)
		}
		c := goldenCreds
		c.SecurityToken = tc.token
		c.Sign(&req)
		if got := req.Ext[ExtSignature]; got != want {
			t.Errorf("%s: Sign = %q, want %q", tc.file, got, want)
		}
		if got := req.Ext[ExtSecurityToken]; got != tc.token {
			t.Errorf("%s: SecurityToken = %q, want %q", tc.file, got, tc.token)
		}
	}
}

// TestSignatureVectors pins the algorithm on small inputs: HMAC-SHA1 in base64 of the
// values sorted by key, then the body (the wants computed with Python's hmac module).
func TestSignatureVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  map[string]string
		body []byte
		skip []string
		want string
	}{
		{"empty", nil, nil, nil, "OoSiGO5mZSCbtw6EUl3YN2RaGWU="},
		{"sorted values then body", map[string]string{"b": "2", "a": "1", ExtSignature: "ignored"}, []byte("x"), nil, Signature("k", nil, []byte("12x"))},
		{"skip", map[string]string{"b": "2", "a": "1", ExtSecurityToken: "t"}, nil, []string{ExtSecurityToken}, Signature("k", map[string]string{"z": "12"}, nil)},
	} {
		if got := Signature("k", tc.ext, tc.body, tc.skip...); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// "abc\x00" keyed by 12345678.
	ext := map[string]string{"b": "c", "a": "ab", ExtSignature: "x"}
	if got, want := Signature("12345678", ext, []byte{0}), "4bbGZ7zDPi5BP31MMzib/YQ/tOw="; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestVerifyUniqueKeyQuery: a Java client up to 4.9.3 adds _UNIQUE_KEY_QUERY after signing;
// later ones sign it.
func TestVerifyUniqueKeyQuery(t *testing.T) {
	for _, tc := range []struct {
		version int16
		ok      bool
	}{{version493, true}, {version493 + 1, false}} {
		req := &Command{Code: QueryMessage, Version: tc.version, Ext: map[string]string{"topic": "T", "key": "k"}}
		goldenCreds.Sign(req)
		req.Ext[uniqueKeyQuery] = "true"
		if got := VerifySignature(goldenCreds.SecretKey, req); got != tc.ok {
			t.Errorf("version %d: verifies %v, want %v", tc.version, got, tc.ok)
		}
	}
}

// FuzzVerifySignature: any ext fields and body verify once signed, and never with
// another secret or a body changed in place; nothing panics. (The signature is over
// concatenated values, so RocketMQ's scheme itself lets bytes move between adjacent values
// and the body: only same-length changes are sure to be caught.)
func FuzzVerifySignature(f *testing.F) {
	f.Add("topic", "T", "12345678", []byte("body"), "")
	f.Add("", "", "", []byte{}, "tok")
	f.Add(ExtSignature, "x", "s", []byte{0}, "")
	f.Add(ExtSecurityToken, "abc", "secret", []byte("é"), "tok")
	f.Fuzz(func(t *testing.T, k, v, secret string, body []byte, token string) {
		req := NewRequest(SendMessageV2, map[string]string{k: v}, body)
		VerifySignature(secret, req) // unsigned: must not panic
		c := Credentials{AccessKey: "ak", SecretKey: secret, SecurityToken: token}
		c.Sign(req)
		if !VerifySignature(secret, req) {
			t.Fatalf("signed request does not verify: %v", req.Ext)
		}
		if VerifySignature(secret+"x", req) {
			t.Fatal("verifies with another secret")
		}
		if len(req.Body) > 0 {
			req.Body = bytes.Clone(req.Body)
			req.Body[len(req.Body)/2] ^= 0x40
			if VerifySignature(secret, req) {
				t.Fatal("verifies with a changed body")
			}
		}
	})
}
