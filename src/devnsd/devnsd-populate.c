/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "container-fs.h"
#include "devnsd-populate.h"
#include "devnsd-state.h"
#include "idmap.h"
#include "view-mounts.h"

#define POPULATE_MAX 128
#define POPULATE_SHARES 16

struct entry {
	char host[PATH_MAX]; /* devnsd's node, /dev/devns/PERSONA/NAME */
	char path[PATH_MAX]; /* where it goes in the container, without the leading '/' */
	dev_t rdev;
	char udev[512];
};

/* A host directory bound into the container at the same path. */
struct share {
	char path[256];
	struct stat st;
};

/* What the child works from: everything decided before it starts. */
struct plan {
	struct persona *persona;
	struct entry entries[POPULATE_MAX];
	size_t n;
	struct share shares[POPULATE_SHARES];
	size_t n_shares;
	/* devnsd's own /dev and /run: nothing is written on their file systems. */
	struct stat host_dev, host_run;
	struct idmap uids, gids;
	struct conf_group input_group, video_group;
	/* Views of a devnsd that died, bound in the container: replaced by the live view's directory. */
	struct view_mount views[VIEW_MOUNTS_MAX];
	size_t n_views;
	char view_dir[PATH_MAX];
	struct populate_result result;
};

struct populate {
	struct manager *manager;
	struct persona *persona;
	int pidfd;
	int result_fd;
	sd_event_source *exit_source, *timer;
	populate_done_fn done;
	void *userdata;
	bool finished;
	struct populate_result result;
	LIST_ENTRY(populate) link;
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
	if (plan->n_shares == POPULATE_SHARES || path[0] != '/' || strlen(path) >= sizeof(sh->path))
		return;
	sh = &plan->shares[plan->n_shares];
	if (lstat(path, &sh->st) < 0 || !S_ISDIR(sh->st.st_mode))
		return;
	snprintf(sh->path, sizeof(sh->path), "%s", path);
	plan->n_shares++;
}

static void plan_entry(struct plan *plan, const struct entry *e, const char *where) {
	struct entry *copy;

	if (plan->n == POPULATE_MAX)
		return;
	copy = &plan->entries[plan->n++];
	*copy = *e;
	snprintf(copy->path, sizeof(copy->path), "%s", where + strspn(where, "/"));
}

/*
 * Only devnsd's character devices below /dev are bound: never a path in one
 * of devnsd's own FUSE mounts (the LED views), which this process serves
 * and must not wait on.
 */
