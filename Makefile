# EdgeMQ build, test and release targets. Longer logic lives in scripts/.
#
#   make build      bin/edgemq for this machine
#   make test       gofmt check, go vet, the consumer's dependency check, then the whole suite
#                   with -race
#   make lint       gofmt check and go vet only
#   make bench      benchmarks of BENCH_PKGS, also written to bench.out
#   make fuzz       every fuzz target in the module for FUZZTIME each (scripts/fuzz.sh)
#   make cross      static release binaries for the gateway platforms (scripts/cross.sh)
#   make package    .deb packages for amd64, arm64 and armhf (arm v7) into dist/ with dpkg-deb
#                   (scripts/package.sh; make package VERSION=1.2.0 sets the version)
#   make check-package  build and check the .debs, then install, remove and purge one, and
#                   scripts/install.sh, in scratch roots (scripts/check-package.sh; root, ~1 min)
#   make test-arm   the suite of ARM_PKGS for linux/arm64 and linux/arm v7 under qemu-user
#                   (scripts/test-arm.sh; needs qemu-user-static)
#   make run        build, then run the demo with its data under ./data
#   make serve      build, then run the daemon (edgemq serve) on ./data with configs/edgemq.toml
#                   until Ctrl-C: RocketMQ clients reach it at -n 127.0.0.1:9876
#   make test-interop  real RocketMQ clients (rocketmq-client-go, the Java client, mqadmin)
#                   against edgemq serve and against a real Apache RocketMQ (scripts/interop/run.sh;
#                   needs Java 17+ and Maven)
#   make test-uplink-full  the uplink at full scale: 1,000,000 messages forwarded through 100
#                   link cuts and a hub restart, 20 SIGKILLs of a forwarder and of a mirror,
#                   5,000,000 messages written over three simulated days offline, then drained
#                   (edge/uplink -uplink.scale=full; about 5 min, 2.5 GB of temp files)
#   make test-ext4  EXT4_CUTS power cuts per flush mode of real ext4 on a loop device under a
#                   store's appends (scripts/test-ext4.sh; root, losetup, mkfs.ext4)
#   make test-netns the uplink over a shaped, lossy link: an edgemq serve in a network namespace
#                   behind a veth with tbf rate and iptables loss, delay from a proxy (root, ~1 min)
#   make check-unit systemd-analyze verify of configs/edgemq.service (scripts/check-unit.sh)
#   make check-metrics  promtool check metrics on a real scrape of edgemq serve
#                   (scripts/check-metrics.sh; installs Debian's prometheus if promtool is missing)
#   make test-ui    the status page in headless Chromium against edgemq serve (scripts/ui; installs
#                   Debian's chromium if missing); screenshot in $ARTIFACTS_DIR or out/ui
#   make clean      remove build outputs

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO         ?= go
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X main.version=$(VERSION)
# BUILDTAGS: nethttpomithttp2 leaves HTTP/2 out of net/http (about 380 KiB): the metrics and
# status listener speaks HTTP/1.1, which Prometheus and browsers use for it.
BUILDTAGS  ?= nethttpomithttp2
FUZZTIME   ?= 10s
EXT4_CUTS  ?= 50
FUZZ_PKGS  ?= ./...
BENCH_PKGS ?= ./store/...
ARM_PKGS   ?= ./...

export GO VERSION FUZZTIME FUZZ_PKGS ARM_PKGS

.PHONY: all build test lint contract-deps fmt-check vet bench fuzz cross test-arm test-interop test-ext4 test-netns check-unit check-metrics test-ui run serve clean

all: build

build:
	$(GO) build -tags "$(BUILDTAGS)" -ldflags "$(LDFLAGS)" -o bin/edgemq ./cmd/edgemq

test: lint contract-deps
	$(GO) test -race -count=1 -timeout=30m ./...

lint: fmt-check vet

# contract-deps fails if a program with a consumer, a producer or the remoting client would
# link the message store or the broker: they see brokers only through edge/mq, which imports
# the standard library alone.
contract-deps:
	@bad=$$($(GO) list -deps ./consumer ./edge/mq ./edge/producer ./edge/remoting | grep -E 'edgemq/(store|edge)$$|edgemq/store/|bbolt|klauspost|tinylib/msgp' || true); \
	if [ -n "$$bad" ]; then echo "a client package depends on the store or the broker:"; echo "$$bad"; exit 1; fi

# fmt-check fails listing the files gofmt would change. testdata/ is skipped: it may hold
# deliberately odd Go source.
fmt-check:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 -r gofmt -l); \
	if [ -n "$$files" ]; then echo "gofmt -w needed on:"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet ./...
	GOARCH=arm GOARM=7 $(GO) vet ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(BENCH_PKGS) | tee bench.out

fuzz:
	bash scripts/fuzz.sh

cross:
	bash scripts/cross.sh

.PHONY: package check-package

package:
	bash scripts/package.sh

check-package:
	bash scripts/check-package.sh

test-arm:
	bash scripts/test-arm.sh

test-interop:
	bash scripts/interop/run.sh

test-ext4:
	bash scripts/test-ext4.sh $(EXT4_CUTS)

# Root only; the figures (alarm latency, drain rate) are in the -v output.
test-netns:
	EDGEMQ_NETNS=1 $(GO) test -count=1 -v -run 'TestNetns' ./edge/uplink

.PHONY: test-uplink-full

# test-uplink-full prints each test's figures (rate, cuts, kills, duplicates, heap); the
# brokers' INFO and WARN lines are left out.
test-uplink-full:
	$(GO) test -count=1 -timeout=20m -v -run '^(TestForwardThroughFaults|TestForwardSurvivesSIGKILL|TestDownSurvivesSIGKILL|TestDaysOffline)$$' \
		./edge/uplink -uplink.scale=full | grep -v -e 'level=INFO' -e 'level=WARN'

check-unit:
	bash scripts/check-unit.sh

check-metrics:
	bash scripts/check-metrics.sh

test-ui:
	bash scripts/ui/run.sh

# run builds, then runs the demo (cmd/edgemq demo.go) on the embedded defaults with its data
# under ./data: producers, long-polling consumers, then throughput, latency and lag.
run: build
	./bin/edgemq demo -data ./data

# serve builds, then runs the daemon in the foreground on the example config (every key at its
# default) with its data under ./data; Ctrl-C stops it cleanly.
serve: build
	./bin/edgemq serve -config configs/edgemq.toml -data ./data

# clean leaves ./data alone: it may hold a demo store someone wants to keep.
clean:
	rm -rf bin bench.out dist
