// SPDX-License-Identifier: MIT
/*
 * The agent toolkit's nested-call analysis; the rules are in aiq.h. The toolkit is
 * recursive Python over pydantic objects; here the tree is index-linked arrays
 * (first child / next sibling) walked iteratively, and every floating-point
 * expression is evaluated as the toolkit evaluates it: the same operands, the same
 * order of additions, Python's max()/min() (first argument on ties), so the
 * results are the same doubles.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aiq.h"
#include "sort.h"

#define NONE UINT32_MAX

const char *const rp_aiq_type_names[3] = { "LLM", "TOOL", "FUNCTION" };

/* Per UUID: where the current request's stack rules stand (request numbers + 1; 0 =
 * never). partial_map and top_level_dict of the toolkit, as arrays. */
struct rp_aiq_uuid {
	uint32_t partial, partial_req; /* the call an END of this UUID ends */
	uint32_t top_slot, top_req;    /* its top-level call's slot in roots */
	bool seen;		       /* a call had it already */
};

/* ---------------------------------------------------------------- strtab */

int rp_strtab_init(struct rp_strtab *t)
{
	memset(t, 0, sizeof(*t));
	t->mask = 255;
	t->index = malloc(256 * sizeof(*t->index));
	if (t->index == NULL)
		return -ENOMEM;
	memset(t->index, 0xff, 256 * sizeof(*t->index));
	return 0;
}

void rp_strtab_free(struct rp_strtab *t)
{
	free(t->arena);
	free(t->off);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

void rp_strtab_reset(struct rp_strtab *t)
{
	if (t->n > 0)
		memset(t->index, 0xff, ((size_t)t->mask + 1) * sizeof(*t->index));
	t->n = 0;
	t->used = 0;
}

/* Eight bytes at a time (the last eight, or four and four, read overlapping), each
 * word multiplied in and folded, the whole mixed again so the low bits the index
 * uses depend on every byte: a UUID of ~10 bytes in ~25 instructions rather than
 * ~110 a byte at a time. */
static uint32_t str_hash(const char *s, size_t n)
{
	const uint64_t k = 0x9e3779b97f4a7c15ull;
	uint64_t h = (n + 1) * k, w;
	uint32_t a, b;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		h = (h ^ w) * k;
		h ^= h >> 29;
	}
	if (i < n) {
		if (n >= 8) {
			memcpy(&w, s + n - 8, 8);
		} else if (n >= 4) {
			memcpy(&a, s, 4);
			memcpy(&b, s + n - 4, 4);
			w = (uint64_t)a << 32 | b;
		} else {
			w = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[n / 2] << 8 |
			    (unsigned char)s[n - 1];
		}
		h = (h ^ w) * k;
		h ^= h >> 29;
	}
	h *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ h >> 32);
}

#define EMPTY UINT64_MAX /* an index slot: hash << 32 | id (an id is never NONE) */

static bool same(const struct rp_strtab *t, uint32_t id, const char *s, size_t n)
{
	return (uint32_t)t->off[id] == n && memcmp(t->arena + (t->off[id] >> 32), s, n) == 0;
}

/* Twice the slots, each entry moved by the hash it holds (no string read again). */
static int rehash(struct rp_strtab *t)
{
	uint32_t mask = t->mask * 2 + 1;
	uint64_t *ix = malloc(((size_t)mask + 1) * sizeof(*ix));

	if (ix == NULL)
		return -ENOMEM;
	memset(ix, 0xff, ((size_t)mask + 1) * sizeof(*ix));
	for (uint32_t k = 0; k <= t->mask; k++) {
		uint64_t e = t->index[k];
		uint32_t i = (uint32_t)(e >> 32) & mask;

		if (e == EMPTY)
			continue;
		while (ix[i] != EMPTY)
			i = (i + 1) & mask;
		ix[i] = e;
	}
	free(t->index);
	t->index = ix;
	t->mask = mask;
	return 0;
}

