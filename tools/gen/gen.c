/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen: traffic generator and sink on DPDK, in one single-threaded loop.
 *
 * Every role runs in the same poll loop on one lcore: generating, sinking and reflecting
 * share a CPU without fighting over it, as two busy-polling processes would (PLATFORM.md).
 * Frames carry a stream number, a sequence number and the TSC when sent (traffic.h); the
 * sink counts loss, duplicates and reordering per stream from the sequence numbers and
 * records one-way latency in a log-linear histogram (hist.h). docs/gen.md is the manual.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
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

#include "gen.h"
#include "peer.h"
#include "sluice_version.h"

static const char *const role_names[] = { "txrx", "tx", "rx", "reflect", "ping" };

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

/* A reading of the TSC and of CLOCK_MONOTONIC_RAW together. */
struct tsc_mark {
	uint64_t tsc;
	double raw_s;
};

static struct tsc_mark tsc_mark_now(void)
{
	struct timespec ts;
	struct tsc_mark m;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	m.tsc = rte_rdtsc();
	m.raw_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	return m;
}

/*
 * The TSC's rate, from START (taken after DPDK's initialisation) to now on the kernel's
 * unslewed clock. DPDK 22.11 rounds its own estimate to 10 MHz where the CPU does not state
 * it (AMD, VMs): 2600 MHz for a TSC of 2596.12 MHz here, which paced every rate 0.15 % slow
 * and lengthened every duration as much. Port set-up makes the span long (about a second);
 * it is stretched to 100 ms at least.
 */
static uint64_t measured_tsc_hz(struct tsc_mark start)
{
	struct tsc_mark end = tsc_mark_now();
	double span = end.raw_s - start.raw_s;

	if (span < 0.1) {
		struct timespec rest = { 0, (long)((0.1 - span) * 1e9) };

		nanosleep(&rest, NULL);
		end = tsc_mark_now();
		span = end.raw_s - start.raw_s;
	}
	return (uint64_t)((double)(end.tsc - start.tsc) / span);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: sluice-gen --port SPEC [--port SPEC ...] [--vnf-in SPEC --vnf-out SPEC ...]\n"
"                  [--sink-port SPEC ...]\n"
"                  [options] [-- EAL options]\n"
"\n"
"Traffic generator and sink on DPDK, all roles in one poll loop on one CPU (docs/gen.md).\n"
"  --port SPEC        a port, as in sluiced (docs/ports.md), up to 8; a memif\n"
"                     client may add rx_queues=N (N receive rings, all polled);\n"
"                     or virtio-raw:path=SOCKET[,queue_size=N][,mac=MAC]: sluice-gen's own\n"
"                     virtio driver on a switch's vhost-user server socket, without\n"
"                     DPDK's driver or mbufs on its data path; roles txrx, tx and rx,\n"
"                     one --size up to 1518, not --touch (docs/gen.md); with server=1\n"
"                     [,accept_timeout=S] it makes SOCKET and waits (30 s by default)\n"
"                     for a switch's vhost-user client port to connect\n"
"  --role ROLE        txrx (default): port 0 sends to port 1, 2 to 3, ...; one port: sends\n"
"                     and receives on it (round trip through a reflector)\n"
"                     tx: every port sends; rx: every port receives;\n"
"                     reflect: every port sends back what it receives, MACs/IPs/ports swapped\n"
"                     ping: every port sends timestamped bursts (--burst, --rate 1000pps by\n"
"                     default) and receives them back from a reflector: round-trip times\n"
"  --bidir            txrx both ways (1 to 0 as well)\n"
"  --reflect SPEC     a further port that reflects, served by the same loop as the\n"
"                     role's ports (repeatable)\n"
"  --sink-port SPEC   a receive-only port (repeatable, up to 16): fan-out. With one --port\n"
"                     (txrx), every frame it sends should arrive once on each sink port\n"
"                     (send to a MAC the switch floods: --dst-mac ff:ff:ff:ff:ff:ff);\n"
"                     rx counts every copy, per sink too\n"
"  --vnf-in SPEC      the in port of an inline VNF (DPDK l2fwd's behaviour), served by the\n"
"  --vnf-out SPEC     same loop; repeatable, the k-th --vnf-in pairs with the k-th\n"
"                     --vnf-out (up to 8 VNFs). In to out and out to in, MACs rewritten as\n"
"                     l2fwd does: destination 02:00:00:00:00:0P (P: 0 in, 1 out), source the\n"
"                     port's own MAC; transmit buffered, drained at least every 100 us\n"
"  --dst-mac MAC      destination MAC of the k-th sending stream (k-th use; 'default'\n"
"                     keeps 02:00:02:...); its source is then the sending port's MAC\n"
"  --vnf-dst-mac M    destination MAC for the k-th VNF (k-th use): M for frames leaving\n"
"                     its out port, M1,M2 for leaving out, then in; l2fwd: the default\n"
"  --vnf-kind K       what the k-th VNF is (k-th use): l2 (default), l2fwd's behaviour; l3,\n"
"                     l3fwd's (LPM): IPv4 header checked, TTL decremented, checksum updated,\n"
"                     discarded frames counted by reason, then l2fwd's MAC rewrite\n"
"  --size S           frame bytes incl. FCS: 64, a list 64,512,1518, a range 64-1518,\n"
"                     imix (64:570:1518 at 7:4:1), or csv:FILE (lines size,weight; # for\n"
"                     comments); default 64; up to 9018 (a 9000 B MTU: ports get an MTU and\n"
"                     buffers for the largest frame)\n"
"  --rate R           per sending port: max (default; ping: 1000pps), 1Mpps, 500kpps,\n"
"                     250000, 1.5M, 2Gbps (L1: frame + 20 B of preamble and gap),\n"
"                     2Gbps-l2 (frame only)\n"
"  --load L           closed (default with --rate max): what a port refuses is sent again,\n"
"                     offered = accepted; open (default with a numeric rate): sent at the\n"
"                     rate disregarding drops, what a port refuses is freed and counted as\n"
"                     not_accepted\n"
"  --burst N          frames per transmit burst, 1..512 (32); pacing is per burst\n"
"  --ring N           descriptors per queue, a power of two 64..16384 (1024); also the\n"
"                     size of virtio-user's virtqueues (else 256) and of memif's rings\n"
"                     (else 1024) where the spec gives none. A larger ring rides out\n"
"                     longer stalls of the peer, as zero-loss (NDR) trials need\n"
"  --rx-burst N       frames per receive burst, 1..512 (32)\n"
"  --virtio-args A    device arguments added to every virtio-user port of ours, a list of\n"
"                     mrg_rxbuf=0|1, in_order=0|1, vectorized=0|1 (e.g. mrg_rxbuf=0,\n"
"                     in_order=0,vectorized=1: DPDK's vector receive path); the frames stay\n"
"                     the same, the virtqueue features the switch sees change;\n"
"                     vectorized=1 needs --rx-burst 8..32\n"
"  --check WHAT       what the sink verifies per frame: all (default: sequence and\n"
"                     latency), seq, latency, or none: frames carry no stamp, the sink\n"
"                     counts them per port by arrival without reading them, and loss is\n"
"                     whole-run tx less rx (not with --alternate or --role ping)\n"
"  --tx-frames HOW    prebuilt (default with one --size and ports that copy): each stream's\n"
"                     buffers hold its frame, only what varies is written; copy: every\n"
"                     frame written afresh (several sizes); refcnt: one frame sent again\n"
"                     and again by reference count (--check none, one size and flow)\n"
"  --touch            the receiver reads every byte of every frame (a checksum, reported)\n"
"  --announce         before the clock starts, every port (VNF ports too) sends a few\n"
"                     frames from its MAC to its own MAC, so a learning switch knows where\n"
"                     each port is and forwards the run's frames as unicast, not flooded\n"
"  --flows N          distinct flows, 1..1000000 (1)\n"
"  --vary FIELDS      what differs between flows: mac,ip,port (ip,port)\n"
"  --duration S       seconds of sending (10)\n"
"  --warmup S         first seconds not counted (0)\n"
"  --cooldown S       last seconds not counted (0)\n"
"  --latency          record latency (always on; kept for scripts)\n"
"  --cpu N, --lcore N CPU of the loop (default: the first this process may use)\n"
"  --json             per-second lines (and window records) as JSON lines\n"
"  --out FILE         final summary as JSON (also printed at the end)\n"
"  --hist-out FILE    the latency histogram: JSON if FILE ends in .json, else CSV\n"
"                     (low_ns,high_ns,count)\n"
"  --verbose          DPDK's warnings and notices too (default: errors only)\n"
"  --alternate A,B    two txrx pairs through switches with PIDs A and B: send into one at a\n"
"                     time while the other is SIGSTOPped; per-window records and A/B ratios\n"
"  --window S         window length with --alternate (1.0)\n"
"  --settle S         uncounted start of each window (0.3)\n"
"  -h, --help\n");
}

static int bad(const char *opt, const char *why)
{
	fprintf(stderr, "sluice-gen: --%s: %s\n", opt, why);
	return -1;
}

static int parse_double(const char *opt, const char *v, double min, double *out)
{
	char *end;

	*out = strtod(v, &end);
	if (end == v || *end != '\0' || !(*out >= min) || *out > 1e7)
		return bad(opt, "not a number in range");
	return 0;
}

static int parse_long(const char *opt, const char *v, long min, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || *out < min || *out > max)
		return bad(opt, "not an integer in range");
	return 0;
}

/* Packets per second from R, using the mean frame size for bit rates. */
static int parse_rate(const char *s, const struct traffic *t, double *pps)
{
	double v, mean = traffic_mean_size(t);
	char *end;

	if (strcmp(s, "max") == 0) {
		*pps = 0;
		return 0;
	}
	v = strtod(s, &end);
	if (end == s || v <= 0)
		return bad("rate", "give max, or a positive rate like 1Mpps or 2Gbps");
	if (*end == 'k' || *end == 'M' || *end == 'G') {
		v *= *end == 'k' ? 1e3 : *end == 'M' ? 1e6 : 1e9;
		end++;
	}
	if (strcmp(end, "") == 0 || strcmp(end, "pps") == 0)
		*pps = v;
	else if (strcmp(end, "bps") == 0)
		*pps = v / (8.0 * (mean + L1_OVERHEAD));
	else if (strcmp(end, "bps-l2") == 0)
		*pps = v / (8.0 * mean);
	else
		return bad("rate", "unknown unit (pps, kpps, Mpps, bps, Mbps, Gbps, Gbps-l2)");
	return 0;
}

/* --load, or its default: closed at --rate max, open at a numeric rate. */
static int parse_load(struct opts *o)
{
	if (o->load_arg == NULL)
		o->load = o->rate_pps > 0 ? LOAD_OPEN : LOAD_CLOSED;
	else if (strcmp(o->load_arg, "open") == 0)
		o->load = LOAD_OPEN;
	else if (strcmp(o->load_arg, "closed") == 0)
		o->load = LOAD_CLOSED;
	else
		return bad("load", "open or closed");
	return 0;
}

/* --check: a list of seq and latency, or all, or none. */
static int parse_check(struct opts *o, const char *v)
{
	char buf[64], *tok, *save;

	o->check_arg = v;
	o->check_seq = o->check_latency = false;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "seq") == 0)
			o->check_seq = true;
		else if (strcmp(tok, "latency") == 0)
			o->check_latency = true;
		else if (strcmp(tok, "all") == 0)
			o->check_seq = o->check_latency = true;
		else if (strcmp(tok, "none") != 0)
			return bad("check", "give all, none, or a list of seq and latency");
	}
	return 0;
}

