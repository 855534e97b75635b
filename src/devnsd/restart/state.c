/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "restart/fdstore.h"
#include "restart/state.h"
#include "log.h"

#define STATE_MAX_PARTS 8
/* The record's two copies in systemd's fd store, rewritten in turn. */
static const char *const record_fd_names[2] = { "state", "state.1" };

struct attachment {
	pid_t pid;
	uint64_t start_time;
};

struct state {
	struct manager *manager;
	int dir_fd;
	char *dir;
	struct fdstore *fdstore;
	/* What the last run left; emptied as it is taken back. */
	struct state_record last;
	struct state_part parts[STATE_MAX_PARTS];
	size_t n_parts;
	/* The process each persona was bound through, by persona name. */
	char attached_name[CONF_MAX_PERSONAS][NAME_MAX_LEN + 1];
	struct attachment attached[CONF_MAX_PERSONAS];
	const char *view_dir;
	dev_t view_dev;
	char notes[STATE_NOTES_MAX][STATE_NOTE_MAX];
	size_t n_notes;
	sd_event_source *save_timer, *ready_wait;
	uint64_t last_save_usec;
	/* The number of the last record written; its copies in the fd store (systemd), -1 until stored. */
	uint64_t seq;
	int record_fds[2];
	/* The manager's news that changes what is kept: a switch, a persona added or removed. */
	struct listener active_changed, persona_added, persona_removed;
	struct listener on_attached, detached, classes_freed;
	/* How a container is attached again (state_restore_attachments()). */
	state_attach_fn attach;
};

/* --- reading and writing the record ---------------------------------------- */

static int read_fd_bounded(int fd, char **ret, size_t *ret_len) {
	_cleanup_(freep) char *buf = malloc(STATE_RECORD_MAX_SIZE + 1);
	size_t len;
	int r;

	if (!buf)
		return -ENOMEM;
	r = read_bounded(fd, buf, STATE_RECORD_MAX_SIZE + 1, &len);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/* Reads and parses a record; -EFBIG past STATE_RECORD_MAX_SIZE, -EBADMSG (with error) for a bad one. */
static int parse_fd(int fd, struct state_record *rec, char *error, size_t error_size) {
	_cleanup_(freep) char *text = NULL;
	size_t len;
	int r;

	r = read_fd_bounded(fd, &text, &len);
	if (r == -EFBIG)
		snprintf(error, error_size, "larger than %u bytes", STATE_RECORD_MAX_SIZE);
	if (r < 0)
		return r;
	return state_record_parse(rec, text, len, error, error_size);
}

/*
 * The fd store's copies (systemd): the newest whole one. A copy that was
 * being rewritten when devnsd died is refused by the parser, and the other
 * one stands. 1 when one was taken, 0 when the store had none, else the
 * first error (with error set).
 */
static int load_from_store(struct state *s, char *error, size_t error_size) {
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(record_fd_names); i++) {
		_cleanup_(state_record_done) struct state_record rec;
		_cleanup_(closep) int fd = -1;
		char why[256] = "";
		int k;

		state_record_init(&rec);
		if (fdstore_take(s->fdstore, record_fd_names[i], &fd) < 0)
			continue;
		k = lseek(fd, 0, SEEK_SET) < 0 ? -errno : parse_fd(fd, &rec, why, sizeof(why));
		if (k < 0) {
			if (r == 0) {
				r = k;
				snprintf(error, error_size, "%s", why[0] ? why : strerror(-k));
			}
			continue;
		}
		if (r <= 0 || rec.seq > s->last.seq) {
			state_record_done(&s->last);
			s->last = rec;
			state_record_init(&rec);
		}
		r = 1;
	}
	return r;
}

