// SPDX-License-Identifier: MIT
/*
 * Bounded top-k structures: weighted Space-Saving, exact top-k selection and the
 * k slowest spans.
 *
 * Space-Saving (Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and
 * Top-k Elements in Data Streams", ICDT 2005), weighted as in Berinde, Indyk,
 * Cormode, Strauss, "Space-optimal heavy hitters with strong error bounds", TODS
 * 2010: an offer to a key with a counter adds to it; to an absent key it takes a
 * free counter, or, when all m are in use, the smallest one (count mu, which then
 * becomes the floor F), giving it count mu + w and error mu. The counters themselves
 * form a min-heap, ordered by count and then largest key first, so eviction is
 * deterministic; a linear-probing index (load <= 1/2, backward-shift deletion) maps
 * keys to heap places, and each counter knows its index slot, so both sides move in
 * O(1) and an eviction needs no second lookup.
 *
 * Invariants, F the floor, W the total, n the counters in use:
 *   (I) m F + sum (count - F) <= W      (equality for a summary fed only by offers)
 *   (J) every count >= F, every error <= F; F > 0 only when n == m
 *   (K) a key without a counter has true weight <= F
 * (I) and (J) give F <= W/m; the error bounds in topk.h follow. Offers keep them:
 * an eviction removes a counter of count mu >= F and adds one of mu + w, F := mu.
 *
 * Merge (Agarwal, Cormode, Huang, Phillips, Wei, Yi, "Mergeable Summaries", PODS
 * 2012, in the Space-Saving form of Cafaro, Pulimeno, Tempesta, "A parallel space
 * saving algorithm for frequent items and the Hurwitz zeta distribution", Inf. Sci.
 * 2016): a key gets c1 + c2, an absent side contributing its floor to count and
 * error; the m largest survive and
 * F := max(F1 + F2, largest dropped count). With g = count - (F1 + F2), sum g over
 * the union <= W - m(F1 + F2) by (I) of both sides (src with m' >= m), and keeping
 * the top m and raising F by the largest dropped g keeps (I); (J) and (K) are direct.
 * Merging without scratch memory: dst's counters are updated in place, then src's
 * other keys compete for the heap. A dst key that src also holds may be evicted
 * before src's loop reaches it; it then comes back as a candidate whose count is
 * at most the count it was evicted with, so it loses against the heap's minimum,
 * which only grows, and changes nothing.
 *
 * The k slowest spans: a min-heap of k exemplars with the fastest at the root; an
 * offer not slower than the root is refused in O(1).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <assert.h>

#include "topk.h"

#define EMPTY UINT32_MAX

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r = a + b;

	return r < a ? UINT64_MAX : r;
}

/* --- the Space-Saving key index --------------------------------------------------- */

static uint32_t home(const struct rp_spacesaving *s, uint32_t key)
{
	return (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 32) & s->mask;
}

/* The slot holding @key, or the empty slot where it would go. */
static uint32_t slot_find(const struct rp_spacesaving *s, uint32_t key)
{
	uint32_t i = home(s, key);

	while (s->slot[i] != EMPTY && s->c[s->slot[i]].key != key)
		i = (i + 1) & s->mask;
	return i;
}

/* Backward-shift deletion: no tombstones, so probes stay short forever. */
static void slot_delete(struct rp_spacesaving *s, uint32_t i)
{
	uint32_t j = i;

	for (;;) {
		j = (j + 1) & s->mask;
		if (s->slot[j] == EMPTY)
			break;
		uint32_t h = home(s, s->c[s->slot[j]].key);
		/* The entry at j may move to i unless its home lies in (i, j]. */
		if (((j - h) & s->mask) >= ((j - i) & s->mask)) {
			s->slot[i] = s->slot[j];
			s->c[s->slot[i]].slot = i;
			i = j;
		}
	}
	s->slot[i] = EMPTY;
}

/* --- the Space-Saving heap ---------------------------------------------------------- */

/* a goes nearer the root (is evicted first): smaller count, then larger key. */
static bool ss_before(const struct rp_ss_counter *a, const struct rp_ss_counter *b)
{
	return a->count < b->count || (a->count == b->count && a->key > b->key);
}

static void ss_place(struct rp_spacesaving *s, uint32_t pos, const struct rp_ss_counter *x)
{
	s->c[pos] = *x;
	s->slot[x->slot] = pos;
}

