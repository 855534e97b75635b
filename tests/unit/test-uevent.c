/* SPDX-License-Identifier: MIT */
#include <endian.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <systemd/sd-device.h>
#include <systemd/sd-event.h>

#include "test-util.h"

#include "populate/udev.h"
#include "populate/uevent.h"

#define SKIPPED 77
/* The host uid of the receiver's root in the user namespace case. */
#define MAPPED_ROOT 100000
#define MAPPED_COUNT 2000

static const char *const tags[] = { "seat", "uaccess", NULL };

static struct uevent_device keyboard(void) {
	return (struct uevent_device){
		.devpath = "/devices/virtual/input/input5/event3",
		.subsystem = "input",
		.devname = "/dev/input/event3",
		.devnum = makedev(511, 7),
		.properties = "ID_INPUT=1\nID_INPUT_KEY=1\nID_INPUT_KEYBOARD=1\n",
		.usec_initialized = 12345,
		.tags = tags,
	};
}

static bool has_property(const uint8_t *props, size_t len, const char *kv) {
	for (size_t off = 0; off < len; off += strlen((const char *)props + off) + 1)
		if (streq((const char *)props + off, kv))
			return true;
	return false;
}

static void test_message_layout(void **state) {
	static const char *const expected[] = {
		"ACTION=add",	   "DEVPATH=/devices/virtual/input/input5/event3",
		"SUBSYSTEM=input", "DEVNAME=/dev/input/event3",
		"MAJOR=511",	   "MINOR=7",
		"SEQNUM=42",	   "USEC_INITIALIZED=12345",
		"ID_INPUT_KEYBOARD=1", "TAGS=:seat:uaccess:",
		"CURRENT_TAGS=:seat:uaccess:",
	};
	struct uevent_device dev = keyboard();
	uint8_t buf[UEVENT_MESSAGE_MAX];
	uint32_t magic, off, len;
	int n;

	(void)state;
	n = uevent_message("add", 42, &dev, buf, sizeof(buf));
	assert_true(n > 40);
	assert_string_equal((const char *)buf, "libudev");
	memcpy(&magic, buf + 8, 4);
	assert_int_equal(be32toh(magic), 0xfeedcafe);
	memcpy(&off, buf + 16, 4);
	memcpy(&len, buf + 20, 4);
	assert_int_equal(off, 40);
	assert_int_equal(off + len, (uint32_t)n);
	assert_int_equal(buf[n - 1], '\0');
	for (size_t i = 0; i < ELEMENTSOF(expected); i++)
		assert_true(has_property(buf + off, len, expected[i]));
	/* Too small a buffer, and a device without a path. */
	assert_int_equal(uevent_message("add", 1, &dev, buf, 64), -ENOBUFS);
	dev.devpath = NULL;
	assert_int_equal(uevent_message("add", 1, &dev, buf, sizeof(buf)), -EINVAL);
}

