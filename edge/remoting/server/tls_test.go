package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/mq"
	"github.com/edgemq/edgemq/edge/remoting"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client certificate, in PEM
// files of a temp dir.
type testPKI struct {
	dir                           string
	caFile, certFile, keyFile     string
	clientCertFile, clientKeyFile string
	pool                          *x509.CertPool
	client                        tls.Certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir, pool: x509.NewCertPool()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.pool.AddCert(ca)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string, tls.Certificate) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: ips,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		cf := p.write(t, name+".pem", "CERTIFICATE", der)
		kf := p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
		c, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		return cf, kf, c
	}
	p.certFile, p.keyFile, _ = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.clientCertFile, p.clientKeyFile, p.client = issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

func (p *testPKI) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// clientConfig verifies the server by the CA; with a client certificate when withCert.
func (p *testPKI) clientConfig(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1"}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return cfg
}

// routeCall asks for a route over nc and reports whether an answer came.
func routeCall(t *testing.T, nc net.Conn) error {
	t.Helper()
	c := newClient(t, nc)
	ch := c.write(remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
	select {
	case <-ch:
		return nil
	case <-c.done:
		return fmt.Errorf("connection closed: %v", c.err)
	case <-time.After(10 * time.Second):
		return errors.New("no reply in 10 s")
	}
}

func tlsDial(t *testing.T, addr net.Addr, cfg *tls.Config) (net.Conn, error) {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr.String(), cfg)
	if err != nil {
		return nil, err
	}
	return nc, nil
}

func plainDial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestLoadTLSErrors(t *testing.T) {
	p := newTestPKI(t)
	if _, err := LoadTLS(p.certFile, p.keyFile, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cert, key, ca string }{
		{"no cert", filepath.Join(p.dir, "none.pem"), p.keyFile, ""},
		{"key of another cert", p.certFile, p.clientKeyFile, ""},
		{"no CA file", p.certFile, p.keyFile, filepath.Join(p.dir, "none.pem")},
		{"CA file without PEM", p.certFile, p.keyFile, func() string {
			f := filepath.Join(p.dir, "empty.pem")
			os.WriteFile(f, []byte("nothing"), 0o600)
			return f
		}()},
	} {
		if _, err := LoadTLS(tc.cert, tc.key, tc.ca); !errors.Is(err, ErrTLS) {
			t.Errorf("%s: got %v, want ErrTLS", tc.name, err)
		}
	}
}

// TestTLSOnly: a TLS client is served; a plain one gets nothing but a closed connection.
func TestTLSOnly(t *testing.T) {
	p := newTestPKI(t)
	cfg, err := LoadTLS(p.certFile, p.keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, openBroker(t, nil), Options{TLS: cfg})
	nc, err := tlsDial(t, s.Addr(), p.clientConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := routeCall(t, nc); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	if err := routeCall(t, plainDial(t, s.Addr())); err == nil {
		t.Fatal("a plain client is answered by a TLS-only server")
	}
}

// TestTLSPermissive: TLS and plain clients on one address.
func TestTLSPermissive(t *testing.T) {
	p := newTestPKI(t)
	cfg, err := LoadTLS(p.certFile, p.keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, openBroker(t, nil), Options{TLS: cfg, TLSPermissive: true, VIPListen: "127.0.0.1:0"})
	for _, addr := range []net.Addr{s.Addr(), s.VIPAddr()} {
		nc, err := tlsDial(t, addr, p.clientConfig(false))
		if err != nil {
			t.Fatal(err)
		}
		if err := routeCall(t, nc); err != nil {
			t.Fatalf("TLS client of %s: %v", addr, err)
		}
		if err := routeCall(t, plainDial(t, addr)); err != nil {
			t.Fatalf("plain client of %s: %v", addr, err)
		}
	}
}

// TestTLSClientCA: with a client CA, a client without a certificate signed by it is
// refused.
func TestTLSClientCA(t *testing.T) {
	p := newTestPKI(t)
	cfg, err := LoadTLS(p.certFile, p.keyFile, p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, openBroker(t, nil), Options{TLS: cfg})
	nc, err := tlsDial(t, s.Addr(), p.clientConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := routeCall(t, nc); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	// TLS 1.3 reports the refusal on the client's first read.
	if nc, err := tlsDial(t, s.Addr(), p.clientConfig(false)); err == nil {
		if err := routeCall(t, nc); err == nil {
			t.Fatal("a client without a certificate is answered")
		}
	}
}

// TestClientTLSAndACL: the remoting Client, with TLS and credentials, sends and pulls
// through a TLS server with an ACL; with a wrong secret it is refused NO_PERMISSION; a
// client that does not trust the server's certificate does not connect.
func TestClientTLSAndACL(t *testing.T) {
	p := newTestPKI(t)
	cfg, err := LoadTLS(p.certFile, p.keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	b := openBroker(t, nil)
	s := startServer(t, b, Options{TLS: cfg, ACL: writeACL(t, testACL)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dialClient := func(cred remoting.Credentials, tc *tls.Config) *remoting.Client {
		t.Helper()
		c, err := remoting.Dial(ctx, s.Addr().String(), &remoting.Options{TLS: tc, Credentials: cred, ReconnectMin: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	if err := b.CreateTopic(edge.TopicConfig{Name: "T", ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	pc := dialClient(credProducer, &tls.Config{RootCAs: p.pool})
	if _, err := pc.Send(ctx, &mq.Message{Topic: "T", Body: []byte("secret hello")}, nil); err != nil {
		t.Fatalf("producer send: %v", err)
	}
	cc := dialClient(credConsumer, &tls.Config{RootCAs: p.pool})
	res, err := cc.Pull(ctx, mq.PullRequest{Group: "g", Queue: mq.MessageQueue{Topic: "T", BrokerName: b.Options().BrokerName}, MaxMsgs: 8, Filter: "*"})
	if err != nil || len(res.Messages) != 1 || string(res.Messages[0].Body) != "secret hello" {
		t.Fatalf("consumer pull: %+v %v", res, err)
	}
	if _, err := cc.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil); !errors.Is(err, mq.ErrNoPermission) {
		t.Fatalf("consumer send: got %v, want mq.ErrNoPermission", err)
	}
	bad := dialClient(remoting.Credentials{AccessKey: "producer", SecretKey: "not-the-secret"}, &tls.Config{RootCAs: p.pool})
	if _, err := bad.Send(ctx, &mq.Message{Topic: "T", Body: []byte("x")}, nil); !errors.Is(err, mq.ErrNoPermission) {
		t.Fatalf("wrong secret: got %v, want mq.ErrNoPermission", err)
	}
	if c, err := remoting.Dial(ctx, s.Addr().String(), &remoting.Options{TLS: &tls.Config{}, Credentials: credProducer}); !errors.Is(err, mq.ErrUnavailable) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("client not trusting the server: got %v, want mq.ErrUnavailable", err)
	}
	if max, _ := b.MaxOffset(ctx, mq.MessageQueue{Topic: "T"}); max != 1 {
		t.Fatalf("topic holds %d messages, want 1", max)
	}
}
