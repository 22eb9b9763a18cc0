// SPDX-License-Identifier: MIT
/*
 * Function rows are an array indexed by name id (the name table is capped, so is
 * this). Edges and CCT nodes live in arrays with open-addressing indexes keyed by
 * (caller, callee) and (parent, name), sized to twice their capacity so that the
 * load factor stays at or below one half.
 *
 * The figures follow cProfile: calls counts every completed call, primitive_calls
 * those whose name was not already open on the track, cum_ns sums the durations of
 * primitive calls only (a recursive call's time is already inside its outer call),
 * self_ns = duration minus the time of the children, summed over all calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "spread.h"
#include "stats.h"

static uint32_t *alloc_index(uint32_t cap, uint32_t *mask)
{
	uint32_t slots = 4;
	uint32_t *ix;

	while (slots < 2 * cap)
		slots <<= 1;
	ix = malloc((size_t)slots * sizeof(*ix));
	if (ix != NULL)
		memset(ix, 0xff, (size_t)slots * sizeof(*ix));
	*mask = slots - 1;
	return ix;
}

int rp_stats_init(struct rp_stats *s, uint32_t max_names, uint32_t max_nodes)
{
	memset(s, 0, sizeof(*s));
	s->max_names = max_names;
	s->max_nodes = max_nodes < 1 ? 1 : max_nodes;
	s->max_edges = s->max_nodes;
	s->fn = rp_spread_calloc(max_names, sizeof(*s->fn), RP_SPREAD_FN);
	s->edges = rp_spread_calloc(s->max_edges, sizeof(*s->edges), RP_SPREAD_EDGES);
	s->nodes =
		rp_spread_calloc(2 * (size_t)s->max_nodes + 1, sizeof(*s->nodes), RP_SPREAD_NODES);
	s->edge_index = alloc_index(s->max_edges, &s->edge_mask);
	s->node_index = alloc_index(2 * s->max_nodes + 1, &s->node_mask);
	if (!s->fn || !s->edges || !s->nodes || !s->edge_index || !s->node_index) {
		rp_stats_free(s);
		return -ENOMEM;
	}
	s->nodes[0] = (struct rp_cct_node){ .parent = RP_NONE, .name = RP_NONE };
	s->n_nodes = 1;
	return 0;
}

void rp_stats_free(struct rp_stats *s)
{
	rp_spread_free(s->fn);
	rp_spread_free(s->edges);
	rp_spread_free(s->nodes);
	free(s->edge_index);
	free(s->node_index);
	memset(s, 0, sizeof(*s));
}

/* Finds (parent, name) or the empty slot where it would go. */
static uint32_t *node_slot(struct rp_stats *s, uint32_t parent, uint32_t name)
{
	uint32_t i = rp_stats_mix(parent, name) & s->node_mask;

	while (s->node_index[i] != UINT32_MAX) {
		const struct rp_cct_node *n = &s->nodes[s->node_index[i]];
		if (n->parent == parent && n->name == name)
			break;
		i = (i + 1) & s->node_mask;
	}
	return &s->node_index[i];
}

static uint32_t new_node(struct rp_stats *s, uint32_t *slot, uint32_t parent, uint32_t name)
{
	*slot = s->n_nodes;
	s->nodes[s->n_nodes] = (struct rp_cct_node){ .parent = parent, .name = name };
	return s->n_nodes++;
}

uint32_t rp_stats_child_slow(struct rp_stats *s, uint32_t parent, uint32_t name, bool *folded)
{
	uint32_t *slot = node_slot(s, parent, name);

	*folded = false;
	if (*slot != UINT32_MAX)
		return *slot;
	if (s->n_nodes < s->max_nodes)
		return new_node(s, slot, parent, name);
	/* Full: the parent's "[other]" child, which may be made past the cap (one per
	 * node made under the cap, so never more than 2 x max_nodes in all). An
	 * "[other]" node absorbs its own descendants: were it to get an "[other]"
	 * child in turn, chains of them would grow past any cap with the depth. */
	*folded = true;
	if (parent != 0 && s->nodes[parent].name == RP_NAMES_OTHER)
		return parent;
	slot = node_slot(s, parent, RP_NAMES_OTHER);
	if (*slot != UINT32_MAX)
		return *slot;
	return new_node(s, slot, parent, RP_NAMES_OTHER);
}

struct rp_edge_stats *rp_stats_edge(struct rp_stats *s, uint32_t caller, uint32_t callee)
{
	uint32_t i = rp_stats_mix(caller, callee) & s->edge_mask;

	while (s->edge_index[i] != UINT32_MAX) {
		struct rp_edge_stats *e = &s->edges[s->edge_index[i]];
		if (e->caller == caller && e->callee == callee)
			return e;
		i = (i + 1) & s->edge_mask;
	}
	if (s->n_edges >= s->max_edges)
		return NULL;
	s->edge_index[i] = s->n_edges;
	s->edges[s->n_edges] = (struct rp_edge_stats){ .caller = caller, .callee = callee };
	return &s->edges[s->n_edges++];
}
