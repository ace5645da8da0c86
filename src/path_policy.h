/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The path policy: what the files a port spec names may be, checked on this host before the
 * device is made (docs/operations.md, "Path policy"). sluiced usually runs as root and DPDK's
 * drivers open what they are given, so without it `pcap:tx=/etc/passwd` would truncate that
 * file. The spec parser has already made every path absolute and free of "..".
 *
 *   - pcap tx: a new file, or an existing regular file that is a pcap or pcapng capture;
 *   - pcap rx: a regular file (a FIFO would block the control thread in the driver);
 *   - sockets: a socket or nothing (a server removes only a stale socket: port.c);
 *   - with --port-dir, every path must resolve (symlinks followed, so none can escape) to
 *     a place under one of the given directories.
 *
 * sluiced only; sluice-gen runs as its user and keeps the parser's rules alone. Control thread.
 */
#ifndef SLUICE_PATH_POLICY_H
#define SLUICE_PATH_POLICY_H

#include <stddef.h>

#include "portspec.h"

#define PATH_POLICY_MAX_DIRS 16

/* Adds DIR (which must exist) to the --port-dir directories; -1 with a message in ERR. */
int path_policy_allow_dir(const char *dir, char *err, size_t err_len);

/* Checks every path of PS; -1 with a message naming the kind and key in ERR. */
int path_policy_check(const struct portspec *ps, char *err, size_t err_len);

#endif
