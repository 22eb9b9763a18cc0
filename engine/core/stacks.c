// SPDX-License-Identifier: MIT
/*
 * The stack machine; see stacks.h for the rules. Tracks live in a slot array with
 * a free list; an open-addressing index (linear probing, backward-shift deletion,
 * so no tombstones pile up as async tracks come and go) maps (src, kind, id) to a
 * slot. Async tracks are freed when their last frame closes; thread tracks when
 * their source closes them.
 *
 * Self time: a frame's children are closed before it on the same stack, so their
 * intervals never overlap each other and lie inside the frame; the sum of their
 * durations is the union the definition asks for. A child that would end after
 * its parent (only possible with out-of-order input) is clamped by the min().
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "spread.h"
#include "stacks.h"

/* The sentinel below a track's frames (stacks.h) while it has none allocated: read
 * only (a frame is popped only from an array grow() made, whose own sentinel then
 * takes the writes into a root's parent). */
static struct rp_frame no_frames[1] = { { .name = RP_NONE } };

/* rp_track_pop_thread() reads name, kids and lost as one word; it and
 * rp_track_push_thread() read a track's depth and skipped as one. */
_Static_assert(offsetof(struct rp_frame, node) == offsetof(struct rp_frame, name) + 8,
	       "name, then the word of kids and lost");
_Static_assert(offsetof(struct rp_track, skipped) == offsetof(struct rp_track, depth) + 4,
	       "depth, then skipped");

/*
 * The home slot of a key. Ids that differ only in their low 4 bits (consecutive
 * requests, neighbouring thread ids) share one 64-byte line of the index (16 slots;
 * the index is line-aligned): the rest of the id, with src and kind, picks the line
 * by a multiply's top bits, and the id's low bits, xored in, its slot there. A new
 * request then probes the line its predecessors did, rather than a random line of
 * the index (a cache miss each). The product's top bits depend on every bit of the
 * key, so strided ids (pointers 8 to 4096 apart, a counter in the high bits) spread
 * as the multiply spreads them; the middle bits used before ignored an id's bits
 * from 47 up: ids that differed only there all had one home. test_tracks measures
 * the probe lengths.
 */
static inline uint32_t index_home(const struct rp_tracks *ts, uint32_t src, uint8_t kind,
				  uint64_t id)
{
	uint64_t k = ((id >> 4) ^ ((uint64_t)src << 40) ^ ((uint64_t)kind << 60)) *
		     UINT64_C(0x9e3779b97f4a7c15);
	uint32_t h = (uint32_t)(k >> ts->shift);

	return (h ^ ((uint32_t)id & 15u)) & ts->mask;
}

uint32_t rp_tracks_home(const struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id)
{
	return index_home(ts, src, kind, id);
}

int rp_tracks_init(struct rp_tracks *ts, uint32_t max_tracks, uint32_t max_depth,
		   struct rp_stats *stats)
{
	uint32_t slots = 4, shift = 62;
	void *index;

	memset(ts, 0, sizeof(*ts));
	while (slots < 2 * max_tracks) {
		slots <<= 1;
		shift--;
	}
	/* t[last] is read */
	ts->t = rp_spread_calloc(max_tracks ? max_tracks : 1, sizeof(*ts->t), RP_SPREAD_TRACKS);
	ts->free_slots = calloc(max_tracks, sizeof(*ts->free_slots));
	/* line-aligned: index_home() keeps neighbouring ids in one cache line */
	if (posix_memalign(&index, 64, (size_t)slots * sizeof(*ts->index)) == 0)
		ts->index = index;
	ts->chain = malloc((size_t)(max_depth ? max_depth : 1) * sizeof(*ts->chain));
	if (!ts->t || !ts->free_slots || !ts->index || !ts->chain) {
		rp_tracks_free(ts);
		return -ENOMEM;
	}
	memset(ts->index, 0xff, (size_t)slots * sizeof(*ts->index));
	ts->mask = slots - 1;
	ts->shift = shift;
	ts->lost_name = RP_NONE;
	ts->max = max_tracks;
	ts->max_depth = max_depth;
	ts->stats = stats;
	return 0;
}

void rp_tracks_free(struct rp_tracks *ts)
{
	for (uint32_t i = 0; ts->t != NULL && i < ts->n; i++) {
		if (ts->t[i].cap != 0)
			free(ts->t[i].f - 1); /* with its sentinel */
		free(ts->t[i].sum);
	}
	rp_spread_free(ts->t);
	free(ts->free_slots);
	free(ts->index);
	free(ts->chain);
	memset(ts, 0, sizeof(*ts));
}

