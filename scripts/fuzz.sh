#!/usr/bin/env bash
# fuzz.sh runs every fuzz target in the module for a short while. `go test -fuzz` takes one
# target in one package at a time, so the targets are found with `go test -list '^Fuzz'`
# package by package and run one after the other.
#
# New failing inputs land in the package's testdata/fuzz/<Target>/; commit them, they
# become regression seeds.
#
# Environment:
#   FUZZTIME   how long to fuzz each target (default 10s)
#   FUZZ_PKGS  package patterns to search (default ./...)
#   GO         go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZ_PKGS=${FUZZ_PKGS:-./...}

# Only packages with test files can hold fuzz targets; listing the others would compile
# nothing useful.
# shellcheck disable=SC2086 # FUZZ_PKGS is a list of patterns
pkgs=$("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $FUZZ_PKGS)

ran=0
for pkg in $pkgs; do
	list=$("$GO" test -list '^Fuzz' "$pkg") # fails the script if the package does not build
	targets=$(grep '^Fuzz' <<<"$list" || true)
	for t in $targets; do
		echo "== $pkg $t ($FUZZTIME)"
		"$GO" test -run='^$' -fuzz="^$t\$" -fuzztime="$FUZZTIME" "$pkg"
		ran=$((ran + 1))
	done
done
echo "fuzz: $ran target(s) run for $FUZZTIME each"
