/* SPDX-License-Identifier: MIT */
/*
 * devnsd's D-Bus methods with arguments from the input, called the way a
 * client calls them: through a dbus-daemon of the fuzzer's own (started
 * once, with a policy that lets everyone talk), to a manager that
 * bus_new() registered on it, as devnsd does at start. The manager runs
 * on devnsd's configuration code with three personas and no devices (the
 * device classes need /dev/cuse and FUSE mounts), and is made afresh for
 * every input. Calls come from two connections: one as root and, when the
 * fuzzer runs as root, one as nobody (made with the effective ids of
 * nobody, so that the bus reports that uid).
 *
 * Checked: every call is answered; the manager's persona list stays
 * consistent; a caller that is not root never gets CreatePersona,
 * RemovePersona, Attach, AttachMachine, Detach or Screenshot through;
 * after the input devnsd still answers ListPersonas.
 *
 * Not reached: pids of other pid namespaces (the pid of Attach is mapped to
 * the fuzzer's own or to a pid that cannot exist, so populate never runs
 * and no container is touched; no devnsd-zygote is started either, so no
 * helper could be forked: populate fails with ENOTCONN), machines (no systemd-machined on this bus:
 * AttachMachine fails at the lookup), node listings and screenshots of real
 * nodes (no devices).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/bus.h"
#include "conf/conf.h"
#include "input/input.h"
#include "core/manager.h"
#include "fuzz-input.h"
#include "log.h"

#define OPS_MAX 80
#define CALL_TIMEOUT_USEC (5 * 1000000ULL)
#define NOBODY 65534

static const char conf_text[] = "[Daemon]\n"
				"SwitchGroup=nogroup\n"
				"[Persona work]\n"
				"Active=yes\n"
				"[Persona personal]\n"
				"AllowRequestActive=yes\n"
				"[Persona kiosk]\n";

static const char bus_conf_fmt[] =
	"<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
	" \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
	"<busconfig>\n"
	"  <type>devns-fuzz</type>\n"
	"  <listen>unix:abstract=/devns/fuzz-bus/%d</listen>\n"
	"  <auth>EXTERNAL</auth>\n"
	"  <policy context=\"default\">\n"
	"    <allow user=\"*\"/>\n"
	"    <allow own=\"*\"/>\n"
	"    <allow send_destination=\"*\"/>\n"
	"    <allow receive_sender=\"*\"/>\n"
	"  </policy>\n"
	"</busconfig>\n";

struct method {
	const char *interface, *member, *signature;
	bool privileged; /* root only */
};

static const struct method methods[] = {
	{ "org.devns1.Manager", "SwitchTo", "s", false },
	{ "org.devns1.Manager", "ListPersonas", "", false },
	{ "org.devns1.Manager", "ListNodes", "", false },
	{ "org.devns1.Manager", "CreatePersona", "s", true },
	{ "org.devns1.Manager", "RemovePersona", "s", true },
	{ "org.devns1.Manager", "Attach", "su", true },
	{ "org.devns1.Manager", "AttachMachine", "ss", true },
	{ "org.devns1.Manager", "RequestActive", "", false },
	{ "org.devns1.Manager", "ListLights", "", false },
	{ "org.devns1.Manager", "Screenshot", "s", true },
	{ "org.freedesktop.DBus.Properties", "Get", "ss", false },
	{ "org.freedesktop.DBus.Properties", "GetAll", "s", false },
	{ "org.freedesktop.DBus.Introspectable", "Introspect", "", false },
	{ "org.devns1.Manager", "Detach", "s", true },
};

static const char *const names[] = {
	"work", "personal", "kiosk", "new", "org.devns1.Manager", "ActivePersona", "FramesShown", "",
	"-dash", "a/b", "..", "0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef0",
};

struct client {
	sd_bus *bus;
	uid_t uid;
};

static struct {
	char dir[PATH_MAX];
	pid_t daemon;
	sd_event *event;
	struct conf *conf;
	struct client clients[2];
	pid_t pid_max;
} rig = { .daemon = -1 };