static bool match(const struct rp_track *t, uint32_t src, uint8_t kind, uint64_t id)
{
	return t->kind == kind && t->src == src && t->id == id;
}

uint32_t rp_tracks_find_slow(struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id)
{
	for (uint32_t i = index_home(ts, src, kind, id); ts->index[i] != UINT32_MAX;
	     i = (i + 1) & ts->mask)
		if (match(&ts->t[ts->index[i]], src, kind, id))
			return ts->last = ts->index[i];
	return RP_NONE;
}

uint32_t rp_tracks_get_slow(struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id,
			    struct rp_counts *c)
{
	uint32_t i, slot;

	for (i = index_home(ts, src, kind, id); ts->index[i] != UINT32_MAX;
	     i = (i + 1) & ts->mask)
		if (match(&ts->t[ts->index[i]], src, kind, id))
			return ts->last = ts->index[i];
	if (ts->n_free > 0) {
		slot = ts->free_slots[--ts->n_free];
	} else if (ts->n < ts->max) {
		slot = ts->n++;
		ts->t[slot].f = no_frames + 1; /* none yet: the shared sentinel */
	} else {
		c->anomalies[RP_ANOM_TRACK_CAP]++;
		return RP_NONE;
	}
	ts->t[slot].id = id;
	ts->t[slot].src = src;
	ts->t[slot].kind = kind;
	ts->t[slot].depth = 0;
	ts->t[slot].skipped = 0;
	ts->t[slot].tree = 0;
	ts->t[slot].task = false;
	if (ts->t[slot].sum != NULL) /* a reused slot: no summary of its old track */
		ts->t[slot].sum->want = ts->t[slot].sum->n = 0;
	ts->index[i] = slot;
	ts->live++;
	/* Halfway through a line's 16 ids, the next 16's line: consecutive ids (one
	 * request after another) would otherwise miss the cache once a line. */
	if ((id & 15) == 8)
		__builtin_prefetch(&ts->index[index_home(ts, src, kind, id + 8)]);
	return ts->last = slot;
}

/* Removes slot from the index: backward-shift deletion keeps probe chains whole. */
static void unindex(struct rp_tracks *ts, uint32_t slot)
{
	const struct rp_track *t = &ts->t[slot];
	uint32_t i = index_home(ts, t->src, t->kind, t->id), j;

	while (ts->index[i] != slot)
		i = (i + 1) & ts->mask;
	for (j = (i + 1) & ts->mask; ts->index[j] != UINT32_MAX; j = (j + 1) & ts->mask) {
		const struct rp_track *o = &ts->t[ts->index[j]];
		uint32_t home = index_home(ts, o->src, o->kind, o->id);
		/* Move j back to i if its home is not in (i, j] (cyclically). */
		if (((j - home) & ts->mask) >= ((j - i) & ts->mask)) {
			ts->index[i] = ts->index[j];
			i = j;
		}
	}
	ts->index[i] = UINT32_MAX;
}

static void release(struct rp_tracks *ts, uint32_t tr)
{
	unindex(ts, tr);
	ts->t[tr].kind = 0;
	ts->free_slots[ts->n_free++] = tr;
	ts->live--;
}

static bool grow(struct rp_track *t, uint32_t max_depth)
{
	uint32_t cap = t->cap ? t->cap * 2 : 8;
	struct rp_frame *f;

	if (cap > max_depth)
		cap = max_depth;
	/* and the sentinel below them (stacks.h), its own from the first */
	f = realloc(t->cap != 0 ? t->f - 1 : NULL, ((size_t)cap + 1) * sizeof(*f));
	if (f == NULL)
		return false;
	if (t->cap == 0)
		f[0] = no_frames[0];
	t->f = f + 1;
	t->cap = cap;
	return true;
}

/* Pushes a frame on @k, which has room and holds @d frames; @thread: k is known to
 * be a thread track (no request). The depth comes in a local: the frame's and the
 * row's stores could otherwise alias k->depth and have it read back. */