/* The record: the fd store's copies (systemd), else the file. 0 without one, 1 when loaded. */
static int load_record(struct state *s) {
	_cleanup_(closep) int fd = -1;
	const char *from = "the fd store";
	char error[256] = "";
	int r;

	r = load_from_store(s, error, sizeof(error));
	if (r == 0) {
		from = STATE_FILE;
		fd = openat(s->dir_fd, STATE_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			return errno == ENOENT ? 0 : log_warning_errno(errno, "%s/%s: cannot read the state of the last run, "
										"starting clean: %m", s->dir, STATE_FILE);
		r = parse_fd(fd, &s->last, error, sizeof(error));
	}
	if (r < 0) {
		state_record_done(&s->last);
		state_record_init(&s->last);
		log_warning("%s/%s: the state of the last run is unusable (%s); starting clean", s->dir, from,
			    error[0] ? error : strerror(-r));
		return 0;
	}
	s->seq = s->last.seq;
	log_info("restart: the last run left %zu personas, %zu items (from %s)", s->last.n_personas, s->last.n_items,
		 streq(from, STATE_FILE) ? "the state file" : from);
	return 1;
}

/* The slot that keeps how persona name was attached: its own, or a free one (SIZE_MAX if none). */
static size_t attach_slot(struct state *s, const char *name, bool add) {
	size_t free_slot = SIZE_MAX;

	for (size_t i = 0; i < CONF_MAX_PERSONAS; i++) {
		if (streq(s->attached_name[i], name))
			return i;
		if (free_slot == SIZE_MAX &&
		    (!s->attached_name[i][0] || !manager_find_persona(s->manager, s->attached_name[i])))
			free_slot = i;
	}
	return add ? free_slot : SIZE_MAX;
}

static int build_record(struct state *s, struct state_record *rec) {
	struct manager *m = s->manager;
	struct persona *p;
	int r;

	if (m->active)
		snprintf(rec->active, sizeof(rec->active), "%s", m->active->name);
	rec->view_dev = s->view_dev ? ((uint64_t)major(s->view_dev) << 20) | minor(s->view_dev) : 0;
	LIST_FOREACH(p, &m->personas, link) {
		struct state_persona *sp;
		size_t i = attach_slot(s, p->name, false);
		bool configured = false;

		for (size_t k = 0; k < m->conf->n_personas; k++)
			configured = configured || streq(m->conf->personas[k].name, p->name);
		r = state_record_add_persona(rec, p->name, &sp);
		if (r < 0)
			return r;
		sp->created = !configured;
		if (p->ns.fd >= 0 && i != SIZE_MAX) {
			sp->attached = true;
			sp->pid = s->attached[i].pid;
			sp->start_time = s->attached[i].start_time;
			sp->ns_dev = (uint64_t)p->ns.dev;
			sp->ns_ino = (uint64_t)p->ns.ino;
		}
		for (size_t k = 0; k < s->n_parts; k++)
			s->parts[k].save(s->parts[k].userdata, p, rec);
	}
	return 0;
}

static int write_file(struct state *s, const char *text, size_t len) {
	static const char tmp[] = STATE_FILE ".new";
	_cleanup_(closep) int fd = -1;
	int r = 0;

	fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	for (size_t done = 0; done < len && r == 0;) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno != EINTR)
			r = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(s->dir_fd, tmp, s->dir_fd, STATE_FILE) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(s->dir_fd, tmp, 0);
	return r;
}

/*
 * Under systemd the record lives in two memfds that go to the fd store once
 * and are then rewritten in place, in turn: systemd hears nothing per save,
 * and a rewrite cut short by SIGKILL spoils only the copy it was writing.
 */
static int keep_record_fd(struct state *s, uint64_t seq, const char *text, size_t len) {
	size_t i = seq & 1;
	int fd = s->record_fds[i], r;

	if (fd < 0) {
		fd = memfd_create("devnsd-state", MFD_CLOEXEC);
		if (fd < 0)
			return -errno;
		r = fdstore_put(s->fdstore, record_fd_names[i], fd);
		if (r < 0) {
			close(fd);
			return r;
		}
		s->record_fds[i] = fd;
	}
	if (ftruncate(fd, 0) < 0)
		return -errno;
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(fd, text + done, len - done, (off_t)done);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			done += (size_t)n;
	}
	return 0;
}

static int save(struct state *s) {
	_cleanup_(state_record_done) struct state_record rec;
	_cleanup_(freep) char *text = NULL;
	size_t len;
	int r;

	state_record_init(&rec);
	rec.seq = ++s->seq;
	r = build_record(s, &rec);
	if (r >= 0)
		r = state_record_format(&rec, &text, &len);
	if (r >= 0)
		r = write_file(s, text, len);
	if (r >= 0 && streq(fdstore_kind(s->fdstore), "systemd"))
		r = keep_record_fd(s, rec.seq, text, len);
	return r;
}

static int on_save(sd_event_source *es, uint64_t usec, void *userdata) {
	struct state *s = userdata;
	int r;

	(void)es;
	s->last_save_usec = usec;
	r = save(s);
	if (r < 0)
		log_warning_errno(r, "%s/%s: cannot write down the state for a restart: %m", s->dir, STATE_FILE);
	return 0;
}

/* --- the interface ------------------------------------------------------- */

