package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting/server"
	"github.com/edgemq/edgemq/edge/uplink"
)

const serveDoc = `
serve opens the data dir (making it if needed) and answers RocketMQ clients over TCP in the
remoting protocol: the name server and the broker on one address (server.listen, default
127.0.0.1:9876: this machine only), so a client needs only -n 127.0.0.1:9876 (NAMESRV_ADDR).
Older Java clients also reach the VIP address, the port less 2 (server.vip_listen).

Security: server.tls_mode on (TLS only) or permissive (TLS and plain clients) with
server.tls_cert and server.tls_key, and server.tls_client_ca to require client
certificates; server.acl names an accounts file of RocketMQ's plain ACL, whose signed
requests only are served (others: NO_PERMISSION). SIGHUP re-reads the accounts file. Serving
beyond loopback without TLS or an ACL logs a warning at start.

With [[uplink.up]] rules in the config file it forwards their topics to upstream brokers,
store-and-forward, from cursors kept in the data dir; with [[uplink.down]] rules it mirrors
upstream topics into local ones.

It serves until SIGTERM or SIGINT (Ctrl-C), then stops cleanly: it stops forwarding, accepting
connections, answers parked pulls, waits at most server.shutdown_timeout for the requests
being handled (then closes the connections at once), persists consumer offsets and delay
progress, closes the store, and exits 0. A second signal quits at once, exiting 130 (143
when the first was SIGTERM); the next start recovers the store as after a power cut.

It logs one line per event on stderr: the level, the message, key=value pairs (log_format,
log_level). Lines carry no time unless stderr is a terminal (log_timestamps): journald
stamps them. The startup line gives the bound addresses, the data dir and what recovery
found; the last line how long the stop took.

It serves HTTP on http.listen (default 127.0.0.1:9877, loopback only; "off": none), up
before the store opens: /metrics in the Prometheus text format (edgemq_* per topic, group and
queue lag, store, disk, recovery, connections and requests; process_* and go_*), /healthz
(200 while serving or recovering, 503 with the reason when the store's health check fails),
/readyz (200 once recovery is done and the listeners are up, 503 before and while stopping),
a status page at / that refreshes itself, and its JSON at /api/status.

Under systemd (Type=notify, configs/edgemq.service) it reports READY=1 once recovery is done
and its listeners are up, a STATUS= line (topics, message rates, connections, commitlog size,
disk use) every 10s, and STOPPING=1 when it begins to stop. With WatchdogSec it sends the
status at half that interval, with a watchdog ping (WATCHDOG=1) as long as the store is
healthy: no failed write or fsync, and its flusher and dispatcher each made progress since
the last check, or had nothing to do. Otherwise it logs why, once, shows it in STATUS, and
pings no more, so that systemd restarts it.

Exit codes: 0 stopped cleanly; 1 it could not start (a bad config file, an address in use,
a data dir held by another process) or the store failed to close; 2 a usage error (a bad
flag); 130 or 143 a second signal.

Examples:
  edgemq serve -config /etc/edgemq/edgemq.toml
  edgemq serve -data ./data -server.listen 127.0.0.1:9876 -server.vip_listen off
  edgemq serve -data ./data -http.listen 0.0.0.0:9877   # metrics for a remote Prometheus
  edgemq serve -server.listen :9876 -server.tls_mode on -server.tls_cert cert.pem \
    -server.tls_key key.pem -server.acl /etc/edgemq/acl.toml`

// serveCommand runs the broker as a daemon: the remoting server over a broker on the data
// dir, until a signal.
func serveCommand(fs *flag.FlagSet) runFunc {
	load := commandFlags(fs, "serve")
	return func(ctx context.Context, args []string, _, errOut io.Writer) error {
		if len(args) > 0 {
			return usageError("serve takes no arguments besides its flags, got %q", args)
		}
		c, err := load()
		if err != nil {
			return err
		}
		lg, warnings := c.newLogger(errOut)
		recent := newRecentLog(recentErrors)
		lg = slog.New(newRecentHandler(lg.Handler(), recent))
		signalLogger.Store(lg)
		defer signalLogger.Store(nil)
		if err := serve(ctx, c, lg, warnings.Load, recent); err != nil {
			lg.Error("serve failed", "err", err)
			return loggedError{err}
		}
		return nil
	}
}

