#!/usr/bin/env bash
# run.sh is the whole interop run (`make test-interop`, CI): for each target broker it starts
# the broker, runs the rocketmq-client-go suite (scripts/interop/go) and the Apache RocketMQ
# Java client + mqadmin suite (scripts/interop/java) against it, and stops it; then it prints a
# table of every scenario against every target and exits non-zero if anything failed.
#
# Targets, in this order:
#   edgemq    `go build ./cmd/edgemq`, then `edgemq serve` on a fresh data dir (name server and
#             broker on one address)
#   rocketmq  a real Apache RocketMQ name server and broker from Maven (rocketmq.sh)
#
#   scripts/interop/run.sh [--targets "edgemq rocketmq"] [--suites "go java consumer uplink"] [--keep]
#
# Suites: go and java run against each target; the Java suite's MixedGroupTest puts
# EdgeMQ's Go consumer (scripts/interop/gomember, built here) and a Java consumer in one
# group. consumer runs once, before the targets: package consumer's tests with -net=all,
# every network-capable test again over TCP through edge/remoting/server, and the
# at-least-once test through a faulty link (netfault) at full size (about 2 minutes). uplink
# runs against each target: edge/uplink forwarding a few thousand messages to it as the
# upstream, read back with our client, and two gateways' down rules sharing a group with a
# push consumer there (about 10 s).
#
# Environment (flags win):
#   INTEROP_TARGETS   targets to run (default "edgemq rocketmq")
#   INTEROP_SUITES    suites to run (default "go java consumer uplink")
#   INTEROP_KEEP=1    keep the work dir (logs, data, reports) instead of deleting it
#   EDGEMQ_PORT       edgemq serve's address 127.0.0.1:PORT (default 17876; VIP channel PORT-2)
#   EDGEMQ_SECURE_PORT  the ports (this and the next) of two more edgemq serve instances with the
#                     ACL and TLS permissive / TLS only, for the suites' Secure scenarios
#                     (default EDGEMQ_PORT+100; edgemq target only)
#   RMQ_NAMESRV_PORT, RMQ_BROKER_PORT   Apache RocketMQ's ports (default 17976, 18911)
#   JAVA_SUITE_ARGS   extra Maven arguments, e.g. -Dtest=SendTest
#   GO_SUITE_ARGS     extra go test arguments, e.g. -run TestSend
#   GO, MVN           the go and mvn commands
#
# Scenarios that legitimately differ between the brokers are listed in DIFFERENCES.md; the
# suites read INTEROP_TARGET and skip them there, saying why, so they show as SKIP.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}
MVN=${MVN:-mvn}
TARGETS=${INTEROP_TARGETS:-"edgemq rocketmq"}
SUITES=${INTEROP_SUITES:-"go java consumer uplink"}
KEEP=${INTEROP_KEEP:-}
EDGEMQ_PORT=${EDGEMQ_PORT:-17876}
EDGEMQ_SECURE_PORT=${EDGEMQ_SECURE_PORT:-$((EDGEMQ_PORT + 100))}
export RMQ_NAMESRV_PORT=${RMQ_NAMESRV_PORT:-17976}
export RMQ_BROKER_PORT=${RMQ_BROKER_PORT:-18911}

while [ $# -gt 0 ]; do
	case $1 in
	--targets) TARGETS=$2; shift 2 ;;
	--suites) SUITES=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
