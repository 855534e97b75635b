/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "test-util.h"

#include "container-fs.h"

/*
 * A container's tree, as a hostile root would leave it: these tests plant
 * symlinks, FIFOs and foreign files and check that nothing outside the
 * tree is touched and nothing blocks.
 */
struct tree {
	char root[64];
	char outside[64];
	int root_fd;
};

static void path_in(char *buf, size_t size, const char *dir, const char *rel) {
	snprintf(buf, size, "%s/%s", dir, rel);
}

static int setup(void **state) {
	struct tree *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->root, sizeof(t->root), "/tmp/devns-cfs-XXXXXX");
	snprintf(t->outside, sizeof(t->outside), "/tmp/devns-host-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	assert_non_null(mkdtemp(t->outside));
	t->root_fd = open(t->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(t->root_fd >= 0);
	*state = t;
	return 0;
}

static int teardown(void **state) {
	struct tree *t = *state;
	char cmd[200];

	close(t->root_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", t->root, t->outside);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

static void make(struct tree *t, const char *rel) {
	char p[256];

	path_in(p, sizeof(p), t->root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void plant_symlink(struct tree *t, const char *rel, const char *target) {
	char p[256];

	path_in(p, sizeof(p), t->root, rel);
	assert_int_equal(symlink(target, p), 0);
}

static bool outside_empty(struct tree *t) {
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", t->outside);
	return system(cmd) == 0;
}

static void test_open_dir_creates_below_root(void **state) {
	struct tree *t = *state;
	char p[256];
	struct stat st;
	int fd;

	assert_int_equal(cfs_open_dir(t->root_fd, "dev/input", 1, 0755, &fd), 0);
	close(fd);
	path_in(p, sizeof(p), t->root, "dev/input");
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(cfs_open_dir(t->root_fd, "/dev//input/", 0, 0, &fd), 0);
	close(fd);
	assert_int_equal(cfs_open_dir(t->root_fd, "dev/missing", 0, 0, &fd), -ENOENT);
}

static void test_open_dir_refuses_planted_symlinks(void **state) {
	struct tree *t = *state;
	int fd = -1;

	/* /dev/input -> a host directory; /run -> "/" (absolute); a relative escape. */
	make(t, "dev");
	plant_symlink(t, "dev/input", t->outside);
	assert_int_equal(cfs_open_dir(t->root_fd, "dev/input", 1, 0755, &fd), -ELOOP);
	plant_symlink(t, "run", "/");
	assert_int_equal(cfs_open_dir(t->root_fd, "run/udev/data", 1, 0755, &fd), -ELOOP);
	plant_symlink(t, "up", "../..");
	assert_int_equal(cfs_open_dir(t->root_fd, "up/x", 1, 0755, &fd), -ELOOP);
	assert_int_equal(cfs_open_dir(t->root_fd, "dev/../../x", 1, 0755, &fd), -EINVAL);
	assert_int_equal(fd, -1);
	assert_true(outside_empty(t));
}

static void test_read_file_takes_only_regular_files(void **state) {
	struct tree *t = *state;
	char p[256], *text = NULL;
	size_t len;
	FILE *f;

	make(t, "etc");
	path_in(p, sizeof(p), t->root, "etc/group");
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("root:x:0:\ninput:x:101:\n", f);
	fclose(f);
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), 0);
	assert_int_equal(len, strlen("root:x:0:\ninput:x:101:\n"));
	assert_string_equal(text, "root:x:0:\ninput:x:101:\n");
	free(text);

	/* Too big for the bound. */
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", 8, &text, &len), -EFBIG);

	/* A FIFO: refused at once, never opened (opening a FIFO to read would wait for a writer). */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), -EINVAL);

	/* A symlink to a host file. */
	assert_int_equal(unlink(p), 0);
	plant_symlink(t, "etc/group", "/etc/passwd");
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), -ELOOP);

	/* A directory, and /dev/zero's kind: a device. */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mknod(p, S_IFCHR | 0644, makedev(1, 5)), 0);
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), -EINVAL);
}

static void test_write_file_replaces_planted_links(void **state) {
	struct tree *t = *state;
	char p[256], victim[256], *text = NULL;
	struct stat st;
	size_t len;
	int dir;

	path_in(victim, sizeof(victim), t->outside, "victim");
	assert_int_equal(cfs_open_dir(t->root_fd, "run/udev/data", 1, 0755, &dir), 0);
	/* A symlink at the file's name, pointing out of the tree, is replaced, not written through. */
	plant_symlink(t, "run/udev/data/c511:3", victim);
	assert_int_equal(cfs_write_file(dir, "c511:3", "E:ID_INPUT=1\n", 0644), 0);
	assert_true(outside_empty(t));
	path_in(p, sizeof(p), t->root, "run/udev/data/c511:3");
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(cfs_read_file(t->root_fd, "run/udev/data/c511:3", 64, &text, &len), 0);
	assert_string_equal(text, "E:ID_INPUT=1\n");
	free(text);

	/* A FIFO there is replaced too, without blocking. */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(cfs_write_file(dir, "c511:3", "x\n", 0644), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));

	/* A dangling symlink where a marker goes: left alone, nothing made at its target. */
	plant_symlink(t, "run/udev/control", victim);
	close(dir);
	assert_int_equal(cfs_open_dir(t->root_fd, "run/udev", 0, 0, &dir), 0);
	assert_int_equal(cfs_touch(dir, "control", 0644), -EEXIST);
	assert_true(outside_empty(t));
	assert_int_equal(cfs_write_file(dir, "../x", "", 0644), -EINVAL);
	close(dir);
}

