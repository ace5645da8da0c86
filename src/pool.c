/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Mbuf pools, sized from the ports and counted.
 *
 * Every port holds mbufs of its own: its receive ring is filled at start (tap fills 1,023),
 * and each of its transmit queues can hold a ring's worth that the device has not sent yet.
 * A fixed pool therefore runs dry once enough ports exist, and then receive fails on every
 * port at once. A port reserves what it can hold (pool_reserve); when a socket's pools
 * cannot cover the reservations a new pool is made, so the buffers grow with the ports
 * (a DPDK mempool cannot grow itself). Pools are shared by all ports of a NUMA socket, not
 * owned by one: a deleted port's mbufs may still sit in other ports' transmit rings, so a
 * pool is freed only at exit.
 *
 * Allocation failures are counted for every port kind at once, in the pool: its mempool ops
 * are the default ring's, wrapped to count a dequeue that fails. Some PMDs (memif, vhost)
 * count no failure of their own, and their packets simply wait in the peer's ring.
 */
#include "pool.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "log.h"

#define POOL_CACHE 256
#define POOL_OPS_NAME "sluice_counted"
#define POOL_INNER_OPS "ring_mp_mc"

struct pool {
	struct rte_mempool *mp;
	int socket;
	uint64_t reserved;            /* mbufs the ports using it may hold */
	uint64_t alloc_failures;      /* atomic: any thread allocates */
};

static struct pool pools[POOL_MAX];
static unsigned int n_pools;
static unsigned int pool_size = 32767;

/* ---- the counting mempool ops ---- */

static const struct rte_mempool_ops *inner_ops(void)
{
	static const struct rte_mempool_ops *inner;
	unsigned int i;

	for (i = 0; inner == NULL && i < rte_mempool_ops_table.num_ops; i++)
		if (strcmp(rte_mempool_ops_table.ops[i].name, POOL_INNER_OPS) == 0)
			inner = &rte_mempool_ops_table.ops[i];
	return inner;
}

static int counted_alloc(struct rte_mempool *mp)
{
	return inner_ops()->alloc(mp);
}

static void counted_free(struct rte_mempool *mp)
{
	inner_ops()->free(mp);
}

static int counted_enqueue(struct rte_mempool *mp, void *const *objs, unsigned int n)
{
	return inner_ops()->enqueue(mp, objs, n);
}

/*
 * A get the per-lcore cache cannot serve first asks the ring for more than the cache holds
 * (the request and a refill); when that fails it asks for the request alone, which fails
 * only when the pool is truly empty. So a failed dequeue of at most the cache's size is one
 * allocation failure, and a larger one is not counted (requests that large come only from
 * queue set-up, which reports its own error).
 */
static int counted_dequeue(struct rte_mempool *mp, void **objs, unsigned int n)
{
	int rc = inner_ops()->dequeue(mp, objs, n);
	struct pool *p = mp->pool_config;

	if (unlikely(rc < 0) && p != NULL && n <= mp->cache_size)
		__atomic_fetch_add(&p->alloc_failures, 1, __ATOMIC_RELAXED);
	return rc;
}

static unsigned int counted_get_count(const struct rte_mempool *mp)
{
	return inner_ops()->get_count(mp);
}

static const struct rte_mempool_ops counted_ops = {
	.name = POOL_OPS_NAME,
	.alloc = counted_alloc,
	.free = counted_free,
	.enqueue = counted_enqueue,
	.dequeue = counted_dequeue,
	.get_count = counted_get_count,
};

/* ---- pools ---- */

/*
 * Registered at the first pool, after the EAL has loaded its mempool drivers, rather than
 * from a constructor: a pool names its ops by their index in each process's table, and a
 * secondary process (dpdk-dumpcap) that makes a pool in our memory must find the same ops
 * at the same index here. A constructor in the executable would run before the drivers'
 * and move every index by one.
 */
static bool register_counted_ops(void)
{
	static bool registered;
	unsigned int i;

	for (i = 0; !registered && i < rte_mempool_ops_table.num_ops; i++)
		registered = strcmp(rte_mempool_ops_table.ops[i].name, POOL_OPS_NAME) == 0;
	if (!registered)
		registered = rte_mempool_register_ops(&counted_ops) >= 0;
	return registered && inner_ops() != NULL;
}

