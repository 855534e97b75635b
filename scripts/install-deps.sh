#!/bin/sh
# Installs the Debian packages devns needs to build, test (clang for the
# sanitizer build and the fuzz targets) and run its VM rig.
# Safe to run repeatedly: it installs only what is missing.
set -eu

PKGS="build-essential meson ninja-build pkg-config scdoc pyflakes3
clang libclang-rt-14-dev
libfuse3-dev fuse3 libevdev-dev libsystemd-dev libinih-dev libcmocka-dev
libdrm-dev libpng-dev libxxhash-dev libdbus-1-dev libmount-dev libseccomp-dev
dbus-daemon dbus-bin systemd systemd-container
qemu-system-x86 busybox-static kmod cpio xz-utils zstd debian-archive-keyring uidmap gdb
evtest joystick python3-evdev evemu-tools interception-tools fbset libinput-tools
lxc podman crun
drm-info libdrm-tests
qtbase5-examples fonts-dejavu-core xkb-data
xserver-xorg-core xserver-xorg-video-fbdev xserver-xorg-input-libinput x11-xserver-utils xinput
mpv weston cage xwayland"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -q --no-install-recommends $missing
fi
