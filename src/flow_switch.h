/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow mode's parts, private to them: the switch object, its rules, groups, meters and
 * programs, shared by fwd_flow.c (the forwarding function: the hot path, the caches'
 * use, the switch's life, trace), flow_xlate.c (translation: running the pipeline for a
 * key into a program) and flow_rules.c (rules, groups and meters: adding, changing,
 * removing, timeouts, dumps). fwd_flow.c's top comment tells how they fit together.
 */
#ifndef SLUICE_FLOW_SWITCH_H
#define SLUICE_FLOW_SWITCH_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_meter.h>
#include <rte_ring.h>

#include "classifier.h"
#include "flow.h"
#include "flow_cache.h"
#include "fwd.h"
#include "fwd_flow.h"
#include "stats.h"
#include "worker.h"

#define FLOW_EMC_ENTRIES 8192          /* per worker; two ways per set */
#define FLOW_EMC_WAYS 2
#define FLOW_EMC_INSERT_EVERY 16               /* a power of two (emc_should_insert) */
#define FLOW_MF_ENTRIES 16384          /* per worker: the megaflow cache (flow_cache.h) */
#define PROG_MAX_RULES 16
#define PROG_MAX_EGRESS 16
#define PROG_MAX_MODS 24
#define PROG_MAX_METERS 4
#define PROG_MAX_GROUPS 8
#define FLOW_GROUP_DEPTH 8             /* groups calling groups */
#define FLOW_PIN_RING 1024             /* packet-ins a worker may queue between two ticks */
#define FLOW_PIN_KEEP 256              /* packet-ins kept for the control side to take */
/* Bytes of each packet-in kept: a whole standard frame, as OFPCML_NO_BUFFER (and a
 * controller action without max_len) asks; a jumbo frame is cut, total_len tells. */
#define FLOW_PIN_BYTES 2048
#define FLOW_REMOVED_KEEP 1024         /* flow-removed records kept */
#define FLOW_SAME_BYTES 128            /* frames this alike share a key */
#define PROG_NOT_SIMPLE 0xffff

/* ---- objects ---- */

/* One worker's counters of a rule, group or meter: written by that worker only. */
struct flow_counts {
	uint64_t packets, bytes;
	uint64_t used_tsc;                 /* rules: the last packet's time */
};

/* A rule's instructions: replaced as a whole (mod-flows), never changed in place. */
struct flow_insns {
	uint32_t meter;
	uint8_t goto_table;
	bool clear_actions, has_write_metadata;
	uint64_t write_metadata, write_metadata_mask;
	uint16_t n_apply, n_write;
	struct flow_action acts[];         /* apply, then write */
};

struct flow_rule {
	struct cls_rule cls;               /* first: the classifier hands back this */
	struct flow_insns *insns;          /* atomic */
	uint8_t table;
	/* control thread only */
	uint16_t idle_timeout, hard_timeout;
	uint32_t flags;
	uint64_t cookie;
	uint64_t created_tsc;
	struct flow_counts base;           /* counters carried over (add over a rule) */
	struct flow_counts counts[];       /* per worker */
};

struct flow_group {
	struct flow_group_spec *spec;      /* immutable */
	uint32_t total_weight;
	struct flow_counts counts[];
};

/*
 * A meter. Each worker meters the frames it receives with a share of the rate (and burst):
 * the control thread divides the rate among the workers in proportion to what each saw in
 * the last tick (flow_meters_balance), so that all workers together pass the meter's rate,
 * not one rate each. A worker's share is written under a sequence count (odd while being
 * written) and read without locks (meter_share in fwd_flow.c).
 */
struct flow_meter_worker {
	struct rte_meter_srtcm rt;
	uint64_t packets, bytes, dropped_packets, dropped_bytes;
	uint32_t seq;                      /* atomic: odd while share is written */
	struct rte_meter_srtcm_profile share;   /* each word atomic */
	uint64_t seen;                     /* control thread: demand at the last balance */
} __rte_cache_aligned;

struct flow_meter {
	struct flow_meter_spec spec;
	struct rte_meter_srtcm_profile profile;   /* the whole rate */
	struct flow_meter_worker w[];
};

/* Groups or meters by id: sorted, replaced as a whole, binary-searched by workers. */
struct flow_index {
	unsigned int n;
	struct flow_index_entry {
		uint32_t id;
		void *obj;
	} e[];
};

struct flow_tables {
	struct cls_table *t[FLOW_TABLES];
};

/* ---- programs ---- */

enum egress_kind { EG_PORTS, EG_NORMAL, EG_CONTROLLER };

struct flow_modop {
	uint8_t type;                      /* FLOW_ACT_SET_FIELD, PUSH_VLAN, POP_VLAN, DEC_TTL */
	uint8_t field;
	uint16_t tpid;
	uint8_t value[16];
};

