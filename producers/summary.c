// SPDX-License-Identifier: MIT
/*
 * Summaries at the source: the slow paths of the producer's folding of short calls
 * (docs/summaries.md; the fast path is rp_sum_begin/rp_sum_end in ringprof.h).
 *
 * A thread with summaries on pushes a level per BEGIN and writes nothing. At a
 * level's END, a call shorter than the threshold that was never written folds into
 * its node (count, total, self, min, max in ticks) in the thread's table; any other
 * END writes, in order, the BEGINs still pending from the lowest up to its own (with
 * their own start times), the summaries of the calls folded under it, and the END
 * with its self time (RP_SPAN_SELF: the producer knows its children exactly, folded
 * ones included). The ring's times stay non-decreasing: a pending level started
 * after the last record written on the ring, because every write while it is open
 * (a long descendant's END, a flush, any other record of the thread: rp_sum_record)
 * first writes every pending BEGIN.
 *
 * The table: RP_SUM_NODES nodes allocated in order (a parent always before its
 * children), found by walking the parent's child list. A node's parent is another
 * node or a root anchor: an open level already written (or the track's root). The
 * nodes under a written level's anchor are written at that level's END, parents
 * first, as SUMMARY records hanging from that level, then dropped; trailing dropped
 * nodes are given back. The whole table is written at once (every pending BEGIN
 * first, so that every anchor is a written level) when it is full, and every
 * `period` ticks of a thread's ENDs; then it starts empty.
 *
 * A flush, or a span's END, that finds its ring more than half full doubles the
 * thread's threshold (up to thr_max), counts it and publishes it in the ring descriptor (summary_ns,
 * summary_raised): the engine's report says so. A flush with no room for all its
 * records writes none, and counts them dropped like any record refused.
 *
 * Memory: one struct rp_sum per ring (RP_SUM_NODES nodes of 64 bytes and RP_SHADOW
 * levels of 24: about 67 KiB), calloc'ed once per process with the shadows; pages
 * of rings no thread claims are never touched.
 */
#include <errno.h>
#include <stdlib.h>

#include "summary.h"

static struct {
	struct rp_sum *s;	/* rings of them; atomic (a fine name's first BEGIN may
				   allocate them: rp_sum_fine_attach) */
	uint32_t rings;
	uint64_t thr_ns;	/* RINGPROF_SUMMARY_NS; 0: off for every thread */
	uint64_t fine_ns;	/* the threshold of fine names (rp_begin_fine); 0: off */
} sm;

/* ns -> ticks and back, for thresholds (never for records: the engine converts). */
__extension__ typedef unsigned __int128 u128;

static uint64_t ns_to_ticks(const struct rp_wire_clock *c, uint64_t ns)
{
	u128 x = (u128)ns << c->shift;

	return c->mult ? (uint64_t)(x / c->mult) : ns;
}

static uint64_t ticks_to_ns(const struct rp_wire_clock *c, uint64_t ticks)
{
	return (uint64_t)(((u128)ticks * c->mult) >> c->shift);
}

static const struct rp_wire_clock *clk; /* the process's; set once, before any thread */

int rp_sum_alloc(uint32_t rings, uint64_t thr_ns, uint64_t fine_ns,
		 const struct rp_wire_clock *c)
{
	struct rp_sum *s;

	sm.thr_ns = thr_ns;
	sm.fine_ns = thr_ns ? thr_ns : fine_ns;
	clk = c;
	if (sm.s != NULL && sm.rings == rings)
		return 0; /* a fork child: its own copy */
	free(sm.s);
	sm.s = NULL;
	sm.rings = rings;
	if (thr_ns == 0)
		return 0; /* fine names only: allocated at the first one's BEGIN */
	s = calloc(rings, sizeof(*s));
	__atomic_store_n(&sm.s, s, __ATOMIC_RELAXED); /* no thread yet */
	return s ? 0 : -ENOMEM;
}

/* Summaries on for @t with threshold @thr_ns in slice @s, at @now (0: not read; the
 * first END then flushes and sets the period going). */