static void write_file(const char *name, const char *text) {
	char path[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", rig.dir, name);
	f = fopen(path, "we");
	fuzz_assert(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void stop_bus(void) {
	char path[PATH_MAX + 32];

	if (rig.daemon > 0) {
		kill(rig.daemon, SIGTERM);
		waitpid(rig.daemon, NULL, 0);
	}
	for (const char *const *n = (const char *const[]){ "bus.conf", "devnsd.conf", "state/devices", NULL };
	     *n; n++) {
		snprintf(path, sizeof(path), "%s/%s", rig.dir, *n);
		unlink(path);
	}
	for (const char *const *n = (const char *const[]){ "state", "endpoints", NULL }; *n; n++) {
		snprintf(path, sizeof(path), "%s/%s", rig.dir, *n);
		rmdir(path);
	}
	rmdir(rig.dir);
}

/* A dbus-daemon of our own; returns its address once it listens. */
static void start_bus(char *address, size_t size) {
	const char *dbus_daemon = getenv("DEVNS_DBUS_DAEMON") ?: "dbus-daemon";
	char conf[8192], conf_path[PATH_MAX + 32];
	int pipefd[2];
	ssize_t n;

	snprintf(conf, sizeof(conf), bus_conf_fmt, (int)getpid());
	write_file("bus.conf", conf);
	snprintf(conf_path, sizeof(conf_path), "--config-file=%s/bus.conf", rig.dir);
	fuzz_assert(pipe2(pipefd, O_CLOEXEC) == 0);
	rig.daemon = fork();
	fuzz_assert(rig.daemon >= 0);
	if (rig.daemon == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(pipefd[1], 3);
		execlp(dbus_daemon, dbus_daemon, conf_path, "--nofork", "--nopidfile", "--print-address=3", NULL);
		_exit(127);
	}
	close(pipefd[1]);
	n = read(pipefd[0], address, size - 1);
	close(pipefd[0]);
	if (n <= 0) {
		fprintf(stderr, "%s did not start\n", dbus_daemon);
		abort();
	}
	address[strcspn(address, "\n")] = '\0';
}

static void connect_client(struct client *c, uid_t uid) {
	const char *unique;

	/* The bus takes the caller's ids when it connects: take nobody's for that long. */
	if (uid != 0)
		fuzz_assert(setegid(NOBODY) == 0 && seteuid(uid) == 0);
	fuzz_assert(sd_bus_open_system(&c->bus) >= 0);
	fuzz_assert(sd_bus_get_unique_name(c->bus, &unique) >= 0);
	if (uid != 0)
		fuzz_assert(seteuid(0) == 0 && setegid(0) == 0);
	fuzz_assert(sd_bus_attach_event(c->bus, rig.event, 0) >= 0);
	c->uid = uid;
}

static void rig_setup(void) {
	char address[512], path[PATH_MAX + 32], *error = NULL;
	FILE *f;

	snprintf(rig.dir, sizeof(rig.dir), "%s/devns-fuzz-bus-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	fuzz_assert(mkdtemp(rig.dir));
	atexit(stop_bus);
	start_bus(address, sizeof(address));
	fuzz_assert(setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1) == 0);
	snprintf(path, sizeof(path), "%s/state", rig.dir);
	fuzz_assert(setenv("DEVNS_STATE_DIR", path, 1) == 0);
	/* The personas' endpoints, which bus_new() makes, in the rig's directory, not the host's /run. */
	snprintf(path, sizeof(path), "%s/endpoints", rig.dir);
	fuzz_assert(setenv("DEVNS_ENDPOINT_DIR", path, 1) == 0);
	write_file("devnsd.conf", conf_text);
	snprintf(path, sizeof(path), "%s/devnsd.conf", rig.dir);
	fuzz_assert(conf_load(path, &rig.conf, &error) == 0);
	log_set_max_level(LOG_ERR);
	fuzz_assert(sd_event_new(&rig.event) >= 0);

	f = fopen("/proc/sys/kernel/pid_max", "re");
	fuzz_assert(f && fscanf(f, "%d", &rig.pid_max) == 1);
	fclose(f);

	connect_client(&rig.clients[0], geteuid());
	connect_client(&rig.clients[1], geteuid() == 0 ? NOBODY : geteuid());
}

/* A string argument: a name devnsd knows or might, or bytes from the input made valid UTF-8. */
static void append_string(sd_bus_message *m, struct fuzz_input *in) {
	char s[128];
	uint8_t how = fuzz_u8(in);
	size_t len;
	int r;

	if (how & 1) {
		r = sd_bus_message_append_basic(m, 's', names[(how >> 1) % ELEMENTSOF(names)]);
		fuzz_assert(r >= 0);
		return;
	}
	len = fuzz_bytes(in, s, fuzz_len(in, sizeof(s) - 1));
	s[len] = '\0';
	if (sd_bus_message_append_basic(m, 's', s) >= 0)
		return;
	for (size_t i = 0; i < len; i++)
		s[i] = (char)((s[i] & 0x7f) ?: 'x');
	fuzz_assert(sd_bus_message_append_basic(m, 's', s) >= 0);
}

/* Attach's pid: devnsd's own namespace (refused), or a pid no process can have. */
static uint32_t safe_pid(uint32_t v) {
	if (v == 0 || v > INT32_MAX)
		return v;
	return v & 1 ? (uint32_t)getpid() : (uint32_t)rig.pid_max + 1 + (v >> 1) % 4096;
}

static void append_args(sd_bus_message *m, const char *signature, bool attach, struct fuzz_input *in) {
	for (const char *t = signature; *t; t++) {
		uint32_t u;
		int r;

		switch (*t) {
		case 's':
			append_string(m, in);
			break;
		case 'u':
			u = fuzz_u32(in);
			if (attach)
				u = safe_pid(u);
			r = sd_bus_message_append_basic(m, 'u', &u);
			fuzz_assert(r >= 0);
			break;
		default:
			abort();
		}
	}
}

struct call {
	bool done, failed;
	char error[256];
};

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	struct call *call = userdata;
	const sd_bus_error *e = sd_bus_message_get_error(reply);

	(void)ret_error;
	call->done = true;
	call->failed = e != NULL;
	if (e)
		snprintf(call->error, sizeof(call->error), "%s", e->name);
	return 0;
}

/* Sends a call and runs the event loop (devnsd's and the client's) until it is answered. */
static void call_method(struct client *c, const char *destination, const char *path, const char *interface,
			const char *member, const char *signature, bool attach, struct fuzz_input *in,
			struct call *call) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

	*call = (struct call){ 0 };
	fuzz_assert(sd_bus_message_new_method_call(c->bus, &m, destination, path, interface, member) >= 0);
	append_args(m, signature, attach, in);
	fuzz_assert(sd_bus_call_async(c->bus, NULL, m, on_reply, call, CALL_TIMEOUT_USEC) >= 0);
	while (!call->done)
		fuzz_assert(sd_event_run(rig.event, UINT64_MAX) >= 0);
	if (call->failed && (streq(call->error, SD_BUS_ERROR_TIMEOUT) || streq(call->error, SD_BUS_ERROR_NO_REPLY))) {
		fprintf(stderr, "%s.%s got no answer: %s\n", interface ?: "", member, call->error);
		abort();
	}
}

static void check_manager(const struct manager *m) {
	const struct persona *p;
	unsigned int n = 0;
	bool active_listed = false;

	LIST_FOREACH(p, &m->personas, link) {
		fuzz_assert(name_is_valid(p->name));
		active_listed = active_listed || p == m->active;
		n++;
	}
	fuzz_assert(n == m->n_personas && n >= 1 && n <= CONF_MAX_PERSONAS && active_listed);
}

static void one_call(struct manager *m, const char *server, struct fuzz_input *in) {
	uint8_t how = fuzz_u8(in);
	struct client *c = &rig.clients[(how >> 7) & 1];
	const struct method *meth = &methods[fuzz_u8(in) % ELEMENTSOF(methods)];
	const char *path = how & 1 ? "/" : "/org/devns1", *interface = how & 2 ? NULL : meth->interface;
	const char *signature = meth->signature;
	struct call call;

	/* Now and then arguments of another method's types, which the bus library turns away. */
	if ((how & 0x0c) == 0x0c)
		signature = methods[fuzz_u8(in) % ELEMENTSOF(methods)].signature;
	call_method(c, server, path, interface, meth->member, signature, streq(meth->member, "Attach"), in, &call);
	if (c->uid != 0 && meth->privileged && !call.failed) {
		fprintf(stderr, "%s succeeded for uid %u\n", meth->member, (unsigned int)c->uid);
		abort();
	}
	check_manager(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct fuzz_input in = { data, size };
	_cleanup_(manager_freep) struct manager *m = NULL;
	_cleanup_(bus_freep) struct bus *bus = NULL;
	struct input_class *input;
	const char *server;
	struct call call;
	int r;

	if (!rig.event)
		rig_setup();
	/* Setting up is devnsd's start, not what is fuzzed: a bus slow under load gets a second chance. */
	for (int attempt = 1;; attempt++) {
		fuzz_assert(manager_new(&m, rig.event, rig.conf) == 0);
		fuzz_assert(input_class_new(m, rig.conf, &input) == 0);
		fuzz_assert(manager_add_class(m, &input->base) == 0);
		r = bus_new(&bus, m, NULL, NULL);
		if (r == 0)
			break;
		fprintf(stderr, "bus_new() failed (attempt %d): %s\n", attempt, strerror(-r));
		fuzz_assert(attempt < 3);
		m = manager_free(m);
		usleep(100 * 1000);
	}
	fuzz_assert(sd_bus_get_unique_name(bus->bus, &server) >= 0);

	for (unsigned int i = 0; i < OPS_MAX && !fuzz_done(&in); i++)
		one_call(m, server, &in);

	/* devnsd still answers. */
	call_method(&rig.clients[0], server, "/org/devns1", "org.devns1.Manager", "ListPersonas", "", false, &in,
		    &call);
	fuzz_assert(!call.failed);
	/* The bus may see the next input's manager connect before this one hang up: the name must be free by then. */
	fuzz_assert(sd_bus_release_name(bus->bus, "org.devns1") >= 0);
	return 0;
}
