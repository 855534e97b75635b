/* SPDX-License-Identifier: MIT */
/* What populate binds where, decided in devnsd before the helper process starts. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container-fs.h"
#include "devns-endpoint.h"
#include "populate/mountinfo.h"
#include "populate/populate-internal.h"

static const char *mapped_path(const struct persona *p, const char *node) {
	for (size_t i = 0; i < p->n_maps; i++)
		if (streq(p->maps[i].node, node))
			return p->maps[i].path;
	return NULL;
}

/* Host directory path, bound at where in the container. */
static void plan_share_at(struct plan *plan, const char *path, const char *where) {
	struct share *sh;

	for (size_t i = 0; i < plan->n_shares; i++)
		if (streq(plan->shares[i].path, path) || streq(plan->shares[i].where, where))
			return;
	if (plan->n_shares == POPULATE_SHARES || path[0] != '/' || where[0] != '/' || strlen(path) >= sizeof(sh->path) ||
	    strlen(where) >= sizeof(sh->where))
		return;
	sh = &plan->shares[plan->n_shares];
	if (lstat(path, &sh->st) < 0 || !S_ISDIR(sh->st.st_mode))
		return;
	snprintf(sh->path, sizeof(sh->path), "%s", path);
	snprintf(sh->where, sizeof(sh->where), "%s", where);
	plan->n_shares++;
}

static void plan_share(struct plan *plan, const char *path) {
	plan_share_at(plan, path, path);
}

void populate_plan_endpoint(struct plan *plan) {
	if (plan->persona->endpoint_dir[0])
		plan_share_at(plan, plan->persona->endpoint_dir, DEVNS_ENDPOINT_DIR);
}

static struct entry *plan_entry(struct plan *plan, const struct entry *e, const char *where) {
	struct entry *copy;

	if (plan->n == POPULATE_MAX)
		return NULL;
	copy = &plan->entries[plan->n++];
	*copy = *e;
	snprintf(copy->path, sizeof(copy->path), "%s", where + strspn(where, "/"));
	return copy;
}

/*
 * A kernel input device's node, or a card, at /dev/NAME in the container:
 * its sysfs entry is to lead there. A card without udev properties of its
 * own gets those udevd gives its kernel card (populate/udev.h).
 */
static void plan_udev_node(struct plan *plan, struct entry *e, const struct node_desc *nd) {
	struct udev_node *n = &plan->nodes[plan->n_nodes];
	bool drm = streq(nd->kind, "drm");

	if (!e || (!nd->udev && !drm) || !nd->source || strncmp(e->path, "dev/", 4) != 0)
		return;
	if (udev_node_describe(nd->kind, nd->source, e->rdev, e->path + 4, nd->udev, n) < 0)
		return;
	if (drm) {
		e->record = true;
		_Static_assert(sizeof(e->udev) == sizeof(n->properties), "a card's properties fit its record");
		memcpy(e->udev, n->properties, sizeof(e->udev));
	}
	e->node = (int)plan->n_nodes++;
}

/* Where a node of kind goes when no DeviceMap= says: input in /dev/input, a card in /dev/dri, the rest in /dev. */
static void default_path(const char *kind, const char *name, char *buf, size_t size) {
	const char *dir = streq(kind, "input") ? "/dev/input/" : streq(kind, "drm") ? "/dev/dri/" : "/dev/";

	snprintf(buf, size, "%s%s", dir, name);
}

/*
 * Only devnsd's character devices below /dev are bound: never a path in one
 * of devnsd's own FUSE mounts (the LED views), which this process serves
 * and must not wait on.
 */
void populate_plan_node_at(struct plan *plan, const struct node_desc *nd, dev_t rdev) {
	const char *name = strrchr(nd->path, '/') + 1;
	const char *where = mapped_path(plan->persona, name);
	struct entry e = { .node = -1 };
	char path[PATH_MAX];

	snprintf(e.host, sizeof(e.host), "%s", nd->path);
	e.rdev = rdev;
	snprintf(e.kind, sizeof(e.kind), "%s", nd->kind ? nd->kind : "");
	e.record = nd->udev && nd->udev[0];
	snprintf(e.udev, sizeof(e.udev), "%s", nd->udev ? nd->udev : "");
	if (!where) {
		default_path(e.kind, name, path, sizeof(path));
		where = path;
	}
	plan_udev_node(plan, plan_entry(plan, &e, where), nd);
	/* The node's sysfs entry names it /dev/devns/PERSONA/NAME, and udev clients open that name. */
	if (!streq(where, nd->path)) {
		e.record = false;
		e.udev[0] = '\0';
		plan_entry(plan, &e, nd->path);
	}
}