static void test_db_record_and_uevent_file(void **state) {
	struct udev_node n = { .devnum = makedev(511, 7), .devname = "input/event3" };
	char buf[1024];

	(void)state;
	assert_true(udev_db_record("ID_INPUT=1\nID_INPUT_TOUCHSCREEN=1\n", udev_tags("input"), 99, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "I:99\nE:ID_INPUT=1\nE:ID_INPUT_TOUCHSCREEN=1\nG:seat\nG:uaccess\nQ:seat\nQ:uaccess\nV:1\n");
	assert_int_equal(udev_db_record("ID_INPUT=1\n", udev_tags("input"), 99, buf, 16), -ENOBUFS);
	udev_db_name(n.devnum, buf);
	assert_string_equal(buf, "c511:7");
	assert_true(udev_uevent_file(&n, "MAJOR=13\nMINOR=67\nDEVNAME=input/event3\n", buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "MAJOR=511\nMINOR=7\nDEVNAME=input/event3\n");
}

/* A card's record: the tags logind looks for (seat, master-of-seat) and uaccess, and path_id's properties. */
static void test_card_record(void **state) {
	struct udev_node n = { .devnum = makedev(511, 0), .devname = "dri/card0" };
	char props[UDEV_PROPERTIES_MAX], buf[1024];

	(void)state;
	assert_int_equal(udev_drm_properties("pci-0000:00:02.0", props, sizeof(props)),
			 (int)strlen("ID_PATH=pci-0000:00:02.0\nID_PATH_TAG=pci-0000_00_02_0\nID_FOR_SEAT=drm-pci-0000_00_02_0\n"));
	assert_string_equal(props, "ID_PATH=pci-0000:00:02.0\nID_PATH_TAG=pci-0000_00_02_0\nID_FOR_SEAT=drm-pci-0000_00_02_0\n");
	assert_true(udev_db_record(props, udev_tags("drm"), 7, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "I:7\nE:ID_PATH=pci-0000:00:02.0\nE:ID_PATH_TAG=pci-0000_00_02_0\n"
				 "E:ID_FOR_SEAT=drm-pci-0000_00_02_0\nG:seat\nG:master-of-seat\nG:uaccess\n"
				 "Q:seat\nQ:master-of-seat\nQ:uaccess\nV:1\n");
	/* Runs of other characters are one '_', none at the ends; no path, no properties. */
	assert_true(udev_drm_properties("platform-soc:gpu@1.0-", props, sizeof(props)) > 0);
	assert_string_equal(props, "ID_PATH=platform-soc:gpu@1.0-\nID_PATH_TAG=platform-soc_gpu_1_0-\n"
				   "ID_FOR_SEAT=drm-platform-soc_gpu_1_0-\n");
	assert_int_equal(udev_drm_properties(NULL, props, sizeof(props)), 0);
	assert_string_equal(props, "");
	assert_int_equal(udev_drm_properties("pci-0000:00:02.0", props, 20), -ENOBUFS);
	/* The card's uevent file keeps DEVTYPE and gives the persona's number and name. */
	assert_true(udev_uevent_file(&n, "MAJOR=226\nMINOR=0\nDEVNAME=dri/card0\nDEVTYPE=drm_minor\n", buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "DEVTYPE=drm_minor\nMAJOR=511\nMINOR=0\nDEVNAME=dri/card0\n");
}

/* A directory below root, with a "subsystem" link to a bus named subsystem (NULL: none). */
static void make_device(const char *root, const char *path, const char *subsystem) {
	char dir[PATH_MAX], link[PATH_MAX + 16], target[64];

	snprintf(dir, sizeof(dir), "%s/%s", root, path);
	assert_int_equal(mkdir(dir, 0755), 0);
	if (!subsystem)
		return;
	snprintf(link, sizeof(link), "%s/subsystem", dir);
	snprintf(target, sizeof(target), "../../../bus/%s", subsystem);
	assert_int_equal(symlink(target, link), 0);
}

/* path_id's walk: the card and buses it does not name are passed over, a chain of one bus named once, by its first device. */
/* An evdev node's parent input device, which logind finds among the seat's devices. */
static void test_input_parent(void **state) {
	char id[UDEV_PARENT_ID_MAX];

	(void)state;
	assert_int_equal(udev_input_parent("/sys/devices/virtual/input/input7/event3", id), 0);
	assert_string_equal(id, "+input:input7");
	assert_int_equal(udev_input_parent("/sys/devices/platform/i8042/serio0/input/input12/event0", id), 0);
	assert_string_equal(id, "+input:input12");
	/* Anything else is no input device's node. */
	assert_int_equal(udev_input_parent("/sys/devices/virtual/input/mice", id), -EINVAL);
	assert_int_equal(udev_input_parent("/sys/devices/pci0000:00/0000:00:02.0/drm/card0", id), -EINVAL);
	assert_int_equal(udev_input_parent("/sys/devices/virtual/input/inputx/event3", id), -EINVAL);
	assert_int_equal(udev_input_parent("/sys/devices/virtual/input/input/event3", id), -EINVAL);
	assert_int_equal(udev_input_parent("event3", id), -EINVAL);
}

static void test_path_id(void **state) {
	char root[] = "/tmp/devns-path-id-XXXXXX", card[PATH_MAX], buf[256];

	(void)state;
	assert_non_null(mkdtemp(root));
	make_device(root, "pci0000:00", NULL);
	make_device(root, "pci0000:00/0000:00:01.0", "pci");
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0", "pci");
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0/virtio0", "virtio");
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0/virtio0/drm", NULL);
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0/virtio0/drm/card0", "drm");
	snprintf(card, sizeof(card), "%s/pci0000:00/0000:00:01.0/0000:01:00.0/virtio0/drm/card0", root);
	assert_int_equal(udev_path_id(card, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "pci-0000:01:00.0");
	assert_int_equal(udev_path_id(card, buf, 8), -ENOBUFS);
	/* A platform device under a PCI one: both named, the outer first. */
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0/gpu.1", "platform");
	make_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0/gpu.1/card1", "drm");
	snprintf(card, sizeof(card), "%s/pci0000:00/0000:00:01.0/0000:01:00.0/gpu.1/card1", root);
	assert_int_equal(udev_path_id(card, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "pci-0000:01:00.0-platform-gpu.1");
	/* A virtual card: nothing names it. */
	make_device(root, "virtual", NULL);
	make_device(root, "virtual/card2", "drm");
	snprintf(card, sizeof(card), "%s/virtual/card2", root);
	assert_int_equal(udev_path_id(card, buf, sizeof(buf)), -ENOENT);
	snprintf(card, sizeof(card), "rm -rf '%s'", root);
	assert_int_equal(system(card), 0);
}

/* --- a real receiver: libsystemd's sd_device_monitor, in a network namespace of its own --- */

struct seen {
	int status;
};

static int check_device(sd_device_monitor *m, sd_device *d, void *userdata) {
	struct seen *seen = userdata;
	sd_device_action_t action;
	const char *s;
	dev_t devnum;

	(void)m;
	seen->status = 10;
	if (sd_device_get_action(d, &action) < 0 || action != SD_DEVICE_ADD)
		seen->status = 11;
	else if (sd_device_get_subsystem(d, &s) < 0 || !streq(s, "input"))
		seen->status = 12;
	else if (sd_device_get_devname(d, &s) < 0 || !streq(s, "/dev/input/event3"))
		seen->status = 13;
	else if (sd_device_get_devnum(d, &devnum) < 0 || devnum != makedev(511, 7))
		seen->status = 14;
	else if (sd_device_get_property_value(d, "ID_INPUT_KEYBOARD", &s) < 0 || !streq(s, "1"))
		seen->status = 15;
	else if (sd_device_get_syspath(d, &s) < 0 || !streq(s, "/sys/devices/virtual/input/input5/event3"))
		seen->status = 16;
	else if (sd_device_has_tag(d, "seat") <= 0)
		seen->status = 17;
	else
		seen->status = 0;
	return sd_event_exit(sd_device_monitor_get_event(m), 0);
}

/* A private /run where udev seems to run, as populate leaves a container's. */
static int fake_udev_run(void) {
	int fd;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mount("tmpfs", "/run", "tmpfs", 0, NULL) < 0 ||
	    mkdir("/run/udev", 0755) < 0)
		return -errno;
	fd = open("/run/udev/control", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

_Noreturn static void receiver(bool userns, int to_parent, int from_parent) {
	sd_event *event = NULL;
	sd_device_monitor *mon = NULL;
	struct seen seen = { .status = 1 };
	char c = 0;

	if (userns) {
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(SKIPPED);
		if (write(to_parent, "u", 1) != 1 || read(from_parent, &c, 1) != 1)
			_exit(2);
		/* Root of the new namespace, so that its files have an owner there. */
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
			_exit(SKIPPED);
	}
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 || fake_udev_run() < 0)
		_exit(SKIPPED);
	if (sd_event_new(&event) < 0 || sd_device_monitor_new(&mon) < 0 ||
	    sd_device_monitor_filter_add_match_subsystem_devtype(mon, "input", NULL) < 0 ||
	    sd_device_monitor_attach_event(mon, event) < 0 || sd_device_monitor_start(mon, check_device, &seen) < 0 ||
	    sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, 5 * 1000000, 0, NULL, NULL) < 0)
		_exit(3);
	if (write(to_parent, "r", 1) != 1)
		_exit(2);
	(void)sd_event_loop(event);
	_exit(seen.status);
}

static int write_file(pid_t pid, const char *name, const char *text) {
	char path[64];
	int fd, r = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		r = -errno;
	close(fd);
	return r;
}

/* Sends a keyboard's "add" to a receiver in a new network namespace; the receiver's exit status. */
static int send_to_receiver(bool userns, uid_t uid) {
	int to_parent[2], from_parent[2], netns = -1, status = 0, r;
	struct uevent_device dev = keyboard();
	char c = 0, map[64];
	pid_t pid;

	assert_int_equal(pipe2(to_parent, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from_parent, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		receiver(userns, to_parent[1], from_parent[0]);
	close(to_parent[1]);
	close(from_parent[0]);
	if (userns && read(to_parent[0], &c, 1) == 1) {
		snprintf(map, sizeof(map), "0 %d %d\n", MAPPED_ROOT, MAPPED_COUNT);
		assert_int_equal(write_file(pid, "uid_map", map), 0);
		assert_int_equal(write_file(pid, "setgroups", "deny"), 0);
		assert_int_equal(write_file(pid, "gid_map", map), 0);
		assert_int_equal(write(from_parent[1], "m", 1), 1);
	}
	if (read(to_parent[0], &c, 1) == 1 && c == 'r') {
		int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

		assert_true(pidfd >= 0);
		r = uevent_netns_of_pidfd(pidfd, &netns);
		close(pidfd);
		assert_int_equal(r, 0);
		assert_int_equal(uevent_netns_is_shared(netns), 0);
		assert_int_equal(uevent_send_to_netns(netns, uid, uid, "add", &dev), 1);
		close(netns);
	}
	close(to_parent[0]);
	close(from_parent[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_monitor_receives(void **state) {
	int r;

	(void)state;
	if (geteuid() != 0)
		skip();
	r = send_to_receiver(false, 0);
	if (r == SKIPPED)
		skip();
	assert_int_equal(r, 0);
}

/*
 * Receivers drop what a user of their own user namespace other than root
 * sent (and, before systemd 248 or so, anything not from uid 0 as they see
 * it): the credentials sent are the container's root's host ids.
 */
static void test_monitor_in_a_user_namespace(void **state) {
	int r;

	(void)state;
	if (geteuid() != 0)
		skip();
	r = send_to_receiver(true, MAPPED_ROOT);
	if (r == SKIPPED)
		skip();
	assert_int_equal(r, 0);
	/*
	 * From a user of the container (its uid 1000), the message is dropped:
	 * the credentials sent are the ones receivers judge.
	 */
	assert_int_equal(send_to_receiver(true, MAPPED_ROOT + 1000), 1);
}

static void test_not_into_devnsds_own_namespace(void **state) {
	struct uevent_device dev = keyboard();
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(uevent_netns_is_shared(fd), 1);
	assert_int_equal(uevent_send_to_netns(fd, 0, 0, "add", &dev), 0);
	close(fd);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_message_layout),
		cmocka_unit_test(test_db_record_and_uevent_file),
		cmocka_unit_test(test_card_record),
		cmocka_unit_test(test_input_parent),
		cmocka_unit_test(test_path_id),
		cmocka_unit_test(test_monitor_receives),
		cmocka_unit_test(test_monitor_in_a_user_namespace),
		cmocka_unit_test(test_not_into_devnsds_own_namespace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
