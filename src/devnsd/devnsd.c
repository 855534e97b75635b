/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "cuse-device.h"
#include "bus/bus.h"
#include "conf/conf.h"
#include "core/devnum.h"
#include "restart/fdstore.h"
#include "input/hotplug.h"
#include "display/display.h"
#include "input/input.h"
#include "leds/leds.h"
#include "core/manager.h"
#include "populate/populate.h"
#include "restart/state.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#define EXIT_CONFIG 2

static void help(void) {
	printf("Usage: devnsd [OPTION...]\n"
	       "Share one set of devices among several personas (containers).\n\n"
	       "  -c, --config FILE   configuration file (default " CONF_DEFAULT_PATH ")\n"
	       "  -t, --test          check the configuration and exit\n"
	       "  -h, --help          show this help\n"
	       "      --version       show the version\n");
}

/*
 * The device classes, registered with the manager, which owns them from
 * then on. Input first: the LEDs of its devices go through its nodes, and
 * the manager drives the newest class first.
 */
static int add_classes(struct manager *m, const struct conf *conf, struct input_class **ret_input,
		       struct display_class **ret_display, struct leds_class **ret_leds) {
	struct display_class *display = NULL;
	struct input_class *input;
	struct leds_class *leds;
	int r;

	r = display_wait_device(m, conf);
	if (r < 0)
		return r;
	r = input_class_new(m, conf, &input);
	if (r < 0)
		return r;
	r = manager_add_class(m, &input->base);
	if (r < 0)
		return r;
	r = leds_class_new(m, conf, input, &leds);
	if (r < 0)
		return r;
	if (leds) {
		leds_watch_lights(leds);
		r = manager_add_class(m, leds_class_base(leds));
		if (r < 0)
			return r;
	}
	if (conf->display != DISPLAY_NONE) {
		r = display_class_new(m, conf, &display);
		if (r < 0)
			return r;
		r = manager_add_class(m, display_class_base(display));
		if (r < 0)
			return r;
	}
	*ret_input = input;
	*ret_display = display;
	*ret_leds = leds;
	return 0;
}

/* The nodes' CUSE connections go to the same store as the framebuffers' memory. */
static int keeper_take(void *userdata, const char *name, int *ret_fd) {
	return state_take_fd(userdata, name, ret_fd);
}

/* Room is left for what a restart needs most: each persona's framebuffer and the state record. */
#define KEEP_FOR_STATE (CONF_MAX_PERSONAS + 2)

static int keeper_keep(void *userdata, const char *name, int fd) {
	if (state_fd_room(userdata) <= KEEP_FOR_STATE)
		return -ENOSPC;
	return state_keep_fd(userdata, name, fd);
}

static void keeper_forget(void *userdata, const char *name) {
	state_forget_fd(userdata, name);
}

static void keeper_sync(void *userdata) {
	state_sync_fds(userdata);
}

_Static_assert(sizeof(CUSE_KEEP_PREFIX) == sizeof(FDSTORE_CUSE_PREFIX), "the holder knows CUSE connections by name");

/*
 * Every node is up: a connection the last run kept and this one did not
 * take over is a node that is no more. Its clients get ENODEV for a while,
 * then it ends.
 */
static void end_left_over(struct manager *m) {
	/* 64 connections, each with its record's name. */
	char names[2 * 64][FDSTORE_NAME_MAX + 1];
	size_t n = 0;
	const char *name;

	for (size_t i = 0; n < ELEMENTSOF(names) && (name = state_left_over_fd(m, i)); i++)
		if (strncmp(name, CUSE_KEEP_PREFIX, strlen(CUSE_KEEP_PREFIX)) == 0)
			snprintf(names[n++], sizeof(names[0]), "%s", name);
	for (size_t i = 0; i < n; i++) {
		struct cuse_kept_node node;
		int r = cuse_device_end_kept(m->event, names[i], &node);

		if (r < 0)
			continue;
		log_info("restart: /dev/%s (%s) is a node that is no more: ended", node.devname, names[i]);
		/* An input device that went while devnsd was down: its persona's container loses it now. */
		r = input_hotplug_gone_while_down(m, node.devname, node.note);
		if (r < 0)
			log_warning_errno(r, "/dev/%s: its persona's container keeps it: %m", node.devname);
	}
	/* Whatever is left (a record without its connection, past the 64 connections above) just goes. */
	state_drop_left_over_fds(m, CUSE_KEEP_PREFIX);
}

struct attach_when_ready {
	struct manager *manager;
	struct bus *bus;
	sd_event_source **source;
};

/* Attaching copies the persona's nodes into the container, so it waits until
 * every node exists (READY=1). The configuration's Pid= and Machine= go first:
 * they win over an attachment recorded by the last run. */
static int on_post_attach(sd_event_source *es, void *userdata) {
	struct attach_when_ready *a = userdata;

	if (!a->manager->notified)
		return 0;
	(void)es;
	/* Gone, not only off: sd-event looks at every post source at each dispatch. */
	*a->source = sd_event_source_disable_unref(*a->source);
	bus_attach_machines(a->bus);
	populate_restore_attachments(a->manager);
	/* After the containers are bound again: they follow what went meanwhile. */
	end_left_over(a->manager);
	return 0;
}

