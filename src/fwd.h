/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The forwarding-function interface. A switch has one forwarding function (patch, learn,
 * flow); the worker hands it a whole burst received on one port and gets back, per packet,
 * one output port, a flood set, or a drop reason. The worker then groups the packets by
 * output and sends each group with one transmit call (worker.c), so a forwarding function
 * never transmits, frees or counts anything itself.
 *
 * Ports are named by their index in the switch (0 .. SW_MAX_PORTS-1), which lets flood sets be
 * one 64-bit word and decisions be 16 bits.
 *
 * Threads: process() runs on workers, concurrently on several workers for different input
 * ports, and must not lock or allocate. Everything else runs on the control thread. State the
 * control side changes while workers run must be safe to read concurrently (atomics, or a
 * copy published by pointer and reclaimed after an RCU grace period).
 */
#ifndef SLUICE_FWD_H
#define SLUICE_FWD_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <rte_mbuf.h>

#include "stats.h"

#define SW_MAX_PORTS 64         /* ports per switch: a flood set is one uint64_t */
#define FWD_MAX_BURST 256       /* largest burst a worker hands over */

#define FWD_OUT_DROP 0xffff     /* drop; the reason is in drop[i] */
#define FWD_OUT_FLOOD 0xfffe    /* send to every port in flood[i] (learn mode) */

#define FWD_OUT_MIXED 0xfffd    /* uniform: the packets go to different places */
/* The function kept the packet (queued it for the control side: flow mode's `controller`
 * action); it counts as forwarded and the worker no longer touches it. */
#define FWD_OUT_CONSUMED 0xfffc

/* The bytes of a frame's start that fwd_ops.fast_unicast() reads: addresses, an 802.1Q
 * tag and the EtherType after it. */
#define FWD_HDR_BYTES 18

/* What one call that copies a burst straight from port to port did (vhost_fast.h's
 * vhf_forward, memif_fast.h's mff_forward), for the worker's counters. */
struct fwd_direct_result {
	uint16_t rx;                  /* frames taken from the sender */
	uint16_t sent;                /* frames copied into the receiver */
	uint16_t full;                /* no room in the receiver: tx_full */
	uint16_t too_long;            /* longer than MAX_FRAME: mtu_exceeded */
	uint16_t malformed;           /* bad chains or descriptors from the sender, never
				       * received: the port's rx_missed counts them */
	uint64_t rx_bytes, sent_bytes;
};

/*
 * A burst taken from a fast port's receive ring (vhost_fast.h's vhf_take, memif_fast.h's
 * mff_take) as frames left in the sender's memory, each a list of (pointer, length) pieces,
 * for another fast port to copy into its own ring (vhf_put, mff_put) before the sender gets
 * its buffers back (vhf_release, mff_release): one copy between any two fast port kinds.
 */
#define FWD_FRAME_SEGS 64       /* pieces one frame may have (64 KB in 1 KB buffers) */
#define FWD_BURST_SEGS 512      /* pieces of a whole burst: a frame that does not fit in
				 * what is left ends the burst (the rest waits in the ring) */

struct fwd_seg {
	uint8_t *p;
	uint32_t len;
};

struct fwd_frame {
	uint16_t head;                /* the sender's own reference (vhost: the chain's head) */
	uint16_t seg, n_segs;         /* its pieces: segs[seg .. seg+n_segs-1] */
	int32_t len;                  /* -1: malformed, never received (rx_missed) */
};

struct fwd_frames {
	uint16_t n;                   /* frames, malformed ones included */
	uint16_t end;                 /* memif: the ring position after the burst */
	const void *src;              /* the sender's connection the burst was read from */
	struct fwd_frame f[FWD_MAX_BURST];
	struct fwd_seg segs[FWD_BURST_SEGS];
};

struct port;

/*
 * What a forwarding function decides for one burst. When every packet goes to the same
 * place (patch always; learn often), the function sets UNIFORM to that port index, or to
 * FWD_OUT_DROP with the reason in drop[0], and may leave out[] unset: the worker then sends
 * the received array as it is, without staging, as testpmd's io forwarding does.
 */
struct fwd_burst {
	uint16_t worker;                /* the worker calling, for per-worker state; set once */
	uint16_t uniform;               /* FWD_OUT_MIXED, a port index, or FWD_OUT_DROP */
	/* The burst's time (TSC), read by the worker when it polled the port; 0 when the
	 * caller has none (a function that needs the time then reads it itself). */
	uint64_t tsc;
	/* The burst's bytes (its frames' pkt_len summed), which the worker counts for the
	 * input anyway: a function that counts bytes per burst takes them from here instead
	 * of reading every mbuf again. 0 when the caller has none. */
	uint64_t bytes;
	uint16_t out[FWD_MAX_BURST];    /* switch port index, FWD_OUT_DROP or FWD_OUT_FLOOD */
	uint8_t drop[FWD_MAX_BURST];    /* enum stats_drop, when out[i] == FWD_OUT_DROP */
	uint64_t flood[FWD_MAX_BURST];  /* port bitmap, when out[i] == FWD_OUT_FLOOD */
	/*
	 * Copies the function made of flooded packets, for outputs that need a changed frame
	 * (a VLAN tag pushed or popped): each goes to the ports of its set, as flood copies of
	 * an input already counted. Never used together with UNIFORM. The worker sets N_EXTRA
	 * to 0 before each call.
	 */
	uint16_t n_extra;
	struct {
		struct rte_mbuf *m;
		uint64_t set;
	} extra[FWD_MAX_BURST];
};