static void attach(struct rp_thread *t, struct rp_sum *s, uint64_t thr_ns, uint64_t now,
		   const struct rp_wire_clock *c)
{
	s->thr_ns = thr_ns;
	s->thr = ns_to_ticks(c, thr_ns);
	s->thr_max = ns_to_ticks(c, RP_SUM_THR_MAX_NS);
	s->period = ns_to_ticks(c, RP_SUM_PERIOD_NS);
	s->next_flush = now + s->period;
	s->used = 0;
	s->top = RP_SUM_NONE;
	/* Levels opened before the ring, or before a fine name turned summaries on:
	 * written, as far as this thread knows, with no start to measure self time
	 * from (the engine takes the summaries hanging from them as children). */
	t->spend = t->depth < t->scap ? t->depth : (uint16_t)t->scap;
	for (uint32_t i = 0; i < t->spend; i++)
		s->lv[i] = (struct rp_sum_level){ .start = now, .node = RP_SUM_NONE, .noself = 1 };
	__atomic_store_n(&t->ring->pending_ticks, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->ring->summary_ns, (uint32_t)thr_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&t->ring->summary_raised, 0, __ATOMIC_RELAXED);
	t->sum = s;
}

void rp_sum_attach(struct rp_thread *t, uint32_t idx, const struct rp_wire_clock *c)
{
	/* Relaxed: set before any thread existed (rp_sum_alloc), or by a fine name's
	 * first BEGIN, which this thread has not seen: then it is not ours to use. */
	struct rp_sum *s = __atomic_load_n(&sm.s, __ATOMIC_RELAXED);

	t->sum = NULL;
	if (sm.thr_ns == 0 || s == NULL || idx >= sm.rings || t->scap == 0)
		return;
	attach(t, &s[idx], sm.thr_ns, rp_clock_read(t->tsc), c);
}

/*
 * A thread with a ring and no summaries begins a fine name (rp_begin_fine): they go
 * on for it, with the fine names' threshold, from its current depth (the levels open
 * now are written spans). The slices are allocated at the first such BEGIN of the
 * process (calloc: only the pages of threads that fold are touched); a race of two
 * first BEGINs keeps one. False, and t->nofine set: never for this thread (the
 * threshold is 0, no memory, no shadow).
 */
bool rp_sum_fine_on(struct rp_thread *t, uint32_t idx, const struct rp_wire_clock *c)
{
	struct rp_sum *s = __atomic_load_n(&sm.s, __ATOMIC_ACQUIRE), *mine = NULL;

	if (sm.fine_ns == 0 || idx >= sm.rings || t->scap == 0) {
		t->nofine = 1;
		return false;
	}
	if (s == NULL && (mine = calloc(sm.rings, sizeof(*mine))) == NULL) {
		t->nofine = 1;
		return false;
	}
	/* Acquire/release: the zeroed slices before the pointer that publishes them. */
	if (s == NULL && !__atomic_compare_exchange_n(&sm.s, &s, mine, false, __ATOMIC_ACQ_REL,
						      __ATOMIC_ACQUIRE))
		free(mine); /* another thread's won: s is it */
	else if (s == NULL)
		s = mine;
	/* No clock read: this thread's times stay those of its records (a test's
	 * deterministic clock counts reads). */
	attach(t, &s[idx], sm.fine_ns, 0, c);
	return true;
}

/* ---- the table ---- */

static uint32_t node_new(struct rp_sum *s, uint32_t parent, uint32_t name, uint16_t level,
			 uint8_t imp)
{
	uint32_t i = s->used;

	if (i >= RP_SUM_NODES)
		return RP_SUM_NONE;
	s->used++;
	s->node[i] = (struct rp_sum_node){ .min = UINT64_MAX, .name = name, .parent = parent,
					   .kid = RP_SUM_NONE, .sib = RP_SUM_NONE,
					   .level = level, .imp = imp != 0 };
	s->hist[i].n = s->hist[i].shift = 0;
	if (parent != RP_SUM_NONE) {
		s->node[i].sib = s->node[parent].kid;
		s->node[parent].kid = i;
	}
	return i;
}

/* The child of @parent named @name, made if new (@imp: at import time, rp_thread.imp);
 * moved to the front of the list. */