/* A stop asked for is a stop: the next start is fresh. */
static int stop(struct manager *m) {
	sd_notify(0, "STOPPING=1");
	log_info("stopping");
	state_forget_all(m);
	cuse_device_set_keeper(NULL);
	return 0;
}

static int run(const struct conf *conf) {
	/* Freed last: the manager stops its helpers first. */
	_cleanup_(zygote_freep) struct zygote *zygote = NULL;
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	_cleanup_(manager_freep) struct manager *m = NULL;
	/* Freed before the manager, whose events it listens to. */
	_cleanup_(bus_freep) struct bus *bus = NULL;
	/* Freed before the manager, which owns the input class it adds devices to. */
	_cleanup_(input_hotplug_freep) struct input_hotplug *hotplug = NULL;
	_cleanup_(sd_event_source_unrefp) sd_event_source *attach_wait = NULL;
	struct attach_when_ready aw;
	struct input_class *input;
	struct display_class *display;
	struct leds_class *leds;
	int r;

	/*
	 * First: the process that forks populate helpers holds nothing a
	 * client sent (populate/populate.h), and no signal is blocked yet.
	 */
	r = zygote_start(&zygote);
	if (r < 0)
		return log_error_errno(r, "Cannot start the process that starts populate helpers: %m");

	/* A loop of its own: on the thread's default loop sd-event asks for the thread id, a system call, every iteration. */
	r = sd_event_new(&event);
	if (r < 0)
		return log_error_errno(r, "Cannot create the event loop: %m");
	r = sd_event_add_signal(event, NULL, SIGTERM | SD_EVENT_SIGNAL_PROCMASK, NULL, NULL);
	if (r >= 0)
		r = sd_event_add_signal(event, NULL, SIGINT | SD_EVENT_SIGNAL_PROCMASK, NULL, NULL);
	if (r < 0)
		return log_error_errno(r, "Cannot watch signals: %m");
	r = sd_event_set_watchdog(event, true);
	if (r < 0)
		return log_error_errno(r, "Cannot set up the watchdog: %m");

	r = manager_new(&m, event, conf);
	if (r < 0)
		return r;
	r = zygote_watch(zygote, event);
	if (r < 0)
		return log_error_errno(r, "Cannot watch the process that starts populate helpers: %m");
	m->zygote = zygote;
	/* Before any device is opened: the fd store's holder must not inherit one. */
	r = state_new(m, getenv("DEVNS_STATE_DIR") ?: DEVNUM_STATE_DIR);
	if (r >= 0)
		cuse_device_set_keeper(&(const struct cuse_keeper){
			.take = keeper_take,
			.keep = keeper_keep,
			.forget = keeper_forget,
			.sync = keeper_sync,
			.userdata = m,
		});
	state_restore_personas(m);
	manager_numbers_begin(m);
	r = add_classes(m, conf, &input, &display, &leds);
	if (r == -ECANCELED)
		return stop(m);
	if (r < 0)
		return r;
	state_restore_items(m);
	manager_numbers_settled(m);
	/* Logged: devnsd runs on with the devices it has. */
	(void)input_hotplug_new(m, input, &hotplug);
	r = bus_new(&bus, m, display, leds);
	if (r < 0)
		return r;
	manager_check_ready(m);
	aw = (struct attach_when_ready){ .manager = m, .bus = bus, .source = &attach_wait };
	if (m->notified || sd_event_add_post(event, &attach_wait, on_post_attach, &aw) < 0) {
		bus_attach_machines(bus);
		populate_restore_attachments(m);
		end_left_over(m);
	}

	r = loop_run(m->loop);
	/* Logged by the watch; not a stop: the state stays for the restart (devns-restart(7)). */
	if (r == -ECHILD)
		return r;
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");
	return stop(m);
}

/*
 * A restart under systemd starts with every kept fd open (up to
 * FileDescriptorStoreMax=), past the soft limit of 1024; devnsd polls
 * with epoll only, so the hard limit is safe to take.
 */
static void raise_fd_limit(void) {
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char *argv[]) {
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	_cleanup_(conf_freep) struct conf *conf = NULL;
	_cleanup_(freep) char *error = NULL;
	const char *path = CONF_DEFAULT_PATH;
	bool test_only = false;
	int c, r;

	log_setup("devnsd");
	/* First: a restart may start with more fds open than the soft limit allows. */
	raise_fd_limit();
	while ((c = getopt_long(argc, argv, "c:th", options, NULL)) >= 0) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test_only = true;
			break;
		case 'h':
			help();
			return EXIT_SUCCESS;
		case 'V':
			printf("devnsd %s\n", DEVNS_VERSION);
			return EXIT_SUCCESS;
		default:
			return EXIT_CONFIG;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "devnsd: unexpected argument '%s'\n", argv[optind]);
		return EXIT_CONFIG;
	}

	r = conf_load(path, &conf, &error);
	if (r < 0) {
		fprintf(stderr, "devnsd: %s\n", error ? error : "cannot load the configuration");
		return EXIT_CONFIG;
	}
	if (test_only) {
		printf("%s: ok, %zu personas, %s starts active\n", path, conf->n_personas,
		       conf->personas[conf->active].name);
		return EXIT_SUCCESS;
	}
	signal(SIGPIPE, SIG_IGN);
	return run(conf) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