struct flow_egress {
	uint8_t kind;                      /* enum egress_kind */
	uint8_t mod_start, n_mods;         /* the header changes, in prog->mods */
	uint8_t reason;                    /* controller: 0 table miss, 1 action */
	uint8_t table;                     /* controller: the table it was sent from */
	uint16_t max_len;                  /* controller */
	/* The meters noted before this egress was made: a meter that drops the frame stops
	 * only the egresses made after it (OpenFlow runs instructions table by table). */
	uint8_t meters_before;
	uint64_t ports;                    /* EG_PORTS; the input's bit: an in_port output */
	uint64_t cookie;                   /* controller */
};

struct flow_prog {
	uint32_t version;                  /* a slot's program: new each time it is written */
	uint16_t simple;                   /* one unchanged output to this port; or NOT_SIMPLE */
	uint8_t n_rules, n_egress, n_mods, n_meters, n_groups;
	uint8_t drop;                      /* the reason, when n_egress is 0 */
	/* Egresses beyond PROG_MAX_EGRESS, left out: counted as copy_failed per frame. */
	uint8_t lost_egress;
	bool cacheable;
	/* Depends on no header field, only on the input port (rules on in_port alone): every
	 * frame of a burst has it, so the burst is decided by its first frame. */
	bool header_free;
	/* The table whose lookup missed (OpenFlow's table stats: lookups less matches), as
	 * &F->table_miss[0][table]; count_prog adds a run's frames at [wid][table]. NULL:
	 * every lookup matched. */
	uint64_t *miss;
	struct flow_rule *rules[PROG_MAX_RULES];
	struct flow_meter *meters[PROG_MAX_METERS];
	struct flow_group *groups[PROG_MAX_GROUPS];
	struct flow_egress eg[PROG_MAX_EGRESS];
	struct flow_modop mods[PROG_MAX_MODS];
};

/*
 * An exact-match entry points at its program: a megaflow's (so that the flows a megaflow
 * covers share one program, which stays in the CPU's cache, and their frames count as one
 * run), or the entry's own slot in emc_prog when the program is in no megaflow. The slot
 * pointed at may be given to another program later: VERSION, copied from the program, tells
 * whether it still holds the same one.
 */
struct emc_entry {
	uint32_t hash;
	uint32_t gen;
	uint32_t version;
	const struct flow_prog *prog;
	struct flow_key key;
};

struct pin_elem {
	struct rte_mbuf *m;
	uint64_t cookie;
	uint16_t in_port;
	uint8_t reason, table;
	uint16_t max_len;
	uint16_t pad;
};

/* One worker's part: written by that worker only. */
struct flow_worker {
	struct rte_ring *pins;
	uint64_t pin_full, copy_failed, uncacheable, emc_hits, emc_misses;
	uint32_t insert_tick;
	uint32_t prog_version;             /* the last version given to a cached program */
	/* The exact-match cache's recent hit rate (emc_worth_it): looked up while it pays. */
	uint16_t emc_window, emc_window_hits, emc_skip_tick;
	bool emc_skipped;
	uint64_t tsc;                      /* the burst's time */
	uint16_t extra_max;                /* extra frames the burst may hand over (add_extra) */
	struct emc_entry *emc;
	struct flow_prog *emc_prog;
	struct mf_cache *mf;
	struct flow_prog scratch;          /* a program that may not be cached */
	/* Per input port: the program every frame from it has, when the rules look at the
	 * input port alone (flow_fixed_output); made for generation port_prog_gen[i]. */
	struct flow_prog *port_prog;
	uint32_t port_prog_gen[SW_MAX_PORTS];

	/* scratch for one burst */
	struct flow_key key[FWD_MAX_BURST];
	uint32_t hash[FWD_MAX_BURST];      /* key[i]'s exact-match hash, when keyed ahead */
	bool pin_queued;                   /* the burst queued a packet-in: pin_wake at its end */
	uint32_t last_hl;                  /* same_headers(): how many bytes last_hdr holds */
	uint16_t alike_skip;               /* bursts left whose frames are not compared */
	uint8_t last_hdr[FLOW_SAME_BYTES];
	/* The program of the frame last_hdr holds, for the next burst's first frame
	 * (prev_program): valid while the generation, the input port, the tunnel id and the
	 * program's version (its slot not rewritten) are those noted here. */
	const struct flow_prog *last_prog;
	uint32_t last_prog_version, last_gen;
	uint16_t last_in;
	uint64_t last_tun;
	/* The one-copy path (flow_fast_unicast): each frame's program and its version then,
	 * counted by flow_fast_count once the worker knows which frames it sent. */
	uint32_t fast_gen;
	const struct flow_prog *fast_prog[FWD_MAX_BURST];
	uint32_t fast_version[FWD_MAX_BURST];
	bool viewable[FWD_MAX_BURST];      /* fast_unicast_keyed: key[i]'s headers all seen */
	const void *mf_value[FWD_MAX_BURST];   /* fast_keyed_megaflows: mf_lookup_burst's */
	/* frames for the embedded learning bridge (`normal`) */
	uint16_t n_normal;
	struct rte_mbuf *normal_pkts[FWD_MAX_BURST];
	uint16_t normal_idx[FWD_MAX_BURST];
	bool normal_carrier[FWD_MAX_BURST];
	struct fwd_burst nfb;
	/* True from the packet-in that woke the control thread (pin_wake) until the control
	 * thread next takes packet-ins (fwd_flow_packet_ins clears it): while it is set the
	 * worker writes no more wake-ups. On a line of its own: the control thread writes it. */
	bool pin_told __rte_cache_aligned;
} __rte_cache_aligned;