/*
 * --virtio-args: virtio-user device arguments that change how our side of the virtqueues
 * works, never the frames; only those, each 0 or 1, and each at most once.
 */
static int parse_virtio_args(struct opts *o, const char *v)
{
	static const char *const keys[] = { "mrg_rxbuf", "in_order", "vectorized" };
	char buf[128], *tok, *save, *eq;
	unsigned int seen = 0, k;

	if (strlen(v) >= sizeof(buf))
		return bad("virtio-args", "too long");
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		eq = strchr(tok, '=');
		if (eq == NULL || (strcmp(eq, "=0") != 0 && strcmp(eq, "=1") != 0))
			return bad("virtio-args", "give KEY=0 or KEY=1, comma-separated");
		*eq = '\0';
		for (k = 0; k < RTE_DIM(keys) && strcmp(tok, keys[k]) != 0; k++)
			;
		if (k == RTE_DIM(keys))
			return bad("virtio-args", "keys are mrg_rxbuf, in_order and vectorized");
		if (seen & (1u << k))
			return bad("virtio-args", "a key given twice");
		seen |= 1u << k;
	}
	o->virtio_args = seen != 0 ? v : NULL;
	return 0;
}

static int parse_role(const char *s, enum role *r)
{
	unsigned int i;

	for (i = 0; i < RTE_DIM(role_names); i++)
		if (strcmp(s, role_names[i]) == 0) {
			*r = (enum role)i;
			return 0;
		}
	return bad("role", "txrx, tx, rx, reflect or ping");
}

/* How many streams the role sends (plan_streams makes them). */
static unsigned int n_streams(const struct opts *o)
{
	switch (o->role) {
	case ROLE_TXRX: return o->n_ports <= 1 ? o->n_ports : o->n_ports / 2 * (o->bidir ? 2 : 1);
	case ROLE_TX:
	case ROLE_PING: return o->n_ports;
	default: return 0;
	}
}

/* A virtio-raw spec: only as a --port, and well formed. */
static int check_raw_spec(const char *opt, const char *spec)
{
	char err[PORTSPEC_ERR_LEN];
	struct vring_spec vs;

	if (strcmp(opt, "port") != 0) {
		fprintf(stderr, "sluice-gen: --%s %s: a " VRING_KIND " port can only be a --port "
			"(of role txrx, tx or rx)\n", opt, spec);
		return -1;
	}
	if (vring_parse(spec, &vs, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-gen: --%s %s: %s\n", opt, spec, err);
		return -1;
	}
	return 0;
}

static bool any_raw_port(const struct opts *o)
{
	unsigned int i;

	for (i = 0; i < o->n_ports; i++)
		if (vring_is_spec(o->specs[i]))
			return true;
	return false;
}

/*
 * What virtio-raw ports do not serve (docs/gen.md, "virtio-raw ports"): the other roles,
 * more than one frame size or a frame larger than a standard one, and reading every byte.
 */
static int check_raw_options(const struct opts *o)
{
	const struct traffic *t = &o->traffic;

	if (!any_raw_port(o))
		return 0;
	if (o->role != ROLE_TXRX && o->role != ROLE_TX && o->role != ROLE_RX)
		return bad("role", VRING_KIND " ports serve txrx, tx and rx only");
	if (t->n_sizes != 1 || t->hi != 0 || t->sizes[0] > VRING_MAX_FRAME)
		return bad("size", VRING_KIND " ports send one frame size, 64 to 1518");
	if (o->touch)
		return bad("touch", "not with " VRING_KIND " ports");
	if (o->tx_frames == TX_FRAMES_COPY || o->tx_frames == TX_FRAMES_REFCNT)
		return bad("tx-frames", VRING_KIND " ports send prebuilt frames only");
	return 0;
}

/* Every port spec is checked before DPDK starts, so a bad one names its option. */
static int check_spec_list(const char *opt, const char *const *specs, unsigned int n)
{
	char err[PORTSPEC_ERR_LEN];
	struct portspec ps;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (vring_is_spec(specs[i])) {
			if (check_raw_spec(opt, specs[i]) != 0)
				return -1;
			continue;
		}
		if (portspec_parse(specs[i], "check", 1, &ps, err, sizeof(err)) != 0) {
			fprintf(stderr, "sluice-gen: --%s %s: %s\n", opt, specs[i], err);
			return -1;
		} else if (ps.kind == PORTSPEC_VXLAN) {
			/* sluiced's own tunnel over another of its ports: no DPDK device */
			fprintf(stderr, "sluice-gen: --%s %s: vxlan ports are sluiced's; sluice-gen "
				"cannot open one\n", opt, specs[i]);
			return -1;
		}
		if (ps.rx_queues > 1 && strncmp(opt, "vnf-", 4) == 0) {
			fprintf(stderr, "sluice-gen: --%s %s: a VNF port receives on one queue "
				"(rx_queues= is for --port, --sink-port and --reflect)\n", opt,
				specs[i]);
			return -1;
		}
	}
	return 0;
}

static int check_specs(const struct opts *o)
{
	return check_spec_list("port", o->specs, o->n_ports) != 0 ||
	       check_spec_list("reflect", o->reflect_specs, o->n_reflect) != 0 ||
	       check_spec_list("vnf-in", o->vnf_in, o->n_vnf_in) != 0 ||
	       check_spec_list("vnf-out", o->vnf_out, o->n_vnf_out) != 0 ||
	       check_spec_list("sink-port", o->sink_specs, o->n_sink_specs) != 0 ? -1 : 0;
}

/* --sink-port: one sending stream (txrx, one --port), whose copies the sinks count. */
static int check_fanout(const struct opts *o)
{
	if (o->n_sink_specs == 0)
		return 0;
	if (o->role != ROLE_TXRX || o->n_ports != 1 || o->bidir)
		return bad("sink-port", "needs --role txrx with exactly one --port (the sender), "
			   "not --bidir");
	if (o->alternate[0])
		return bad("sink-port", "cannot be used with --alternate");
	return 0;
}

static int check_options(struct opts *o)
{
	char err[200];

	if (o->n_ports == 0 && o->n_reflect == 0 && o->n_vnf_in == 0 && o->n_vnf_out == 0)
		return bad("port", "give at least one port (--port, --reflect or --vnf-in/--vnf-out)");
	if (o->n_vnf_in != o->n_vnf_out)
		return bad(o->n_vnf_in > o->n_vnf_out ? "vnf-out" : "vnf-in",
			   "every --vnf-in needs a --vnf-out (they pair in order)");
	if (o->n_vnf_dst > o->n_vnf_in)
		return bad("vnf-dst-mac", "more given than there are VNFs (--vnf-in/--vnf-out)");
	if (o->n_vnf_kind > o->n_vnf_in)
		return bad("vnf-kind", "more given than there are VNFs (--vnf-in/--vnf-out)");
	if (check_specs(o) != 0)
		return -1;
	if (traffic_parse_sizes(o->size_arg, &o->traffic, err, sizeof(err)) != 0 ||
	    traffic_parse_vary(o->vary_arg, &o->traffic, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-gen: %s\n", err);
		return -1;
	}
	if (o->rate_arg == NULL)
		o->rate_arg = o->role == ROLE_PING ? "1000pps" : "max";
	if (parse_rate(o->rate_arg, &o->traffic, &o->rate_pps) != 0 || parse_load(o) != 0)
		return -1;
	if (o->role == ROLE_TXRX && o->n_ports > 1 && o->n_ports % 2 != 0)
		return bad("port", "txrx takes ports in pairs (or a single port)");
	if (o->n_dst_mac > n_streams(o))
		return bad("dst-mac", "more given than there are sending streams");
	if (o->warmup + o->cooldown >= o->duration)
		return bad("duration", "must be longer than --warmup plus --cooldown");
	if (o->alternate[0] && (o->role != ROLE_TXRX || o->n_ports != 4 || o->bidir))
		return bad("alternate", "needs --role txrx with exactly two pairs, not --bidir");
	if (o->settle >= o->window)
		return bad("settle", "must be shorter than --window");
	if (o->role == ROLE_PING && !o->check_latency)
		return bad("check", "--role ping measures round trips: it needs latency");
	if (o->alternate[0] && !gen_stamped(o))
		return bad("check", "--alternate tells windows apart by the time frames were sent: "
			   "it needs seq or latency");
	/*
	 * DPDK's vector receive path takes bursts in eights and returns nothing below 8; it
	 * re-arms at most 32 buffers a call, so a larger burst drains the ring and the switch
	 * drops what finds it empty (measured: millions of frames in 5 s at 64).
	 */
	if (o->virtio_args != NULL && strstr(o->virtio_args, "vectorized=1") != NULL &&
	    (o->rx_burst < 8 || o->rx_burst > 32))
		return bad("rx-burst", "8 to 32 with --virtio-args vectorized=1");
	if (check_fanout(o) != 0 || check_raw_options(o) != 0)
		return -1;
	if (o->alternate[0] && (o->alternate[0] == o->alternate[1] ||
				kill(o->alternate[0], 0) != 0 || kill(o->alternate[1], 0) != 0))
		return bad("alternate", "two different processes this user may signal");
	if (o->alternate[0] && o->duration / o->window > ALT_MAX_WINDOWS - 2)
		return bad("window", "too short for --duration (at most 4094 windows)");
	return 0;
}

static int add_vnf_port(const char *opt, const char **specs, unsigned int *n, const char *v)
{
	if (*n == VNF_MAX)
		return bad(opt, "at most 8 VNFs");
	specs[(*n)++] = v;
	return 0;
}

static int add_vnf_dst(struct opts *o, const char *v)
{
	char err[200];

	if (o->n_vnf_dst == VNF_MAX)
		return bad("vnf-dst-mac", "at most 8 VNFs");
	if (vnf_parse_dst(v, &o->vnf_dst[o->n_vnf_dst], err, sizeof(err)) != 0)
		return bad("vnf-dst-mac", err);
	o->vnf_dst_arg[o->n_vnf_dst++] = v;
	return 0;
}

static int add_vnf_kind(struct opts *o, const char *v)
{
	if (o->n_vnf_kind == VNF_MAX)
		return bad("vnf-kind", "at most 8 VNFs");
	if (vnf_parse_kind(v, &o->vnf_kind[o->n_vnf_kind]) != 0)
		return bad("vnf-kind", "give l2 (DPDK l2fwd's behaviour) or l3 (l3fwd's)");
	o->vnf_kind_arg[o->n_vnf_kind++] = v;
	return 0;
}

static int add_dst_mac(struct opts *o, const char *v)
{
	if (o->n_dst_mac == GEN_MAX_STREAMS)
		return bad("dst-mac", "at most 8 streams");
	if (strcmp(v, "default") != 0 &&
	    vnf_parse_mac(v, strlen(v), o->dst_mac[o->n_dst_mac]) != 0)
		return bad("dst-mac", "give a MAC like 02:00:00:00:0a:00, or default");
	o->dst_mac_arg[o->n_dst_mac++] = v;
	return 0;
}

static int parse_one(struct opts *o, int c, const char *v)
{
	long n;
	char tail;

	switch (c) {
	case 'p':
		if (o->n_ports == GEN_MAX_PORTS)
			return bad("port", "at most 8 ports");
		o->specs[o->n_ports++] = v;
		return 0;
	case 'r': return parse_role(v, &o->role);
	case 'X':
		if (o->n_reflect == GEN_MAX_PORTS)
			return bad("reflect", "at most 8 ports");
		o->reflect_specs[o->n_reflect++] = v;
		return 0;
	case 'Y':
		if (o->n_sink_specs == GEN_MAX_SINK_PORTS)
			return bad("sink-port", "at most 16 sink ports");
		o->sink_specs[o->n_sink_specs++] = v;
		return 0;
	case 'I':
	case 'O':
		return add_vnf_port(c == 'I' ? "vnf-in" : "vnf-out",
				    c == 'I' ? o->vnf_in : o->vnf_out,
				    c == 'I' ? &o->n_vnf_in : &o->n_vnf_out, v);
	case 'M': return add_vnf_dst(o, v);
	case 'K': return add_vnf_kind(o, v);
	case 'D': return add_dst_mac(o, v);
	case 's': o->size_arg = v; return 0;
	case 'G': o->load_arg = v; return 0;
	case 'B':
		if (parse_long("burst", v, 1, GEN_MAX_BURST, &n) != 0)
			return -1;
		o->burst = (uint16_t)n;
		return 0;
	case 'Q':
		if (parse_long("ring", v, 64, 16384, &n) != 0)
			return -1;
		if ((n & (n - 1)) != 0)
			return bad("ring", "give a power of two");
		o->ring = (uint16_t)n;
		o->ring_given = true;
		return 0;
	case 'N':
		if (parse_long("rx-burst", v, 1, GEN_MAX_BURST, &n) != 0)
			return -1;
		o->rx_burst = (uint16_t)n;
		return 0;
	case 'k': return parse_check(o, v);
	case 'U': return parse_virtio_args(o, v);
	case 'F':
		o->tx_frames_arg = v;
		if (tx_parse_frames(v, &o->tx_frames) != 0)
			return bad("tx-frames", "prebuilt, copy, refcnt or auto");
		return 0;
	case 'T': o->touch = true; return 0;
	case 'A': o->announce = true; return 0;
	case 'R': o->rate_arg = v; return 0;
	case 'f':
		if (parse_long("flows", v, 1, 1000000, &n) != 0)
			return -1;
		o->traffic.flows = (uint32_t)n;
		return 0;
	case 'V': o->vary_arg = v; return 0;
	case 'd': return parse_double("duration", v, 0.001, &o->duration);
	case 'w': return parse_double("warmup", v, 0, &o->warmup);
	case 'C': return parse_double("cooldown", v, 0, &o->cooldown);
	case 'b': o->bidir = true; return 0;
	case 'L': return 0;
	case 'c':
		if (parse_long("cpu", v, 0, CPU_SETSIZE - 1, &n) != 0)
			return -1;
		o->cpu = (int)n;
		return 0;
	case 'v': o->verbose = true; return 0;
	case 'j': o->json = true; return 0;
	case 'o': o->out = v; return 0;
	case 'H': o->hist_out = v; return 0;
	case 'a':
		if (sscanf(v, "%d,%d%c", &o->alternate[0], &o->alternate[1], &tail) != 2 ||
		    o->alternate[0] <= 1 || o->alternate[1] <= 1)
			return bad("alternate", "two process ids: A,B");
		return 0;
	case 'W': return parse_double("window", v, 0.01, &o->window);
	case 'S': return parse_double("settle", v, 0, &o->settle);
	case 'h': usage(stdout); exit(0);
	default: usage(stderr); return -1;
	}
}

static int parse_options(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "port", 1, NULL, 'p' }, { "role", 1, NULL, 'r' }, { "size", 1, NULL, 's' },
		{ "reflect", 1, NULL, 'X' }, { "vnf-in", 1, NULL, 'I' },
		{ "sink-port", 1, NULL, 'Y' },
		{ "vnf-out", 1, NULL, 'O' }, { "vnf-dst-mac", 1, NULL, 'M' },
		{ "vnf-kind", 1, NULL, 'K' },
		{ "dst-mac", 1, NULL, 'D' }, { "load", 1, NULL, 'G' }, { "burst", 1, NULL, 'B' },
		{ "ring", 1, NULL, 'Q' },
		{ "rx-burst", 1, NULL, 'N' }, { "check", 1, NULL, 'k' },
		{ "tx-frames", 1, NULL, 'F' }, { "virtio-args", 1, NULL, 'U' },
		{ "touch", 0, NULL, 'T' }, { "announce", 0, NULL, 'A' },
		{ "rate", 1, NULL, 'R' }, { "flows", 1, NULL, 'f' }, { "vary", 1, NULL, 'V' },
		{ "duration", 1, NULL, 'd' }, { "warmup", 1, NULL, 'w' },
		{ "cooldown", 1, NULL, 'C' }, { "bidir", 0, NULL, 'b' },
		{ "latency", 0, NULL, 'L' }, { "cpu", 1, NULL, 'c' }, { "lcore", 1, NULL, 'c' },
		{ "verbose", 0, NULL, 'v' }, { "json", 0, NULL, 'j' },
		{ "out", 1, NULL, 'o' }, { "hist-out", 1, NULL, 'H' },
		{ "alternate", 1, NULL, 'a' }, { "window", 1, NULL, 'W' },
		{ "settle", 1, NULL, 'S' }, { "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1)
		if (parse_one(o, c, optarg) != 0)
			return -1;
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		fprintf(stderr, "sluice-gen: unexpected argument '%s' (EAL options go after --)\n",
			argv[optind]);
		return -1;
	}
	return check_options(o) == 0 ? optind : -1;
}