static uint32_t node_child(struct rp_sum *s, uint32_t parent, uint32_t name, uint8_t imp)
{
	uint32_t prev = RP_SUM_NONE;

	for (uint32_t i = s->node[parent].kid; i != RP_SUM_NONE; prev = i, i = s->node[i].sib) {
		if (s->node[i].name != name)
			continue;
		if (prev != RP_SUM_NONE) {
			s->node[prev].sib = s->node[i].sib;
			s->node[i].sib = s->node[parent].kid;
			s->node[parent].kid = i;
		}
		return i;
	}
	return node_new(s, parent, name, 0, imp);
}

/*
 * The node of open level @d (made with its ancestors' as needed): a written level's
 * is a root anchor (its children hang from the level), a pending level's is the
 * child of its parent level's node. RP_SUM_NONE: the table is full.
 */
uint32_t rp_sum_resolve(struct rp_thread *t, uint16_t d)
{
	struct rp_sum *s = t->sum;
	uint32_t p;

	if (s->lv[d].node != RP_SUM_NONE)
		return s->lv[d].node;
	if (d < t->spend) {
		p = node_new(s, RP_SUM_NONE, t->shadow[d].name, d, 0);
	} else {
		if (d == 0) {
			if (s->top == RP_SUM_NONE)
				s->top = node_new(s, RP_SUM_NONE, 0, RP_SUMMARY_TOP, 0);
			p = s->top;
		} else {
			p = rp_sum_resolve(t, (uint16_t)(d - 1));
		}
		if (p == RP_SUM_NONE)
			return RP_SUM_NONE;
		p = node_child(s, p, t->shadow[d].name, t->imp);
	}
	s->lv[d].node = p;
	return p;
}

/* ---- histograms ---- */

/* The lowest and highest ticks of full-resolution bucket @b (rp_sum_bucket()). */
static uint64_t bucket_lo(uint32_t b)
{
	uint32_t e = (b >> RP_SUM_HIST_BITS) + RP_SUM_HIST_BITS - 1u;

	if (b < (2u << RP_SUM_HIST_BITS))
		return b;
	return (uint64_t)((1u << RP_SUM_HIST_BITS) | (b & ((1u << RP_SUM_HIST_BITS) - 1u)))
	       << (e - RP_SUM_HIST_BITS);
}

static uint64_t bucket_hi(uint32_t b)
{
	uint32_t e = (b >> RP_SUM_HIST_BITS) + RP_SUM_HIST_BITS - 1u;

	if (b < (2u << RP_SUM_HIST_BITS))
		return b;
	return bucket_lo(b) + (UINT64_C(1) << (e - RP_SUM_HIST_BITS)) - 1u;
}

/* What a bucket @j of a histogram at @shift stands for, in ticks: the middle of the
 * calls it can hold (itself when it holds one length), so within half its width of
 * each of them: 2^-(RP_SUM_HIST_BITS + 1 - shift) relative. */
static uint64_t bucket_value(uint32_t j, uint32_t shift)
{
	uint32_t top = ((j + 1u) << shift) - 1u, max = rp_sum_bucket(UINT64_MAX);
	uint64_t lo = bucket_lo(j << shift), hi = bucket_hi(top < max ? top : max);

	return lo + (hi - lo) / 2;
}

/* A new bucket for @ticks found none free: the resolution halves (neighbours merge)
 * until it fits. Ends: buckets are below 2^12, so 12 halvings leave only 0. */
void rp_sum_hist_full(struct rp_sum_hist *h, uint64_t ticks)
{
	uint32_t b = rp_sum_bucket(ticks), j, m;

	for (;;) {
		h->shift++;
		m = 0;
		for (uint32_t i = 0; i < h->n; i++) {
			uint32_t k = h->idx[i] >> 1, x = 0;

			while (x < m && h->idx[x] != k)
				x++;
			if (x < m) {
				h->cnt[x] += h->cnt[i];
			} else {
				h->idx[m] = (uint16_t)k;
				h->cnt[m++] = h->cnt[i];
			}
		}
		h->n = (uint8_t)m;
		j = b >> h->shift;
		for (uint32_t i = 0; i < m; i++)
			if (h->idx[i] == j) {
				h->cnt[i]++;
				return;
			}
		if (m < RP_SUM_HIST) {
			h->idx[m] = (uint16_t)j;
			h->cnt[m] = 1;
			h->n = (uint8_t)(m + 1);
			return;
		}
	}
}

