package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

// tlsMode is server.tls_mode: whether the remoting addresses speak TLS.
type tlsMode int

const (
	tlsOff        tlsMode = iota // plain TCP only
	tlsOn                        // TLS only
	tlsPermissive                // TLS and plain TCP on the same addresses
)

// security is the [server] keys of TLS and the ACL: files the command reads, then hands
// to the server as server.Options.TLS and server.Options.ACL.
type security struct {
	tlsMode     tlsMode
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	acl         string // the accounts file; "": no ACL
}

// The defaults of the security keys: all off.
const (
	defaultTLSMode = tlsOff
	defaultTLSFile = ""
	defaultACL     = ""
)

// apply loads the TLS files and the ACL into o. It returns the ACL, nil when off.
func (s security) apply(o *server.Options) (*server.ACL, error) {
	if s.tlsMode != tlsOff {
		if s.tlsCert == "" || s.tlsKey == "" {
			return nil, errors.New("server.tls_mode needs server.tls_cert and server.tls_key")
		}
		cfg, err := server.LoadTLS(s.tlsCert, s.tlsKey, s.tlsClientCA)
		if err != nil {
			return nil, err
		}
		o.TLS, o.TLSPermissive = cfg, s.tlsMode == tlsPermissive
	} else if s.tlsCert != "" || s.tlsClientCA != "" {
		return nil, errors.New("server.tls_cert or server.tls_client_ca is set but server.tls_mode is off")
	}
	if s.acl == "" {
		return nil, nil
	}
	acl, err := server.LoadACL(s.acl)
	if err != nil {
		return nil, err
	}
	o.ACL = acl
	return acl, nil
}

// warnOpen logs a warning when addr is not loopback and the server lacks TLS or an ACL.
func warnOpen(lg *slog.Logger, addr net.Addr, o server.Options) {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return
	}
	var missing []any
	if o.TLS == nil {
		missing = append(missing, "tls", "off: requests and messages cross the network in clear")
	} else if o.TLSPermissive {
		missing = append(missing, "tls", "permissive: plain TCP clients are served too")
	}
	if o.ACL == nil {
		missing = append(missing, "acl", "off: any client that reaches the address may do anything")
	}
	if len(missing) > 0 {
		lg.Warn("listening beyond loopback without TLS or an ACL (server.tls_mode, server.acl)",
			append([]any{"listen", addr.String()}, missing...)...)
	}
}

// reloadOnHangup re-reads acl (when not nil) on each SIGHUP until the returned stop is
// called; stop waits for its goroutine.
func reloadOnHangup(acl *server.ACL, lg *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-hup:
				if acl == nil {
					lg.Info("SIGHUP: nothing to reload (server.acl is off)")
					continue
				}
				if err := acl.Reload(); err != nil {
					lg.Error("SIGHUP: ACL not reloaded; the accounts in force stay", "err", err)
					continue
				}
				lg.Info("SIGHUP: ACL reloaded", "file", acl.Path(), "accounts", acl.Accounts())
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}

// String is server.tls_mode's value for the startup line.
func (m tlsMode) String() string {
	switch m {
	case tlsOn:
		return "on"
	case tlsPermissive:
		return "permissive"
	}
	return "off"
}

// The environment variables of the client commands' security (with -server): the account
// they sign requests with, and TLS.
const (
	accessKeyEnv = "EDGEMQ_ACCESS_KEY"
	secretKeyEnv = "EDGEMQ_SECRET_KEY"
	// tlsEnv: "" or "off" plain TCP; "on" TLS verifying the server by the system's CAs (or
	// tlsCAEnv's); "insecure" TLS without verifying the server, as RocketMQ's clients do.
	tlsEnv   = "EDGEMQ_TLS"
	tlsCAEnv = "EDGEMQ_TLS_CA"
)

// clientSecurityDoc ends the help of the commands that work on a server.
const clientSecurityDoc = `
Against a server with an ACL, $` + accessKeyEnv + ` and $` + secretKeyEnv + ` give the account
requests are signed with; against one with TLS, $` + tlsEnv + `=on (verifying the server by the
system's CAs, or by the PEM file $` + tlsCAEnv + `) or $` + tlsEnv + `=insecure (not verifying it).`

// clientSecurity returns the credentials and TLS config of the client commands, from the
// environment.
func clientSecurity() (remoting.Credentials, *tls.Config, error) {
	cred := remoting.Credentials{AccessKey: os.Getenv(accessKeyEnv), SecretKey: os.Getenv(secretKeyEnv)}
	if (cred.AccessKey == "") != (cred.SecretKey == "") {
		return cred, nil, fmt.Errorf("$%s and $%s go together", accessKeyEnv, secretKeyEnv)
	}
	mode, ca := os.Getenv(tlsEnv), os.Getenv(tlsCAEnv)
	switch mode {
	case "", "off":
		if ca != "" {
			return cred, nil, fmt.Errorf("$%s is set but $%s is not on", tlsCAEnv, tlsEnv)
		}
		return cred, nil, nil
	case "insecure":
		return cred, &tls.Config{InsecureSkipVerify: true}, nil
	case "on":
		cfg := &tls.Config{}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return cred, nil, fmt.Errorf("$%s: %w", tlsCAEnv, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return cred, nil, fmt.Errorf("$%s: %s holds no PEM certificate", tlsCAEnv, ca)
			}
		}
		return cred, cfg, nil
	}
	return cred, nil, fmt.Errorf("$%s: want off, on or insecure, got %q", tlsEnv, mode)
}