// loggedError is an error that its command has logged already: run does not print it again.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// serve opens the broker, serves it until ctx ends, and stops cleanly. warnings counts the
// log's warnings so far: those of opening the store are what recovery repaired; recent
// keeps the last of them for the status page.
func serve(ctx context.Context, c *config, lg *slog.Logger, warnings func() int64, recent *recentLog) error {
	start := time.Now()
	if err := c.prepare(create); err != nil {
		return err
	}
	if frame, msg := cmp.Or(c.server.MaxFrameSize, server.DefaultOptions.MaxFrameSize),
		cmp.Or(c.broker.MaxMessageSize, edge.DefaultOptions.MaxMessageSize); frame < msg+recordSlack {
		return fmt.Errorf("server.max_frame_size %s cannot carry a message of broker.max_message_size %s: "+
			"make it at least %s larger", formatSize(int64(frame)), formatSize(int64(msg)), formatSize(recordSlack))
	}
	if err := c.uplink.Validate(cmp.Or(c.broker.BrokerName, edge.DefaultOptions.BrokerName)); err != nil {
		return err
	}
	var mon *monitor
	if c.httpListen != "off" {
		var err error
		if mon, err = startMonitor(c.httpListen, lg, recent, healthStall(statusEvery, *c.optionsLogging(lg))); err != nil {
			return fmt.Errorf("%w: choose another with -http.listen, or -http.listen off", err)
		}
		defer mon.shutdown(context.Background()) // on the error paths; a stop shuts it down before the store closes
	}
	opts := c.server
	opts.Logger = lg
	acl, err := c.security.apply(&opts)
	if err != nil {
		return err
	}
	before := warnings()
	bo := c.optionsLogging(lg)
	bo.RetentionHolds = c.uplink.RetentionHolds(cmp.Or(bo.BrokerName, edge.DefaultOptions.BrokerName)) // what the up rules have not forwarded, until the uplink starts
	b, err := edge.Open(c.dataDir, bo)
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", c.dataDir, err)
	}
	repaired := warnings() - before
	srv, err := server.Start(b, opts)
	if err != nil {
		b.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: another process has that address; choose one with -server.listen "+
				"(and the VIP address, the port less 2, with -server.vip_listen)", err)
		}
		return err
	}
	var up *uplink.Uplink
	if len(c.uplink.Up) > 0 || len(c.uplink.Down) > 0 {
		uo := c.uplink
		uo.Logger = lg
		if up, err = uplink.Start(b, &uo); err != nil {
			srv.Close()
			b.Close()
			return err
		}
		if mon != nil {
			mon.setUplink(up)
		}
	}

	vip := "off"
	if a := srv.VIPAddr(); a != nil {
		vip = a.String()
	}
	aclFile := "off"
	if acl != nil {
		aclFile = acl.Path()
	}
	args := []any{"listen", srv.Addr().String(), "vip_listen", vip, "tls", c.security.tlsMode, "acl", aclFile,
		"data_dir", c.dataDir, "topics", len(b.Topics())}
	if st, err := b.StoreStats(); err == nil {
		args = append(args, "commitlog", strings.ReplaceAll(humanBytes(st.MaxPos-st.MinPos), " ", ""))
	}
	msg := "serving"
	if repaired > 0 {
		msg = "serving; recovery repaired the store (the warnings above)"
	}
	if mon != nil {
		mon.serving(b, srv)
		args = append(args, "http", mon.Addr().String())
	}
	args = append(args, "uplink_rules", len(c.uplink.Up)+len(c.uplink.Down), "recovery_warnings", repaired, logSince(start))
	lg.Info(msg, args...)
	warnOpen(lg, srv.Addr(), opts)
	stopReload := reloadOnHangup(acl, lg)
	defer stopReload()
	if err := sdNotify("READY=1\nSTATUS=serving on " + srv.Addr().String()); err != nil {
		lg.Warn("cannot notify systemd", "err", err)
	}
	rep := startReporter(b, srv, c.dataDir, lg)

	<-ctx.Done()
	rep.stop()
	if mon != nil {
		mon.stopping()
	}
	stopping()
	stop := time.Now()
	if err := sdNotify("STOPPING=1"); err != nil {
		lg.Warn("cannot notify systemd", "err", err)
	}
	if up != nil { // forwarding stops first: a batch in flight is sent again next time
		if err := up.Close(); err != nil {
			lg.Warn("stopping the uplink", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	err = srv.Shutdown(sctx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		lg.Warn("requests still handled after shutdown_timeout: connections closed at once",
			"shutdown_timeout", formatDuration(c.shutdownTimeout))
	} else if err != nil {
		lg.Warn("stopping the server", "err", err)
	}
	if mon != nil {
		hctx, cancel := context.WithTimeout(context.Background(), time.Second)
		mon.shutdown(hctx)
		cancel()
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("close the store: %w", err)
	}
	lg.Info("stopped", logSince(stop))
	return nil
}