/* The records node @i takes: the SUMMARY, its times and range, a bucket each. */
static uint32_t node_records(const struct rp_sum *s, uint32_t i)
{
	return 3u + s->hist[i].n;
}

/* Gives back the dead nodes at the end of the table. */
static void trim(struct rp_sum *s)
{
	while (s->used > 0 && s->node[s->used - 1].dead)
		s->used--;
	if (s->top != RP_SUM_NONE && s->top >= s->used)
		s->top = RP_SUM_NONE;
}

/* ---- writing ---- */

/* Room in the ring for @n records (re-reading the consumer index if needed); when
 * there is none, the @n are counted dropped and the next span record says so. */
static bool room(struct rp_thread *t, uint32_t n)
{
	if (t->tail - t->head + n <= t->mask)
		return true;
	t->head = __atomic_load_n(&t->ring->ring.c_head, __ATOMIC_ACQUIRE);
	if (t->tail - t->head + n <= t->mask)
		return true;
	__atomic_store_n(&t->ring->dropped, t->ring->dropped + n, __ATOMIC_RELAXED);
	t->lost = RP_SPAN_AFTER_DROP;
	return false;
}

static void put(struct rp_thread *t, uint64_t ts, uint8_t kind, uint8_t flags, uint32_t name,
		uint16_t depth, uint64_t track, uint64_t arg)
{
	t->slots[t->tail & t->mask] = (struct rp_event){ .ts = ts, .name = name, .kind = kind,
							 .flags = flags, .depth = depth,
							 .track = track, .arg = arg };
	rp_commit(t);
}

/* One span record through the ordinary path (a full ring drops and counts it). */
static void span_record(struct rp_thread *t, uint64_t ts, uint8_t kind, uint8_t flags,
			uint32_t name, uint64_t track, uint64_t arg, uint16_t depth)
{
	struct rp_event *e = t->slots ? rp_slot(t) : NULL;

	if (e != NULL)
		rp_record(t, e, ts, kind, flags, name, track, arg, depth);
}

/* Writes the pending BEGINs of levels [spend, @upto) (each with its start). */
static void emit_pending(struct rp_thread *t, uint16_t upto)
{
	struct rp_sum *s = t->sum;

	if (upto > t->scap)
		upto = (uint16_t)t->scap;
	for (uint16_t l = t->spend; l < upto; l++)
		span_record(t, s->lv[l].start, RP_EV_BEGIN, 0, t->shadow[l].name, 0, 0, l);
	if (upto > t->spend)
		t->spend = upto;
	__atomic_store_n(&t->ring->pending_ticks, 0, __ATOMIC_RELAXED);
}

/* Writes node @i as a summary at @k levels below its root level @level. */
static void put_node(struct rp_thread *t, uint32_t i, uint64_t ts, uint16_t level, uint32_t k)
{
	const struct rp_sum_node *x = &t->sum->node[i];
	const struct rp_sum_hist *h = &t->sum->hist[i];

	put(t, ts, RP_EV_SUMMARY, (uint8_t)((2 + h->n) | (x->imp ? RP_SUMMARY_IMPORT : 0)),
	    x->name, level, k, x->count);
	put(t, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_TIMES, 0, 0, x->total, x->self);
	put(t, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_RANGE, 0, 0, x->count ? x->min : 0, x->max);
	for (uint32_t b = 0; b < h->n; b++)
		put(t, ts, RP_EV_SUMMARY_DATA, RP_SUMDATA_HIST, 0, 0,
		    bucket_value(h->idx[b], h->shift), h->cnt[b]);
}

/*
 * The nodes below node @a, depth first (a parent right before its subtree, so that a
 * reader needs only the path to it: wire.h), written as summaries hanging from open
 * level @level when @write, and out of the table either way.
 */
static void walk(struct rp_thread *t, uint32_t a, uint16_t level, uint64_t ts, bool write)
{
	struct rp_sum *s = t->sum;
	uint32_t i = s->node[a].kid;
	int k = 0;

	while (i != RP_SUM_NONE) {
		if (write && (s->node[i].count > 0 || s->node[i].kid != RP_SUM_NONE))
			put_node(t, i, ts, level, (uint32_t)k); /* else: nothing */
		s->node[i].dead = 1;
		if (s->node[i].kid != RP_SUM_NONE) {
			i = s->node[i].kid;
			k++;
			continue;
		}
		for (;;) {
			if (s->node[i].sib != RP_SUM_NONE) {
				i = s->node[i].sib;
				break;
			}
			i = s->node[i].parent;
			k--;
			if (i == a) {
				i = RP_SUM_NONE;
				break;
			}
		}
	}
	s->node[a].kid = RP_SUM_NONE;
}