void pool_init(unsigned int mbufs_per_pool)
{
	pool_size = mbufs_per_pool;
}

/* What the per-lcore caches of a pool can hold at most: never available to a port. */
static uint64_t cache_hold(void)
{
	return (uint64_t)rte_lcore_count() * POOL_CACHE * 3 / 2;
}

static bool has_room(const struct pool *p, unsigned int need)
{
	return p->reserved + need + cache_hold() <= p->mp->size;
}

static struct rte_mempool *make_mempool(struct pool *p, unsigned int size, int socket)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	struct rte_pktmbuf_pool_private priv = {
		.mbuf_data_room_size = RTE_MBUF_DEFAULT_BUF_SIZE, .mbuf_priv_size = 0 };
	struct rte_mempool *mp;

	snprintf(name, sizeof(name), "sluice_mbuf_s%d_%u", socket, n_pools);
	mp = rte_mempool_create_empty(name, size, sizeof(struct rte_mbuf) +
				      RTE_MBUF_DEFAULT_BUF_SIZE, POOL_CACHE,
				      sizeof(struct rte_pktmbuf_pool_private), socket, 0);
	if (mp == NULL)
		return NULL;
	if (!register_counted_ops() || rte_mempool_set_ops_byname(mp, POOL_OPS_NAME, p) != 0)
		goto fail;
	rte_pktmbuf_pool_init(mp, &priv);
	if (rte_mempool_populate_default(mp) < 0)
		goto fail;
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
fail:
	rte_mempool_free(mp);
	return NULL;
}

/* A new pool on SOCKET with room for NEED beyond its caches, or NULL. */
static struct pool *add_pool(int socket, unsigned int need)
{
	struct pool *p;
	uint64_t size = RTE_MAX((uint64_t)pool_size, need + cache_hold());

	if (n_pools == POOL_MAX || size > UINT32_MAX)
		return NULL;
	p = &pools[n_pools];
	memset(p, 0, sizeof(*p));
	p->socket = socket;
	p->mp = make_mempool(p, (unsigned int)size, socket);
	if (p->mp == NULL) {
		LOG(ERR, "cannot make an mbuf pool of %" PRIu64 " on socket %d: %s", size, socket,
		    rte_strerror(rte_errno));
		return NULL;
	}
	LOG(INFO, "mbuf pool %s: %" PRIu64 " buffers on socket %d", p->mp->name, size, socket);
	n_pools++;
	return p;
}

struct rte_mempool *pool_reserve(int socket, unsigned int need)
{
	struct pool *p = NULL;
	unsigned int i;

	if (socket < 0 || socket >= RTE_MAX_NUMA_NODES)
		socket = (int)rte_socket_id();
	if (socket < 0 || socket >= RTE_MAX_NUMA_NODES)
		socket = 0;
	for (i = 0; i < n_pools && p == NULL; i++)
		if (pools[i].socket == socket && has_room(&pools[i], need))
			p = &pools[i];
	if (p == NULL && (p = add_pool(socket, need)) == NULL)
		return NULL;
	p->reserved += need;
	return p->mp;
}

void pool_release(struct rte_mempool *mp, unsigned int need)
{
	unsigned int i;

	for (i = 0; i < n_pools; i++)
		if (pools[i].mp == mp)
			pools[i].reserved -= RTE_MIN(pools[i].reserved, (uint64_t)need);
}

unsigned int pool_count(void)
{
	return n_pools;
}

void pool_read(unsigned int i, struct pool_stats *st)
{
	const struct pool *p = &pools[i];

	snprintf(st->name, sizeof(st->name), "%s", p->mp->name);
	st->socket = p->socket;
	st->size = p->mp->size;
	st->in_use = rte_mempool_in_use_count(p->mp);
	st->reserved = p->reserved;
	st->alloc_failures = __atomic_load_n(&p->alloc_failures, __ATOMIC_RELAXED);
}

void pool_fini(void)
{
	unsigned int i;

	for (i = 0; i < n_pools; i++) {
		rte_mempool_free(pools[i].mp);
		pools[i].mp = NULL;
	}
	n_pools = 0;
}
