/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

struct manager;
struct persona;

/*
 * Makes persona p's nodes inside the container of process pid (its mount
 * namespace and root): at the names a normal system uses (/dev/input/eventN,
 * /dev/fb0) or where the persona's DeviceMap= puts them, with the device
 * numbers of devnsd's nodes (and at their /dev/devns/PERSONA/NAME too, the
 * name their sysfs entry gives udev clients), mode 0660, owned by the owner of the
 * container's /dev and its "input" or "video" group where it has one; plus
 * udev data for input nodes (/run/udev/data/cMAJ:MIN, /run/udev/control).
 * Directories nodes name as shares (the framebuffer's socket) are bound at
 * the same path inside. A container that shares devnsd's /dev gets no nodes
 * (it sees /dev/devns/ already), and one that shares its /run no udev data
 * and no binds.
 * Returns the number of nodes made, or a negative errno.
 */
int populate_container(struct manager *m, struct persona *p, pid_t pid);
