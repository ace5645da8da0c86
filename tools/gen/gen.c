/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen: traffic generator and sink on DPDK, one single-threaded loop.
 *
 * This first version does what the switch comparisons need: tx/rx pairs of ports served by
 * one loop (so a generator and its sink never fight over a CPU, see PLATFORM.md), fixed frame
 * sizes, a rate or "max", sequence numbers for loss and reordering, a per-second line, a JSON
 * summary, and --alternate: two tx->rx pairs, each through its own switch, sending into one
 * switch at a time while the other is SIGSTOPped, so two switches are compared in the same
 * host state. Latency histograms, flows, IMIX and the reflect role are still to come
 * (docs/gen.md says what exists).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <rte_version.h>

#include "portspec.h"
#include "sluice_version.h"

#define GEN_MAX_PORTS 4
#define GEN_BURST 32
#define GEN_RING 1024
#define GEN_MAX_WINDOWS 4096
#define GEN_MAGIC 0x736c6963u   /* "slic": marks our payload */
#define HDR_LEN (sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr) + \
		 sizeof(struct rte_udp_hdr))

/* What each frame carries after its UDP header. */
struct gen_payload {
	uint32_t magic;
	uint32_t stream;
	uint64_t seq;
	uint64_t tsc;
} __rte_packed;

struct gen_stream {          /* one tx port -> rx port pair */
	uint16_t tx, rx;         /* ethdev ids */
	uint64_t next_seq;       /* next sequence number to send */
	uint64_t expect_seq;     /* next sequence number the sink expects */
	uint64_t tx_packets, not_accepted, rx_packets, rx_bytes, lost, reordered;
};

struct gen_window {
	unsigned int index, pair;
	double start_s, counted_s;
	uint64_t tx_packets, rx_packets, late_packets;
};

struct gen_opts {
	const char *specs[GEN_MAX_PORTS];
	unsigned int n_ports;
	const char *role;
	unsigned int size;       /* frame size including the 4-byte FCS */
	double rate_pps;         /* 0: as fast as the ports take */
	double duration;
	int cpu;
	bool json;
	const char *out;
	pid_t alternate[2];
	double window, settle;
};

static volatile sig_atomic_t quit;
static pid_t stopped_pids[2];

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

/* Never leave a switch stopped: at exit, on error and on a signal. */
static void continue_switches(void)
{
	unsigned int i;

	for (i = 0; i < 2; i++)
		if (stopped_pids[i] > 0)
			kill(stopped_pids[i], SIGCONT);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: sluice-gen --port SPEC [--port SPEC ...] [options] [-- EAL options]\n"
"\n"
"Traffic generator and sink on DPDK, one single-threaded loop (docs/gen.md).\n"
"  --port SPEC        a port, as in sluiced (docs/ports.md); ports pair up in order:\n"
"                     port 0 sends to port 1, port 2 to port 3\n"
"  --role txrx        generate on the first port of each pair, sink on the second\n"
"  --size N           frame size in bytes including the 4-byte FCS, 64..1518 (64)\n"
"  --rate R           max, or packets per second: 500000, 500k, 1.5M (max)\n"
"  --duration S       seconds to run (10)\n"

"  --cpu N            CPU of the loop (default: the first allowed)\n"
"  --json             per-second lines as JSON\n"
"  --out FILE         final summary as JSON\n"
"  --alternate A,B    two pairs, through switches with PIDs A and B: send into one at a\n"
"                     time, SIGSTOP the other (PLATFORM.md); per-window records\n"
"  --window S         window length with --alternate (1.0)\n"
"  --settle S         uncounted start of each window (0.3)\n"
"  -h, --help\n");
}

static int parse_rate(const char *s, double *pps)
{
	char *end;
	double v;

	if (strcmp(s, "max") == 0) {
		*pps = 0;
		return 0;
	}
	v = strtod(s, &end);
	if (end == s || v <= 0)
		return -1;
	if (*end == 'k')
		v *= 1e3, end++;
	else if (*end == 'M')
		v *= 1e6, end++;
	if (strcmp(end, "") != 0 && strcmp(end, "pps") != 0)
		return -1;
	*pps = v;
	return 0;
}

static int parse_pids(const char *s, pid_t pids[2])
{
	long a, b;
	char tail;

	if (sscanf(s, "%ld,%ld%c", &a, &b, &tail) != 2 || a <= 1 || b <= 1)
		return -1;
	pids[0] = (pid_t)a;
	pids[1] = (pid_t)b;
	return 0;
}