static bool grow(void **p, uint32_t *cap, size_t size, uint32_t need)
{
	uint32_t c = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return true;
	while (c < need)
		c = c > UINT32_MAX / 2 ? UINT32_MAX : c * 2;
	q = realloc(*p, (size_t)c * size);
	if (q == NULL)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static uint32_t add_string(struct rp_strtab *t, const char *s, size_t n, uint32_t slot,
			   uint32_t h)
{
	if (t->used + n + 1 > t->size) {
		size_t size = t->size ? t->size : 4096;
		while (size < t->used + n + 1)
			size *= 2;
		char *a = realloc(t->arena, size);
		if (a == NULL)
			return NONE;
		t->arena = a;
		t->size = size;
	}
	if (t->n == NONE - 1 || t->used > UINT32_MAX ||
	    !grow((void **)&t->off, &t->cap, sizeof(*t->off), t->n + 1))
		return NONE;
	memcpy(t->arena + t->used, s, n);
	t->arena[t->used + n] = '\0';
	t->off[t->n] = (uint64_t)t->used << 32 | (uint32_t)n;
	t->used += n + 1;
	t->index[slot] = (uint64_t)h << 32 | t->n;
	return t->n++;
}

uint32_t rp_strtab_get(struct rp_strtab *t, const char *s, size_t n, bool add)
{
	uint32_t i, id, h;
	uint64_t e;

	if (n > UINT32_MAX - 1)
		return NONE;
	h = str_hash(s, n);
	/* the hash first: a colliding entry's string (a cache miss) is not read */
	for (i = h & t->mask; (e = t->index[i]) != EMPTY; i = (i + 1) & t->mask)
		if ((uint32_t)(e >> 32) == h && same(t, (uint32_t)e, s, n))
			return (uint32_t)e;
	if (!add)
		return NONE;
	id = add_string(t, s, n, i, h);
	if (id != NONE && (uint64_t)t->n * 2 > t->mask && rehash(t) != 0) {
		t->index[i] = EMPTY; /* keep the table consistent: forget it again */
		t->n--;
		return NONE;
	}
	return id;
}

/* ---------------------------------------------------------------- building */

int rp_aiq_init(struct rp_aiq *a, uint32_t max_nodes)
{
	memset(a, 0, sizeof(*a));
	a->max_nodes = max_nodes ? max_nodes : 1u << 22;
	if (rp_strtab_init(&a->uuids) || rp_strtab_init(&a->names)) {
		rp_aiq_free(a);
		return -ENOMEM;
	}
	return 0;
}

void rp_aiq_free(struct rp_aiq *a)
{
	rp_strtab_free(&a->uuids);
	rp_strtab_free(&a->names);
	free(a->nodes);
	free(a->roots);
	free(a->u);
	free(a->stack);
	free(a->last_child);
	free(a->order);
	free(a->metrics);
	free(a->seg_t);
	free(a->seg_level);
	memset(a, 0, sizeof(*a));
}

uint32_t rp_aiq_uuid(struct rp_aiq *a, const char *s, size_t n, bool add)
{
	uint32_t id = rp_strtab_get(&a->uuids, s, n, add), old = a->cap_u;

	if (id == NONE)
		return NONE;
	if (!grow((void **)&a->u, &a->cap_u, sizeof(*a->u), id + 1))
		return NONE;
	if (a->cap_u > old)
		memset(a->u + old, 0, (size_t)(a->cap_u - old) * sizeof(*a->u));
	return id;
}

uint32_t rp_aiq_name(struct rp_aiq *a, const char *s, size_t n)
{
	return rp_strtab_get(&a->names, s, n, true);
}

/* A START: a new call under the top of the stack, or a top-level one. */
static int start_call(struct rp_aiq *a, const struct rp_aiq_step *s, uint32_t *depth)
{
	struct rp_aiq_uuid *u = &a->u[s->uuid];
	uint32_t id = a->n_nodes, req = a->request + 1, d = *depth;

	if (a->n_nodes >= a->max_nodes) {
		a->c.nodes_dropped++;
		return 0;
	}
	if (!grow((void **)&a->nodes, &a->cap_nodes, sizeof(*a->nodes), id + 1))
		return -ENOMEM;
	if (d + 1 > a->cap_stack) { /* the stack and its last-child column grow together */
		uint32_t cap = a->cap_stack;
		if (!grow((void **)&a->stack, &cap, sizeof(*a->stack), d + 1))
			return -ENOMEM;
		uint32_t *lc = realloc(a->last_child, (size_t)cap * sizeof(*lc));
		if (lc == NULL)
			return -ENOMEM;
		a->last_child = lc;
		a->cap_stack = cap;
	}
	a->nodes[id] = (struct rp_aiq_node){ .start = s->ts,
					     .end = s->ts,
					     .uuid = s->uuid,
					     .name = s->name,
					     .first_child = NONE,
					     .next_sibling = NONE,
					     .type = s->type };
	a->n_nodes++;
	a->c.calls++;
	a->c.duplicate_uuids += u->seen;
	u->seen = true;
	if (d > 0) {
		uint32_t p = a->stack[d - 1];
		if (a->last_child[d - 1] == NONE)
			a->nodes[p].first_child = id;
		else
			a->nodes[a->last_child[d - 1]].next_sibling = id;
		a->last_child[d - 1] = id;
	} else if (u->top_req == req) { /* top_level_dict[uuid] = node: same slot */
		a->roots[u->top_slot] = id;
		a->c.replaced_roots++;
	} else {
		if (!grow((void **)&a->roots, &a->cap_roots, sizeof(*a->roots), a->n_roots + 1))
			return -ENOMEM;
		u->top_req = req;
		u->top_slot = a->n_roots;
		a->roots[a->n_roots++] = id;
	}
	a->stack[d] = id;
	a->last_child[d] = NONE;
	*depth = d + 1;
	u->partial = id;
	u->partial_req = req;
	return 0;
}

/* An END: ends the UUID's pending call; pops it only if it is the top. */
static void end_call(struct rp_aiq *a, const struct rp_aiq_step *s, uint32_t *depth)
{
	struct rp_aiq_uuid *u = s->uuid < a->cap_u ? &a->u[s->uuid] : NULL;
	struct rp_aiq_node *n;

	if (u == NULL || u->partial_req != a->request + 1) {
		a->c.end_unmatched++;
		return;
	}
	n = &a->nodes[u->partial];
	if (*depth > 0 && a->nodes[a->stack[*depth - 1]].uuid == s->uuid)
		(*depth)--;
	else
		a->c.end_not_top++;
	n->end = s->ts;
	n->ended = true;
	u->partial_req = 0;
}

int rp_aiq_request_part(struct rp_aiq *a, const struct rp_aiq_step *steps, size_t n, bool last)
{
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		if (steps[i].start)
			err = start_call(a, &steps[i], &a->depth);
		else
			end_call(a, &steps[i], &a->depth);
	}
	if (last) {
		a->request++;
		a->depth = 0;
	}
	return err;
}

