/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control socket: accepts clients, frames requests by line, checks the JSON-RPC
 * envelope and hands the method to ctl_methods.c. A client that sends garbage gets an
 * error answer (or, past 64 MiB without a newline, an answer and a closed connection);
 * nothing a client sends can stop the daemon.
 *
 * One thread serves every client, so it never waits for one: sockets are non-blocking and
 * each client has an output buffer that drains when epoll says the socket can take more.
 * A client that does not read its answers is held back (its further requests wait unread
 * while more than CTL_OUT_PAUSE of answers are pending), so its buffer stays bounded.
 */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "capture.h"
#include "ctl_events.h"
#include "fwd_flow.h"
#include "log.h"
#include "notify.h"
#include "ofagent_proc.h"
#include "port.h"
#include "rxq.h"
#include "state.h"
#include "switch.h"

#define CTL_MAX_CLIENTS 64
/*
 * A client's input buffer starts at CTL_LINE_MIN and grows, by doubling, for a longer request
 * (add-flows of 100,000 rules is about 8 MiB) up to CTL_LINE_MAX; it shrinks back once the
 * long request is served.
 */
#define CTL_LINE_MIN (64 * 1024)
#define CTL_LINE_MAX (64 * 1024 * 1024)
#define CTL_OUT_PAUSE (256 * 1024)      /* a client's requests wait while this much is unread */
#define CTL_OUT_MAX (16 * 1024 * 1024)  /* a client with more unread answers is dropped */
#define CTL_OUT_KEEP (64 * 1024)        /* a larger drained output buffer is freed */
#define CTL_EVICT_IDLE_MS 1000          /* a full table makes room by closing a client idle this long */
#define CTL_SETUP_POLL_MS 50     /* a port set-up's deadline is checked this often */
#define CTL_LINK_MS 500          /* link states are re-read this often */
#define CTL_HOUSEKEEPING_MS 10   /* learning and aging, when a switch has any */
/* A subscriber with more unread than this is sent no packet-ins until it reads (ctl_events.h) */
#define CTL_EVENT_PAUSE (1024 * 1024)

struct client {
	int fd;
	uint32_t events;         /* what epoll watches for it now */
	bool closing;            /* drop it once its output is sent */
	uint64_t last_ms;        /* when bytes last moved either way */
	char *out;               /* answers not yet sent: out[sent..used) */
	size_t out_sent, out_used, out_cap;
	size_t len, cap;
	char *buf;               /* cap + 1 bytes */
	struct ctl_sub *sub;     /* subscribed to a switch's events (subscribe); NULL: not */
	uint64_t id;             /* ctl_conn_id() */
};

static int listen_fd = -1;
static int epoll_fd = -1;
static char listen_path[108];
static struct client *clients[CTL_MAX_CLIENTS];
static struct ctl_config ctl_cfg = { .idle_timeout_s = 60 };

/*
 * The request whose answer waits for the port set-up thread (add-port), and the client to
 * give it to (-1: gone, the answer is dropped). That client's further requests wait, so its
 * answers stay in order.
 */
static struct {
	bool active;
	int slot;
	json_t *id;               /* NULL: a notification, nobody to answer */
} deferred;
static int current_slot = -1;   /* the client whose request is being handled */
static uint64_t next_conn_id = 1;

uint64_t ctl_conn_id(void)
{
	return current_slot >= 0 && clients[current_slot] != NULL ? clients[current_slot]->id
								  : 0;
}

void ctl_init(const struct ctl_config *cfg)
{
	ctl_cfg = *cfg;
}

static uint64_t now_ms(void)
{
	return rte_get_timer_cycles() / (rte_get_timer_hz() / 1000);
}

/* ---- JSON-RPC envelope ---- */

/*
 * The answer of last resort, when the real one could not be built (jansson refuses text that
 * is not UTF-8, or memory ran out): an internal error that still carries the request's id,
 * so that every request gets exactly one answer and pipelined answers stay in step.
 */
