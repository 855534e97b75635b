/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse-fs.h"
#include "sysfs-view.h"
#include "util.h"

#define INO_BUCKETS 256
/* Nodes one tree holds: personas times lights times attributes stay far below. */
#define NODES_MAX 65536
/* sysfs reports every attribute with this size. */
#define ATTR_SIZE 4096

struct view_file;

struct sysfs_node {
	fuse_ino_t ino;
	char *name;
	struct sysfs_node *parent;
	void *owner;
	mode_t mode;      /* S_IFDIR or S_IFREG, and permission bits */
	mode_t base_mode; /* the mode it was made with, which sysfs_node_set_owner() restores */
	uid_t uid;
	gid_t gid;
	const struct sysfs_file_ops *ops;
	void *data;
	unsigned int opened;
	/* On the top of an owner's subtree: the files open in it. */
	LIST_HEAD(, view_file) files;
	unsigned int n_files;
	LIST_HEAD(, sysfs_node) children;
	LIST_ENTRY(sysfs_node) sibling;
	LIST_ENTRY(sysfs_node) bucket;
};

/* One open attribute file. */
struct view_file {
	struct sysfs_node *node; /* NULL once it no longer works */
	struct sysfs_node *top;  /* the owner's subtree it counts in; NULL with node */
	uid_t uid;
	int error; /* what it answers once node is NULL: ENODEV revoked, ENOENT removed */
	LIST_ENTRY(view_file) link;
};

struct sysfs_view {
	struct fuse_fs *fs;
	struct sysfs_node root;
	fuse_ino_t next_ino;
	unsigned int n_nodes;
	LIST_HEAD(, sysfs_node) buckets[INO_BUCKETS];
	struct timespec created;
	sysfs_access_fn may_access;
	void *userdata;
};

static struct sysfs_node *find(struct sysfs_view *v, fuse_ino_t ino) {
	struct sysfs_node *n;

	LIST_FOREACH(n, &v->buckets[ino % INO_BUCKETS], bucket)
		if (n->ino == ino)
			return n;
	return NULL;
}

static struct sysfs_node *child(struct sysfs_node *dir, const char *name) {
	struct sysfs_node *n;

	LIST_FOREACH(n, &dir->children, sibling)
		if (streq(n->name, name))
			return n;
	return NULL;
}

static bool is_dir(const struct sysfs_node *n) {
	return S_ISDIR(n->mode);
}

/* The top of n's owner's subtree (a child of the root), or NULL for the root. */
static struct sysfs_node *top_of(struct sysfs_view *v, struct sysfs_node *n) {
	if (n == &v->root)
		return NULL;
	while (n->parent != &v->root)
		n = n->parent;
	return n;
}

static bool is_below(const struct sysfs_node *n, const struct sysfs_node *ancestor) {
	for (; n; n = n->parent)
		if (n == ancestor)
			return true;
	return false;
}

static int check(struct sysfs_view *v, fuse_req_t req, const struct sysfs_node *n) {
	if (!n->owner)
		return 0;
	return v->may_access(v->userdata, n->owner, fuse_req_ctx(req)->pid);
}

static void fill_stat(struct sysfs_view *v, const struct sysfs_node *n, struct stat *st) {
	*st = (struct stat){
		.st_ino = n->ino,
		.st_mode = n->mode,
		.st_uid = n->uid,
		.st_gid = n->gid,
		.st_nlink = is_dir(n) ? 2 : 1,
		.st_size = is_dir(n) ? 0 : ATTR_SIZE,
		.st_blksize = ATTR_SIZE,
		.st_atim = v->created,
		.st_mtim = v->created,
		.st_ctim = v->created,
	};
}

/* The node a request names, after the access check; replies and returns NULL on failure. */
static struct sysfs_node *node_for(fuse_req_t req, fuse_ino_t ino) {
	struct sysfs_view *v = fuse_req_userdata(req);
	struct sysfs_node *n = find(v, ino);
	int r = n ? check(v, req, n) : -ENOENT;