void state_note(struct manager *m, const char *fmt, ...) {
	struct state *s = m->state;
	char text[STATE_NOTE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_warning("restart: %s", text);
	if (s && s->n_notes < STATE_NOTES_MAX)
		memcpy(s->notes[s->n_notes++], text, sizeof(text));
}

const char *state_restart_note(struct manager *m, size_t i) {
	return m->state && i < m->state->n_notes ? m->state->notes[i] : NULL;
}

static void on_active_changed(struct listener *l, void *data) {
	(void)data;
	state_changed(container_of(l, struct state, active_changed)->manager);
}

static void on_persona_added(struct listener *l, void *data) {
	(void)data;
	state_changed(container_of(l, struct state, persona_added)->manager);
}

static void on_persona_removed(struct listener *l, void *data) {
	(void)data;
	state_changed(container_of(l, struct state, persona_removed)->manager);
}

static void on_attached(struct listener *l, void *data) {
	const struct persona_attached *a = data;

	state_note_attached(container_of(l, struct state, on_attached)->manager, a->persona, a->pid, a->pidfd);
}

static void on_detached(struct listener *l, void *data) {
	(void)data;
	state_changed(container_of(l, struct state, detached)->manager);
}

/* The manager is going: the classes have kept what they keep. */
static void on_classes_freed(struct listener *l, void *data) {
	state_free(data);
}

/* What state_new() does once the state is m->state; state_new() frees it if this fails. */
static int state_setup(struct manager *m, struct state *s, const char *dir) {
	int r;

	s->manager = m;
	s->dir_fd = -1;
	s->record_fds[0] = s->record_fds[1] = -1;
	state_record_init(&s->last);
	s->active_changed.notify = on_active_changed;
	s->persona_added.notify = on_persona_added;
	s->persona_removed.notify = on_persona_removed;
	signal_add(&m->events.active_changed, &s->active_changed);
	signal_add(&m->events.persona_added, &s->persona_added);
	signal_add(&m->events.persona_removed, &s->persona_removed);
	s->on_attached.notify = on_attached;
	s->detached.notify = on_detached;
	s->classes_freed.notify = on_classes_freed;
	signal_add(&m->events.attached, &s->on_attached);
	signal_add(&m->events.detached, &s->detached);
	signal_add(&m->events.classes_freed, &s->classes_freed);
	s->dir = strdup(dir);
	if (!s->dir)
		return log_warning_errno(ENOMEM, "out of memory");
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return log_warning_errno(errno, "%s: cannot create the state directory; a restart will start clean: %m", dir);
	s->dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0)
		return log_warning_errno(errno, "%s: cannot open the state directory; a restart will start clean: %m", dir);
	r = fdstore_new(&s->fdstore, dir);
	if (r < 0)
		return log_warning_errno(r, "%s: cannot keep the framebuffers across a restart; a restart will start clean: %m", dir);
	r = sd_event_add_time(m->event, &s->save_timer, CLOCK_MONOTONIC, 0, 1000, on_save, s);
	if (r < 0)
		return log_warning_errno(r, "cannot set up saving the state; a restart will start clean: %m");
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(s->save_timer, SD_EVENT_OFF);
	(void)load_record(s);
	return 0;
}

int state_new(struct manager *m, const char *dir) {
	struct state *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return log_warning_errno(ENOMEM, "out of memory");
	m->state = s;
	r = state_setup(m, s, dir);
	if (r < 0)
		state_free(m);
	return r;
}

void state_free(struct manager *m) {
	struct state *s = m->state;

	if (!s)
		return;
	for (size_t i = 0; fdstore_left_over(s->fdstore, i); i++)
		log_info("restart: %s kept by the last run is no longer used", fdstore_left_over(s->fdstore, i));
	listener_remove(&s->active_changed);
	listener_remove(&s->persona_added);
	listener_remove(&s->persona_removed);
	listener_remove(&s->on_attached);
	listener_remove(&s->detached);
	listener_remove(&s->classes_freed);
	sd_event_source_disable_unref(s->save_timer);
	sd_event_source_disable_unref(s->ready_wait);
	fdstore_free(s->fdstore);
	closep(&s->record_fds[0]);
	closep(&s->record_fds[1]);
	state_record_done(&s->last);
	closep(&s->dir_fd);
	free(s->dir);
	free(s);
	m->state = NULL;
}

void state_forget_all(struct manager *m) {
	struct state *s = m->state;

	if (!s)
		return;
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(s->save_timer, SD_EVENT_OFF);
	if (s->fdstore)
		fdstore_clear(s->fdstore);
	if (s->dir_fd >= 0 && unlinkat(s->dir_fd, STATE_FILE, 0) < 0 && errno != ENOENT)
		log_warning_errno(errno, "%s/%s: cannot remove: %m", s->dir, STATE_FILE);
}