/* ---- ports ---- */

/* A port to open: its spec, the option that named it, where its ethdev id goes. */
struct port_plan {
	const char *spec, *opt;
	uint16_t *ethdev;
	int rank;                    /* opened in rank order: see port_rank() */
};

/*
 * The order ports are opened in, so both ends of a link may live in this process. Servers
 * that only listen (memif, vhost-user server) go first, then the clients that connect to
 * them, here or in a switch. Last come virtio-user servers (server=1): their probe blocks in
 * accept() until the client, a switch's vhost-user client port, connects. virtio-raw ports
 * are not ranked here: a virtio-raw server listens before rank 0 and accepts after rank 2
 * (prepare_raw_ports(), open_raw_ports()).
 */
static int port_rank(const char *spec)
{
	char err[PORTSPEC_ERR_LEN];
	struct portspec ps;

	if (portspec_parse(spec, "rank", 1, &ps, err, sizeof(err)) != 0 || !ps.path_is_server)
		return 1;
	return ps.kind == PORTSPEC_VIRTIO_USER ? 2 : 0;
}

/* Kinds whose client side connects to a Unix socket at ps->path when it starts or probes. */
static bool connects_to_socket(const struct portspec *ps)
{
	return !ps->path_is_server && ps->path[0] != '\0' &&
	       (ps->kind == PORTSPEC_MEMIF || ps->kind == PORTSPEC_VHOST_USER ||
		ps->kind == PORTSPEC_VIRTIO_USER);
}

/*
 * Says why port P (parsed into PS) failed at STEP. A client that could not reach its
 * server's socket gets the cause from peer_diagnose(); for the rest RC is shown only where it
 * is a negative errno (drivers also return a bare -1, which strerror would read as EPERM).
 */
static void report_port_failure(const struct port_plan *p, const struct portspec *ps,
				const char *step, int rc)
{
	char why[PEER_WHY_LEN];

	if (connects_to_socket(ps)) {
		peer_diagnose(ps->path, ps->kind == PORTSPEC_MEMIF, why, sizeof(why));
		fprintf(stderr, "sluice-gen: --%s %s: cannot connect to %s socket %s: %s\n",
			p->opt, p->spec, portspec_kind_name(ps->kind), ps->path, why);
	} else if (rc < -1) {
		fprintf(stderr, "sluice-gen: --%s %s: %s failed: %s\n", p->opt, p->spec, step,
			rte_strerror(-rc));
	} else {
		fprintf(stderr, "sluice-gen: --%s %s: %s failed (the driver's log above says "
			"why)\n", p->opt, p->spec, step);
	}
}

/* Remembers the socket file a server port of ours made, for remove_server_sockets(). */
static void note_server_socket(struct gen *g, const struct portspec *ps)
{
	if (ps->path_is_server && ps->path[0] != '\0' && g->n_server_paths < GEN_MAX_PLANS)
		snprintf(g->server_paths[g->n_server_paths++], PORTSPEC_MAX_LEN, "%s", ps->path);
}

/*
 * Frames above TRAFFIC_STD_FRAME (jumbo runs) need ports that take them. The port's MTU is
 * its spec's mtu=, else the one the largest frame needs (9018 B: 9000); where the device has
 * an MTU and a range holding it (virtio-user, tap, af_xdp), it is asked for in the
 * configuration, with scatter receive and multi-segment transmit where the device has them,
 * so what outgrows a buffer arrives as a chain. Devices without an MTU of their own
 * (vhost-user, memif, ring, null) chain or take any length: they are left as they are. Runs
 * of standard sizes configure ports exactly as before. -1 with a message when a spec's mtu=
 * is outside the device's range.
 */
static int prepare_mtu(const struct gen *g, const struct port_plan *p, const struct portspec *ps,
		       struct rte_eth_conf *conf)
{
	unsigned int max_len = traffic_max_size(&g->o.traffic) - RTE_ETHER_CRC_LEN, mtu;
	struct rte_eth_dev_info info;

	if (ps->mtu == 0 && max_len <= TRAFFIC_STD_FRAME - RTE_ETHER_CRC_LEN)
		return 0;
	if (rte_eth_dev_info_get(*p->ethdev, &info) != 0)
		return 0;
	mtu = ps->mtu != 0 ? ps->mtu : max_len - RTE_ETHER_HDR_LEN;
	if (mtu < info.min_mtu || mtu > info.max_mtu ||
	    mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN > info.max_rx_pktlen) {
		if (ps->mtu == 0 || ps->kind == PORTSPEC_MEMIF)
			return 0;       /* no MTU of its own, or memif's chains: as it is */
		fprintf(stderr, "sluice-gen: --%s %s: mtu %u: the device takes %u to %u\n", p->opt, p->spec,
			mtu, info.min_mtu, RTE_MIN((uint32_t)info.max_mtu, info.max_rx_pktlen -
						   RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN));
		return -1;
	}
	conf->rxmode.mtu = mtu;
	if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)
		conf->rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	return 0;
}

/*
 * Configures and starts P's port with one transmit queue and one receive queue, or as many
 * as a memif client's rx_queues= asks (each server-to-client ring is a queue of ours); 0,
 * or the failing call's rc and *STEP (NULL when a message was printed already).
 */
static int start_port(const struct gen *g, const struct port_plan *p, const struct portspec *ps,
		      const char **step)
{
	const uint16_t n_rxq = ps->rx_queues > 1 ? (uint16_t)ps->rx_queues : 1;
	struct rte_eth_conf conf = { 0 };
	uint16_t port = *p->ethdev, q;
	int rc;

	*step = NULL;                /* prepare_mtu() says why */
	if (prepare_mtu(g, p, ps, &conf) != 0)
		return -EINVAL;
	*step = "configure";
	rc = rte_eth_dev_configure(port, n_rxq, 1, &conf);
	if (rc != 0)
		return rc;
	*step = "MTU";
	rc = conf.rxmode.mtu != 0 ? rte_eth_dev_set_mtu(port, (uint16_t)conf.rxmode.mtu) : 0;
	if (rc != 0 && rc != -ENOTSUP)
		return rc;
	*step = "receive queue set-up";
	for (q = 0; q < n_rxq; q++) {
		rc = rte_eth_rx_queue_setup(port, q, g->o.ring, rte_socket_id(), NULL, g->pool);
		if (rc != 0)
			return rc;
	}
	*step = "transmit queue set-up";
	rc = rte_eth_tx_queue_setup(port, 0, g->o.ring, rte_socket_id(), NULL);
	if (rc != 0)
		return rc;
	*step = "start";
	return rte_eth_dev_start(port);
}

