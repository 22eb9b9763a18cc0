/* SPDX-License-Identifier: MIT */
/*
 * The agent toolkit's nested-call analysis (its multi_example_call_profiling, see
 * tests/data/README.md, nat/), reproduced number for number: per request a
 * call tree built by the toolkit's own stack rules, then over every call of every
 * request the time-weighted concurrency percentiles, each call's self time, subtree
 * time, midpoint concurrency and bottleneck score (= subtree time), and the top 5.
 *
 * All arithmetic is IEEE double in the toolkit's order of operations (it is Python),
 * so the figures are its figures bit for bit, malformed input included:
 *  - an END whose call is not the top of the stack sets that call's end but leaves
 *    it on the stack (later STARTs nest under it);
 *  - a START without END keeps end = start, duration 0;
 *  - an END with no START (in its request) is ignored;
 *  - a duplicate UUID: the node_metrics entry keeps the first call's position and
 *    the last call's (depth-first) figures; a top-level START whose UUID is already
 *    a top-level call of its request replaces that call (which, with its subtree,
 *    leaves the analysis altogether).
 * Only the toolkit's own failures differ: it dies on trees deeper than Python's
 * recursion limit (we do not recurse) and on steps pydantic refuses (the importer
 * skips and counts those).
 *
 * Memory (bounded by max_nodes, counted in nodes_dropped when hit): per call 64 bytes
 * of node, its UUID string once (+ 24 to 40 bytes of table), its name once per distinct
 * name, and 4 bytes per request for the roots; rp_aiq_finish() adds about 48 bytes
 * per call while it runs (sorted times, segments, orders) and keeps 16 of them
 * (the segments, rendered as timeline_segments).
 */
#ifndef RP_ENGINE_AIQ_H
#define RP_ENGINE_AIQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A string intern table: id per distinct string, strings in one arena. */
struct rp_strtab {
	char *arena;
	size_t used, size;
	uint64_t *off; /* per id: arena offset << 32 | length */
	uint32_t n, cap;
	uint64_t *index; /* open addressing: hash << 32 | id; UINT64_MAX = empty */
	uint32_t mask;
};

int rp_strtab_init(struct rp_strtab *t);
void rp_strtab_free(struct rp_strtab *t);
/* Forgets every string (keeps the memory). */
void rp_strtab_reset(struct rp_strtab *t);
/* The id of @s[0..n); added if @add and new. UINT32_MAX if absent, or no memory. */
uint32_t rp_strtab_get(struct rp_strtab *t, const char *s, size_t n, bool add);
static inline const char *rp_strtab_str(const struct rp_strtab *t, uint32_t id)
{
	return t->arena + (t->off[id] >> 32);
}

static inline size_t rp_strtab_len(const struct rp_strtab *t, uint32_t id)
{
	return (uint32_t)t->off[id];
}

enum rp_aiq_type { RP_AIQ_LLM, RP_AIQ_TOOL, RP_AIQ_FUNCTION };
extern const char *const rp_aiq_type_names[3]; /* "LLM", "TOOL", "FUNCTION" */

/* One START or END of a request, in the toolkit's order (stable by timestamp). */
struct rp_aiq_step {
	double ts;
	uint32_t uuid; /* id in rp_aiq.uuids */
	uint32_t name; /* id in rp_aiq.names (STARTs) */
	bool start;
	uint8_t type; /* enum rp_aiq_type */
};

struct rp_aiq_node {
	double start, end;
	double self, subtree; /* set by rp_aiq_finish */
	uint32_t uuid, name;
	uint32_t first_child, next_sibling; /* UINT32_MAX: none */
	uint32_t mid;			    /* concurrency at the midpoint */
	uint8_t type;
	bool ended;
};

