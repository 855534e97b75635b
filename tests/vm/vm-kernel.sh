#!/bin/sh
# Makes sure the guest kernel, a trimmed modules tree and the initramfs used
# by vm-run exist in the cache directory, building them only when missing.
#
# Usage: tests/vm/vm-kernel.sh [--suite SUITE]
#
# SUITE names the Debian release whose kernel the guest boots: bookworm
# (Debian 12, Linux 6.1: the default) or trixie (Debian 13, Linux 6.12), or
# any other suite of the archive this machine's apt sources use. The machine's
# own suite comes through its apt setup; another suite's package lists are
# kept apart in the cache (apt-SUITE/), so the machine's apt is not touched.
#
# On success prints shell assignments on stdout (eval-able):
#   DEVNS_VM_KVER     kernel release, e.g. 6.1.0-57-amd64
#   DEVNS_VM_SUITE    the Debian suite it comes from, e.g. bookworm
#   DEVNS_VM_KERNEL   path of the kernel: the uncompressed ELF (vmlinux) when it
#                     could be extracted, else the bzImage
#   DEVNS_VM_INITRD   path of the initramfs (cpio.gz)
#   DEVNS_VM_MODULES  root of the modules tree (contains lib/modules/$KVER)
#
# Environment:
#   DEVNS_VM_CACHE    cache directory (default /var/cache/devns-vm)
#   DEVNS_VM_SUITE    the suite when --suite is not given (default bookworm)
#
# Cache layout: $DEVNS_VM_CACHE/<kver>-<stamp>/{vmlinux,modules/,initramfs.cpio.gz}
# where <stamp> hashes this script, the guest init and the busybox version, so
# editing either yields a fresh entry. A fresh entry links the kernel and the
# modules of an older entry for the same release when that one holds every
# wanted module, and downloads the kernel package only otherwise. Entries
# unused for PRUNE_DAYS days are removed. Removing the cache directory is
# always safe.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${DEVNS_VM_CACHE:-/var/cache/devns-vm}
SUITE=${DEVNS_VM_SUITE:-bookworm}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# Options that point apt at the suite's own lists (empty for the machine's own suite).
APT_OPTS=""
GUEST_INIT=$HERE/guest-init
BUSYBOX=/bin/busybox
META_PKG=linux-image-amd64
PRUNE_DAYS=7

# Modules the guest needs; their dependencies are resolved from the package.
MODULES="virtio_pci virtio_console 9pnet_virtio 9p overlay
fuse cuse evdev uinput bochs vfb"

die() {
	echo "vm-kernel: $*" >&2
	exit 1
}

log() {
	echo "vm-kernel: $*" >&2
}

need_tools() {
	for tool in apt-cache apt-get dpkg dpkg-query depmod modprobe cpio gzip xz flock sha256sum; do
		command -v "$tool" >/dev/null 2>&1 || die "missing host tool '$tool' (run scripts/install-deps.sh)"
	done
	[ -x "$BUSYBOX" ] || die "missing $BUSYBOX (install busybox-static)"
	[ -r "$GUEST_INIT" ] || die "missing guest init script $GUEST_INIT"
}

# Prints the release codename of this machine's Debian.
host_suite() {
	sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"'
}

