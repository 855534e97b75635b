#!/bin/sh
# Runs a container as the "personal" persona with podman: the persona's
# nodes are passed in as devices, then the container is bound to the
# persona so that devnsd lets it open them.
set -eu
image=${1:-debian:bookworm}

# /dev/devns/personal/event1 appears as /dev/input/event1 inside.
cid=$(podman run -d --name personal \
	--device /dev/devns/personal/event1:/dev/input/event1:rw \
	"$image" sleep infinity)
devnsctl attach personal --pid "$(podman inspect -f '{{.State.Pid}}' "$cid")"