static char *fallback_line(json_t *id)
{
	static const char fmt[] = "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,"
				  "\"message\":\"internal error: the answer could not be "
				  "built (see the daemon's log)\"}}\n";
	char *id_text = id != NULL ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	const char *shown = id_text != NULL ? id_text : "null";
	size_t len = sizeof(fmt) + strlen(shown) + 16;
	char *line = malloc(len);

	if (line != NULL)
		snprintf(line, len, fmt, shown, CTL_INTERNAL);
	LOG(ERR, "could not build the answer to request %s", shown);
	free(id_text);
	return line;
}

/* RESP (taken over; NULL if building it failed) as one line, or the fallback for ID. */
static char *dump_line(json_t *resp, json_t *id)
{
	char *s = resp != NULL ? json_dumps(resp, JSON_COMPACT) : NULL;
	char *line = NULL;
	size_t n;

	if (s != NULL) {
		n = strlen(s);
		line = malloc(n + 2);
		if (line != NULL) {
			memcpy(line, s, n);
			line[n] = '\n';
			line[n + 1] = '\0';
		}
		free(s);
	}
	json_decref(resp);
	return line != NULL ? line : fallback_line(id);
}

static char *error_line(json_t *id, int code, const char *message)
{
	return dump_line(json_pack("{ss sO s{si ss}}", "jsonrpc", "2.0",
				   "id", id ? id : json_null(),
				   "error", "code", code, "message", message), id);
}

/* The answer to request ID: RESULT (taken over), or the error in E when RESULT is NULL. */
static char *answer_line(json_t *id, json_t *result, const struct ctl_error *e)
{
	if (result == NULL)
		return error_line(id, e->code ? e->code : CTL_INTERNAL, e->message);
	return dump_line(json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id ? id : json_null(),
				   "result", result), id);
}

/* Notes that request ID of the current client is answered when its port set-up ends. */
static char *defer_answer(json_t *id)
{
	deferred.active = true;
	deferred.slot = current_slot;
	deferred.id = id != NULL ? json_incref(id) : NULL;
	return NULL;
}

static bool valid_id(json_t *id)
{
	return id == NULL || json_is_string(id) || json_is_integer(id) || json_is_null(id);
}

/*
 * subscribe: the connection being served gets the switch's events from now on, as
 * notifications between its answers (ctl_events.h). One subscription per connection.
 */
static json_t *subscribe(json_t *params, struct ctl_error *e)
{
	struct client *c = current_slot >= 0 ? clients[current_slot] : NULL;
	json_t *result = NULL;

	if (c == NULL) {
		e->code = CTL_WRONG_STATE;
		snprintf(e->message, sizeof(e->message), "subscribe needs a connection");
		return NULL;
	}
	if (c->sub != NULL) {
		e->code = CTL_WRONG_STATE;
		snprintf(e->message, sizeof(e->message), "this connection is subscribed already");
		return NULL;
	}
	c->sub = ctl_sub_new(params, &result, e);
	return c->sub != NULL ? result : NULL;
}

/*
 * Answers one request. STRICT requires the "jsonrpc":"2.0" member and an id (the socket);
 * the config file is lenient about both.
 */
static char *handle_request(json_t *req, bool strict, struct ctl_error *e)
{
	json_t *id = json_object_get(req, "id"), *method, *params, *result, *empty = NULL;
	const char *version;

	if (!json_is_object(req))
		return error_line(NULL, CTL_INVALID_REQUEST, "a request must be a JSON object");
	if (!valid_id(id))
		return error_line(NULL, CTL_INVALID_REQUEST, "'id' must be a string or a number");
	version = json_string_value(json_object_get(req, "jsonrpc"));
	if (strict && (version == NULL || strcmp(version, "2.0") != 0))
		return error_line(id, CTL_INVALID_REQUEST, "'jsonrpc' must be \"2.0\"");
	method = json_object_get(req, "method");
	if (!json_is_string(method))
		return error_line(id, CTL_INVALID_REQUEST, "'method' must be a string");
	params = json_object_get(req, "params");
	if (params == NULL)
		params = empty = json_object();
	else if (!json_is_object(params)) {
		return error_line(id, CTL_INVALID_REQUEST,
				  "'params' must be an object of named parameters");
	}
	e->code = 0;
	if (strict && strcmp(json_string_value(method), "subscribe") == 0)
		result = subscribe(params, e);
	else
		result = ctl_call(json_string_value(method), params, e);
	json_decref(empty);
	if (result == NULL && e->code == CTL_DEFERRED) {
		if (!strict)              /* the config file: wait for it here */
			result = ctl_setup_wait(e);
		else
			return defer_answer(id);
	}
	if (strict && id == NULL) {       /* a notification: no answer */
		json_decref(result);
		return NULL;
	}
	return answer_line(id, result, e);
}