static int bad(const char *opt, const char *v)
{
	fprintf(stderr, "sluice-gen: bad value for --%s: '%s'\n", opt, v);
	return -1;
}

static int parse_options(int argc, char **argv, struct gen_opts *o)
{
	static const struct option lo[] = {
		{ "port", 1, NULL, 'p' }, { "role", 1, NULL, 'r' }, { "size", 1, NULL, 's' },
		{ "rate", 1, NULL, 'R' }, { "duration", 1, NULL, 'd' }, 
		{ "cpu", 1, NULL, 'c' }, { "json", 0, NULL, 'j' }, { "out", 1, NULL, 'o' },
		{ "alternate", 1, NULL, 'a' }, { "window", 1, NULL, 'W' },
		{ "settle", 1, NULL, 'S' }, { "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (o->n_ports == GEN_MAX_PORTS)
				return bad("port", "at most 4 ports");
			o->specs[o->n_ports++] = optarg;
			break;
		case 'r': o->role = optarg; break;
		case 's':
			o->size = (unsigned int)atoi(optarg);
			if (o->size < 64 || o->size > 1518)
				return bad("size", optarg);
			break;
		case 'R': if (parse_rate(optarg, &o->rate_pps)) return bad("rate", optarg); break;
		case 'd': o->duration = atof(optarg); if (o->duration <= 0) return bad("duration", optarg); break;
		case 'c': o->cpu = atoi(optarg); break;
		case 'j': o->json = true; break;
		case 'o': o->out = optarg; break;
		case 'a': if (parse_pids(optarg, o->alternate)) return bad("alternate", optarg); break;
		case 'W': o->window = atof(optarg); if (o->window <= 0) return bad("window", optarg); break;
		case 'S': o->settle = atof(optarg); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (strcmp(o->role, "txrx") != 0)
		return bad("role", o->role);
	if (o->n_ports < 2 || o->n_ports % 2 != 0)
		return bad("port", "give ports in tx,rx pairs");
	if (o->alternate[0] && o->n_ports != 4)
		return bad("alternate", "needs exactly two pairs (four ports)");
	if (o->settle >= o->window)
		return bad("settle", "must be shorter than --window");
	return optind;
}

/* ---- ports ---- */

static struct rte_mempool *pool;

static int open_port(const char *spec, unsigned int index, uint16_t *ethdev)
{
	char err[PORTSPEC_ERR_LEN], unique[16], probe[PORTSPEC_DEVNAME_LEN + PORTSPEC_ARGS_LEN];
	struct rte_eth_conf conf = { 0 };
	struct portspec ps;
	int rc;

	snprintf(unique, sizeof(unique), "g%u", index);
	if (portspec_parse(spec, unique, 1, &ps, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-gen: --port %s: %s\n", spec, err);
		return -1;
	}
	portspec_probe_string(&ps, probe, sizeof(probe));
	if (rte_dev_probe(probe) != 0 || rte_eth_dev_get_port_by_name(ps.devname, ethdev) != 0) {
		fprintf(stderr, "sluice-gen: cannot create port %s (%s)\n", spec, probe);
		return -1;
	}
	rc = rte_eth_dev_configure(*ethdev, 1, 1, &conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(*ethdev, 0, GEN_RING, rte_socket_id(), NULL, pool);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(*ethdev, 0, GEN_RING, rte_socket_id(), NULL);
	if (rc == 0)
		rc = rte_eth_dev_start(*ethdev);
	if (rc != 0) {
		fprintf(stderr, "sluice-gen: port %s: set-up failed: %s\n", spec, rte_strerror(-rc));
		return -1;
	}
	rte_eth_promiscuous_enable(*ethdev);
	return 0;
}

/* ---- frames ---- */

static uint8_t template_hdr[HDR_LEN];

static void build_template(unsigned int frame_len)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)template_hdr;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	static const struct rte_ether_addr src = {{ 0x02, 0, 0, 0, 0, 0x01 }};
	static const struct rte_ether_addr dst = {{ 0x02, 0, 0, 0, 0, 0x02 }};

	rte_ether_addr_copy(&src, &eth->src_addr);
	rte_ether_addr_copy(&dst, &eth->dst_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(frame_len - sizeof(*eth)));
	ip->src_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 1));
	ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 2));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(1024);
	udp->dst_port = rte_cpu_to_be_16(1024);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(frame_len - sizeof(*eth) - sizeof(*ip)));
}

