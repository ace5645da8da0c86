/* SPDX-License-Identifier: BSD-3-Clause */
/* The munmap() guard for memif's rings (unmap_guard.c). */
#ifndef SLUICE_UNMAP_GUARD_H
#define SLUICE_UNMAP_GUARD_H

#include <stdbool.h>

/* True when CODE (a return address) lies in DPDK's memif driver, the only caller guarded. */
bool unmap_guard_is_memif(const void *code);

#endif
