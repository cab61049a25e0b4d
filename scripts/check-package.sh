#!/usr/bin/env bash
# check-package.sh proves the Debian packages (scripts/package.sh) and scripts/install.sh:
#
#  1. builds the three .debs, packages the amd64 binary again and compares the two byte for
#     byte (reproducible);
#  2. checks each one's control fields, maintainer scripts, conffiles and file list with modes
#     and owners, that its unit and config are those of configs/, and that its binary is a static,
#     stripped ELF for its machine, built with CGO_ENABLED=0 and -trimpath (go version -m), that
#     runs (the arm ones under qemu-user when qemu-aarch64-static/qemu-arm-static are there);
#  3. installs the amd64 .deb into a scratch root (dpkg --root --force-script-chrootless: the
#     maintainer scripts run on this machine with DPKG_ROOT set, and change only the scratch
#     root), checks the user, the data dir and the files, verifies the installed unit there
#     (systemd-analyze verify --root), runs the installed binary, installs it
#     again, upgrades it to a later version (an edited config and the data kept), removes it
#     (config, data and user kept), purges it (nothing left);
#  4. does the same with scripts/install.sh --root: install (the unit verified), install again
#     (nothing changes), install a new binary (it alone is replaced),
#     --uninstall, --purge;
#  5. checks that this machine's users, groups, dpkg database and edgemq paths did not change.
#
# Needs dpkg, file, systemd-analyze and go (for go version -m); root, as dpkg and install.sh want. It replaces
# dist/edgemq_*.deb with the packages of this tree.
#
# Environment: VERSION, SOURCE_DATE_EPOCH, GO as for scripts/package.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
# Fixed here (DEB_VERSION after the first build), so that both builds agree even if a commit
# lands in between.
export GO VERSION SOURCE_DATE_EPOCH

fail() {
	echo "check-package.sh: FAIL: $*" >&2
	exit 1
}
say() {
	echo "check-package.sh: [${SECONDS}s] $*"
}
for tool in dpkg dpkg-deb dpkg-query file useradd systemd-analyze; do
	command -v "$tool" >/dev/null || fail "$tool not found"
done
[ "$(id -u)" -eq 0 ] || fail "run it as root (dpkg and install.sh want it)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# host prints what of this machine the check must leave as it was.
host() {
	sha256sum /etc/passwd /etc/group /etc/shadow /etc/gshadow /var/lib/dpkg/status
	ls /var/lib/dpkg/info | grep -i edgemq || true
	for p in /usr/bin/edgemq /usr/local/bin/edgemq /lib/systemd/system/edgemq.service \
		/usr/lib/systemd/system/edgemq.service /etc/systemd/system/edgemq.service \
		/etc/systemd/system/multi-user.target.wants/edgemq.service /etc/edgemq /var/lib/edgemq; do
		stat -c '%n %a %u:%g %s %Y' "$p" 2>/dev/null || echo "$p absent"
	done
}
host >"$work/host.before"
touch "$work/stamp"

