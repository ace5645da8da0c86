/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The service manager's notify protocol (sd_notify(3)), without libsystemd: one datagram
 * with "VAR=value" lines to the Unix socket named by $NOTIFY_SOCKET (a path, or '@' for an
 * abstract name). sluiced.service is Type=notify: READY=1 once the control socket answers,
 * STOPPING=1 when a signal asks the daemon to stop. Without $NOTIFY_SOCKET it does nothing.
 */
#ifndef SLUICE_NOTIFY_H
#define SLUICE_NOTIFY_H

/* Sends STATE (e.g. "READY=1\nSTATUS=...") to $NOTIFY_SOCKET; 0 when sent or when there is
 * no such socket, -1 (errno set) when it could not be sent. */
int notify_send(const char *state);

#endif
