#!/usr/bin/env bash
# install.sh installs EdgeMQ on a gateway without dpkg, from a checkout (or a copy of its
# configs/ and scripts/ with a binary). Run it as root. It lays out what the .deb does, under
# /usr/local and /etc:
#
#   /usr/local/bin/edgemq                 the binary (0755)
#   /etc/systemd/system/edgemq.service    configs/edgemq.service, ExecStart naming the above
#   /etc/edgemq/edgemq.toml               configs/edgemq.toml, only if there is none: an
#                                         edited config is never overwritten
#
# then runs the package's postinst (scripts/package/postinst): the system user edgemq and the
# data dir /var/lib/edgemq. It enables and starts nothing; "systemctl enable --now edgemq" does.
# It is idempotent: a file already as it would write it is left alone, so a second run changes
# nothing; a run with a new binary replaces it and, if the service runs, restarts it.
#
# Usage:
#   scripts/install.sh [--root DIR] [--binary FILE]   install
#   scripts/install.sh [--root DIR] --uninstall       stop the service; remove the binary, the
#                                                     unit and its enablement; keep the config,
#                                                     the user and the data dir (apt remove)
#   scripts/install.sh [--root DIR] --purge           --uninstall, then delete the config, the
#                                                     data dir (every message) and the user (apt purge)
#
#   --root DIR     install into DIR as the root (its etc/passwd and etc/group get the user);
#                  the running systemd is left alone. Default: /
#   --binary FILE  the edgemq to install (default: bin/edgemq; make build makes it, make cross
#                  makes bin/edgemq-linux-arm64 and the like for other platforms)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
root=
binary=$src/bin/edgemq
mode=install

# usage prints the usage above and exits with code $1 (2 if none).
usage() {
	sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit "${1:-2}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--root)
		[ $# -ge 2 ] || usage
		root=${2%/}
		shift 2
		;;
	--binary)
		[ $# -ge 2 ] || usage
		binary=$2
		shift 2
		;;
	--uninstall) mode=uninstall && shift ;;
	--purge) mode=purge && shift ;;
	-h | --help) usage 0 ;;
	*)
		echo "install.sh: unknown argument $1" >&2
		usage
		;;
	esac
done

if [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: run it as root (it makes a system user and writes under /etc)" >&2
	exit 1
fi
if [ -n "$root" ] && [ ! -d "$root" ]; then
	echo "install.sh: --root $root is not a directory" >&2
	exit 1
fi

bin=/usr/local/bin/edgemq
unit=/etc/systemd/system/edgemq.service
wants=/etc/systemd/system/multi-user.target.wants/edgemq.service
conf=/etc/edgemq/edgemq.toml

# maint runs one of the package's maintainer scripts on the target root.
maint() {
	DPKG_ROOT=$root sh "$src/scripts/package/$1" "${@:2}"
}

# put installs file $1 at $root$2 with mode $3 unless it is there already, byte for byte and
# with that mode; it says which.
put() {
	local from=$1 to=$root$2 mode=$3
	if [ -f "$to" ] && cmp -s "$from" "$to" && [ "$(stat -c %a "$to")" = "${mode#0}" ]; then
		echo "unchanged  $2"
		return 0
	fi
	install -D -m "$mode" "$from" "$to"
	echo "installed  $2"
}

# removed deletes $root$1 if it is there, and says so.
removed() {
	if [ -e "$root$1" ] || [ -L "$root$1" ]; then
		rm -f "$root$1"
		echo "removed    $1"
	fi
}

case $mode in
install)
	status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' edgemq 2>/dev/null || true)
	if [ "$status" = "install ok installed" ]; then
		echo "install.sh: the edgemq package is installed in ${root:-/}; upgrade that (dpkg -i) or remove it first" >&2
		exit 1
	fi
	if [ ! -f "$binary" ]; then
		echo "install.sh: no binary $binary: run make build, or pass --binary bin/edgemq-linux-ARCH from make cross" >&2
		exit 1
	fi
	if [ -z "$root" ] && ! "$binary" version >/dev/null 2>&1; then
		echo "install.sh: $binary does not run here (another platform's build?)" >&2
		exit 1
	fi
	upgrade=
	if [ -f "$root$bin" ] && ! cmp -s "$binary" "$root$bin"; then
		upgrade=yes
	fi
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	sed "s|^ExecStart=/usr/bin/edgemq |ExecStart=$bin |" "$src/configs/edgemq.service" >"$tmp"
	grep -q "^ExecStart=$bin " "$tmp" || {
		echo "install.sh: configs/edgemq.service has no ExecStart=/usr/bin/edgemq to point at $bin" >&2
		exit 1
	}
	put "$binary" "$bin" 0755
	put "$tmp" "$unit" 0644
	if [ -f "$root$conf" ]; then
		echo "kept       $conf"
	else
		put "$src/configs/edgemq.toml" "$conf" 0644
	fi
	# postinst configure, with an old version when the binary changed: it restarts a running service.
	maint postinst configure ${upgrade:+previous}
	echo "install.sh: done; start it with: systemctl enable --now edgemq"
	;;
uninstall | purge)
	maint prerm remove
	removed "$wants"
	removed "$bin"
	removed "$unit"
	if [ "$mode" = purge ]; then
		removed "$conf"
		rmdir "$root/etc/edgemq" 2>/dev/null || true
		maint postrm purge
		echo "install.sh: purged: the data dir /var/lib/edgemq and the user edgemq are gone"
	else
		maint postrm remove
		echo "install.sh: uninstalled; kept $conf, /var/lib/edgemq and the user edgemq (--purge deletes them)"
	fi
	;;
esac