# --- 1. build, twice -----------------------------------------------------------------------
say "building $VERSION"
arches=(amd64 arm64 armhf)
rm -f dist/edgemq_*.deb
bash scripts/package.sh
debs=(dist/edgemq_*_amd64.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "package.sh made no dist/edgemq_*_amd64.deb, or more than one"
DEB_VERSION=$(dpkg-deb --field "${debs[0]}" Version)
export DEB_VERSION
for arch in "${arches[@]}"; do
	[ -f "dist/edgemq_${DEB_VERSION}_$arch.deb" ] || fail "dist/edgemq_${DEB_VERSION}_$arch.deb not built"
done
# The same binary, packaged again: this checks the packaging (Go's builds are reproducible with
# -trimpath), and one arch does, as the packaging does not depend on it; linking and xz cost
# more than the rest of this check.
NO_BUILD=1 DEB_ARCHES=amd64 DIST=$work/dist2 bash scripts/package.sh >/dev/null
deb=dist/edgemq_${DEB_VERSION}_amd64.deb
cmp -s "$deb" "$work/dist2/${deb#dist/}" || fail "$deb: packaged again, it differs (not reproducible)"
say "1. three packages; packaged again, the amd64 one is the same bytes"

# --- 2. each package's contents ------------------------------------------------------------
cat >"$work/files.want" <<'LIST'
drwxr-xr-x root/root ./
drwxr-xr-x root/root ./etc/
drwxr-xr-x root/root ./etc/edgemq/
-rw-r--r-- root/root ./etc/edgemq/edgemq.toml
drwxr-xr-x root/root ./lib/
drwxr-xr-x root/root ./lib/systemd/
drwxr-xr-x root/root ./lib/systemd/system/
-rw-r--r-- root/root ./lib/systemd/system/edgemq.service
drwxr-xr-x root/root ./usr/
drwxr-xr-x root/root ./usr/bin/
-rwxr-xr-x root/root ./usr/bin/edgemq
drwxr-xr-x root/root ./usr/share/
drwxr-xr-x root/root ./usr/share/doc/
drwxr-xr-x root/root ./usr/share/doc/edgemq/
-rw-r--r-- root/root ./usr/share/doc/edgemq/README.md
LIST
cat >"$work/control.want" <<'LIST'
drwxr-xr-x root/root ./
-rw-r--r-- root/root ./conffiles
-rw-r--r-- root/root ./control
-rwxr-xr-x root/root ./postinst
-rwxr-xr-x root/root ./postrm
-rwxr-xr-x root/root ./prerm
LIST
# The unit's paths are the package's.
grep -qx 'ExecStart=/usr/bin/edgemq serve -config /etc/edgemq/edgemq.toml -data /var/lib/edgemq' configs/edgemq.service ||
	fail "configs/edgemq.service: ExecStart is not /usr/bin/edgemq serve -config /etc/edgemq/edgemq.toml -data /var/lib/edgemq"
grep -qx 'StateDirectory=edgemq' configs/edgemq.service || fail "configs/edgemq.service: StateDirectory is not edgemq (/var/lib/edgemq)"
grep -qx 'datadir=/var/lib/edgemq' scripts/package/postinst || fail "postinst's data dir is not /var/lib/edgemq"

for arch in "${arches[@]}"; do
	deb=dist/edgemq_${DEB_VERSION}_$arch.deb
	x=$work/x-$arch
	mkdir -p "$x"
	got=$(dpkg-deb --field "$deb" Package Version Architecture Depends)
	want=$(printf 'Package: edgemq\nVersion: %s\nArchitecture: %s\nDepends: passwd' "$DEB_VERSION" "$arch")
	[ "$got" = "$want" ] || fail "$deb: control fields:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
	dpkg-deb --contents "$deb" | awk '{print $1, $2, $6}' >"$work/files.got"
	diff -u "$work/files.want" "$work/files.got" || fail "$deb: file list, modes or owners differ (- want, + got)"
	dpkg-deb --ctrl-tarfile "$deb" | tar -tv | awk '{print $1, $2, $6}' | sort -k3 >"$work/control.got"
	diff -u "$work/control.want" "$work/control.got" || fail "$deb: control members differ (- want, + got)"
	dpkg-deb --control "$deb" "$x/DEBIAN"
	[ "$(cat "$x/DEBIAN/conffiles")" = /etc/edgemq/edgemq.toml ] || fail "$deb: conffiles is not /etc/edgemq/edgemq.toml"
	for s in postinst prerm postrm; do
		cmp -s "$x/DEBIAN/$s" "scripts/package/$s" || fail "$deb: $s is not scripts/package/$s"
	done
	dpkg-deb --extract "$deb" "$x"
	cmp -s "$x/lib/systemd/system/edgemq.service" configs/edgemq.service || fail "$deb: the unit is not configs/edgemq.service"
	cmp -s "$x/etc/edgemq/edgemq.toml" configs/edgemq.toml || fail "$deb: the config is not configs/edgemq.toml"

	exe=$x/usr/bin/edgemq
	case $arch in
	amd64) machine='ELF 64-bit LSB executable, x86-64' goarch=amd64 qemu= ;;
	arm64) machine='ELF 64-bit LSB executable, ARM aarch64' goarch=arm64 qemu=qemu-aarch64-static ;;
	armhf) machine='ELF 32-bit LSB executable, ARM, EABI5' goarch=arm qemu=qemu-arm-static ;;
	esac
	info=$(file -b "$exe")
	[[ $info == "$machine"* ]] || fail "$deb: binary is $info, want $machine"
	[[ $info == *"statically linked"* && $info == *stripped* && $info != *"not stripped"* ]] ||
		fail "$deb: binary is not static and stripped: $info"
	meta=$("$GO" version -m "$exe")
	for kv in "GOARCH=$goarch" CGO_ENABLED=0 -trimpath=true; do
		grep -qP "^\tbuild\t\Q$kv\E$" <<<"$meta" || fail "$deb: binary not built with $kv:"$'\n'"$meta"
	done
	if [ "$arch" = armhf ]; then
		grep -qP '^\tbuild\tGOARM=7$' <<<"$meta" || fail "$deb: binary not built for arm v7:"$'\n'"$meta"
	fi
	if [ -z "$qemu" ] || command -v "$qemu" >/dev/null; then
		out=$(${qemu:+$qemu} "$exe" version) || fail "$deb: edgemq version failed"
		[ "$out" = "edgemq $VERSION ($("$GO" env GOVERSION) linux/$goarch)" ] || fail "$deb: edgemq version says $out"
		ran=", runs"
	else
		ran=", not run: no $qemu"
	fi
	say "2. $deb: fields, files, modes, owners, scripts; $machine, static, stripped$ran"