static void plan_node(void *userdata, const struct node_desc *nd) {
	struct plan *plan = userdata;
	const char *name = strrchr(nd->path, '/') + 1;
	const char *where = mapped_path(plan->persona, name);
	struct entry e = { 0 };
	char path[PATH_MAX];
	struct stat st;

	if (nd->share)
		plan_share(plan, nd->share);
	if (strncmp(nd->path, "/dev/", 5) != 0 || lstat(nd->path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	snprintf(e.host, sizeof(e.host), "%s", nd->path);
	e.rdev = st.st_rdev;
	snprintf(e.udev, sizeof(e.udev), "%s", nd->udev ? nd->udev : "");
	if (!where) {
		snprintf(path, sizeof(path), streq(nd->kind, "input") ? "/dev/input/%s" : "/dev/%s", name);
		where = path;
	}
	plan_entry(plan, &e, where);
	/* The node's sysfs entry names it /dev/devns/PERSONA/NAME, and udev clients open that name. */
	if (!streq(where, nd->path)) {
		e.udev[0] = '\0';
		plan_entry(plan, &e, nd->path);
	}
}

static bool same_inode(const struct stat *a, const struct stat *b) {
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* --- the child ------------------------------------------------------------- */

_Noreturn static void child_exit(struct plan *plan, int fd, int r, const char *failed) {
	ssize_t n;

	if (r < 0)
		snprintf(plan->result.failed, sizeof(plan->result.failed), "%s", failed);
	do
		n = write(fd, &plan->result, sizeof(plan->result));
	while (n < 0 && errno == EINTR);
	_exit(r < 0 ? (-r & 0xff) : 0);
}

/* From here on the child may touch the container's files: as its root user, with no file capabilities. */
static int drop_privileges(const struct plan *plan) {
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	uint32_t keep = (1u << CAP_SYS_ADMIN) | (1u << CAP_SYS_CHROOT);

	if (setgroups(0, NULL) < 0)
		return -errno;
	(void)setfsgid(plan->result.owner.gid);
	(void)setfsuid(plan->result.owner.uid);
	if ((uid_t)setfsuid((uid_t)-1) != plan->result.owner.uid || (gid_t)setfsgid((gid_t)-1) != plan->result.owner.gid)
		return -EPERM;
	data[0].effective = data[0].permitted = keep;
	if (syscall(SYS_capset, &head, data) < 0)
		return -errno;
	umask(022);
	return 0;
}

/* The host gid of a group named in the container's /etc/group, else its fallback. */
static gid_t resolve_group(const struct plan *plan, const char *text, size_t len, const struct conf_group *g,
			   bool *ret_missing) {
	uint32_t inside = 0, host;

	*ret_missing = false;
	if (g->name[0] && (!text || cfs_group_find(text, len, g->name, &inside) < 0)) {
		*ret_missing = g->gid < 0;
		inside = g->gid >= 0 ? (uint32_t)g->gid : 0;
	} else if (!g->name[0])
		inside = (uint32_t)MAX(g->gid, 0);
	if (idmap_to_host(&plan->gids, inside, &host) < 0)
		return plan->result.owner.gid;
	return (gid_t)host;
}

static void resolve_groups(struct plan *plan, int root_fd) {
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;

	/* A missing, odd or oversized /etc/group is a container with no groups. */
	if (cfs_read_file(root_fd, "etc/group", CFS_READ_MAX, &text, &len) < 0) {
		free(text);
		text = NULL;
	}
	plan->result.owner.input_gid =
		resolve_group(plan, text, len, &plan->input_group, &plan->result.input_group_missing);
	plan->result.owner.video_gid =
		resolve_group(plan, text, len, &plan->video_group, &plan->result.video_group_missing);
}

static void refuse(struct plan *plan, const char *path) {
	if (plan->result.refused++ == 0)
		snprintf(plan->result.first_refused, sizeof(plan->result.first_refused), "%s", path);
}

/* A directory for path's last component, on none of devnsd's own file systems. */
static int open_dir_of(struct plan *plan, int root_fd, const char *path, int *ret_fd, const char **ret_name) {
	_cleanup_(closep) int fd = -1;
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;
	int r;

	if (!slash)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	r = cfs_open_dir(root_fd, dir, 1, 0755, &fd);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_dev == plan->host_dev.st_dev || st.st_dev == plan->host_run.st_dev)
		return -EXDEV;
	*ret_fd = take_fd(&fd);
	*ret_name = slash + 1;
	return 0;
}

/* Udev's database entry: E: properties; I: when it was initialized. */
static int write_udev(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	char name[32], text[1024];
	const char *base, *line;
	struct timespec ts;
	size_t len;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	len = (size_t)snprintf(text, sizeof(text), "I:%lld\n", (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
	for (line = e->udev; *line && len < sizeof(text);) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		len += (size_t)snprintf(text + len, sizeof(text) - len, "E:%.*s\n", (int)n, line);
		line += n + (nl ? 1 : 0);
	}
	r = open_dir_of(plan, root_fd, "run/udev/data/x", &dir, &base);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "c%u:%u", major(e->rdev), minor(e->rdev));
	r = cfs_write_file(dir, name, text, 0644);
	if (r < 0)
		return r;
	closep(&dir);
	dir = -1;
	r = open_dir_of(plan, root_fd, "run/udev/control", &dir, &base);
	if (r < 0)
		return r;
	/* Clients take udev as running when this exists; whatever is there already stays. */
	r = cfs_touch(dir, base, 0644);
	return r == -EEXIST ? 0 : r;
}

struct mount_job {
	int tree_fd;
	int target_fd;
	bool node;
	bool view;
};

_Noreturn static void populate_child(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	struct mount_job jobs[POPULATE_MAX + POPULATE_SHARES + VIEW_MOUNTS_MAX];
	size_t n_jobs = 0;
	int host_trees[POPULATE_MAX], share_trees[POPULATE_SHARES], view_trees[VIEW_MOUNTS_MAX];
	bool own_run;
	struct stat st;
	int r;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* devnsd's nodes and shares, taken from its own mount namespace while it is still there. */
	for (size_t i = 0; i < plan->n; i++)
		host_trees[i] = (int)open_tree(AT_FDCWD, plan->entries[i].host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	for (size_t i = 0; i < plan->n_shares; i++)
		share_trees[i] = (int)open_tree(AT_FDCWD, plan->shares[i].path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	/* The live view's directories: devnsd (the parent) answers these lookups while this runs. */
	for (size_t i = 0; i < plan->n_views; i++) {
		char path[PATH_MAX + 256];

		snprintf(path, sizeof(path), "%s/%s", plan->view_dir, plan->views[i].root);
		view_trees[i] = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	}

	r = drop_privileges(plan);
	if (r < 0)
		child_exit(plan, result_fd, r, "dropping privileges");
	resolve_groups(plan, root_fd);

	{
		_cleanup_(closep) int dev = -1;
		r = cfs_open_dir(root_fd, "dev", 0, 0, &dev);
		if (r < 0)
			child_exit(plan, result_fd, r, "opening the container's /dev");
		if (fstat(dev, &st) < 0)
			child_exit(plan, result_fd, -errno, "opening the container's /dev");
		if (same_inode(&st, &plan->host_dev)) {
			plan->result.shares_dev = true;
			child_exit(plan, result_fd, 0, NULL);
		}
	}
	{
		_cleanup_(closep) int run = -1;
		own_run = cfs_open_dir(root_fd, "run", 0, 0, &run) == 0 && fstat(run, &st) == 0 &&
			  st.st_dev != plan->host_run.st_dev;
	}

	for (size_t i = 0; i < plan->n; i++) {
		const struct entry *e = &plan->entries[i];
		_cleanup_(closep) int dir = -1;
		const char *name;
		int target = -1;

		if (host_trees[i] < 0)
			child_exit(plan, result_fd, -ENODEV, "taking devnsd's node");
		r = open_dir_of(plan, root_fd, e->path, &dir, &name);
		if (r >= 0)
			r = cfs_mount_target(dir, name, e->rdev, &target);
		if (r == -EEXIST || r == -ELOOP || r == -ENOTDIR || r == -EXDEV) {
			refuse(plan, e->path);
			continue;
		}
		if (r < 0)
			child_exit(plan, result_fd, r, "making a place for a node");
		if (r == 0)
			jobs[n_jobs++] = (struct mount_job){ .tree_fd = host_trees[i], .target_fd = target, .node = true };
		else
			plan->result.made++;
		if (own_run && e->udev[0]) {
			r = write_udev(plan, root_fd, e);
			if (r == -ELOOP || r == -ENOTDIR || r == -EXDEV)
				refuse(plan, "run/udev");
			else if (r < 0)
				child_exit(plan, result_fd, r, "writing udev data");
		}
	}
	/* Sockets (the framebuffer's, for mmap) live below /run: bind them where the container has its own. */
	for (size_t i = 0; own_run && i < plan->n_shares; i++) {
		_cleanup_(closep) int dir = -1;

		r = cfs_open_dir(root_fd, plan->shares[i].path + 1, 1, 0755, &dir);
		if (r >= 0 && fstat(dir, &st) < 0)
			r = -errno;
		if (r >= 0 && same_inode(&st, &plan->shares[i].st))
			continue; /* bound before */
		if (r >= 0 && (st.st_dev == plan->host_dev.st_dev || st.st_dev == plan->host_run.st_dev))
			r = -EXDEV;
		if (r == -ELOOP || r == -ENOTDIR || r == -EXDEV) {
			refuse(plan, plan->shares[i].path + 1);
			continue;
		}
		if (r < 0 || share_trees[i] < 0)
			child_exit(plan, result_fd, r < 0 ? r : -ENODEV, "making a place for a socket directory");
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = share_trees[i], .target_fd = take_fd(&dir) };
	}

	/*
	 * A dead view is replaced only where the container's path still leads
	 * to that very mount (its id), so nothing else is ever covered.
	 */
	for (size_t i = 0; i < plan->n_views; i++) {
		struct open_how how = { .flags = O_PATH | O_CLOEXEC,
					.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		struct statx stx;
		int fd;

		if (view_trees[i] < 0)
			continue;
		fd = (int)syscall(SYS_openat2, root_fd, plan->views[i].target, &how, sizeof(how));
		if (fd < 0)
			continue;
		if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0 ||
		    !(stx.stx_mask & STATX_MNT_ID) || stx.stx_mnt_id != plan->views[i].mnt_id) {
			close(fd);
			continue;
		}
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = view_trees[i], .target_fd = fd, .view = true };
	}

	/* Mounts need the container's mount namespace; every path was resolved before. */
	if (n_jobs > 0 && setns(mnt_fd, CLONE_NEWNS) < 0)
		child_exit(plan, result_fd, -errno, "entering the container's mount namespace");
	for (size_t i = 0; i < n_jobs; i++) {
		if (move_mount(jobs[i].tree_fd, "", jobs[i].target_fd, "",
			       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			child_exit(plan, result_fd, -errno, "mounting a node");
		if (jobs[i].node)
			plan->result.made++;
		if (jobs[i].view)
			plan->result.views++;
	}
	child_exit(plan, result_fd, 0, NULL);
}

/* --- the parent ------------------------------------------------------------ */

static struct populate *populate_free(struct populate *pop) {
	if (!pop)
		return NULL;
	if (pop->persona && pop->persona->populate == pop)
		pop->persona->populate = NULL;
	if (pop->manager)
		LIST_REMOVE(pop, link);
	sd_event_source_disable_unref(pop->exit_source);
	sd_event_source_disable_unref(pop->timer);
	closep(&pop->pidfd);
	closep(&pop->result_fd);
	free(pop);
	return NULL;
}

/* Calls done() once; the populate lives on until its child is reaped. */
static void finish(struct populate *pop, int r) {
	struct persona *p = pop->persona;

	if (pop->finished)
		return;
	pop->finished = true;
	if (p->populate == pop)
		p->populate = NULL;
	pop->persona = NULL;
	pop->done(p, r, &pop->result, pop->userdata);
}

static int on_child_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct populate *pop = userdata;
	siginfo_t si = { 0 };
	ssize_t n;
	int r = 0;

	(void)s;
	(void)revents;
	if (waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
		return 0;
	n = read(pop->result_fd, &pop->result, sizeof(pop->result));
	if (si.si_code != CLD_EXITED)
		r = -EIO;
	else if (si.si_status != 0)
		r = -si.si_status;
	else if (n != (ssize_t)sizeof(pop->result))
		r = -EIO;
	if (n != (ssize_t)sizeof(pop->result))
		snprintf(pop->result.failed, sizeof(pop->result.failed), "the helper process");
	finish(pop, r);
	populate_free(pop);
	return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
	struct populate *pop = userdata;

	(void)s;
	(void)usec;
	(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
	snprintf(pop->result.failed, sizeof(pop->result.failed), "the container's files (no answer in time)");
	finish(pop, -ETIMEDOUT);
	return 0;
}

void populate_stop_all(struct manager *m) {
	struct populate *pop;

	while ((pop = LIST_FIRST(&m->populates))) {
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		if (!pop->finished) {
			snprintf(pop->result.failed, sizeof(pop->result.failed), "devnsd stopping");
			finish(pop, -ECANCELED);
		}
		/* Reaped now if it is gone already; else by init once devnsd exits. */
		(void)waitid(P_PIDFD, (id_t)pop->pidfd, &(siginfo_t){ 0 }, WEXITED | WNOHANG);
		populate_free(pop);
	}
}

void populate_cancel(struct persona *p) {
	struct populate *pop = p->populate;

	if (!pop)
		return;
	(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
	snprintf(pop->result.failed, sizeof(pop->result.failed), "a newer request");
	finish(pop, -ECANCELED);
}

/* Views a devnsd that died left bound in the container (its mount table is the kernel's text). */
static void plan_views(struct manager *m, struct plan *plan, int proc_fd) {
	_cleanup_(freep) char *text = NULL;
	_cleanup_(closep) int fd = -1;
	dev_t old = state_old_view_dev(m);
	const char *dir = state_view_dir(m);
	size_t len;

	if (old == 0 || !dir || strlen(dir) >= sizeof(plan->view_dir))
		return;
	fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC);
	text = malloc(CFS_READ_MAX);
	if (fd < 0 || !text || read_bounded(fd, text, CFS_READ_MAX, &len) < 0)
		return;
	snprintf(plan->view_dir, sizeof(plan->view_dir), "%s", dir);
	plan->n_views = view_mounts_find(text, len, old, plan->persona->name, plan->views, VIEW_MOUNTS_MAX);
}

/* Ids of the container's root, from its user namespace's maps. */
static int plan_owner(struct plan *plan, int proc_fd) {
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
	return 0;
}

static bool exited(int pidfd) {
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return poll(&pfd, 1, 0) != 0;
}

int populate_start(struct manager *m, struct persona *p, pid_t pid, populate_done_fn done, void *userdata) {
	_cleanup_(freep) struct plan *plan = NULL;
	_cleanup_(closep) int target = -1, proc_fd = -1, root_fd = -1, mnt_fd = -1;
	int pipe_fds[2];
	struct populate *pop;
	char path[64];
	pid_t child;
	int r;

	plan = calloc(1, sizeof(*plan));
	if (!plan)
		return -ENOMEM;
	plan->persona = p;
	plan->input_group = p->input_group;
	plan->video_group = p->video_group;
	if (stat("/dev", &plan->host_dev) < 0 || stat("/run", &plan->host_run) < 0)
		return -errno;

	/* The process stays the one named while its files are opened: checked through its pidfd after. */
	target = pidfd_open(pid, 0);
	if (target < 0)
		return errno == EINVAL ? -ESRCH : -errno;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	proc_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return -errno;
	r = plan_owner(plan, proc_fd);
	if (r < 0)
		return r;
	root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	if (root_fd < 0 || mnt_fd < 0)
		return -errno;
	if (exited(target))
		return -ESRCH;
	manager_foreach_node(m, p, plan_node, plan);
	plan_views(m, plan, proc_fd);

	pop = calloc(1, sizeof(*pop));
	if (!pop)
		return -ENOMEM;
	*pop = (struct populate){ .manager = m, .persona = p, .pidfd = -1, .result_fd = -1, .done = done,
				  .userdata = userdata, .result = plan->result };
	LIST_INSERT_HEAD(&m->populates, pop, link);
	if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		populate_free(pop);
		return -errno;
	}
	pop->result_fd = pipe_fds[0];
	child = fork();
	if (child < 0) {
		r = -errno;
		close(pipe_fds[1]);
		populate_free(pop);
		return r;
	}
	if (child == 0) {
		close(pipe_fds[0]);
		populate_child(plan, pipe_fds[1], root_fd, mnt_fd);
	}
	close(pipe_fds[1]);
	pop->pidfd = pidfd_open(child, 0);
	if (pop->pidfd < 0) {
		r = -errno;
		(void)kill(child, SIGKILL);
		(void)waitpid(child, NULL, 0);
		populate_free(pop);
		return r;
	}
	r = sd_event_add_io(m->event, &pop->exit_source, pop->pidfd, EPOLLIN, on_child_exit, pop);
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &pop->timer, CLOCK_MONOTONIC, POPULATE_TIMEOUT_USEC, 0,
					       on_timeout, pop);
	if (r < 0) {
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		(void)waitid(P_PIDFD, (id_t)pop->pidfd, &(siginfo_t){ 0 }, WEXITED);
		populate_free(pop);
		return r;
	}
	populate_cancel(p);
	p->populate = pop;
	return 0;
}
