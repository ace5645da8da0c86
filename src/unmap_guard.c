/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A grace period before DPDK's memif driver unmaps the rings it shares with a peer.
 *
 * DPDK 22.11's memif PMD handles a peer's disconnect in the EAL interrupt thread: it clears
 * the port's "connected" flag and, a few microseconds later, unmaps the rings it shares with
 * the peer. Nothing waits for a worker that read the flag just before and is still inside
 * rte_eth_rx_burst() or rte_eth_tx_burst() on that port: the worker then reads an unmapped
 * ring and the daemon dies of SIGSEGV because a VNF went away (seen here under sluice-bench
 * about once in ten disconnects at full rate; testpmd dies the same way, and DPDK 23.11 has
 * the same code).
 *
 * The PMD calls munmap() through its PLT, and the executable comes first in symbol lookup, so
 * this definition (exported: --export-dynamic-symbol=munmap in meson.build) is the one it
 * reaches. For a call from the memif driver, and only from it, it waits until every polling
 * worker has passed a quiescent state (worker.c's RCU): a burst that began before the flag
 * was cleared has ended by then, and a later one sees the flag.
 *
 * Only memif: vhost unmaps guest memory (SET_MEM_TABLE, memory hot-plug) while it holds the
 * queues' access locks, and a worker sending to such a queue spins on that lock; waiting for
 * it here would wait for ever. The wait is bounded anyway (wk_synchronize): a stuck worker
 * is logged and counted, and the unmap goes ahead. glibc's own unmapping (malloc) calls its
 * internal alias and never comes here.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unmap_guard.h"
#include "worker.h"

bool unmap_guard_is_memif(const void *code)
{
	Dl_info info;

	if (dladdr(code, &info) == 0 || info.dli_fname == NULL)
		return false;
	return strstr(info.dli_fname, "librte_net_memif") != NULL;
}

int munmap(void *addr, size_t len)
{
	if (unmap_guard_is_memif(__builtin_return_address(0)))
		wk_quiesce();
	return (int)syscall(SYS_munmap, addr, len);
}
