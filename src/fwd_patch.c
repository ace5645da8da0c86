/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Patch: a switch of port pairs. Whatever arrives on a port leaves on its peer, unchanged,
 * like a patch cable (testpmd's io forwarding, VPP's l2 xconnect). The only state is the peer
 * of each port, one 16-bit word each: the control thread writes a word atomically and a worker
 * sees the old or the new peer, never a torn one, so linking needs no grace period. A burst
 * all goes to one place, so the decision is made once per burst, not per packet.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fwd.h"

struct fwd_patch {
	uint16_t peer[SW_MAX_PORTS];  /* FWD_PATCH_NONE when unpatched; atomic access only */
};

static void *patch_create(const json_t *params, char *err, size_t err_len)
{
	struct fwd_patch *p;
	unsigned int i;

	(void)params;
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		snprintf(err, err_len, "out of memory");
		return NULL;
	}
	for (i = 0; i < SW_MAX_PORTS; i++)
		p->peer[i] = FWD_PATCH_NONE;
	return p;
}

static void patch_destroy(void *state)
{
	free(state);
}

uint16_t fwd_patch_peer(const void *state, uint16_t a)
{
	const struct fwd_patch *p = state;

	return __atomic_load_n(&p->peer[a], __ATOMIC_RELAXED);
}

static void set_peer(struct fwd_patch *p, uint16_t a, uint16_t b)
{
	__atomic_store_n(&p->peer[a], b, __ATOMIC_RELAXED);
}

int fwd_patch_link(void *state, uint16_t a, uint16_t b, char *err, size_t err_len)
{
	struct fwd_patch *p = state;

	if (a == b) {
		snprintf(err, err_len, "a port cannot be patched to itself");
		return -1;
	}
	if (fwd_patch_peer(p, a) != FWD_PATCH_NONE || fwd_patch_peer(p, b) != FWD_PATCH_NONE) {
		snprintf(err, err_len, "port already patched (unpatch it first)");
		return -1;
	}
	set_peer(p, a, b);
	set_peer(p, b, a);
	return 0;
}

void fwd_patch_unlink(void *state, uint16_t a)
{
	struct fwd_patch *p = state;
	uint16_t b = fwd_patch_peer(p, a);

	if (b == FWD_PATCH_NONE)
		return;
	set_peer(p, a, FWD_PATCH_NONE);
	set_peer(p, b, FWD_PATCH_NONE);
}

static void patch_port_added(void *state, uint16_t index)
{
	set_peer(state, index, FWD_PATCH_NONE);
}

static void patch_port_removed(void *state, uint16_t index)
{
	fwd_patch_unlink(state, index);
}

static void patch_process(void *state, uint16_t in, struct rte_mbuf **pkts, uint16_t n,
			  struct fwd_burst *out)
{
	uint16_t peer = fwd_patch_peer(state, in);

	(void)pkts;
	(void)n;
	if (peer == FWD_PATCH_NONE) {
		out->uniform = FWD_OUT_DROP;
		out->drop[0] = STATS_DROP_UNPATCHED;
	} else {
		out->uniform = peer;
	}
}

/* An unpatched port's frames take the general path, which counts them as unpatched. */
static uint16_t patch_fixed_output(void *state, uint16_t in, uint16_t worker)
{
	(void)worker;
	uint16_t peer = fwd_patch_peer(state, in);

	return peer == FWD_PATCH_NONE ? FWD_OUT_MIXED : peer;
}

static void patch_trace(void *state, uint16_t in, struct rte_mbuf *pkt,
			struct fwd_trace *trace)
{
	uint16_t peer = fwd_patch_peer(state, in);

	(void)pkt;
	if (peer == FWD_PATCH_NONE)
		snprintf(trace->text, sizeof(trace->text), "patch: input port has no peer: drop "
			 "(unpatched)");
	else
		snprintf(trace->text, sizeof(trace->text), "patch: output to peer port %u", peer);
}

static json_t *patch_describe(void *state, const char *const *port_names)
{
	json_t *links = json_array();
	uint16_t a, b;

	for (a = 0; a < SW_MAX_PORTS; a++) {
		b = fwd_patch_peer(state, a);
		if (b != FWD_PATCH_NONE && a < b && port_names[a] && port_names[b])
			json_array_append_new(links, json_pack("[ss]", port_names[a],
							       port_names[b]));
	}
	return json_pack("{so}", "links", links);
}

const struct fwd_ops fwd_patch_ops = {
	.mode = "patch",
	.create = patch_create,
	.destroy = patch_destroy,
	.port_added = patch_port_added,
	.port_removed = patch_port_removed,
	.process = patch_process,
	.fixed_output = patch_fixed_output,
	.trace = patch_trace,
	.describe = patch_describe,
};
