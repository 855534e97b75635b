/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "devns-endpoint.h"
#include "devnsctl-png.h"
#include "util.h"

#define BUS_NAME "org.devns1"
#define BUS_PATH "/org/devns1"
#define BUS_INTERFACE "org.devns1.Manager"

static void help(void) {
	printf("Usage: devnsctl COMMAND [ARG...]\n"
	       "Inspect and switch devnsd's personas.\n\n"
	       "Commands:\n"
	       "  list           the personas, the active one marked '*', and their nodes\n"
	       "  switch NAME    make NAME the active persona\n"
	       "  status         the active persona, the frames the display has shown, its buffers and\n"
	       "                 whose frames they keep, and every node with its open handles\n"
	       "  attach NAME --pid PID | --machine MACHINE\n"
	       "                 bind persona NAME to a container and make its nodes in the container's /dev\n"
	       "  create NAME    add a persona\n"
	       "  remove NAME    remove a persona (not the active one)\n"
	       "  detach NAME    unbind persona NAME from its container; what it opened stops working\n"
	       "  request-active ask for the caller's own persona to come to the front\n"
	       "                 (in a persona's container, request-active and status go through\n"
	       "                 its endpoint, " DEVNS_ENDPOINT_PATH ", not the system bus)\n"
	       "  screenshot NAME FILE.png\n"
	       "                 save what persona NAME shows (active or not) as a PNG\n\n"
	       "Options:\n"
	       "  -h, --help     show this help\n"
	       "      --version  show the version\n");
}

static int fail(const char *what, int r, const sd_bus_error *error) {
	if (error && sd_bus_error_is_set(error))
		fprintf(stderr, "devnsctl: %s: %s\n", what, error->message ? error->message : error->name);
	else
		fprintf(stderr, "devnsctl: %s: %s\n", what, strerror(-r));
	return EXIT_FAILURE;
}

static int cmd_switch(sd_bus *bus, const char *name) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "SwitchTo", &error, NULL, "s", name);
	if (r < 0)
		return fail("switch", r, &error);
	return EXIT_SUCCESS;
}

static int cmd_simple(sd_bus *bus, const char *what, const char *method, const char *name) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, method, &error, NULL, "s", name);
	if (r < 0)
		return fail(what, r, &error);
	return EXIT_SUCCESS;
}

static int cmd_attach(sd_bus *bus, const char *name, const char *how, const char *what) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	uint32_t made;
	int r;

	if (streq(how, "--pid")) {
		char *end;
		unsigned long pid = strtoul(what, &end, 10);
		if (!*what || *end || pid == 0 || pid > INT32_MAX) {
			fprintf(stderr, "devnsctl: attach: '%s' is not a process id\n", what);
			return EXIT_FAILURE;
		}
		r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "Attach", &error, &reply, "su", name,
				       (uint32_t)pid);
	} else if (streq(how, "--machine")) {
		r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "AttachMachine", &error, &reply, "ss",
				       name, what);
	} else {
		fprintf(stderr, "devnsctl: attach: expected --pid PID or --machine NAME\n");
		return EXIT_FAILURE;
	}
	if (r < 0)
		return fail("attach", r, &error);
	r = sd_bus_message_read(reply, "u", &made);
	if (r < 0)
		return fail("attach", r, NULL);
	printf("%s: attached, %u nodes made in the container's /dev\n", name, made);
	return EXIT_SUCCESS;
}