char *ctl_handle_line(const char *line, size_t len)
{
	struct ctl_error e = { 0 };
	json_error_t jerr;
	json_t *req;
	char *resp;

	req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (req == NULL) {
		char msg[300];

		snprintf(msg, sizeof(msg), "not JSON: %s (column %d)", jerr.text, jerr.column);
		return error_line(NULL, CTL_PARSE_ERROR, msg);
	}
	resp = handle_request(req, true, &e);
	json_decref(req);
	return resp;
}

/* ---- config file ---- */

static bool blank_or_comment(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	return *s == '\0' || *s == '#';
}

int ctl_apply_file(const char *file, bool keep_going)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, *resp;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, failed = 0;

	if (f == NULL) {
		LOG(ERR, "cannot open %s: %s", file, strerror(errno));
		return -1;
	}
	while ((keep_going || failed == 0) && (n = getline(&line, &cap, f)) >= 0) {
		struct ctl_error e = { 0 };
		json_error_t jerr;
		json_t *req, *answer;

		lineno++;
		if (blank_or_comment(line))
			continue;
		req = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
		if (req == NULL) {
			LOG(ERR, "%s:%d: not JSON: %s", file, lineno, jerr.text);
			failed++;
			continue;
		}
		resp = handle_request(req, false, &e);
		json_decref(req);
		answer = resp ? json_loads(resp, 0, NULL) : NULL;
		if (answer != NULL && json_object_get(answer, "error") != NULL) {
			LOG(ERR, "%s:%d: %s", file, lineno, json_string_value(json_object_get(
				json_object_get(answer, "error"), "message")));
			failed++;
		}
		json_decref(answer);
		free(resp);
	}
	free(line);
	fclose(f);
	if (failed == 0)
		LOG(INFO, "applied %s (%d lines)", file, lineno);
	return keep_going ? failed : (failed ? -1 : 0);
}

int ctl_apply_config(const char *file)
{
	return ctl_apply_file(file, false);
}

/* ---- socket ---- */

/* Makes PATH's directory if it is missing, group GID's when GID is not -1 (so the socket
 * group's members can reach the socket in it). */
static int make_parent_dir(const char *path, gid_t gid)
{
	char dir[sizeof(listen_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0750) != 0)
		return errno == EEXIST ? 0 : -1;
	if (gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) != 0)
		LOG(WARNING, "cannot give %s to group %u: %s", dir, (unsigned int)gid,
		    strerror(errno));
	return 0;
}

/* The socket group's id, or -1 when there is none (not configured, or no such group). */
static gid_t socket_gid(void)
{
	const char *name = ctl_cfg.socket_group;
	struct group *g;

	if (name == NULL || name[0] == '\0')
		return (gid_t)-1;
	errno = 0;
	g = getgrnam(name);
	if (g == NULL) {
		LOG(WARNING, "no group '%s': the control socket stays the daemon's group's "
		    "(only root and that group may use it)", name);
		return (gid_t)-1;
	}
	return g->gr_gid;
}

