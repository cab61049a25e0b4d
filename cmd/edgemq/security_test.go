package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
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

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key, PEM, into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{cert, "CERTIFICATE", der}, {key, "EC PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

// TestClientCommandsWithTLSAndACL: with $EDGEMQ_TLS, $EDGEMQ_TLS_CA and the account's keys,
// send and consume work against a server with TLS only and an ACL; without the keys or TLS
// they fail.
func TestClientCommandsWithTLSAndACL(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	acl := filepath.Join(dir, "acl.toml")
	if err := os.WriteFile(acl, []byte("[[accounts]]\naccessKey = \"cli-user\"\nsecretKey = \"cli-secret\"\n"+
		"defaultTopicPerm = \"PUB|SUB\"\ndefaultGroupPerm = \"SUB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "topic", "create", "-data", filepath.Join(dir, "data"), "-name", "Secured")
	c, addr := startServe(t, nil, "-data", filepath.Join(dir, "data"), "-server.tls_mode", "on",
		"-server.tls_cert", cert, "-server.tls_key", key, "-server.acl", acl)
	send := []string{"send", "-server", addr, "-topic", "Secured", "hello"}
	t.Setenv(tlsEnv, "on")
	t.Setenv(tlsCAEnv, cert)
	if code, out, errOut := edgemq(t, send...); code != 1 || !strings.Contains(errOut, "no permission") {
		t.Fatalf("send without the account's keys: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv(accessKeyEnv, "cli-user")
	t.Setenv(secretKeyEnv, "cli-secret")
	mustRun(t, send...)
	if out := mustRun(t, "consume", "-server", addr, "-topic", "Secured", "-group", "cli", "-n", "1", "-wait", "10s"); !strings.Contains(out, "hello") {
		t.Errorf("consume printed %q, want the message", out)
	}
	t.Setenv(tlsCAEnv, "")
	t.Setenv(tlsEnv, "")
	if code, out, errOut := edgemq(t, send...); code != 1 {
		t.Fatalf("send without TLS to a TLS-only server: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv(tlsEnv, "bogus")
	if code, _, errOut := edgemq(t, send...); code != 1 || !strings.Contains(errOut, tlsEnv) {
		t.Fatalf("a bad %s: exit %d\n%s", tlsEnv, code, errOut)
	}
	c.signal(syscall.SIGTERM)
	if code := c.exit(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.stderr)
	}
}