TARGETS=${TARGETS//,/ }
SUITES=${SUITES//,/ }

work=$(mktemp -d "${TMPDIR:-/tmp}/edgemq-interop.XXXXXX")
results=$work/results.tsv # suite, target, scenario, PASS|FAIL|SKIP
: >"$results"
failed=0
edgemq_pid=
secure_pid=

say() { echo "=== run.sh [${SECONDS}s]: $*"; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; }

cleanup() {
	local pid
	for pid in $edgemq_pid $secure_pid; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		fi
	done
	[ -d "$work/rocketmq" ] && "$here/rocketmq.sh" stop "$work/rocketmq" >/dev/null 2>&1
	if [ -n "$KEEP" ]; then
		echo "run.sh: logs, data and reports kept in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# show_log FILE [N]: a failure's context in CI output: the failed tests with
# what they logged, the first data race and panic reports, then the log's last
# N lines (the summary of a run cuts long output in the middle, so the named
# failures come first).
show_log() {
	if grep -qE -- '--- FAIL|WARNING: DATA RACE|^panic:' "$1"; then
		echo "--- failures in $1"
		grep -E -A12 -- '--- FAIL' "$1" | head -n 60
		grep -E -A24 -- 'WARNING: DATA RACE' "$1" | head -n 50
		grep -E -A24 -- '^panic:' "$1" | head -n 30
	fi
	echo "--- last lines of $1"
	tail -n "${2:-60}" "$1"
	echo "---"
}

start_edgemq() {
	say "building edgemq"
	if ! (cd "$root" && "$GO" build -o "$work/edgemq" ./cmd/edgemq) >"$work/edgemq-build.log" 2>&1; then
		show_log "$work/edgemq-build.log"
		return 1
	fi
	if ! "$work/edgemq" serve -h >/dev/null 2>&1; then
		echo "run.sh: this edgemq has no serve command" >&2
		return 1
	fi
	port_open "$EDGEMQ_PORT" && { echo "run.sh: port $EDGEMQ_PORT is in use (set EDGEMQ_PORT)" >&2; return 1; }
	say "starting edgemq serve on 127.0.0.1:$EDGEMQ_PORT"
	# Half messages are checked with their producer group after 1 s and every second after
	# (TransactionTest; rocketmq.sh configures Apache RocketMQ the same way).
	"$work/edgemq" serve -data "$work/edgemq-data" -server.listen "127.0.0.1:$EDGEMQ_PORT" \
		-server.vip_listen "127.0.0.1:$((EDGEMQ_PORT - 2))" -http.listen off \
		-broker.transaction_timeout 1s -broker.transaction_check_interval 1s >"$work/edgemq.log" 2>&1 </dev/null &
	edgemq_pid=$!
	local i
	for ((i = 0; i < 300; i++)); do
		port_open "$EDGEMQ_PORT" && { NS=127.0.0.1:$EDGEMQ_PORT; start_edgemq_secure; return 0; }
		kill -0 "$edgemq_pid" 2>/dev/null || break
		sleep 0.1
	done
	show_log "$work/edgemq.log"
	return 1
}

# start_edgemq_secure: two more edgemq serve instances with the ACL, for the suites' Secure
# scenarios: on EDGEMQ_SECURE_PORT with TLS permissive (TLS and plain clients; its address in
# INTEROP_SECURE_NAMESRV), and on EDGEMQ_SECURE_PORT+1 with TLS only (INTEROP_TLS_NAMESRV), so
# that a client there provably speaks TLS. A failure to start is a scenario row of its own;
# the Secure scenarios then skip.
start_edgemq_secure() {
	local dir=$work/secure
	mkdir -p "$dir"
	if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" >"$dir/openssl.log" 2>&1; then
		show_log "$dir/openssl.log"
		record run edgemq "secure serve starts (TLS, ACL)" FAIL
		failed=1
		return 0
	fi
	# The accounts the suites sign with (go/secure_test.go, java/.../SecureTest.java).
	cat >"$dir/acl.toml" <<'ACL'
[[accounts]]
accessKey = "interop-app"
secretKey = "interop-app-secret"
defaultTopicPerm = "PUB|SUB"
defaultGroupPerm = "SUB"

[[accounts]]
accessKey = "interop-reader"
secretKey = "interop-reader-secret"
defaultTopicPerm = "SUB"
defaultGroupPerm = "SUB"
ACL
	start_secure_instance permissive "$EDGEMQ_SECURE_PORT" INTEROP_SECURE_NAMESRV
	start_secure_instance on "$((EDGEMQ_SECURE_PORT + 1))" INTEROP_TLS_NAMESRV
}

# start_secure_instance MODE PORT VAR: edgemq serve with server.tls_mode MODE and the ACL on
# 127.0.0.1:PORT; once it serves, VAR holds that address.
start_secure_instance() {
	local mode=$1 port=$2 var=$3 dir=$work/secure i pid log
	log=$work/edgemq-secure-$mode.log
	port_open "$port" && echo "run.sh: port $port is in use (set EDGEMQ_SECURE_PORT)" >&2
	say "starting edgemq serve with TLS $mode and the ACL on 127.0.0.1:$port"
	"$work/edgemq" serve -data "$dir/data-$mode" -server.listen "127.0.0.1:$port" -server.vip_listen off \
		-server.tls_mode "$mode" -server.tls_cert "$dir/cert.pem" -server.tls_key "$dir/key.pem" \
		-server.acl "$dir/acl.toml" -http.listen off >"$log" 2>&1 </dev/null &
	pid=$!
	secure_pid="$secure_pid $pid"
	for ((i = 0; i < 300; i++)); do
		if grep -q "^INFO serving" "$log" 2>/dev/null; then
			export "$var=127.0.0.1:$port"
			record run edgemq "secure serve starts (TLS $mode, ACL)" PASS
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	show_log "$log"
	record run edgemq "secure serve starts (TLS $mode, ACL)" FAIL
	failed=1
}

stop_edgemq_secure() {
	unset INTEROP_SECURE_NAMESRV INTEROP_TLS_NAMESRV
	local pid
	for pid in $secure_pid; do
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	secure_pid=
}

# stop_edgemq: SIGTERM, and a clean stop must exit 0 within 30 s (a scenario of its own).
stop_edgemq() {
	stop_edgemq_secure
	[ -n "$edgemq_pid" ] || return 0
	say "stopping edgemq serve"
	kill -TERM "$edgemq_pid" 2>/dev/null
	local i rc
	for ((i = 0; i < 300; i++)); do
		kill -0 "$edgemq_pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$edgemq_pid" 2>/dev/null; then
		kill -KILL "$edgemq_pid" 2>/dev/null
		wait "$edgemq_pid" 2>/dev/null
		record run edgemq "serve stops cleanly on SIGTERM" FAIL
		echo "run.sh: edgemq serve did not stop within 30 s of SIGTERM" >&2
		failed=1
	else
		wait "$edgemq_pid"
		rc=$?
		if [ "$rc" -eq 0 ]; then
			record run edgemq "serve stops cleanly on SIGTERM" PASS
		else
			record run edgemq "serve stops cleanly on SIGTERM" FAIL
			echo "run.sh: edgemq serve exited $rc after SIGTERM" >&2
			show_log "$work/edgemq.log"
			failed=1
		fi
	fi
	edgemq_pid=
}

start_rocketmq() {
	say "starting Apache RocketMQ (name server :$RMQ_NAMESRV_PORT, broker :$RMQ_BROKER_PORT)"
	NS=$("$here/rocketmq.sh" start "$work/rocketmq") || return 1
}

stop_rocketmq() {
	say "stopping Apache RocketMQ"
	"$here/rocketmq.sh" stop "$work/rocketmq" || failed=1
}

# run_go TARGET: the rocketmq-client-go suite; one row per test and subtest from go test -v.
run_go() {
	local target=$1 log=$work/go-$target.log rc
	say "go suite against $target ($NS)"
	# shellcheck disable=SC2086
	(cd "$here/go" && INTEROP_NAMESRV=$NS INTEROP_TARGET=$target "$GO" test -count=1 -v -timeout 20m \
		${GO_SUITE_ARGS:-} ./...) >"$log" 2>&1
	rc=$?
	local rows
	rows=$(sed -nE 's/^ *--- (PASS|FAIL|SKIP): ([^ ]+) .*/\2\t\1/p' "$log")
	if [ -n "$rows" ]; then
		while IFS=$'\t' read -r name status; do record go "$target" "$name" "$status"; done <<<"$rows"
	fi
	grep -E '^(ok|FAIL|---|panic:)' "$log" | grep -vE '^--- (PASS|SKIP)' | sed 's/^/    /'
	if [ $rc -ne 0 ]; then
		failed=1
		record go "$target" "(suite exit status)" FAIL
		show_log "$log" 80
	fi
}

# run_uplink TARGET: edge/uplink's interop tests (TestForwardToRocketMQInterop,
# TestDownSharesGroupInterop) with the target as upstream.
run_uplink() {
	local target=$1 log=$work/uplink-$target.log rc
	say "uplink suite against $target ($NS)"
	(cd "$root" && INTEROP_NAMESRV=$NS INTEROP_TARGET=$target "$GO" test -count=1 -v -timeout 10m -run 'Interop$' ./edge/uplink) >"$log" 2>&1
	rc=$?
	local rows
	rows=$(sed -nE 's/^ *--- (PASS|FAIL|SKIP): ([^ ]+) .*/\2\t\1/p' "$log")
	if [ -n "$rows" ]; then
		while IFS=$'\t' read -r name status; do record uplink "$target" "$name" "$status"; done <<<"$rows"
	fi
	if [ $rc -ne 0 ]; then
		failed=1
		record uplink "$target" "(suite exit status)" FAIL
		show_log "$log" 80
	fi
}

# run_consumer: package consumer's tests with -net=all (against edge/remoting/server, so
# recorded under target edgemq); one row per test and subtest.
run_consumer() {
	local log=$work/consumer.log rc
	say "consumer suite over TCP (-net=all)"
	(cd "$root" && "$GO" test -race -count=1 -v -timeout 20m ./consumer -net=all) >"$log" 2>&1
	rc=$?
	local rows
	rows=$(sed -nE 's/^ *--- (PASS|FAIL|SKIP): ([^ ]+) .*/\2\t\1/p' "$log" | grep -E '/net|FaultyLink')
	if [ -n "$rows" ]; then
		while IFS=$'\t' read -r name status; do record consumer edgemq "$name" "$status"; done <<<"$rows"
	fi
	grep -E 'summary:|^(ok|FAIL|panic:)' "$log" | sed 's/^ */    /'
	if [ $rc -ne 0 ]; then
		failed=1
		record consumer edgemq "(suite exit status)" FAIL
		show_log "$log" 80
	fi
}

# build_gomember: EdgeMQ's Go consumer as a group member for the Java suite's mixed groups.
gomember=
build_gomember() {
	[ -n "$gomember" ] && return 0
	if (cd "$root" && "$GO" build -o "$work/gomember" ./scripts/interop/gomember) >"$work/gomember-build.log" 2>&1; then
		gomember=$work/gomember
	else
		show_log "$work/gomember-build.log"
		record java build "gomember builds" FAIL
		failed=1
	fi
}

# run_java TARGET: the Java suite; one row per JUnit test from Surefire's reports.
run_java() {
	local target=$1 log=$work/java-$target.log reports=$work/java-$target rc
	build_gomember
	say "java suite against $target ($NS)"
	# shellcheck disable=SC2086
	"$MVN" -B -f "$here/java/pom.xml" test -Dnamesrv="$NS" -Dinterop.target="$target" \
		-Dinterop.reports="$reports" -Dinterop.gomember="$gomember" ${JAVA_SUITE_ARGS:-} >"$log" 2>&1
	rc=$?
	python3 - "$reports" "$target" >>"$results" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
reports, target = sys.argv[1], sys.argv[2]
for f in sorted(glob.glob(reports + "/TEST-*.xml")):
    for tc in ET.parse(f).getroot().iter("testcase"):
        cls = tc.get("classname", "").rsplit(".", 1)[-1]
        status = "PASS"
        if tc.find("failure") is not None or tc.find("error") is not None:
            status = "FAIL"
        elif tc.find("skipped") is not None:
            status = "SKIP"
        print(f"java\t{target}\t{cls}.{tc.get('name')}\t{status}")
PY
	grep -E 'Tests run:|FAIL|ERROR\]   ' "$log" | grep -vE '^\[INFO\] Tests run: .*, Time elapsed' | sed 's/^/    /' | head -40
	if [ $rc -ne 0 ]; then
		failed=1
		record java "$target" "(suite exit status)" FAIL
		show_log "$log" 30
	fi
}

case " $SUITES " in *" consumer "*) run_consumer ;; esac

for target in $TARGETS; do
	NS=
	case $target in
	edgemq) start=start_edgemq stop=stop_edgemq ;;
	rocketmq) start=start_rocketmq stop=stop_rocketmq ;;
	*) echo "run.sh: unknown target $target (edgemq, rocketmq)" >&2; exit 2 ;;
	esac
	t0=$SECONDS
	if ! $start; then
		record run "$target" "broker starts" FAIL
		failed=1
		$stop
		continue
	fi
	record run "$target" "broker starts" PASS
	for suite in $SUITES; do
		case $suite in
		go) run_go "$target" ;;
		java) run_java "$target" ;;
		consumer) ;; # ran once, above
		uplink) run_uplink "$target" ;;
		*) echo "run.sh: unknown suite $suite (go, java, consumer, uplink)" >&2; exit 2 ;;
		esac
	done
	$stop
	say "$target done in $((SECONDS - t0)) s"
done

python3 - "$results" "$TARGETS" <<'PY'
import sys
rows, targets = {}, sys.argv[2].split()
for line in open(sys.argv[1]):
    suite, target, name, status = line.rstrip("\n").split("\t")
    rows.setdefault((suite, name), {})[target] = status
order = {"run": 0, "consumer": 1, "go": 2, "java": 3}
keys = sorted(rows, key=lambda k: (order.get(k[0], 9), k[1]))
w = max([len(f"{s} {n}") for s, n in keys] + [8])
print()
print(f"{'scenario':<{w}}  " + "  ".join(f"{t:<8}" for t in targets))
print("-" * (w + 10 * len(targets)))
counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
for s, n in keys:
    cells = [rows[(s, n)].get(t, "-") for t in targets]
    for c in cells:
        if c in counts:
            counts[c] += 1
    print(f"{s + ' ' + n:<{w}}  " + "  ".join(f"{c:<8}" for c in cells))
print()
print(f"interop: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
PY
say "finished in ${SECONDS} s"
exit $failed