static inline __attribute__((always_inline)) void push_frame(struct rp_tracks *ts,
							     struct rp_track *k, uint32_t d,
							     uint32_t name, uint64_t t,
							     uint64_t span, struct rp_counts *c,
							     bool thread)
{
	struct rp_frame *f = &k->f[d];
	uint32_t parent = f[-1].node; /* the sentinel's 0 (the root) below a root */
	bool folded;

	/* Field by field: a compound literal is zeroed whole, then written over. up =
	 * RP_NONE: a tree span mixed in later never walks into this frame. */
	f->start = t;
	f->child_ns = 0;
	f->span = span;
	f->name = name;
	f->node = rp_stats_child(ts->stats, parent, name, &folded);
	f->up = RP_NONE;
	f->kids = 0;
	f->lost = 0;
	f->off_ns = 0;
	f->off_self = 0;
	f->row = &ts->stats->fn[name];
	k->depth = d + 1;
	f->row->started++;
	if (folded)
		c->anomalies[RP_ANOM_CCT_CAP]++;
	if (thread || ts->sinks) /* the thread paths are the engine's: sinks set */
		rp_spans_open(ts->sinks, name, d, t, !thread && rp_is_request(k, d));
}

/* Pushes a frame, or counts a BEGIN past the depth cap. */
static inline __attribute__((always_inline)) void push(struct rp_tracks *ts, struct rp_track *k,
						       uint32_t name, uint64_t t, uint64_t span,
						       struct rp_counts *c)
{
	/* depth <= cap <= max_depth: a full array is the only case to look further */
	if (k->skipped ||
	    (k->depth == k->cap && (k->depth >= ts->max_depth || !grow(k, ts->max_depth)))) {
		k->skipped++;
		c->anomalies[RP_ANOM_DEPTH_CAP]++;
		return;
	}
	push_frame(ts, k, k->depth, name, t, span, c, false);
}

void rp_track_begin(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t,
		    uint64_t span, struct rp_counts *c)
{
	push(ts, &ts->t[tr], name, t, span, c);
}

/* Pops the top frame, f[@d] (@d = k->depth - 1), closed at time t; @normal: by its
 * own END (stacks.h). Inlined into rp_track_end()'s common case; pop() is the
 * out-of-line copy for the rest. The depth comes in a local: the stores into the
 * statistics could otherwise alias k->depth and have it read back. */
static inline __attribute__((always_inline)) void pop_inline(struct rp_tracks *ts,
							     struct rp_track *k, uint32_t d,
							     uint64_t t, struct rp_counts *c,
							     bool normal, const uint64_t *self,
							     bool error, bool thread)
{
	struct rp_frame *f = &k->f[d];
	/* t > start ? t - start : 0, as a min(): no branch */
	uint64_t dur = t - (t < f->start ? t : f->start);
	struct rp_call call = {
		.name = f->name,
		.caller = f[-1].name, /* the sentinel's RP_NONE below a root */
		.node = f->node,
		.dur_ns = dur,
		.self_ns = dur - (f->child_ns < dur ? f->child_ns : dur),
		.primitive = true,
		.error = error,
	};

	k->depth = d;
	if (self != NULL) { /* measured by the producer: summarized children too */
		call.self_ns = *self < dur ? *self : dur;
		f->child_ns = dur - call.self_ns;
	}

	/* the parent first: it is loaded already (the caller), and a recursion's
	 * is mostly its own name (a root's is the sentinel's RP_NONE, no frame's
	 * here: f->row is its name's row) */
	if (call.caller == call.name)
		call.primitive = false;
	for (uint32_t i = 0; i + 1 < d && call.primitive; i++)
		call.primitive = k->f[i].name != f->name;
	/* off_ns shares its place with busy_since: only thread frames have one
	 * (@thread: k is known to be a thread track). A root's parent is the
	 * sentinel: no test, and nothing reads its times. */
	if (thread || k->kind == RP_TRACK_THREAD) {
		call.offcpu_ns = f->off_ns;
		call.offcpu_self_ns = f->off_self;
		f[-1].off_ns += f->off_ns;
	}
	f[-1].child_ns += dur;
	if (!rp_stats_add_row(ts->stats, f->row, &call))
		c->anomalies[RP_ANOM_CCT_CAP]++;
	if (thread || ts->sinks) {
		struct rp_span_info sp = {
			.start = f->start, .end = f->start + dur, .self_ns = call.self_ns,
			.subtree_ns = call.self_ns + f->child_ns, .track = k->id,
			.span = f->span, .name = f->name, .depth = d, .src = k->src,
			.primitive = call.primitive, .error = error,
			.request = !thread && rp_is_request(k, d),
		};
		rp_spans_close(ts->sinks, k, &sp, normal);
	}
}

