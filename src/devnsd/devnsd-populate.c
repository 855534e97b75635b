/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "devnsd-manager.h"
#include "devnsd-populate.h"

#define POPULATE_MAX 256
#define POPULATE_SHARES 16
#define POPULATE_TIMEOUT_S 10

struct entry {
	char path[PATH_MAX];
	dev_t rdev;
	const char *group;
	char udev[512];
};

/* A host directory bound into the container at the same path. */
struct share {
	char path[256];
	int tree_fd; /* a detached copy of the host's mount, made before entering the container */
};

struct plan {
	struct persona *persona;
	struct share shares[POPULATE_SHARES];
	size_t n_shares;
	/* devnsd's own /dev and /run: a container that shares them gets nothing written there. */
	struct stat host_dev, host_run;
	struct entry entries[POPULATE_MAX];
	size_t n;
	int error;
};

static const char *mapped_path(const struct persona *p, const char *node) {
	for (size_t i = 0; i < p->n_maps; i++)
		if (streq(p->maps[i].node, node))
			return p->maps[i].path;
	return NULL;
}

static void plan_share(struct plan *plan, const char *path) {
	struct share *sh;

	for (size_t i = 0; i < plan->n_shares; i++)
		if (streq(plan->shares[i].path, path))
			return;
	if (plan->n_shares == POPULATE_SHARES)
		return;
	sh = &plan->shares[plan->n_shares];
	snprintf(sh->path, sizeof(sh->path), "%s", path);
	sh->tree_fd = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (sh->tree_fd >= 0)
		plan->n_shares++;
}

static void plan_node(void *userdata, const struct node_desc *nd) {
	struct plan *plan = userdata;
	const char *name = strrchr(nd->path, '/') + 1;
	const char *where = mapped_path(plan->persona, name);
	struct entry *e;
	struct stat st;

	if (nd->share)
		plan_share(plan, nd->share);
	if (plan->error || plan->n == POPULATE_MAX || stat(nd->path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	e = &plan->entries[plan->n];
	if (where)
		snprintf(e->path, sizeof(e->path), "%s", where);
	else if (streq(nd->kind, "input"))
		snprintf(e->path, sizeof(e->path), "/dev/input/%s", name);
	else
		snprintf(e->path, sizeof(e->path), "/dev/%s", name);
	e->rdev = st.st_rdev;
	e->group = streq(nd->kind, "input") ? "input" : "video";
	snprintf(e->udev, sizeof(e->udev), "%s", nd->udev ? nd->udev : "");
	plan->n++;

	/*
	 * The node's sysfs entry names it /dev/devns/PERSONA/NAME, and udev
	 * clients (libinput) open that name: make it too.
	 */
	if (plan->n < POPULATE_MAX && !streq(e->path, nd->path)) {
		struct entry *alias = &plan->entries[plan->n++];
		*alias = *e;
		snprintf(alias->path, sizeof(alias->path), "%s", nd->path);
		alias->udev[0] = '\0';
	}
}

static int mkdir_parents(char *path) {
	for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		int r = mkdir(path, 0755);
		*s = '/';
		if (r < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static int write_file(const char *path, const char *text) {
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -errno;
}

/* Udev's database entry: E: properties; I: when it was initialized. */
static int write_udev(const struct entry *e) {
	char path[64], text[1024];
	struct timespec ts;
	size_t len;
	const char *line;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	len = (size_t)snprintf(text, sizeof(text), "I:%lld\n", (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
	for (line = e->udev; *line && len < sizeof(text);) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "E:%.*s\n", (int)n, line);
		line += n + (nl ? 1 : 0);
	}
	snprintf(path, sizeof(path), "/run/udev/data/c%u:%u", major(e->rdev), minor(e->rdev));
	r = mkdir_parents(path);
	if (r < 0)
		return r;
	r = write_file(path, text);
	if (r < 0)
		return r;
	/* Clients take udev as running when this exists. */
	if (access("/run/udev/control", F_OK) < 0)
		return write_file("/run/udev/control", "");
	return 0;
}

static bool same_dir(const struct stat *a, const struct stat *b) {
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Binds a host directory at the same path inside the container, over whatever was there. */
static int bind_share(const struct share *sh) {
	char path[PATH_MAX];
	int r;

	snprintf(path, sizeof(path), "%s/", sh->path);
	r = mkdir_parents(path);
	if (r < 0)
		return r;
	if (move_mount(sh->tree_fd, "", AT_FDCWD, sh->path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

static int make_node(const struct entry *e, uid_t uid, gid_t dev_gid, bool udev) {
	char path[PATH_MAX];
	struct group *g;
	gid_t gid = dev_gid;
	int r;

	snprintf(path, sizeof(path), "%s", e->path);
	r = mkdir_parents(path);
	if (r < 0)
		return r;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	if (mknod(path, S_IFCHR | 0660, e->rdev) < 0)
		return -errno;
	g = getgrnam(e->group);
	if (g)
		gid = g->gr_gid;
	if (chown(path, uid, gid) < 0 || chmod(path, 0660) < 0)
		return -errno;
	if (udev && e->udev[0])
		return write_udev(e);
	return 0;
}

/*
 * In the child: enter the container's mount namespace and root, and make the
 * nodes. Exits 0 with nodes made, 2 when the container shares devnsd's /dev.
 */
_Noreturn static void populate_child(const struct plan *plan, int mnt_fd, int root_fd) {
	struct stat dev, run;
	bool udev;

	alarm(POPULATE_TIMEOUT_S);
	if (setns(mnt_fd, CLONE_NEWNS) < 0 || fchdir(root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0)
		_exit(EXIT_FAILURE);
	if (stat("/dev", &dev) < 0)
		_exit(EXIT_FAILURE);
	/* Never replace the host's own device nodes or udev database. */
	if (same_dir(&dev, &plan->host_dev))
		_exit(2);
	udev = stat("/run", &run) == 0 && !same_dir(&run, &plan->host_run);
	for (size_t i = 0; i < plan->n; i++)
		if (make_node(&plan->entries[i], dev.st_uid, dev.st_gid, udev) < 0)
			_exit(EXIT_FAILURE);
	/* Sockets (the framebuffer's, for mmap) live below /run: bind them where the container has its own. */
	for (size_t i = 0; udev && i < plan->n_shares; i++)
		if (bind_share(&plan->shares[i]) < 0)
			_exit(EXIT_FAILURE);
	_exit(EXIT_SUCCESS);
}

static void close_shares(struct plan *plan) {
	for (size_t i = 0; i < plan->n_shares; i++)
		closep(&plan->shares[i].tree_fd);
	plan->n_shares = 0;
}

int populate_container(struct manager *m, struct persona *p, pid_t pid) {
	_cleanup_(freep) struct plan *plan = NULL;
	_cleanup_(closep) int mnt_fd = -1, root_fd = -1;
	char path[64];
	pid_t child;
	int status;

	plan = calloc(1, sizeof(*plan));
	if (!plan)
		return -ENOMEM;
	plan->persona = p;
	if (stat("/dev", &plan->host_dev) < 0 || stat("/run", &plan->host_run) < 0)
		return -errno;
	manager_foreach_node(m, p, plan_node, plan);

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	mnt_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (mnt_fd < 0) {
		close_shares(plan);
		return -errno;
	}
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		close_shares(plan);
		return -errno;
	}

	child = fork();
	if (child < 0) {
		close_shares(plan);
		return -errno;
	}
	if (child == 0)
		populate_child(plan, mnt_fd, root_fd);
	close_shares(plan);
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		return 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	return (int)plan->n;
}