/* Records of the nodes below @a still in the table (the room a flush needs). */
static uint32_t count_below(struct rp_sum *s, uint32_t a)
{
	uint32_t n = 0;

	s->node[a].mark = 1;
	for (uint32_t i = a + 1; i < s->used; i++) {
		struct rp_sum_node *x = &s->node[i];

		x->mark = !x->dead && x->parent != RP_SUM_NONE && s->node[x->parent].mark;
		n += x->mark ? node_records(s, i) : 0;
	}
	for (uint32_t i = a; i < s->used; i++)
		s->node[i].mark = 0;
	return n;
}

/* A flush that finds the ring more than half full raises the threshold (published). */
static void adapt(struct rp_thread *t)
{
	struct rp_sum *s = t->sum;

	t->head = __atomic_load_n(&t->ring->ring.c_head, __ATOMIC_RELAXED);
	if (t->tail - t->head <= (t->mask + 1) / 2 || s->thr >= s->thr_max)
		return;
	s->thr = s->thr * 2 < s->thr_max ? s->thr * 2 : s->thr_max;
	s->thr_ns = ticks_to_ns(clk, s->thr);
	__atomic_store_n(&t->ring->summary_ns,
			 s->thr_ns > UINT32_MAX ? UINT32_MAX : (uint32_t)s->thr_ns,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&t->ring->summary_raised, t->ring->summary_raised + 1,
			 __ATOMIC_RELAXED);
}

/*
 * Writes (or, @write false, discards) the nodes below node @a as summaries hanging
 * from open level @level; they leave the table. @a itself stays, unless it is a
 * root anchor. With no room for them all, none is written: counted as dropped.
 */
static void flush_below(struct rp_thread *t, uint32_t a, uint16_t level, uint64_t ts, bool write)
{
	struct rp_sum *s = t->sum;
	uint32_t n = count_below(s, a);

	if (n > 0 && write)
		write = room(t, n);
	else if (n > 0)
		__atomic_store_n(&t->ring->dropped, t->ring->dropped + n, __ATOMIC_RELAXED);
	walk(t, a, level, ts, write);
	if (s->node[a].parent == RP_SUM_NONE)
		s->node[a].dead = 1;
	if (n > 0 && write)
		adapt(t);
	trim(s);
}

/* Writes every pending BEGIN below @upto (at least every open level's), then every
 * node, tree by tree; the table starts empty. */
static void flush_all(struct rp_thread *t, uint64_t now, uint16_t upto)
{
	struct rp_sum *s = t->sum;
	uint32_t n = 0;
	bool write;

	if (upto < t->depth)
		upto = t->depth;
	emit_pending(t, upto);
	for (uint32_t i = 0; i < s->used; i++)
		if (!s->node[i].dead && s->node[i].parent != RP_SUM_NONE)
			n += node_records(s, i);
	write = n == 0 || room(t, n);
	for (uint32_t i = 0; i < s->used; i++)
		if (!s->node[i].dead && s->node[i].parent == RP_SUM_NONE)
			walk(t, i, s->node[i].level, now, write);
	if (n > 0 && write)
		adapt(t);
	s->used = 0;
	s->top = RP_SUM_NONE;
	for (uint32_t l = 0; l < upto && l < t->scap; l++)
		s->lv[l].node = RP_SUM_NONE;
	s->next_flush = now + s->period;
}

void rp_sum_flush_all(struct rp_thread *t, uint64_t now)
{
	if (t->sum != NULL && t->slots != NULL)
		flush_all(t, now, t->depth);
}

