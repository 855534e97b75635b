/* SPDX-License-Identifier: MIT */
#include "test-util.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "restart/state-record.h"
#include "populate/mountinfo.h"
#include "populate/populate-internal.h"
#include "populate/view-mounts.h"

static const char good[] = "devnsd-state 1\n"
			   "seq 42\n"
			   "active work\n"
			   "view 0:52\n"
			   "persona work configured\n"
			   "persona phone created\n"
			   "attach phone 1234 98765 4 4026532281\n"
			   "item work input event0 leds 0x2\n"
			   "item phone display var 1280 800 1280 1600 0 800 0\n"
			   "end\n";

static int parse(struct state_record *r, const char *text, size_t len) {
	char error[256] = "";

	return state_record_parse(r, text, len, error, sizeof(error));
}

static void test_round_trip(void **unused) {
	struct state_record r, again;
	char *text;
	size_t len;

	(void)unused;
	assert_int_equal(parse(&r, good, strlen(good)), 0);
	assert_string_equal(r.active, "work");
	assert_int_equal(r.seq, 42);
	assert_int_equal(r.n_personas, 2);
	assert_false(r.personas[0].created);
	assert_true(r.personas[1].created);
	assert_true(r.personas[1].attached);
	assert_int_equal(r.personas[1].pid, 1234);
	assert_int_equal(r.personas[1].start_time, 98765);
	assert_int_equal(r.personas[1].ns_ino, 4026532281u);
	assert_int_equal(r.view_dev, 52);
	assert_int_equal(r.n_items, 2);
	assert_string_equal(r.items[0].key, "event0");
	assert_string_equal(r.items[0].value, "leds 0x2");
	assert_string_equal(r.items[1].value, "1280 800 1280 1600 0 800 0");
	assert_int_equal(state_record_format(&r, &text, &len), 0);
	assert_string_equal(text, good);
	assert_int_equal(parse(&again, text, len), 0);
	assert_int_equal(again.n_items, 2);
	free(text);
	state_record_done(&again);
	state_record_done(&r);
}

/* Every bad input is refused as a whole, with a reason, and leaves nothing behind. */
static void test_bad_inputs(void **unused) {
	static const char *const bad[] = {
		"",
		"\n",
		"devnsd-state 2\nend\n",
		"devnsd-state 1\nseq\nend\n",
		"devnsd-state 1\nseq -1\nend\n",
		"devnsd-state 1\nseq 1 2\nend\n",
		"devnsd-state 1\n",                       /* no end: cut short */
		"devnsd-state 1\nactive work\n",          /* cut short */
		"devnsd-state 1\nactive work\nend",       /* no final newline */
		"devnsd-state 1\nend\nactive work\n",     /* after the end */
		"devnsd-state 1\nactive ../etc\nend\n",
		"devnsd-state 1\nactive\nend\n",
		"devnsd-state 1\nactive a b\nend\n",
		"devnsd-state 1\npersona work maybe\nend\n",
		"devnsd-state 1\npersona work configured\npersona work created\nend\n",
		"devnsd-state 1\nattach ghost 1 2 3 4\nend\n",
		"devnsd-state 1\npersona w created\nattach w 0 2 3 4\nend\n",
		"devnsd-state 1\npersona w created\nattach w -5 2 3 4\nend\n",
		"devnsd-state 1\npersona w created\nattach w 99999999999 2 3 4\nend\n",
		"devnsd-state 1\npersona w created\nattach w 1 2 3\nend\n",
		"devnsd-state 1\npersona w created\nattach w 1 2 3 4 5\nend\n",
		"devnsd-state 1\npersona w created\nattach w 1 2 3 99999999999999999999999\nend\n",
		"devnsd-state 1\npersona w created\nattach w 1 2 3 4\nattach w 1 2 3 4\nend\n",
		"devnsd-state 1\nitem ghost leds k v\nend\n",
		"devnsd-state 1\npersona w created\nitem w leds k\nend\n",
		"devnsd-state 1\npersona w created\nitem w le/ds k v\nend\n",
		"devnsd-state 1\npersona w created\nitem w leds k v\x01\nend\n",
		"devnsd-state 1\nview 1\nend\n",
		"devnsd-state 1\nview 1:2:3\nend\n",
		"devnsd-state 1\nview 99999999:1\nend\n",
		"devnsd-state 1\nbogus\nend\n",
		"devnsd-state 1\nend extra\nend\n",
		"\xff\xfe garbage",
	};
	struct state_record r;
	char error[256];

	(void)unused;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		error[0] = '\0';
		if (state_record_parse(&r, bad[i], strlen(bad[i]), error, sizeof(error)) != -EBADMSG)
			fail_msg("accepted bad input %zu", i);
		assert_true(error[0] != '\0');
		assert_int_equal(r.n_personas, 0);
		assert_int_equal(r.n_items, 0);
		assert_null(r.items);
	}
}