static void ss_sift_up(struct rp_spacesaving *s, uint32_t pos)
{
	struct rp_ss_counter x = s->c[pos];

	while (pos > 0) {
		uint32_t parent = (pos - 1) / 2;

		if (!ss_before(&x, &s->c[parent]))
			break;
		ss_place(s, pos, &s->c[parent]);
		pos = parent;
	}
	ss_place(s, pos, &x);
}

static void ss_sift_down(struct rp_spacesaving *s, uint32_t pos)
{
	struct rp_ss_counter x = s->c[pos];

	for (;;) {
		uint32_t child = 2 * pos + 1;

		if (child >= s->n)
			break;
		if (child + 1 < s->n && ss_before(&s->c[child + 1], &s->c[child]))
			child++;
		if (!ss_before(&s->c[child], &x))
			break;
		ss_place(s, pos, &s->c[child]);
		pos = child;
	}
	ss_place(s, pos, &x);
}

static void ss_heapify(struct rp_spacesaving *s)
{
	for (uint32_t i = s->n / 2; i-- > 0;)
		ss_sift_down(s, i);
}

/* --- Space-Saving ------------------------------------------------------------------- */

int rp_spacesaving_init_mem(struct rp_spacesaving *s, uint32_t m, void *mem, size_t size)
{
	memset(s, 0, sizeof(*s));
	if (m == 0 || m > RP_SPACESAVING_MAX || mem == NULL || ((uintptr_t)mem & 7) != 0 ||
	    size < RP_SPACESAVING_MEMSIZE(m))
		return -EINVAL;
	s->c = mem;
	s->slot = (uint32_t *)(s->c + m);
	s->mask = (uint32_t)(RP_SPACESAVING_SLOTS(m) - 1);
	s->m = m;
	rp_spacesaving_reset(s);
	return 0;
}

int rp_spacesaving_init(struct rp_spacesaving *s, uint32_t m)
{
	void *mem;
	int err;

	memset(s, 0, sizeof(*s));
	if (m == 0 || m > RP_SPACESAVING_MAX)
		return -EINVAL;
	mem = malloc(RP_SPACESAVING_MEMSIZE(m));
	if (mem == NULL)
		return -ENOMEM;
	err = rp_spacesaving_init_mem(s, m, mem, RP_SPACESAVING_MEMSIZE(m));
	if (err) {
		free(mem);
		return err;
	}
	s->owned = mem;
	return 0;
}

void rp_spacesaving_fini(struct rp_spacesaving *s)
{
	if (s == NULL)
		return;
	free(s->owned);
	memset(s, 0, sizeof(*s));
}

void rp_spacesaving_reset(struct rp_spacesaving *s)
{
	memset(s->slot, 0xff, ((size_t)s->mask + 1) * sizeof(*s->slot));
	s->n = 0;
	s->total = 0;
	s->floor = 0;
}

/* A new counter for @key, which has no counter and would go to slot @i; n < m. */
static void ss_insert(struct rp_spacesaving *s, uint32_t i, uint32_t key, uint64_t count,
		      uint64_t error)
{
	uint32_t pos = s->n++;

	s->c[pos] = (struct rp_ss_counter){ count, error, key, i };
	s->slot[i] = pos;
	ss_sift_up(s, pos);
}

/* @key, which has no counter, takes over the smallest one. */
static void ss_replace_min(struct rp_spacesaving *s, uint32_t key, uint64_t count, uint64_t error)
{
	uint32_t i;

	slot_delete(s, s->c[0].slot);
	i = slot_find(s, key);
	s->c[0] = (struct rp_ss_counter){ count, error, key, i };
	s->slot[i] = 0;
	ss_sift_down(s, 0);
}

void rp_spacesaving_offer(struct rp_spacesaving *s, uint32_t key, uint64_t weight)
{
	uint32_t i;

	if (weight == 0)
		return;
	i = slot_find(s, key);
	s->total = sat_add(s->total, weight);
	if (s->slot[i] != EMPTY) {
		struct rp_ss_counter *c = &s->c[s->slot[i]];

		c->count = sat_add(c->count, weight);
		ss_sift_down(s, s->slot[i]);
	} else if (s->n < s->m) {
		/* F = 0 until the first eviction: a new key's count is exact. */
		ss_insert(s, i, key, sat_add(s->floor, weight), s->floor);
	} else {
		uint64_t mu = s->c[0].count; /* >= F; the new floor */

		s->floor = mu;
		ss_replace_min(s, key, sat_add(mu, weight), mu);
	}
}

