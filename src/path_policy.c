/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The path policy (path_policy.h). The checks run when a port is added; DPDK opens the
 * file a moment later, so someone who can write in the directory could still swap the file
 * in between. --port-dir with directories only trusted users can write closes that too.
 */
#include "path_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Resolved directories, without a trailing '/' (so "/" is ""). */
static char dirs[PATH_POLICY_MAX_DIRS][PATH_MAX];
static unsigned int n_dirs;

int path_policy_allow_dir(const char *dir, char *err, size_t err_len)
{
	char resolved[PATH_MAX];
	struct stat st;
	size_t len;

	if (n_dirs == PATH_POLICY_MAX_DIRS) {
		snprintf(err, err_len, "at most %d --port-dir directories", PATH_POLICY_MAX_DIRS);
		return -1;
	}
	if (realpath(dir, resolved) == NULL || stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, err_len, "--port-dir '%s' is not a directory", dir);
		return -1;
	}
	len = strlen(resolved);
	if (len > 0 && resolved[len - 1] == '/')
		resolved[len - 1] = '\0';
	memcpy(dirs[n_dirs++], resolved, strlen(resolved) + 1);
	return 0;
}

static int refuse(const struct portspec *ps, const struct portspec_path *p, char *err,
		  size_t err_len, const char *why)
{
	snprintf(err, err_len, "%s: '%s': '%s' %s", portspec_kind_name(ps->kind), p->key,
		 p->path, why);
	return -1;
}

/*
 * Where PATH leads: every symlink followed. A path that does not exist yet is its resolved
 * parent plus its last component; a symlink that leads nowhere does not resolve.
 */
static int resolve(const char *path, char *out)
{
	char parent[PATH_MAX], dir[PATH_MAX];
	const char *base = strrchr(path, '/') + 1;   /* the parser made PATH absolute */
	struct stat st;
	int w;

	if (lstat(path, &st) == 0)
		return realpath(path, out) != NULL ? 0 : -1;
	snprintf(parent, sizeof(parent), "%.*s", (int)(base - path), path);
	if (realpath(parent, dir) == NULL)
		return -1;
	w = snprintf(out, PATH_MAX, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base);
	return (w < 0 || w >= PATH_MAX) ? -1 : 0;
}

static bool under_allowed_dir(const char *resolved)
{
	unsigned int i;
	size_t len;

	for (i = 0; i < n_dirs; i++) {
		len = strlen(dirs[i]);
		if (strncmp(resolved, dirs[i], len) == 0 && resolved[len] == '/')
			return true;
	}
	return false;
}

static int check_dirs(const struct portspec *ps, const struct portspec_path *p, char *err,
		      size_t err_len)
{
	char resolved[PATH_MAX], why[PATH_MAX + 64];

	if (n_dirs == 0)
		return 0;
	if (resolve(p->path, resolved) != 0)
		return refuse(ps, p, err, err_len, "does not resolve (a missing directory, or a "
			      "symlink to nothing); with --port-dir every path must");
	if (under_allowed_dir(resolved))
		return 0;
	snprintf(why, sizeof(why), "is outside the --port-dir directories (it leads to '%s')",
		 resolved);
	return refuse(ps, p, err, err_len, why);
}

/* Whether the 4 bytes at B start a pcap (either byte order, µs or ns) or pcapng file. */
static bool is_capture_magic(const uint8_t b[4])
{
	static const uint32_t magic[] = { 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1,
					  0x0a0d0d0a };
	uint32_t m = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
	unsigned int i;

	for (i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if (m == magic[i])
			return true;
	return false;
}

/* An existing file a pcap tx would truncate: only a capture, so nothing else is lost. */
static int check_overwrite(const struct portspec *ps, const struct portspec_path *p,
			   char *err, size_t err_len)
{
	/* O_NONBLOCK: were a FIFO swapped in since stat(), open() must not wait for a writer. */
	int fd = open(p->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	uint8_t head[4];
	struct stat st;
	ssize_t got;

	if (fd < 0)
		return refuse(ps, p, err, err_len, "exists and cannot be read to check that it "
			      "is a capture");
	got = (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) ? read(fd, head, sizeof(head)) : -1;
	close(fd);
	if (got != (ssize_t)sizeof(head) || !is_capture_magic(head))
		return refuse(ps, p, err, err_len, "exists and is not a pcap or pcapng capture "
			      "(sluice overwrites only captures; remove it or pick another name)");
	return 0;
}

static int check_one(const struct portspec *ps, const struct portspec_path *p, char *err,
		     size_t err_len)
{
	struct stat lst, st;

	if (check_dirs(ps, p, err, err_len) != 0)
		return -1;
	if (lstat(p->path, &lst) != 0)
		return 0;          /* a new file or socket; a missing rx file is port.c's error */
	if (stat(p->path, &st) != 0) {
		/* Writing through a dangling link would create its target, wherever it is. */
		return p->use == PORTSPEC_PATH_WRITE
		       ? refuse(ps, p, err, err_len, "is a symlink to a missing file") : 0;
	}
	switch (p->use) {
	case PORTSPEC_PATH_READ:
		return S_ISREG(st.st_mode) ? 0
		       : refuse(ps, p, err, err_len, "is not a regular file");
	case PORTSPEC_PATH_WRITE:
		if (!S_ISREG(st.st_mode))
			return refuse(ps, p, err, err_len, "is not a regular file");
		return check_overwrite(ps, p, err, err_len);
	case PORTSPEC_PATH_SOCKET_SERVER:
	case PORTSPEC_PATH_SOCKET_CLIENT:
		return S_ISSOCK(st.st_mode) ? 0
		       : refuse(ps, p, err, err_len, "exists and is not a socket");
	}
	return 0;
}

int path_policy_check(const struct portspec *ps, char *err, size_t err_len)
{
	unsigned int i;

	for (i = 0; i < ps->n_paths; i++)
		if (check_one(ps, &ps->paths[i], err, err_len) != 0)
			return -1;
	return 0;
}