done

# --- a scratch root ------------------------------------------------------------------------
# newroot makes a root with an empty dpkg database and a passwd and group holding root only.
newroot() {
	mkdir -p "$1/etc" "$1/var/lib/dpkg/info" "$1/var/lib/dpkg/updates" "$1/var/log"
	touch "$1/var/lib/dpkg/status" "$1/var/lib/dpkg/available"
	printf 'root:x:0:0:root:/root:/bin/bash\n' >"$1/etc/passwd"
	printf 'root:x:0:\n' >"$1/etc/group"
	printf 'root:*:20000:0:99999:7:::\n' >"$1/etc/shadow"
	printf 'root:*::\n' >"$1/etc/gshadow"
	chmod 0640 "$1/etc/shadow" "$1/etc/gshadow"
	mkdir -p "$1.orig"
	cp -a "$1/etc/." "$1.orig/"
}

# tree lists a root: path, type and mode, numeric owner; size and mtime with -t; the dpkg
# database, dpkg's log and the user databases' backups (passwd- and the like) left out.
tree() {
	local fmt='%P %M %U:%G\n'
	[ "${2:-}" = -t ] && fmt='%P %M %U:%G %s %T@\n'
	(cd "$1" && find . -mindepth 1 \( -path ./var/lib/dpkg -o -path ./var/log -o -name '*-' \) -prune -o -printf "$fmt" | sort)
}

# usercheck checks the user and group edgemq and the data dir of root $1.
usercheck() {
	local r=$1 u g
	u=$(grep '^edgemq:' "$r/etc/passwd") || fail "$2: no user edgemq in the root's /etc/passwd"
	[ "$(grep -c '^edgemq:' "$r/etc/passwd")" = 1 ] || fail "$2: user edgemq twice in /etc/passwd"
	g=$(grep '^edgemq:' "$r/etc/group") || fail "$2: no group edgemq in the root's /etc/group"
	IFS=: read -r _ _ uid gid _ home shell <<<"$u"
	[ "$home" = /var/lib/edgemq ] && [ "$shell" = /usr/sbin/nologin ] && [ "$uid" -lt 1000 ] ||
		fail "$2: user edgemq is $u, want a system user with home /var/lib/edgemq and no login"
	[ "$(cut -d: -f3 <<<"$g")" = "$gid" ] || fail "$2: user edgemq's group is not edgemq: $u, $g"
	[ "$(stat -c '%F %a %u:%g' "$r/var/lib/edgemq")" = "directory 750 $uid:$gid" ] ||
		fail "$2: /var/lib/edgemq is $(stat -c '%F %a %u:%g' "$r/var/lib/edgemq"), want directory 750 $uid:$gid"
}

