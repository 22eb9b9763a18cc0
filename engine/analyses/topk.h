/* SPDX-License-Identifier: MIT */
/*
 * Bounded structures behind the bottleneck lists (docs/analyses.md):
 *
 *  - struct rp_spacesaving: weighted Space-Saving (Metwally, Agrawal, El Abbadi, ICDT
 *    2005; weighted form as in Berinde, Indyk, Cormode, Strauss, TODS 2010), m
 *    counters over uint32 keys (name ids) with uint64 weights (counts or ns), and
 *    the mergeable-summary merge (Agarwal et al., PODS 2012) for snapshots of
 *    several processes.
 *  - rp_topk_select(): exact k largest of a value array indexed by name id.
 *  - struct rp_slowest: the k slowest spans (exemplars), a bounded min-heap.
 *
 * Space-Saving guarantees. W = rp_spacesaving_total(), f(x) the true weight of key x
 * (everything offered to this summary and to every summary merged into it), and
 * F = rp_spacesaving_floor(). At all times, after any sequence of offers and merges
 * (of summaries with the same or a larger m):
 *   (1) every counter:   count - error <= f(key) <= count
 *   (2) every counter:   error <= F, hence count - f(key) <= F
 *   (3) any key not in the summary has f(x) <= F, so every key with f(x) > F is in it
 *   (4) F <= W / m; more precisely m F + sum over counters of (count - F) <= W
 *   (5) with at most m distinct keys ever offered, F = 0 and every count is exact.
 * So the classic bounds hold after merges with W the union's total: a key of weight
 * > W/m is never missed and no count is over by more than W/m. For the i-th largest
 * reported count c_i and the i-th largest true weight t_i: t_i <= c_i <= t_i + F.
 * Weights saturate at UINT64_MAX (584 years of ns); past that the bounds are void.
 *
 * Memory (bytes, fixed at init, nothing allocated afterwards):
 *   rp_spacesaving: sizeof(struct rp_spacesaving) + RP_SPACESAVING_MEMSIZE(m), where
 *     RP_SPACESAVING_MEMSIZE(m) = 24 m + 4 H(m), H(m) = the smallest power of two
 *     >= 2m; so at most 40 m (m = 1000: 32,192 bytes).
 *   rp_slowest:     sizeof(struct rp_slowest) + RP_SLOWEST_MEMSIZE(k) = 72 k.
 *   rp_topk_select: none besides the caller's k output entries (24 k).
 */
#ifndef RP_ENGINE_TOPK_H
#define RP_ENGINE_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One reported key: the true weight lies in [count - error, count]. */
struct rp_topk_entry {
	uint64_t count;
	uint64_t error;
	uint32_t key;
};

/* --- Space-Saving ------------------------------------------------------------------- */

#define RP_SPACESAVING_MAX (1u << 28) /* the largest m */

/* The hash index: the smallest power of two >= 2m (load factor <= 1/2). */
/* clang-format would read "(m) - 1" as a cast. */
/* clang-format off */
#define RP_SPACESAVING_SLOTS(m)   ((size_t)2 << (63 - __builtin_clzll(2 * (uint64_t)(m) - 1)))
#define RP_SPACESAVING_MEMSIZE(m) (24 * (size_t)(m) + 4 * RP_SPACESAVING_SLOTS(m))
/* clang-format on */

struct rp_ss_counter {
	uint64_t count;
	uint64_t error;
	uint32_t key;
	uint32_t slot; /* its entry in the key index */
};

struct rp_spacesaving {
	struct rp_ss_counter *c; /* a min-heap c[0..n): smallest count, then largest key */
	uint32_t *slot;		 /* key -> place in c[]; UINT32_MAX = empty */
	uint32_t mask;		 /* slots - 1 */
	uint32_t m, n;
	uint64_t total; /* W */
	uint64_t floor; /* F: bound on any absent key's weight and on every error */
	void *owned;	/* set by rp_spacesaving_init(), freed by _fini() */
};

/**
 * rp_spacesaving_init_mem() - a summary of @m counters in the caller's memory.
 * @mem: 8-byte aligned, at least RP_SPACESAVING_MEMSIZE(@m) bytes, owned by the
 *       caller and untouched by rp_spacesaving_fini().
 * @return 0, or -EINVAL (m == 0, m > RP_SPACESAVING_MAX, @mem too small or misaligned).
 */
int rp_spacesaving_init_mem(struct rp_spacesaving *s, uint32_t m, void *mem, size_t size);

/** rp_spacesaving_init() - as _init_mem() with memory it allocates. @return 0 or -errno. */
int rp_spacesaving_init(struct rp_spacesaving *s, uint32_t m);

/** rp_spacesaving_fini() - free what _init() allocated; NULL and zeroed objects are fine. */
void rp_spacesaving_fini(struct rp_spacesaving *s);

/** rp_spacesaving_reset() - forget every key; O(m). */
void rp_spacesaving_reset(struct rp_spacesaving *s);

/**
 * rp_spacesaving_offer() - add @weight to @key. O(log m), no allocation. A zero
 * weight for an absent key changes nothing.
 */
void rp_spacesaving_offer(struct rp_spacesaving *s, uint32_t key, uint64_t weight);

