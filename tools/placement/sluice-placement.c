/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-placement: where the host has put our two vCPUs, sampled a few times a second.
 *
 * On these VMs the round trip of one cache line between CPU0 and CPU1 flips between ~60 ns
 * (one L3) and ~330-400 ns (two chiplets) for 1 to 20 s at a time, and every cross-CPU
 * benchmark changes with it (PLATFORM.md). So beside every trial, two threads pinned to the
 * two CPUs bounce one cache line ~1000 times, then both sleep until the next tick; each
 * sample is one JSON line with its CLOCK_MONOTONIC time, the round trip and near/far.
 *
 * It must not disturb what it watches: both CPUs then run busy pollers. A sample costs each
 * CPU ~0.1-0.4 ms, and between samples both threads sleep in clock_nanosleep (no spinning).
 * They meet without any wake-up call: both sleep until the same absolute tick. A thread
 * that finds its partner missing for WAIT_NS (not yet scheduled beside a busy poller) gives
 * the sample up, so a sample never spins for long; it is printed as "unknown".
 *
 * The protocol, on one 64-bit word (the ball): high half the sample number K, low half the
 * step. The responder arrives by writing (K, 0); the initiator pings with odd steps, the
 * responder answers with the next even one. Either side abandons with (K, ABORT), written
 * with compare-and-swap from the value it last saw, so that a late answer and an abort
 * never both win. The round trips are timed in batches; the median batch is the figure, so
 * a thread preempted for one batch does not move it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "placement.h"
#include "sluice_version.h"

#define BATCH 50                     /* round trips timed together */
#define MAX_BATCHES 400
#define WAIT_NS 2000000L             /* a partner missing this long: the sample is given up */
#define ABORT UINT32_MAX
#define NS_PER_S 1000000000L

struct monitor {
	int cpu[2];
	long interval_ns;
	unsigned int batches;            /* round trips per sample / BATCH */
	double threshold_ns, duration_s;
	bool rt, got_rt[2];              /* asked for SCHED_FIFO; got it, per thread */
	struct timespec t0;              /* tick K is t0 + K * interval */
	alignas(64) _Atomic uint64_t ball;
	char pad[64 - sizeof(uint64_t)]; /* nothing else on the ball's line */
};

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

static uint64_t key(uint64_t k, uint32_t step)
{
	return k << 32 | step;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec tick(const struct monitor *m, uint64_t k)
{
	int64_t t = (int64_t)m->t0.tv_sec * NS_PER_S + m->t0.tv_nsec + (int64_t)k * m->interval_ns;

	return (struct timespec){ .tv_sec = t / NS_PER_S, .tv_nsec = t % NS_PER_S };
}

/* Sleeps until tick K; false when a signal asks us to stop. */
static bool sleep_until(const struct monitor *m, uint64_t k)
{
	struct timespec t = tick(m, k);

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
		if (quit)
			return false;
	return !quit;
}

/*
 * Spins until the ball holds WANT and returns true; returns false when it holds this
 * sample's ABORT, a later sample, or nothing changed for WAIT_NS (then tries to write ABORT
 * over SEEN; if that fails the partner just moved, and we look again).
 */
static bool wait_ball(struct monitor *m, uint64_t k, uint64_t want, uint64_t seen)
{
	int64_t deadline = now_ns() + WAIT_NS;
	unsigned int spins = 0;
	uint64_t b;

	for (;;) {
		b = atomic_load_explicit(&m->ball, memory_order_acquire);
		if (b == want)
			return true;
		if (b == key(k, ABORT) || b >> 32 > k)
			return false;
		/* The clock only now and then: it must not slow the round trip it times. */
		if ((++spins & 1023) == 0 && now_ns() > deadline) {
			if (atomic_compare_exchange_strong(&m->ball, &seen, key(k, ABORT)))
				return false;
			deadline = now_ns() + WAIT_NS;
		}
	}
}

/* Pings BATCHES * BATCH times; fills PER_TRIP with each batch's mean round trip. */
static bool initiate(struct monitor *m, uint64_t k, double *per_trip)
{
	uint32_t step = 0;
	unsigned int b, i;
	int64_t t;

	if (!wait_ball(m, k, key(k, 0), atomic_load(&m->ball)))
		return false;
	for (b = 0; b < m->batches; b++) {
		t = now_ns();
		for (i = 0; i < BATCH; i++) {
			atomic_store_explicit(&m->ball, key(k, step + 1), memory_order_release);
			if (!wait_ball(m, k, key(k, step + 2), key(k, step + 1)))
				return false;
			step += 2;
		}
		per_trip[b] = (double)(now_ns() - t) / BATCH;
	}
	return true;
}

/* Arrives for sample K and answers every ping. */
static void respond(struct monitor *m, uint64_t k)
{
	uint64_t b = atomic_load(&m->ball), n = (uint64_t)m->batches * BATCH, i;

	do {
		if (b >> 32 > k || b == key(k, ABORT))
			return;                        /* the initiator gave this sample up */
	} while (!atomic_compare_exchange_weak(&m->ball, &b, key(k, 0)));
	for (i = 0; i < n; i++) {
		if (!wait_ball(m, k, key(k, (uint32_t)(2 * i + 1)), key(k, (uint32_t)(2 * i))))
			return;
		atomic_store_explicit(&m->ball, key(k, (uint32_t)(2 * i + 2)),
				      memory_order_release);
	}
}

/*
 * Pins T to CPU and, unless --no-rt, makes it SCHED_FIFO at the lowest priority. Beside a
 * busy poller an ordinary thread may wait milliseconds for the CPU after its timer fires
 * (the poller runs out its slice), and then its partner spins for it and the sample is
 * lost; a real-time thread runs at once. It runs under a millisecond per sample, so the
 * poller loses no more than before, only at a known time. Without the privilege, the
 * thread stays an ordinary one (the summary on stderr says which).
 */
static int pin(pthread_t t, int cpu, bool rt, bool *got_rt)
{
	struct sched_param sp = { .sched_priority = 1 };
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pthread_setaffinity_np(t, sizeof(set), &set) != 0)
		return -1;
	*got_rt = rt && pthread_setschedparam(t, SCHED_FIFO, &sp) == 0;
	return 0;
}

