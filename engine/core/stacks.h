/* SPDX-License-Identifier: MIT */
/*
 * Tracks and their stacks. A track is a producer thread (its ring, for one owner
 * generation), the track id of async spans (a request), or a (pid, tid) of a trace
 * file. BEGIN pushes a frame; END pops the matching one and hands the completed
 * call to the statistics. Everything irregular is counted, never fatal:
 *   END for a span below the top   -> the frames above it close as truncated
 *                                     (RP_ANOM_END_MISMATCH);
 *   END with no matching open span  -> ignored (RP_ANOM_END_UNMATCHED);
 *   BEGIN past max_depth            -> not pushed; its END is ignored too
 *                                     (RP_ANOM_DEPTH_CAP);
 *   a thread's span record of depth -> the frames above it close as truncated
 *   below the stack (the producer      (RP_ANOM_END_MISMATCH, once: rp_track_cut)
 *   healed after a longjmp)
 *   a new track past max_tracks     -> its events are dropped (RP_ANOM_TRACK_CAP).
 * Tree tracks (RP_EV_CHILD_BEGIN/END: a request whose tasks run at once) hold their
 * open frames as a tree rather than a stack: each frame names its parent, children
 * of one parent may be open together (siblings), and an END closes its span by id
 * wherever it is. A parent's child time is the union of its children's intervals
 * (time with at least one child open), so overlapping siblings never push its self
 * time below zero. Irregular input is counted as on stacks: an END whose span has
 * open descendants closes them as truncated (RP_ANOM_END_MISMATCH); an END with no
 * open span of its id is RP_ANOM_END_UNMATCHED; a child whose parent is no longer
 * open is placed under the track's oldest open frame (its request).
 * A thread's first span record after a producer drop (RP_SPAN_AFTER_DROP, with its
 * depth) re-aligns the stack (rp_track_resync): every frame open across the drop
 * becomes "lost", its span counted under RP_ANOM_DROP_LOST and kept out of the
 * statistics, the windows and the slowest spans (its true start or end is
 * unknown); frames whose BEGIN was lost are put back as lost placeholders, so the
 * depth matches the producer's. Lost frames keep their place (CCT node "[lost]")
 * as the parents of spans opened after the drop, which are exact.
 * An async track cannot resync (its records carry no depth): an END a drop cut
 * leaves its request open. The engine closes such a track as lost once it has been
 * idle past an expiry (rp_track_expire(), engine.h: rp_engine_expire()).
 * Every span a drop cut also counts in its name's row (rp_fn_stats.drop_lost) when
 * its name is known (its BEGIN arrived).
 * Off-CPU time (rp_track_offcpu) goes to a thread track's innermost open frame, and
 * to the statistics when it closes, so that a frame a drop cut takes its off-CPU time
 * away with it, as its self time.
 * Memory: max_tracks tracks, each with at most max_depth frames (64 bytes each) and
 * a sentinel below them.
 */
#ifndef RP_ENGINE_STACKS_H
#define RP_ENGINE_STACKS_H

#include <stdbool.h>
#include <stdint.h>

#include <ringprof/wire.h>

#include "report.h"
#include "spans.h"
#include "stats.h"

enum rp_track_kind { RP_TRACK_THREAD = 1, RP_TRACK_ASYNC = 2 };

/* Per-source counters the stack machine adds to. */
struct rp_counts {
	uint64_t anomalies[RP_ANOM_KIND_COUNT];
	uint64_t truncated;
};

struct rp_frame {
	uint64_t start;
	uint64_t child_ns;	/* time of completed children, clamped to this frame */
	uint64_t span;		/* async span id; 0 on thread tracks */
	uint32_t name;
	/* Tree tracks only (zero elsewhere), but `lost`. Right after name: the pop of a
	 * thread track's top frame tests name, kids and lost as one word (stacks.c). */
	uint32_t kids : 31;	/* open children */
	uint32_t lost : 1;	/* 1: cut by a drop (rp_track_resync); not counted */
	uint32_t node;		/* CCT node */
	uint32_t up;		/* tree tracks: index of the parent frame; RP_NONE: a
				   top-level frame */
	union {
		uint64_t busy_since;	/* tree frames: when kids last went from 0 to 1 */
		uint64_t off_ns;	/* thread tracks: off-CPU time inside it so far,
					   its closed children's included (offcpu.h) */
	};
	uint64_t off_self;	/* thread tracks: off-CPU time while it was innermost */
	/* Its name's row (stats->fn[name]), found by its push for its pop (a tree frame
	 * below a stack's frames is popped as theirs); NULL in lost placeholders, which
	 * never reach the statistics. Also 64 bytes a frame: an index is a shift. */
	struct rp_fn_stats *row;
};

