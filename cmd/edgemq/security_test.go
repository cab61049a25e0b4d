package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge/remoting"
)

// signedCall sends a request signed with cred and returns the reply's code.
func (c *client) signedCall(cred remoting.Credentials, code int16, ext map[string]string) int16 {
	c.t.Helper()
	req := remoting.NewRequest(code, ext, nil)
	if !cred.IsZero() {
		cred.Sign(req)
	}
	return c.reply(c.send(code, req.Ext, nil), 10*time.Second).Code
}

// TestServeACL: with server.acl, serve answers only signed requests, and SIGHUP puts a
// changed accounts file in force; a broken one leaves the old accounts.
func TestServeACL(t *testing.T) {
	dir := t.TempDir()
	acl := filepath.Join(dir, "acl.toml")
	account := func(ak string) string {
		return "[[accounts]]\naccessKey = \"" + ak + "\"\nsecretKey = \"secret-" + ak + "\"\nadmin = true\n"
	}
	if err := os.WriteFile(acl, []byte(account("first-key")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, addr := startServe(t, nil, "-data", filepath.Join(dir, "data"), "-server.acl", acl)
	if !strings.Contains(c.stderr.String(), "acl="+acl) {
		t.Errorf("the startup line does not name the ACL file:\n%s", c.stderr)
	}
	first := remoting.Credentials{AccessKey: "first-key", SecretKey: "secret-first-key"}
	second := remoting.Credentials{AccessKey: "second-key", SecretKey: "secret-second-key"}
	cl := dial(t, addr)
	ext := map[string]string{"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}
	for _, tc := range []struct {
		cred remoting.Credentials
		want int16
	}{{remoting.Credentials{}, remoting.NoPermission}, {second, remoting.NoPermission}, {first, remoting.Success}} {
		if got := cl.signedCall(tc.cred, remoting.UpdateAndCreateTopic, ext); got != tc.want {
			t.Fatalf("%q: reply %d, want %d", tc.cred.AccessKey, got, tc.want)
		}
	}

	if err := os.WriteFile(acl, []byte(account("second-key")), 0o600); err != nil {
		t.Fatal(err)
	}
	c.signal(syscall.SIGHUP)
	c.waitFor(c.stderr, `SIGHUP: ACL reloaded.* accounts=1`, 30*time.Second)
	if got := cl.signedCall(first, remoting.UpdateAndCreateTopic, ext); got != remoting.NoPermission {
		t.Fatalf("the old account after the reload: reply %d, want NO_PERMISSION", got)
	}
	if got := cl.signedCall(second, remoting.UpdateAndCreateTopic, ext); got != remoting.Success {
		t.Fatalf("the new account after the reload: reply %d, want SUCCESS", got)
	}

	if err := os.WriteFile(acl, []byte("[[accounts]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.signal(syscall.SIGHUP)
	c.waitFor(c.stderr, `SIGHUP: ACL not reloaded`, 30*time.Second)
	if got := cl.signedCall(second, remoting.UpdateAndCreateTopic, ext); got != remoting.Success {
		t.Fatalf("after a failed reload: reply %d, want SUCCESS", got)
	}
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, c.stderr)
	}
}

// TestServeWarnsWhenOpen: serving beyond loopback without TLS and ACL is logged; on
// loopback it is not.
func TestServeWarnsWhenOpen(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, nil, "serve", "-data", filepath.Join(dir, "open"), "-server.listen", "0.0.0.0:0", "-server.vip_listen", "off")
	c.waitFor(c.stderr, `(?m)^WARN listening beyond loopback without TLS or an ACL.* tls=.*acl=`, 60*time.Second)
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, c.stderr)
	}

	l, _ := startServe(t, nil, "-data", filepath.Join(dir, "loopback"))
	if strings.Contains(l.stderr.String(), "beyond loopback") {
		t.Errorf("warns on loopback:\n%s", l.stderr)
	}
	l.signal(syscall.SIGTERM)
	if code := l.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, l.stderr)
	}
}

// TestServeTLSNeedsFiles: tls_mode without a certificate does not start.
func TestServeTLSNeedsFiles(t *testing.T) {
	c := startChild(t, nil, "serve", "-data", filepath.Join(t.TempDir(), "d"), "-server.listen", "127.0.0.1:0",
		"-server.vip_listen", "off", "-server.tls_mode", "on")
	if code := c.exit(30 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, c.stderr)
	}
	if !strings.Contains(c.stderr.String(), "server.tls_mode needs server.tls_cert and server.tls_key") {
		t.Errorf("stderr:\n%s", c.stderr)
	}
}