struct pin_record {
	uint64_t cookie;
	uint16_t in_port, len, total_len;
	uint8_t reason, table;
	uint8_t data[FLOW_PIN_BYTES];
};

struct removed_record {
	char *text;
	const char *reason;
	uint64_t packets, bytes;
	double duration;
	uint64_t cookie;
	uint16_t idle_timeout, hard_timeout;
	bool send_flow_rem;     /* the rule asked for it: an OpenFlow controller is told */
};

struct flow {
	struct flow_tables *tables;        /* atomic */
	struct flow_index *groups;         /* atomic: struct flow_group */
	struct flow_index *meters;         /* atomic: struct flow_meter */
	uint32_t gen;                      /* atomic: bumped on every change */
	uint64_t present;                  /* atomic: ports attached */
	uint64_t live;                     /* atomic: attached ports whose link is up */
	/* atomic: ports whose OpenFlow config (port->of_config) says so; PORT_DOWN is in
	 * no_recv and no_fwd (and not live). Translation reads them: no per-packet cost. */
	uint64_t no_recv, no_fwd, no_flood, no_pin, down;
	void *learn;                       /* the `normal` action's bridge */
	struct port **ports;               /* the switch's ports (bind) */

	/* control thread only */
	unsigned int n_workers, name_id, table_seq;
	uint64_t hz, last_second_tsc, last_balance_tsc;
	unsigned int n_timed;              /* rules with a timeout */
	struct pin_record pins[FLOW_PIN_KEEP];
	unsigned int pin_head, pin_count;
	uint64_t pins_taken, pins_lost;
	struct removed_record removed[FLOW_REMOVED_KEEP];
	unsigned int removed_head, removed_count;
	uint64_t lookups_at_resort;

	/* Frames whose lookup missed in each table, per worker (written by that worker only,
	 * through a program's miss pointer); `show` sums them (table stats). */
	uint64_t table_miss[WK_MAX_WORKERS][FLOW_TABLES] __rte_cache_aligned;

	struct flow_worker w[];
};
static inline uint64_t bit(unsigned int i)
{
	return UINT64_C(1) << i;
}

static inline void bump_gen(struct flow *F)
{
	__atomic_store_n(&F->gen, F->gen + 1, __ATOMIC_RELEASE);
}

static inline void *index_find(struct flow_index *const *pi, uint32_t id)
{
	const struct flow_index *x = __atomic_load_n(pi, __ATOMIC_ACQUIRE);
	unsigned int lo = 0, hi = x->n;

	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (x->e[mid].id == id)
			return x->e[mid].obj;
		if (x->e[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static inline struct flow_group *group_find(const struct flow *F, uint32_t id)
{
	return index_find(&F->groups, id);
}

static inline struct flow_meter *meter_find(const struct flow *F, uint32_t id)
{
	return index_find(&F->meters, id);
}

/* Where a translation writes its explanation (trace), or nothing. */
struct xlate_trace {
	char *buf;
	size_t len, used;
	const struct flow_namer *namer;
	int indent;
};

/* flow_xlate.c */

/*
 * Runs the pipeline for the packet with key K, received on IN, into P. Only configuration
 * is read: nothing is counted or changed, so trace uses it as the data path does. TR, unless
 * NULL, gets the explanation; WC, unless NULL, the mask of the megaflow P stands for.
 */
void flow_translate(const struct flow *F, uint16_t in, const struct flow_key *k,
		    unsigned int worker, struct flow_prog *p, struct xlate_trace *tr,
		    struct flow_key *wc);

/* Appends a line (indented) to T's explanation; nothing when T is NULL. */
void flow_trace_printf(struct xlate_trace *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* flow_rules.c */

/* An empty set of tables; NULL when out of memory. */
struct flow_tables *tables_new(struct flow *F);
/* Frees a set of tables and its rules (after a grace period: wk_defer). */
void tables_free(void *arg);
/* Takes the packet-ins the workers queued into the control side's records. */
void drain_pins(struct flow *F);
/* Divides each meter's rate among the workers by what each saw since the last call. */
void flow_meters_balance(struct flow *F);

/* Frees a group (after a grace period: wk_defer). */
void group_free(void *arg);
/* The control thread's work once a tick: timeouts, links, resorting. True when busy. */
bool flow_tick(void *state);
/* Reads the ports' links and OpenFlow config into F's masks (live, no_recv, ...); bumps the
 * generation when one changed. */
void flow_check_ports(struct flow *F);
/* Frees what the workers no longer read. */
void flow_reclaim(void *state);

#endif