bool rp_spacesaving_get(const struct rp_spacesaving *s, uint32_t key, struct rp_topk_entry *out)
{
	uint32_t i = slot_find(s, key);

	if (s->slot[i] == EMPTY) {
		*out = (struct rp_topk_entry){ s->floor, s->floor, key };
		return false;
	}
	*out = (struct rp_topk_entry){ s->c[s->slot[i]].count, s->c[s->slot[i]].error, key };
	return true;
}

/* --- bounded selection into rp_topk_entry arrays ------------------------------------- */

/* a is worse than b: smaller count, then larger key. */
static bool entry_worse(const struct rp_topk_entry *a, const struct rp_topk_entry *b)
{
	return a->count < b->count || (a->count == b->count && a->key > b->key);
}

/* Min-heap on entry_worse: the worst of h[0..n) at h[0]. */
static void entry_sift_down(struct rp_topk_entry *h, uint32_t n, uint32_t pos)
{
	struct rp_topk_entry x = h[pos];

	for (;;) {
		uint32_t child = 2 * pos + 1;

		if (child >= n)
			break;
		if (child + 1 < n && entry_worse(&h[child + 1], &h[child]))
			child++;
		if (!entry_worse(&h[child], &x))
			break;
		h[pos] = h[child];
		pos = child;
	}
	h[pos] = x;
}

static void entry_sift_up(struct rp_topk_entry *h, uint32_t pos)
{
	struct rp_topk_entry x = h[pos];

	while (pos > 0 && entry_worse(&x, &h[(pos - 1) / 2])) {
		h[pos] = h[(pos - 1) / 2];
		pos = (pos - 1) / 2;
	}
	h[pos] = x;
}

/* Keep the k best seen in h[0..*n). */
static void entry_offer(struct rp_topk_entry *h, uint32_t *n, uint32_t k,
			const struct rp_topk_entry *e)
{
	if (*n < k) {
		h[*n] = *e;
		entry_sift_up(h, (*n)++);
	} else if (k > 0 && entry_worse(&h[0], e)) {
		h[0] = *e;
		entry_sift_down(h, k, 0);
	}
}

/* Heapsort in place: the worst goes to the end each round, leaving best first. */
static void entry_sort(struct rp_topk_entry *h, uint32_t n)
{
	while (n > 1) {
		struct rp_topk_entry t = h[0];

		h[0] = h[--n];
		h[n] = t;
		entry_sift_down(h, n, 0);
	}
}

uint32_t rp_topk_select(const uint64_t *values, uint32_t n, uint32_t k, struct rp_topk_entry *out)
{
	uint32_t len = 0;

	assert(values != NULL || n == 0);
	for (uint32_t i = 0; i < n; i++) {
		struct rp_topk_entry e = { values[i], 0, i };

		entry_offer(out, &len, k, &e);
	}
	entry_sort(out, len);
	return len;
}

uint32_t rp_spacesaving_top(const struct rp_spacesaving *s, struct rp_topk_entry *out, uint32_t k)
{
	uint32_t len = 0;

	for (uint32_t i = 0; i < s->n; i++) {
		struct rp_topk_entry e = { s->c[i].count, s->c[i].error, s->c[i].key };

		entry_offer(out, &len, k, &e);
	}
	entry_sort(out, len);
	return len;
}

/* --- Space-Saving merge ------------------------------------------------------------- */

/* Step 1: dst's keys get src's counter, or src's floor where src has none. */
static void merge_common(struct rp_spacesaving *dst, const struct rp_spacesaving *src)
{
	for (uint32_t i = 0; i < dst->n; i++) {
		struct rp_ss_counter *c = &dst->c[i];
		uint32_t j = slot_find(src, c->key);
		uint64_t add = src->floor, err = src->floor;

		if (src->slot[j] != EMPTY) {
			add = src->c[src->slot[j]].count;
			err = src->c[src->slot[j]].error;
		}
		c->count = sat_add(c->count, add);
		c->error = sat_add(c->error, err);
	}
	ss_heapify(dst);
}

/*
 * Step 2: src's other keys, with dst's old floor @f1 added, compete for the m places.
 * @dropped collects the largest count that lost.
 */
static void merge_rest(struct rp_spacesaving *dst, const struct rp_spacesaving *src, uint64_t f1,
		       uint64_t *dropped)
{
	for (uint32_t i = 0; i < src->n; i++) {
		const struct rp_ss_counter *c = &src->c[i];
		uint32_t j = slot_find(dst, c->key);
		struct rp_ss_counter cand = { sat_add(c->count, f1), sat_add(c->error, f1), c->key,
					      j };

		if (dst->slot[j] != EMPTY)
			continue;
		if (dst->n < dst->m) {
			ss_insert(dst, j, cand.key, cand.count, cand.error);
		} else if (!ss_before(&dst->c[0], &cand)) {
			*dropped = cand.count > *dropped ? cand.count : *dropped;
		} else {
			*dropped = dst->c[0].count > *dropped ? dst->c[0].count : *dropped;
			ss_replace_min(dst, cand.key, cand.count, cand.error);
		}
	}
}

