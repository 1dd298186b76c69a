// SPDX-License-Identifier: MIT
/* node.c — which NUMA node host memory goes on: the one check of a node
 * number (config.numa_node, a store's pool) and the placement. */
#include <errno.h>
#include <numa.h>
#include <numaif.h>

#include "err.h"
#include "node.h"

int hmm_node_check(int node, const char *what)
{
	int max;

	if (node == -1)
		return 0;
	if (node < -1)	/* -1 = local; a typo must not mean that */
		return hmm_err(-EINVAL, "%s %d: must be a node (>= 0) or -1 "
			       "(local)", what, node);
	if (numa_available() < 0) {
		if (node == 0)
			return 0;
		return hmm_err(-EINVAL, "%s %d: no such NUMA node (this "
			       "kernel has node 0 alone)", what, node);
	}
	max = numa_max_node();
	if (node > max || !numa_bitmask_isbitset(numa_all_nodes_ptr, node))
		return hmm_err(-EINVAL, "%s %d: no NUMA node of that number "
			       "this process may allocate on (highest node "
			       "%d)", what, node, max);
	return 0;
}

void hmm_node_prefer(void *a, size_t len, int node)
{
	struct bitmask *m;

	if (node < 0 || numa_available() < 0)
		return;
	m = numa_allocate_nodemask();
	if (!m)
		return;
	numa_bitmask_setbit(m, node);
	/* preferred, not bound: a full node spills over rather than
	   failing a fault */
	mbind(a, len, MPOL_PREFERRED, m->maskp, m->size + 1, 0);
	numa_bitmask_free(m);
}
