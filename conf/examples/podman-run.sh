#!/bin/sh
# Runs a podman container as a devns persona:
#
#   podman-run.sh PERSONA IMAGE [PODMAN-RUN-OPTION...]
#   e.g. podman-run.sh personal localhost/personal --network none
#
# The container may use the persona's nodes (one device rule per node, its
# own minors only: with a rule for the whole major, only devnsd's own check
# would keep it from other personas' nodes), is started, and is then bound
# to the persona: devnsd makes /dev/input/eventN and /dev/fb0 in it (with
# udev data for libinput) and from then on lets only this container open
# them. Start what uses them after that, with podman exec: the nodes do not
# exist before.
set -eu
usage="usage: podman-run.sh PERSONA IMAGE [PODMAN-RUN-OPTION...]"
persona=${1:?$usage}
image=${2:?$usage}
shift 2
dev=${DEVNS_DEV_DIR:-/dev/devns}

case $persona in
'' | -* | *[!A-Za-z0-9_-]*)
	echo "podman-run.sh: '$persona' is not a persona name" >&2
	exit 1
	;;
esac

found=
for node in "$dev/$persona"/*; do
	[ -c "$node" ] || continue
	set -- "$@" --device-cgroup-rule \
		"$(printf 'c %d:%d rw' "0x$(stat -c %t "$node")" "0x$(stat -c %T "$node")")"
	found=1
done
if [ -z "$found" ]; then
	echo "podman-run.sh: persona $persona has no nodes in $dev/$persona (is devnsd running?)" >&2
	exit 1
fi

cid=$(podman run -d --name "$persona" "$@" "$image" sleep infinity)
devnsctl attach "$persona" --pid "$(podman inspect -f '{{.State.Pid}}' "$cid")"
