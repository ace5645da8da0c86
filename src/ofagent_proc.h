/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluiced runs the OpenFlow agent itself (docs/openflow.md): one sluice-ofagent process per
 * flow switch that has controllers (set-controller), started with posix_spawn, reaped, and
 * restarted with back-off when it exits; stopped when the switch's controllers are removed,
 * the switch is deleted or the daemon stops. So `set-controller` is all a user does.
 */
#ifndef SLUICE_OFAGENT_PROC_H
#define SLUICE_OFAGENT_PROC_H

/* PATH: the agent's program ("sluice-ofagent": found on $PATH; NULL: never start one, the
 * agent is run by hand). SOCKET: the control socket the agent is given. */
void ofa_init(const char *path, const char *socket);

/* Starts, reaps and restarts agents as the switches' settings say. Control thread. */
void ofa_tick(void);

/* Stops every agent (SIGTERM, then SIGKILL after a second), at shutdown. */
void ofa_stop_all(void);

#endif
