/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control socket: accepts clients, frames requests by line, checks the JSON-RPC
 * envelope and hands the method to ctl_methods.c. A client that sends garbage gets an
 * error answer (or, past 64 KiB without a newline, an answer and a closed connection);
 * nothing a client sends can stop the daemon.
 */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
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

#include "log.h"
#include "port.h"
#include "switch.h"

#define CTL_MAX_CLIENTS 64
#define CTL_LINE_MAX (64 * 1024)
#define CTL_LINK_MS 500          /* link states are re-read this often */
#define CTL_HOUSEKEEPING_MS 10   /* learning and aging, when a switch has any */

struct client {
	int fd;
	size_t len;
	char buf[CTL_LINE_MAX + 1];
};

static int listen_fd = -1;
static char listen_path[108];
static struct client *clients[CTL_MAX_CLIENTS];

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

static bool valid_id(json_t *id)
{
	return id == NULL || json_is_string(id) || json_is_integer(id) || json_is_null(id);
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
	result = ctl_call(json_string_value(method), params, e);
	json_decref(empty);
	if (strict && id == NULL) {       /* a notification: no answer */
		json_decref(result);
		return NULL;
	}
	if (result == NULL)
		return error_line(id, e->code ? e->code : CTL_INTERNAL, e->message);
	return dump_line(json_pack("{ss sO so}", "jsonrpc", "2.0", "id", id ? id : json_null(),
				   "result", result), id);
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

int ctl_apply_config(const char *file)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, *resp;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, rc = 0;

	if (f == NULL) {
		LOG(ERR, "cannot open config %s: %s", file, strerror(errno));
		return -1;
	}
	while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
		struct ctl_error e = { 0 };
		json_error_t jerr;
		json_t *req, *answer;

		lineno++;
		if (blank_or_comment(line))
			continue;
		req = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
		if (req == NULL) {
			LOG(ERR, "%s:%d: not JSON: %s", file, lineno, jerr.text);
			rc = -1;
			break;
		}
		resp = handle_request(req, false, &e);
		json_decref(req);
		answer = resp ? json_loads(resp, 0, NULL) : NULL;
		if (answer != NULL && json_object_get(answer, "error") != NULL) {
			LOG(ERR, "%s:%d: %s", file, lineno, json_string_value(json_object_get(
				json_object_get(answer, "error"), "message")));
			rc = -1;
		}
		json_decref(answer);
		free(resp);
	}
	free(line);
	fclose(f);
	if (rc == 0)
		LOG(INFO, "applied %s (%d lines)", file, lineno);
	return rc;
}

/* ---- socket ---- */

static int make_parent_dir(const char *path)
{
	char dir[sizeof(listen_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0750) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int ctl_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		LOG(ERR, "socket path %s is too long", path);
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (make_parent_dir(path) != 0) {
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
	listen_fd = fd;
	snprintf(listen_path, sizeof(listen_path), "%s", path);
	LOG(INFO, "control socket %s", path);
	return 0;
}

void ctl_close(void)
{
	unsigned int i;

	for (i = 0; i < CTL_MAX_CLIENTS; i++)
		if (clients[i] != NULL) {
			close(clients[i]->fd);
			free(clients[i]);
			clients[i] = NULL;
		}
	if (listen_fd >= 0) {
		close(listen_fd);
		unlink(listen_path);
		listen_fd = -1;
	}
}

static void drop_client(int epfd, unsigned int slot)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, clients[slot]->fd, NULL);
	close(clients[slot]->fd);
	free(clients[slot]);
	clients[slot] = NULL;
}

static void accept_client(int epfd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct timeval tv = { .tv_sec = 2 };
	unsigned int slot;
	int fd;

	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (slot = 0; slot < CTL_MAX_CLIENTS && clients[slot] != NULL; slot++)
		;
	if (slot == CTL_MAX_CLIENTS) {
		char *msg = error_line(NULL, CTL_LIMIT, "too many control connections");

		if (msg != NULL && write(fd, msg, strlen(msg)) < 0)
			LOG(DEBUG, "could not tell a client it was refused");
		free(msg);
		close(fd);
		return;
	}
	clients[slot] = malloc(sizeof(struct client));
	if (clients[slot] == NULL) {
		close(fd);
		return;
	}
	clients[slot]->fd = fd;
	clients[slot]->len = 0;
	/* Answers are written blocking; a client that stops reading is cut off after 2 s. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ev.data.u32 = slot + 1;
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static int send_all(int fd, const char *s)
{
	size_t left = strlen(s);
	ssize_t w;

	while (left > 0) {
		w = send(fd, s, left, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		s += w;
		left -= (size_t)w;
	}
	return 0;
}

static bool only_space(const char *s, const char *end)
{
	for (; s < end; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r')
			return false;
	return true;
}

/* Answers every complete line in C's buffer; -1 when the client must be dropped. */
static int serve_lines(struct client *c)
{
	char *start = c->buf, *nl, *resp;
	int rc = 0;

	while (rc == 0 && (nl = memchr(start, '\n', c->len - (size_t)(start - c->buf)))) {
		if (!only_space(start, nl)) {
			resp = ctl_handle_line(start, (size_t)(nl - start));
			if (resp != NULL && send_all(c->fd, resp) != 0)
				rc = -1;
			free(resp);
		}
		start = nl + 1;
	}
	c->len -= (size_t)(start - c->buf);
	memmove(c->buf, start, c->len);
	if (rc == 0 && c->len == CTL_LINE_MAX) {
		resp = error_line(NULL, CTL_INVALID_REQUEST, "request longer than 64 KiB");
		if (resp != NULL)
			send_all(c->fd, resp);
		free(resp);
		rc = -1;
	}
	return rc;
}

static void read_client(int epfd, unsigned int slot)
{
	struct client *c = clients[slot];
	ssize_t n;

	n = recv(c->fd, c->buf + c->len, CTL_LINE_MAX - c->len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		drop_client(epfd, slot);
		return;
	}
	if (n < 0)
		return;
	c->len += (size_t)n;
	if (serve_lines(c) != 0)
		drop_client(epfd, slot);
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

int ctl_serve(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, events[16];
	int epfd, sigfd, n, i, timeout = CTL_LINK_MS;
	uint64_t last_links = 0, now;
	bool running = true;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	sigfd = make_signal_fd();
	if (epfd < 0 || sigfd < 0) {
		LOG(ERR, "epoll/signalfd: %s", strerror(errno));
		return -1;
	}
	ev.data.u32 = 0;
	epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev);
	ev.data.u32 = UINT32_MAX;
	epoll_ctl(epfd, EPOLL_CTL_ADD, sigfd, &ev);
	while (running) {
		n = epoll_wait(epfd, events, RTE_DIM(events), timeout);
		if (n < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			uint32_t tag = events[i].data.u32;

			if (tag == UINT32_MAX) {
				struct signalfd_siginfo si;

				if (read(sigfd, &si, sizeof(si)) == sizeof(si))
					LOG(NOTICE, "signal %u: shutting down", si.ssi_signo);
				running = false;
			} else if (tag == 0) {
				accept_client(epfd);
			} else if (clients[tag - 1] != NULL) {
				read_client(epfd, tag - 1);
			}
		}
		timeout = sw_tick_all() ? CTL_HOUSEKEEPING_MS : CTL_LINK_MS;
		now = rte_get_timer_cycles() / (rte_get_timer_hz() / 1000);
		if (now - last_links >= CTL_LINK_MS) {
			refresh_links();
			last_links = now;
		}
	}
	close(sigfd);
	close(epfd);
	return 0;
}