int ctl_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	gid_t gid;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		LOG(ERR, "socket path %s is too long", path);
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	gid = socket_gid();
	if (make_parent_dir(path, gid) != 0) {
		LOG(ERR, "cannot make the directory of %s: %s", path, strerror(errno));
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		LOG(ERR, "another sluiced answers on %s (use --socket for a second daemon)", path);
		close(fd);
		return -1;
	}
	unlink(path);   /* nobody answers: a file left by a daemon that died */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0660) != 0 ||
	    listen(fd, 16) != 0) {
		LOG(ERR, "cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) != 0) {
		LOG(ERR, "cannot give %s to group %s: %s", path, ctl_cfg.socket_group, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	listen_fd = fd;
	snprintf(listen_path, sizeof(listen_path), "%s", path);
	LOG(INFO, "control socket %s%s%s", path, gid != (gid_t)-1 ? ", group " : "",
	    gid != (gid_t)-1 ? ctl_cfg.socket_group : "");
	return 0;
}

static void free_client(struct client *c)
{
	ctl_sub_free(c->sub);
	cap_owner_gone(c->id);      /* its captures end with it: capture.h */
	close(c->fd);
	free(c->out);
	free(c->buf);
	free(c);
}

void ctl_close(void)
{
	unsigned int i;

	for (i = 0; i < CTL_MAX_CLIENTS; i++)
		if (clients[i] != NULL) {
			free_client(clients[i]);
			clients[i] = NULL;
		}
	if (listen_fd >= 0) {
		close(listen_fd);
		unlink(listen_path);
		listen_fd = -1;
	}
}

static void drop_client(unsigned int slot)
{
	if (deferred.active && deferred.slot == (int)slot)
		deferred.slot = -1;     /* its add-port goes on; the answer has nobody to go to */
	epoll_ctl(epoll_fd, EPOLL_CTL_DEL, clients[slot]->fd, NULL);
	free_client(clients[slot]);
	clients[slot] = NULL;
}

static size_t out_pending(const struct client *c)
{
	return c->out_used - c->out_sent;
}

/* True while the client in SLOT waits for a deferred answer (its requests wait too). */
static bool client_waiting(unsigned int slot)
{
	return deferred.active && deferred.slot == (int)slot;
}

/* Queues LINE (taken over) for C; -1 when C has more unread answers than it may. */
static int queue_line(struct client *c, char *line)
{
	size_t n = strlen(line), cap;
	char *grown;

	if (out_pending(c) + n > CTL_OUT_MAX) {
		free(line);
		return -1;
	}
	if (c->out_sent > 0 && c->out_used + n > c->out_cap) {
		memmove(c->out, c->out + c->out_sent, out_pending(c));
		c->out_used -= c->out_sent;
		c->out_sent = 0;
	}
	if (c->out_used + n > c->out_cap) {
		for (cap = c->out_cap ? c->out_cap : 4096; cap < c->out_used + n; cap *= 2)
			;
		grown = realloc(c->out, cap);
		if (grown == NULL) {
			free(line);
			return -1;
		}
		c->out = grown;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_used, line, n);
	c->out_used += n;
	free(line);
	return 0;
}

/* Sends what C's socket takes now; -1 when the connection is broken. */
static int flush_client(struct client *c)
{
	ssize_t w;

	while (out_pending(c) > 0) {
		w = send(c->fd, c->out + c->out_sent, out_pending(c), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (w <= 0)
			return -1;
		c->out_sent += (size_t)w;
		c->last_ms = now_ms();
	}
	c->out_sent = c->out_used = 0;
	if (c->out_cap > CTL_OUT_KEEP) {   /* one big answer need not pin its memory */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	return 0;
}

/* Watches C for what it needs: requests while it may send more, room while output waits. */
static void update_events(struct client *c, unsigned int slot)
{
	struct epoll_event ev = { .events = 0, .data.u32 = slot + 1 };

	if (!c->closing && out_pending(c) < CTL_OUT_PAUSE && c->len < CTL_LINE_MAX &&
	    !client_waiting(slot))
		ev.events |= EPOLLIN;
	if (out_pending(c) > 0)
		ev.events |= EPOLLOUT;
	if (ev.events != c->events) {
		epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
		c->events = ev.events;
	}
}

/* The client idle longest, if it has been idle CTL_EVICT_IDLE_MS; -1 if none. */
static int longest_idle(uint64_t now)
{
	int slot, best = -1;

	for (slot = 0; slot < CTL_MAX_CLIENTS; slot++)
		if (clients[slot] != NULL && out_pending(clients[slot]) == 0 &&
		    !client_waiting((unsigned int)slot) && clients[slot]->sub == NULL &&
		    now - clients[slot]->last_ms >= CTL_EVICT_IDLE_MS &&
		    (best < 0 || clients[slot]->last_ms < clients[best]->last_ms))
			best = slot;
	return best;
}

static void refuse_client(int fd)
{
	char *msg = error_line(NULL, CTL_LIMIT, "too many control connections");

	if (msg != NULL && send(fd, msg, strlen(msg), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		LOG(DEBUG, "could not tell a client it was refused");
	free(msg);
	close(fd);
}

/*
 * A free slot for a new client. When all are taken, the client idle longest makes room if
 * it has said nothing for a while: idle connections (a crashed tool's, a forgotten shell's)
 * must not lock sluicectl out, and one idle a second longer is unlikely to be mid-dialogue.
 */
static int free_client_slot(void)
{
	uint64_t now = now_ms();
	int slot;

	for (slot = 0; slot < CTL_MAX_CLIENTS; slot++)
		if (clients[slot] == NULL)
			return slot;
	slot = longest_idle(now);
	if (slot >= 0) {
		LOG(NOTICE, "control: %d connections; closing the one idle longest (%.1f s) to "
		    "make room", CTL_MAX_CLIENTS, (double)(now - clients[slot]->last_ms) / 1000);
		drop_client((unsigned int)slot);
	}
	return slot;
}

static void accept_client(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct client *c;
	int fd, slot;

	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	slot = free_client_slot();
	if (slot < 0) {
		refuse_client(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c != NULL && (c->buf = malloc(CTL_LINE_MIN + 1)) == NULL) {
		free(c);
		c = NULL;
	}
	if (c == NULL) {
		close(fd);
		return;
	}
	c->cap = CTL_LINE_MIN;
	c->fd = fd;
	c->events = EPOLLIN;
	c->last_ms = now_ms();
	c->id = next_conn_id++;
	clients[slot] = c;
	ev.data.u32 = (uint32_t)slot + 1;
	epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

static bool only_space(const char *s, const char *end)
{
	for (; s < end; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r')
			return false;
	return true;
}

/* Gives C's input buffer room for CAP bytes; false when no memory (it stays as it was). */
static bool resize_input(struct client *c, size_t cap)
{
	char *buf = realloc(c->buf, cap + 1);

	if (buf == NULL)
		return false;
	c->buf = buf;
	c->cap = cap;
	return true;
}

/*
 * Answers the complete lines in C's buffer while its unread output is under CTL_OUT_PAUSE;
 * the rest wait there for the client to read. -1 when the client must be dropped.
 */
static int serve_lines(struct client *c, unsigned int slot)
{
	char *start = c->buf, *nl, *resp;
	int rc = 0;

	while (rc == 0 && !c->closing && out_pending(c) < CTL_OUT_PAUSE &&
	       !client_waiting(slot) &&
	       (nl = memchr(start, '\n', c->len - (size_t)(start - c->buf)))) {
		if (!only_space(start, nl)) {
			current_slot = (int)slot;
			resp = ctl_handle_line(start, (size_t)(nl - start));
			current_slot = -1;
			if (resp != NULL && queue_line(c, resp) != 0) {
				LOG(WARNING, "control: dropping a client with more than %d MiB of "
				    "unread answers", CTL_OUT_MAX >> 20);
				rc = -1;
			}
		}
		start = nl + 1;
	}
	c->len -= (size_t)(start - c->buf);
	memmove(c->buf, start, c->len);
	if (rc == 0 && !c->closing && c->len == CTL_LINE_MAX &&
	    memchr(c->buf, '\n', c->len) == NULL) {
		resp = error_line(NULL, CTL_INVALID_REQUEST, "request longer than 64 MiB");
		if (resp != NULL)
			rc = queue_line(c, resp);
		c->closing = true;
	}
	if (c->cap > CTL_LINE_MIN && c->len <= CTL_LINE_MIN)
		resize_input(c, CTL_LINE_MIN);
	return rc;
}

/* Serves what C has buffered, sends what it can and re-arms epoll; drops C when done. */
static void serve_client(unsigned int slot)
{
	struct client *c = clients[slot];

	/*
	 * Until the requests already read are answered or the answers back up: a flush that
	 * drains the output below CTL_OUT_PAUSE frees the requests waiting in the buffer, and
	 * no epoll event would come for them (the socket may hold nothing more to read).
	 */
	do {
		if (serve_lines(c, slot) != 0 || flush_client(c) != 0 ||
		    (c->closing && out_pending(c) == 0)) {
			drop_client(slot);
			return;
		}
	} while (!c->closing && !client_waiting(slot) && out_pending(c) < CTL_OUT_PAUSE &&
		 memchr(c->buf, '\n', c->len) != NULL);
	update_events(c, slot);
}

static void read_client(unsigned int slot)
{
	struct client *c = clients[slot];
	ssize_t n;

	if (c->len == CTL_LINE_MAX || c->closing)
		return;
	/* A full buffer holds no newline (serve_lines answered every line): a long request. */
	if (c->len == c->cap && (memchr(c->buf, '\n', c->len) != NULL ||
				  !resize_input(c, RTE_MIN(c->cap * 2, (size_t)CTL_LINE_MAX))))
		return;
	n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		drop_client(slot);
		return;
	}
	if (n < 0)
		return;
	c->len += (size_t)n;
	c->last_ms = now_ms();
}

static void client_event(unsigned int slot, uint32_t events)
{
	if (events & EPOLLIN)
		read_client(slot);
	else if (events & (EPOLLHUP | EPOLLERR)) {
		drop_client(slot);
		return;
	}
	if (clients[slot] != NULL)
		serve_client(slot);
}

/* Closes clients that moved no byte for --client-idle-timeout. */
static void close_idle_clients(void)
{
	uint64_t now = now_ms(), limit = (uint64_t)ctl_cfg.idle_timeout_s * 1000;
	unsigned int slot;

	if (limit == 0)
		return;
	for (slot = 0; slot < CTL_MAX_CLIENTS; slot++)
		if (clients[slot] != NULL && !client_waiting(slot) && clients[slot]->sub == NULL &&
		    now - clients[slot]->last_ms >= limit) {
			LOG(INFO, "control: closing a connection idle for %u s",
			    ctl_cfg.idle_timeout_s);
			drop_client(slot);
		}
}

/* Sends each subscriber what happened on its switch since the last tick. */
static void push_events(void)
{
	unsigned int slot;
	json_t *events = json_array(), *v;
	size_t i;

	for (slot = 0; slot < CTL_MAX_CLIENTS; slot++) {
		struct client *c = clients[slot];
		bool alive;

		if (c == NULL || c->sub == NULL || c->closing)
			continue;
		json_array_clear(events);
		alive = ctl_sub_collect(c->sub, out_pending(c) < CTL_EVENT_PAUSE, events);
		json_array_foreach(events, i, v) {
			char *line = dump_line(json_incref(v), NULL);

			if (line != NULL && queue_line(c, line) != 0) {
				alive = false;
				break;
			}
		}
		if (!alive)
			c->closing = true;
		if (json_array_size(events) > 0 || !alive)
			serve_client(slot);
	}
	json_decref(events);
}

static void refresh_links(void)
{
	unsigned int id;

	for (id = 1; id <= PORT_MAX; id++)
		if (port_by_id(id) != NULL)
			port_refresh_link(port_by_id(id));
}

static int make_signal_fd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return signalfd(-1, &set, SFD_CLOEXEC);
}

/* Gives the deferred add-port its answer, once the set-up thread is done. */
static void deliver_setup_answer(void)
{
	struct ctl_error e = { 0 };
	json_t *result = NULL, *id;
	char *line = NULL;
	int slot;

	if (ctl_setup_collect(&result, &e) == 0)
		return;
	if (!deferred.active) {
		json_decref(result);
		return;
	}
	slot = deferred.slot;
	id = deferred.id;
	deferred.active = false;
	deferred.id = NULL;
	if (id != NULL)
		line = answer_line(id, result, &e);
	else
		json_decref(result);
	json_decref(id);
	if (line == NULL)
		return;
	if (slot < 0 || clients[slot] == NULL) {
		free(line);
		return;
	}
	if (queue_line(clients[slot], line) != 0) {
		drop_client((unsigned int)slot);
		return;
	}
	serve_client((unsigned int)slot);   /* sends it and serves the requests that waited */
}

static void drain_eventfd(int fd)
{
	uint64_t count;

	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		LOG(DEBUG, "eventfd: %s", strerror(errno));
}

/* SIGTERM while a port is being set up: cancel it and tell its client, then shut down. */
static void abort_setup(void)
{
	if (port_setup_pending() == NULL)
		return;
	if (!ctl_setup_abort("the daemon is shutting down")) {
		LOG(ERR, "port %s: its set-up does not end; shutting down anyway",
		    port_setup_pending());
		return;
	}
	deliver_setup_answer();
}

int ctl_serve(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, events[16];
	int sigfd, setupfd, pinfd, n, i, timeout = CTL_LINK_MS, state_due;
	uint64_t last_links = 0, now;
	bool running = true;

	epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	sigfd = make_signal_fd();
	setupfd = port_setup_fd();
	if (epoll_fd < 0 || sigfd < 0 || setupfd < 0) {
		LOG(ERR, "epoll/signalfd: %s", strerror(errno));
		return -1;
	}
	ev.data.u32 = 0;
	epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
	ev.data.u32 = UINT32_MAX;
	epoll_ctl(epoll_fd, EPOLL_CTL_ADD, sigfd, &ev);
	ev.data.u32 = UINT32_MAX - 1;
	epoll_ctl(epoll_fd, EPOLL_CTL_ADD, setupfd, &ev);
	/* Packet-ins queued by workers: handed to subscribers below (push_events) without
	 * waiting for the housekeeping tick. Without it they still go on the tick. */
	pinfd = fwd_flow_wake_fd();
	ev.data.u32 = UINT32_MAX - 2;
	if (pinfd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, pinfd, &ev) != 0)
		LOG(WARNING, "packet-in eventfd: %s; packet-ins wait for the %d ms tick",
		    strerror(errno), CTL_HOUSEKEEPING_MS);
	while (running) {
		n = epoll_wait(epoll_fd, events, RTE_DIM(events), timeout);
		if (n < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			uint32_t tag = events[i].data.u32;

			if (tag == UINT32_MAX) {
				struct signalfd_siginfo si;

				if (read(sigfd, &si, sizeof(si)) == sizeof(si))
					LOG(NOTICE, "signal %u: shutting down", si.ssi_signo);
				notify_send("STOPPING=1\nSTATUS=shutting down");
				running = false;
			} else if (tag == UINT32_MAX - 1) {
				drain_eventfd(setupfd);
				deliver_setup_answer();
			} else if (tag == UINT32_MAX - 2) {
				drain_eventfd(pinfd);    /* push_events takes them */
			} else if (tag == 0) {
				accept_client();
			} else if (clients[tag - 1] != NULL) {
				client_event(tag - 1, events[i].events);
			}
		}
		timeout = sw_tick_all() ? CTL_HOUSEKEEPING_MS : CTL_LINK_MS;
		push_events();
		ofa_tick();
		state_due = state_pending_ms();
		if (state_due >= 0)
			timeout = RTE_MIN(timeout, state_due);
		if (port_setup_pending() != NULL) {   /* its deadline, or a cancel to repeat */
			port_setup_poll();
			timeout = RTE_MIN(timeout, CTL_SETUP_POLL_MS);
		}
		now = now_ms();
		if (now - last_links >= CTL_LINK_MS) {
			refresh_links();
			close_idle_clients();
			rxq_tick();
			cap_tick();
			last_links = now;
		}
	}
	state_flush();
	abort_setup();
	close(sigfd);
	close(epoll_fd);
	epoll_fd = -1;
	return 0;
}
