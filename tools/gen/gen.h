/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sluice-gen's shared state: the options, the sending streams (tx.c), what the sinks count
 * (sink.c), the reflectors (reflect.c) and the loop that serves them all (gen.c). Every role
 * runs in one poll loop on one lcore (docs/gen.md), so nothing here is shared between
 * threads.
 */
#ifndef SLUICE_GEN_GEN_H
#define SLUICE_GEN_GEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <rte_mbuf.h>

#include "alt.h"
#include "hist.h"
#include "load.h"
#include "portspec.h"
#include "traffic.h"
#include "vnf.h"
#include "vring.h"

#define GEN_MAX_PORTS 8
#define GEN_MAX_SINK_PORTS 16      /* --sink-port: fan-out destinations */
#define GEN_MAX_STREAMS 8
#define NO_PORT UINT16_MAX          /* add_sender(): no receiving port of ours */
/* reflect, port, vnf-in/out, sink-port */
#define GEN_MAX_PLANS (2 * GEN_MAX_PORTS + 2 * VNF_MAX + GEN_MAX_SINK_PORTS)
#define GEN_MAX_SINKS 256           /* stream ids a sink can tell apart */
#define GEN_BURST 32                /* receive bursts; and --burst's default */
#define GEN_MAX_BURST 512           /* --burst */
#define GEN_RING 1024
#define SEEN_BITS 4096              /* how far back duplicates are recognised */
#define L1_OVERHEAD LOAD_L1_OVERHEAD
/*
 * A virtio-raw port (vring.h) has no ethdev: it is known by GEN_RAW_PORT + its index in
 * gen.raw[], a number above any ethdev port id, wherever the loop keeps port ids.
 */
#define GEN_RAW_PORT 0xf000

enum role { ROLE_TXRX, ROLE_TX, ROLE_RX, ROLE_REFLECT, ROLE_PING };

/*
 * --tx-frames: where a sending stream's frames come from (docs/gen.md, SPEED).
 * COPY: buffers of the shared pool, every frame's headers and payload written afresh.
 * PREBUILT: a pool of the stream's own whose buffers already hold its frame, so only what
 * varies per frame is written (the stamp, a flow's fields, a size's lengths), nothing at
 * all for constant frames.
 * REFCNT: one built frame per stream, sent again and again with its reference count
 * raised once a burst (constant frames only: --check none, one size, one flow).
 */
enum tx_frames { TX_FRAMES_AUTO, TX_FRAMES_COPY, TX_FRAMES_PREBUILT, TX_FRAMES_REFCNT };

struct opts {
	const char *specs[GEN_MAX_PORTS];
	unsigned int n_ports;
	const char *reflect_specs[GEN_MAX_PORTS];   /* --reflect: extra ports that reflect */
	unsigned int n_reflect;
	const char *sink_specs[GEN_MAX_SINK_PORTS]; /* --sink-port: receive-only ports */
	unsigned int n_sink_specs;
	const char *vnf_in[VNF_MAX], *vnf_out[VNF_MAX];  /* --vnf-in, --vnf-out: paired in order */
	unsigned int n_vnf_in, n_vnf_out, n_vnf_dst;
	const char *vnf_dst_arg[VNF_MAX];           /* --vnf-dst-mac, one per pair in order */
	struct vnf_dst vnf_dst[VNF_MAX];
	const char *vnf_kind_arg[VNF_MAX];          /* --vnf-kind, one per pair in order */
	enum vnf_kind vnf_kind[VNF_MAX];
	unsigned int n_vnf_kind;
	const char *dst_mac_arg[GEN_MAX_STREAMS];  /* --dst-mac, one per sending stream */
	uint8_t dst_mac[GEN_MAX_STREAMS][6];
	unsigned int n_dst_mac;
	enum role role;
	const char *size_arg, *rate_arg, *vary_arg, *load_arg;
	struct traffic traffic;
	double rate_pps;             /* per sending stream; 0: as fast as the port takes */
	enum load_mode load;         /* --load; default closed with --rate max, else open */
	uint16_t burst;              /* --burst: frames per transmit burst */
	uint16_t ring;               /* --ring: descriptors per queue */
	bool ring_given;             /* --ring given: virtio-user and memif rings sized too */
	bool touch;                  /* --touch: the receiver reads every byte */
	/* --check: what the sink verifies per frame; frames are stamped when either is on. */
	bool check_seq, check_latency;
	const char *check_arg, *tx_frames_arg;
	enum tx_frames tx_frames;    /* --tx-frames (AUTO until setup decides) */
	uint16_t rx_burst;           /* --rx-burst: frames per receive burst */
	const char *virtio_args;     /* --virtio-args: added to our virtio-user ports, or NULL */
	bool announce;               /* --announce: ports make their MACs known first */
	double duration, warmup, cooldown;
	bool bidir, json;
	int cpu;
	bool verbose;
	const char *out, *hist_out;
	pid_t alternate[2];
	double window, settle;
};

