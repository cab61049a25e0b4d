#!/usr/bin/env bash
# rocketmq.sh starts and stops a real Apache RocketMQ name server and one broker, resolved from
# Maven Central (scripts/interop/rocketmq/pom.xml), for the interop suites to run against.
#
#   scripts/interop/rocketmq.sh start DIR   start both with their data, config and logs under
#                                           DIR; wait until the broker is registered with the
#                                           name server; print the name-server address
#                                           (127.0.0.1:PORT) as the only line on stdout
#   scripts/interop/rocketmq.sh stop DIR    stop both (TERM, then KILL after 30 s) and wait
#   scripts/interop/rocketmq.sh admin DIR ARGS...
#                                           run mqadmin ARGS against that name server
#
# Environment:
#   RMQ_NAMESRV_PORT   name-server port (default 9876)
#   RMQ_BROKER_PORT    broker port (default 10911); the broker also listens on PORT-2 (its
#                      "VIP" channel) and PORT+1 (HA), so those must be free too
#   RMQ_FLUSH_DISK_TYPE ASYNC_FLUSH (default) or SYNC_FLUSH
#   RMQ_HEAP           broker heap and direct-memory cap (default 256m); the name server gets 128m
#   RMQ_VERSION        Apache RocketMQ version (default: the pom's rocketmq.version)
#   RMQ_START_TIMEOUT  seconds to wait for the broker to register (default 120)
#   RMQ_BROKER_CONF    more lines for broker.conf (e.g. its ACL 2.0: authenticationEnabled=true, ...)
#   JAVA_HOME          the JDK to run with (default: java on PATH); MVN the maven command
#
# Progress goes to stderr. Maven caches the jars in ~/.m2; nothing is installed by hand.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
MVN=${MVN:-mvn}
NS_PORT=${RMQ_NAMESRV_PORT:-9876}
BROKER_PORT=${RMQ_BROKER_PORT:-10911}
FLUSH=${RMQ_FLUSH_DISK_TYPE:-ASYNC_FLUSH}
HEAP=${RMQ_HEAP:-256m}
START_TIMEOUT=${RMQ_START_TIMEOUT:-120}
if [ -n "${JAVA_HOME:-}" ]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi

log() { echo "rocketmq.sh [${SECONDS}s]: $*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# jvm_opts HEAP: the options both servers run with. The --add-opens let RocketMQ unmap its
# memory-mapped files on JDK 17 and later.
jvm_opts() {
	echo "-server -Xms$1 -Xmx$1 -XX:MaxDirectMemorySize=$1 -XX:+UseG1GC -Xss512k" \
		"-Djava.net.preferIPv4Stack=true -Duser.home=$dir/home" \
		"--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED" \
		"--add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED"
}

# classpath: resolve the jars once per DIR (Maven's ~/.m2 cache makes later runs quick).
classpath() {
	if [ ! -s "$dir/classpath" ]; then
		local vflag=()
		[ -n "${RMQ_VERSION:-}" ] && vflag=("-Drocketmq.version=$RMQ_VERSION")
		log "resolving Apache RocketMQ with Maven"
		if ! "$MVN" -q -B -f "$here/rocketmq/pom.xml" "${vflag[@]}" dependency:build-classpath \
			-Dmdep.outputFile="$dir/classpath.tmp" >"$dir/maven.log" 2>&1; then
			cat "$dir/maven.log" >&2
			die "maven could not resolve Apache RocketMQ"
		fi
		mv "$dir/classpath.tmp" "$dir/classpath"
	fi
	cat "$dir/classpath"
}

port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

alive() {
	local f=$1
	[ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

admin() {
	local cp
	cp=$(classpath)
	[ -s "$dir/namesrv.port" ] || die "nothing was started under $dir"
	# mqadmin's own logging would print logback's status lines on stdout; keep it quiet.
	cat >"$dir/admin-logback.xml" <<'XML'
<configuration>
  <statusListener class="org.apache.rocketmq.logging.ch.qos.logback.core.status.NopStatusListener"/>
  <root level="OFF"/>
</configuration>
XML
	"$JAVA" -Xms64m -Xmx128m -Duser.home="$dir/home" -Drmq.logback.configurationFile="$dir/admin-logback.xml" \
		-cp "$cp" org.apache.rocketmq.tools.command.MQAdminStartup "$@" \
		-n "127.0.0.1:$(cat "$dir/namesrv.port")"
}

start() {
	mkdir -p "$dir/home" "$dir/store" "$dir/logs"
	if alive "$dir/namesrv.pid" || alive "$dir/broker.pid"; then
		die "already running under $dir (stop it first)"
	fi
	for p in "$NS_PORT" "$BROKER_PORT" $((BROKER_PORT - 2)) $((BROKER_PORT + 1)); do
		port_free "$p" || die "port $p is in use"
	done
	local cp
	cp=$(classpath)
	echo "$NS_PORT" >"$dir/namesrv.port"
	rm -f "$dir/logs/namesrv.out" "$dir/logs/broker.out"
	export ROCKETMQ_HOME="$dir/home"

	cat >"$dir/namesrv.conf" <<EOF
listenPort=$NS_PORT
EOF
	cat >"$dir/broker.conf" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=ASYNC_MASTER
brokerIP1=127.0.0.1
listenPort=$BROKER_PORT
namesrvAddr=127.0.0.1:$NS_PORT
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
storePathRootDir=$dir/store
storePathCommitLog=$dir/store/commitlog
flushDiskType=$FLUSH
mappedFileSizeCommitLog=67108864
deleteWhen=04
fileReservedTime=48
diskMaxUsedSpaceRatio=95
# On a small, busy machine a send may wait in the broker's queue longer than RocketMQ's 200 ms
# before it answers "broker busy" (TIMEOUT_CLEAN_QUEUE); tests want the message stored instead.
waitTimeMillsInSendQueue=3000
osPageCacheBusyTimeOutMills=5000
# Transactional messages: a half message nobody committed or rolled back is first checked
# with its producer group after 1 s (RocketMQ: 6 s), again every second (30 s), at most 15
# times, so TransactionTest's check-back scenarios take seconds, as with edgemq serve's
# -broker.transaction_timeout 1s -broker.transaction_check_interval 1s in run.sh. A commit or
# rollback is recorded for the checker in batches, every 3 s by default: with checks a second
# apart that would ask the producer about transactions it already ended (and a second commit
# stores the message twice), so record them every 100 ms.
transactionTimeOut=1000
transactionCheckInterval=1000
transactionCheckMax=15
transactionOpBatchInterval=100
${RMQ_BROKER_CONF:-}
EOF

	log "starting name server on 127.0.0.1:$NS_PORT"
	# shellcheck disable=SC2046
	nohup "$JAVA" $(jvm_opts 128m) -cp "$cp" org.apache.rocketmq.namesrv.NamesrvStartup \
		-c "$dir/namesrv.conf" >"$dir/logs/namesrv.out" 2>&1 </dev/null &
	echo $! >"$dir/namesrv.pid"

	local deadline=$((SECONDS + START_TIMEOUT))
	until grep -q "boot success" "$dir/logs/namesrv.out" 2>/dev/null; do
		alive "$dir/namesrv.pid" || { tail -30 "$dir/logs/namesrv.out" >&2; die "name server exited"; }
		[ $SECONDS -lt $deadline ] || { tail -30 "$dir/logs/namesrv.out" >&2; die "name server did not start"; }
		sleep 0.5
	done

	log "starting broker on 127.0.0.1:$BROKER_PORT ($FLUSH)"
	# shellcheck disable=SC2046
	nohup "$JAVA" $(jvm_opts "$HEAP") -cp "$cp" org.apache.rocketmq.broker.BrokerStartup \
		-c "$dir/broker.conf" >"$dir/logs/broker.out" 2>&1 </dev/null &
	echo $! >"$dir/broker.pid"

	until grep -q "boot success" "$dir/logs/broker.out" 2>/dev/null; do
		alive "$dir/broker.pid" || { tail -30 "$dir/logs/broker.out" >&2; die "broker exited"; }
		[ $SECONDS -lt $deadline ] || { tail -30 "$dir/logs/broker.out" >&2; die "broker did not start"; }
		sleep 0.5
	done
	# The broker registers with the name server right after it boots; wait until the name
	# server's cluster list shows it.
	until admin clusterList 2>/dev/null | grep -q "127.0.0.1:$BROKER_PORT"; do
		[ $SECONDS -lt $deadline ] || die "broker did not register with the name server"
		sleep 1
	done
	log "broker registered (logs under $dir/logs and $dir/home/logs)"
	echo "127.0.0.1:$NS_PORT"
}

# stop_one NAME: TERM the process, KILL it after 30 s, and wait until it is gone.
stop_one() {
	local f="$dir/$1.pid" pid
	[ -s "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping $1 (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 60; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$1 still running; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
		fi
	fi
	rm -f "$f"
}

stop() {
	stop_one broker
	stop_one namesrv
}

[ $# -ge 2 ] || usage
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
shift 2
case $cmd in
start) start ;;
stop) stop ;;
admin) admin "$@" ;;
*) usage ;;
esac