# verifyunit runs systemd-analyze verify on the edgemq.service installed in root $1, in a copy
# of it given this machine's units (which the unit's After= and WantedBy= name); it fails on
# any complaint about edgemq.service, as scripts/check-unit.sh does.
verifyunit() {
	local v=$work/verify out status=0 d
	rm -rf "$v"
	cp -a "$1" "$v"
	mkdir -p "$v/usr/lib/systemd"
	for d in /usr/lib/systemd/system /lib/systemd/system; do
		if [ -d "$d" ]; then
			cp -r "$d" "$v/usr/lib/systemd/"
			break
		fi
	done
	out=$(systemd-analyze verify --root="$v" edgemq.service 2>&1) || status=$?
	rm -rf "$v"
	if [ "$status" -ne 0 ] || grep -q 'edgemq\.service' <<<"$out"; then
		fail "$2: systemd-analyze verify of the installed unit (exit $status): ${out//$v/}"
	fi
}

# gone fails unless none of the paths exist in root $1.
gone() {
	local r=$1 what=$2 p
	shift 2
	for p; do
		[ ! -e "$r$p" ] && [ ! -L "$r$p" ] || fail "$what: $p is still there"
	done
}

# landed prints what root $1 holds that it did not before the install.
landed() {
	comm -13 "$work/$(basename "$1").tree" <(tree "$1") | sed 's/^/    /'
}

# same fails unless root $1 holds what it did before anything was installed.
same() {
	local r=$1 what=$2 f
	for f in passwd group shadow gshadow; do
		cmp -s "$r/etc/$f" "$r.orig/$f" || fail "$what: /etc/$f differs from before the install"
	done
	diff -u "$work/$(basename "$r").tree" <(tree "$r") || fail "$what: the root differs from before the install (- before, + after)"
}

# --- 3. dpkg into a scratch root -----------------------------------------------------------
r=$work/dpkgroot
newroot "$r"
tree "$r" >"$work/dpkgroot.tree"
deb=dist/edgemq_${DEB_VERSION}_amd64.deb
# --force-depends: the scratch root's database has no passwd package (this machine's does).
dpkg=(dpkg --root="$r" --force-script-chrootless --force-depends)
"${dpkg[@]}" --install "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --install into a scratch root"; }
[ "$(dpkg-query --root="$r" -W -f='${Status} ${Version}' edgemq)" = "install ok installed $DEB_VERSION" ] ||
	fail "dpkg --install: edgemq is $(dpkg-query --root="$r" -W -f='${Status} ${Version}' edgemq)"
for f in "usr/bin/edgemq 755" "lib/systemd/system/edgemq.service 644" "etc/edgemq/edgemq.toml 644"; do
	set -- $f
	[ "$(stat -c '%a %U' "$r/$1")" = "$2 root" ] || fail "dpkg --install: /$1 is $(stat -c '%a %U' "$r/$1" 2>&1), want $2 root"
done
usercheck "$r" "dpkg --install"
verifyunit "$r" "dpkg --install"
out=$("$r/usr/bin/edgemq" --version) && [ "$out" = "edgemq $VERSION ($("$GO" env GOVERSION) linux/amd64)" ] ||
	fail "the installed edgemq --version: $out"
help=$("$r/usr/bin/edgemq" --help 2>&1) || fail "the installed edgemq --help failed: $help"
grep -q '^  serve ' <<<"$help" || fail "the installed edgemq --help lists no serve: $help"
help=$("$r/usr/bin/edgemq" serve --help 2>&1) || fail "the installed edgemq serve --help failed: $help"
grep -q -- '-data' <<<"$help" || fail "the installed edgemq serve --help lists no -data: $help"
tree "$r" -t >"$work/installed.tree"
"${dpkg[@]}" --install "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --install, again"; }
usercheck "$r" "dpkg --install, again"
# install.sh refuses to install over the package.
if bash scripts/install.sh --root "$r" --binary "$work/x-amd64/usr/bin/edgemq" >"$work/install.log" 2>&1; then
	fail "install.sh installed over the edgemq package"