struct sender {                  /* one generated stream: a port to send on */
	uint8_t id;
	uint16_t tx;
	uint64_t next_seq, next_tsc;
	struct load_tally all, measured;   /* the whole run; the measured interval */
	/* The burst being sent: pending[head..n) not yet taken (closed loop retries them). */
	struct rte_mbuf *pending[GEN_MAX_BURST];
	uint16_t pending_size[GEN_MAX_BURST];  /* frame bytes with FCS */
	uint16_t head, n;
	bool set_addrs;              /* --dst-mac: these addresses (dst, then the port's MAC) */
	uint8_t addrs[VNF_ETH_ADDRS];
	/* TX_FRAMES_PREBUILT: the stream's own pool of built frames, and our lcore's cache of
	 * it (held here: DPDK's per-lcore lookup costs a TLS call in a shared library). */
	struct rte_mempool *pool;
	struct rte_mempool_cache *cache;
	struct rte_mbuf *shared;     /* TX_FRAMES_REFCNT: the one frame, one reference ours */
	struct vring_port *raw;      /* a virtio-raw port: sent on its rings, no mbufs */
};

struct sink {                    /* what arrived of one stream id */
	uint64_t expect;             /* next sequence number expected */
	uint64_t rx_packets, rx_measured, rx_bytes_measured;
	uint64_t gap_lost, duplicated, reordered;
	uint64_t seen[SEEN_BITS / 64];
	bool active;
};

/* Whether frames carry a per-frame stamp (stream, sequence number, measured flag, TSC). */
static inline bool gen_stamped(const struct opts *o)
{
	return o->check_seq || o->check_latency;
}

struct gen {
	struct opts o;
	uint16_t ports[GEN_MAX_PORTS];
	struct sender senders[GEN_MAX_STREAMS];
	unsigned int n_senders;
	uint16_t sink_ports[GEN_MAX_PORTS];
	uint8_t sink_stream[GEN_MAX_PORTS];   /* --check none: the stream a sink port counts */
	struct vring_port *sink_raw[GEN_MAX_PORTS];   /* a virtio-raw sink port, else NULL */
	unsigned int n_sink_ports;
	uint16_t reflect_ports[GEN_MAX_PORTS];
	uint16_t fanout_ports[GEN_MAX_SINK_PORTS];  /* --sink-port, in order */
	struct sink fanout[GEN_MAX_SINK_PORTS];     /* what each --sink-port received */
	uint16_t vnf_ports[VNF_MAX][2];
	struct vnf_set vnfs;
	struct sink sinks[GEN_MAX_SINKS];
	struct hist latency;
	uint64_t reflected, reflect_dropped, foreign;
	uint64_t touch_sum, touch_bytes, touch_frames;   /* --touch */
	uint64_t stray;              /* frames that came back on a sending port (txrx) */
	uint64_t announced, announce_echoes;  /* --announce: sent, and what came back */
	uint64_t passes, idle_passes;
	uint64_t passes_measured, idle_measured;   /* inside the measured interval */
	uint64_t cycles_measured, busy_measured;   /* TSC cycles of it, of passes with work */
	uint64_t hz, t_measure_start, t_measure_end, t_stop;   /* TSC */
	double start_s, end_s;
	bool alternating;
	struct alt alt;
	struct rte_mempool *pool;
	/* Our lcore's cache of POOL, looked up once (DPDK's lookup is a TLS call from a shared
	 * library); NULL when the pool has none. */
	struct rte_mempool_cache *rx_cache;
	double ns_per_tsc;
	bool fixed_headers;          /* one size, one flow: copy the template below */
	bool flow_template;          /* one size, many flows: copy it, then set the flow's fields */
	uint16_t fixed_size;
	uint8_t headers[TRAFFIC_HDR_LEN];
	char server_paths[GEN_MAX_PLANS][PORTSPEC_MAX_LEN];   /* sockets our servers made */
	unsigned int n_server_paths;
	struct vring_port raw[GEN_MAX_PORTS];   /* virtio-raw ports, in --port order */
	unsigned int n_raw;
	bool raw_failed;             /* a virtio-raw backend went away during the run */
	double next_raw_check;       /* CLOCK_MONOTONIC s: when to look at their sockets */
	/* Measured frames per size, FCS included: last, as with 9018 B frames it is 72 KB
	 * that should not sit between the fields every pass reads. */
	uint64_t rx_by_size[TRAFFIC_MAX_FRAME + 1];
	/* Receive queues of each ethdev beyond the first (memif's rx_queues=); 0 for most. */
	uint8_t extra_rxqs[RTE_MAX_ETHPORTS];
};