static int cmd_request_active(sd_bus *bus) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	int granted, r;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "RequestActive", &error, &reply, NULL);
	if (r < 0)
		return fail("request-active", r, &error);
	r = sd_bus_message_read(reply, "b", &granted);
	if (r < 0)
		return fail("request-active", r, NULL);
	if (!granted) {
		fprintf(stderr, "devnsctl: request-active: refused by the persona's policy (AllowRequestActive=no)\n");
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

/* Whether this process sees a persona's endpoint: then it is in that persona's container. */
static bool have_endpoint(void) {
	struct stat st;

	return stat(DEVNS_ENDPOINT_PATH, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* One request on the endpoint and its reply; the reply's status is the caller's to look at. */
static int endpoint_call(uint16_t op, struct devns_endpoint_reply *ret) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = DEVNS_ENDPOINT_PATH };
	struct devns_endpoint_request req = {
		.magic = DEVNS_ENDPOINT_MAGIC, .version = DEVNS_ENDPOINT_VERSION, .op = op, .serial = (uint32_t)getpid(),
	};
	struct timeval timeout = { .tv_sec = 10 };
	uint8_t buf[sizeof(struct devns_endpoint_reply) + 1];
	ssize_t n;
	int fd, r;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(fd, &req, sizeof(req), MSG_NOSIGNAL) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	r = n < 0 ? -errno : n == 0 ? -ECONNRESET : devns_endpoint_parse_reply(buf, (size_t)n, req.serial, ret);
	close(fd);
	return r;
}

static int endpoint_request_active(void) {
	struct devns_endpoint_reply reply;
	int r;

	r = endpoint_call(DEVNS_ENDPOINT_OP_REQUEST_ACTIVE, &reply);
	if (r < 0)
		return fail("request-active: " DEVNS_ENDPOINT_PATH, r, NULL);
	if (reply.status < 0) {
		fprintf(stderr, "devnsctl: request-active: %s\n", reply.message[0] ? reply.message : strerror(-reply.status));
		return EXIT_FAILURE;
	}
	if (!(reply.flags & DEVNS_ENDPOINT_GRANTED)) {
		fprintf(stderr, "devnsctl: request-active: refused by the persona's policy (AllowRequestActive=no)\n");
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

static int endpoint_status(void) {
	struct devns_endpoint_reply reply;
	int r;

	r = endpoint_call(DEVNS_ENDPOINT_OP_STATUS, &reply);
	if (r < 0)
		return fail("status: " DEVNS_ENDPOINT_PATH, r, NULL);
	if (reply.status < 0) {
		fprintf(stderr, "devnsctl: status: %s\n", reply.message[0] ? reply.message : strerror(-reply.status));
		return EXIT_FAILURE;
	}
	printf("Persona: %s\nActive: %s\n", reply.persona, reply.flags & DEVNS_ENDPOINT_ACTIVE ? "yes" : "no");
	return EXIT_SUCCESS;
}

/* What devnsd's last restart could not take back; nothing from a devnsd without the property. */
static void print_restart_notes(sd_bus *bus) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	char **notes = NULL;

	if (sd_bus_get_property_strv(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "RestartNotes", &error, &notes) < 0)
		return;
	if (notes && notes[0])
		printf("Not taken back at the last restart:\n");
	for (size_t i = 0; notes && notes[i]; i++) {
		printf("  %s\n", notes[i]);
		free(notes[i]);
	}
	free(notes);
}

/* Containers' node changes in flight, and helpers stopped and not yet ended; nothing from a devnsd without the property. */
static void print_node_changes(sd_bus *bus) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	uint32_t in_flight = 0, stopped = 0;

	if (sd_bus_get_property(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "NodeChanges", NULL, &reply, "(uu)") < 0 ||
	    sd_bus_message_read(reply, "(uu)", &in_flight, &stopped) < 0)
		return;
	printf("Node changes in flight: %" PRIu32, in_flight);
	if (stopped > 0)
		printf(", helpers stopped and not yet ended: %" PRIu32, stopped);
	printf("\n");
}

/* Whether the display is lit; nothing when devnsd does not say. */
static void print_display_power(sd_bus *bus) {
	_cleanup_(freep) char *power = NULL;

	if (sd_bus_get_property_string(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "DisplayPower", NULL, &power) < 0 ||
	    !power || !power[0])
		return;
	if (streq(power, "gone"))
		printf("Display: gone (its device went away; the active persona's frame is shown when it comes back)\n");
	else
		printf("Display: %s\n", streq(power, "off") ? "powered down (the active persona blanked it)" : "on");
}

/* The display's buffers and whose frames a switch shows at once; nothing when devnsd does not say. */
static void print_display_buffers(sd_bus *bus) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *name;
	uint64_t bytes;
	uint32_t n;
	int r;

	if (sd_bus_get_property(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "DisplayBuffers", NULL, &reply, "(utas)") < 0)
		return;
	if (sd_bus_message_enter_container(reply, 'r', "utas") < 0 || sd_bus_message_read(reply, "ut", &n, &bytes) < 0 ||
	    n == 0)
		return;
	printf("Display buffers: %" PRIu32 " (%.1f MiB)\n", n, (double)bytes / (1024 * 1024));
	if (sd_bus_message_enter_container(reply, 'a', "s") < 0)
		return;
	printf("Frames kept for a switch (most recent first):");
	for (n = 0; (r = sd_bus_message_read(reply, "s", &name)) > 0; n++)
		printf(" %s", name);
	printf("%s\n", n == 0 ? " none" : "");
}