int rp_spacesaving_merge(struct rp_spacesaving *dst, const struct rp_spacesaving *src)
{
	uint64_t f1 = dst->floor, f = sat_add(dst->floor, src->floor), dropped = 0;

	assert(dst != src);
	if (src->m < dst->m)
		return -EINVAL;
	merge_common(dst, src);
	merge_rest(dst, src, f1, &dropped);
	dst->total = sat_add(dst->total, src->total);
	dst->floor = f > dropped ? f : dropped;
	return 0;
}

/* --- the k slowest spans ------------------------------------------------------------ */

/* a is faster than b (goes nearer the root): the order in topk.h, reversed. */
static bool faster(const struct rp_span_exemplar *a, const struct rp_span_exemplar *b)
{
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns;
	if (a->start_ns != b->start_ns)
		return a->start_ns > b->start_ns;
	if (a->span_id != b->span_id)
		return a->span_id > b->span_id;
	return a->track_id > b->track_id;
}

static void x_sift_down(struct rp_span_exemplar *h, uint32_t n, uint32_t pos)
{
	struct rp_span_exemplar x = h[pos];

	for (;;) {
		uint32_t child = 2 * pos + 1;

		if (child >= n)
			break;
		if (child + 1 < n && faster(&h[child + 1], &h[child]))
			child++;
		if (!faster(&h[child], &x))
			break;
		h[pos] = h[child];
		pos = child;
	}
	h[pos] = x;
}

static void x_sift_up(struct rp_span_exemplar *h, uint32_t pos)
{
	struct rp_span_exemplar x = h[pos];

	while (pos > 0 && faster(&x, &h[(pos - 1) / 2])) {
		h[pos] = h[(pos - 1) / 2];
		pos = (pos - 1) / 2;
	}
	h[pos] = x;
}

int rp_slowest_init_mem(struct rp_slowest *s, uint32_t k, void *mem, size_t size)
{
	memset(s, 0, sizeof(*s));
	if (k == 0 || mem == NULL || ((uintptr_t)mem & 7) != 0 || size < RP_SLOWEST_MEMSIZE(k))
		return -EINVAL;
	s->heap = mem;
	s->k = k;
	return 0;
}

int rp_slowest_init(struct rp_slowest *s, uint32_t k)
{
	void *mem;

	memset(s, 0, sizeof(*s));
	if (k == 0)
		return -EINVAL;
	mem = calloc(k, sizeof(struct rp_span_exemplar));
	if (mem == NULL)
		return -ENOMEM;
	rp_slowest_init_mem(s, k, mem, RP_SLOWEST_MEMSIZE(k));
	s->owned = mem;
	return 0;
}

void rp_slowest_fini(struct rp_slowest *s)
{
	if (s == NULL)
		return;
	free(s->owned);
	memset(s, 0, sizeof(*s));
}

void rp_slowest_reset(struct rp_slowest *s)
{
	s->n = 0;
	s->floor_ns = 0;
}

bool rp_slowest_offer(struct rp_slowest *s, const struct rp_span_exemplar *e)
{
	if (s->n < s->k) {
		s->heap[s->n] = *e;
		x_sift_up(s->heap, s->n++);
	} else if (faster(&s->heap[0], e)) {
		s->heap[0] = *e;
		x_sift_down(s->heap, s->n, 0);
	} else {
		return false;
	}
	s->floor_ns = s->n < s->k ? 0 : s->heap[0].dur_ns;
	return true;
}

uint32_t rp_slowest_sorted(const struct rp_slowest *s, struct rp_span_exemplar *out)
{
	uint32_t n = s->n;

	if (n > 0)
		memcpy(out, s->heap, n * sizeof(*out));
	/* Heapsort: the fastest goes to the end each round, leaving slowest first. */
	for (uint32_t len = n; len > 1;) {
		struct rp_span_exemplar t = out[0];

		out[0] = out[--len];
		out[len] = t;
		x_sift_down(out, len, 0);
	}
	return n;
}

void rp_slowest_merge(struct rp_slowest *dst, const struct rp_slowest *src)
{
	assert(dst != src);
	for (uint32_t i = 0; i < src->n; i++)
		rp_slowest_offer(dst, &src->heap[i]);
}
