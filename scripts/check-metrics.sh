#!/usr/bin/env bash
# check-metrics.sh checks a real scrape of edgemq serve with Prometheus's own linter:
# it builds edgemq, starts a second "edgemq serve" as a hub, then "edgemq serve" on a temporary
# data dir (remoting and HTTP on free ports of 127.0.0.1) with an up rule forwarding Orders to
# the hub, sends and consumes a few messages with the CLI (-server), checks that
# /readyz and /healthz answer 200, scrapes /metrics and pipes it to "promtool check metrics",
# which fails on a malformed exposition and on names against Prometheus's conventions. Then
# it stops serve with SIGTERM and wants exit 0.
#
# promtool comes with Debian's prometheus package, installed with apt-get when missing (as
# root). Run time: about 10s once promtool is installed, the build included.
#
# Environment:
#   GO           go command (default: go)
#   ARTIFACTS_DIR  the scrape is kept as metrics/metrics.txt under it (default: out/)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
keep=${ARTIFACTS_DIR:-out}/metrics

if ! command -v promtool >/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		echo "check-metrics.sh: promtool not found: apt-get install prometheus" >&2
		exit 1
	fi
	echo "check-metrics.sh: installing promtool (Debian's prometheus package)"
	apt-get update -qq </dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus </dev/null
fi

tmp=$(mktemp -d)
pid=
hubpid=
cleanup() {
	for p in "$pid" "$hubpid"; do
		if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# started waits for serve's "serving" line in the log $1 of process $2, and prints it.
started() {
	for _ in $(seq 300); do
		grep -q '^INFO serving' "$1" && break
		kill -0 "$2" 2>/dev/null || { cat "$1" >&2; exit 1; }
		sleep 0.1
	done
	grep '^INFO serving' "$1" || { echo "check-metrics.sh: serve did not start" >&2; cat "$1" >&2; exit 1; }
}

"$GO" build -o "$tmp/edgemq" ./cmd/edgemq
"$tmp/edgemq" serve -data "$tmp/hub" -server.listen 127.0.0.1:0 -server.vip_listen off \
	-http.listen off 2>"$tmp/hub.log" &
hubpid=$!
hubline=$(started "$tmp/hub.log" "$hubpid")
hub=$(sed -n 's/.* listen=\([^ ]*\).*/\1/p' <<<"$hubline")
"$tmp/edgemq" serve -data "$tmp/data" -server.listen 127.0.0.1:0 -server.vip_listen off \
	-http.listen 127.0.0.1:0 -uplink.gateway gw -uplink.scan_interval 200ms \
	-uplink.up '[{name = "hub", topics = ["Orders"], upstream = "'"$hub"'", kind = "edgemq"}]' 2>"$tmp/serve.log" &
pid=$!
line=$(started "$tmp/serve.log" "$pid")
addr=$(sed -n 's/.* listen=\([^ ]*\).*/\1/p' <<<"$line")
http=$(sed -n 's/.* http=\([^ ]*\).*/\1/p' <<<"$line")
echo "check-metrics.sh: serve on $addr, HTTP on $http"

"$tmp/edgemq" send -server "$addr" -topic Orders -create one two three >/dev/null
"$tmp/edgemq" send -server "$addr" -topic 'Odd%Topic|x-1' -create a b >/dev/null
"$tmp/edgemq" consume -server "$addr" -topic Orders -group billing -n 2 -wait 10s >/dev/null

for probe in readyz healthz; do
	curl -fsS "http://$http/$probe" >/dev/null || { echo "check-metrics.sh: /$probe failed" >&2; exit 1; }
done
for _ in $(seq 100); do # the rule finds Orders within scan_interval and forwards its 3 messages
	curl -fsS "http://$http/metrics" | grep -qF 'edgemq_uplink_forwarded_messages_total{rule="hub"} 3' && break
	sleep 0.1
done
mkdir -p "$keep"
curl -fsS "http://$http/metrics" >"$keep/metrics.txt"
for want in 'edgemq_topic_messages_in_total{topic="Orders"} 3' 'edgemq_group_messages_out_total{group="billing"}' \
	'edgemq_store_fsync_duration_seconds_count' 'edgemq_uplink_state{rule="hub",direction="up",state=' \
	'edgemq_uplink_backlog_messages{rule="hub"} 0' 'edgemq_uplink_forwarded_messages_total{rule="hub"} 3'; do
	grep -qF "$want" "$keep/metrics.txt" || { echo "check-metrics.sh: the scrape lacks $want" >&2; exit 1; }
done
promtool check metrics <"$keep/metrics.txt"
echo "check-metrics.sh: promtool accepts the scrape ($(grep -c '^# TYPE' "$keep/metrics.txt") families, kept in $keep/metrics.txt)"

kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=
if [ "$code" != 0 ]; then
	echo "check-metrics.sh: serve exited $code after SIGTERM" >&2
	cat "$tmp/serve.log" >&2
	exit 1
fi
kill -TERM "$hubpid"
wait "$hubpid" || true
hubpid=
