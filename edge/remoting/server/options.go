package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// maxFrameSize is the largest frame a client may send: the codec's default, RocketMQ's
// 16 MiB. It mirrors remoting.DefaultMaxFrameSize.
const maxFrameSize = 16 << 20

// Options configures a Server. A zero field takes its default (DefaultOptions).
type Options struct {
	// Listen is the address that answers both name-server and broker requests, so that one
	// name-server address (-n 127.0.0.1:9876) is all a client needs. Default
	// "127.0.0.1:9876": loopback only, until an address is chosen.
	Listen string
	// VIPListen is the address of the VIP channel older Java clients send to (their
	// broker's port − 2). "" means Listen's host with its port − 2 (any free port when
	// Listen's port is 0); "off" disables it.
	VIPListen string
	// Advertise is the ip:port that topic routes give for this broker. "" means the
	// address the asking connection reached, with Listen's port.
	Advertise string
	// ClusterName names the cluster in routes and cluster info. Default "DefaultCluster".
	ClusterName string
	// MaxFrameSize is the largest frame, in bytes, a client may send; a larger one closes
	// its connection. Default 16 MiB.
	MaxFrameSize int
	// MaxConns is how many client connections may be open at once, both addresses
	// together; past it a new connection is closed at once, and logged. Default 1024.
	MaxConns int
	// MaxInFlight is how many requests of one connection may be handled at once; past it
	// a request is answered SYSTEM_BUSY (2). Default 4096: one connection carries every
	// parked pull and pipelined send of a client process, which may be thousands.
	MaxInFlight int
	// IdleTimeout closes a connection that sends no complete frame for this long. Default
	// 120 s (RocketMQ's clients heartbeat every 30 s).
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose reply is not written in this long: a client
	// that does not read cannot hold the server's memory. Default 30 s.
	WriteTimeout time.Duration
	// Logger receives one line per connection event (refused, closed on error, malformed
	// or oversized frame, slow reader). nil: discard.
	Logger *slog.Logger
	// TLS, when not nil, makes both addresses TLS only (see LoadTLS): RocketMQ's clients
	// with tls.enable speak TLS from the first byte. Default nil: plain TCP.
	TLS *tls.Config
	// TLSPermissive, with TLS, serves plain TCP clients too on the same addresses: a
	// connection whose first byte starts a TLS handshake is TLS, any other plain, as
	// RocketMQ's permissive mode.
	TLSPermissive bool
	// ACL, when not nil, refuses requests that are not signed by one of its accounts or
	// that its accounts may not make (see ACL). Default nil: any client may do anything.
	ACL *ACL
	// NoZstdBatch turns off SEND_BATCH_ZSTD (remoting.SendBatchZstd), EdgeMQ's batch send
	// compressed whole with zstd: it is then answered REQUEST_CODE_NOT_SUPPORTED, as by a
	// broker that does not know it, and its senders fall back to plain batches. Default
	// false: taken, its body inflated to at most MaxFrameSize bytes.
	NoZstdBatch bool
	// NoStreamPulls answers every pull once. By default a suspended PULL_MESSAGE that asks
	// to stream (EdgeMQ's edgemqPushMsgs field, which EdgeMQ's consumer sends) is answered
	// again as messages arrive, within the message and byte budget it names, each answer
	// but the last marked edgemqMore; RocketMQ's clients never ask.
	NoStreamPulls bool
}

// DefaultOptions holds the defaults that zero fields take.
var DefaultOptions = Options{
	Listen:       "127.0.0.1:9876",
	ClusterName:  "DefaultCluster",
	MaxFrameSize: maxFrameSize,
	MaxConns:     1024,
	MaxInFlight:  4096,
	IdleTimeout:  120 * time.Second,
	WriteTimeout: 30 * time.Second,
}

// ErrOptions is returned by Start for options out of range or addresses that do not
// parse; the error names the option.
var ErrOptions = errors.New("server: invalid options")

// vipOff is the VIPListen value that disables the VIP address.
const vipOff = "off"

// withDefaults fills zero fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions
	if o.Listen == "" {
		o.Listen = d.Listen
	}
	if o.ClusterName == "" {
		o.ClusterName = d.ClusterName
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = d.MaxFrameSize
	}
	if o.MaxConns == 0 {
		o.MaxConns = d.MaxConns
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = d.MaxInFlight
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = d.IdleTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = d.WriteTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxFrameSize", int64(o.MaxFrameSize)}, {"MaxConns", int64(o.MaxConns)}, {"MaxInFlight", int64(o.MaxInFlight)},
		{"IdleTimeout", int64(o.IdleTimeout)}, {"WriteTimeout", int64(o.WriteTimeout)},
	} {
		if f.v < 0 {
			return o, fmt.Errorf("%w: %s is negative", ErrOptions, f.name)
		}
	}
	if o.MaxFrameSize < 1024 {
		return o, fmt.Errorf("%w: MaxFrameSize %d is below 1024 bytes", ErrOptions, o.MaxFrameSize)
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return o, fmt.Errorf("%w: Listen %q: %v", ErrOptions, o.Listen, err)
	}
	if o.VIPListen != "" && o.VIPListen != vipOff {
		if _, _, err := net.SplitHostPort(o.VIPListen); err != nil {
			return o, fmt.Errorf("%w: VIPListen %q: %v", ErrOptions, o.VIPListen, err)
		}
	}
	if o.Advertise != "" {
		if _, err := parseAdvertise(o.Advertise); err != nil {
			return o, fmt.Errorf("%w: Advertise %q: %v", ErrOptions, o.Advertise, err)
		}
	}
	return o, nil
}

// parseAdvertise checks an advertised ip:port: clients need a literal address.
func parseAdvertise(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) == nil {
		return "", errors.New("not a literal IP address")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return "", errors.New("port out of range")
	}
	return net.JoinHostPort(host, port), nil
}

// vipAddress returns the address the VIP listener binds: VIPListen, or the bound main
// address's host with its port − 2; "" when off (or the port is below 3).
func vipAddress(o Options, main net.Addr) string {
	switch o.VIPListen {
	case vipOff:
		return ""
	case "":
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return ""
		}
		if port == "0" { // any free port, as the main address
			return net.JoinHostPort(host, "0")
		}
		tcp, ok := main.(*net.TCPAddr)
		if !ok || tcp.Port < 3 {
			return ""
		}
		return net.JoinHostPort(host, strconv.Itoa(tcp.Port-2))
	}
	return o.VIPListen
}
