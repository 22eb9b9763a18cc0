/* SPDX-License-Identifier: MIT */
/*
 * Function statistics (cProfile's figures per name), caller -> callee edges and the
 * calling-context tree, updated once per completed call. Bounded: edges and nodes
 * have caps; a CCT node past the cap is folded into its parent's "[other]" child
 * (name RP_NAMES_OTHER), so at most 2 x max_nodes nodes exist; an edge past the cap
 * is not recorded (the call still counts in its function's row). Callers count
 * each fold as RP_ANOM_CCT_CAP.
 */
#ifndef RP_ENGINE_STATS_H
#define RP_ENGINE_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "report.h"

struct rp_fn_stats {
	uint64_t calls, primitive_calls, self_ns, cum_ns, total_ns;
	uint64_t min_not;	/* ~ the shortest call (0: none yet; read it through
				   rp_fn_min_ns()): one compare a call, as max_ns */
	uint64_t max_ns;
	uint64_t drop_lost;	/* its spans a drop cut (stacks.h): not in the figures */
	/* Off-CPU time (ingest/offcpu.h): while it was the innermost open span of a
	 * descheduled thread (in self_ns too), and inside its primitive calls
	 * (children's included; in cum_ns too). */
	uint64_t offcpu_ns, offcpu_cum_ns;
	uint64_t summarized;	/* its calls that came in producers' summaries */
	uint64_t unsketched;	/* ... of them, with no histogram: in the figures, not
				   in its latency sketch (a producer before them) */
	uint64_t errors;	/* its calls whose END said RP_SPAN_ERROR (in calls) */
	uint64_t started;	/* its BEGINs the stacks took, and summarized calls: every
				   call counted in calls started here first */
	bool milestone;		/* a request milestone's name (marks.h), not a span's */
	uint32_t edge_hint;	/* index + 1 of the edge its last call from a caller went
				   to (0: none yet): a callee mostly has the caller it had */
	uint32_t node_hint;	/* the CCT node of this name its last begin went to,
				   unfolded (0: none yet, the root, which is no node's child
				   so never matches): mostly the same parent */
	uint32_t node_hint2;	/* ... the one before it, in the row's padding: a name
				   called from two places in turn (a recursion) hits too */
};

/* A row's shortest call, 0 when it has none (the report's min_ns). */
static inline uint64_t rp_fn_min_ns(const struct rp_fn_stats *f)
{
	return f->calls != 0 ? ~f->min_not : 0;
}

/* A call of @dur ns into its row's shortest: ~dur above ~min is dur below min, and
 * the first call's ~dur is above the 0 of none (a call of UINT64_MAX ns leaves the
 * 0, which rp_fn_min_ns() reads as UINT64_MAX once there is a call). */
static inline void rp_fn_min_add(struct rp_fn_stats *f, uint64_t dur)
{
	if (~dur > f->min_not)
		f->min_not = ~dur;
}

struct rp_edge_stats {
	uint32_t caller, callee;
	uint64_t calls, primitive_calls, self_ns, cum_ns;
};

struct rp_cct_node {
	uint32_t parent, name;
	uint64_t calls, self_ns, total_ns;
	uint64_t offcpu_ns;	/* off-CPU time with this node innermost (fn's offcpu_ns) */
};

struct rp_stats {
	struct rp_fn_stats *fn;		/* indexed by name id */
	uint32_t max_names;
	struct rp_edge_stats *edges;
	uint32_t n_edges, max_edges;
	uint32_t *edge_index, edge_mask;
	struct rp_cct_node *nodes;	/* nodes[0] is the root */
	uint32_t n_nodes, max_nodes;	/* room for 2 x max_nodes ("[other]" folds) */
	uint32_t *node_index, node_mask;
};

/* One completed call, as the stack machine saw it. */
struct rp_call {
	uint32_t name;
	uint32_t caller;	/* the parent frame's name, RP_NONE for a root frame */
	uint32_t node;		/* its CCT node */
	uint64_t dur_ns;
	uint64_t self_ns;
	uint64_t offcpu_ns;	/* off-CPU time inside it, children's included */
	uint64_t offcpu_self_ns; /* ... while it was the innermost span */
	bool primitive;		/* the name was not open below it on the track */
	bool error;		/* its END carried RP_SPAN_ERROR */
};

/* @return 0 or -ENOMEM. */
int rp_stats_init(struct rp_stats *s, uint32_t max_names, uint32_t max_nodes);
void rp_stats_free(struct rp_stats *s);

/**
 * rp_stats_child() - the CCT node for @name under @parent, created if new.
 * @folded: set when the cap folded it into the parent's "[other]" child.
 */
uint32_t rp_stats_child_slow(struct rp_stats *s, uint32_t parent, uint32_t name, bool *folded);

/* The hash of the CCT and edge indexes. */
static inline uint32_t rp_stats_mix(uint32_t a, uint32_t b)
{
	uint64_t k = ((uint64_t)a << 32 | b) * UINT64_C(0x9e3779b97f4a7c15);

	return (uint32_t)(k >> 32);
}

/* The child of CCT node @parent for @name: one of the two nodes the name's last
 * begins went to when its parent is the same (nodes are never removed and a (parent,
 * name) pair has one node, which the hints only ever name for that name: the same
 * answer), else found at its home slot inline, else (a longer probe, a new node, the
 * cap) in stats.c; an unfolded answer is remembered. */