void populate_plan_node(void *userdata, const struct node_desc *nd) {
	struct plan *plan = userdata;
	struct stat st;

	if (nd->share)
		plan_share(plan, nd->share);
	if (strncmp(nd->path, "/dev/", 5) != 0 || lstat(nd->path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	populate_plan_node_at(plan, nd, st.st_rdev);
}

/* A container in devnsd's own user namespace: every host gid is one of its gids. */
static bool shares_host_ids(const struct idmap *gids) {
	return gids->n == 1 && gids->ranges[0].inside == 0 && gids->ranges[0].outside == 0 &&
	       gids->ranges[0].count == UINT32_MAX;
}

/*
 * The host's gids of the configured group names, for a container that
 * shares the host's ids: there, its /etc/group, which its root writes,
 * could name any host group.
 */
static void host_groups(struct plan *plan) {
	_cleanup_(closep) int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_(freep) char *text = NULL;
	uint32_t gid;
	size_t len = 0;

	plan->result.host_groups = true;
	plan->host_input_gid = plan->host_video_gid = -1;
	if (root < 0 || cfs_read_file(root, "etc/group", CFS_READ_MAX, &text, &len) < 0)
		return;
	if (plan->input_group.name[0] && cfs_group_find(text, len, plan->input_group.name, &gid) == 0)
		plan->host_input_gid = gid;
	if (plan->video_group.name[0] && cfs_group_find(text, len, plan->video_group.name, &gid) == 0)
		plan->host_video_gid = gid;
}

/* Ids of the container's root, from its user namespace's maps. */
int populate_plan_owner(struct plan *plan, int proc_fd) {
	uint32_t uid, gid;
	int r;

	r = idmap_read(proc_fd, "uid_map", &plan->uids);
	if (r >= 0)
		r = idmap_read(proc_fd, "gid_map", &plan->gids);
	if (r < 0)
		return r;
	if (idmap_to_host(&plan->uids, 0, &uid) < 0 || idmap_to_host(&plan->gids, 0, &gid) < 0)
		return -EPERM;
	plan->result.owner = (struct persona_owner){ .uid = uid, .gid = gid, .input_gid = gid, .video_gid = gid };
	if (shares_host_ids(&plan->gids))
		host_groups(plan);
	return 0;
}

/* Adds the peer groups of the mount table tb; false if there are too many. */
static bool add_outside_groups(struct plan *plan, struct libmnt_table *tb) {
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	bool ok = true;

	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return false;
	while (ok && mnt_table_next_fs(tb, it, &fs) == 0) {
		unsigned int master, shared = mountinfo_peer_group(fs, &master);

		for (unsigned int g = 0, groups[2] = { shared, master }; ok && g < 2; g++) {
			if (groups[g] == 0)
				continue;
			if (plan->n_outside_groups >= PLAN_OUTSIDE_GROUPS_MAX)
				ok = false;
			else
				plan->outside_groups[plan->n_outside_groups++] = groups[g];
		}
	}
	mnt_free_iter(it);
	return ok;
}

void populate_plan_outside(struct plan *plan, struct libmnt_table *own) {
	_cleanup_(mnt_free_tablep) struct libmnt_table *first = NULL;
	bool cut = true;

	plan->n_outside_groups = 0;
	/* The host's own namespace, and devnsd's (a unit's namespace of its own receives from the host's). */
	plan->outside_known = own && mountinfo_read(AT_FDCWD, "/proc/1/mountinfo", MOUNTINFO_MAX, &first, &cut) >= 0 &&
			      !cut && add_outside_groups(plan, own) && add_outside_groups(plan, first);
}

/* Whether a mount laid on a mount in peer group group reaches no namespace outside the container. */
static bool reaches_nothing_outside(const struct plan *plan, unsigned int group) {
	if (!plan->outside_known || group == 0)
		return false;
	for (size_t i = 0; i < plan->n_outside_groups; i++)
		if (plan->outside_groups[i] == group)
			return false;
	return true;
}

/*
 * Which of the container's mounts pass mounts on to peers, from the
 * kernel's text of its mount table (never a file of the container's),
 * parsed here in devnsd: the helper gets the ids, not the text.
 */
void populate_plan_mountinfo(struct plan *plan, int proc_fd, struct libmnt_table *own) {
	_cleanup_(mnt_free_tablep) struct libmnt_table *tb = NULL;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;

	plan->mounts_read = false;
	plan->n_private_mounts = plan->n_trusted_mounts = 0;
	if (mountinfo_read(proc_fd, "mountinfo", MOUNTINFO_MAX, &tb, NULL) < 0)
		return;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return;
	while (plan->n_private_mounts < PLAN_PRIVATE_MOUNTS_MAX && mnt_table_next_fs(tb, it, &fs) == 0) {
		unsigned long flags = 0;

		if (mnt_fs_get_id(fs) < 0 || mnt_fs_get_propagation(fs, &flags) < 0)
			continue;
		if (!(flags & MS_SHARED) || reaches_nothing_outside(plan, mountinfo_peer_group(fs, NULL)))
			plan->private_mounts[plan->n_private_mounts++] = mnt_fs_get_id(fs);
	}
	mnt_free_iter(it);
	populate_plan_trust(plan, tb, own);
	plan->mounts_read = true;
}

struct plan *populate_plan_new(struct persona *p) {
	struct plan *plan = calloc(1, sizeof(*plan));

	if (!plan)
		return NULL;
	plan->persona = p;
	plan->input_group = p->input_group;
	plan->video_group = p->video_group;
	if (stat("/dev", &plan->host_dev) < 0 || stat("/run", &plan->host_run) < 0) {
		free(plan);
		return NULL;
	}
	return plan;
}
