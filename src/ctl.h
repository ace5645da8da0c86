/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control server: JSON-RPC 2.0 on a Unix socket, one request per line (docs/protocol.md).
 * It runs on the main lcore's thread, which blocks in epoll when nothing happens, so it
 * never competes with a worker for a CPU. Every change to switches and ports happens here,
 * one request at a time, so the control side needs no locks of its own.
 */
#ifndef SLUICE_CTL_H
#define SLUICE_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* JSON-RPC error codes (docs/protocol.md). */
enum ctl_code {
	CTL_PARSE_ERROR = -32700,
	CTL_INVALID_REQUEST = -32600,
	CTL_METHOD_NOT_FOUND = -32601,
	CTL_INVALID_PARAMS = -32602,
	CTL_INTERNAL = -32603,
	CTL_NOT_FOUND = -32000,
	CTL_EXISTS = -32001,
	CTL_BAD_SPEC = -32002,
	CTL_DEVICE = -32003,
	CTL_LIMIT = -32004,
	CTL_WRONG_STATE = -32005,
	CTL_DEFERRED = 1,        /* not an error: ctl_setup_collect gives the answer later */
};

struct ctl_error {
	int code;
	char message[512];
};

/* Runs METHOD with PARAMS (an object). Returns the result, or NULL with *E filled in. */
json_t *ctl_call(const char *method, json_t *params, struct ctl_error *e);

/*
 * add-port answers CTL_DEFERRED: its port is set up on the set-up thread (port.h). When
 * port_setup_fd() fires, ctl_setup_collect returns 1 with the answer (the result, or NULL
 * and *E), or 0 when there is none to give. ctl_setup_wait waits for it instead (config).
 */
int ctl_setup_collect(json_t **result, struct ctl_error *e);
json_t *ctl_setup_wait(struct ctl_error *e);

/* Cancels a pending set-up and waits for it (shutdown); false if it would not end. */
bool ctl_setup_abort(const char *reason);

/*
 * The connection whose request is being answered: a number no other connection of this
 * daemon's life has, or 0 for none (the config file).
 */
uint64_t ctl_conn_id(void);

/* Answers one request line; returns the response line to send, or NULL (notification). */
char *ctl_handle_line(const char *line, size_t len);

/* Runs every request in FILE; on the first failure prints it with its line number. */
int ctl_apply_config(const char *file);
/* Applies FILE's requests (one JSON object a line, '#' comments); with KEEP_GOING a request
 * that fails is logged and skipped, and the count of failures returned; without, the first
 * failure ends it with -1. -1 also when FILE cannot be read. */
int ctl_apply_file(const char *file, bool keep_going);

struct ctl_config {
	unsigned int idle_timeout_s;       /* close a client silent this long; 0: never */
	const char *socket_group;          /* chgrp the socket to it, if it exists; NULL: no */
};

/* Sets the control server's limits (before ctl_serve). */
void ctl_init(const struct ctl_config *cfg);

/* Listens on PATH (made 0660, and given to the configured socket group when that group
 * exists; an abandoned socket file is replaced, a live one refused). */
int ctl_listen(const char *path);

/* Serves clients until SIGINT or SIGTERM. Those signals must be blocked in every thread. */
int ctl_serve(void);

/* Closes the socket and removes its file. */
void ctl_close(void);

/* Deletes every switch and its ports (shutdown). */
void ctl_delete_all(void);

#endif
