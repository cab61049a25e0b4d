package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// clientTLS runs the TLS handshake on nc, bounded by ctx and timeout; it closes nc when the
// handshake fails.
func clientTLS(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}