/*
 * Up to MAX frames from PORT's receive queues: queue 0, then (a memif client with
 * rx_queues=) the others while room is left. A memif server sends on the ring of its
 * transmit queue, and OVS-DPDK's PMD sends on queue 1 (queue 0 is its main thread's).
 */
static inline uint16_t rx_burst_all(const struct gen *g, uint16_t port, struct rte_mbuf **m,
				    uint16_t max)
{
	uint16_t n = rte_eth_rx_burst(port, 0, m, max), q;

	for (q = 1; q <= g->extra_rxqs[port] && n < max; q++)
		n += rte_eth_rx_burst(port, q, m + n, max - n);
	return n;
}

/* The virtio-raw port behind port id PORT, or NULL for an ethdev. */
static inline struct vring_port *gen_raw(struct gen *g, uint16_t port)
{
	return port >= GEN_RAW_PORT ? &g->raw[port - GEN_RAW_PORT] : NULL;
}

static inline bool in_measurement(const struct gen *g, uint64_t tsc)
{
	return tsc >= g->t_measure_start && tsc < g->t_measure_end;
}

/* tx.c: the sending streams. */
/*
 * Decides --tx-frames (auto: prebuilt where it may be, else copy) and builds each stream's
 * frames in buffers of BUF_SIZE; COPYING_PORTS: no port of ours hands a sent buffer itself
 * to our own receivers. 0, or -1 after a message.
 */
int tx_setup(struct gen *g, bool copying_ports, uint16_t buf_size);
int tx_parse_frames(const char *s, enum tx_frames *f);
const char *tx_frames_name(enum tx_frames f);
uint16_t tx_send_burst(struct gen *g, struct sender *s, uint64_t tsc);
void tx_drop_pending(struct sender *s);

/* sink.c: what arrives. */
void sink_touch_frames(struct gen *g, struct rte_mbuf **m, uint16_t n);
/* Receives on the INDEX-th sink port (g->sink_ports). */
/* PASS_TSC: the clock at the start of this loop pass. */
uint16_t sink_burst(struct gen *g, unsigned int index, uint64_t pass_tsc);
/*
 * Stamped frames on virtio-raw sink ports: early in a pass, what is ready and its lines
 * asked for (vring_rx_peek), for the pass's sink_burst() calls to take.
 */
void sink_peek_raw(struct gen *g);
uint16_t sink_fanout_burst(struct gen *g, unsigned int sink, uint64_t pass_tsc);
void sink_drain_senders(struct gen *g);

/* reflect.c: the reflect role and --reflect ports. */
uint16_t reflect_burst(struct gen *g, uint16_t port);

#endif