/* A span just closed, as the close hook sees it (what exemplars need). */
struct rp_span_info {
	uint64_t start, end;	/* end >= start */
	uint64_t self_ns;	/* end - start minus its children's time (clamped) */
	uint64_t subtree_ns;	/* self_ns + the children's durations: = end - start
				   when the children fit inside it */
	uint64_t track;		/* the track id (thread or async track) */
	uint64_t span;		/* async span id; 0 on thread tracks */
	uint32_t name;
	uint32_t depth;		/* 0: a root */
	uint32_t src;		/* the source index */
	bool primitive;		/* the name was not open below it on its track */
	bool error;		/* closed by its own END with RP_SPAN_ERROR */
	bool request;		/* a request: the root of an async track (rp_is_request) */
	uint64_t charged_ns;	/* a request: batched work charged to it (charge.h); set
				   by the close hook, 0 from the stack machine */
};

/* A thread track's summaries being read (stacks.c, rp_track_summary): the record
 * awaiting its data, and the path of the tree being written (wire.h: depth first). */
struct rp_sum_in {
	struct rp_event cur;	/* the SUMMARY whose data records are awaited */
	uint64_t total, self, min, max;
	uint32_t want, got;	/* data records it announced, and read so far */
	uint32_t seen;		/* kinds of data read (1 << enum rp_summary_data) */
	uint32_t n, root;	/* the path's length and the level it hangs from */
	uint32_t nh;		/* histogram buckets read (RP_SUMDATA_HIST) */
	uint64_t hv[RP_SUMMARY_DATA_MASK], hc[RP_SUMMARY_DATA_MASK]; /* length, calls */
	struct {
		uint32_t node, name;
	} path[];		/* max_depth */
};

struct rp_track {
	uint64_t id;
	uint32_t src;
	uint8_t kind;		/* enum rp_track_kind; 0 = free slot */
	uint8_t tree;		/* frames opened by RP_EV_CHILD_BEGIN: a tree */
	uint32_t depth;		/* frames in use */
	uint32_t skipped;	/* BEGINs past the depth cap awaiting their END */
	uint32_t cap;		/* frames allocated */
	/* The frames, f[0] the bottom one. f[-1] is a sentinel, always there (with no
	 * frame allocated yet, a shared one): name RP_NONE, which no record's mapped
	 * name is, and node 0, the CCT root, so that a root frame's parent and caller
	 * are read as any other's (stacks.c). Nothing but the stack machine sees it. */
	struct rp_frame *f;
	/* Async tracks (the engine keeps them, engine.c): the time of the first BEGIN
	 * since the track was made, and of its newest record. */
	uint64_t born, last;
	struct rp_sum_in *sum;	/* thread tracks with summaries; NULL until one */
	bool task;		/* an async track opened by RP_CHILD_TASK: not a request */
};

/* A request: the root span of an async track that is not a task's (RP_CHILD_TASK). */
static inline bool rp_is_request(const struct rp_track *k, uint32_t depth)
{
	return k->kind == RP_TRACK_ASYNC && depth == 0 && !k->task;
}

struct rp_tracks {
	struct rp_track *t;
	uint32_t n, max;	/* slots ever used, cap */
	uint32_t *free_slots, n_free;
	uint32_t shift;		/* 64 - log2(the index's slots): index_home()'s top bits */
	uint32_t *index, mask;	/* (src, kind, id) -> slot; UINT32_MAX empty */
	uint32_t live;		/* tracks in use */
	uint32_t last;		/* the slot found last: tried first (a freed slot has
				   kind 0 and a reused one its new key, so it needs no
				   invalidation); < max(max, 1) */
	uint32_t max_depth;
	struct rp_frame *chain;	/* max_depth frames: a tree span's root-to-span path
				   as the close hook sees it */
	struct rp_stats *stats;
	/* Where every span pushed, popped and lost goes (spans.h: the analyses, device,
	 * steps, recorder); NULL: nowhere. */
	struct rp_span_sinks *sinks;
	uint32_t lost_name;	/* the name of lost frames ("[lost]"); RP_NONE: none */
	/* The self time the next rp_track_end() gives the span its END closes (an END
	 * with RP_SPAN_SELF: the producer measured it, summarized children and all). */
	uint64_t end_self;
	bool end_self_set;
	/* The span the next rp_track_end() or rp_track_child_end() closes by its own
	 * END ended in error (RP_SPAN_ERROR); spans it truncates did not. */
	bool end_error;
};