/* Sends up to N frames on S; returns how many the port took. */
static uint16_t send_burst(struct gen_stream *s, unsigned int stream, unsigned int frame_len,
			   uint16_t n)
{
	struct rte_mbuf *m[GEN_BURST];
	uint64_t tsc = rte_rdtsc();
	uint16_t i, sent;

	if (rte_pktmbuf_alloc_bulk(pool, m, n) != 0)
		return 0;
	for (i = 0; i < n; i++) {
		uint8_t *d = rte_pktmbuf_mtod(m[i], uint8_t *);
		struct gen_payload *pl = (struct gen_payload *)(d + HDR_LEN);

		rte_memcpy(d, template_hdr, HDR_LEN);
		pl->magic = GEN_MAGIC;
		pl->stream = stream;
		pl->seq = s->next_seq + i;
		pl->tsc = tsc;
		m[i]->data_len = (uint16_t)frame_len;
		m[i]->pkt_len = frame_len;
	}
	sent = rte_eth_tx_burst(s->tx, 0, m, n);
	if (sent < n)
		rte_pktmbuf_free_bulk(&m[sent], n - sent);
	/* Closed loop: what the port refused is not sent again, and not numbered. */
	s->next_seq += sent;
	s->tx_packets += sent;
	s->not_accepted += (uint64_t)(n - sent);
	return sent;
}

/* Receives on S's sink port and checks sequence numbers; returns the frames received. */
static uint16_t sink_burst(struct gen_stream *s)
{
	struct rte_mbuf *m[GEN_BURST];
	uint16_t n = rte_eth_rx_burst(s->rx, 0, m, GEN_BURST), i;

	for (i = 0; i < n; i++) {
		const struct gen_payload *pl;

		s->rx_bytes += m[i]->pkt_len + RTE_ETHER_CRC_LEN;
		if (m[i]->data_len < HDR_LEN + sizeof(*pl))
			continue;
		pl = rte_pktmbuf_mtod_offset(m[i], const struct gen_payload *, HDR_LEN);
		if (pl->magic != GEN_MAGIC)
			continue;
		if (pl->seq >= s->expect_seq) {
			s->lost += pl->seq - s->expect_seq;
			s->expect_seq = pl->seq + 1;
		} else {
			/* A late frame was first counted lost when a later one came. */
			s->reordered++;
			if (s->lost > 0)
				s->lost--;
		}
	}
	s->rx_packets += n;
	rte_pktmbuf_free_bulk(m, n);
	return n;
}

/* ---- the loop ---- */

struct gen_run {
	const struct gen_opts *o;
	struct gen_stream streams[GEN_MAX_PORTS / 2];
	unsigned int n_streams;
	struct gen_window windows[GEN_MAX_WINDOWS];
	unsigned int n_windows;
	uint64_t idle_passes, passes;
	double start_s, end_s;
};

/* The sum over streams of the counter at byte OFFSET of struct gen_stream. */
static uint64_t total(const struct gen_run *r, size_t offset)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < r->n_streams; i++)
		n += *(const uint64_t *)((const char *)&r->streams[i] + offset);
	return n;
}

#define total_rx(r) total(r, offsetof(struct gen_stream, rx_packets))
#define total_tx(r) total(r, offsetof(struct gen_stream, tx_packets))

static void print_second(const struct gen_run *r, double t, uint64_t dtx, uint64_t drx,
			 double dt)
{
	if (r->o->json)
		printf("{\"monotonic_s\": %.6f, \"t\": %.3f, \"tx_pps\": %.0f, \"rx_pps\": %.0f}\n",
		       t, t - r->start_s, (double)dtx / dt, (double)drx / dt);
	else
		printf("%7.1f s  tx %10.0f pps  rx %10.0f pps\n", t - r->start_s,
		       (double)dtx / dt, (double)drx / dt);
	fflush(stdout);
}

/* Starts window K: pair K % 2 sends, its switch runs, the other switch is stopped. */
static void open_window(struct gen_run *r, unsigned int k, double t)
{
	struct gen_window *w = &r->windows[k];
	unsigned int pair = k % 2;

	kill(r->o->alternate[pair], SIGCONT);
	kill(r->o->alternate[1 - pair], SIGSTOP);
	memset(w, 0, sizeof(*w));
	w->index = k;
	w->pair = pair;
	w->start_s = t;
}

