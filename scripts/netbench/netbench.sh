#!/usr/bin/env bash
# netbench.sh starts and stops, by hand, one of the brokers that `go run .` benchmarks, with the
# same settings (go run . starts and stops them itself; this is for poking at one).
#
#   scripts/netbench/netbench.sh start KIND DIR   start KIND with its data and logs under DIR,
#                                                 wait until it answers, print the name-server
#                                                 address (127.0.0.1:PORT) on stdout
#   scripts/netbench/netbench.sh stop KIND DIR    stop it (TERM; KILL after 30 s) and wait
#
# KIND: edgemq-async, edgemq-sync (edgemq serve -store.flush async|sync, built from this tree
# unless EDGEMQ names a binary), rocketmq-async, rocketmq-sync (Apache RocketMQ name server +
# broker with ASYNC_FLUSH or SYNC_FLUSH, through scripts/interop/rocketmq.sh; RMQ_HEAP as
# there, default 256m), jetstream-async, jetstream-sync (nats-server with JetStream, its
# default sync every 2 minutes or sync_interval: always; built in scripts/bench unless
# NATS_SERVER names a binary).
#
# Ports as go run . uses them: EDGEMQ_PORT (18876), RMQ_NAMESRV_PORT (18976), RMQ_BROKER_PORT
# (20911), NATS_PORT (18422).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
EDGEMQ_PORT=${EDGEMQ_PORT:-18876}
NATS_PORT=${NATS_PORT:-18422}
export RMQ_NAMESRV_PORT=${RMQ_NAMESRV_PORT:-18976}
export RMQ_BROKER_PORT=${RMQ_BROKER_PORT:-20911}

usage() {
	sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -eq 3 ] || usage
cmd=$1 kind=$2
mkdir -p "$3"
dir=$(cd "$3" && pwd)

case $kind in
rocketmq-async | rocketmq-sync)
	if [ "$kind" = rocketmq-sync ]; then export RMQ_FLUSH_DISK_TYPE=SYNC_FLUSH; else export RMQ_FLUSH_DISK_TYPE=ASYNC_FLUSH; fi
	exec "$here/../interop/rocketmq.sh" "$cmd" "$dir"
	;;
edgemq-async | edgemq-sync) name=edgemq port=$EDGEMQ_PORT ;;
jetstream-async | jetstream-sync) name=nats-server port=$NATS_PORT ;;
*) usage ;;
esac

flush=${kind#*-}
case $cmd in
start)
	if [ -s "$dir/$name.pid" ] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; then
		echo "netbench.sh: already running under $dir" >&2
		exit 1
	fi
	if [ "$name" = edgemq ]; then
		bin=${EDGEMQ:-}
		if [ -z "$bin" ]; then
			bin="$dir/edgemq"
			(cd "$here/../.." && go build -o "$bin" ./cmd/edgemq)
		fi
		# The flags of go run . (broker.go): see there for new_queue_window.
		set -- "$bin" serve -data "$dir/data" -server.listen "127.0.0.1:$port" -store.flush "$flush" \
			-server.max_conns 4096 -log_level warn -broker.new_queue_window 1h
	else
		bin=${NATS_SERVER:-}
		if [ -z "$bin" ]; then
			bin="$dir/nats-server"
			(cd "$here/../bench" && go build -o "$bin" github.com/nats-io/nats-server/v2)
		fi
		# The configuration go run . writes (jetstream.go: natsConfig).
		{
			echo "listen: \"127.0.0.1:$port\""
			echo "max_connections: 4096"
			echo "jetstream {"
			echo "  store_dir: \"$dir/data\""
			[ "$flush" = sync ] && echo "  sync_interval: always"
			echo "}"
		} >"$dir/nats.conf"
		set -- "$bin" -c "$dir/nats.conf"
	fi
	nohup "$@" >"$dir/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/$name.pid"
	for ((i = 0; i < 300; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "127.0.0.1:$port"
			exit 0
		fi
		kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null || { cat "$dir/$name.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "netbench.sh: $name did not listen in 30 s" >&2
	exit 1
	;;
stop)
	[ -s "$dir/$name.pid" ] || exit 0
	pid=$(cat "$dir/$name.pid")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "netbench.sh: $name still running; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/$name.pid"
	;;
*) usage ;;
esac