int state_register_part(struct manager *m, const struct state_part *part) {
	struct state *s = m->state;

	if (!s)
		return 0;
	if (s->n_parts == STATE_MAX_PARTS)
		return -E2BIG;
	s->parts[s->n_parts++] = *part;
	return 0;
}

void state_changed(struct manager *m) {
	struct state *s = m->state;
	uint64_t now;
	int enabled = SD_EVENT_OFF;

	if (!s || !s->save_timer)
		return;
	if (sd_event_source_get_enabled(s->save_timer, &enabled) >= 0 && enabled != SD_EVENT_OFF)
		return;
	if (sd_event_now(m->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	sd_event_source_set_time(s->save_timer, MAX(now, s->last_save_usec + STATE_SAVE_INTERVAL_USEC));
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(s->save_timer, SD_EVENT_ONESHOT);
}

int state_take_fd(struct manager *m, const char *name, int *ret_fd) {
	return m->state && m->state->fdstore ? fdstore_take(m->state->fdstore, name, ret_fd) : -ENOENT;
}

int state_keep_fd(struct manager *m, const char *name, int fd) {
	int r;

	if (!m->state || !m->state->fdstore)
		return -ENOENT;
	r = fdstore_put(m->state->fdstore, name, fd);
	if (r < 0)
		log_warning_errno(r, "%s: cannot keep it for a restart (%s): %m", name, fdstore_kind(m->state->fdstore));
	return r;
}

void state_forget_fd(struct manager *m, const char *name) {
	if (m->state && m->state->fdstore)
		(void)fdstore_remove(m->state->fdstore, name);
}

const char *state_left_over_fd(struct manager *m, size_t i) {
	return m->state && m->state->fdstore ? fdstore_left_over(m->state->fdstore, i) : NULL;
}

size_t state_fd_room(struct manager *m) {
	return m->state && m->state->fdstore ? fdstore_room(m->state->fdstore) : 0;
}

void state_sync_fds(struct manager *m) {
	if (m->state && m->state->fdstore)
		fdstore_sync(m->state->fdstore);
}

void state_drop_left_over_fds(struct manager *m, const char *prefix) {
	if (m->state && m->state->fdstore)
		fdstore_drop_left_over(m->state->fdstore, prefix);
}

const char *state_last_value(struct manager *m, const char *part, const char *key) {
	struct state *s = m->state;

	for (size_t i = 0; s && i < s->last.n_items; i++)
		if (streq(s->last.items[i].part, part) && streq(s->last.items[i].key, key))
			return s->last.items[i].value;
	return NULL;
}

void state_restore_personas(struct manager *m) {
	struct state *s = m->state;
	struct persona *p;

	if (!s)
		return;
	for (size_t i = 0; i < s->last.n_personas; i++) {
		const struct state_persona *sp = &s->last.personas[i];
		int r;

		if (manager_find_persona(m, sp->name))
			continue;
		if (!sp->created) {
			state_note(m, "persona %s is no longer configured; what it had is dropped", sp->name);
			continue;
		}
		r = manager_create_persona(m, sp->name, &p);
		if (r < 0)
			state_note(m, "cannot create persona %s again: %s", sp->name, strerror(-r));
	}
	if (!s->last.active[0])
		return;
	p = manager_find_persona(m, s->last.active);
	if (p)
		m->active = p;
	else
		state_note(m, "the active persona %s is gone; %s is active", s->last.active, m->active->name);
}

void state_restore_items(struct manager *m) {
	struct state *s = m->state;

	if (!s)
		return;
	for (size_t i = 0; i < s->last.n_items; i++) {
		const struct state_item *it = &s->last.items[i];
		struct persona *p = manager_find_persona(m, it->persona);
		const struct state_part *part = NULL;
		int r;

		for (size_t k = 0; k < s->n_parts && !part; k++)
			if (streq(s->parts[k].name, it->part))
				part = &s->parts[k];
		if (!p || !part)
			continue;
		r = part->load(part->userdata, p, it->key, it->value);
		if (r == -ENOENT)
			state_note(m, "persona %s: %s %s is no longer there; its state is dropped", p->name, part->name,
				   it->key);
		else if (r == -ESTALE)
			state_note(m, "persona %s: %s %s no longer fits (%s); it starts fresh", p->name, part->name, it->key,
				   it->value);
		else if (r < 0)
			state_note(m, "persona %s: cannot take back %s %s: %s", p->name, part->name, it->key, strerror(-r));
	}
	state_changed(m);
}

/*
 * The recorded process, if it is still the one (same start time, same pid
 * namespace), as a pidfd: the one lookup by number; the checks and the
 * attach that follows go through the pidfd.
 */
static int open_process(const struct state_persona *sp, int *ret_pidfd) {
	_cleanup_(closep) int pidfd = -1;
	struct pidns ns = PIDNS_NULL;
	uint64_t start;
	int r;

	pidfd = pidfd_open(sp->pid, 0);
	if (pidfd < 0)
		return -ESRCH;
	r = pidfd_start_time(pidfd, &start);
	if (r < 0)
		return r;
	r = pidns_of_pidfd(pidfd, &ns);
	if (r < 0)
		return r;
	if (start != sp->start_time || (uint64_t)ns.dev != sp->ns_dev || (uint64_t)ns.ino != sp->ns_ino)
		r = -ESTALE;
	pidns_close(&ns);
	if (r < 0)
		return r;
	*ret_pidfd = take_fd(&pidfd);
	return 0;
}

static void restore_attachments(struct state *s) {
	struct manager *m = s->manager;

	for (size_t i = 0; i < s->last.n_personas; i++) {
		const struct state_persona *sp = &s->last.personas[i];
		struct persona *p = manager_find_persona(m, sp->name);
		_cleanup_(closep) int pidfd = -1;
		int r;

		if (!p || !sp->attached)
			continue;
		if (p->ns.fd >= 0) {
			log_info("restart: persona %s is bound by its configuration; process %d is not re-attached", p->name,
				 (int)sp->pid);
			continue;
		}
		r = open_process(sp, &pidfd);
		if (r >= 0)
			r = s->attach(m, p, pidfd);
		if (r >= 0) {
			log_info("restart: persona %s bound again to the pid namespace of process %d", p->name, (int)sp->pid);
			continue;
		}
		if (r == -ESRCH || r == -ESTALE)
			state_note(m, "persona %s: process %d %s; not re-attached", p->name, (int)sp->pid,
				   r == -ESRCH ? "is gone" : "is another process now");
		else
			state_note(m, "persona %s: cannot bind to process %d again: %s", p->name, (int)sp->pid, strerror(-r));
		/* What its old container left (mappings, memory) must not reach whoever attaches next. */
		manager_rebind(m, p, true);
	}
	state_changed(m);
}

/* Runs after each event: once every node is in /dev, the containers are populated with them again. */
static int on_post(sd_event_source *es, void *userdata) {
	struct state *s = userdata;

	if (!s->manager->notified)
		return 0;
	(void)es;
	/* Gone, not only off: sd-event looks at every post source at each dispatch. */
	s->ready_wait = sd_event_source_disable_unref(s->ready_wait);
	restore_attachments(s);
	return 0;
}

void state_restore_attachments(struct manager *m, state_attach_fn attach) {
	struct state *s = m->state;
	int r;

	if (!s)
		return;
	s->attach = attach;
	if (m->notified) {
		restore_attachments(s);
		return;
	}
	r = sd_event_add_post(m->event, &s->ready_wait, on_post, s);
	if (r < 0) {
		log_warning_errno(r, "restart: cannot wait for the nodes; containers are attached again at once: %m");
		restore_attachments(s);
	}
}

void state_note_attached(struct manager *m, struct persona *p, pid_t pid, int pidfd) {
	struct state *s = m->state;
	size_t i = s ? attach_slot(s, p->name, true) : SIZE_MAX;

	if (i == SIZE_MAX)
		return;
	snprintf(s->attached_name[i], sizeof(s->attached_name[i]), "%s", p->name);
	s->attached[i] = (struct attachment){ .pid = pid };
	if (pidfd_start_time(pidfd, &s->attached[i].start_time) < 0)
		s->attached_name[i][0] = '\0';
	state_changed(m);
}

void state_set_view(struct manager *m, const char *dir, dev_t dev) {
	if (!m->state)
		return;
	m->state->view_dir = dir;
	m->state->view_dev = dev;
}

const char *state_view_dir(struct manager *m) {
	return m->state ? m->state->view_dir : NULL;
}

dev_t state_old_view_dev(struct manager *m) {
	uint64_t d = m->state ? m->state->last.view_dev : 0;

	return d ? makedev((unsigned int)(d >> 20), (unsigned int)(d & 0xfffff)) : 0;
}