int rp_tracks_init(struct rp_tracks *ts, uint32_t max_tracks, uint32_t max_depth,
		   struct rp_stats *stats);
void rp_tracks_free(struct rp_tracks *ts);

uint32_t rp_tracks_get_slow(struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id,
			    struct rp_counts *c);
/* The home slot of (src, kind, id) in ts->index (stacks.c; for test_tracks). */
uint32_t rp_tracks_home(const struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id);
uint32_t rp_tracks_find_slow(struct rp_tracks *ts, uint32_t src, uint8_t kind, uint64_t id);

/*
 * rp_tracks_get_at() / rp_tracks_find_at() - the track for (src, kind, id), trying
 * the slot *@hint first (kind is never 0, so a freed slot never matches) and leaving
 * the slot found there. @hint is any slot < max(max, 1). A caller that keeps one
 * hint per producer thread finds that thread's track at once however threads
 * interleave; rp_tracks_get() and rp_tracks_find() use last.
 */
static inline bool rp_tracks_is_at(const struct rp_tracks *ts, uint32_t slot, uint32_t src,
				   uint8_t kind, uint64_t id)
{
	const struct rp_track *t = &ts->t[slot];

	return t->id == id && t->kind == kind && t->src == src;
}

static inline uint32_t rp_tracks_get_at(struct rp_tracks *ts, uint32_t *hint, uint32_t src,
					uint8_t kind, uint64_t id, struct rp_counts *c)
{
	uint32_t tr;

	if (rp_tracks_is_at(ts, *hint, src, kind, id))
		return *hint;
	tr = rp_tracks_get_slow(ts, src, kind, id, c);
	if (tr != RP_NONE)
		*hint = tr;
	return tr;
}

static inline uint32_t rp_tracks_find_at(struct rp_tracks *ts, uint32_t *hint, uint32_t src,
					 uint8_t kind, uint64_t id)
{
	uint32_t tr;

	if (rp_tracks_is_at(ts, *hint, src, kind, id))
		return *hint;
	tr = rp_tracks_find_slow(ts, src, kind, id);
	if (tr != RP_NONE)
		*hint = tr;
	return tr;
}

/** rp_tracks_get() - the track for (src, kind, id), made if new; RP_NONE at the cap. */
static inline uint32_t rp_tracks_get(struct rp_tracks *ts, uint32_t src, uint8_t kind,
				     uint64_t id, struct rp_counts *c)
{
	return rp_tracks_get_at(ts, &ts->last, src, kind, id, c);
}

/** rp_tracks_find() - the track for (src, kind, id) if it exists, else RP_NONE. */
static inline uint32_t rp_tracks_find(struct rp_tracks *ts, uint32_t src, uint8_t kind,
				      uint64_t id)
{
	return rp_tracks_find_at(ts, &ts->last, src, kind, id);
}

void rp_track_begin(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t,
		    uint64_t span, struct rp_counts *c);
void rp_track_end(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t, uint64_t span,
		  struct rp_counts *c);

/* The same for thread track @k (a slot of ts->t), for the engine's runs' common
 * records (ts->sinks set): a BEGIN with room on the stack, and an END of the top
 * frame, with no BEGIN skipped, at @depth (the record's; RP_NONE: none) the stack's
 * (the frame it opens or closes is the top); false: not that, nothing done
 * (stacks.c). */
bool rp_track_push_thread(struct rp_tracks *ts, struct rp_track *k, uint32_t name, uint64_t t,
			  uint64_t span, uint32_t depth, struct rp_counts *c);