static void pop(struct rp_tracks *ts, struct rp_track *k, uint64_t t, struct rp_counts *c,
		bool normal)
{
	if (k->f[k->depth - 1].lost) { /* counted when it was lost */
		k->depth--;
		return;
	}
	pop_inline(ts, k, k->depth - 1, t, c, normal, NULL, false, false);
}

/* Frame i becomes lost (counted once); it and its CCT node are "[lost]" now. */
static void lose(struct rp_tracks *ts, struct rp_track *k, uint32_t i, uint64_t t,
		 struct rp_counts *c)
{
	struct rp_frame *f = &k->f[i];
	uint32_t parent = i ? k->f[i - 1].node : 0;
	bool folded = false;

	if (!f->lost) {
		c->anomalies[RP_ANOM_DROP_LOST]++;
		ts->stats->fn[f->name].drop_lost++; /* its row says what it misses */
		if (ts->sinks)
			rp_spans_lost(ts->sinks, f->name, i, t, rp_is_request(k, i));
		f->lost = 1;
	}
	if (ts->lost_name == RP_NONE) {
		f->node = parent;
		return;
	}
	f->name = ts->lost_name;
	f->node = rp_stats_child(ts->stats, parent, ts->lost_name, &folded);
	if (folded)
		c->anomalies[RP_ANOM_CCT_CAP]++;
}

/* A placeholder for a frame whose BEGIN was lost; false at the depth cap. */
static bool push_lost(struct rp_tracks *ts, struct rp_track *k, uint64_t t, struct rp_counts *c)
{
	if (k->depth >= ts->max_depth || (k->depth == k->cap && !grow(k, ts->max_depth)))
		return false;
	k->f[k->depth++] = (struct rp_frame){ .start = t, .lost = 1 };
	c->anomalies[RP_ANOM_DROP_LOST]++;
	lose(ts, k, k->depth - 1, t, c);
	return true;
}

bool rp_track_resync(struct rp_tracks *ts, uint32_t tr, bool is_end, uint32_t depth, uint64_t t,
		     struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	uint32_t want = depth + (is_end ? 1 : 0);

	k->skipped = 0; /* the depth says where the stack is now */
	for (uint32_t i = 0; i < k->depth; i++)
		lose(ts, k, i, t, c);
	if (k->depth > want)
		k->depth = want; /* lost frames: nothing to count on the way out */
	while (k->depth < want && push_lost(ts, k, t, c))
		;
	if (!is_end)
		return false;
	if (k->depth == want) /* the END of a lost span */
		k->depth--;
	else /* its frame is past the depth cap */
		c->anomalies[RP_ANOM_DROP_LOST]++;
	return true;
}

void rp_track_cut(struct rp_tracks *ts, uint32_t tr, uint32_t want, uint64_t t,
		  struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	uint32_t extra, sk;

	if (k->depth + k->skipped <= want)
		return;
	extra = k->depth + k->skipped - want;
	c->anomalies[RP_ANOM_END_MISMATCH]++;
	sk = extra < k->skipped ? extra : k->skipped; /* the skipped BEGINs are the top */
	k->skipped -= sk;
	for (extra -= sk; extra > 0; extra--) {
		c->truncated += !k->f[k->depth - 1].lost;
		pop(ts, k, t, c, false);
	}
}

bool rp_track_offcpu(struct rp_tracks *ts, uint32_t tr, uint64_t ns)
{
	struct rp_track *k = &ts->t[tr];
	struct rp_frame *f;

	if (k->kind != RP_TRACK_THREAD || k->depth == 0)
		return false;
	/* A BEGIN past the depth cap is innermost, unrecorded: its nearest recorded
	 * ancestor takes it, as that one's self time takes the span's wall time. */
	f = &k->f[k->depth - 1];
	f->off_ns += ns;
	f->off_self += ns;
	return true;
}

/* The innermost open frame an END closes, or -1. */
static int find_open(const struct rp_track *k, uint32_t name, uint64_t span)
{
	for (int i = (int)k->depth - 1; i >= 0; i--)
		if (k->kind == RP_TRACK_ASYNC ? k->f[i].span == span
					      : k->f[i].name == name && !k->f[i].lost)
			return i;
	return -1;
}