/*
 * With --ring, a virtio-user or memif port whose spec gives no size gets rings of that many
 * slots. Their drivers size the shared ring from their device arguments (virtio-user 256,
 * memif 1024 by default): the queue set-up's count can only lower a virtqueue's use of it,
 * and memif ignores it. --virtio-args goes to every virtio-user port.
 */
static void add_devargs(const struct opts *o, struct portspec *ps)
{
	size_t used = strlen(ps->devargs);
	char *end = ps->devargs + used;
	size_t room = sizeof(ps->devargs) - used;

	/* --virtio-args: keys the spec parser does not take, so never given twice. */
	if (ps->kind == PORTSPEC_VIRTIO_USER && o->virtio_args != NULL) {
		snprintf(end, room, ",%s", o->virtio_args);
		used = strlen(ps->devargs);
		end = ps->devargs + used;
		room = sizeof(ps->devargs) - used;
	}
	if (!o->ring_given)
		return;
	if (ps->kind == PORTSPEC_VIRTIO_USER && strstr(ps->devargs, "queue_size=") == NULL)
		snprintf(end, room, ",queue_size=%u", o->ring);
	else if (ps->kind == PORTSPEC_MEMIF && strstr(ps->devargs, "rsize=") == NULL)
		snprintf(end, room, ",rsize=%d", __builtin_ctz(o->ring));
}

static int open_port(struct gen *g, const struct port_plan *p, unsigned int index)
{
	char err[PORTSPEC_ERR_LEN], unique[16], probe[PORTSPEC_DEVNAME_LEN + PORTSPEC_ARGS_LEN];
	const char *step;
	struct portspec ps;
	int rc;

	snprintf(unique, sizeof(unique), "g%u", index);
	if (portspec_parse(p->spec, unique, 1, &ps, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-gen: --%s %s: %s\n", p->opt, p->spec, err);
		return -1;
	}
	add_devargs(&g->o, &ps);
	portspec_probe_string(&ps, probe, sizeof(probe));
	if (rte_dev_probe(probe) != 0 ||
	    rte_eth_dev_get_port_by_name(ps.devname, p->ethdev) != 0) {
		if (connects_to_socket(&ps))
			report_port_failure(p, &ps, "probe", -1);
		else
			fprintf(stderr, "sluice-gen: --%s: cannot create port %s (%s)\n", p->opt,
				p->spec, probe);
		return -1;
	}
	rc = start_port(g, p, &ps, &step);
	if (rc != 0) {
		if (step != NULL)
			report_port_failure(p, &ps, step, rc);
		return -1;
	}
	note_server_socket(g, &ps);
	g->extra_rxqs[*p->ethdev] = (uint8_t)(ps.rx_queues > 1 ? ps.rx_queues - 1 : 0);
	rte_eth_promiscuous_enable(*p->ethdev);
	return 0;
}

/*
 * A sending stream on port TX whose frames arrive on port RX (NO_PORT: none of ours). A
 * learning switch must see each port's own source, or its table flaps between them: with
 * --dst-mac, or with --announce and a receiving port of ours, the source is TX's MAC and the
 * destination the given MAC or RX's.
 */
static int port_mac(struct gen *g, uint16_t port, struct rte_ether_addr *mac)
{
	struct vring_port *raw = gen_raw(g, port);

	if (raw == NULL)
		return rte_eth_macaddr_get(port, mac);
	memcpy(mac->addr_bytes, raw->mac, 6);
	return 0;
}

static void add_sender(struct gen *g, uint16_t tx, uint16_t rx)
{
	struct sender *s = &g->senders[g->n_senders];
	struct rte_ether_addr own, dst;
	bool given;

	s->id = (uint8_t)g->n_senders++;
	s->tx = tx;
	s->raw = gen_raw(g, tx);
	given = s->id < g->o.n_dst_mac && strcmp(g->o.dst_mac_arg[s->id], "default") != 0;
	if (given)
		memcpy(dst.addr_bytes, g->o.dst_mac[s->id], 6);
	else if (!g->o.announce || rx == NO_PORT || rx == tx || port_mac(g, rx, &dst) != 0)
		return;
	if (port_mac(g, tx, &own) != 0)
		return;
	memcpy(s->addrs, dst.addr_bytes, 6);
	memcpy(s->addrs + 6, own.addr_bytes, 6);
	s->set_addrs = true;
}

/* RX receives; with --check none it counts what arrives as STREAM's (the last sender). */
static void add_sink_port(struct gen *g, uint16_t rx, unsigned int stream)
{
	unsigned int i;

	for (i = 0; i < g->n_sink_ports; i++)
		if (g->sink_ports[i] == rx)
			return;
	g->sink_stream[g->n_sink_ports] = (uint8_t)stream;
	g->sink_raw[g->n_sink_ports] = gen_raw(g, rx);
	g->sink_ports[g->n_sink_ports++] = rx;
}

/* Streams and sink ports from the role: who sends where, who listens. */
static void plan_streams(struct gen *g)
{
	const struct opts *o = &g->o;
	unsigned int i;

	switch (o->role) {
	case ROLE_TXRX:
		if (o->n_ports == 1) {
			add_sender(g, g->ports[0], NO_PORT);
			if (o->n_sink_specs == 0)        /* a round trip; else a fan-out */
				add_sink_port(g, g->ports[0], 0);
			break;
		}
		for (i = 0; i < o->n_ports; i += 2) {
			add_sender(g, g->ports[i], g->ports[i + 1]);
			add_sink_port(g, g->ports[i + 1], g->n_senders - 1);
		}
		for (i = 0; o->bidir && i < o->n_ports; i += 2) {
			add_sender(g, g->ports[i + 1], g->ports[i]);
			add_sink_port(g, g->ports[i], g->n_senders - 1);
		}
		break;
	case ROLE_TX:
		for (i = 0; i < o->n_ports; i++)
			add_sender(g, g->ports[i], NO_PORT);
		break;
	case ROLE_PING:
		for (i = 0; i < o->n_ports; i++) {
			add_sender(g, g->ports[i], NO_PORT);
			add_sink_port(g, g->ports[i], i);
		}
		break;
	case ROLE_RX:
	case ROLE_REFLECT:
		for (i = 0; i < o->n_ports; i++)    /* --check none: stream = port */
			add_sink_port(g, g->ports[i], i);
		break;
	}
}

/* ---- the loop ---- */

static uint64_t sum_senders(const struct gen *g, size_t offset)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < g->n_senders; i++)
		n += *(const uint64_t *)((const char *)&g->senders[i] + offset);
	return n;
}

static uint64_t sum_sinks(const struct gen *g, size_t offset)
{
	uint64_t n = 0;
	unsigned int i;

	for (i = 0; i < GEN_MAX_SINKS; i++)
		n += *(const uint64_t *)((const char *)&g->sinks[i] + offset);
	/* --sink-port: every copy a sink port received counts (rx is copies in a fan-out). */
	for (i = 0; i < g->o.n_sink_specs; i++)
		n += *(const uint64_t *)((const char *)&g->fanout[i] + offset);
	return n;
}

#define TX_ALL(g) sum_senders(g, offsetof(struct sender, all.accepted))
#define OFFERED_ALL(g) sum_senders(g, offsetof(struct sender, all.offered))
#define RX_ALL(g) (sum_sinks(g, offsetof(struct sink, rx_packets)) + (g)->reflected)

/* The per-second line: rates over the last interval, counts so far. */
struct second {
	double t;
	uint64_t tx, rx, passes, idle, offered;
};

/* The VNFs' counters so far, as a field of the per-second JSON record. */
static void print_vnf_counts(const struct gen *g)
{
	json_t *a;
	char *text;

	if (g->vnfs.n == 0)
		return;
	a = vnf_counts_json(&g->vnfs);
	text = json_dumps(a, JSON_COMPACT);
	if (text != NULL)
		printf(", \"vnfs\": %s", text);
	free(text);
	json_decref(a);
}

static void print_fanout_counts(const struct gen *g);

static void print_second(const struct gen *g, struct second *last, double t)
{
	struct second now = { t, TX_ALL(g), RX_ALL(g), g->passes, g->idle_passes, OFFERED_ALL(g) };
	double dt = t - last->t, tx_pps = (double)(now.tx - last->tx) / dt;
	double offered_pps = (double)(now.offered - last->offered) / dt;
	double rx_pps = (double)(now.rx - last->rx) / dt;
	double idle = now.passes > last->passes ? (double)(now.idle - last->idle) /
						   (double)(now.passes - last->passes) : 0.0;
	double passes_per_s = (double)(now.passes - last->passes) / dt;
	uint64_t gaps = sum_sinks(g, offsetof(struct sink, gap_lost));

	if (g->o.json) {
		printf("{\"monotonic_s\": %.6f, \"t\": %.3f, \"tx_pps\": %.0f, \"rx_pps\": %.0f, "
		       "\"tx_packets\": %" PRIu64 ", \"rx_packets\": %" PRIu64 ", \"gap_lost\": %"
		       PRIu64 ", \"idle_fraction\": %.4f, \"passes_per_s\": %.0f", t, t - g->start_s,
		       tx_pps, rx_pps, now.tx, now.rx, gaps, idle, passes_per_s);
		printf(", \"load\": \"%s\", \"offered_pps\": %.0f, \"accepted_pps\": %.0f, "
		       "\"not_accepted\": %" PRIu64 ", \"retried\": %" PRIu64, load_name(g->o.load),
		       offered_pps, tx_pps, sum_senders(g, offsetof(struct sender, all.not_accepted)),
		       sum_senders(g, offsetof(struct sender, all.retried)));
		print_vnf_counts(g);
		print_fanout_counts(g);
		printf("}\n");
	} else {
		printf("%7.1f s  tx %11.0f pps  rx %11.0f pps  gaps %10" PRIu64 "  idle %5.1f %%\n",
		       t - g->start_s, tx_pps, rx_pps, gaps, 100 * idle);
	}
	fflush(stdout);
	*last = now;
}

/* Receives on every sink port, reflects on every reflecting port, forwards every VNF. */
static uint64_t receive_pass(struct gen *g, uint64_t tsc)
{
	uint64_t work = g->vnfs.n > 0 ? vnf_pass(&g->vnfs, tsc) : 0;
	unsigned int i;

	for (i = 0; i < g->n_sink_ports; i++)
		work += g->o.role == ROLE_REFLECT ? reflect_burst(g, g->sink_ports[i])
						  : sink_burst(g, i, tsc);
	for (i = 0; i < g->o.n_reflect; i++)
		work += reflect_burst(g, g->reflect_ports[i]);
	for (i = 0; i < g->o.n_sink_specs; i++)
		work += sink_fanout_burst(g, i, tsc);
	return work;
}

static uint64_t one_pass(struct gen *g, int only_sender, uint64_t tsc)
{
	uint64_t work = 0;
	unsigned int i;

	/* The sinks' stamps on their way while the senders work (sink_peek_raw). */
	if (g->n_raw > 0 && gen_stamped(&g->o))
		sink_peek_raw(g);
	for (i = 0; i < g->n_senders; i++)
		if (only_sender < 0 || (int)i == only_sender)
			work += tx_send_burst(g, &g->senders[i], tsc);
	return work + receive_pass(g, tsc);
}

static void step_alternation(struct gen *g, double t)
{
	uint64_t tx_of[2] = { g->senders[0].all.accepted, g->senders[1].all.accepted };

	alt_step(&g->alt, t, rte_rdtsc(), tx_of);
}

/*
 * Every 50 ms: is each virtio-raw port's backend still connected? One that closed (the
 * switch stopped or died) ends the run: its rings no longer move, and a run that went on
 * would report the rest of it as loss. The summary is written, and the exit status is 1.
 */