/* A call of pending level @d ends at @now: into its node. False: the table is full. */
static bool fold(struct rp_thread *t, uint16_t d, uint64_t now)
{
	struct rp_sum *s = t->sum;
	uint64_t dur = now - s->lv[d].start;
	uint32_t n = rp_sum_resolve(t, d);
	struct rp_sum_node *x;

	if (n == RP_SUM_NONE)
		return false;
	x = &s->node[n];
	x->count++;
	x->total += dur;
	x->self += dur - (s->lv[d].child < dur ? s->lv[d].child : dur);
	x->min = dur < x->min ? dur : x->min;
	x->max = dur > x->max ? dur : x->max;
	rp_sum_hist_add(&s->hist[n], dur);
	if (d > 0)
		s->lv[d - 1].child += dur;
	if (d == t->spend)
		__atomic_store_n(&t->ring->pending_ticks, 0, __ATOMIC_RELAXED);
	return true;
}

/*
 * Levels [@to, @from) left without their END at @now (healed after a longjmp). A
 * pending one is folded as a call cut there, as the engine cuts an open span (its
 * calls count, up to the cut). What was folded under a written one is written now,
 * hanging from that level: the engine cuts its frame only at the record that carries
 * the healed depth, which comes after.
 */
static void cut(struct rp_thread *t, uint16_t to, uint16_t from, uint64_t now)
{
	struct rp_sum *s = t->sum;

	if (from > t->scap)
		from = (uint16_t)t->scap;
	for (int l = (int)from - 1; l >= (int)to; l--) {
		uint32_t a = s->lv[l].node;

		if (l >= t->spend) {
			if (!fold(t, (uint16_t)l, now)) /* the table is full */
				__atomic_store_n(&t->ring->dropped, t->ring->dropped + 3,
						 __ATOMIC_RELAXED);
		} else if (a != RP_SUM_NONE && s->node[a].parent == RP_SUM_NONE) {
			/* written now, before the record that carries the healed depth:
			 * the engine still has the level open and hangs them from it */
			flush_below(t, a, (uint16_t)l, now, true);
		}
	}
	for (uint16_t l = to; l < from; l++)
		s->lv[l].node = RP_SUM_NONE;
	if (t->spend > to)
		t->spend = to;
}

/* Heals by frame as rp_emit_full() does, then settles the summaries of what went. */
static void heal_frame(struct rp_thread *t, uintptr_t probe, uint32_t obj, uint64_t now)
{
	uint16_t before = t->depth;

	rp_heal_frame(t, probe, obj);
	if (t->depth < before)
		cut(t, t->depth, before, now);
}

static void push(struct rp_thread *t, uint32_t name, uintptr_t frame, uint32_t obj, uint64_t ts,
		 bool pending)
{
	uint16_t d = rp_span_push(t, name, frame, obj);

	if (d >= t->scap)
		return;
	t->sum->lv[d] = (struct rp_sum_level){ .start = ts, .node = RP_SUM_NONE };
	if (!pending)
		t->spend = (uint16_t)(d + 1);
	else if (d == t->spend)
		__atomic_store_n(&t->ring->pending_ticks, ts, __ATOMIC_RELAXED);
}

void rp_sum_begin_slow(struct rp_thread *t, uint32_t name, uintptr_t frame, uint32_t obj)
{
	if (t->slots == NULL) { /* not attached yet: rp_slot() claims a ring */
		rp_leave(t);
		rp_emit_full(true, 0, RP_EV_BEGIN, 0, name, 0, 0, RP_HEAL_FRAME, frame, frame, obj);
		rp_enter(t);
		return;
	}
	if (rp_left_frame(t, frame, obj))
		heal_frame(t, frame, obj, rp_clock_read(t->tsc));
	if (t->depth < t->scap) {
		push(t, name, frame, obj, rp_clock_read(t->tsc), true);
		return;
	}
	/* Past the shadow: written at once, its pending ancestors first. */
	emit_pending(t, t->depth);
	span_record(t, rp_clock_read(t->tsc), RP_EV_BEGIN, 0, name, 0, 0,
		    rp_span_push(t, name, frame, obj));
}

