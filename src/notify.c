/* SPDX-License-Identifier: BSD-3-Clause */
/* The notify protocol of systemd's Type=notify services (notify.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

int notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	socklen_t salen;
	ssize_t sent;
	int fd, saved;

	if (path == NULL || path[0] == '\0')
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';       /* an abstract socket: no terminating NUL counted */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
			    (path[0] == '@' ? 0 : 1));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	saved = errno;
	close(fd);
	errno = saved;
	return sent == (ssize_t)strlen(state) ? 0 : -1;
}
