#!/usr/bin/env bash
# cross.sh builds static release binaries of cmd/edgemq for the gateway platforms into bin/
# and prints each one's size.
#
# Environment:
#   VERSION        stamped into main.version (default: git describe --always --dirty, else "dev")
#   CROSS_TARGETS  space-separated GOOS/GOARCH[/GOARM] list
#                  (default: linux/amd64 linux/arm64 linux/arm/7 linux/arm/6)
#   BUILDTAGS      build tags (default: nethttpomithttp2, HTTP/2 left out of the HTTP/1.1
#                  metrics and status listener)
#   GO             go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
CROSS_TARGETS=${CROSS_TARGETS:-linux/amd64 linux/arm64 linux/arm/7 linux/arm/6}
BUILDTAGS=${BUILDTAGS-nethttpomithttp2}

mkdir -p bin
for target in $CROSS_TARGETS; do
	IFS=/ read -r goos goarch goarm <<<"$target"
	out=bin/edgemq-$goos-$goarch${goarm:+v$goarm}
	env CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" GOARM="$goarm" \
		"$GO" build -trimpath -tags "$BUILDTAGS" -ldflags "-s -w -X main.version=$VERSION" -o "$out" ./cmd/edgemq
	size=$(stat -c %s "$out")
	printf '%-28s %10d bytes  %6.2f MiB\n' "$out" "$size" "$(awk "BEGIN{print $size/1048576}")"
done