void rp_track_end(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t, uint64_t span,
		  struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	int at;

	if (k->skipped) { /* the END of a BEGIN the depth cap refused */
		k->skipped--;
		return;
	}
	if (k->depth > 0 && k->f[k->depth - 1].lost) {
		/* The END of a span a drop cut: the stack is aligned with the producer's
		 * since the drop, so it is the top one; counted when it was lost. */
		k->depth--;
		return;
	}
	at = find_open(k, name, span);
	if (at < 0) {
		c->anomalies[RP_ANOM_END_UNMATCHED]++;
	} else {
		/* An async END closes its span normally if it names it and has an id. */
		bool normal = (uint32_t)at == k->depth - 1 &&
			      (k->kind != RP_TRACK_ASYNC || (k->f[at].name == name && span != 0));

		if ((uint32_t)at != k->depth - 1)
			c->anomalies[RP_ANOM_END_MISMATCH]++;
		while (k->depth > (uint32_t)at + 1) {
			c->truncated += !k->f[k->depth - 1].lost;
			pop(ts, k, t, c, false);
		}
		pop_inline(ts, k, k->depth - 1, t, c, normal,
			   ts->end_self_set ? &ts->end_self : NULL,
			   ts->end_error, false);
	}
	ts->end_self_set = false;
	ts->end_error = false;
	if (k->kind == RP_TRACK_ASYNC && k->depth == 0 && k->skipped == 0)
		release(ts, tr);
}

/* The 64-bit word whose first four bytes in memory hold @v and the next four 0: a
 * frame's name with kids and lost 0 (a frame of that name, no open child, not lost),
 * or a track's depth with skipped 0 (stacks.h), read as one word. */
static inline uint64_t first_half(uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint64_t)v << 32;
#else
	return v;
#endif
}

/* A track's depth and skipped as one word. */
static inline uint64_t depth_word(const struct rp_track *k)
{
	uint64_t w;

	memcpy(&w, (const char *)k + offsetof(struct rp_track, depth), sizeof(w));
	return w;
}

/*
 * The common span records of a thread track (the engine's runs, whose tracks have
 * their sinks): rp_track_begin() and rp_track_end() with the track's kind known, so
 * that nothing on the way tests it. rp_track_pop_thread() does only an END that
 * closes the top frame normally (no skipped BEGIN, no lost frame, the name on top)
 * and @return false, having done nothing, for any other: rp_track_end() then.
 */
bool rp_track_push_thread(struct rp_tracks *ts, struct rp_track *k, uint32_t name, uint64_t t,
			  uint64_t span, uint32_t depth, struct rp_counts *c)
{
	/* No BEGIN skipped, room without growing, not below the stack. A record
	 * with its depth: that depth is the stack's, and no BEGIN is skipped, in
	 * one compare (a deeper record, which the general path pushes alike, is
	 * left to it). */
	if (depth != RP_NONE ? depth_word(k) != first_half(depth) : k->skipped != 0)
		return false;
	if (depth == RP_NONE)
		depth = k->depth;
	if (depth == k->cap)
		return false;
	push_frame(ts, k, depth, name, t, span, c, true); /* depth == k->depth */
	return true;
}

bool rp_track_pop_thread(struct rp_tracks *ts, struct rp_track *k, uint32_t name, uint64_t t,
			 uint32_t depth, struct rp_counts *c)
{
	const struct rp_frame *f;
	uint32_t d;
	uint64_t top;

	/* (no self time nor error is pending between records: span_end() and
	 * child_end() set and clear them around the one record they are for)
	 * A record with its depth: the top frame's is that depth, and no BEGIN is
	 * skipped, in one compare (a deeper record, which the general path pops
	 * alike, is left to it). With no frame open (a record without depth), the
	 * sentinel's RP_NONE matches no name (a mapped name is an engine id).
	 * Name, kids and lost as one word (stacks.h): a frame of that name, not
	 * lost (and with no open children, which only tree frames have), in one
	 * compare. */
	if (depth != RP_NONE ? depth_word(k) != first_half(depth + 1) : k->skipped != 0)
		return false;
	d = depth != RP_NONE ? depth + 1 : k->depth; /* k->depth */
	f = &k->f[d] - 1; /* the sentinel when d == 0 */
	memcpy(&top, (const char *)f + offsetof(struct rp_frame, name), sizeof(top));
	if (top != first_half(name))
		return false;
	pop_inline(ts, k, d - 1, t, c, true, NULL, false, true);
	return true;
}