/* How the display showed the switches: from kept frames, or copying; nothing when devnsd does not say. */
static void print_switches_shown(sd_bus *bus) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	uint64_t kept, copied;

	if (sd_bus_get_property(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "SwitchesShown", NULL, &reply, "(tt)") < 0 ||
	    sd_bus_message_read(reply, "(tt)", &kept, &copied) < 0 || kept + copied == 0)
		return;
	printf("Switches shown: %" PRIu64 " by a flip to a kept frame, %" PRIu64 " by copying the frame first\n", kept,
	       copied);
}

static int cmd_list(sd_bus *bus) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *name;
	int active, r;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "ListPersonas", &error, &reply, NULL);
	if (r < 0)
		return fail("list", r, &error);
	r = sd_bus_message_enter_container(reply, 'a', "(sbas)");
	if (r < 0)
		return fail("list", r, NULL);
	while ((r = sd_bus_message_enter_container(reply, 'r', "sbas")) > 0) {
		const char *path;

		r = sd_bus_message_read(reply, "sb", &name, &active);
		if (r < 0)
			return fail("list", r, NULL);
		printf("%c %-16s", active ? '*' : ' ', name);
		r = sd_bus_message_enter_container(reply, 'a', "s");
		if (r < 0)
			return fail("list", r, NULL);
		while ((r = sd_bus_message_read(reply, "s", &path)) > 0)
			printf(" %s", path);
		if (r < 0)
			return fail("list", r, NULL);
		printf("\n");
		sd_bus_message_exit_container(reply);
		sd_bus_message_exit_container(reply);
	}
	return r < 0 ? fail("list", r, NULL) : EXIT_SUCCESS;
}

/* Every persona's LEDs and backlights; nothing when devnsd has none. */
static int print_lights(sd_bus *bus) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *persona, *kind, *name, *source, *policy, *trigger;
	uint32_t brightness, max, bl_power;
	int shown, r;
	bool header = false;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "ListLights", &error, &reply, NULL);
	if (r < 0)
		return fail("status", r, &error);
	r = sd_bus_message_enter_container(reply, 'a', "(sssssuusub)");
	if (r < 0)
		return fail("status", r, NULL);
	while ((r = sd_bus_message_read(reply, "(sssssuusub)", &persona, &kind, &name, &source, &policy,
					&brightness, &max, &trigger, &bl_power, &shown)) > 0) {
		char state[96];

		if (!header) {
			printf("\nLights\n");
			header = true;
		}
		if (streq(kind, "leds"))
			snprintf(state, sizeof(state), "trigger %s", trigger);
		else
			snprintf(state, sizeof(state), "bl_power %u", bl_power);
		printf("  %-12s %-9s %-28s %-9s %5u/%-5u %s%s\n", persona, kind, name, policy, brightness, max,
		       state, shown ? ", on the hardware" : "");
	}
	return r < 0 ? fail("status", r, NULL) : EXIT_SUCCESS;
}

