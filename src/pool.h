/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Mbuf pools shared by the ports of a NUMA socket, added as ports need them, with counted
 * allocation failures (pool.c). Control thread only, but for the failure counter.
 */
#ifndef SLUICE_POOL_H
#define SLUICE_POOL_H

#include <stdint.h>

#include <rte_mempool.h>

#define POOL_MAX 32

struct pool_stats {
	char name[RTE_MEMPOOL_NAMESIZE];
	int socket;
	uint64_t size, in_use, reserved, alloc_failures;
};

/* Sets the size of each new pool (sluiced --mbufs); a port that needs more gets more. */
void pool_init(unsigned int mbufs_per_pool);

/*
 * A pool on SOCKET (-1: the caller's) with room for NEED more mbufs held by a port, made if
 * no pool has it; NULL when no memory is left for one. pool_release() gives the room back.
 */
struct rte_mempool *pool_reserve(int socket, unsigned int need);
void pool_release(struct rte_mempool *mp, unsigned int need);

unsigned int pool_count(void);
void pool_read(unsigned int i, struct pool_stats *st);

/* Frees every pool; at exit only, once no port exists. */
void pool_fini(void);

#endif