fi
grep -q 'the edgemq package is installed' "$work/install.log" || { cat "$work/install.log"; fail "install.sh over the package: wrong error"; }
say "3. dpkg --install into a scratch root: files, user $(grep '^edgemq:' "$r/etc/passwd"), data dir 0750; the unit verifies; edgemq --version: $out; what landed:"
landed "$r"

echo 'a message' >"$r/var/lib/edgemq/00000000000000000000.log"
echo '# edited' >>"$r/etc/edgemq/edgemq.toml"
NO_BUILD=1 DEB_VERSION=$DEB_VERSION+1 DEB_ARCHES=amd64 DEB_COMPRESS=gzip DIST=$work/dist3 \
	bash scripts/package.sh >/dev/null
"${dpkg[@]}" --install "$work/dist3/edgemq_${DEB_VERSION}+1_amd64.deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --install of a later version"; }
[ "$(dpkg-query --root="$r" -W -f='${Status} ${Version}' edgemq)" = "install ok installed $DEB_VERSION+1" ] ||
	fail "upgrade: edgemq is $(dpkg-query --root="$r" -W -f='${Status} ${Version}' edgemq)"
tail -1 "$r/etc/edgemq/edgemq.toml" | grep -qx '# edited' || fail "upgrade: the edited config was replaced"
[ -f "$r/var/lib/edgemq/00000000000000000000.log" ] || fail "upgrade: the data is gone"
usercheck "$r" "upgrade"
say "3. upgrade to $DEB_VERSION+1: the edited config, the data and the user kept"

"${dpkg[@]}" --remove edgemq >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --remove"; }
[ "$(dpkg-query --root="$r" -W -f='${Status}' edgemq)" = "deinstall ok config-files" ] || fail "dpkg --remove: status $(dpkg-query --root="$r" -W -f='${Status}' edgemq)"
gone "$r" "dpkg --remove" /usr/bin/edgemq /lib/systemd/system/edgemq.service /usr/share/doc/edgemq
tail -1 "$r/etc/edgemq/edgemq.toml" | grep -qx '# edited' || fail "dpkg --remove: the edited config is gone"
[ -f "$r/var/lib/edgemq/00000000000000000000.log" ] || fail "dpkg --remove: the data is gone"
usercheck "$r" "dpkg --remove"
say "3. dpkg --remove: binary, unit, docs gone; config, data, user kept"

"${dpkg[@]}" --purge edgemq >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
[ -z "$(dpkg-query --root="$r" -W -f='${Status}' edgemq 2>/dev/null)" ] || fail "dpkg --purge: edgemq still known to dpkg"
gone "$r" "dpkg --purge" /etc/edgemq /var/lib/edgemq
same "$r" "dpkg --purge"
say "3. dpkg --purge: config, data dir, user and group gone; the root is as before"

# --- 4. install.sh into a scratch root -----------------------------------------------------
r=$work/shroot
newroot "$r"
tree "$r" >"$work/shroot.tree"
install=(bash scripts/install.sh --root "$r")
bin=$work/x-amd64/usr/bin/edgemq
"${install[@]}" --binary "$bin" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install.sh"; }
for f in "usr/local/bin/edgemq 755" "etc/systemd/system/edgemq.service 644" "etc/edgemq/edgemq.toml 644"; do
	set -- $f
	[ "$(stat -c '%a %U' "$r/$1")" = "$2 root" ] || fail "install.sh: /$1 is $(stat -c '%a %U' "$r/$1" 2>&1), want $2 root"
done
cmp -s "$r/usr/local/bin/edgemq" "$bin" || fail "install.sh: /usr/local/bin/edgemq is not the binary given"
cmp -s "$r/etc/edgemq/edgemq.toml" configs/edgemq.toml || fail "install.sh: the config is not configs/edgemq.toml"
diff <(sed 's|^ExecStart=/usr/local/bin/edgemq |ExecStart=/usr/bin/edgemq |' "$r/etc/systemd/system/edgemq.service") configs/edgemq.service ||
	fail "install.sh: the unit is not configs/edgemq.service with ExecStart=/usr/local/bin/edgemq"
