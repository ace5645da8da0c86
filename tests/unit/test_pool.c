/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c on a real DPDK (EAL in memory, no hugepages): pools are added as ports reserve
 * room, and every allocation that fails is counted once, however the per-lcore cache
 * refills (a refill that fails is not a failure while the pool still has buffers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include "pool.h"

#define SIZE 2048

int sluice_logtype;   /* the daemon's (main.c); RTE_LOGTYPE_USER1's value here */

static void test_failures_counted_once(void **state)
{
	static struct rte_mbuf *held[SIZE + 1];
	struct rte_mempool *mp = pool_reserve(-1, 100);
	struct pool_stats st;
	unsigned int n = 0, i, failures = 0;

	(void)state;
	assert_non_null(mp);
	while (n <= SIZE && (held[n] = rte_pktmbuf_alloc(mp)) != NULL)
		n++;
	pool_read(0, &st);
	assert_int_equal(st.alloc_failures, 1);   /* the one that ended the loop */
	assert_int_equal(st.in_use, n);
	assert_true(n >= SIZE - 1);
	for (i = 0; i < 5; i++)
		failures += rte_pktmbuf_alloc(mp) == NULL;
	pool_read(0, &st);
	assert_int_equal(failures, 5);
	assert_int_equal(st.alloc_failures, 6);
	for (i = 0; i < n; i++)
		rte_pktmbuf_free(held[i]);
	pool_read(0, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.reserved, 100);
}

static void test_pools_added_as_ports_reserve(void **state)
{
	struct rte_mempool *a, *b;
	struct pool_stats st;

	(void)state;
	a = pool_reserve(-1, 1000);       /* fits beside the first test's 100 */
	b = pool_reserve(-1, 1000);       /* does not: a second pool */
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	assert_int_equal(pool_count(), 2);
	pool_read(1, &st);
	assert_int_equal(st.reserved, 1000);
	pool_release(b, 1000);
	pool_read(1, &st);
	assert_int_equal(st.reserved, 0);
	assert_ptr_equal(pool_reserve(-1, 1000), b);   /* room again, no third pool */
	assert_int_equal(pool_count(), 2);
}

int main(void)
{
	char prefix[64];
	char *argv[] = { "test_pool", "--no-huge", "-m", "64", "--no-pci",
			 "--no-shconf", "--log-level=*:error", "-l", "0", prefix, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failures_counted_once),
		cmocka_unit_test(test_pools_added_as_ports_reserve),
	};
	int rc;

	snprintf(prefix, sizeof(prefix), "--file-prefix=sltpool%d", (int)getpid());
	if (rte_eal_init((int)RTE_DIM(argv) - 1, argv) < 0)
		return 1;
	sluice_logtype = RTE_LOGTYPE_USER1;
	pool_init(SIZE);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	pool_fini();
	rte_eal_cleanup();
	return rc;
}