/* The END of a level that is written (now, if pending), closing at @now. */
static void end_span(struct rp_thread *t, uint32_t name, uint64_t now, uint8_t flags,
		     bool counted)
{
	struct rp_sum *s = t->sum;
	uint16_t before = t->depth, d;
	uint64_t dur, self;

	d = rp_span_pop(t, name);
	if (t->depth == before) { /* open nowhere: the engine counts it unmatched */
		emit_pending(t, before);
		if (!counted)
			span_record(t, now, RP_EV_END, flags, name, 0, 0, d);
		return;
	}
	if (t->depth + 1u < before)
		cut(t, (uint16_t)(t->depth + 1), before, now);
	if (d >= t->scap) {
		emit_pending(t, d);
		if (!counted)
			span_record(t, now, RP_EV_END, flags, name, 0, 0, d);
		return;
	}
	dur = now - s->lv[d].start;
	if (d >= t->spend && dur < s->thr && now < s->next_flush && !s->lv[d].noself) {
		/* healed by name onto a pending short call: folded as usual */
		if (fold(t, d, now))
			return;
		flush_all(t, now, (uint16_t)(d + 1)); /* the table is full: all out */
	}
	emit_pending(t, (uint16_t)(d + 1));
	if (s->lv[d].node != RP_SUM_NONE)
		flush_below(t, s->lv[d].node, d, now, true);
	self = dur - (s->lv[d].child < dur ? s->lv[d].child : dur);
	/* The last shadowed level's children are past the shadow, all written: the
	 * engine's own sum of them is exact, no self time to send. */
	if (counted)
		; /* dropped, counted already */
	else if (!s->lv[d].noself && d + 1u < t->scap)
		span_record(t, now, RP_EV_END, (uint8_t)(flags | RP_SPAN_SELF), name, 0, self,
			    d);
	else
		span_record(t, now, RP_EV_END, flags, name, 0, 0, d);
	s->lv[d].node = RP_SUM_NONE;
	if (d > 0)
		s->lv[d - 1].child += dur;
	t->spend = d;
	/* More than half the ring written since the consumer index was last read: is
	 * the ring that full? (adapt() reads it, so this is rare.) */
	if (t->tail - t->head > (t->mask + 1) / 2)
		adapt(t);
}

void rp_sum_end_slow(struct rp_thread *t, uint32_t name, uintptr_t probe, uint64_t now)
{
	uint16_t d = (uint16_t)(t->depth - 1);

	if (t->slots == NULL)
		return;
	/* An exit hook heals by name only (end_span): gcc may call it from the
	 * caller's frame (a tail jump) or after the epilogue freed the frame, so its
	 * CFA says nothing of the levels above (auto.c). */
	(void)probe;
	(void)d;
	if (now >= t->sum->next_flush) /* periodic: every open level is written now */
		flush_all(t, now, t->depth);
	end_span(t, name, now, 0, false);
}

/*
 * Any other record of a thread with summaries on (rp_emit_full): the C API's spans,
 * counters, instants, links. Pending BEGINs are written first, so that the ring's
 * times stay in order; span records keep the thread's levels as the hooks do.
 */
void rp_sum_record(struct rp_thread *t, struct rp_event *e, bool now, uint64_t ts, uint8_t kind,
		   uint8_t flags, uint32_t name, uint64_t track, uint64_t arg, int heal,
		   uintptr_t frame, uintptr_t probe, uint32_t obj)
{
	/* @e NULL: the ring was full and rp_slot() counted this record dropped; the
	 * pending BEGINs still go first (each counted if it finds no room either). */
	bool counted = e == NULL;
	uint16_t depth = 0;

	if (now)
		ts = rp_clock_read(t->tsc);
	if (kind == RP_EV_END) {
		if (heal != RP_HEAL_NONE && t->ftop < probe)
			heal_frame(t, probe, 0, ts);
		end_span(t, name, ts, flags, counted);
		return;
	}
	if (kind == RP_EV_BEGIN) {
		if (heal != RP_HEAL_NONE && rp_left_frame(t, probe, obj))
			heal_frame(t, probe, obj, ts);
		emit_pending(t, t->depth);
		depth = t->depth;
		push(t, name, frame, obj, ts, false);
	} else {
		emit_pending(t, t->depth);
	}
	if (!counted)
		span_record(t, ts, kind, flags, name, track, arg, depth);
}

void rp_sum_exit(struct rp_thread *t)
{
	if (t->sum != NULL && t->slots != NULL)
		rp_sum_flush_all(t, rp_clock_read(t->tsc));
	t->sum = NULL;
}