	if (r < 0) {
		fuse_reply_err(req, -r);
		return NULL;
	}
	return n;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
	struct sysfs_view *v = fuse_req_userdata(req);
	struct sysfs_node *dir = node_for(req, parent), *n;
	struct fuse_entry_param e = { 0 };
	int r;

	if (!dir)
		return;
	n = is_dir(dir) ? child(dir, name) : NULL;
	r = !is_dir(dir) ? -ENOTDIR : !n ? -ENOENT : check(v, req, n);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	e.ino = n->ino;
	fill_stat(v, n, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct sysfs_view *v = fuse_req_userdata(req);
	struct sysfs_node *n = node_for(req, ino);
	struct stat st;

	(void)fi;
	if (!n)
		return;
	fill_stat(v, n, &st);
	fuse_reply_attr(req, &st, 0);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
	struct sysfs_view *v = fuse_req_userdata(req);
	struct sysfs_node *n = node_for(req, ino);
	struct stat st;

	(void)fi;
	if (!n)
		return;
	/* Truncation (echo 1 > attr) is accepted and means nothing, as in sysfs. */
	if ((to_set & FUSE_SET_ATTR_SIZE) && (is_dir(n) || !n->ops->store)) {
		fuse_reply_err(req, is_dir(n) ? EISDIR : EACCES);
		return;
	}
	/*
	 * Owners and modes change as in sysfs (an init that hands an attribute
	 * to a service): the kernel has checked the caller's right to
	 * (default_permissions), and they last until the next rebind.
	 */
	if (to_set & FUSE_SET_ATTR_MODE)
		n->mode = (n->mode & S_IFMT) | (attr->st_mode & 0777);
	if (to_set & FUSE_SET_ATTR_UID)
		n->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		n->gid = attr->st_gid;
	fill_stat(v, n, &st);
	fuse_reply_attr(req, &st, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct sysfs_node *n = node_for(req, ino);

	if (!n)
		return;
	if (!is_dir(n)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static size_t add_entry(fuse_req_t req, char *buf, size_t size, const char *name, const struct sysfs_node *n,
			off_t next) {
	struct stat st = { .st_ino = n->ino, .st_mode = n->mode };

	return fuse_add_direntry(req, buf, size, name, &st, next);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	struct sysfs_node *dir = node_for(req, ino), *n;
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;
	off_t i = 0;

	(void)fi;
	if (!dir)
		return;
	size = MIN(size, (size_t)65536);
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Offsets count entries: ".", "..", then the children in order. */
	for (n = NULL;; i++) {
		const char *name;
		const struct sysfs_node *target;
		size_t need;

		if (i == 0) {
			name = ".";
			target = dir;
		} else if (i == 1) {
			name = "..";
			target = dir->parent ? dir->parent : dir;
		} else {
			n = n ? LIST_NEXT(n, sibling) : LIST_FIRST(&dir->children);
			if (!n)
				break;
			name = n->name;
			target = n;
		}
		if (i < off)
			continue;
		need = add_entry(req, buf + len, size - len, name, target, i + 1);
		if (need > size - len)
			break;
		len += need;
	}
	fuse_reply_buf(req, buf, len);
}

static void count_open(struct sysfs_node *n, int delta) {
	for (; n; n = n->parent)
		n->opened += (unsigned int)delta;
}

static struct view_file *file_of(struct fuse_file_info *fi) {
	return (struct view_file *)(uintptr_t)fi->fh;
}

static unsigned int files_of(const struct sysfs_node *top, uid_t uid) {
	const struct view_file *f;
	unsigned int count = 0;

	LIST_FOREACH(f, &top->files, link)
		count += f->uid == uid;
	return count;
}

/* The file stops working (error: what it answers from now on) and counts nowhere. */
static void file_end(struct view_file *f, int error) {
	if (!f->node)
		return;
	count_open(f->node, -1);
	LIST_REMOVE(f, link);
	f->top->n_files--;
	f->node = f->top = NULL;
	f->error = error;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct sysfs_view *v = fuse_req_userdata(req);
	struct sysfs_node *n = node_for(req, ino), *top;
	uid_t uid = fuse_req_ctx(req)->uid;
	struct view_file *f;

	if (!n)
		return;
	if (is_dir(n)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && !n->ops->store) {
		fuse_reply_err(req, EACCES);
		return;
	}
	top = top_of(v, n);
	if (top->n_files >= SYSFS_OPEN_PER_OWNER || files_of(top, uid) >= SYSFS_OPEN_PER_UID) {
		fuse_reply_err(req, EMFILE);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*f = (struct view_file){ .node = n, .top = top, .uid = uid };
	LIST_INSERT_HEAD(&top->files, f, link);
	top->n_files++;
	count_open(n, 1);
	fi->fh = (uintptr_t)f;
	/* Every read asks the attribute afresh. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) < 0) {
		file_end(f, ENOENT);
		free(f);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct view_file *f = file_of(fi);

	(void)ino;
	file_end(f, ENOENT);
	free(f);
	fuse_reply_err(req, 0);
}

/* The attribute an open file stands for; replies with its error and returns NULL when it has none. */
static struct sysfs_node *file_node(fuse_req_t req, struct fuse_file_info *fi) {
	struct view_file *f = file_of(fi);

	if (!f->node)
		fuse_reply_err(req, f->error);
	return f->node;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	struct sysfs_node *n = file_node(req, fi);
	char buf[ATTR_SIZE];
	int r;

	(void)ino;
	if (!n)
		return;
	r = n->ops->show(n->data, buf, sizeof(buf));
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (off < 0 || off >= r) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	fuse_reply_buf(req, buf + off, MIN(size, (size_t)r - (size_t)off));
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi) {
	struct sysfs_node *n = file_node(req, fi);
	size_t len = MIN(size, (size_t)SYSFS_STORE_MAX);
	int r;

	(void)ino;
	(void)off;
	if (!n)
		return;
	if (!n->ops->store) {
		fuse_reply_err(req, EACCES);
		return;
	}
	if (len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	r = n->ops->store(n->data, buf, len);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, len);
}

static const struct fuse_lowlevel_ops view_ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.write = op_write,
};

static void node_free(struct sysfs_view *v, struct sysfs_node *n) {
	struct sysfs_node *c;

	while ((c = LIST_FIRST(&n->children)))
		node_free(v, c);
	LIST_REMOVE(n, sibling);
	LIST_REMOVE(n, bucket);
	v->n_nodes--;
	free(n->name);
	free(n);
}

static int node_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, mode_t mode,
		    struct sysfs_node **ret) {
	struct sysfs_node *n;

	if (!is_dir(parent))
		return -ENOTDIR;
	if (!*name || strchr(name, '/') || streq(name, ".") || streq(name, ".."))
		return -EINVAL;
	if (child(parent, name))
		return -EEXIST;
	if (v->n_nodes >= NODES_MAX)
		return -E2BIG;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->name = strdup(name);
	if (!n->name) {
		free(n);
		return -ENOMEM;
	}
	n->ino = v->next_ino++;
	n->parent = parent;
	n->owner = parent->owner;
	n->mode = n->base_mode = mode;
	n->uid = parent->uid;
	n->gid = parent->gid;
	LIST_INIT(&n->children);
	LIST_INIT(&n->files);
	/* Keep the order of creation, as listings show it. */
	if (LIST_EMPTY(&parent->children)) {
		LIST_INSERT_HEAD(&parent->children, n, sibling);
	} else {
		struct sysfs_node *last = LIST_FIRST(&parent->children);
		while (LIST_NEXT(last, sibling))
			last = LIST_NEXT(last, sibling);
		LIST_INSERT_AFTER(last, n, sibling);
	}
	LIST_INSERT_HEAD(&v->buckets[n->ino % INO_BUCKETS], n, bucket);
	v->n_nodes++;
	*ret = n;
	return 0;
}

int sysfs_dir_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, void *owner,
		  struct sysfs_node **ret) {
	struct sysfs_node *n;
	int r = node_add(v, parent, name, S_IFDIR | 0755, &n);

	if (r < 0)
		return r;
	if (parent == &v->root)
		n->owner = owner;
	if (ret)
		*ret = n;
	return 0;
}

int sysfs_file_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, mode_t mode,
		   const struct sysfs_file_ops *ops, void *data) {
	struct sysfs_node *n;
	int r = node_add(v, parent, name, S_IFREG | (mode & 0777), &n);

	if (r < 0)
		return r;
	n->ops = ops;
	n->data = data;
	return 0;
}

/* Ends the files open at or below node with error. */
static void end_files(struct sysfs_view *v, struct sysfs_node *node, int error) {
	struct sysfs_node *top = top_of(v, node);
	struct view_file *f, *next;

	if (!top)
		return;
	for (f = LIST_FIRST(&top->files); f; f = next) {
		next = LIST_NEXT(f, link);
		if (is_below(f->node, node))
			file_end(f, error);
	}
}

void sysfs_node_remove(struct sysfs_view *v, struct sysfs_node *node) {
	if (!node || node == &v->root)
		return;
	end_files(v, node, ENOENT);
	node_free(v, node);
}

void sysfs_node_revoke(struct sysfs_view *v, struct sysfs_node *node) {
	end_files(v, node, ENODEV);
}

void sysfs_node_set_owner(struct sysfs_view *v, struct sysfs_node *node, uid_t uid, gid_t gid) {
	struct sysfs_node *c;

	node->uid = uid;
	node->gid = gid;
	node->mode = node->base_mode;
	LIST_FOREACH(c, &node->children, sibling)
		sysfs_node_set_owner(v, c, uid, gid);
}

unsigned int sysfs_node_opened(const struct sysfs_node *node) {
	return node->opened;
}

struct sysfs_node *sysfs_view_root(struct sysfs_view *v) {
	return &v->root;
}

int sysfs_view_new(struct sysfs_view **ret, sd_event *event, const char *mountpoint, sysfs_access_fn may_access,
		   void *userdata) {
	_cleanup_(sysfs_view_freep) struct sysfs_view *v = NULL;
	int r;

	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->root = (struct sysfs_node){
		.ino = FUSE_ROOT_ID,
		.mode = S_IFDIR | 0755,
		.base_mode = S_IFDIR | 0755,
		.uid = geteuid(),
		.gid = getegid(),
	};
	LIST_INIT(&v->root.children);
	LIST_INIT(&v->root.files);
	for (size_t i = 0; i < INO_BUCKETS; i++)
		LIST_INIT(&v->buckets[i]);
	LIST_INSERT_HEAD(&v->buckets[FUSE_ROOT_ID % INO_BUCKETS], &v->root, bucket);
	v->next_ino = FUSE_ROOT_ID + 1;
	v->may_access = may_access;
	v->userdata = userdata;
	clock_gettime(CLOCK_REALTIME, &v->created);
	r = fuse_fs_new(&v->fs, event, mountpoint, &view_ops, v);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(v);
	return 0;
}

struct sysfs_view *sysfs_view_free(struct sysfs_view *v) {
	struct sysfs_node *n;

	if (!v)
		return NULL;
	fuse_fs_free(v->fs);
	/* Unmounted: no release comes for the files still open. */
	LIST_FOREACH(n, &v->root.children, sibling) {
		struct view_file *f;

		while ((f = LIST_FIRST(&n->files))) {
			file_end(f, ENOENT);
			free(f);
		}
	}
	while ((n = LIST_FIRST(&v->root.children)))
		node_free(v, n);
	free(v);
	return NULL;
}
