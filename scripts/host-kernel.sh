#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build an installable SPIN kernel for a real machine from build/linux:
# the running distribution's config with configs/host.config merged in,
# packaged by the kernel's own bindeb-pkg (or binrpm-pkg).
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [--config FILE] [--config-only] [--rpm] [--obj DIR]

Configures build/linux (linux-source-6.12 with the SPIN series, made by
scripts/tree.sh) for this machine and builds kernel packages of it:

 1. Base config: FILE, else /boot/config-\$(uname -r), else
    /proc/config.gz: the configuration of the kernel running now.
 2. configs/host.config is merged onto it with the kernel's
    scripts/kconfig/merge_config.sh into the object directory.
 3. Certificate and key files the base config names but this machine
    does not have (Debian's config names certificates of its own build
    machines) are dropped: CONFIG_SYSTEM_TRUSTED_KEYS and
    CONFIG_SYSTEM_REVOCATION_KEYS are set to "" with scripts/config
    --set-str, as Documentation/admin-guide/quickly-build-trimmed-linux.rst
    does for Debian, and CONFIG_MODULE_SIG_KEY to certs/signing_key.pem,
    a key the build then generates.  Each change is printed.
 4. 'make olddefconfig', then every CONFIG_ line of host.config must be
    in the result as written (=m reads =y if the base has no module
    support), and every option named by a '# require CONFIG_...' line
    must be y or m (one the base has off is set to m first).  Otherwise
    it fails, naming them.
 5. Unless --config-only: 'make bindeb-pkg' (Debian, Ubuntu), or with
    --rpm 'make binrpm-pkg', with -j\$(nproc) and LOCALVERSION=-spin,
    then it prints the packages and how to install them.

  --config FILE   base config (default /boot/config-\$(uname -r), or
                  /proc/config.gz)
  --config-only   stop after step 4: write and check DIR/.config only
  --rpm           build RPM packages instead of Debian packages
  --obj DIR       object directory (default build/obj-host)

  SPIN_OBJ=dir    object directory, as --obj
  SPIN_SRC=dir    source tree (default build/linux)

Debian packages are written next to the object directory (build/ by
default), RPM packages under DIR/rpmbuild/RPMS/.  Run scripts/tree.sh
(make tree) first.
USAGE
}

die() { echo "host-kernel: $*" >&2; exit 1; }

top=$(cd "$(dirname "$0")/.." && pwd)
src=${SPIN_SRC:-$top/build/linux}
obj=${SPIN_OBJ:-$top/build/obj-host}
frag=$top/configs/host.config
base=""
config_only=0
rpm=0

while [ $# -gt 0 ]; do
	case "$1" in
	-h|--help) usage; exit 0 ;;
	--config)
		[ $# -ge 2 ] || { usage >&2; exit 2; }
		base=$2; shift ;;
	--config-only) config_only=1 ;;
	--rpm) rpm=1 ;;
	--obj)
		[ $# -ge 2 ] || { usage >&2; exit 2; }
		obj=$2; shift ;;
	*) usage >&2; exit 2 ;;
	esac
	shift
done

[ -f "$src/Makefile" ] || die "$src is not a kernel tree (run make tree)"
mkdir -p "$obj"
obj=$(cd "$obj" && pwd)

# 1. The base config, copied into the object directory.
if [ -n "$base" ]; then
	[ -r "$base" ] || die "cannot read $base"
	case "$base" in
	*.gz) zcat -- "$base" >"$obj/base.config" ;;
	*) cp -- "$base" "$obj/base.config" ;;
	esac
elif [ -r "/boot/config-$(uname -r)" ]; then
	base=/boot/config-$(uname -r)
	cp -- "$base" "$obj/base.config"
elif [ -r /proc/config.gz ]; then
	base=/proc/config.gz
	zcat "$base" >"$obj/base.config"
else
	die "no /boot/config-$(uname -r) or /proc/config.gz: name one with --config"
fi
grep -q '^CONFIG_' "$obj/base.config" || die "$base holds no CONFIG_ lines"
echo "host-kernel: base config $base"

# 2. Merge.  merge_config.sh makes its temporary files in the current
# directory: the object directory, not the source tree.
(cd "$obj" && "$src/scripts/kconfig/merge_config.sh" -m -O "$obj" \
	"$obj/base.config" "$frag" >"$obj/merge_config.log")

