/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * unmap_guard.c waits for the workers only when DPDK's memif driver unmaps (vhost unmaps
 * while holding locks a worker may spin on: waiting there deadlocked). The driver is loaded
 * for real and addresses inside and outside it are classified; a munmap() from elsewhere
 * unmaps without waiting.
 */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "unmap_guard.h"
#include "worker.h"

static unsigned int quiesce_calls;

/* The guard's only link to the workers, counted here. */
bool wk_quiesce(void)
{
	quiesce_calls++;
	return true;
}

struct text_range {
	const char *name_part;
	const char *start;
};

/* Finds the first executable segment of the loaded object whose path contains NAME_PART. */
static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct text_range *r = arg;
	int i;

	(void)size;
	if (info->dlpi_name == NULL || strstr(info->dlpi_name, r->name_part) == NULL)
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
			r->start = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
			return 1;
		}
	return 0;
}

static void *load_memif(void)
{
	glob_t g;
	void *h = NULL;

	if (glob("/usr/lib/*/dpdk/pmds-*/librte_net_memif.so*", 0, NULL, &g) == 0) {
		h = dlopen(g.gl_pathv[0], RTLD_NOW | RTLD_LOCAL);
		globfree(&g);
	}
	return h;
}

static void test_memif_code_is_guarded(void **state)
{
	struct text_range r = { .name_part = "librte_net_memif" };
	void *h = load_memif();

	(void)state;
	assert_non_null(h);
	assert_int_equal(dl_iterate_phdr(find_text, &r), 1);
	assert_true(unmap_guard_is_memif(r.start + 16));
	dlclose(h);
}

static void test_other_code_is_not(void **state)
{
	struct text_range r = { .name_part = "librte_vhost" };
	void *h = dlopen("librte_vhost.so.23", RTLD_NOW | RTLD_LOCAL);

	(void)state;
	assert_false(unmap_guard_is_memif((const void *)test_other_code_is_not));
	assert_false(unmap_guard_is_memif((const void *)strlen));
	assert_false(unmap_guard_is_memif(NULL));
	assert_non_null(h);
	assert_int_equal(dl_iterate_phdr(find_text, &r), 1);
	assert_false(unmap_guard_is_memif(r.start + 16));
	dlclose(h);
}

static void test_unguarded_munmap_unmaps_without_waiting(void **state)
{
	size_t len = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(p != MAP_FAILED);
	quiesce_calls = 0;
	assert_int_equal(munmap(p, len), 0);
	assert_int_equal(quiesce_calls, 0);
	assert_int_equal(mincore(p, len, &vec), -1);   /* unmapped for real */
	assert_int_equal(errno, ENOMEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memif_code_is_guarded),
		cmocka_unit_test(test_other_code_is_not),
		cmocka_unit_test(test_unguarded_munmap_unmaps_without_waiting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