# Prints the URI of the archive that this machine's apt sources fetch its own
# suite's main component from: one-line sources.list entries first, then
# deb822 .sources stanzas.
archive_uri() {
	host=$1
	for list in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$list" ] || continue
		awk -v suite="$host" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}' "$list"
	done | head -n 1 | grep . && return 0
	for list in /etc/apt/sources.list.d/*.sources; do
		[ -r "$list" ] || continue
		awk -v suite="$host" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uris != "") {
					split(uris, u, " "); print u[1]; found = 1; exit
				}
				types = suites = uris = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
			/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
			/^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
			END { if (!found) flush() }' "$list"
	done | head -n 1 | grep .
}

# Sets APT_OPTS for a suite other than the machine's own: a sources list of
# one line, the archive this machine already uses, and lists of its own.
setup_suite() {
	host=$(host_suite)
	[ "$SUITE" = "$host" ] && return 0
	[ -r "$KEYRING" ] || die "missing $KEYRING (install debian-archive-keyring)"
	uri=$(archive_uri "$host") || die "cannot find the archive behind this machine's apt sources for $host"
	dir=$CACHE/apt-$SUITE
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	printf 'deb [signed-by=%s] %s %s main\n' "$KEYRING" "$uri" "$SUITE" >"$dir/sources.list.new"
	mv "$dir/sources.list.new" "$dir/sources.list"
	APT_OPTS="-o Dir::Etc::sourcelist=$dir/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$dir/lists -o Dir::Cache=$dir/cache"
}

# apt-get and apt-cache on the chosen suite's lists.
suite_apt_get() {
	# shellcheck disable=SC2086
	apt-get $APT_OPTS "$@"
}

suite_apt_cache() {
	# shellcheck disable=SC2086
	apt-cache $APT_OPTS "$@"
}

# Prints the versioned kernel package that the meta package depends on.
kernel_package() {
	suite_apt_cache depends "$META_PKG" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1
}

stamp() {
	{
		cat "$HERE/vm-kernel.sh" "$GUEST_INIT"
		dpkg-query -W -f='${Version}\n' busybox-static 2>/dev/null || true
	} | sha256sum | cut -c1-12
}

# Prints an existing cache entry of the suite for the stamp when apt cannot
# name the kernel.
cached_entry() {
	for entry in $(ls -1d "$CACHE"/*-"$1" 2>/dev/null | sort -V); do
		[ "$(cat "$entry/suite" 2>/dev/null)" = "$SUITE" ] && echo "$entry"
	done | tail -n 1
}

# Entries are marked used by touching their kver file.
prune_unused() {
	find "$CACHE" -mindepth 2 -maxdepth 2 -name kver -mtime +$PRUNE_DAYS |
		while IFS= read -r stale; do
			rm -rf "$(dirname "$stale")"
		done
}

print_entry() {
	entry=$1
	touch "$entry/kver"
	kver=$(cat "$entry/kver")
	printf "DEVNS_VM_KVER='%s'\n" "$kver"
	printf "DEVNS_VM_SUITE='%s'\n" "$SUITE"
	printf "DEVNS_VM_KERNEL='%s'\n" "$entry/$(cat "$entry/kernel")"
	printf "DEVNS_VM_INITRD='%s'\n" "$entry/initramfs.cpio.gz"
	printf "DEVNS_VM_MODULES='%s'\n" "$entry/modules"
}

download_kernel() {
	pkg=$1
	dir=$2
	if (cd "$dir" && suite_apt_get download -q -o APT::Sandbox::User=root "$pkg") >"$dir/apt.log" 2>&1; then
		return 0
	fi
	log "download of $pkg failed, running apt-get update"
	suite_apt_get update -q >>"$dir/apt.log" 2>&1 || true
	if ! (cd "$dir" && suite_apt_get download -q -o APT::Sandbox::User=root "$pkg") >>"$dir/apt.log" 2>&1; then
		die "kernel package download failed: $(tail -n 3 "$dir/apt.log" | tr '\n' ' ')"
	fi
}

# Copies the wanted modules and everything they depend on from the unpacked
# package in $1 into the modules tree $2, then runs depmod on the result.
select_modules() {
	src=$1
	dst=$2
	kver=$3
	depmod -b "$src" "$kver" || die "depmod failed on the unpacked kernel package"
	: >"$dst.list"
	for mod in $MODULES; do
		modprobe -d "$src" -S "$kver" --show-depends "$mod" >"$dst.deps" 2>&1 ||
			die "module '$mod' not found in $kver: $(cat "$dst.deps")"
		sed -n 's/^insmod \([^ ]*\).*/\1/p' "$dst.deps" >>"$dst.list"
	done
	sort -u "$dst.list" >"$dst.sorted"
	while IFS= read -r path; do
		rel=${path#"$src"/}
		mkdir -p "$dst/$(dirname "$rel")"
		# The initramfs's busybox loads plain modules only: compressed ones
		# (Debian 13 ships .ko.xz) are unpacked here.
		case $rel in
		*.ko.xz) xz -dc "$path" >"$dst/${rel%.xz}" || die "cannot unpack $rel" ;;
		*.ko.zst) zstd -qdc "$path" >"$dst/${rel%.zst}" || die "cannot unpack $rel" ;;
		*.ko.gz) gzip -dc "$path" >"$dst/${rel%.gz}" || die "cannot unpack $rel" ;;
		*) cp "$path" "$dst/$rel" ;;
		esac
	done <"$dst.sorted"
	rm -f "$dst.deps" "$dst.list" "$dst.sorted"
	for f in modules.builtin modules.builtin.modinfo modules.order; do
		cp "$src/lib/modules/$kver/$f" "$dst/lib/modules/$kver/$f"
	done
	depmod -b "$dst" "$kver" || die "depmod failed on the trimmed modules tree"
}

# Unpacks the compressed payload of the bzImage $1 (XZ in Debian 12, zstd in
# Debian 13) into the ELF $2. QEMU boots such a kernel through its PVH entry
# point, which skips the in-guest decompression (about 5 s under TCG). Fails
# when the payload is neither, or not an ELF.
extract_vmlinux() {
	offset=$(LC_ALL=C grep -abo -m 1 -P '\xfd7zXZ\x00' "$1" | head -n 1 | cut -d: -f1)
	if [ -n "$offset" ]; then
		tail -c +$((offset + 1)) "$1" | xz -dc --single-stream >"$2" 2>/dev/null
	else
		offset=$(LC_ALL=C grep -abo -m 1 -P '\x28\xb5\x2f\xfd' "$1" | head -n 1 | cut -d: -f1)
		[ -n "$offset" ] && command -v zstd >/dev/null 2>&1 || return 1
		# zstd stops at the end of its frame and warns about the bytes after it.
		tail -c +$((offset + 1)) "$1" | zstd -qdc >"$2" 2>/dev/null
	fi
	[ "$(head -c 4 "$2" | tail -c 3)" = ELF ]
}