/* ---- summaries (docs/summaries.md) ---- */

static struct rp_sum_in *sum_in(struct rp_tracks *ts, struct rp_track *k)
{
	if (k->sum == NULL) {
		k->sum = calloc(1, sizeof(*k->sum) + (size_t)ts->max_depth * sizeof(k->sum->path[0]));
		if (k->sum == NULL)
			return NULL;
	}
	return k->sum;
}

/* The summary in s->cur has all its data: its calls go in. False: malformed. */
static bool sum_apply(struct rp_tracks *ts, struct rp_track *k, struct rp_sum_in *s,
		      struct rp_counts *c)
{
	const struct rp_event *ev = &s->cur;
	uint32_t lv = (uint32_t)ev->track, root = ev->depth, parent, caller;
	struct rp_sum_call call = { .name = ev->name, .calls = ev->arg, .total_ns = s->total,
				    .self_ns = s->self, .min_ns = s->min, .max_ns = s->max,
				    .primitive = true,
				    .imp = (ev->flags & RP_SUMMARY_IMPORT) != 0 };
	const uint32_t need = 1u << RP_SUMDATA_TIMES | 1u << RP_SUMDATA_RANGE;
	uint64_t in_hist = 0;
	bool folded;

	if ((s->seen & need) != need ||
	    s->self > s->total || (call.calls > 0 && s->min > s->max) ||
	    (call.calls == 0 && s->total != 0) || s->max > s->total || lv >= ts->max_depth)
		return false;
	if (lv == 0) {
		s->n = 0;
		if (root == RP_SUMMARY_TOP) {
			parent = 0;
			caller = RP_NONE;
		} else if (root < k->depth && !k->f[root].lost) {
			parent = k->f[root].node;
			caller = k->f[root].name;
			/* its children's time, for a frame whose END carries no self time
			 * (opened before its thread's summaries went on: summary.c) */
			k->f[root].child_ns += call.total_ns;
		} else {
			return false;
		}
		s->root = root;
	} else if (lv <= s->n && root == s->root) {
		parent = s->path[lv - 1].node;
		caller = s->path[lv - 1].name;
	} else {
		return false;
	}
	if (root != RP_SUMMARY_TOP)
		for (uint32_t i = 0; i <= root && call.primitive; i++)
			call.primitive = k->f[i].name != call.name;
	for (uint32_t i = 0; i < lv && call.primitive; i++)
		call.primitive = s->path[i].name != call.name;
	call.caller = caller;
	/* Its histogram counts, if it is whole: a part would skew the percentiles. A
	 * bucket's length is brought within the calls' range (it stands for calls that
	 * are in it). */
	call.sketched = s->nh > 0;
	for (uint32_t i = 0; i < s->nh && call.sketched; i++) {
		call.sketched = s->hc[i] <= call.calls - in_hist;
		in_hist += s->hc[i];
		s->hv[i] = s->hv[i] < s->min ? s->min : s->hv[i] > s->max ? s->max : s->hv[i];
	}
	call.sketched = call.sketched && in_hist == call.calls;
	call.node = rp_stats_child(ts->stats, parent, call.name, &folded);
	if (folded)
		c->anomalies[RP_ANOM_CCT_CAP]++;
	s->path[lv].node = call.node;
	s->path[lv].name = call.name;
	s->n = lv + 1;
	if (!rp_stats_add_sum(ts->stats, &call))
		c->anomalies[RP_ANOM_CCT_CAP]++;
	if (call.sketched && call.calls > 0 && ts->sinks)
		rp_spans_summary(ts->sinks, &call, s->hv, s->hc, s->nh);
	return true;
}