# 3. Files the base config names that are not here.  A relative name is
# looked up in the source tree and the object directory, as kbuild does.
cfg_str() {
	sed -n "s/^CONFIG_$1=\"\(.*\)\"$/\1/p" "$obj/.config"
}
have_file() {
	case "$1" in
	/*) [ -e "$1" ] ;;
	*) [ -e "$src/$1" ] || [ -e "$obj/$1" ] ;;
	esac
}
setstr() {
	"$src/scripts/config" --file "$obj/.config" --set-str "$1" "$2"
	echo "host-kernel: CONFIG_$1=\"$3\" names a file this machine" \
		"does not have: set to \"$2\""
}
for k in SYSTEM_TRUSTED_KEYS SYSTEM_REVOCATION_KEYS; do
	v=$(cfg_str "$k")
	[ -z "$v" ] || have_file "$v" || setstr "$k" "" "$v"
done
v=$(cfg_str MODULE_SIG_KEY)
case "$v" in
""|certs/signing_key.pem|pkcs11:*) ;;
*) have_file "$v" || setstr MODULE_SIG_KEY certs/signing_key.pem "$v" ;;
esac

# An option host.config requires without choosing y or m: a module if
# the base has it off, else as the base has it.
for name in $(sed -n 's/^# require \(CONFIG_[A-Za-z0-9_]*\).*/\1/p' "$frag"); do
	grep -qxE -- "$name=(y|m)" "$obj/.config" && continue
	"$src/scripts/config" --file "$obj/.config" --module "${name#CONFIG_}"
	echo "host-kernel: $name is off in the base config: turned on (m)"
done

# 4. Resolve, then check that host.config survived.
make -s -C "$src" O="$obj" olddefconfig

# Without module support a module is built in: =m then reads =y.
modules=y
grep -qx 'CONFIG_MODULES=y' "$obj/.config" || modules=n
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) want="# ${line%=n} is not set" ;;
	CONFIG_*=m) want=$line; [ $modules = y ] || want=${line%=m}=y ;;
	CONFIG_*=*) want=$line ;;
	"# CONFIG_"*" is not set") want=$line ;;
	"# require CONFIG_"*)
		name=${line#\# require }
		name=${name%%[ =]*}
		if ! grep -qxE -- "$name=(y|m)" "$obj/.config"; then
			have=$(grep -E "^$name=|^# $name is not set" "$obj/.config" || echo "absent")
			echo "config: host.config: requires $name (y or m), got '$have'" >&2
			bad=1
		fi
		continue ;;
	*) continue ;;
	esac
	if ! grep -qxF -- "$want" "$obj/.config"; then
		name=${want#\# }; name=${name%%[= ]*}
		have=$(grep -E "^$name=|^# $name is not set" "$obj/.config" || echo "absent")
		echo "config: host.config: asked for '$line', got '$have'" >&2
		bad=1
	fi
done <"$frag"
[ $bad = 0 ] || die "requested options did not survive olddefconfig"
echo "host-kernel: $obj/.config ok (base $base + host.config)"
[ $config_only = 0 ] || exit 0

# 5. Build the packages.
if [ $rpm = 1 ]; then
	target=binrpm-pkg tool=rpmbuild
else
	target=bindeb-pkg tool=dpkg-buildpackage
fi
command -v $tool >/dev/null || die "$target needs $tool"
stamp=$obj/.host-kernel-start
touch "$stamp"
make -C "$src" O="$obj" -j"$(nproc)" LOCALVERSION=-spin "$target"
krel=$(cat "$obj/include/config/kernel.release")

echo
echo "host-kernel: kernel $krel, packages:"
if [ $rpm = 1 ]; then
	find "$obj/rpmbuild/RPMS" -name '*.rpm' -newer "$stamp" | sort
	v=$(echo "$krel" | tr - _)
	cat <<INSTALL

Install the kernel and kernel-devel (DKMS builds NVIDIA's or AMD's
modules for it against kernel-devel; leave the distribution's
kernel-headers alone), then reboot into $krel:
  sudo rpm -ivh $obj/rpmbuild/RPMS/*/kernel-$v-*.rpm \\
                $obj/rpmbuild/RPMS/*/kernel-devel-$v-*.rpm
INSTALL
else
	pkgdir=$(dirname "$obj")
	find "$pkgdir" -maxdepth 1 -name '*.deb' -newer "$stamp" | sort
	cat <<INSTALL

Install the image and the headers (DKMS builds NVIDIA's or AMD's
modules for it against the headers), then reboot into $krel:
  sudo dpkg -i $pkgdir/linux-image-${krel}_*.deb \\
               $pkgdir/linux-headers-${krel}_*.deb
INSTALL
fi