bool rp_track_pop_thread(struct rp_tracks *ts, struct rp_track *k, uint32_t name, uint64_t t,
			 uint32_t depth, struct rp_counts *c);

/* Tree tracks: @arg as in RP_EV_CHILD_BEGIN (parent << 32 | span); END by span id. */
void rp_track_child_begin(struct rp_tracks *ts, uint32_t tr, uint32_t name, uint64_t t,
			  uint64_t arg, struct rp_counts *c);
void rp_track_child_end(struct rp_tracks *ts, uint32_t tr, uint64_t t, uint64_t span,
			struct rp_counts *c);

/**
 * rp_track_resync() - the first span record of a thread after a producer drop.
 * @is_end:  the record is an END (else a BEGIN)
 * @depth:   its depth (ringprof/wire.h: of the frame it opens or closes)
 * Every open frame becomes lost (counted once under RP_ANOM_DROP_LOST); then the
 * stack is cut or padded with lost placeholders to @depth frames (@depth + 1 for an
 * END). @return true when the record is used up: an END, whose span the drop cut.
 * A BEGIN is then pushed as usual by rp_track_begin().
 */
bool rp_track_resync(struct rp_tracks *ts, uint32_t tr, bool is_end, uint32_t depth, uint64_t t,
		     struct rp_counts *c);

/**
 * rp_track_cut() - a thread's producer healed its nesting (a longjmp): the stack is
 * cut to @want frames, counting the BEGINs the depth cap skipped first (never
 * counted), then popping frames at time @t as truncated (lost ones are not counted
 * again); one RP_ANOM_END_MISMATCH for the cut. Nothing when the stack holds no
 * more than @want.
 */
void rp_track_cut(struct rp_tracks *ts, uint32_t tr, uint32_t want, uint64_t t,
		  struct rp_counts *c);

/**
 * rp_track_offcpu() - thread track @tr was off-CPU for @ns (ingest/offcpu.h): added to
 * its innermost open frame (off_self: its name's and CCT node's offcpu_ns when it
 * closes; off_ns, which its ancestors inherit as it closes, for offcpu_cum_ns).
 * @return false when no span is open (a lost frame or a BEGIN past the depth cap take
 * it too).
 */
bool rp_track_offcpu(struct rp_tracks *ts, uint32_t tr, uint64_t ns);

/**
 * rp_track_summary() - a thread's RP_EV_SUMMARY or RP_EV_SUMMARY_DATA record (wire.h,
 * docs/summaries.md): once a summary has its data, its calls are added under the
 * open frame at its root level (or the summary of the level above it in the same
 * tree): the CCT node, the function's row and the caller edge, primitive when its
 * name is open neither below it on the track nor among its ancestors. Anything
 * malformed (a data record with no summary, a summary whose data never came, a root
 * level not open, a level with no parent, inconsistent figures) is counted as
 * RP_ANOM_BAD_EVENT and leaves the statistics alone. @return false: out of memory.
 */
bool rp_track_summary(struct rp_tracks *ts, uint32_t tr, const struct rp_event *ev,
		      struct rp_counts *c);

/**
 * rp_track_close() - close every open frame at time @t and free the track.
 * @why: RP_ANOM_KIND_COUNT to count the frames as truncated (a producer died, a
 *	 thread's ring changed owner), or an anomaly kind to count them under
 *	 (RP_ANOM_OPEN_AT_END at the end of a trace); RP_ANOM_DROP_LOST: the thread
 *	 lost records after its last one, so its open frames are lost (stacks.h).
 */
void rp_track_close(struct rp_tracks *ts, uint32_t tr, uint64_t t, int why,
		    struct rp_counts *c);

/**
 * rp_track_expire() - an async track whose END a drop may have cut, idle too long
 * (engine.c): every open frame is lost at @t (RP_ANOM_DROP_LOST, its name's
 * drop_lost, out of the concurrency sweeps at @t), and the track is freed.
 * @return the frames lost.
 */
uint32_t rp_track_expire(struct rp_tracks *ts, uint32_t tr, uint64_t t, struct rp_counts *c);

/** rp_tracks_close_src() - rp_track_close() on every track of source @src. */
void rp_tracks_close_src(struct rp_tracks *ts, uint32_t src, uint64_t t, int why,
			 struct rp_counts *c);

#endif
