/* SPDX-License-Identifier: BSD-3-Clause */
/* sluice-gen's diagnosis of a client port that could not reach its server's socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "peer.h"

struct dir {
	char path[64];
	char file[96];
};

static int make_dir(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return -1;
	snprintf(d->path, sizeof(d->path), "/tmp/sluice-peer-XXXXXX");
	if (mkdtemp(d->path) == NULL) {
		free(d);
		return -1;
	}
	snprintf(d->file, sizeof(d->file), "%s/s", d->path);
	*state = d;
	return 0;
}

static int remove_dir(void **state)
{
	struct dir *d = *state;

	unlink(d->file);
	rmdir(d->path);
	free(d);
	return 0;
}

/* A Unix socket of TYPE bound to PATH; listening when LISTEN. Returns its descriptor. */
static int bound_socket(const char *path, int type, bool listen_too)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	if (listen_too)
		assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void missing_file(void **state)
{
	struct dir *d = *state;
	char why[PEER_WHY_LEN];

	assert_true(peer_diagnose(d->file, true, why, sizeof(why)));
	assert_string_equal(why, "no such file");
}

static void plain_file(void **state)
{
	struct dir *d = *state;
	char why[PEER_WHY_LEN];
	FILE *f = fopen(d->file, "w");

	assert_non_null(f);
	fclose(f);
	assert_true(peer_diagnose(d->file, true, why, sizeof(why)));
	assert_string_equal(why, "not a socket");
}

static void socket_left_by_a_dead_server(void **state)
{
	struct dir *d = *state;
	char why[PEER_WHY_LEN];

	close(bound_socket(d->file, SOCK_SEQPACKET, false));
	assert_true(peer_diagnose(d->file, true, why, sizeof(why)));
	assert_non_null(strstr(why, "connection refused: nothing listens on it"));
}

static void listening_server_is_no_failure(void **state)
{
	struct dir *d = *state;
	char why[PEER_WHY_LEN];
	int fd = bound_socket(d->file, SOCK_SEQPACKET, true);

	assert_false(peer_diagnose(d->file, true, why, sizeof(why)));
	assert_non_null(strstr(why, "accepts connections now"));
	close(fd);
}

static void wrong_socket_type(void **state)
{
	struct dir *d = *state;
	char why[PEER_WHY_LEN];
	int fd = bound_socket(d->file, SOCK_STREAM, true);

	assert_true(peer_diagnose(d->file, true, why, sizeof(why)));
	assert_non_null(strstr(why, "wrong socket type"));
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(missing_file, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(plain_file, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(socket_left_by_a_dead_server, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(listening_server_is_no_failure, make_dir,
						remove_dir),
		cmocka_unit_test_setup_teardown(wrong_socket_type, make_dir, remove_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