static void run_loop(struct gen_run *r)
{
	const struct gen_opts *o = r->o;
	uint64_t hz = rte_get_tsc_hz(), next_send = rte_rdtsc(), per_burst_tsc = 0;
	double t = now_s(), next_print = t + 1, last_print = t;
	uint64_t last_tx = 0, last_rx = 0, win_rx_mark = 0, win_tx_mark = 0;
	bool alternating = o->alternate[0] != 0, counting = false;
	unsigned int i, k = 0;

	if (o->rate_pps > 0)
		per_burst_tsc = (uint64_t)((double)hz * GEN_BURST / o->rate_pps);
	r->start_s = t;
	if (alternating)
		open_window(r, 0, t);
	while (!quit && t - r->start_s < o->duration) {
		unsigned int active = alternating ? r->windows[k].pair : UINT32_MAX;
		uint64_t work = 0, now = rte_rdtsc();

		if (per_burst_tsc == 0 || now >= next_send) {
			for (i = 0; i < r->n_streams; i++)
				if (!alternating || i == active)
					work += send_burst(&r->streams[i], i, o->size - 4, GEN_BURST);
			next_send += per_burst_tsc;
		}
		for (i = 0; i < r->n_streams; i++) {
			uint16_t got = sink_burst(&r->streams[i]);

			work += got;
			if (alternating && i != active)
				r->windows[k].late_packets += got;
		}
		r->passes++;
		r->idle_passes += work == 0;
		if ((r->passes & 63) != 0)
			continue;
		t = now_s();
		if (alternating) {
			struct gen_window *w = &r->windows[k];
			struct gen_stream *s = &r->streams[w->pair];

			if (!counting && t - w->start_s >= o->settle) {
				counting = true;
				win_rx_mark = s->rx_packets;
				win_tx_mark = s->tx_packets;
				w->counted_s = t;
			}
			if (t - w->start_s >= o->window) {
				w->rx_packets = s->rx_packets - win_rx_mark;
				w->tx_packets = s->tx_packets - win_tx_mark;
				w->counted_s = t - w->counted_s;
				if (o->json)
					printf("{\"window\": %u, \"switch\": \"%c\", \"monotonic_s\": %.6f, "
					       "\"counted_s\": %.3f, \"rx_pps\": %.0f}\n", w->index,
					       'A' + w->pair, w->start_s, w->counted_s,
					       (double)w->rx_packets / w->counted_s);
				counting = false;
				if (++k == GEN_MAX_WINDOWS)
					break;
				r->n_windows = k;
				open_window(r, k, t);
			}
		}
		if (!alternating && t >= next_print) {
			print_second(r, t, total_tx(r) - last_tx, total_rx(r) - last_rx,
				     t - last_print);
			last_tx = total_tx(r);
			last_rx = total_rx(r);
			last_print = t;
			next_print += 1;
		}
	}
	r->end_s = now_s();
}

/* After the last send, frames still in the switch arrive: count them (200 ms at most). */
static void drain(struct gen_run *r)
{
	double until = now_s() + 0.2;
	unsigned int i;

	continue_switches();
	while (now_s() < until)
		for (i = 0; i < r->n_streams; i++)
			sink_burst(&r->streams[i]);
}

/* ---- output ---- */

