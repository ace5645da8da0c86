/* SPDX-License-Identifier: BSD-3-Clause */
/* The agents sluiced runs (ofagent_proc.h). */
#include "ofagent_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl_of.h"
#include "log.h"
#include "switch.h"

#define OFA_BACKOFF_MIN_MS 1000
#define OFA_BACKOFF_MAX_MS 30000
#define OFA_STOP_WAIT_MS 1000

extern char **environ;

struct agent_proc {
	char sw[SW_NAME_LEN];       /* empty: a free slot */
	pid_t pid;                  /* 0: not running */
	uint64_t next_start_ms;     /* not started again before this (back-off) */
	unsigned int backoff_ms;
	uint64_t started_ms;
};

static struct agent_proc procs[SW_MAX];
static char agent_path[PATH_MAX];   /* empty: agents are not started by sluiced */
static char socket_path[PATH_MAX];
static bool warned_missing;

static uint64_t ofa_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void ofa_init(const char *path, const char *socket)
{
	snprintf(agent_path, sizeof(agent_path), "%s", path != NULL ? path : "");
	snprintf(socket_path, sizeof(socket_path), "%s", socket);
}

/* NAME as an executable path: itself when it has a '/', else found on $PATH. */
static bool resolve(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH"), *p, *end;

	if (strchr(name, '/') != NULL) {
		snprintf(out, len, "%s", name);
		return access(out, X_OK) == 0;
	}
	for (p = path != NULL ? path : "/usr/local/bin:/usr/bin:/bin"; *p != '\0'; p = end) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		if ((size_t)(end - p) + strlen(name) + 2 <= len) {
			memcpy(out, p, (size_t)(end - p));
			out[end - p] = '/';
			strcpy(out + (end - p) + 1, name);
		} else {
			out[0] = '\0';
		}
		if (end > p && out[0] != '\0' && access(out, X_OK) == 0)
			return true;
		if (*end == ':')
			end++;
	}
	return false;
}

/*
 * Starts the agent of switch A->sw. posix_spawn, not fork: the daemon's memory (hugepages
 * among it) is not copied, and the child gets a clean signal mask (sluiced blocks SIGTERM
 * in every thread, which the agent must not inherit) and none of the daemon's descriptors.
 */
static void spawn_agent(struct agent_proc *a, uint64_t now)
{
	char prog[PATH_MAX];
	char *argv[] = { prog, "--socket", socket_path, a->sw, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, deflt;
	int rc;

	a->next_start_ms = now + a->backoff_ms;
	a->backoff_ms = a->backoff_ms == 0 ? OFA_BACKOFF_MIN_MS :
			(a->backoff_ms * 2 > OFA_BACKOFF_MAX_MS ? OFA_BACKOFF_MAX_MS :
			 a->backoff_ms * 2);
	if (!resolve(agent_path, prog, sizeof(prog))) {
		if (!warned_missing)
			LOG(WARNING, "switch %s has controllers but the OpenFlow agent '%s' is not "
			    "found: run sluice-ofagent yourself, or start sluiced with --ofagent "
			    "PATH", a->sw, agent_path);
		warned_missing = true;
		return;
	}
	sigemptyset(&none);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGTERM);
	sigaddset(&deflt, SIGINT);
	sigaddset(&deflt, SIGPIPE);
	sigaddset(&deflt, SIGUSR1);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	rc = posix_spawn(&a->pid, prog, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (rc != 0) {
		a->pid = 0;
		LOG(ERR, "switch %s: cannot start %s: %s", a->sw, prog, strerror(rc));
		return;
	}
	a->started_ms = now;
	LOG(INFO, "switch %s: OpenFlow agent started (%s, pid %d)", a->sw, prog, (int)a->pid);
}

static void reap(struct agent_proc *a, uint64_t now)
{
	int status;

	if (a->pid <= 0 || waitpid(a->pid, &status, WNOHANG) != a->pid)
		return;
	if (WIFEXITED(status))
		LOG(NOTICE, "switch %s: OpenFlow agent (pid %d) exited with status %d", a->sw,
		    (int)a->pid, WEXITSTATUS(status));
	else
		LOG(NOTICE, "switch %s: OpenFlow agent (pid %d) ended by signal %d", a->sw,
		    (int)a->pid, WTERMSIG(status));
	a->pid = 0;
	/* An agent that ran a while is started again soon; one that dies at once, later. */
	if (now - a->started_ms > OFA_BACKOFF_MAX_MS)
		a->backoff_ms = 0;
	if (a->next_start_ms < now + a->backoff_ms)
		a->next_start_ms = now + a->backoff_ms;
}

static bool wanted(const char *name)
{
	const struct sw *s = sw_find(name);

	return s != NULL && s->of != NULL && s->of->n_targets > 0;
}

static struct agent_proc *slot_for(const char *name)
{
	struct agent_proc *free_slot = NULL;
	unsigned int i;

	for (i = 0; i < SW_MAX; i++) {
		if (strcmp(procs[i].sw, name) == 0)
			return &procs[i];
		if (procs[i].sw[0] == '\0' && procs[i].pid == 0 && free_slot == NULL)
			free_slot = &procs[i];
	}
	if (free_slot != NULL) {
		memset(free_slot, 0, sizeof(*free_slot));
		snprintf(free_slot->sw, sizeof(free_slot->sw), "%s", name);
	}
	return free_slot;
}

void ofa_tick(void)
{
	uint64_t now = ofa_now_ms();
	unsigned int i;

	if (agent_path[0] == '\0')
		return;
	for (i = 0; i < SW_MAX; i++) {
		struct agent_proc *a = &procs[i];

		reap(a, now);
		if (a->sw[0] == '\0' || wanted(a->sw))
			continue;
		if (a->pid > 0)
			kill(a->pid, SIGTERM);      /* reaped on a later tick */
		else
			a->sw[0] = '\0';
	}
	for (i = 0; i < SW_MAX; i++) {
		const struct sw *s = sw_by_index(i);
		struct agent_proc *a;

		if (s == NULL || !wanted(s->name) || (a = slot_for(s->name)) == NULL)
			continue;
		if (a->pid == 0 && now >= a->next_start_ms)
			spawn_agent(a, now);
	}
}

void ofa_stop_all(void)
{
	uint64_t deadline = ofa_now_ms() + OFA_STOP_WAIT_MS;
	unsigned int i, running;

	for (i = 0; i < SW_MAX; i++)
		if (procs[i].pid > 0)
			kill(procs[i].pid, SIGTERM);
	do {
		running = 0;
		for (i = 0; i < SW_MAX; i++)
			if (procs[i].pid > 0 && waitpid(procs[i].pid, NULL, WNOHANG) == procs[i].pid)
				procs[i].pid = 0;
			else if (procs[i].pid > 0)
				running++;
		if (running > 0)
			usleep(10000);
	} while (running > 0 && ofa_now_ms() < deadline);
	for (i = 0; i < SW_MAX; i++)
		if (procs[i].pid > 0) {
			LOG(WARNING, "switch %s: OpenFlow agent (pid %d) did not stop; killing it",
			    procs[i].sw, (int)procs[i].pid);
			kill(procs[i].pid, SIGKILL);
			waitpid(procs[i].pid, NULL, 0);
			procs[i].pid = 0;
		}
}