grep -q '^ExecStart=/usr/local/bin/edgemq serve ' "$r/etc/systemd/system/edgemq.service" || fail "install.sh: the unit's ExecStart is not /usr/local/bin/edgemq"
usercheck "$r" "install.sh"
verifyunit "$r" "install.sh"
"$r/usr/local/bin/edgemq" --version >/dev/null || fail "install.sh: the installed edgemq does not run"
tree "$r" -t >"$work/sh1.tree"
sha1=$(cd "$r" && find etc usr var/lib/edgemq -type f -exec sha256sum {} + | sort)
"${install[@]}" --binary "$bin" >"$work/install2.log" 2>&1 || { cat "$work/install2.log"; fail "install.sh, again"; }
diff -u "$work/sh1.tree" <(tree "$r" -t) || fail "install.sh, again: the root changed (- first run, + second)"
[ "$sha1" = "$(cd "$r" && find etc usr var/lib/edgemq -type f -exec sha256sum {} + | sort)" ] || fail "install.sh, again: a file's bytes changed"
grep -q '^installed' "$work/install2.log" && fail "install.sh, again: installed something: $(cat "$work/install2.log")"
say "4. install.sh --root: binary, unit (ExecStart=/usr/local/bin/edgemq; it verifies), config, user, data dir; a second run changes nothing; what landed:"
landed "$r"

# A new binary (here: the old one with a byte appended) replaces the old one, and nothing else.
cp "$bin" "$work/edgemq.new"
printf '\n' >>"$work/edgemq.new"
"${install[@]}" --binary "$work/edgemq.new" >"$work/install3.log" 2>&1 || { cat "$work/install3.log"; fail "install.sh, a new binary"; }
[ "$(grep -c '^installed' "$work/install3.log")" = 1 ] && grep -qx 'installed  /usr/local/bin/edgemq' "$work/install3.log" ||
	fail "install.sh, a new binary: want only the binary installed, got: $(cat "$work/install3.log")"
cmp -s "$r/usr/local/bin/edgemq" "$work/edgemq.new" || fail "install.sh, a new binary: /usr/local/bin/edgemq is not it"
usercheck "$r" "install.sh, a new binary"
say "4. install.sh --binary with a new binary: it replaces the old one, nothing else"

mkdir -p "$r/etc/systemd/system/multi-user.target.wants"
ln -s /etc/systemd/system/edgemq.service "$r/etc/systemd/system/multi-user.target.wants/edgemq.service"
echo 'a message' >"$r/var/lib/edgemq/00000000000000000000.log"
"${install[@]}" --uninstall >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install.sh --uninstall"; }
gone "$r" "install.sh --uninstall" /usr/local/bin/edgemq /etc/systemd/system/edgemq.service \
	/etc/systemd/system/multi-user.target.wants/edgemq.service
cmp -s "$r/etc/edgemq/edgemq.toml" configs/edgemq.toml || fail "install.sh --uninstall: the config is gone"
[ -f "$r/var/lib/edgemq/00000000000000000000.log" ] || fail "install.sh --uninstall: the data is gone"
usercheck "$r" "install.sh --uninstall"
"${install[@]}" --uninstall >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install.sh --uninstall, again"; }
say "4. install.sh --uninstall: binary, unit, enablement gone; config, data, user kept; twice is fine"
"${install[@]}" --purge >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install.sh --purge"; }
gone "$r" "install.sh --purge" /etc/edgemq /var/lib/edgemq
rmdir "$r/etc/systemd/system/multi-user.target.wants" "$r/etc/systemd/system" "$r/etc/systemd" \
	"$r/usr/local/bin" "$r/usr/local" "$r/usr" 2>/dev/null || true # made by this check and by install -D
same "$r" "install.sh --purge"
say "4. install.sh --purge: config, data dir, user and group gone; the root is as before"

# --- 5. this machine -----------------------------------------------------------------------
host >"$work/host.after"
diff -u "$work/host.before" "$work/host.after" || fail "this machine's users, dpkg database or edgemq paths changed"
new=$(find /etc /usr /var/lib /var/log -xdev -newer "$work/stamp" -iname '*edgemq*' 2>/dev/null || true)
[ -z "$new" ] || fail "this machine got edgemq files: $new"
say "5. this machine's /etc/passwd, group, shadow, dpkg database and edgemq paths are untouched"
say "ok"