static void write_summary(const struct gen_run *r, FILE *f)
{
	double dur = r->end_s - r->start_s;
	uint64_t tx = total_tx(r), rx = total_rx(r), lost = 0, reord = 0, refused = 0;
	unsigned int i;

	for (i = 0; i < r->n_streams; i++) {
		lost += r->streams[i].lost;
		reord += r->streams[i].reordered;
		refused += r->streams[i].not_accepted;
	}
	fprintf(f, "{\n  \"version\": \"%s\", \"dpdk\": \"%s\", \"tsc_hz\": %" PRIu64 ",\n",
		SLUICE_VERSION, rte_version(), rte_get_tsc_hz());
	fprintf(f, "  \"size\": %u, \"asked_pps\": %.0f, \"duration_s\": %.3f,\n", r->o->size,
		r->o->rate_pps, dur);
	fprintf(f, "  \"tx_packets\": %" PRIu64 ", \"rx_packets\": %" PRIu64 ", \"lost\": %"
		PRIu64 ", \"reordered\": %" PRIu64 ", \"not_accepted\": %" PRIu64 ",\n",
		tx, rx, lost, reord, refused);
	fprintf(f, "  \"offered_pps\": %.0f, \"rx_pps\": %.0f, \"rx_bps_l2\": %.0f,\n",
		(double)tx / dur, (double)rx / dur, (double)rx * r->o->size * 8 / dur);
	fprintf(f, "  \"idle_fraction\": %.4f,\n", r->passes ? (double)r->idle_passes /
		(double)r->passes : 0.0);
	fprintf(f, "  \"windows\": [");
	for (i = 0; i < r->n_windows; i++) {
		const struct gen_window *w = &r->windows[i];

		fprintf(f, "%s\n    {\"index\": %u, \"switch\": \"%c\", \"start_monotonic_s\": %.6f, "
			"\"counted_s\": %.4f, \"tx_packets\": %" PRIu64 ", \"rx_packets\": %" PRIu64
			", \"rx_pps\": %.0f, \"late_packets\": %" PRIu64 "}", i ? "," : "", w->index,
			'A' + w->pair, w->start_s, w->counted_s, w->tx_packets, w->rx_packets,
			w->counted_s > 0 ? (double)w->rx_packets / w->counted_s : 0.0,
			w->late_packets);
	}
	fprintf(f, "\n  ]\n}\n");
}

/* ---- start-up ---- */

static int init_eal(int argc, char **argv, int first, int cpu)
{
	char prefix[64], lcores[32], *eal[64];
	int n = 0, i;

	snprintf(prefix, sizeof(prefix), "sluice-gen-%d", (int)getpid());
	snprintf(lcores, sizeof(lcores), "0@%d", cpu);
	eal[n++] = argv[0];
	eal[n++] = "--file-prefix";
	eal[n++] = prefix;
	eal[n++] = "--in-memory";
	eal[n++] = "--single-file-segments";   /* virtio-user moves nothing without it */
	eal[n++] = "--no-pci";
	eal[n++] = "--lcores";
	eal[n++] = lcores;
	eal[n++] = "--log-level=*:warning";
	for (i = first; i < argc && n < 63; i++)
		eal[n++] = argv[i];
	eal[n] = NULL;
	return rte_eal_init(n, eal) < 0 ? -1 : 0;
}

static int first_cpu(void)
{
	cpu_set_t set;
	int i;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				return i;
	return 0;
}

int main(int argc, char **argv)
{
	static struct gen_run run;
	struct gen_opts o = { .role = "txrx", .size = 64, .duration = 10, .cpu = -1,
			      .window = 1.0, .settle = 0.3 };
	uint16_t ports[GEN_MAX_PORTS];
	unsigned int i;
	int first;
	FILE *f;

	first = parse_options(argc, argv, &o);
	if (first < 0)
		return 2;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (o.alternate[0]) {
		stopped_pids[0] = o.alternate[0];
		stopped_pids[1] = o.alternate[1];
		atexit(continue_switches);
	}
	if (init_eal(argc, argv, first, o.cpu >= 0 ? o.cpu : first_cpu()) != 0) {
		fprintf(stderr, "sluice-gen: DPDK initialisation failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	pool = rte_pktmbuf_pool_create("gen_pool", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       (int)rte_socket_id());
	if (pool == NULL)
		return 1;
	for (i = 0; i < o.n_ports; i++)
		if (open_port(o.specs[i], i, &ports[i]) != 0)
			return 1;
	build_template(o.size - 4);
	run.o = &o;
	run.n_streams = o.n_ports / 2;
	for (i = 0; i < run.n_streams; i++) {
		run.streams[i].tx = ports[2 * i];
		run.streams[i].rx = ports[2 * i + 1];
	}
	/* Let virtio-user and memif links come up before the clock starts. */
	rte_delay_ms(500);
	run_loop(&run);
	drain(&run);
	write_summary(&run, stdout);
	if (o.out != NULL && (f = fopen(o.out, "w")) != NULL) {
		write_summary(&run, f);
		fclose(f);
	}
	for (i = 0; i < o.n_ports; i++) {
		rte_eth_dev_stop(ports[i]);
		rte_eth_dev_close(ports[i]);
	}
	rte_eal_cleanup();
	return 0;
}