bool rp_track_summary(struct rp_tracks *ts, uint32_t tr, const struct rp_event *ev,
		      struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	struct rp_sum_in *s = sum_in(ts, k);

	if (s == NULL)
		return false;
	if (ev->kind == RP_EV_SUMMARY) {
		if (s->want > 0) /* the last one's data never came */
			c->anomalies[RP_ANOM_BAD_EVENT]++;
		s->cur = *ev;
		s->want = ev->flags & RP_SUMMARY_DATA_MASK;
		s->got = s->seen = s->nh = 0;
		if (s->want == 0) { /* a summary with no figures */
			c->anomalies[RP_ANOM_BAD_EVENT]++;
			s->n = 0;
		}
		return true;
	}
	if (s->want == 0) {
		c->anomalies[RP_ANOM_BAD_EVENT]++;
		return true;
	}
	if (ev->flags == RP_SUMDATA_TIMES) {
		s->total = ev->track;
		s->self = ev->arg;
	} else if (ev->flags == RP_SUMDATA_RANGE) {
		s->min = ev->track;
		s->max = ev->arg;
	} else if (ev->flags == RP_SUMDATA_HIST && s->nh < RP_SUMMARY_DATA_MASK) {
		s->hv[s->nh] = ev->track; /* a length in ns, each: the sketch takes any */
		s->hc[s->nh++] = ev->arg; /* their sum is checked against the calls */
	} /* others: later additions, skipped */
	if (ev->flags < 32)
		s->seen |= 1u << ev->flags;
	if (++s->got < s->want)
		return true;
	s->want = 0;
	if (!sum_apply(ts, k, s, c)) {
		c->anomalies[RP_ANOM_BAD_EVENT]++;
		s->n = 0; /* what hangs from it is malformed too */
	}
	return true;
}

/* ---- tree tracks ---- */

/* The open frame of span id @span on tree track @k, or -1. */
static int tree_find(const struct rp_track *k, uint64_t span)
{
	for (int i = (int)k->depth - 1; i >= 0; i--)
		if (k->f[i].span == span)
			return i;
	return -1;
}

static uint32_t tree_level(const struct rp_track *k, uint32_t i)
{
	uint32_t n = 0;

	for (; k->f[i].up != RP_NONE; i = k->f[i].up)
		n++;
	return n;
}

void rp_track_child_begin(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t,
			  uint64_t arg, struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	uint64_t span = arg & UINT32_MAX, parent = arg >> 32;
	uint32_t up = RP_NONE, node_up = 0, level = 0;
	bool folded;

	if (k->depth == 0)
		k->tree = 1;
	if (k->depth >= ts->max_depth || (k->depth == k->cap && !grow(k, ts->max_depth))) {
		k->skipped++;
		c->anomalies[RP_ANOM_DEPTH_CAP]++;
		return;
	}
	if (parent != 0) {
		int at = tree_find(k, parent);
		/* Its parent closed first (a task that outlived the span that made it):
		 * under the track's oldest open frame, its request. */
		up = at >= 0 ? (uint32_t)at : (k->depth ? 0 : RP_NONE);
	}
	if (up != RP_NONE) {
		struct rp_frame *p = &k->f[up];
		if (p->kids++ == 0)
			p->busy_since = t;
		node_up = p->node;
		level = tree_level(k, up) + 1;
	}
	k->f[k->depth++] = (struct rp_frame){ .start = t, .span = span, .name = name,
					      .node = rp_stats_child(ts->stats, node_up, name,
								     &folded),
					      .up = up, .row = &ts->stats->fn[name] };
	ts->stats->fn[name].started++;
	if (folded)
		c->anomalies[RP_ANOM_CCT_CAP]++;
	if (ts->sinks)
		rp_spans_open(ts->sinks, name, level, t, rp_is_request(k, level));
}

/* Closes frame @i (no open descendants) at time t and takes it out of the array. */
static void tree_pop(struct rp_tracks *ts, struct rp_track *k, uint32_t i, uint64_t t,
		     struct rp_counts *c, bool normal, bool error)
{
	struct rp_frame f = k->f[i];
	uint64_t dur = t > f.start ? t - f.start : 0;
	uint32_t level = 0, j;
	struct rp_call call = {
		.name = f.name,
		.caller = f.up != RP_NONE ? k->f[f.up].name : RP_NONE,
		.node = f.node,
		.dur_ns = dur,
		.self_ns = dur - (f.child_ns < dur ? f.child_ns : dur),
		.primitive = true,
		.error = error,
	};