static int cmd_status(sd_bus *bus) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(freep) char *active = NULL;
	const char *persona, *path, *kind, *source;
	char last[NAME_MAX_LEN + 1] = "";
	uint32_t opened;
	uint64_t frames = 0;
	int r;

	r = sd_bus_get_property_string(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "ActivePersona", &error, &active);
	if (r < 0)
		return fail("status", r, &error);
	printf("Active persona: %s\n", active);
	/* A devnsd without the property just does not say. */
	if (sd_bus_get_property_trivial(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "FramesShown", NULL, 't', &frames) >= 0 &&
	    frames > 0)
		printf("Frames shown: %" PRIu64 "\n", frames);
	print_display_power(bus);
	print_display_buffers(bus);
	print_switches_shown(bus);
	print_node_changes(bus);
	print_restart_notes(bus);

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "ListNodes", &error, &reply, NULL);
	if (r < 0)
		return fail("status", r, &error);
	r = sd_bus_message_enter_container(reply, 'a', "(ssssu)");
	if (r < 0)
		return fail("status", r, NULL);
	while ((r = sd_bus_message_read(reply, "(ssssu)", &persona, &path, &kind, &source, &opened)) > 0) {
		if (!streq(last, persona)) {
			printf("\nPersona %s%s\n", persona, streq(persona, active) ? " (active)" : "");
			snprintf(last, sizeof(last), "%s", persona);
		}
		printf("  %-32s %-6s %-22s %u open\n", path, kind, source, opened);
	}
	if (r < 0)
		return fail("status", r, NULL);
	return print_lights(bus);
}

int main(int argc, char *argv[]) {
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	static const struct {
		const char *name;
		int args;
	} commands[] = {
		{ "list", 0 },	 { "switch", 1 }, { "status", 0 },	   { "attach", 3 },
		{ "create", 1 }, { "remove", 1 }, { "detach", 1 },	   { "request-active", 0 },
		{ "screenshot", 2 },
	};
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	const char *cmd;
	size_t i;
	int c, r, args;

	while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return EXIT_SUCCESS;
		case 'V':
			printf("devnsctl %s\n", DEVNS_VERSION);
			return EXIT_SUCCESS;
		default:
			return EXIT_FAILURE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "devnsctl: missing command; see --help\n");
		return EXIT_FAILURE;
	}
	cmd = argv[optind++];
	args = argc - optind;
	for (i = 0; i < ELEMENTSOF(commands); i++)
		if (streq(cmd, commands[i].name))
			break;
	if (i == ELEMENTSOF(commands)) {
		fprintf(stderr, "devnsctl: unknown command '%s'; see --help\n", cmd);
		return EXIT_FAILURE;
	}
	if (args != commands[i].args) {
		fprintf(stderr, "devnsctl: %s: wrong number of arguments; see --help\n", cmd);
		return EXIT_FAILURE;
	}

	/* In a persona's container, what a persona may ask goes through its endpoint: no bus is needed there. */
	if (streq(cmd, "request-active") && have_endpoint())
		return endpoint_request_active();
	if (streq(cmd, "status") && have_endpoint())
		return endpoint_status();

	r = sd_bus_open_system(&bus);
	if (r < 0)
		return fail("cannot connect to the system bus", r, NULL);

	if (streq(cmd, "list"))
		return cmd_list(bus);
	if (streq(cmd, "switch"))
		return cmd_switch(bus, argv[optind]);
	if (streq(cmd, "status"))
		return cmd_status(bus);
	if (streq(cmd, "attach"))
		return cmd_attach(bus, argv[optind], argv[optind + 1], argv[optind + 2]);
	if (streq(cmd, "create"))
		return cmd_simple(bus, "create", "CreatePersona", argv[optind]);
	if (streq(cmd, "remove"))
		return cmd_simple(bus, "remove", "RemovePersona", argv[optind]);
	if (streq(cmd, "detach"))
		return cmd_simple(bus, "detach", "Detach", argv[optind]);
	if (streq(cmd, "screenshot"))
		return cmd_screenshot(bus, argv[optind], argv[optind + 1]);
	return cmd_request_active(bus);
}
