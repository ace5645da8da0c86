/* SPDX-License-Identifier: BSD-3-Clause */
#include "alt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Copies for the signal handlers and the watchdog, which cannot reach a struct alt. */
static pid_t guard_pids[2];
static pid_t watchdog_pid;
static int watchdog_fd = -1;

void alt_resume_all(void)
{
	if (guard_pids[0] > 0)
		kill(guard_pids[0], SIGCONT);
	if (guard_pids[1] > 0)
		kill(guard_pids[1], SIGCONT);
}

static void on_fatal(int sig)
{
	alt_resume_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * The watchdog: a child that only waits for the end of the pipe this process holds. The
 * kernel closes that end however this process dies, SIGKILL included; the child then
 * resumes both switches. It holds no other file, so nobody waits on it for EOF of a pipe.
 */
static void watchdog(int fd)
{
	char c;
	int null = open("/dev/null", O_RDWR);

	prctl(PR_SET_NAME, "sluice-gen-wd");
	/* A terminal's ^C reaches the whole process group: outlive the generator anyway. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	if (fd != 3) {
		dup2(fd, 3);
		fd = 3;
	}
	close_range(4, ~0u, 0);
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	alt_resume_all();
	_exit(0);
}

/*
 * At a normal exit: resume both, then end the watchdog and reap it ourselves, since an
 * orphan would be left to a PID 1 that may never reap it (a zombie per run).
 */
static void release_guard(void)
{
	alt_resume_all();
	if (watchdog_fd >= 0)
		close(watchdog_fd);
	watchdog_fd = -1;
	if (watchdog_pid > 0)
		while (waitpid(watchdog_pid, NULL, 0) < 0 && errno == EINTR)
			;
	watchdog_pid = 0;
}

void alt_release(void)
{
	release_guard();
}

int alt_guard(struct alt *a)
{
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	int fds[2];
	unsigned int i;
	pid_t child;

	guard_pids[0] = a->pids[0];
	guard_pids[1] = a->pids[1];
	if (atexit(release_guard) != 0 || pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fflush(NULL);           /* the child must not write out our buffers a second time */
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0)
		watchdog(fds[0]);
	close(fds[0]);          /* the write end stays open, unused, until we die */
	watchdog_fd = fds[1];
	watchdog_pid = child;
	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		signal(fatal[i], on_fatal);
	return 0;
}

static void open_window(struct alt *a, double now_s, uint64_t now_tsc)
{
	a->pair = a->n_windows % 2;
	a->start_s = now_s;
	a->start_tsc = now_tsc;
	a->counting = false;
	a->rx = a->late = 0;
	kill(a->pids[a->pair], SIGCONT);
	kill(a->pids[1 - a->pair], SIGSTOP);
}

void alt_start(struct alt *a, double now_s, uint64_t now_tsc)
{
	a->n_windows = 0;
	open_window(a, now_s, now_tsc);
}

static void print_window(const struct alt *a, const struct alt_window *w)
{
	double pps = w->counted_s > 0 ? (double)w->rx_packets / w->counted_s : 0.0;

	if (a->json)
		printf("{\"window\": %u, \"switch\": \"%c\", \"monotonic_s\": %.6f, "
		       "\"counted_s\": %.6f, \"tx_packets\": %" PRIu64 ", \"rx_packets\": %" PRIu64
		       ", \"late_packets\": %" PRIu64 ", \"rx_pps\": %.0f}\n", w->index,
		       'A' + w->pair, w->start_s, w->counted_s, w->tx_packets, w->rx_packets,
		       w->late_packets, pps);
	else
		printf("window %4u %c  at %.3f  counted %.3f s  tx %12" PRIu64 "  rx %12" PRIu64
		       "  late %8" PRIu64 "  rx %9.0f pps\n", w->index, 'A' + w->pair,
		       w->start_s, w->counted_s, w->tx_packets, w->rx_packets, w->late_packets, pps);
	fflush(stdout);
}

static void close_window(struct alt *a, double now_s, const uint64_t tx_of[2])
{
	struct alt_window *w = &a->windows[a->n_windows++];

	w->index = a->n_windows - 1;
	w->pair = a->pair;
	w->start_s = a->start_s;
	w->counted_s = a->counting ? now_s - a->count_start_s : 0.0;
	w->tx_packets = a->counting ? tx_of[a->pair] - a->tx_mark : 0;
	w->rx_packets = a->counting ? a->rx : 0;
	w->late_packets = a->late;
	print_window(a, w);
}

void alt_step(struct alt *a, double now_s, uint64_t now_tsc, const uint64_t tx_of[2])
{
	if (!a->counting && now_s - a->start_s >= a->settle_s) {
		a->counting = true;
		a->count_start_s = now_s;
		a->tx_mark = tx_of[a->pair];
		a->rx = 0;
	}
	/* Options keep the window count within ALT_MAX_WINDOWS; the test is a safety net. */
	if (now_s - a->start_s < a->window_s || a->n_windows + 1 >= ALT_MAX_WINDOWS)
		return;
	close_window(a, now_s, tx_of);
	open_window(a, now_s, now_tsc);
}

static double window_pps(const struct alt_window *w)
{
	return w->counted_s > 0 ? (double)w->rx_packets / w->counted_s : 0.0;
}

/* A window's rate over the mean of its two neighbours' (of the other switch); 0 if none. */
static double neighbour_ratio(const struct alt *a, unsigned int i)
{
	double other;

	if (i == 0 || i + 1 >= a->n_windows)
		return 0.0;
	other = (window_pps(&a->windows[i - 1]) + window_pps(&a->windows[i + 1])) / 2;
	return other > 0 && window_pps(&a->windows[i]) > 0 ? window_pps(&a->windows[i]) / other
							     : 0.0;
}

json_t *alt_windows_json(const struct alt *a)
{
	json_t *arr = json_array();
	unsigned int i;

	for (i = 0; i < a->n_windows; i++) {
		const struct alt_window *w = &a->windows[i];
		double r = neighbour_ratio(a, i);

		json_array_append_new(arr, json_pack("{si ss# sf sf sI sI sI sf so}",
			"index", w->index, "switch", w->pair ? "B" : "A", (size_t)1,
			"start_monotonic_s", w->start_s, "counted_s", w->counted_s,
			"tx_packets", (json_int_t)w->tx_packets,
			"rx_packets", (json_int_t)w->rx_packets,
			"late_packets", (json_int_t)w->late_packets, "rx_pps", window_pps(w),
			"neighbour_ratio", r > 0 ? json_real(r) : json_null()));
	}
	return arr;
}

double alt_quantile(const double *v, unsigned int n, double p)
{
	double pos, frac;
	unsigned int lo;

	if (n == 0)
		return 0.0;
	pos = p * (double)(n - 1);
	lo = (unsigned int)pos;
	frac = pos - (double)lo;
	return lo + 1 < n ? v[lo] + frac * (v[lo + 1] - v[lo]) : v[n - 1];
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* The median rate of switch PAIR's windows, in V (scratch of n_windows values). */
static double median_pps(const struct alt *a, unsigned int pair, double *v, unsigned int *n)
{
	unsigned int i;

	*n = 0;
	for (i = 0; i < a->n_windows; i++)
		if (a->windows[i].pair == pair)
			v[(*n)++] = window_pps(&a->windows[i]);
	qsort(v, *n, sizeof(*v), cmp_double);
	return alt_quantile(v, *n, 0.5);
}

/* A/B from every window with neighbours: a B window's ratio is inverted. */
static unsigned int ab_ratios(const struct alt *a, double *v)
{
	unsigned int i, n = 0;
	double r;

	for (i = 0; i < a->n_windows; i++) {
		r = neighbour_ratio(a, i);
		if (r > 0)
			v[n++] = a->windows[i].pair == 0 ? r : 1.0 / r;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	return n;
}

json_t *alt_summary_json(const struct alt *a)
{
	double *v = calloc(a->n_windows + 1, sizeof(*v)), a_pps, b_pps;
	unsigned int n, na, nb, i;
	uint64_t late = 0;
	json_t *r, *ratio;

	if (v == NULL)
		return json_null();
	for (i = 0; i < a->n_windows; i++)
		late += a->windows[i].late_packets;
	a_pps = median_pps(a, 0, v, &na);
	b_pps = median_pps(a, 1, v, &nb);
	n = ab_ratios(a, v);
	ratio = n == 0 ? json_null() : json_pack("{sf sf sf si}", "median",
		alt_quantile(v, n, 0.5), "q1", alt_quantile(v, n, 0.25), "q3",
		alt_quantile(v, n, 0.75), "n", n);
	r = json_pack("{s[ii] sf sf si si sf sf so sI}", "pids", (int)a->pids[0],
		(int)a->pids[1], "window_s", a->window_s, "settle_s", a->settle_s,
		"a_windows", na, "b_windows", nb, "a_median_pps", a_pps, "b_median_pps", b_pps,
		"ratio_ab", ratio, "late_packets", (json_int_t)late);
	free(v);
	return r;
}