int rp_aiq_request(struct rp_aiq *a, const struct rp_aiq_step *steps, size_t n)
{
	return rp_aiq_request_part(a, steps, n, true);
}

/* ---------------------------------------------------------------- figures */

/* The toolkit's all_nodes: roots in order, each depth-first, children in order. */
static int flatten(struct rp_aiq *a, uint32_t *stack)
{
	a->order = malloc(((size_t)a->n_nodes + 1) * sizeof(*a->order));
	if (a->order == NULL)
		return -ENOMEM;
	for (uint32_t r = 0; r < a->n_roots; r++) {
		uint32_t cur = a->roots[r], sp = 0;

		do
			a->order[a->n_order++] = cur;
		while (rp_aiq_walk_next(a, &cur, stack, &sp));
	}
	return 0;
}

/* node_metrics: one entry per UUID at its first position, holding the last call. */
static int build_metrics(struct rp_aiq *a)
{
	uint32_t *pos = malloc(((size_t)a->uuids.n + 1) * sizeof(*pos));

	a->metrics = malloc(((size_t)a->n_order + 1) * sizeof(*a->metrics));
	if (pos == NULL || a->metrics == NULL) {
		free(pos);
		return -ENOMEM;
	}
	memset(pos, 0xff, ((size_t)a->uuids.n + 1) * sizeof(*pos));
	for (uint32_t i = 0; i < a->n_order; i++) {
		uint32_t n = a->order[i], u = a->nodes[n].uuid;
		if (pos[u] == NONE)
			pos[u] = a->n_metrics++;
		a->metrics[pos[u]] = n;
	}
	free(pos);
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

#define double_before(x, y) (*(x) < *(y))
RP_SORT_DEFINE(sort_doubles, double, double_before)

/*
 * compute_time_based_concurrency: the step function of open calls over [first start,
 * last end], zero-length segments dropped. Starts and ends sorted apart and merged:
 * the level of a segment is the sum of every change before it, whatever the order
 * the toolkit's stable sort put simultaneous changes in.
 */
static int segments(struct rp_aiq *a)
{
	uint32_t n = a->n_order, i = 0, j = 0, k = 0;
	double *st = malloc(((size_t)n + 1) * sizeof(double));
	double *en = malloc(((size_t)n + 1) * sizeof(double));
	int64_t level = 0;
	double prev;

	a->seg_t = malloc(((size_t)n * 2 + 1) * sizeof(double));
	a->seg_level = malloc(((size_t)n * 2 + 1) * sizeof(uint32_t));
	if (!st || !en || !a->seg_t || !a->seg_level) {
		free(st);
		free(en);
		return -ENOMEM;
	}
	for (uint32_t x = 0; x < n; x++) {
		const struct rp_aiq_node *nd = &a->nodes[a->order[x]];
		if (nd->start > nd->end)
			continue; /* "partial or invalid => skip": not reachable, kept */
		st[k] = nd->start;
		en[k++] = nd->end;
	}
	if (!sort_doubles(st, k))
		qsort(st, k, sizeof(double), cmp_double);
	if (!sort_doubles(en, k))
		qsort(en, k, sizeof(double), cmp_double);
	prev = k ? st[0] : 0.0;
	while (i < k || j < k) {
		double t = j >= k || (i < k && st[i] <= en[j]) ? st[i] : en[j];
		if (t > prev) {
			a->seg_t[a->n_seg] = prev;
			a->seg_level[a->n_seg++] = (uint32_t)level;
		}
		for (; i < k && st[i] == t; i++)
			level++;
		for (; j < k && en[j] == t; j++)
			level--;
		prev = t;
	}
	a->seg_t[a->n_seg] = prev;
	free(st);
	free(en);
	return 0;
}

/* concurrency_at_percentile over the per-level totals, as the toolkit sums them. */
static double percentile(const double *dur, uint32_t n_lv, double total, double p)
{
	double threshold = total * (p / 100.0), accum = 0.0;
	uint32_t last = 0;

	for (uint32_t c = 0; c < n_lv; c++) {
		if (dur[c] == 0.0)
			continue; /* not a key of concurrency_durations */
		accum += dur[c];
		if (accum >= threshold)
			return (double)c;
		last = c;
	}
	return (double)last;
}

static int percentiles(struct rp_aiq *a)
{
	uint32_t n_lv = 1;
	double total = 0.0, *dur;

	for (uint32_t k = 0; k < a->n_seg; k++)
		if (a->seg_level[k] + 1 > n_lv)
			n_lv = a->seg_level[k] + 1;
	dur = calloc(n_lv, sizeof(*dur));
	if (dur == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < a->n_seg; k++) {
		double len = a->seg_t[k + 1] - a->seg_t[k];
		total += len;
		dur[a->seg_level[k]] += len;
	}
	if (total > 0.0) {
		a->p50 = percentile(dur, n_lv, total, 50);
		a->p90 = percentile(dur, n_lv, total, 90);
		a->p95 = percentile(dur, n_lv, total, 95);
		a->p99 = percentile(dur, n_lv, total, 99);
	}
	free(dur);
	return 0;
}

/* find_midpoint_concurrency: the segment with start <= mid < end, else 0. */
static uint32_t midpoint(const struct rp_aiq *a, const struct rp_aiq_node *n)
{
	double mid = n->start >= n->end ? n->start : 0.5 * (n->start + n->end);
	uint32_t lo = 0, hi = a->n_seg;

	if (a->n_seg == 0 || !(mid >= a->seg_t[0]) || !(mid < a->seg_t[a->n_seg]))
		return 0;
	while (hi - lo > 1) { /* seg_t[lo] <= mid < seg_t[hi] */
		uint32_t m = lo + (hi - lo) / 2;
		if (a->seg_t[m] <= mid)
			lo = m;
		else
			hi = m;
	}
	return a->seg_level[lo];
}

struct ival {
	double s, e;
	uint32_t seq;
};

static int cmp_ival(const void *x, const void *y)
{
	const struct ival *a = x, *b = y;

	if (a->s != b->s)
		return a->s < b->s ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq; /* Python's sort is stable */
}

#define ival_before(x, y) (cmp_ival((x), (y)) < 0)
RP_SORT_DEFINE(sort_ivals, struct ival, ival_before)

/* compute_self_time: duration minus the union of the children, clamped to the call. */
static double self_time(const struct rp_aiq *a, const struct rp_aiq_node *n, struct ival *iv)
{
	uint32_t k = 0;
	double cs, ce, covered = 0.0, d = rp_aiq_duration(n), r;

	if (n->first_child == NONE)
		return d;
	for (uint32_t c = n->first_child; c != NONE; c = a->nodes[c].next_sibling, k++)
		iv[k] = (struct ival){ a->nodes[c].start, a->nodes[c].end, k };
	if (!sort_ivals(iv, k))
		qsort(iv, k, sizeof(*iv), cmp_ival);
	cs = iv[0].s;
	ce = iv[0].e;
	for (uint32_t i = 1; i <= k; i++) {
		if (i < k && iv[i].s <= ce) {
			ce = iv[i].e > ce ? iv[i].e : ce; /* max(cur_end, e) */
			continue;
		}
		double s = n->start > cs ? n->start : cs; /* max(s, start_time) */
		double e = n->end < ce ? n->end : ce;	  /* min(e, end_time) */
		if (e > s)
			covered += e - s;
		if (i < k) {
			cs = iv[i].s;
			ce = iv[i].e;
		}
	}
	r = d - covered;
	return r > 0.0 ? r : 0.0;
}

static int node_figures(struct rp_aiq *a)
{
	uint32_t most = 1; /* the most children of one call: the scratch self_time needs */
	struct ival *iv;

	for (uint32_t i = 0; i < a->n_order; i++) {
		uint32_t k = 0;
		for (uint32_t c = a->nodes[a->order[i]].first_child; c != NONE;
		     c = a->nodes[c].next_sibling)
			k++;
		most = k > most ? k : most;
	}
	iv = malloc((size_t)most * sizeof(*iv));

	if (iv == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->n_order; i++) {
		struct rp_aiq_node *n = &a->nodes[a->order[i]];
		n->self = self_time(a, n, iv);
		n->mid = midpoint(a, n);
		a->c.open_at_end += !n->ended;
	}
	for (uint32_t i = a->n_order; i-- > 0;) { /* children before their parent */
		struct rp_aiq_node *n = &a->nodes[a->order[i]];
		double total = n->self;
		for (uint32_t c = n->first_child; c != NONE; c = a->nodes[c].next_sibling)
			total += a->nodes[c].subtree;
		n->subtree = total;
	}
	free(iv);
	return 0;
}

/* sorted(node_metrics, key=score, reverse=True)[:5]: ties keep their order. */
static void top5(struct rp_aiq *a)
{
	for (uint32_t i = 0; i < a->n_metrics; i++) {
		uint32_t n = a->metrics[i], at = a->n_top;
		double v = a->nodes[n].subtree;

		while (at > 0 && a->nodes[a->top[at - 1]].subtree < v)
			at--;
		if (at >= 5)
			continue;
		if (a->n_top < 5)
			a->n_top++;
		memmove(&a->top[at + 1], &a->top[at], (a->n_top - 1 - at) * sizeof(a->top[0]));
		a->top[at] = n;
	}
}

int rp_aiq_finish(struct rp_aiq *a)
{
	uint32_t *stack = malloc(((size_t)a->n_nodes + 1) * sizeof(*stack));
	int err;

	if (stack == NULL)
		return -ENOMEM;
	err = flatten(a, stack);
	free(stack);
	if (err == 0)
		err = build_metrics(a);
	if (err == 0)
		err = segments(a);
	if (err == 0)
		err = percentiles(a);
	if (err == 0)
		err = node_figures(a);
	if (err == 0)
		top5(a);
	return err;
}