/* One step of a trace: what the forwarding function did with a described packet and why. */
struct fwd_trace {
	char text[8192];
};

struct fwd_ops {
	const char *mode;  /* "patch", "learn", "flow" */

	/* Makes the function's state for a new switch; PARAMS are add-switch's extra params. */
	void *(*create)(const json_t *params, char *err, size_t err_len);
	/* Frees the state; no worker uses it any more (an RCU grace period has passed). */
	void (*destroy)(void *state);

	/* A port joined (or left) the switch at INDEX. Control thread. */
	void (*port_added)(void *state, uint16_t index);
	void (*port_removed)(void *state, uint16_t index);

	/* Hot path: decide for PKTS[0..N-1], all received on port IN. */
	void (*process)(void *state, uint16_t in, struct rte_mbuf **pkts, uint16_t n,
			struct fwd_burst *out);

	/*
	 * The output every frame received on IN goes to, whatever it holds, unchanged (patch;
	 * flow when the rules for IN look at the input port only), as worker WORKER sees it
	 * now; or FWD_OUT_MIXED when the frames decide. Hot path; optional. It lets a port path
	 * that moves frames without mbufs (vhost_fast.h) know the output before it reads a
	 * frame; such a burst bypasses process(), so a function that counts or learns in
	 * process() must not answer here unless it counts in fixed_count().
	 */
	uint16_t (*fixed_output)(void *state, uint16_t in, uint16_t worker);
	/*
	 * Counts PACKETS frames of BYTES bytes that fixed_output()'s answer sent (or that the
	 * output then refused), called by the same worker in the same burst, TSC the burst's
	 * time (fwd_burst.tsc). Optional.
	 */
	void (*fixed_count)(void *state, uint16_t in, uint16_t worker, uint64_t packets,
			    uint64_t bytes, uint64_t tsc);

	/*
	 * For a port path that moves frames without mbufs (vhost_fast.h) when the frames
	 * decide (learn): which frames of a burst received on IN go unchanged, as unicast, to
	 * one port of FAST (a bitmap of switch port indexes the path can copy into). HDR[i]
	 * holds the first HDR_LEN[i] bytes of frame i (at least FWD_HDR_BYTES when the frame
	 * is that long). Sets FB->out[i] to that port, or to FWD_OUT_MIXED for a frame left
	 * to process(), and returns how many frames it took. For the frames it takes it must
	 * learn and count exactly as process() would for them; the frames it leaves it must
	 * not touch (process() sees them next, as mbufs). Frames with one destination (MAC
	 * and VLAN) get one answer within a burst, so that no flow is split between the two
	 * paths and reordered. Hot path; optional.
	 */
	uint16_t (*fast_unicast)(void *state, uint16_t in, uint64_t fast,
				 const uint8_t *const *hdr, const uint16_t *hdr_len, uint16_t n,
				 struct fwd_burst *fb);
	/*
	 * Counts, for a function that counts per frame where it answered (flow's rules), the
	 * frames 0..N-1 that fast_unicast() took in the same burst, LEN[i] long, HDR and
	 * HDR_LEN as it saw them: N may be fewer than it saw (the worker gives frames back to
	 * the sender when it runs short of mbufs), so it counts here, once the burst is known.
	 * Called before the worker's next use of FB. Optional.
	 */
	void (*fast_count)(void *state, uint16_t in, const uint8_t *const *hdr,
			   const uint16_t *hdr_len, const uint32_t *len, uint16_t n,
			   struct fwd_burst *fb);

	/* The same decision for one packet, explained. Control thread; optional. */
	void (*trace)(void *state, uint16_t in, struct rte_mbuf *pkt, struct fwd_trace *trace);

	/* Gives the function the switch's port array (read atomically), for link states.
	 * Called once, after create(). Optional. */
	void (*bind)(void *state, struct port **ports);

	/* Mode-specific description for `show` (links, table sizes, ...). Optional. */
	json_t *(*describe)(void *state, const char *const *port_names);

	/*
	 * Housekeeping off the hot path (learning, aging), called by the control thread every
	 * few milliseconds. Returns true when it deleted something whose memory may be reused
	 * only after an RCU grace period; reclaim() is then called after one. Both optional.
	 */
	bool (*tick)(void *state);
	void (*reclaim)(void *state);
};

extern const struct fwd_ops fwd_patch_ops;
extern const struct fwd_ops fwd_learn_ops;
extern const struct fwd_ops fwd_flow_ops;

/* The ops for MODE, or NULL when no forwarding function has that name. */
const struct fwd_ops *fwd_find(const char *mode);



/* Patch mode's own control operations (the `patch` and `unpatch` verbs). */
#define FWD_PATCH_NONE 0xffff
int fwd_patch_link(void *state, uint16_t a, uint16_t b, char *err, size_t err_len);
void fwd_patch_unlink(void *state, uint16_t a);
uint16_t fwd_patch_peer(const void *state, uint16_t a);
#endif