static void test_mount_target_never_takes_foreign_files(void **state) {
	struct tree *t = *state;
	dev_t ours = makedev(511, 7);
	char p[256];
	int dir, fd = -1;

	assert_int_equal(cfs_open_dir(t->root_fd, "dev/input", 1, 0755, &dir), 0);
	/* A free name: an empty file to mount on. */
	assert_int_equal(cfs_mount_target(dir, "event3", ours, &fd), 0);
	assert_true(fd >= 0);
	close(fd);
	/* The container's own file there now: not devnsd's, left alone. */
	assert_int_equal(cfs_mount_target(dir, "event3", ours, &fd), -EEXIST);
	/* A node devnsd made before: kept. Another device's node: left alone. */
	path_in(p, sizeof(p), t->root, "dev/input/event4");
	assert_int_equal(mknod(p, S_IFCHR | 0660, ours), 0);
	assert_int_equal(cfs_mount_target(dir, "event4", ours, &fd), 1);
	path_in(p, sizeof(p), t->root, "dev/input/event5");
	assert_int_equal(mknod(p, S_IFCHR | 0660, makedev(13, 65)), 0);
	assert_int_equal(cfs_mount_target(dir, "event5", ours, &fd), -EEXIST);
	/* A symlink: not followed. */
	plant_symlink(t, "dev/input/event6", t->outside);
	assert_int_equal(cfs_mount_target(dir, "event6", ours, &fd), -EEXIST);
	assert_true(outside_empty(t));
	close(dir);
}

/* A guard that takes no mount, or only the one it was given. */
static bool only_mount(uint64_t mnt_id, void *userdata) {
	return userdata && mnt_id == *(const uint64_t *)userdata;
}

static void test_guard_refuses_mounts_it_does_not_take(void **state) {
	struct tree *t = *state;
	struct statx stx;
	struct stat st;
	uint64_t root_mount;
	char *text = NULL;
	size_t len = 0;
	int fd = -1;

	assert_int_equal(cfs_open_dir(t->root_fd, "etc", 1, 0755, &fd), 0);
	assert_int_equal(cfs_write_file(fd, "group", "input:x:105:\n", 0644), 0);
	close(fd);
	assert_int_equal(statx(t->root_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx), 0);
	root_mount = stx.stx_mnt_id;

	cfs_guard_mounts(only_mount, NULL);
	assert_int_equal(cfs_open_dir(t->root_fd, "etc", 0, 0, &fd), -EMEDIUMTYPE);
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), -EMEDIUMTYPE);
	assert_int_equal(cfs_check_mount(t->root_fd), -EMEDIUMTYPE);

	cfs_guard_mounts(only_mount, &root_mount);
	assert_int_equal(cfs_open_dir(t->root_fd, "etc", 0, 0, &fd), 0);
	assert_int_equal(cfs_stat_at(fd, "group", &st), 0);
	assert_true(S_ISREG(st.st_mode));
	close(fd);
	assert_int_equal(cfs_read_file(t->root_fd, "etc/group", CFS_READ_MAX, &text, &len), 0);
	free(text);
	cfs_guard_mounts(NULL, NULL);
}

static void test_group_find(void **state) {
	static const char text[] = "root:x:0:\n"
				   "inputx:x:5:\n"
				   "broken:x::\n"
				   "huge:x:99999999999:\n"
				   "video:x:44:alice,bob\n"
				   "input:x:101:\n"
				   "input:x:102:\n"
				   "tail:x:7";
	uint32_t gid = 0;

	(void)state;
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "input", &gid), 0);
	assert_int_equal(gid, 101);
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "video", &gid), 0);
	assert_int_equal(gid, 44);
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "tail", &gid), 0);
	assert_int_equal(gid, 7);
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "broken", &gid), -ENOENT);
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "huge", &gid), -ENOENT);
	assert_int_equal(cfs_group_find(text, sizeof(text) - 1, "inpu", &gid), -ENOENT);
	assert_int_equal(cfs_group_find("", 0, "input", &gid), -ENOENT);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_dir_creates_below_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard_refuses_mounts_it_does_not_take, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_dir_refuses_planted_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_file_takes_only_regular_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_file_replaces_planted_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mount_target_never_takes_foreign_files, setup, teardown),
		cmocka_unit_test(test_group_find),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
