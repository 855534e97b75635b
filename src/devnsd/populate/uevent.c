/* SPDX-License-Identifier: MIT */
#include <endian.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "populate/udev.h"
#include "populate/uevent.h"
#include "util.h"

#define UEVENT_MAGIC 0xfeedcafe

/* libudev's monitor header; the magic and filter fields are big-endian, the rest native. */
struct uevent_header {
	char prefix[8];
	uint32_t magic;
	uint32_t header_size;
	uint32_t properties_off;
	uint32_t properties_len;
	uint32_t filter_subsystem_hash;
	uint32_t filter_devtype_hash;
	uint32_t filter_tag_bloom_hi;
	uint32_t filter_tag_bloom_lo;
};

static atomic_uint_fast64_t seqnum;

uint32_t uevent_hash32(const char *s) {
	const uint32_t m = 0x5bd1e995;
	size_t len = strlen(s);
	const unsigned char *data = (const unsigned char *)s;
	uint32_t h = (uint32_t)len;

	for (; len >= 4; data += 4, len -= 4) {
		uint32_t k;
		memcpy(&k, data, 4);
		k *= m;
		k ^= k >> 24;
		k *= m;
		h *= m;
		h ^= k;
	}
	switch (len) {
	case 3:
		h ^= (uint32_t)data[2] << 16;
		__attribute__((fallthrough));
	case 2:
		h ^= (uint32_t)data[1] << 8;
		__attribute__((fallthrough));
	case 1:
		h ^= data[0];
		h *= m;
		break;
	default:
		break;
	}
	h ^= h >> 13;
	h *= m;
	h ^= h >> 15;
	return h;
}

static uint64_t tag_bloom(const char *tag) {
	uint32_t h = uevent_hash32(tag);

	return (UINT64_C(1) << (h & 63)) | (UINT64_C(1) << ((h >> 6) & 63)) | (UINT64_C(1) << ((h >> 12) & 63)) |
	       (UINT64_C(1) << ((h >> 18) & 63));
}

