/* SPDX-License-Identifier: MIT */
/*
 * node.h — the NUMA node a context or pool places its host memory on.
 */
#ifndef HMM_NODE_H
#define HMM_NODE_H

#include <stddef.h>

/*
 * 0 when node is -1 (local) or a node this process may allocate on
 * (libnuma's view, cpusets included; a kernel without NUMA has node 0
 * alone), else -EINVAL with a detail naming what ("config.numa_node").
 */
int hmm_node_check(int node, const char *what);

/* Prefer node (checked) for [a, a + len); best effort, -1: nothing. */
void hmm_node_prefer(void *a, size_t len, int node);

#endif /* HMM_NODE_H */