static void test_nul_and_limits(void **unused) {
	static const char nul[] = "devnsd-state 1\nactive wo\0rk\nend\n";
	struct state_record r;
	char *big, line[STATE_RECORD_MAX_LINE + 8];
	size_t len = 0;

	(void)unused;
	assert_int_equal(parse(&r, nul, sizeof(nul) - 1), -EBADMSG);

	/* A line past the limit. */
	memset(line, 'a', sizeof(line));
	big = malloc(STATE_RECORD_MAX_SIZE + 64);
	assert_non_null(big);
	len = (size_t)sprintf(big, "devnsd-state 1\n%.*s\nend\n", (int)sizeof(line), line);
	assert_int_equal(parse(&r, big, len), -EBADMSG);

	/* Past the personas' limit. */
	len = (size_t)sprintf(big, "devnsd-state 1\n");
	for (int i = 0; i <= CONF_MAX_PERSONAS; i++)
		len += (size_t)sprintf(big + len, "persona p%d created\n", i);
	len += (size_t)sprintf(big + len, "end\n");
	assert_int_equal(parse(&r, big, len), -EBADMSG);

	/* Past the items' limit. */
	len = (size_t)sprintf(big, "devnsd-state 1\npersona w created\n");
	for (int i = 0; i <= STATE_RECORD_MAX_ITEMS; i++)
		len += (size_t)sprintf(big + len, "item w leds k%d v\n", i);
	len += (size_t)sprintf(big + len, "end\n");
	assert_int_equal(parse(&r, big, len), -EBADMSG);

	/* Larger than the record may be. */
	assert_int_equal(parse(&r, big, STATE_RECORD_MAX_SIZE + 1), -EBADMSG);
	free(big);
}

/* Every prefix of a good record (a write cut short) is refused. */
static void test_truncated(void **unused) {
	struct state_record r;

	(void)unused;
	for (size_t len = 0; len < strlen(good); len++)
		assert_int_equal(parse(&r, good, len), -EBADMSG);
}

static void test_view_mounts(void **unused) {
	static const char info[] =
		"22 1 0:20 / / rw - overlay overlay rw\n"
		"40 22 0:52 /work/sys/class/leds /sys/class/leds rw - fuse.devns devns rw\n"
		"41 22 0:52 /work/sys/class/backlight /sys/class/back\\040light rw - fuse.devns devns rw\n"
		/* Another persona's view, a look-alike on another file system, a root escaping the persona. */
		"42 22 0:52 /phone/sys/class/leds /mnt/phone rw - fuse.devns devns rw\n"
		"43 22 0:53 /work/sys/class/leds /mnt/fake rw - fuse.devns devns rw\n"
		"44 22 0:52 /worker/sys /mnt/worker rw - fuse.devns devns rw\n"
		"45 22 0:52 /work/../phone /mnt/up rw - fuse.devns devns rw\n"
		"46 22 0:52 /work / rw - fuse.devns devns rw\n"
		/* A mount point the kernel would never write (not canonical). */
		"50 22 0:52 /work/sys //..sys/x rw - fuse.devns devns rw\n"
		/* The same number on another type, optional fields before the separator. */
		"48 22 0:52 /work/sys/class/leds /mnt/tmp rw - tmpfs tmpfs rw\n"
		"49 22 0:52 /work/sys/class/leds /mnt/opt rw shared:7 master:3 - fuse.devns devns rw\n"
		"47 22 0:52 /work/sys /mnt/cut";
	struct view_mount vm[VIEW_MOUNTS_MAX];
	size_t n;

	(void)unused;
	n = view_mounts_find(info, strlen(info), makedev(0, 52), "work", vm, VIEW_MOUNTS_MAX);
	assert_int_equal(n, 3);
	assert_int_equal(vm[0].mnt_id, 40);
	assert_string_equal(vm[0].target, "sys/class/leds");
	assert_string_equal(vm[0].root, "work/sys/class/leds");
	assert_string_equal(vm[1].target, "sys/class/back light");
	assert_string_equal(vm[2].target, "mnt/opt");
	assert_int_equal(view_mounts_find(info, strlen(info), 0, "work", vm, VIEW_MOUNTS_MAX), 0);
	assert_int_equal(view_mounts_find(info, strlen(info), makedev(0, 52), "work", vm, 1), 1);
}