struct rp_aiq_counts {
	uint64_t calls;		  /* STARTs kept as calls */
	uint64_t nodes_dropped;	  /* STARTs past max_nodes: not analysed */
	uint64_t end_unmatched;	  /* ENDs with no START in their request: ignored */
	uint64_t end_not_top;	  /* ENDs of a call below the top: left on the stack */
	uint64_t open_at_end;	  /* STARTs never ended: duration 0 */
	uint64_t duplicate_uuids; /* calls whose UUID an earlier call had */
	uint64_t replaced_roots;  /* top-level calls replaced by a later one (lost) */
};

struct rp_aiq {
	uint32_t max_nodes;
	struct rp_strtab uuids, names;
	struct rp_aiq_node *nodes;
	uint32_t n_nodes, cap_nodes;
	uint32_t *roots; /* root nodes, request by request */
	uint32_t n_roots, cap_roots;
	/* Per UUID id: the request-local state of the stack rules. */
	struct rp_aiq_uuid *u;
	uint32_t cap_u;
	uint32_t *stack, *last_child; /* the current request's stack */
	uint32_t cap_stack, depth;
	uint32_t request; /* requests seen so far */
	struct rp_aiq_counts c;

	/* Results (rp_aiq_finish). */
	uint32_t *order; /* all calls, depth-first (the toolkit's all_nodes) */
	uint32_t n_order;
	uint32_t *metrics; /* node_metrics: per distinct UUID (first position), its node */
	uint32_t n_metrics;
	double *seg_t; /* n_seg + 1 boundaries: segment k is [seg_t[k], seg_t[k+1]) */
	uint32_t *seg_level;
	uint32_t n_seg;
	double p50, p90, p95, p99;
	uint32_t top[5]; /* nodes */
	uint32_t n_top;
};

/* @max_nodes: calls kept (0: the default, 1 << 22). 0 or -ENOMEM. */
int rp_aiq_init(struct rp_aiq *a, uint32_t max_nodes);
void rp_aiq_free(struct rp_aiq *a);

/* UUID and name ids for steps. UINT32_MAX: out of memory (uuid with !add: unknown). */
uint32_t rp_aiq_uuid(struct rp_aiq *a, const char *s, size_t n, bool add);
uint32_t rp_aiq_name(struct rp_aiq *a, const char *s, size_t n);

/**
 * rp_aiq_request() - one request's steps, already in the toolkit's order: builds its
 * call tree by the toolkit's stack rules. @return 0 or -ENOMEM.
 */
int rp_aiq_request(struct rp_aiq *a, const struct rp_aiq_step *steps, size_t n);

/* The same in parts: @last ends the request. */
int rp_aiq_request_part(struct rp_aiq *a, const struct rp_aiq_step *steps, size_t n, bool last);

/** rp_aiq_finish() - after the last request: every figure. 0 or -ENOMEM. */
int rp_aiq_finish(struct rp_aiq *a);

/* A call's duration as the toolkit stored it: max(0.0, end - start) (0 if never ended). */
/*
 * A depth-first walk (a node, then its children in order) of the tree under a root:
 * from *cur = root and *sp = 0, each call moves *cur to the next node, *sp being its
 * depth; false past the last. @stack: room for the deepest level.
 */
static inline bool rp_aiq_walk_next(const struct rp_aiq *a, uint32_t *cur, uint32_t *stack,
				    uint32_t *sp)
{
	uint32_t c = *cur;

	if (a->nodes[c].first_child != UINT32_MAX) {
		stack[(*sp)++] = c;
		*cur = a->nodes[c].first_child;
		return true;
	}
	while (a->nodes[c].next_sibling == UINT32_MAX && *sp > 0)
		c = stack[--*sp];
	if (a->nodes[c].next_sibling == UINT32_MAX)
		return false;
	*cur = a->nodes[c].next_sibling;
	return true;
}

static inline double rp_aiq_duration(const struct rp_aiq_node *n)
{
	double d = n->end - n->start;

	return d > 0.0 ? d : 0.0;
}

#endif