/* Appends KEY=VALUE and its NUL. */
static int put(uint8_t *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static int put(uint8_t *buf, size_t size, size_t *len, const char *fmt, ...) {
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf((char *)buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 1 > size - *len)
		return -ENOBUFS;
	*len += (size_t)n + 1;
	return 0;
}

static int put_tags(uint8_t *buf, size_t size, size_t *len, const char *key, const char *const *tags) {
	char list[256];
	size_t n = 0;

	if (!tags || !tags[0])
		return 0;
	list[n++] = ':';
	for (size_t i = 0; tags[i]; i++) {
		int k = snprintf(list + n, sizeof(list) - n, "%s:", tags[i]);
		if (k < 0 || (size_t)k >= sizeof(list) - n)
			return -ENOBUFS;
		n += (size_t)k;
	}
	return put(buf, size, len, "%s=%s", key, list);
}

int uevent_message(const char *action, uint64_t seq, const struct uevent_device *dev, uint8_t *buf, size_t size) {
	struct uevent_header h = { .prefix = "libudev" };
	size_t len = sizeof(h);
	uint64_t bloom = 0;
	int r;

	if (!action || !dev->devpath || !dev->subsystem || size < sizeof(h))
		return -EINVAL;
	r = put(buf, size, &len, "ACTION=%s", action);
	if (r >= 0)
		r = put(buf, size, &len, "DEVPATH=%s", dev->devpath);
	if (r >= 0)
		r = put(buf, size, &len, "SUBSYSTEM=%s", dev->subsystem);
	if (r >= 0 && dev->devtype)
		r = put(buf, size, &len, "DEVTYPE=%s", dev->devtype);
	if (r >= 0 && dev->devname)
		r = put(buf, size, &len, "DEVNAME=%s", dev->devname);
	if (r >= 0 && major(dev->devnum) != 0)
		r = put(buf, size, &len, "MAJOR=%u", major(dev->devnum));
	if (r >= 0 && major(dev->devnum) != 0)
		r = put(buf, size, &len, "MINOR=%u", minor(dev->devnum));
	if (r >= 0)
		r = put(buf, size, &len, "SEQNUM=%" PRIu64, seq);
	if (r >= 0 && dev->usec_initialized)
		r = put(buf, size, &len, "USEC_INITIALIZED=%" PRIu64, dev->usec_initialized);
	for (const char *line = dev->properties ? dev->properties : ""; r >= 0 && *line;) {
		size_t n = strcspn(line, "\n");
		if (n > 0 && memchr(line, '=', n))
			r = put(buf, size, &len, "%.*s", (int)n, line);
		line += n + (line[n] ? 1 : 0);
	}
	if (r >= 0)
		r = put_tags(buf, size, &len, "TAGS", dev->tags);
	if (r >= 0)
		r = put_tags(buf, size, &len, "CURRENT_TAGS", dev->tags);
	if (r < 0)
		return r;

	for (size_t i = 0; dev->tags && dev->tags[i]; i++)
		bloom |= tag_bloom(dev->tags[i]);
	h.magic = htobe32(UEVENT_MAGIC);
	h.header_size = sizeof(h);
	h.properties_off = sizeof(h);
	h.properties_len = (uint32_t)(len - sizeof(h));
	h.filter_subsystem_hash = htobe32(uevent_hash32(dev->subsystem));
	h.filter_devtype_hash = dev->devtype ? htobe32(uevent_hash32(dev->devtype)) : 0;
	h.filter_tag_bloom_hi = htobe32((uint32_t)(bloom >> 32));
	h.filter_tag_bloom_lo = htobe32((uint32_t)bloom);
	memcpy(buf, &h, sizeof(h));
	return (int)len;
}

void uevent_device_for_node(const struct udev_node *n, uint64_t usec_initialized, char devname[static UEVENT_DEVNAME_MAX],
			    struct uevent_device *ret) {
	snprintf(devname, UEVENT_DEVNAME_MAX, "/dev/%s", n->devname);
	*ret = (struct uevent_device){
		.devpath = n->syspath + 4, /* without "/sys" */
		.subsystem = n->subsystem[0] ? n->subsystem : "input",
		.devtype = n->devtype[0] ? n->devtype : NULL,
		.devname = devname,
		.devnum = n->devnum,
		.properties = n->properties,
		.usec_initialized = usec_initialized,
		.tags = udev_tags(n->subsystem),
	};
}

int uevent_netns_of_pidfd(int pidfd, int *ret_fd) {
	return pidfd_open_file(pidfd, "ns/net", ret_fd);
}

int uevent_netns_is_shared(int netns_fd) {
	static const char *const shared[] = { "/proc/self/ns/net", "/proc/1/ns/net" };
	struct stat st, other;

	if (fstat(netns_fd, &st) < 0)
		return -errno;
	for (size_t i = 0; i < ELEMENTSOF(shared); i++)
		if (stat(shared[i], &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino)
			return 1;
	return 0;
}

struct socket_job {
	int netns_fd;
	int fd;
	int r;
};

/* Runs in a thread of its own: only that thread enters the namespace, and it ends right after. */
static void *socket_in_netns(void *userdata) {
	struct socket_job *job = userdata;

	if (setns(job->netns_fd, CLONE_NEWNET) < 0) {
		job->r = -errno;
		return NULL;
	}
	job->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
	job->r = job->fd < 0 ? -errno : 0;
	return NULL;
}

static int open_socket(int netns_fd, int *ret_fd) {
	struct socket_job job = { .netns_fd = netns_fd, .fd = -1 };
	pthread_t thread;
	int r;

	r = pthread_create(&thread, NULL, socket_in_netns, &job);
	if (r != 0)
		return -r;
	r = pthread_join(thread, NULL);
	if (r != 0)
		return -r;
	if (job.r < 0)
		return job.r;
	*ret_fd = job.fd;
	return 0;
}

int uevent_send_to_netns(int netns_fd, uid_t uid, gid_t gid, const char *action, const struct uevent_device *dev) {
	_cleanup_(closep) int fd = -1;
	_cleanup_(freep) uint8_t *buf = NULL;
	struct sockaddr_nl to = { .nl_family = AF_NETLINK, .nl_groups = UEVENT_GROUP_UDEV };
	union {
		struct cmsghdr h;
		uint8_t buf[CMSG_SPACE(sizeof(struct ucred))];
	} control = { 0 };
	struct ucred cred = { .pid = getpid(), .uid = uid, .gid = gid };
	struct iovec iov;
	struct msghdr msg = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = &control, .msg_controllen = sizeof(control) };
	struct cmsghdr *cmsg;
	int r, len;

	r = uevent_netns_is_shared(netns_fd);
	if (r != 0)
		return r < 0 ? r : 0;
	buf = malloc(UEVENT_MESSAGE_MAX);
	if (!buf)
		return -ENOMEM;
	len = uevent_message(action, atomic_fetch_add(&seqnum, 1) + 1, dev, buf, UEVENT_MESSAGE_MAX);
	if (len < 0)
		return len;
	r = open_socket(netns_fd, &fd);
	if (r < 0)
		return r;
	iov = (struct iovec){ .iov_base = buf, .iov_len = (size_t)len };
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_CREDENTIALS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(cred));
	memcpy(CMSG_DATA(cmsg), &cred, sizeof(cred));
	if (sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		/* Nobody listening in that namespace is no failure. */
		return errno == ECONNREFUSED || errno == ESRCH ? 1 : -errno;
	return 1;
}