build_initramfs() {
	modules=$1
	out=$2
	root=$(mktemp -d "$CACHE/.initramfs.XXXXXX")
	mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/lib"
	cp "$BUSYBOX" "$root/bin/busybox"
	cp "$GUEST_INIT" "$root/init"
	chmod 0755 "$root/init"
	cp -a "$modules/lib/modules" "$root/lib/modules"
	(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
		gzip -6 >"$out" || die "packing the initramfs failed"
	rm -rf "$root"
}

# True when the modules tree $1 resolves every wanted module.
has_modules() {
	for mod in $MODULES; do
		modprobe -d "$1" -S "$2" --show-depends "$mod" >/dev/null 2>&1 || return 1
	done
}

# Links the kernel and modules tree of another entry for the same release into
# $2, so that a changed guest init only needs a new initramfs.
reuse_kernel() {
	kver=$1
	dst=$2
	for other in "$CACHE/$kver"-*; do
		[ -f "$other/kver" ] && [ -f "$other/kernel" ] || continue
		has_modules "$other/modules" "$kver" || continue
		image=$(cat "$other/kernel")
		mkdir -p "$dst"
		cp -al "$other/$image" "$other/modules" "$dst/" 2>/dev/null ||
			cp -a "$other/$image" "$other/modules" "$dst/" || return 1
		echo "$image" >"$dst/kernel"
		log "reusing the kernel and modules of $other"
		return 0
	done
	return 1
}

build_entry() {
	pkg=$1
	entry=$2
	kver=${pkg#linux-image-}
	work=$(mktemp -d "$CACHE/.build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	if reuse_kernel "$kver" "$work/entry"; then
		finish_entry "$work" "$kver" "$entry"
		return 0
	fi
	rm -rf "$work/entry"
	log "building guest kernel cache for $kver in $entry (one time)"
	download_kernel "$pkg" "$work"
	dpkg -x "$work"/"$pkg"_*.deb "$work/root" || die "unpacking $pkg failed"
	# Debian 13 ships its modules below /usr (merged /usr).
	if [ ! -d "$work/root/lib/modules/$kver" ] && [ -d "$work/root/usr/lib/modules/$kver" ]; then
		mkdir -p "$work/root/lib"
		mv "$work/root/usr/lib/modules" "$work/root/lib/modules"
	fi
	[ -d "$work/root/lib/modules/$kver" ] || die "$pkg has no modules for $kver"
	mkdir -p "$work/entry/modules"
	if extract_vmlinux "$work/root/boot/vmlinuz-$kver" "$work/entry/vmlinux"; then
		echo vmlinux >"$work/entry/kernel"
	else
		log "cannot extract an uncompressed kernel, booting the bzImage (slower)"
		rm -f "$work/entry/vmlinux"
		cp "$work/root/boot/vmlinuz-$kver" "$work/entry/vmlinuz"
		echo vmlinuz >"$work/entry/kernel"
	fi
	select_modules "$work/root" "$work/entry/modules" "$kver"
	finish_entry "$work" "$kver" "$entry"
}

finish_entry() {
	work=$1
	build_initramfs "$work/entry/modules" "$work/entry/initramfs.cpio.gz"
	echo "$2" >"$work/entry/kver"
	echo "$SUITE" >"$work/entry/suite"
	mv "$work/entry" "$3"
	rm -rf "$work"
	trap - EXIT
}

main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--suite) [ $# -ge 2 ] || die "--suite needs a value"; SUITE=$2; shift 2 ;;
		--suite=*) SUITE=${1#--suite=}; shift ;;
		*) die "unknown argument '$1' (usage: vm-kernel.sh [--suite SUITE])" ;;
		esac
	done
	case $SUITE in
	'' | *[!a-z0-9-]*) die "bad suite name '$SUITE'" ;;
	esac
	need_tools
	mkdir -p "$CACHE" || die "cannot create cache directory $CACHE"
	exec 9>"$CACHE/.lock"
	flock 9 || die "cannot lock $CACHE/.lock"
	rm -rf "$CACHE"/.build.* "$CACHE"/.initramfs.*
	setup_suite

	st=$(stamp)
	pkg=$(kernel_package)
	if [ -z "$pkg" ]; then
		entry=$(cached_entry "$st")
		if [ -n "$entry" ]; then
			print_entry "$entry"
			return 0
		fi
		log "apt does not know $META_PKG in $SUITE, running apt-get update"
		suite_apt_get update -q >/dev/null 2>&1 || die "apt-get update failed for $SUITE"
		pkg=$(kernel_package)
		[ -n "$pkg" ] || die "cannot find the kernel package behind $META_PKG"
	fi

	entry=$CACHE/${pkg#linux-image-}-$st
	[ -f "$entry/kver" ] || build_entry "$pkg" "$entry"
	print_entry "$entry"
	prune_unused
}

main "$@"