/**
 * rp_spacesaving_get() - the bounds for one key.
 * @out: its counter; for an absent key count = error = floor (f in [0, floor]).
 * @return true when @key has a counter.
 */
bool rp_spacesaving_get(const struct rp_spacesaving *s, uint32_t key, struct rp_topk_entry *out);

/**
 * rp_spacesaving_top() - the @k largest counters, by count descending then key
 * ascending, into @out (room for @k). O(m log k). @return how many were written.
 */
uint32_t rp_spacesaving_top(const struct rp_spacesaving *s, struct rp_topk_entry *out, uint32_t k);

/**
 * rp_spacesaving_merge() - fold @src into @dst (Agarwal et al. 2012): every key of
 * either gets the sum of its upper bounds (an absent key's upper bound is its
 * summary's floor) and of its errors; the m largest by (count desc, key asc) stay,
 * and the new floor is max(floor(dst) + floor(src), the largest count dropped).
 * Guarantees (1)-(5) above then hold for the union with W = W(dst) + W(src).
 * O(m log m), no allocation; @src is unchanged.
 * @return 0, or -EINVAL when src->m < dst->m (the bound needs m(src) >= m(dst)).
 */
int rp_spacesaving_merge(struct rp_spacesaving *dst, const struct rp_spacesaving *src);

/** rp_spacesaving_total() - W, the weight offered (and merged) so far. */
static inline uint64_t rp_spacesaving_total(const struct rp_spacesaving *s)
{
	return s->total;
}

/** rp_spacesaving_floor() - F: absent keys weigh <= F, errors are <= F <= W/m. */
static inline uint64_t rp_spacesaving_floor(const struct rp_spacesaving *s)
{
	return s->floor;
}

/** rp_spacesaving_size() - counters in use (<= m). */
static inline uint32_t rp_spacesaving_size(const struct rp_spacesaving *s)
{
	return s->n;
}

/* --- exact top-k -------------------------------------------------------------------- */

/**
 * rp_topk_select() - the @k largest of @values[0..@n), ties by index ascending,
 * written to @out best first as (key = index, count = value, error = 0).
 * O(n log k), no memory besides @out. @return min(@n, @k).
 */
uint32_t rp_topk_select(const uint64_t *values, uint32_t n, uint32_t k, struct rp_topk_entry *out);

/* --- the k slowest spans ------------------------------------------------------------ */

/* A span kept as an example of where the time went. */
struct rp_span_exemplar {
	uint64_t track_id;
	uint64_t span_id;
	uint64_t start_ns;
	uint64_t dur_ns;
	uint64_t self_ns;
	uint64_t subtree_ns;
	uint32_t name_id;
	uint32_t source;	/* the engine's source index */
	uint32_t concurrency;	/* open spans at the midpoint, if known */
	uint16_t category_id;
	bool concurrency_known; /* false: the change-point history had moved on */
	uint64_t charged_ns;	/* a request: batched work charged to it (charge.h) */
};
_Static_assert(sizeof(struct rp_span_exemplar) == 72, "an exemplar is 72 bytes (memory bounds)");

#define RP_SLOWEST_MEMSIZE(k) (sizeof(struct rp_span_exemplar) * (size_t)(k))

/*
 * The order: a is slower than b when a lasted longer; for equal durations the one
 * that started first, then the smaller span id, then the smaller track id. The
 * structure keeps the k slowest in that order (a total order on those four fields;
 * exemplars equal in all four are interchangeable).
 */
struct rp_slowest {
	struct rp_span_exemplar *heap; /* the fastest kept at heap[0] */
	uint32_t k, n;
	void *owned;
	uint64_t floor_ns; /* 0 while n < k, else heap[0].dur_ns: a shorter span is not
			      among the slowest (one test per span closed) */
};

/**
 * rp_slowest_init_mem() - room for @k exemplars in the caller's memory.
 * @mem: 8-byte aligned, at least RP_SLOWEST_MEMSIZE(@k) bytes, owned by the caller.
 * @return 0 or -EINVAL (k == 0, @mem too small or misaligned).
 */
int rp_slowest_init_mem(struct rp_slowest *s, uint32_t k, void *mem, size_t size);

/** rp_slowest_init() - as _init_mem() with memory it allocates. @return 0 or -errno. */
int rp_slowest_init(struct rp_slowest *s, uint32_t k);

/** rp_slowest_fini() - free what _init() allocated; NULL and zeroed objects are fine. */
void rp_slowest_fini(struct rp_slowest *s);

/** rp_slowest_reset() - keep nothing. */
void rp_slowest_reset(struct rp_slowest *s);

/**
 * rp_slowest_offer() - keep @e (copied) if it is among the k slowest so far.
 * O(1) when it is not, O(log k) when it is. @return true when kept.
 */
bool rp_slowest_offer(struct rp_slowest *s, const struct rp_span_exemplar *e);

/**
 * rp_slowest_sorted() - the kept exemplars, slowest first, into @out (room for k).
 * @return how many (<= k).
 */
uint32_t rp_slowest_sorted(const struct rp_slowest *s, struct rp_span_exemplar *out);

/**
 * rp_slowest_merge() - offer every exemplar of @src to @dst: @dst then holds the
 * k(dst) slowest of the union. @src is unchanged.
 */
void rp_slowest_merge(struct rp_slowest *dst, const struct rp_slowest *src);

#endif