static void check_raw_ports(struct gen *g, double t)
{
	unsigned int i;

	g->next_raw_check = t + 0.05;
	for (i = 0; i < g->n_raw; i++) {
		if (g->raw[i].closed || vring_alive(&g->raw[i]))
			continue;
		fprintf(stderr, "sluice-gen: --port %s: the vhost-user backend closed the "
			"connection %.2f s into the run (sent %" PRIu64 ", received %" PRIu64
			" on it); stopping\n", g->raw[i].spec, t - g->start_s, g->raw[i].tx_packets,
			g->raw[i].rx_packets);
		g->raw_failed = true;
		quit = 1;
	}
}

static void run_loop(struct gen *g)
{
	const struct opts *o = &g->o;
	double t = now_s(), next_print = t + 1;
	uint64_t tsc0 = rte_rdtsc();
	struct second last = { .t = t };

	g->start_s = t;
	g->t_measure_start = tsc0 + (uint64_t)(o->warmup * (double)g->hz);
	g->t_measure_end = tsc0 + (uint64_t)((o->duration - o->cooldown) * (double)g->hz);
	g->t_stop = tsc0 + (uint64_t)(o->duration * (double)g->hz);
	uint64_t last_tsc = tsc0, last_work = 0;

	if (g->alternating)
		alt_start(&g->alt, t, tsc0);
	while (!quit && t - g->start_s < o->duration) {
		uint64_t tsc = rte_rdtsc();
		uint64_t work;

		/* A pass lasts until the next begins: its cycles are busy if it found work. */
		if (in_measurement(g, last_tsc)) {
			g->cycles_measured += tsc - last_tsc;
			g->busy_measured += last_work != 0 ? tsc - last_tsc : 0;
		}
		work = one_pass(g, g->alternating ? (int)g->alt.pair : -1, tsc);
		last_tsc = tsc;
		last_work = work;
		g->passes++;
		g->idle_passes += work == 0;
		/* The idle share that tells a generator-bound run is the measured interval's. */
		if (in_measurement(g, tsc)) {
			g->passes_measured++;
			g->idle_measured += work == 0;
		}
		/* The clock and the rarer chores every 64 passes: a few microseconds at most. */
		if ((g->passes & 63) != 0)
			continue;
		t = now_s();
		if (g->n_raw > 0 && t >= g->next_raw_check)
			check_raw_ports(g, t);
		sink_drain_senders(g);
		if (g->alternating)
			step_alternation(g, t);
		if (t >= next_print) {
			print_second(g, &last, t);
			next_print += 1;
		}
	}
	g->end_s = now_s();
}

/* After the last send, frames still in flight arrive: count them (200 ms). */
static void drain(struct gen *g)
{
	double until = now_s() + 0.2;
	unsigned int i;

	if (g->alternating)
		alt_resume_all();
	for (i = 0; i < g->n_senders; i++)
		tx_drop_pending(&g->senders[i]);
	while (now_s() < until) {
		receive_pass(g, rte_rdtsc());
		sink_drain_senders(g);
	}
	vnf_flush(&g->vnfs);
}

/* ---- output ---- */

static json_t *latency_json(const struct hist *h)
{
	return json_pack("{sI sf sf sI sI sI sI sI sI sI}",
		"min", (json_int_t)(h->count ? h->min : 0), "mean", hist_mean(h),
		"stdev", hist_stdev(h), "p50", (json_int_t)hist_percentile(h, 0.5),
		"p90", (json_int_t)hist_percentile(h, 0.9),
		"p99", (json_int_t)hist_percentile(h, 0.99),
		"p999", (json_int_t)hist_percentile(h, 0.999),
		"p9999", (json_int_t)hist_percentile(h, 0.9999),
		"max", (json_int_t)h->max, "count", (json_int_t)h->count);
}

/*
 * Loss of a stream generated here is exact: what was sent in the measured interval less what
 * arrived of it. Of a stream from elsewhere (role rx) only sequence gaps can tell.
 */
static uint64_t fanout_lost(const struct gen *g);

static uint64_t stream_lost(const struct gen *g, unsigned int id)
{
	const struct sink *k = &g->sinks[id];
	uint64_t got;

	if (g->o.n_sink_specs > 0 && id == 0)
		return fanout_lost(g);
	if ((g->o.role != ROLE_TXRX && g->o.role != ROLE_PING) || id >= g->n_senders)
		return k->gap_lost;
	/* Unstamped frames cannot be told by interval: the whole run, exact after the drain. */
	if (!gen_stamped(&g->o))
		return g->senders[id].all.accepted > k->rx_packets ?
		       g->senders[id].all.accepted - k->rx_packets : 0;
	got = k->rx_measured - RTE_MIN(k->rx_measured, k->duplicated);
	return g->senders[id].measured.accepted > got ? g->senders[id].measured.accepted - got : 0;
}

/* Frames of stream ID received in the interval (in a fan-out: every sink's copies). */
static uint64_t stream_rx(const struct gen *g, unsigned int id)
{
	uint64_t n = g->sinks[id].rx_measured;
	unsigned int i;

	for (i = 0; id == 0 && i < g->o.n_sink_specs; i++)
		n += g->fanout[i].rx_measured;
	return n;
}

static json_t *streams_json(const struct gen *g, uint64_t *lost)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < GEN_MAX_SINKS; i++) {
		const struct sink *k = &g->sinks[i];
		const struct sender *s = i < g->n_senders ? &g->senders[i] : NULL;
		uint64_t l;

		if (s == NULL && !k->active)
			continue;
		l = stream_lost(g, i);
		*lost += l;
		json_array_append_new(a, json_pack("{si sI sI sI sI sI sI sI sI}", "stream", i,
			"tx_packets", (json_int_t)(s ? s->measured.accepted : 0),
			"rx_packets", (json_int_t)stream_rx(g, i), "lost", (json_int_t)l,
			"duplicated", (json_int_t)k->duplicated, "reordered", (json_int_t)k->reordered,
			"offered", (json_int_t)(s ? s->measured.offered : 0),
			"not_accepted", (json_int_t)(s ? s->measured.not_accepted : 0),
			"retried", (json_int_t)(s ? s->measured.retried : 0)));
	}
	return a;
}