/* Which of a container's mounts pass nothing on, as the populate helper is told (from a /proc/PID stand-in). */
static void test_private_mounts(void **unused) {
	static const char info[] = "22 1 0:20 / / rw shared:1 - overlay overlay rw\n"
				   "30 22 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
				   "31 30 0:22 / /sys/dev rw master:4 - tmpfs tmpfs rw\n"
				   "32 30 0:23 / /sys/kernel rw shared:9 master:4 - tmpfs tmpfs rw\n"
				   "not a mount\n"
				   "33 22 0:24 / /cut rw - tmpfs tmpfs rw";
	char dir[] = "/tmp/devns-test-XXXXXX", path[64];
	struct plan *plan = calloc(1, sizeof(*plan));
	struct libmnt_table *own = NULL;
	int proc_fd, fd;

	(void)unused;
	assert_non_null(plan);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mountinfo", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, info, strlen(info)), (ssize_t)strlen(info));
	close(fd);
	proc_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(proc_fd >= 0);
	/* The host's and devnsd's peer groups not known: every shared mount may reach them. */
	populate_plan_mountinfo(plan, proc_fd, NULL);
	assert_true(plan->mounts_read);
	assert_int_equal(plan->n_private_mounts, 2);
	assert_int_equal(plan->private_mounts[0], 30);
	assert_int_equal(plan->private_mounts[1], 31);
	/* Known: group 1 is the host's, 9 only the container's own (mount 32 receives from the host's 4, passes on to 9). */
	plan->outside_known = true;
	plan->outside_groups[0] = 4;
	plan->outside_groups[1] = 1;
	plan->n_outside_groups = 2;
	populate_plan_mountinfo(plan, proc_fd, NULL);
	assert_int_equal(plan->n_private_mounts, 3);
	assert_int_equal(plan->private_mounts[2], 32);
	/* Group 9 is one of the host's too. */
	plan->outside_groups[plan->n_outside_groups++] = 9;
	populate_plan_mountinfo(plan, proc_fd, NULL);
	assert_int_equal(plan->n_private_mounts, 2);
	/* devnsd's own table not read: not known; read, with the host's first process's: known. */
	populate_plan_outside(plan, NULL);
	assert_false(plan->outside_known);
	assert_int_equal(mountinfo_read(AT_FDCWD, "/proc/self/mountinfo", MOUNTINFO_MAX, &own, NULL), 0);
	populate_plan_outside(plan, own);
	assert_true(plan->outside_known);
	mnt_unref_table(own);
	/* Empty: not read, as a table that could not be read. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	populate_plan_mountinfo(plan, proc_fd, NULL);
	assert_false(plan->mounts_read);
	assert_int_equal(plan->n_private_mounts, 0);
	close(proc_fd);
	unlink(path);
	rmdir(dir);
	free(plan);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_bad_inputs),
		cmocka_unit_test(test_nul_and_limits),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_view_mounts),
		cmocka_unit_test(test_private_mounts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
