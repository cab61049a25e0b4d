#!/usr/bin/env bash
# package.sh builds the Debian packages of EdgeMQ into dist/: edgemq_<version>_<arch>.deb for
# amd64, arm64 and armhf (arm v7), from the static binaries of scripts/cross.sh, with
# dpkg-deb alone (no debhelper, no Go packaging module). Each package holds:
#
#   /usr/bin/edgemq                       the binary (0755)
#   /lib/systemd/system/edgemq.service    configs/edgemq.service (0644)
#   /etc/edgemq/edgemq.toml               configs/edgemq.toml (0644), a conffile
#   /usr/share/doc/edgemq/README.md       README.md (0644)
#
# and the maintainer scripts in scripts/package/ (postinst: the user and the data dir; prerm:
# stop on remove; postrm: delete user and data on purge). Everything is owned by root.
#
# The packages are reproducible: the same commit, VERSION and Go give the same bytes
# (file times are the commit's time, SOURCE_DATE_EPOCH, which dpkg-deb also uses for its own).
#
# Environment:
#   VERSION          stamped into the binary (default: git describe --always --dirty, else "dev")
#   DEB_VERSION      the packages' version (default: from VERSION: a release tag such as
#                    v1.2.0 or v1.2.0-3-gabc1234 loses its v and has '-' made '.'; anything
#                    else, such as a bare commit abc1234-dirty, becomes
#                    0.0~git<commit count>.abc1234.dirty, so that later commits sort later)
#   DEB_ARCHES       which of amd64 arm64 armhf to build (default: all three)
#   DIST             where the packages go (default: dist)
#   DEB_COMPRESS     dpkg-deb's compressor: xz (the default, the smallest), gzip (4x faster to
#                    build), zstd or none
#   DEB_MAINTAINER   the Maintainer field (default: the project's name and home page; Debian
#                    policy wants "Name <email>", which a release should set)
#   NO_BUILD         if 1, package the binaries already in bin/ (of scripts/cross.sh) as they
#                    are, without building them again
#   SOURCE_DATE_EPOCH  file times in the packages (default: the last commit's time)
#   GO               go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
DEB_ARCHES=${DEB_ARCHES:-amd64 arm64 armhf}
DIST=${DIST:-dist}
DEB_COMPRESS=${DEB_COMPRESS:-xz}
DEB_MAINTAINER=${DEB_MAINTAINER:-EdgeMQ developers <https://github.com/edgemq/edgemq>}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export VERSION SOURCE_DATE_EPOCH

if [ -z "${DEB_VERSION:-}" ]; then
	DEB_VERSION=${VERSION#v}
	DEB_VERSION=${DEB_VERSION//-/.}
	if [[ ! ${VERSION#v} =~ ^[0-9]+\.[0-9]+ ]]; then
		DEB_VERSION=0.0~git$(git rev-list --count HEAD 2>/dev/null || echo 0).$DEB_VERSION
	fi
fi
if [[ ! $DEB_VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	echo "package.sh: DEB_VERSION $DEB_VERSION is not a Debian version (digits first, then [A-Za-z0-9.+~])" >&2
	exit 1
fi

# target maps a Debian architecture to the GOOS/GOARCH[/GOARM] of scripts/cross.sh.
target() {
	case $1 in
	amd64) echo linux/amd64 ;;
	arm64) echo linux/arm64 ;;
	armhf) echo linux/arm/7 ;;
	*)
		echo "package.sh: unknown architecture $1 (amd64, arm64 or armhf)" >&2
		return 1
		;;
	esac
}

targets=()
for arch in $DEB_ARCHES; do
	targets+=("$(target "$arch")")
done
if [ "${NO_BUILD:-}" != 1 ]; then
	CROSS_TARGETS="${targets[*]}" bash scripts/cross.sh
fi

mkdir -p "$DIST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arch in $DEB_ARCHES; do
	IFS=/ read -r goos goarch goarm <<<"$(target "$arch")"
	bin=bin/edgemq-$goos-$goarch${goarm:+v$goarm}
	pkg=$work/$arch
	install -D -m 0755 "$bin" "$pkg/usr/bin/edgemq"
	install -D -m 0644 configs/edgemq.service "$pkg/lib/systemd/system/edgemq.service"
	install -D -m 0644 configs/edgemq.toml "$pkg/etc/edgemq/edgemq.toml"
	install -D -m 0644 README.md "$pkg/usr/share/doc/edgemq/README.md"
	install -d -m 0755 "$pkg/DEBIAN"
	install -m 0755 scripts/package/postinst scripts/package/prerm scripts/package/postrm "$pkg/DEBIAN/"
	echo /etc/edgemq/edgemq.toml >"$pkg/DEBIAN/conffiles"
	chmod 0644 "$pkg/DEBIAN/conffiles"
	size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
	cat >"$pkg/DEBIAN/control" <<-CONTROL
		Package: edgemq
		Version: $DEB_VERSION
		Architecture: $arch
		Maintainer: $DEB_MAINTAINER
		Installed-Size: $size
		Depends: passwd
		Section: net
		Priority: optional
		Homepage: https://github.com/edgemq/edgemq
		Description: RocketMQ-compatible message broker for edge gateways
		 EdgeMQ is a message broker in one static binary that speaks RocketMQ's
		 remoting protocol, so existing RocketMQ clients (Go, Java, C++) work
		 unchanged against it. It keeps messages in a crash-safe commitlog on
		 local disk.
		 .
		 The package installs the systemd unit edgemq.service (not enabled: run
		 "systemctl enable --now edgemq"), the config /etc/edgemq/edgemq.toml,
		 and makes the system user edgemq and the data dir /var/lib/edgemq.
	CONTROL
	chmod 0644 "$pkg/DEBIAN/control"
	# Directories 0755 whatever the umask; every time the commit's.
	find "$pkg" -type d -exec chmod 0755 {} +
	find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	out=$DIST/edgemq_${DEB_VERSION}_$arch.deb
	dpkg-deb --root-owner-group -Z"$DEB_COMPRESS" --build "$pkg" "$out" >/dev/null
	printf '%-44s %10d bytes\n' "$out" "$(stat -c %s "$out")"
done