	for (j = f.up; j != RP_NONE; j = k->f[j].up, level++)
		call.primitive = call.primitive && k->f[j].name != f.name;
	if (f.up != RP_NONE) {
		struct rp_frame *p = &k->f[f.up];
		if (--p->kids == 0)
			p->child_ns += t > p->busy_since ? t - p->busy_since : 0;
	}
	if (!rp_stats_add(ts->stats, &call))
		c->anomalies[RP_ANOM_CCT_CAP]++;
	if (ts->sinks) {
		/* The hook reads the span's ancestors at f[0..depth): its path. */
		struct rp_track view = *k;
		struct rp_span_info sp = {
			.start = f.start, .end = f.start + dur, .self_ns = call.self_ns,
			.subtree_ns = call.self_ns + f.child_ns, .track = k->id,
			.span = f.span, .name = f.name, .depth = level, .src = k->src,
			.primitive = call.primitive, .error = error,
			.request = rp_is_request(k, level),
		};
		ts->chain[level] = f;
		for (j = f.up, level = sp.depth; j != RP_NONE; j = k->f[j].up)
			ts->chain[--level] = k->f[j];
		view.f = ts->chain;
		view.depth = sp.depth;
		rp_spans_close(ts->sinks, &view, &sp, normal);
	}
	memmove(&k->f[i], &k->f[i + 1], (size_t)(k->depth - i - 1) * sizeof(*k->f));
	k->depth--;
	for (j = i; j < k->depth; j++)
		if (k->f[j].up != RP_NONE && k->f[j].up > i)
			k->f[j].up--;
}

static bool tree_below(const struct rp_track *k, uint32_t j, uint32_t i)
{
	for (j = k->f[j].up; j != RP_NONE; j = k->f[j].up)
		if (j == i)
			return true;
	return false;
}

void rp_track_child_end(struct rp_tracks *ts, uint32_t tr, uint64_t t, uint64_t span,
			struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	int at = span != 0 ? tree_find(k, span & UINT32_MAX) : -1;
	bool mismatch = false;

	if (at < 0) {
		if (k->skipped) /* the END of a BEGIN the depth cap refused */
			k->skipped--;
		else
			c->anomalies[RP_ANOM_END_UNMATCHED]++;
	} else {
		/* Descendants still open close first, as truncated; they sit above it. */
		for (uint32_t j = k->depth - 1; j > (uint32_t)at; j--) {
			if (!tree_below(k, j, (uint32_t)at))
				continue;
			tree_pop(ts, k, j, t, c, false, false);
			c->truncated++;
			mismatch = true;
		}
		if (mismatch)
			c->anomalies[RP_ANOM_END_MISMATCH]++;
		tree_pop(ts, k, (uint32_t)at, t, c, !mismatch, ts->end_error);
	}
	ts->end_error = false;
	if (k->depth == 0 && k->skipped == 0)
		release(ts, tr);
}

void rp_track_close(struct rp_tracks *ts, uint32_t tr, uint64_t t, int why,
		    struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];

	if (why == RP_ANOM_DROP_LOST) /* records after the last one seen were lost */
		for (uint32_t i = 0; i < k->depth; i++)
			lose(ts, k, i, t, c);
	while (k->depth > 0) {
		bool lost = k->f[k->depth - 1].lost;

		/* The last frame of a tree has no open descendants: they come after it. */
		if (k->tree && !lost)
			tree_pop(ts, k, k->depth - 1, t, c, false, false);
		else if (k->tree) /* counted when it was lost */
			k->depth--;
		else
			pop(ts, k, t, c, false);
		if (lost)
			continue;
		if (why == RP_ANOM_KIND_COUNT)
			c->truncated++;
		else
			c->anomalies[why]++;
	}
	k->skipped = 0;
	release(ts, tr);
}

uint32_t rp_track_expire(struct rp_tracks *ts, uint32_t tr, uint64_t t, struct rp_counts *c)
{
	struct rp_track *k = &ts->t[tr];
	uint32_t n = 0;

	for (uint32_t i = 0; i < k->depth; i++) {
		struct rp_frame *f = &k->f[i];

		if (f->lost)
			continue;
		/* The level its open hook saw: a tree frame's, or its stack index. */
		if (ts->sinks) {
			uint32_t level = k->tree ? tree_level(k, i) : i;

			rp_spans_lost(ts->sinks, f->name, level, t, rp_is_request(k, level));
		}
		c->anomalies[RP_ANOM_DROP_LOST]++;
		ts->stats->fn[f->name].drop_lost++;
		f->lost = 1;
		n++;
	}
	k->depth = 0;
	k->skipped = 0;
	release(ts, tr);
	return n;
}

void rp_tracks_close_src(struct rp_tracks *ts, uint32_t src, uint64_t t, int why,
			 struct rp_counts *c)
{
	for (uint32_t i = 0; i < ts->n; i++)
		if (ts->t[i].kind != 0 && ts->t[i].src == src)
			rp_track_close(ts, i, t, why, c);
}
