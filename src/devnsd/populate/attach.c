/* SPDX-License-Identifier: MIT */
/*
 * Attaching a persona to a container: the manager binds it to the
 * container's pid namespace (core/manager.c), then populate makes its nodes
 * there and the classes give them the container's ids. A restart attaches
 * the last run's containers again the same way (restart/state.c decides
 * which).
 */
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "populate/populate.h"
#include "restart/state.h"
#include "log.h"

struct attach_call {
	populate_done_fn done;
	void *userdata;
};

/* The container's ids are known once its files were read: the nodes take them. */
static void on_populated(struct persona *p, int r, const struct populate_result *res, void *userdata) {
	struct attach_call *call = userdata;

	if (r != -ECANCELED) {
		p->owner = res->owner;
		manager_rebind(p->manager, p, false);
	}
	call->done(p, r, res, call->userdata);
	free(call);
}

int manager_attach_container(struct manager *m, struct persona *p, int pidfd, populate_done_fn done, void *userdata) {
	struct attach_call *call;
	int r;

	r = manager_attach(m, p, pidfd);
	if (r < 0)
		return r;
	call = malloc(sizeof(*call));
	if (!call)
		return -ENOMEM;
	*call = (struct attach_call){ .done = done, .userdata = userdata };
	r = populate_start(m, p, pidfd, on_populated, call);
	if (r < 0)
		free(call);
	return r;
}

static void on_reattached(struct persona *p, int r, const struct populate_result *res, void *userdata) {
	(void)userdata;
	if (r < 0)
		state_note(p->manager, "persona %s: cannot make the nodes in its container again (%s): %s", p->name,
			   res->failed, strerror(-r));
	else
		log_info("restart: persona %s: %u nodes in its container again, %u views bound again%s", p->name,
			 res->made, res->views, res->refused ? " (some places hold something else, left alone)" : "");
}


static int reattach(struct manager *m, struct persona *p, int pidfd) {
	return manager_attach_container(m, p, pidfd, on_reattached, NULL);
}

void populate_restore_attachments(struct manager *m) {
	state_restore_attachments(m, reattach);
}