static inline uint32_t rp_stats_child(struct rp_stats *s, uint32_t parent, uint32_t name,
				      bool *folded)
{
	struct rp_fn_stats *f = &s->fn[name];
	uint32_t j = f->node_hint, j2;

	*folded = false;
	if (s->nodes[j].parent == parent)
		return j;
	/* the hint before it: the two swap, the newest first */
	j2 = f->node_hint2;
	if (s->nodes[j2].parent == parent) {
		f->node_hint2 = j;
		f->node_hint = j2;
		return j2;
	}
	j = s->node_index[rp_stats_mix(parent, name) & s->node_mask];
	if (j == UINT32_MAX || s->nodes[j].parent != parent || s->nodes[j].name != name)
		j = rp_stats_child_slow(s, parent, name, folded);
	if (!*folded) {
		f->node_hint2 = f->node_hint;
		f->node_hint = j;
	}
	return j;
}

/**
 * rp_stats_add() - account one completed call.
 * @return false when its edge could not be recorded (edge cap).
 */
/* The (caller, callee) edge, made if new; NULL at the cap. */
struct rp_edge_stats *rp_stats_edge(struct rp_stats *s, uint32_t caller, uint32_t callee);

/* rp_stats_edge() for an edge found at its home slot inline (most: the index is at
 * most half full), the rest in stats.c. */
static inline struct rp_edge_stats *rp_stats_edge_get(struct rp_stats *s, uint32_t caller,
						      uint32_t callee)
{
	uint32_t j = s->edge_index[rp_stats_mix(caller, callee) & s->edge_mask];

	if (j != UINT32_MAX && s->edges[j].caller == caller && s->edges[j].callee == callee)
		return &s->edges[j];
	return rp_stats_edge(s, caller, callee);
}

/* The (@caller, f's name) edge: the one f's last call went to when the caller is the
 * same (that edge's callee is f's name), else rp_stats_edge_get()'s, remembered. */
static inline struct rp_edge_stats *rp_stats_edge_of(struct rp_stats *s, struct rp_fn_stats *f,
						     uint32_t caller, uint32_t callee)
{
	uint32_t j = f->edge_hint;
	struct rp_edge_stats *e;

	if (j != 0 && s->edges[j - 1].caller == caller)
		return &s->edges[j - 1];
	e = rp_stats_edge_get(s, caller, callee);
	if (e != NULL)
		f->edge_hint = (uint32_t)(e - s->edges) + 1;
	return e;
}

/* A completed call into its name's row @f; false if its edge hit the cap. */
static inline bool rp_stats_add_row(struct rp_stats *s, struct rp_fn_stats *f,
				    const struct rp_call *c)
{
	struct rp_cct_node *n = &s->nodes[c->node];
	struct rp_edge_stats *e;

	rp_fn_min_add(f, c->dur_ns);
	if (c->dur_ns > f->max_ns)
		f->max_ns = c->dur_ns;
	f->calls++;
	f->errors += c->error;
	f->self_ns += c->self_ns;
	f->total_ns += c->dur_ns;
	n->calls++;
	n->self_ns += c->self_ns;
	n->total_ns += c->dur_ns;
	f->offcpu_ns += c->offcpu_self_ns;
	n->offcpu_ns += c->offcpu_self_ns;
	if (c->primitive) {
		f->primitive_calls++;
		f->cum_ns += c->dur_ns;
		f->offcpu_cum_ns += c->offcpu_ns;
	}
	if (c->caller == RP_NONE)
		return true;
	e = rp_stats_edge_of(s, f, c->caller, c->name);
	if (e == NULL)
		return false;
	e->calls++;
	e->self_ns += c->self_ns;
	if (c->primitive) {
		e->primitive_calls++;
		e->cum_ns += c->dur_ns;
	}
	return true;
}

/* A completed call; false if its edge hit the cap. Inline: once per span. */
static inline bool rp_stats_add(struct rp_stats *s, const struct rp_call *c)
{
	return rp_stats_add_row(s, &s->fn[c->name], c);
}

/* Calls a producer summarized (docs/summaries.md): @calls of one name in one
 * context, with their summed total and self times and the shortest and longest. */
struct rp_sum_call {
	uint32_t name, caller, node;	/* as in struct rp_call */
	uint64_t calls, total_ns, self_ns, min_ns, max_ns;
	bool primitive;
	bool sketched;			/* its durations went to the sketches */
	bool imp;			/* RP_SUMMARY_IMPORT: import-time calls */
};

/* A summary, added as its calls one by one would be; false if its edge hit the cap. */
static inline bool rp_stats_add_sum(struct rp_stats *s, const struct rp_sum_call *c)
{
	struct rp_fn_stats *f = &s->fn[c->name];
	struct rp_cct_node *n = &s->nodes[c->node];
	struct rp_edge_stats *e;

	if (c->calls == 0)
		return true;
	rp_fn_min_add(f, c->min_ns);
	if (c->max_ns > f->max_ns)
		f->max_ns = c->max_ns;
	f->calls += c->calls;
	f->started += c->calls;
	f->summarized += c->calls;
	f->unsketched += c->sketched ? 0 : c->calls;
	f->self_ns += c->self_ns;
	f->total_ns += c->total_ns;
	n->calls += c->calls;
	n->self_ns += c->self_ns;
	n->total_ns += c->total_ns;
	if (c->primitive) {
		f->primitive_calls += c->calls;
		f->cum_ns += c->total_ns;
	}
	if (c->caller == RP_NONE)
		return true;
	e = rp_stats_edge_of(s, f, c->caller, c->name);
	if (e == NULL)
		return false;
	e->calls += c->calls;
	e->self_ns += c->self_ns;
	if (c->primitive) {
		e->primitive_calls += c->calls;
		e->cum_ns += c->total_ns;
	}
	return true;
}

#endif
