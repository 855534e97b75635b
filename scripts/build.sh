#!/bin/sh
# Installs what is missing and builds devns into ./build (or $DEVNS_BUILD).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${DEVNS_BUILD:-$top/build}

"$top/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$top" -Dwerror=true
fi
ninja -C "$build"
