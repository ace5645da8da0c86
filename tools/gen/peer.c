/* SPDX-License-Identifier: BSD-3-Clause */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The reason for a connect() errno, in the words a user acts on. */
static const char *connect_reason(int err)
{
	switch (err) {
	case ECONNREFUSED: return "connection refused: nothing listens on it (its server is "
				  "not running, or died and left the file behind)";
	case ENOENT: return "no such file";
	case EACCES: return "permission denied";
	case EPROTOTYPE: return "wrong socket type (not a memif socket?)";
	case EAGAIN: return "the server's backlog is full";
	default: return NULL;
	}
}

/* One non-blocking connect() attempt; 0 when it connected, else its errno. */
static int try_connect(const char *path, bool seqpacket)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, rc, err;

	if (strlen(path) >= sizeof(sun.sun_path))
		return ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, (seqpacket ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	rc = connect(fd, (const struct sockaddr *)&sun, sizeof(sun));
	err = rc == 0 || errno == EINPROGRESS ? 0 : errno;
	close(fd);
	return err;
}

bool peer_diagnose(const char *path, bool seqpacket, char *why, size_t len)
{
	struct stat st;
	const char *reason;
	int err;

	if (stat(path, &st) != 0) {
		snprintf(why, len, "%s", errno == ENOENT ? "no such file" : strerror(errno));
		return true;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, len, "not a socket");
		return true;
	}
	err = try_connect(path, seqpacket);
	if (err == 0) {
		snprintf(why, len, "it accepts connections now, but did not when the port "
			 "tried (its server started late?)");
		return false;
	}
	reason = connect_reason(err);
	snprintf(why, len, "%s", reason != NULL ? reason : strerror(err));
	return true;
}
