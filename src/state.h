/* SPDX-License-Identifier: BSD-3-Clause */
/* The state file: the configuration kept across restarts (state.c). Control thread only. */
#ifndef SLUICE_STATE_H
#define SLUICE_STATE_H

#include <stdbool.h>

/* Keeps the state in PATH; NULL or "" keeps none. */
void state_init(const char *path);
/* The state file's path, or NULL when there is none. */
const char *state_file(void);
bool state_exists(void);

/* Replays the state file, if there is one; a request that fails is logged and skipped.
 * -1 only when the file cannot be read. */
int state_restore(void);

/*
 * Rewrites the state file from the daemon's configuration (atomically): at once while a
 * rewrite is cheap, else soon after, several changes together (state.c). A no-op while
 * restoring or without a state file.
 */
void state_save(void);
/* The same, after the request being served is answered (a request carrying many rules). */
void state_save_later(void);
/* Does a save that has waited its turn; returns the milliseconds until the next one is due,
 * or -1 when none waits. The control loop calls it each round. */
int state_pending_ms(void);
/* Does a waiting save now (shutdown). */
void state_flush(void);

#endif