static json_t *strings_json(const char *const *v, unsigned int n)
{
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *options_json(const struct opts *o)
{
	json_t *vnf = json_array();
	unsigned int i;

	for (i = 0; i < o->n_vnf_in; i++)
		json_array_append_new(vnf, json_pack("{ss ss ss ss}", "in", o->vnf_in[i],
			"out", o->vnf_out[i],
			"dst_mac", i < o->n_vnf_dst ? o->vnf_dst_arg[i] : "l2fwd",
			"kind", i < o->n_vnf_kind ? o->vnf_kind_arg[i] : "l2"));
	json_t *r = json_pack("{so so so so ss ss ss si ss sb sf sf sf si sb sb ss* ss*}",
		"ports", strings_json(o->specs, o->n_ports),
		"reflect", strings_json(o->reflect_specs, o->n_reflect), "vnfs", vnf,
		"dst_mac", strings_json(o->dst_mac_arg, o->n_dst_mac),
		"role", role_names[o->role], "size", o->size_arg,
		"rate", o->rate_arg, "flows", o->traffic.flows, "vary", o->vary_arg,
		"bidir", o->bidir, "duration", o->duration, "warmup", o->warmup,
		"cooldown", o->cooldown, "cpu", o->cpu, "json", o->json, "verbose", o->verbose,
		"out", o->out, "hist_out", o->hist_out);

	json_object_set_new(r, "load", json_string(o->load_arg ? o->load_arg : "default"));
	json_object_set_new(r, "burst", json_integer(o->burst));
	json_object_set_new(r, "ring", json_integer(o->ring));
	json_object_set_new(r, "touch", json_boolean(o->touch));
	json_object_set_new(r, "check", json_string(o->check_arg));
	json_object_set_new(r, "tx_frames", json_string(o->tx_frames_arg ? o->tx_frames_arg
								       : "auto"));
	json_object_set_new(r, "rx_burst", json_integer(o->rx_burst));
	json_object_set_new(r, "virtio_args", o->virtio_args ? json_string(o->virtio_args)
							    : json_null());
	json_object_set_new(r, "sink_ports", strings_json(o->sink_specs, o->n_sink_specs));
	return r;
}

/* The CPU the loop runs on, as EAL pinned it (--cpu, or -l/--lcores after --). */
static int loop_cpu(void)
{
	rte_cpuset_t set = rte_lcore_cpuset(rte_get_main_lcore());
	int i;

	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			return i;
	return -1;
}

/* Loop passes that found no work, over the measured interval (the whole run if it had none). */
static double idle_fraction(const struct gen *g)
{
	if (g->passes_measured > 0)
		return (double)g->idle_measured / (double)g->passes_measured;
	return g->passes ? (double)g->idle_passes / (double)g->passes : 0.0;
}

/*
 * The share of the measured interval's cycles spent in passes that found work, and the
 * cycles of those per frame the loop handled (sent, received, reflected, VNF-forwarded).
 */
static void busy_fields(json_t *r, const struct gen *g)
{
	uint64_t frames = sum_senders(g, offsetof(struct sender, measured.accepted)) +
			  sum_sinks(g, offsetof(struct sink, rx_measured));
	double busy = g->cycles_measured ? (double)g->busy_measured / (double)g->cycles_measured
					 : 0.0;

	json_object_set_new(r, "busy_fraction", json_real(busy));
	json_object_set_new(r, "busy_cycles_per_frame", frames ? json_real(
		(double)g->busy_measured / (double)frames) : json_null());
}

/* The measured interval's counts of every sender and sink, and the figures from them. */
static void load_summary(const struct gen *g, double measured, uint64_t lost,
			 struct load_figures *f)
{
	struct load_counts c = {
		.offered = sum_senders(g, offsetof(struct sender, measured.offered)),
		.accepted = sum_senders(g, offsetof(struct sender, measured.accepted)),
		.received = sum_sinks(g, offsetof(struct sink, rx_measured)),
		.lost_in_flight = lost,
		.tx_bytes = sum_senders(g, offsetof(struct sender, measured.bytes)),
		.rx_bytes = sum_sinks(g, offsetof(struct sink, rx_bytes_measured)),
		.seconds = measured,
	};

	load_figures(&c, f);
}

static void set_load_fields(json_t *r, const struct gen *g, const struct load_figures *f)
{
	json_object_set_new(r, "load", json_string(load_name(g->o.load)));
	json_object_set_new(r, "burst", json_integer(g->o.burst));
	json_object_set_new(r, "asked_pps", g->o.rate_pps > 0 ? json_real(g->o.rate_pps)
							     : json_null());
	json_object_set_new(r, "offered_pps", json_real(f->offered_pps));
	json_object_set_new(r, "accepted_pps", json_real(f->accepted_pps));
	json_object_set_new(r, "tx_pps", json_real(f->accepted_pps));
	json_object_set_new(r, "rx_pps", json_real(f->rx_pps));
	json_object_set_new(r, "not_accepted", json_integer((json_int_t)f->not_accepted));
	json_object_set_new(r, "retried", json_integer((json_int_t)sum_senders(g,
		offsetof(struct sender, measured.retried))));
	json_object_set_new(r, "lost_in_flight", json_integer((json_int_t)f->lost_in_flight));
	json_object_set_new(r, "not_accepted_fraction", json_real(f->not_accepted_fraction));
	json_object_set_new(r, "lost_in_flight_fraction", json_real(f->lost_in_flight_fraction));
	json_object_set_new(r, "loss_fraction", json_real(f->loss_fraction));
	json_object_set_new(r, "tx_gbps_l1", json_real(f->tx_gbps_l1));
	json_object_set_new(r, "tx_gbps_l2", json_real(f->tx_gbps_l2));
	json_object_set_new(r, "rx_gbps_l1", json_real(f->rx_gbps_l1));
	json_object_set_new(r, "rx_gbps_l2", json_real(f->rx_gbps_l2));
}

/* Measured frames received per size (FCS included), sizes as strings: {"64": n, ...}. */
static json_t *rx_sizes_json(const struct gen *g)
{
	json_t *o = json_object();
	char key[8];
	unsigned int i;

	for (i = 0; i <= TRAFFIC_MAX_FRAME; i++)
		if (g->rx_by_size[i] > 0) {
			snprintf(key, sizeof(key), "%u", i);
			json_object_set_new(o, key, json_integer((json_int_t)g->rx_by_size[i]));
		}
	return o;
}

static json_t *touch_json(const struct gen *g)
{
	char hex[24];

	snprintf(hex, sizeof(hex), "%016" PRIx64, g->touch_sum);
	return json_pack("{sI sI ss}", "frames", (json_int_t)g->touch_frames,
			 "bytes", (json_int_t)g->touch_bytes, "checksum", hex);
}

/* Ping: the round trip per frame, the burst it went in, what did not come back. */
static json_t *rtt_json(const struct hist *h)
{
	return json_pack("{sf sf sI sI sI sI sI}", "mean", hist_mean(h), "stdev", hist_stdev(h),
		"p50", (json_int_t)hist_percentile(h, 0.5),
		"p99", (json_int_t)hist_percentile(h, 0.99),
		"p999", (json_int_t)hist_percentile(h, 0.999),
		"max", (json_int_t)h->max, "count", (json_int_t)h->count);
}

/*
 * The ethdev counters of every --port over the whole run (warm-up, cool-down and the final
 * drain included), in --port order: what the ports themselves took and received, to set
 * beside a switch's and the VNFs' counters hop by hop (docs/bench.md, per-hop counts).
 */
static json_t *port_stats_json(const struct gen *g)
{
	struct rte_eth_stats st;
	json_t *a = json_array();
	unsigned int i;

	for (i = 0; i < g->o.n_ports; i++) {
		const struct vring_port *raw = gen_raw((struct gen *)(uintptr_t)g, g->ports[i]);

		if (raw != NULL) {       /* what the rings moved; drops are the backend's */
			json_array_append_new(a, json_pack("{si ss sI sI si si sb sI sb}", "port", i,
				"spec", g->o.specs[i], "rx", (json_int_t)raw->rx_packets,
				"tx", (json_int_t)raw->tx_packets, "rx_missed", 0, "tx_errors", 0,
				"backend_closed", raw->closed, "kicks", (json_int_t)raw->kicks,
				"hugepages", raw->hugepages));
			continue;
		}
		if (rte_eth_stats_get(g->ports[i], &st) != 0) {
			json_array_append_new(a, json_pack("{si ss sn}", "port", i, "spec",
							   g->o.specs[i], "rx"));
			continue;
		}
		json_array_append_new(a, json_pack("{si ss sI sI sI sI}", "port", i,
			"spec", g->o.specs[i], "rx", (json_int_t)st.ipackets,
			"tx", (json_int_t)st.opackets, "rx_missed", (json_int_t)st.imissed,
			"tx_errors", (json_int_t)st.oerrors));
	}
	return a;
}

static void set_role_fields(json_t *r, const struct gen *g)
{
	const struct opts *o = &g->o;

	json_object_set_new(r, "rx_sizes", rx_sizes_json(g));
	if (o->touch)
		json_object_set_new(r, "touch", touch_json(g));
	if (o->role == ROLE_PING)
		json_object_set_new(r, "rtt_ns", rtt_json(&g->latency));
	if (o->role == ROLE_REFLECT || o->n_reflect > 0)
		json_object_set_new(r, "reflect", json_pack("{sI sI}", "sent",
			(json_int_t)g->reflected, "refused", (json_int_t)g->reflect_dropped));
	if (g->vnfs.n > 0)
		json_object_set_new(r, "vnfs", vnf_json(&g->vnfs, o->vnf_in, o->vnf_out));
	json_object_set_new(r, "port_stats", port_stats_json(g));
	if (g->alternating) {
		json_object_set_new(r, "windows", alt_windows_json(&g->alt));
		json_object_set_new(r, "alternation", alt_summary_json(&g->alt));
	}
}

/* ---- fan-out (--sink-port) ---- */

/* Frames of the sender's measured interval that sink K received (duplicates aside). */
static uint64_t fanout_got(const struct sink *k)
{
	return k->rx_measured - RTE_MIN(k->rx_measured, k->duplicated);
}

/* Copies sink K lacks: each sink should receive every frame sent in the interval once. */
static uint64_t fanout_sink_lost(const struct gen *g, const struct sink *k)
{
	uint64_t tx = g->senders[0].measured.accepted, got = fanout_got(k);

	if (!gen_stamped(&g->o)) {   /* --check none: the whole run (stream_lost) */
		tx = g->senders[0].all.accepted;
		got = k->rx_packets;
	}
	return tx > got ? tx - got : 0;
}

/* Copies lost over every sink port: N x frames sent less the copies that arrived. */
static uint64_t fanout_lost(const struct gen *g)
{
	uint64_t lost = 0;
	unsigned int i;

	for (i = 0; i < g->o.n_sink_specs; i++)
		lost += fanout_sink_lost(g, &g->fanout[i]);
	return lost;
}

static double fraction(uint64_t part, uint64_t whole)
{
	return whole > 0 ? (double)part / (double)whole : 0.0;
}

/*
 * In a fan-out lost_in_flight counts copies, so its share is of the copies the offered
 * frames should have made (N x offered); not_accepted stays a share of the frames offered,
 * and the two still add up to loss_fraction.
 */
static void fanout_figures(const struct gen *g, struct load_figures *f)
{
	uint64_t offered = sum_senders(g, offsetof(struct sender, measured.offered));

	f->lost_in_flight_fraction = fraction(f->lost_in_flight, g->o.n_sink_specs * offered);
	f->loss_fraction = f->not_accepted_fraction + f->lost_in_flight_fraction;
}

static json_t *fanout_sink_json(const struct gen *g, unsigned int i, double measured)
{
	const struct sink *k = &g->fanout[i];

	return json_pack("{ss sI sf sI sI sI sf}", "port", g->o.sink_specs[i],
		"rx_packets", (json_int_t)k->rx_measured, "rx_pps", (double)k->rx_measured / measured,
		"lost", (json_int_t)fanout_sink_lost(g, k),
		"duplicated", (json_int_t)k->duplicated, "reordered", (json_int_t)k->reordered,
		"delivered_fraction", fraction(fanout_got(k), g->senders[0].measured.accepted));
}

/*
 * The fan-out summary: N sinks, the frames sent and the copies they should have made, the
 * copies that arrived (rx, duplicates aside: delivered), their rates, and each sink's own.
 */
static json_t *fanout_json(const struct gen *g, double measured)
{
	uint64_t tx = g->senders[0].measured.accepted, rx = 0, got = 0;
	unsigned int n = g->o.n_sink_specs, i;
	json_t *per = json_array();

	for (i = 0; i < n; i++) {
		rx += g->fanout[i].rx_measured;
		got += fanout_got(&g->fanout[i]);
		json_array_append_new(per, fanout_sink_json(g, i, measured));
	}
	return json_pack("{si sI sI sI sI sf sf sf so}", "sinks", (int)n,
		"tx_packets", (json_int_t)tx, "expected_copies", (json_int_t)(n * tx),
		"rx_copies", (json_int_t)rx, "delivered", (json_int_t)got,
		"delivered_fraction", fraction(got, n * tx), "frames_pps", (double)tx / measured,
		"copies_pps", (double)rx / measured, "per_sink", per);
}

/* The per-second record's sink counts so far: "sink_rx_packets": [n0, n1, ...]. */
static void print_fanout_counts(const struct gen *g)
{
	unsigned int i;

	if (g->o.n_sink_specs == 0)
		return;
	printf(", \"sink_rx_packets\": [");
	for (i = 0; i < g->o.n_sink_specs; i++)
		printf("%s%" PRIu64, i ? ", " : "", g->fanout[i].rx_packets);
	printf("]");
}

static json_t *summary(const struct gen *g)
{
	const struct opts *o = &g->o;
	double measured = o->duration - o->warmup - o->cooldown, elapsed = g->end_s - g->start_s;
	uint64_t lost = 0, tx, rx, rx_bytes;
	json_t *streams = streams_json(g, &lost), *r;
	struct load_figures f;

	/* Stopped early (SIGINT): the measured interval is what actually ran of it. */
	if (elapsed < o->duration)
		measured = RTE_MAX(elapsed - o->warmup, 1e-9);
	load_summary(g, measured, lost, &f);
	if (o->n_sink_specs > 0)
		fanout_figures(g, &f);
	tx = sum_senders(g, offsetof(struct sender, measured.accepted));
	rx = sum_sinks(g, offsetof(struct sink, rx_measured));
	rx_bytes = sum_sinks(g, offsetof(struct sink, rx_bytes_measured));
	r = json_pack("{ss ss sI si ss sf sI sI sI sI sI sI sI sf sf sf sf sf}",
		"sluice_gen", SLUICE_VERSION, "dpdk", rte_version(), "tsc_hz", (json_int_t)g->hz,
		"lcore_cpu", loop_cpu(), "role", role_names[o->role],
		"duration_s", measured,
		"tx_packets", (json_int_t)tx, "rx_packets", (json_int_t)rx, "lost", (json_int_t)lost,
		"duplicated", (json_int_t)sum_sinks(g, offsetof(struct sink, duplicated)),
		"reordered", (json_int_t)sum_sinks(g, offsetof(struct sink, reordered)),
		"foreign", (json_int_t)g->foreign, "stray", (json_int_t)g->stray,
		"rx_bps", load_bps(rx, rx_bytes, measured, false),
		"rx_bps_l1", load_bps(rx, rx_bytes, measured, true),
		"mean_frame_bytes", traffic_mean_size(&o->traffic),
		"idle_fraction", idle_fraction(g), "elapsed_s", elapsed);
	set_load_fields(r, g, &f);
	if (o->announce) {
		json_object_set_new(r, "announced", json_integer((json_int_t)g->announced));
		json_object_set_new(r, "announce_echoes",
				    json_integer((json_int_t)g->announce_echoes));
	}
	json_object_set_new(r, "tx_frames", json_string(tx_frames_name(o->tx_frames)));
	json_object_set_new(r, "checked", json_pack("{sb sb}", "seq", o->check_seq,
						     "latency", o->check_latency));
	busy_fields(r, g);
	json_object_set_new(r, "passes", json_integer((json_int_t)g->passes));
	json_object_set_new(r, "passes_per_s", json_real(elapsed > 0 ? (double)g->passes /
							 elapsed : 0.0));
	json_object_set_new(r, "latency_ns", latency_json(&g->latency));
	json_object_set_new(r, "streams", streams);
	json_object_set_new(r, "options", options_json(o));
	set_role_fields(r, g);
	if (o->n_sink_specs > 0)
		json_object_set_new(r, "fanout", fanout_json(g, measured));
	if (g->n_raw > 0)
		json_object_set_new(r, "backend_closed", json_boolean(g->raw_failed));
	return r;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && strcmp(s + n - m, tail) == 0;
}

static void write_outputs(const struct gen *g)
{
	json_t *r = summary(g);
	FILE *f;

	/* With --json, stdout stays JSON lines: the summary is the last line. */
	json_dumpf(r, stdout, g->o.json ? JSON_COMPACT : JSON_INDENT(2));
	printf("\n");
	if (g->o.out != NULL && json_dump_file(r, g->o.out, JSON_INDENT(2)) != 0)
		fprintf(stderr, "sluice-gen: cannot write %s\n", g->o.out);
	json_decref(r);
	if (g->o.hist_out == NULL)
		return;
	f = fopen(g->o.hist_out, "w");
	if (f == NULL) {
		fprintf(stderr, "sluice-gen: cannot write %s: %s\n", g->o.hist_out, strerror(errno));
		return;
	}
	if (ends_with(g->o.hist_out, ".json"))
		hist_write_json(&g->latency, f);
	else
		hist_write_csv(&g->latency, f);
	fclose(f);
}

/* ---- start-up ---- */

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

/* A default EAL option (with its argument, if any) and the user options that replace it. */
struct eal_default {
	const char *opt, *arg;
	const char *replaced_by[6];
};

/* Does the user's EAL argument U set option NAME ("--x", "--x=v", or "-lV" for "-l")? */
static bool eal_arg_sets(const char *u, const char *name)
{
	size_t n = strlen(name);

	if (strncmp(u, name, n) != 0)
		return false;
	return u[n] == '\0' || u[n] == '=' || (n == 2 && name[0] == '-' && name[1] != '-');
}

static bool eal_user_sets(char **user, int n_user, const struct eal_default *d)
{
	int i, j;

	for (i = 0; i < n_user; i++)
		for (j = 0; j < 6 && d->replaced_by[j] != NULL; j++)
			if (eal_arg_sets(user[i], d->replaced_by[j]))
				return true;
	return false;
}

static bool any_pci_port(const struct opts *o)
{
	unsigned int i;

	for (i = 0; i < o->n_ports; i++)
		if (strncmp(o->specs[i], "pci:", 4) == 0)
			return true;
	return false;
}

/*
 * EAL's arguments: our defaults, except those the user's (after --) replace, then the user's.
 * Defaults: a file prefix per process so instances never clash; --in-memory so nothing is
 * left in /dev/hugepages; --single-file-segments, without which virtio-user moves nothing
 * (PLATFORM.md); one lcore; errors only in the log; no telemetry socket or thread.
 */
static int init_eal(int argc, char **argv, int first, const struct opts *o)
{
	char prefix[64], lcores[32], *eal[96];
	const struct eal_default legacy_mem = { NULL, NULL, { "--legacy-mem" } };
	bool legacy = eal_user_sets(argv + first, argc - first, &legacy_mem);
	const struct eal_default defaults[] = {
		{ "--file-prefix", prefix, { "--file-prefix" } },
		{ "--in-memory", NULL, { "--in-memory", "--huge-unlink", "--legacy-mem",
					 "--no-huge" } },
		/* --legacy-mem cannot be --in-memory: unlink the files instead, leave none. */
		{ legacy ? "--huge-unlink" : NULL, NULL, { "--huge-unlink", "--no-huge" } },
		{ "--single-file-segments", NULL, { "--single-file-segments", "--legacy-mem",
						    "--huge-unlink" } },
		{ any_pci_port(o) ? NULL : "--no-pci", NULL,
		  { "--no-pci", "-a", "--allow", "-b", "--block" } },
		/* Software ports need no physical addresses; as PA (this machine's default) a
		 * virtqueue of 16384 failed to start, its zones no longer physically contiguous. */
		{ any_pci_port(o) ? NULL : "--iova-mode=va", NULL, { "--iova-mode" } },
		{ "--lcores", lcores, { "-l", "--lcores", "-c" } },
		{ o->verbose ? "--log-level=*:notice" : "--log-level=*:error", NULL, { NULL } },
		{ "--no-telemetry", NULL, { "--telemetry", "--no-telemetry" } },
	};
	int n = 0, i, n_user = argc - first;
	unsigned int k;

	if (n_user > 80) {
		fprintf(stderr, "sluice-gen: too many EAL options\n");
		return -1;
	}
	snprintf(prefix, sizeof(prefix), "sluice-gen-%d", (int)getpid());
	snprintf(lcores, sizeof(lcores), "0@%d", o->cpu >= 0 ? o->cpu : first_cpu());
	eal[n++] = argv[0];
	for (k = 0; k < RTE_DIM(defaults); k++) {
		if (defaults[k].opt == NULL || eal_user_sets(argv + first, n_user, &defaults[k]))
			continue;
		eal[n++] = (char *)(uintptr_t)defaults[k].opt;
		if (defaults[k].arg != NULL)
			eal[n++] = (char *)(uintptr_t)defaults[k].arg;
	}
	for (i = first; i < argc; i++)
		eal[n++] = argv[i];
	eal[n] = NULL;
	return rte_eal_init(n, eal) < 0 ? -1 : 0;
}

/*
 * Mbufs enough for every port's receive and transmit ring to be full at once (virtio-user
 * frees sent mbufs lazily), a VNF buffer per port, and the generator's bursts in flight.
 */
static unsigned int pool_size(const struct opts *o)
{
	unsigned int ports = o->n_ports + o->n_reflect + o->n_vnf_in + o->n_vnf_out +
			     o->n_sink_specs;

	return RTE_MAX(16383u, ports * (2u * o->ring + 2 * GEN_BURST + o->burst) + 4096);
}

/*
 * A buffer's data room: DPDK's default (2 KB) up to 1518 B frames, so standard runs are as
 * they were; for jumbo frames one buffer holds the largest frame (with room for virtio's
 * header and a VLAN tag, rounded up to 1 KB), so frames are built in one segment and the
 * sending path stays the same: no chains, no per-frame branch.
 */
static uint16_t pool_buf_size(const struct opts *o)
{
	unsigned int len = traffic_max_size(&o->traffic) - RTE_ETHER_CRC_LEN;

	if (len + RTE_PKTMBUF_HEADROOM <= RTE_MBUF_DEFAULT_BUF_SIZE)
		return RTE_MBUF_DEFAULT_BUF_SIZE;
	return (uint16_t)(RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(len + 64, 1024));
}

static bool ring_spec_in(const char *const *specs, unsigned int n)
{
	char err[PORTSPEC_ERR_LEN];
	struct portspec ps;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (portspec_parse(specs[i], "kind", 1, &ps, err, sizeof(err)) == 0 &&
		    ps.kind == PORTSPEC_RING)
			return true;
	return false;
}

/* A ring port passes the sent buffer itself, which a reflector or VNF of ours may write. */
static bool any_ring_port(const struct opts *o)
{
	return ring_spec_in(o->specs, o->n_ports) || ring_spec_in(o->reflect_specs, o->n_reflect) ||
	       ring_spec_in(o->vnf_in, o->n_vnf_in) || ring_spec_in(o->vnf_out, o->n_vnf_out) ||
	       ring_spec_in(o->sink_specs, o->n_sink_specs);
}

/* Every port in rank order (port_rank), each class in the order given. */
static int open_ports(struct gen *g)
{
	const struct opts *o = &g->o;
	struct port_plan plan[GEN_MAX_PLANS];
	unsigned int n = 0, i;
	int rank;

	for (i = 0; i < o->n_reflect; i++)
		plan[n++] = (struct port_plan){ o->reflect_specs[i], "reflect", &g->reflect_ports[i],
						port_rank(o->reflect_specs[i]) };
	for (i = 0; i < o->n_ports; i++)
		if (!vring_is_spec(o->specs[i]))      /* open_raw_ports() opens those */
			plan[n++] = (struct port_plan){ o->specs[i], "port", &g->ports[i],
							port_rank(o->specs[i]) };
	for (i = 0; i < o->n_vnf_in; i++) {
		plan[n++] = (struct port_plan){ o->vnf_in[i], "vnf-in", &g->vnf_ports[i][VNF_IN],
						port_rank(o->vnf_in[i]) };
		plan[n++] = (struct port_plan){ o->vnf_out[i], "vnf-out",
						&g->vnf_ports[i][VNF_OUT], port_rank(o->vnf_out[i]) };
	}
	for (i = 0; i < o->n_sink_specs; i++)
		plan[n++] = (struct port_plan){ o->sink_specs[i], "sink-port", &g->fanout_ports[i],
						port_rank(o->sink_specs[i]) };
	for (rank = 0; rank <= 2; rank++)
		for (i = 0; i < n; i++)
			if (plan[i].rank == rank && open_port(g, &plan[i], i) != 0)
				return -1;
	return 0;
}

/*
 * The virtio-raw --ports, before any port opens: each gets port id GEN_RAW_PORT + k and a
 * locally administered MAC of ours, 02:72:61:77:00:k ("raw") (its transmit buffers get
 * their stream's frame in tx_setup()), and a server (server=1) creates its socket and
 * listens now, with the other listening servers (port_rank()'s rank 0), so a client of
 * ours or a switch's may connect before open_raw_ports() accepts.
 */
static int prepare_raw_ports(struct gen *g)
{
	const struct opts *o = &g->o;
	char err[PORTSPEC_ERR_LEN];
	struct vring_port *p;
	unsigned int i;

	for (i = 0; i < o->n_ports; i++) {
		if (!vring_is_spec(o->specs[i]))
			continue;
		p = &g->raw[g->n_raw];
		p->spec = o->specs[i];
		if (vring_parse(p->spec, &p->cfg, err, sizeof(err)) != 0)
			return -1;           /* checked already, with a message */
		if (p->cfg.mac_given)
			memcpy(p->mac, p->cfg.mac, 6);
		else
			memcpy(p->mac, (const uint8_t[6]){ 0x02, 0x72, 0x61, 0x77, 0,
							   (uint8_t)g->n_raw }, 6);
		g->ports[i] = (uint16_t)(GEN_RAW_PORT + g->n_raw++);
		if (p->cfg.server && vring_listen(p, "port") != 0)
			return -1;
	}
	return 0;
}

/*
 * The virtio-raw --ports' handshakes, after the ethdev ports: first the clients (a
 * vhost-user server of ours is listening by then), then the servers, which wait for their
 * backend to connect as virtio-user servers (rank 2) do: last, so whatever connects to
 * them, a switch's vhost-user client port or one of ours (which retries each second), has
 * been started.
 */
static int open_raw_ports(struct gen *g)
{
	uint8_t blank[VRING_MAX_FRAME] = { 0 };
	const struct opts *o = &g->o;
	unsigned int k;
	int server;

	for (server = 0; server <= 1; server++)
		for (k = 0; k < g->n_raw; k++)
			if (g->raw[k].cfg.server == (server == 1) &&
			    vring_open(&g->raw[k], "port", o->ring_given ? o->ring :
				       VRING_DEFAULT_SIZE, blank,
				       (uint16_t)(g->fixed_size - RTE_ETHER_CRC_LEN)) != 0)
				return -1;
	return 0;
}

/* Ports, streams and the header template; 0, or -1 after a message. */
static int setup(struct gen *g)
{
	unsigned int i;

	/* DPDK's estimate until measured_tsc_hz() has a span to measure over. */
	g->hz = rte_get_tsc_hz();
	g->ns_per_tsc = 1e9 / (double)g->hz;
	hist_init(&g->latency);
	g->pool = rte_pktmbuf_pool_create("gen_pool", pool_size(&g->o), 256, 0,
					  pool_buf_size(&g->o), (int)rte_socket_id());
	if (g->pool == NULL) {
		fprintf(stderr, "sluice-gen: no mbuf pool: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	g->rx_cache = rte_mempool_default_cache(g->pool, rte_lcore_id());
	g->fixed_size = traffic_size(&g->o.traffic, 0);
	if (prepare_raw_ports(g) != 0 || open_ports(g) != 0 || open_raw_ports(g) != 0)
		return -1;
	for (i = 0; i < g->o.n_vnf_in; i++)
		if (vnf_setup(&g->vnfs, i, g->vnf_ports[i][VNF_IN], g->vnf_ports[i][VNF_OUT],
			      i < g->o.n_vnf_dst ? &g->o.vnf_dst[i] : NULL,
			      i < g->o.n_vnf_kind ? g->o.vnf_kind[i] : VNF_L2) != 0)
			return -1;
	plan_streams(g);
	g->fixed_headers = g->o.traffic.flows == 1 && g->o.traffic.hi == 0 &&
			   g->o.traffic.n_sizes == 1;
	g->flow_template = g->o.traffic.flows > 1 && g->o.traffic.hi == 0 &&
			   g->o.traffic.n_sizes == 1;
	traffic_write_headers(&g->o.traffic, g->headers,
			      (uint16_t)(g->fixed_size - RTE_ETHER_CRC_LEN), 0);
	return tx_setup(g, !any_ring_port(&g->o), pool_buf_size(&g->o));
}

/*
 * Closes every port, so memif and vhost-user sockets are removed. No rte_eal_cleanup(): in
 * DPDK 22.11 it fcloses the log stream while memif's interrupt thread may still be logging
 * its disconnect, and the two deadlock on stdio's locks (seen here: a run hung for minutes).
 * With the default --in-memory (or --huge-unlink) nothing outlives the process, so exit()
 * frees all the EAL would.
 */
static void teardown(void)
{
	uint16_t i;

	RTE_ETH_FOREACH_DEV(i) {
		rte_eth_dev_stop(i);
		rte_eth_dev_close(i);
	}
}

static void close_port(uint16_t port)
{
	if (port >= GEN_RAW_PORT)    /* no ethdev: its socket closes at exit */
		return;
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
}

/* The ports of alternation pair P: ports 2P and 2P+1 and half of the VNFs (A's come first). */
static void close_pair_ports(struct gen *g, unsigned int p)
{
	unsigned int half = g->o.n_vnf_in / 2, first = p * half, end = p ? g->o.n_vnf_in : half;
	unsigned int i;

	close_port(g->ports[2 * p]);
	close_port(g->ports[2 * p + 1]);
	for (i = first; i < end; i++) {
		close_port(g->vnf_ports[i][VNF_IN]);
		close_port(g->vnf_ports[i][VNF_OUT]);
	}
}

/*
 * With --alternate, each switch sees its ports close while it runs alone. DPDK 22.11's memif
 * server unmaps the shared rings in its interrupt thread as soon as it reads the disconnect,
 * without waiting for a forwarding thread that is inside an rx or tx burst. A forwarding
 * thread that was stopped there, or preempted there by the other switch's forwarding thread
 * on their shared CPU, then touches unmapped memory when it resumes (seen here: sluiced
 * died of SIGSEGV and testpmd panicked in its interrupt thread, a few trials into a run).
 * So: stop the other switch, let this one run (20 ms: its forwarding thread is back in its
 * loop), close its ports, and give its interrupt thread 50 ms to handle the disconnect.
 */
static void teardown_alternating(struct gen *g)
{
	unsigned int p;

	for (p = 0; p < 2; p++) {
		kill(g->alt.pids[1 - p], SIGSTOP);
		kill(g->alt.pids[p], SIGCONT);
		rte_delay_ms(20);
		close_pair_ports(g, p);
		rte_delay_ms(50);
	}
	alt_resume_all();
}

#define ANNOUNCE_FRAMES 3
#define ANNOUNCE_ETHERTYPE 0x88b5    /* IEEE 802 local experimental */

/* Sends ANNOUNCE_FRAMES frames from PORT's MAC to PORT's MAC; the number sent. */
static unsigned int announce_port(struct gen *g, uint16_t port)
{
	struct rte_mbuf *m[ANNOUNCE_FRAMES];
	struct rte_ether_addr own;
	unsigned int i, sent;

	if (rte_eth_macaddr_get(port, &own) != 0 ||
	    rte_pktmbuf_alloc_bulk(g->pool, m, ANNOUNCE_FRAMES) != 0)
		return 0;
	for (i = 0; i < ANNOUNCE_FRAMES; i++) {
		struct rte_ether_hdr *eh = (struct rte_ether_hdr *)rte_pktmbuf_append(m[i], 60);

		memset(eh, 0, 60);
		eh->dst_addr = own;
		eh->src_addr = own;
		eh->ether_type = rte_cpu_to_be_16(ANNOUNCE_ETHERTYPE);
	}
	sent = rte_eth_tx_burst(port, 0, m, ANNOUNCE_FRAMES);
	if (sent < ANNOUNCE_FRAMES)
		rte_pktmbuf_free_bulk(&m[sent], ANNOUNCE_FRAMES - sent);
	return sent;
}

/* Frees what arrives on every port for 100 ms (announcements a switch forwarded). */
static uint64_t discard_arrivals(struct gen *g)
{
	struct rte_mbuf *m[GEN_BURST];
	double until = now_s() + 0.1;
	uint64_t n = 0;
	uint16_t port, got;
	unsigned int i;

	while (now_s() < until) {
		RTE_ETH_FOREACH_DEV(port) {
			got = rx_burst_all(g, port, m, GEN_BURST);
			rte_pktmbuf_free_bulk(m, got);
			n += got;
		}
		for (i = 0; i < g->n_raw; i++) {
			got = vring_rx_ready(&g->raw[i], GEN_BURST);
			vring_rx_done(&g->raw[i], got);
			g->raw[i].rx_packets -= got;    /* not the run's frames */
			n += got;
		}
	}
	return n;
}

/*
 * --announce: a learning switch floods a frame whose destination it has not seen as a source
 * (every frame of a run whose receiving port never sends). Each port of ours sends a few
 * frames with its own MAC as source and destination: the switch learns the port, and drops
 * them, since their output is their input; a switch without learning forwards them to the
 * peer port, and what comes back within 100 ms is counted apart (announce_echoes).
 */
static void announce(struct gen *g)
{
	uint8_t frame[60] = { 0 };
	struct vring_port *p;
	unsigned int i;
	uint16_t port;

	RTE_ETH_FOREACH_DEV(port)
		g->announced += announce_port(g, port);
	for (i = 0; i < g->n_raw; i++) {     /* the same frames from a virtio-raw port */
		p = &g->raw[i];
		memcpy(frame, p->mac, 6);
		memcpy(frame + 6, p->mac, 6);
		frame[12] = ANNOUNCE_ETHERTYPE >> 8;
		frame[13] = ANNOUNCE_ETHERTYPE & 0xff;
		g->announced += vring_send_aside(p, frame, sizeof(frame), ANNOUNCE_FRAMES);
	}
	g->announce_echoes = discard_arrivals(g);
}

/*
 * After a failed set-up: removes the socket files our server ports made, and closes no port.
 * Closing them raced with DPDK's interrupt thread: a memif server of ours whose client (ours
 * or a switch's) was still in its handshake had its regions freed by rte_eth_dev_close()
 * while that thread was writing its rings (a core dump showed the SIGSEGV there, about one
 * run in three with a connecting pair open when a later client failed). _exit() follows, so
 * the kernel closes every descriptor, peers see the disconnect, and with --in-memory no
 * hugepage file outlives the process; only the socket files need removing.
 */
static void remove_server_sockets(struct gen *g)
{
	unsigned int i;

	for (i = 0; i < g->n_server_paths; i++)
		if (unlink(g->server_paths[i]) != 0 && errno != ENOENT)
			fprintf(stderr, "sluice-gen: cannot remove %s: %s\n", g->server_paths[i],
				strerror(errno));
	for (i = 0; i < g->n_raw; i++)   /* virtio-raw servers still waiting for a backend */
		vring_unlisten(&g->raw[i]);
}

/* Kinds whose link is up only when the peer (a switch, or a port of ours) is connected. */
static bool has_peer(uint16_t port)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == NULL)
		return false;
	return strcmp(info.driver_name, "net_memif") == 0 ||
	       strcmp(info.driver_name, "net_virtio_user") == 0 ||
	       strcmp(info.driver_name, "net_vhost") == 0;
}

static bool links_up(void)
{
	struct rte_eth_link link;
	uint16_t i;

	RTE_ETH_FOREACH_DEV(i)
		if (has_peer(i) && (rte_eth_link_get_nowait(i, &link) != 0 ||
				    link.link_status != RTE_ETH_LINK_UP))
			return false;
	return true;
}

/*
 * The clock starts when every memif, virtio-user and vhost-user link is up (at most 5 s:
 * a switch's vhost-user client reconnects about once a second, one port at a time) and at
 * least 500 ms after the ports started, so the switch on the other end is ready as well.
 */
static void wait_for_links(void)
{
	double start = now_s();

	while (!quit && now_s() - start < 5 && !links_up())
		rte_delay_ms(10);
	if (!links_up())
		fprintf(stderr, "sluice-gen: warning: not every link is up after 5 s\n");
	if (now_s() - start < 0.5)
		rte_delay_ms((unsigned int)((0.5 - (now_s() - start)) * 1000));
}

/*
 * Ends the process without exit(): its stdio clean-up flushes DPDK's log stream (which
 * writes to syslog) while memif's interrupt thread may be logging a late disconnect error
 * ("EAL: Error: Invalid memory"); glibc's syslog and stream-list locks, taken in opposite
 * orders by the two threads, then deadlock and the process hangs for ever (seen here, with
 * both ends of a memif link in one process). So: our own streams flushed, the --alternate
 * guard released (its atexit handler), then _exit().
 */
static _Noreturn void finish(const struct gen *g, int rc)
{
	fflush(stdout);
	fflush(stderr);
	if (g->alternating)
		alt_release();
	_exit(rc);
}

static void catch_signals(void)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGQUIT, on_signal);
	/* A reader of our output that goes away must not kill us with switches stopped. */
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	static struct gen g = { .o = { .role = ROLE_TXRX, .size_arg = "64", .burst = GEN_BURST,
		.ring = GEN_RING, .vary_arg = "ip,port", .traffic = { .flows = 1 }, .duration = 10,
		.cpu = -1, .window = 1.0, .settle = 0.3, .check_seq = true, .check_latency = true,
		.check_arg = "all", .rx_burst = GEN_BURST, .tx_frames = TX_FRAMES_AUTO } };
	struct tsc_mark eal_ready;
	int first;

	first = parse_options(argc, argv, &g.o);
	if (first < 0)
		return 2;
	catch_signals();
	g.alternating = g.o.alternate[0] != 0;
	if (g.alternating) {
		g.alt = (struct alt){ .pids = { g.o.alternate[0], g.o.alternate[1] },
			.window_s = g.o.window, .settle_s = g.o.settle, .json = g.o.json };
		if (alt_guard(&g.alt) != 0) {
			fprintf(stderr, "sluice-gen: --alternate: no watchdog: %s\n", strerror(errno));
			return 1;
		}
	}
	if (init_eal(argc, argv, first, &g.o) != 0) {
		fprintf(stderr, "sluice-gen: DPDK initialisation failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	eal_ready = tsc_mark_now();
	if (setup(&g) != 0) {
		remove_server_sockets(&g);
		finish(&g, 1);
	}
	wait_for_links();
	g.hz = measured_tsc_hz(eal_ready);
	g.ns_per_tsc = 1e9 / (double)g.hz;
	if (g.o.announce)
		announce(&g);
	run_loop(&g);
	drain(&g);
	write_outputs(&g);
	if (g.alternating)
		teardown_alternating(&g);
	teardown();
	finish(&g, g.raw_failed ? 1 : 0);
}