static void *responder(void *arg)
{
	struct monitor *m = arg;
	uint64_t k;

	for (k = 1; sleep_until(m, k); k++)
		respond(m, k);
	return NULL;
}

/* Returns the label printed: 0 near, 1 far, 2 unknown. */
static int print_sample(const struct monitor *m, double t, bool ok, double *per_trip)
{
	double rtt = -1, min = -1;
	unsigned int i;

	if (ok) {
		min = per_trip[0];
		for (i = 1; i < m->batches; i++)
			min = per_trip[i] < min ? per_trip[i] : min;
		rtt = placement_median(per_trip, m->batches);
	}
	if (ok)
		printf("{\"t_mono\": %.6f, \"rtt_ns\": %.1f, \"min_ns\": %.1f, ", t, rtt, min);
	else
		printf("{\"t_mono\": %.6f, \"rtt_ns\": null, \"min_ns\": null, ", t);
	printf("\"label\": \"%s\", \"cpus\": [%d, %d]}\n", placement_label(rtt, m->threshold_ns),
	       m->cpu[0], m->cpu[1]);
	fflush(stdout);
	return !ok ? 2 : rtt < m->threshold_ns ? 0 : 1;
}

/* The initiator's loop, on the main thread: one sample per tick until the end. */
static void run(struct monitor *m)
{
	double per_trip[MAX_BATCHES];
	uint64_t k, count[3] = { 0 };
	bool ok;

	for (k = 1; sleep_until(m, k); k++) {
		double t = (double)now_ns() / 1e9;

		if (m->duration_s > 0 && (double)((int64_t)k * m->interval_ns) / 1e9 > m->duration_s)
			break;
		ok = initiate(m, k, per_trip);
		count[print_sample(m, t, ok, per_trip)]++;
	}
	/* For people: stdout stays samples only. */
	fprintf(stderr, "sluice-placement: %" PRIu64 " near, %" PRIu64 " far, %" PRIu64
		" unknown; threads %s\n", count[0], count[1], count[2],
		m->got_rt[0] && m->got_rt[1] ? "SCHED_FIFO" : "not real-time");
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: sluice-placement [--duration S] [--cpus A,B] [--interval-ms N] [--round-trips N]\n"
"                        [--threshold-ns N]\n"
"\n"
"Samples the round trip of one cache line between two CPUs a few times a second and prints\n"
"one JSON line per sample: t_mono (CLOCK_MONOTONIC seconds), rtt_ns (median over batches of\n"
"50), min_ns, label (near, far, or unknown when a thread was not scheduled in time) and cpus.\n"
"Both threads sleep between samples (docs/placement.md).\n"
"  --duration S       stop after S seconds (default: at SIGINT or SIGTERM)\n"
"  --cpus A,B         the two CPUs (0,1)\n"
"  --interval-ms N    time between samples, 10..60000 (200)\n"
"  --round-trips N    per sample, a multiple of 50 up to 20000 (1000)\n"
"  --threshold-ns N   far at or above N ns, near below (%.0f)\n"
"  --no-rt            ordinary threads (default: SCHED_FIFO 1 where permitted, so a\n"
"                     sample is taken on time beside busy pollers)\n"
"  --version\n"
"  -h, --help\n", PLACEMENT_FAR_NS);
}

