/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of forwarding functions: a new mode is one line here. */
#include <string.h>

#include "fwd.h"

static const struct fwd_ops *const fwd_all[] = {
	&fwd_patch_ops,
	&fwd_learn_ops,
	&fwd_flow_ops,
};

const struct fwd_ops *fwd_find(const char *mode)
{
	unsigned int i;

	for (i = 0; i < RTE_DIM(fwd_all); i++)
		if (strcmp(fwd_all[i]->mode, mode) == 0)
			return fwd_all[i];
	return NULL;
}
