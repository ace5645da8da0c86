/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the control protocol: ctl_handle_line() (src/ctl.c) and every method
 * of src/ctl_methods.c, on the daemon's real objects. The EAL runs in-process without
 * hugepages (fuzz_eal.h); one worker is set up but never started, so the control side's
 * grace periods end at once. An input is a few request lines, run in order on fresh state
 * (everything is deleted after each input).
 *
 * Ports: add-port sets its port up on the set-up thread and answers later (ctl.c, deferred
 * answers). The target drives that as ctl_serve() does: it waits for the set-up thread and
 * calls ctl.c's own deliver_setup_answer(), which writes the answer to a client, here one
 * end of a socketpair. Only specs that make no outside object reach the daemon: `null`
 * ports, `ring` ports on the rings r0..r3, and specs the parser refuses (refused before any
 * device is made). Other lines are left out of the run, since they would create sockets,
 * files and network interfaces on the machine (the port-spec target covers their parsing).
 *
 * Checked for every request that is run: exactly one answer line (none for a notification),
 * which is JSON-RPC 2.0 with the request's id (null when it had none usable), and either a
 * result or an error with an integer code and a string message. After each input the daemon
 * must hold no port and no pending set-up.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rte_ethdev.h>

/* ctl.c itself, so that the target can hand deferred answers to a client as ctl_serve does. */
#include "../../src/ctl.c"

#include "fuzz_eal.h"
#include "portspec.h"
#include "worker.h"

#define MAX_LINES 24            /* requests per input */
#define SETUP_WAIT_MS 10000     /* a null or ring port is up long before this */

static int peer_fd = -1;        /* the "sluicectl" end of the client's socketpair */
static bool verbose;            /* FUZZ_RPC_VERBOSE=1: print requests and answers */
static char answer[1 << 20];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct port_config pcfg = { .n_workers = 1, .rx_desc = 64, .tx_desc = 64,
						  .n_mbufs = 1024, .setup_timeout_s = 5 };
	static const struct wk_config wcfg = { .burst = 32, .idle_sleep_us = 0 };
	static const struct ctl_config ccfg = { .idle_timeout_s = 0 };
	struct client *c = calloc(1, sizeof(*c));
	int sv[2];
	sigset_t set;

	(void)argc;
	(void)argv;
	/* As sluiced's main(): only the set-up thread takes SIGUSR1 (port.c). */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	verbose = getenv("FUZZ_RPC_VERBOSE") != NULL;
	fuzz_eal_init();
	port_init(&pcfg);
	ctl_init(&ccfg);
	if (wk_init(1, &wcfg) != 0 || c == NULL || (c->buf = malloc(CTL_LINE_MIN + 1)) == NULL ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	c->cap = CTL_LINE_MIN;
	c->fd = sv[0];
	peer_fd = sv[1];
	clients[0] = c;
	return 0;
}

/* Whether LINE may run here: anything but an add-port that would make an outside object. */
static bool may_run(const char *line, size_t len)
{
	json_t *req = json_loadb(line, len, JSON_DECODE_ANY, NULL), *params;
	const char *spec;
	struct portspec ps;
	char err[PORTSPEC_ERR_LEN];
	bool ok = true;

	params = json_object_get(req, "params");
	spec = json_string_value(json_object_get(params, "spec"));
	if (json_is_object(req) && json_is_string(json_object_get(req, "method")) &&
	    strcmp(json_string_value(json_object_get(req, "method")), "add-port") == 0 &&
	    spec != NULL && portspec_parse(spec, "p1", 1, &ps, err, sizeof(err)) == 0) {
		const char *ring = strstr(ps.devargs, "nodeaction=");

		ok = ps.kind == PORTSPEC_NULL ||
		     (ps.kind == PORTSPEC_RING && ring != NULL && ring[11] == 'r' &&
		      ring[12] >= '0' && ring[12] <= '3' && ring[13] == ':');
	}
	json_decref(req);
	return ok;
}

/* The id an answer to LINE must carry: the request's, or null when it has none usable. */
static json_t *expected_id(const char *line, size_t len, bool *notification)
{
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	json_t *id = json_object_get(req, "id");
	json_t *want = json_null();

	*notification = json_is_object(req) && id == NULL;
	if (id != NULL && (json_is_string(id) || json_is_integer(id) || json_is_null(id)))
		want = json_incref(id);
	json_decref(req);
	return want;
}

/* TEXT is one answer line to a request whose id is WANT. */
static void check_answer(const char *text, json_t *want)
{
	size_t len = strlen(text);
	const char *version;
	json_t *a, *err;

	if (verbose)
		fprintf(stderr, "<- %s", text);

	if (len == 0 || text[len - 1] != '\n' || memchr(text, '\n', len - 1) != NULL)
		abort();                     /* not exactly one line */
	a = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	version = json_string_value(json_object_get(a, "jsonrpc"));
	if (!json_is_object(a) || !json_equal(json_object_get(a, "id"), want) ||
	    version == NULL || strcmp(version, "2.0") != 0)
		abort();
	err = json_object_get(a, "error");
	if ((err == NULL) == (json_object_get(a, "result") == NULL) ||
	    (err != NULL && (!json_is_integer(json_object_get(err, "code")) ||
			     !json_is_string(json_object_get(err, "message")))))
		abort();                     /* a result or an error, and a well-formed one */
	json_decref(a);
}

/* What the client's socket holds now (answers ctl.c sent it). */
static size_t read_peer(void)
{
	size_t used = 0;
	ssize_t n;

	while ((n = recv(peer_fd, answer + used, sizeof(answer) - 1 - used, 0)) > 0)
		used += (size_t)n;
	answer[used] = '\0';
	return used;
}

/* The add-port the set-up thread is busy with: its answer, as ctl_serve() gives it. */
static void deliver_deferred(json_t *want, bool notification)
{
	if (!port_setup_wait(SETUP_WAIT_MS))
		abort();                     /* a null or ring port never takes this long */
	deliver_setup_answer();
	if (deferred.active)
		abort();
	read_peer();
	if (notification) {
		if (answer[0] != '\0')
			abort();             /* a notification gets no answer */
	} else {
		check_answer(answer, want);
	}
}

static void run_line(const char *line, size_t len)
{
	bool notification;
	json_t *want;
	char *resp;

	if (only_space(line, line + len) || !may_run(line, len))
		return;
	want = expected_id(line, len, &notification);
	if (verbose)
		fprintf(stderr, "-> %.*s\n", (int)len, line);
	current_slot = 0;
	resp = ctl_handle_line(line, len);
	current_slot = -1;
	if (resp != NULL) {
		check_answer(resp, want);
		if (deferred.active)
			abort();             /* answered now and later */
	} else if (deferred.active) {
		deliver_deferred(want, deferred.id == NULL);
	} else if (!notification) {
		abort();                     /* a request without an answer */
	}
	free(resp);
	json_decref(want);
}

static void reset_daemon(void)
{
	unsigned int id;

	ctl_delete_all();
	if (port_setup_pending() != NULL || deferred.active)
		abort();
	for (id = 1; id <= PORT_MAX; id++)
		if (port_by_id(id) != NULL)
			abort();             /* a port outlived its switch */
	read_peer();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl;
	unsigned int lines = 0;

	while (p < end && lines++ < MAX_LINES) {
		nl = memchr(p, '\n', (size_t)(end - p));
		run_line(p, (size_t)((nl != NULL ? nl : end) - p));
		p = nl != NULL ? nl + 1 : end;
	}
	reset_daemon();
	return 0;
}
