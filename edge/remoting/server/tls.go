package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"sync"
)

// LoadTLS returns the TLS config of a server certificate chain and key in PEM files and,
// when clientCAFile is not "", of the CA certificates (PEM) that must have signed every
// client's certificate: clients without one are refused. TLS 1.2 at least. Errors wrap
// ErrTLS.
func LoadTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTLS, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTLS, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrTLS, clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// tlsListener returns ln serving TLS as o says: ln itself when o.TLS is nil. The
// handshake runs on a connection's first read, in its own goroutine, bounded by the idle
// timeout.
func tlsListener(ln net.Listener, o Options) net.Listener {
	switch {
	case o.TLS == nil:
		return ln
	case o.TLSPermissive:
		return &sniffListener{Listener: ln, cfg: o.TLS}
	}
	return tls.NewListener(ln, o.TLS)
}

// tlsHandshakeRecord is the first byte of a TLS connection: a handshake record.
const tlsHandshakeRecord = 0x16

// sniffListener serves TLS to a connection whose first byte starts a TLS handshake, and
// plain TCP to any other, as RocketMQ's permissive TLS mode: RocketMQ's remoting frames
// start with a length whose top byte is 0 below 16 MiB.
type sniffListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *sniffListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, cfg: l.cfg}, nil
}

// sniffConn decides on its first read whether it is TLS. Only the connection's reader
// reads; mu guards tc against the writer and Close.
type sniffConn struct {
	net.Conn
	cfg     *tls.Config
	sniffed bool   // the reader's: the first byte was read
	head    []byte // the reader's: a plain connection's first byte, not yet returned

	mu sync.Mutex
	tc *tls.Conn // set by the reader once the connection is TLS
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if !c.sniffed {
		var b [1]byte
		for {
			n, err := c.Conn.Read(b[:])
			if n == 1 {
				break
			}
			if err != nil {
				return 0, err
			}
		}
		c.sniffed = true
		if b[0] == tlsHandshakeRecord {
			tc := tls.Server(&replayConn{Conn: c.Conn, head: b[:]}, c.cfg)
			c.mu.Lock()
			c.tc = tc
			c.mu.Unlock()
		} else {
			c.head = b[:]
		}
	}
	if c.tc != nil {
		return c.tc.Read(p)
	}
	if len(c.head) > 0 && len(p) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *sniffConn) current() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tc != nil {
		return c.tc
	}
	return c.Conn
}

func (c *sniffConn) Write(p []byte) (int, error) { return c.current().Write(p) }

func (c *sniffConn) Close() error { return c.current().Close() }

// replayConn returns head before what its connection reads.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 && len(p) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