static int bad(const char *opt, const char *why)
{
	fprintf(stderr, "sluice-placement: --%s: %s\n", opt, why);
	return -1;
}

static int parse_number(const char *opt, const char *v, double lo, double hi, double *out)
{
	char *end;

	*out = strtod(v, &end);
	if (end == v || *end != '\0' || !(*out >= lo && *out <= hi))
		return bad(opt, "not a number in range");
	return 0;
}

static int parse_cpus(const char *v, int cpu[2])
{
	char tail;

	if (sscanf(v, "%d,%d%c", &cpu[0], &cpu[1], &tail) != 2 || cpu[0] < 0 || cpu[1] < 0 ||
	    cpu[0] >= CPU_SETSIZE || cpu[1] >= CPU_SETSIZE || cpu[0] == cpu[1])
		return bad("cpus", "two different CPU numbers: A,B");
	return 0;
}

static int parse_one(struct monitor *m, int c, const char *v)
{
	double x;

	switch (c) {
	case 'd': return parse_number("duration", v, 0.001, 1e9, &m->duration_s);
	case 'c': return parse_cpus(v, m->cpu);
	case 'i':
		if (parse_number("interval-ms", v, 10, 60000, &x) != 0)
			return -1;
		m->interval_ns = (long)(x * 1e6);
		return 0;
	case 'r':
		if (parse_number("round-trips", v, BATCH, BATCH * MAX_BATCHES, &x) != 0)
			return -1;
		if ((long)x % BATCH != 0 || x != (double)(long)x)
			return bad("round-trips", "a multiple of 50");
		m->batches = (unsigned int)(x / BATCH);
		return 0;
	case 't': return parse_number("threshold-ns", v, 1, 1e6, &m->threshold_ns);
	case 'n': m->rt = false; return 0;
	case 'V': printf("sluice-placement %s\n", SLUICE_VERSION); exit(0);
	case 'h': usage(stdout); exit(0);
	default: usage(stderr); return -1;
	}
}

static int parse_options(int argc, char **argv, struct monitor *m)
{
	static const struct option lo[] = {
		{ "duration", 1, NULL, 'd' }, { "cpus", 1, NULL, 'c' },
		{ "interval-ms", 1, NULL, 'i' }, { "round-trips", 1, NULL, 'r' },
		{ "threshold-ns", 1, NULL, 't' }, { "no-rt", 0, NULL, 'n' },
		{ "version", 0, NULL, 'V' },
		{ "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1)
		if (parse_one(m, c, optarg) != 0)
			return -1;
	if (optind < argc) {
		fprintf(stderr, "sluice-placement: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

/* The responder thread, pinned, with signals left to the main thread. */
static int start_responder(struct monitor *m, pthread_t *t)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(t, NULL, responder, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0 && pin(*t, m->cpu[1], m->rt, &m->got_rt[1]) != 0)
		rc = -1;
	return rc;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	/* No SA_RESTART: clock_nanosleep returns EINTR, and the loop ends at once. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	static struct monitor m = { .cpu = { 0, 1 }, .interval_ns = 200000000L, .rt = true,
		.batches = 1000 / BATCH, .threshold_ns = PLACEMENT_FAR_NS };
	pthread_t t;

	/* First of all: a parent's shell may have started us with SIGINT ignored. */
	catch_signals();
	if (parse_options(argc, argv, &m) != 0)
		return 2;
	if (pin(pthread_self(), m.cpu[0], m.rt, &m.got_rt[0]) != 0) {
		bad("cpus", "cannot run on the first CPU");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &m.t0);
	if (start_responder(&m, &t) != 0) {
		bad("cpus", "cannot run a thread on the second CPU");
		return 2;
	}
	run(&m);
	/* The responder may sleep until the next tick: the process ends without waiting. */
	return 0;
}
