// SPDX-License-Identifier: MIT
/*
 * The analysis core: dispatch of events to tracks, per-source counting, and the
 * report. See engine.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ringprof/ringprof.h> /* rp_ticks_to_ns */

#include "engine.h"
#include "hostid.h"

void rp_engine_cfg_default(struct rp_engine_cfg *cfg)
{
	*cfg = (struct rp_engine_cfg){
		.max_names = 65536,
		.max_tracks = 16384,
		.max_depth = 256,
		.max_cct_nodes = 262144,
		.max_sources = 1024,
		.max_sketch_names = 4096,
		.recorder_spans = 65536,
		.recorder_samples = 16384,
		.max_window_names = 256,
		.max_counters = 1024,
		.topk = 10,
		.max_window_level = 255,
		.subwindows = 10,
		.n_windows = 3,
		.window_ns = { 10000000000ull, 60000000000ull, 300000000000ull },
	};
	rp_device_cfg_default(&cfg->dev);
}

static void analyses_cfg(const struct rp_engine_cfg *cfg, struct rp_analyses_cfg *a)
{
	*a = (struct rp_analyses_cfg){
		.max_names = cfg->max_names, .max_sketch_names = cfg->max_sketch_names,
		.max_counters = cfg->max_counters,
		.win = { .n = cfg->n_windows, .subwindows = cfg->subwindows,
			 .max_names = cfg->max_names, .topk = cfg->topk,
			 .max_level = cfg->max_window_level,
			 .max_window_names = cfg->max_window_names },
	};
	for (uint32_t i = 0; i < cfg->n_windows && i < RP_WINDOW_MAX; i++)
		a->win.length[i] = cfg->window_ns[i];
}

int rp_engine_cfg_check(const struct rp_engine_cfg *cfg, char *why, size_t n)
{
	struct rp_analyses_cfg a;

	if (cfg->max_names < 1 || cfg->max_tracks < 1 || cfg->max_depth < 1 ||
	    cfg->max_cct_nodes < 1 || cfg->max_sources < 1 || cfg->max_counters < 1 ||
	    cfg->max_names > (1u << 26) || cfg->max_tracks > (1u << 26) ||
	    cfg->max_depth > (1u << 26) || cfg->max_cct_nodes > (1u << 26) ||
	    cfg->max_sources > (1u << 26) || cfg->max_counters > (1u << 26) ||
	    cfg->max_sketch_names > (1u << 26)) {
		snprintf(why, n, "a cap is 0 or above 2^26");
		return -EINVAL;
	}
	analyses_cfg(cfg, &a);
	return rp_window_cfg_check(&a.win, why, n);
}

/* Bytes malloc may add to a chunk, and the longest strings a name can bring (the
 * Chrome importer cuts at RP_CHROME_STR_MAX, live names are shorter). */
#define CHUNK_OVERHEAD 16
#define NAME_STRINGS (3 * (512 + 1 + CHUNK_OVERHEAD))

static size_t slots_for(size_t n)
{
	size_t slots = 4;

	while (slots < 2 * n)
		slots <<= 1;
	return slots;
}

size_t rp_engine_memory_bound(const struct rp_engine_cfg *cfg)
{
	struct rp_analyses_cfg a;
	size_t b = sizeof(struct rp_engine), nodes = 2 * (size_t)cfg->max_cct_nodes + 1;
	size_t store = (size_t)rp_sketch_default_buckets(RP_SKETCH_ALPHA) * sizeof(uint64_t);
	size_t chunks;

	analyses_cfg(cfg, &a);
	/* names: entries, index, strings */
	b += (size_t)cfg->max_names * (sizeof(struct rp_name_entry) + NAME_STRINGS) +
	     slots_for(cfg->max_names) * 4;
	/* stats: per name, edges, CCT nodes and both indexes */
	b += (size_t)cfg->max_names * sizeof(struct rp_fn_stats) +
	     (size_t)cfg->max_cct_nodes * sizeof(struct rp_edge_stats) +
	     nodes * sizeof(struct rp_cct_node) + slots_for(cfg->max_cct_nodes) * 4 +
	     slots_for(nodes) * 4;
	/* tracks, their free list and index, and every stack at max_depth (and its
	 * sentinel, stacks.h) */
	b += (size_t)cfg->max_tracks * (sizeof(struct rp_track) + 4 + CHUNK_OVERHEAD +
					((size_t)cfg->max_depth + 1) * sizeof(struct rp_frame)) +
	     slots_for(cfg->max_tracks) * 4 + (size_t)cfg->max_depth * sizeof(struct rp_frame);
	/* a thread track's summaries being read (stacks.h: one path of max_depth) */
	b += (size_t)cfg->max_tracks * (sizeof(struct rp_sum_in) + CHUNK_OVERHEAD +
					(size_t)cfg->max_depth * sizeof(((struct rp_sum_in *)0)->path[0]));
	/* sources: rows and their names (segment names are < 96 bytes) */
	b += ((size_t)cfg->max_sources + 1) * (sizeof(struct rp_source) + 96 + CHUNK_OVERHEAD);
	b += rp_analyses_memory_bound(&a) + rp_windows_memory_bound(&a.win);
	b += rp_marks_memory_bound(cfg->max_tracks) + CHUNK_OVERHEAD;
	b += rp_charges_memory_bound(cfg->max_tracks, cfg->max_names) + 3 * CHUNK_OVERHEAD;
	/* the flight recorder (labels: one per track) and the device analysis */
	b += rp_recorder_memory_bound(cfg->recorder_spans, cfg->recorder_samples,
				      cfg->max_tracks) +
	     rp_device_memory_bound(&cfg->dev, cfg->max_tracks, cfg->max_names);
	/* malloc's share: a header per chunk (sketch stores, names, stacks, sources,
	 * window entries), a page per large array, and one store being regrown */
	chunks = (size_t)cfg->max_sketch_names * 2 + (size_t)cfg->max_counters * 2 +
		 (size_t)cfg->n_windows * cfg->subwindows * (cfg->max_window_names + 16) +
		 RP_ANALYSES_MAX_CATEGORIES * 2 + 256;
	b += chunks * CHUNK_OVERHEAD + 256 * 4096 + 2 * store;
	return b;
}

/* Where source @src's anomalies are counted (charge.h: a late charge is found when
 * its span closes, out of the record's way). */
static struct rp_counts *source_counts(void *ctx, uint32_t src)
{
	return &((struct rp_engine *)ctx)->src[src].counts;
}

int rp_engine_open(const struct rp_engine_cfg *cfg, struct rp_engine **out)
{
	struct rp_analyses_cfg acfg;
	struct rp_engine *e;
	char why[160];
	int err;

	if (cfg != NULL && rp_engine_cfg_check(cfg, why, sizeof(why)) != 0)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	if (cfg != NULL)
		e->cfg = *cfg;
	else
		rp_engine_cfg_default(&e->cfg);
	analyses_cfg(&e->cfg, &acfg);
	e->src = calloc(e->cfg.max_sources, sizeof(*e->src));
	if (e->src == NULL || rp_names_init(&e->names, e->cfg.max_names) ||
	    rp_stats_init(&e->stats, e->cfg.max_names, e->cfg.max_cct_nodes) ||
	    rp_tracks_init(&e->tracks, e->cfg.max_tracks, e->cfg.max_depth, &e->stats) ||
	    (err = rp_analyses_init(&e->an, &e->names, &acfg)) != 0 ||
	    rp_recorder_init(&e->rec, e->cfg.recorder_spans, e->cfg.recorder_samples,
			     e->cfg.max_tracks) ||
	    rp_steps_init(&e->steps, &e->names, e->cfg.max_names, e->cfg.step_category,
			  e->cfg.step_name) ||
	    rp_device_open(&e->cfg.dev, e->cfg.max_tracks, e->cfg.max_names, &e->dev)) {
		rp_engine_close(e);
		return -ENOMEM;
	}
	e->sinks = (struct rp_span_sinks){ .an = &e->an, .dev = e->dev, .names = &e->names,
					     .steps = &e->steps, .rec = &e->rec,
					     .tracks = e->tracks.t };
	e->tracks.sinks = &e->sinks;
	rp_marks_init(&e->marks, e->cfg.max_tracks);
	rp_charges_init(&e->charges, &e->tracks, e->cfg.max_tracks, e->cfg.max_names,
			source_counts, e);
	e->sinks.charges = &e->charges;
	strcpy(e->clock, "monotonic");
	*out = e;
	return 0;
}

void rp_engine_close(struct rp_engine *e)
{
	if (e == NULL)
		return;
	for (uint32_t i = 0; i < e->n_src; i++)
		free(e->src[i].rep.name);
	free(e->src);
	free(e->folded.rep.name);
	rp_tracks_free(&e->tracks);
	rp_marks_free(&e->marks);
	rp_charges_free(&e->charges);
	rp_analyses_fini(&e->an);
	rp_recorder_fini(&e->rec);
	rp_steps_fini(&e->steps);
	rp_device_close(e->dev);
	rp_stats_free(&e->stats);
	rp_names_free(&e->names);
	free(e);
}

void rp_engine_finish_source(struct rp_engine *e, uint32_t src)
{
	if (e->src[src].finished == 0)
		e->src[src].finished = ++e->n_finished;
}

/* Sums row @i into the folded row and frees it. */
static void fold_source(struct rp_engine *e, uint32_t i)
{
	struct rp_source *s = &e->src[i], *f = &e->folded;

	f->rep.events += s->rep.events;
	f->rep.dropped += s->rep.dropped;
	f->rep.late += s->rep.late;
	f->rep.truncated += s->rep.truncated;
	f->rep.names_dropped += s->rep.names_dropped;
	f->rep.nospace_dropped += s->rep.nospace_dropped;
	f->rep.reentrant += s->rep.reentrant;
	f->rep.rings_nospace += s->rep.rings_nospace;
	f->rep.resyncs += s->rep.resyncs;
	f->rep.forced += s->rep.forced;
	f->rep.offcpu_idle_ns += s->rep.offcpu_idle_ns;
	f->rep.summary_raised += s->rep.summary_raised;
	if (s->rep.summary_ns > f->rep.summary_ns)
		f->rep.summary_ns = s->rep.summary_ns;
	f->rep.ring_hwm = s->rep.ring_hwm > f->rep.ring_hwm ? s->rep.ring_hwm : f->rep.ring_hwm;
	f->rep.buffer_hwm =
		s->rep.buffer_hwm > f->rep.buffer_hwm ? s->rep.buffer_hwm : f->rep.buffer_hwm;
	if (s->rep.ring_capacity > f->rep.ring_capacity)
		f->rep.ring_capacity = s->rep.ring_capacity;
	if (s->rep.names_dropped > 0) { /* the name table of one that dropped names */
		f->rep.name_capacity = s->rep.name_capacity;
		f->rep.name_bytes = s->rep.name_bytes;
		f->rep.names_used = s->rep.names_used;
		f->rep.name_bytes_used = s->rep.name_bytes_used;
	}
	f->rep.flags |= s->rep.flags;
	f->counts.truncated += s->counts.truncated;
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		f->counts.anomalies[k] += s->counts.anomalies[k];
	e->n_folded++;
	free(s->rep.name);
}

/* The row to use for a new source: a new one, or the first-finished one folded. */
static int free_row(struct rp_engine *e)
{
	uint32_t best = RP_NONE;

	if (e->n_src < e->cfg.max_sources)
		return (int)e->n_src++;
	for (uint32_t i = 0; i < e->n_src; i++)
		if (e->src[i].finished &&
		    (best == RP_NONE || e->src[i].finished < e->src[best].finished))
			best = i;
	if (best == RP_NONE)
		return -ENOSPC;
	fold_source(e, best);
	return (int)best;
}

int rp_engine_add_source(struct rp_engine *e, const char *name, int32_t pid, uint32_t flags)
{
	int i = free_row(e);
	struct rp_source *s;

	if (i < 0)
		return i;
	s = &e->src[i];
	memset(s, 0, sizeof(*s));
	s->rep.name = strdup(name ? name : "");
	if (s->rep.name == NULL) {
		s->finished = ++e->n_finished; /* an empty row, reusable */
		s->rep.name = NULL;
		return -ENOMEM;
	}
	s->rep.pid = pid;
	s->rep.flags = flags;
	return i;
}

uint32_t rp_engine_name(struct rp_engine *e, uint32_t src, const char *name,
			const char *category, const char *file, uint32_t line)
{
	bool full;
	uint32_t id = rp_names_get(&e->names, name, category, file, line, &full);

	if (full)
		e->src[src].counts.anomalies[RP_ANOM_NAME_CAP]++;
	return id;
}

/* RP_EV_LINK: to the span id in ev->track, else to the thread's innermost span; a
 * charge (RP_LINK_CHARGE) to the charges. */
static void device_link(struct rp_engine *e, struct rp_source *s, uint32_t src, uint64_t thread,
			const struct rp_event *ev)
{
	uint32_t tr;
	const struct rp_track *k;

	if ((ev->flags & ~RP_LINK_ANY) == RP_LINK_CHARGE) { /* wire 1.3: batched work */
		rp_charges_event(&e->charges, src, thread, ev, &s->counts);
		return;
	}
	if (ev->flags != RP_LINK_LAUNCH && ev->flags != RP_LINK_DEVICE) {
		s->counts.anomalies[RP_ANOM_BAD_EVENT]++;
		return;
	}
	if (ev->track != 0) {
		rp_device_link(e->dev, src, RP_NONE, 0, NULL, ev->track, ev->flags, ev->arg);
		return;
	}
	tr = rp_tracks_find(&e->tracks, src, RP_TRACK_THREAD, thread);
	k = tr == RP_NONE ? NULL : &e->tracks.t[tr];
	if (k == NULL || k->depth == 0 || k->skipped)
		rp_device_link(e->dev, src, RP_NONE, 0, NULL, 0, ev->flags, ev->arg);
	else
		rp_device_link(e->dev, src, tr, k->depth - 1, &k->f[k->depth - 1], 0, ev->flags,
			       ev->arg);
}

/* A thread's first span record after its producer lost records, with a usable
 * depth (wire.h): the stack is re-aligned there (stacks.h). */
static inline bool after_drop(const struct rp_event *ev)
{
	return (ev->flags & (RP_SPAN_DEPTH | RP_SPAN_AFTER_DROP)) ==
		       (RP_SPAN_DEPTH | RP_SPAN_AFTER_DROP) &&
	       ev->depth <= RP_DEPTH_MAX;
}

__attribute__((noinline, cold)) static bool resync(struct rp_engine *e, struct rp_source *s,
						   uint32_t tr, const struct rp_event *ev)
{
	bool used, full;

	if (e->tracks.lost_name == RP_NONE) { /* made at the first drop: ids stay as they were */
		uint32_t id = rp_names_get(&e->names, "[lost]", "ringprof", "", 0, &full);

		if (!full)
			e->tracks.lost_name = id;
	}
	used = rp_track_resync(&e->tracks, tr, ev->kind == RP_EV_END, ev->depth, ev->ts,
			       &s->counts);

	rp_device_track_end(e->dev, tr, 0); /* links of lost frames are stale */
	return used;
}

/* An async track's record: when it was opened (its first BEGIN) and last heard of,
 * for the expiry (rp_engine_expire()); and the longest silence a request has kept
 * and still spoken after (the auto expiry), unless its source reported drops since
 * its previous record (the records between may be lost: the gap proves nothing).
 * Before the record is applied. */
static inline void async_touch(struct rp_engine *e, struct rp_track *k, uint64_t t)
{
	if (k->depth == 0 && k->skipped == 0)
		k->born = t;
	else if (t > k->last && t - k->last > e->async_gap_ns &&
		 e->src[k->src].drop_t <= k->last)
		e->async_gap_ns = t - k->last;
	k->last = t;
}

/*
 * A span record whose depth is below the thread's stack (counting the BEGINs the
 * depth cap skipped): the producer healed its nesting (a longjmp left frames open;
 * its shadow popped them, producers/shadow.c), so the frames above that depth are
 * cut here too, as truncated under one end_mismatch, at this record's time. @want:
 * the stack depth before the record (its depth, + 1 for an END). Producers before
 * wire 1.2 never heal, so their depth is never below the stack but after an END the
 * engine could not match, which this counts the same way.
 */
static inline bool below_stack(const struct rp_engine *e, uint32_t tr, const struct rp_event *ev,
			       uint32_t want)
{
	const struct rp_track *k = &e->tracks.t[tr];

	return (ev->flags & RP_SPAN_DEPTH) && want < k->depth + k->skipped;
}

__attribute__((noinline, cold)) static void realign(struct rp_engine *e, struct rp_source *s,
						    uint32_t tr, const struct rp_event *ev,
						    uint32_t want)
{
	if (ev->depth > RP_DEPTH_MAX)
		return;
	rp_track_cut(&e->tracks, tr, want, ev->ts, &s->counts);
	rp_device_track_end(e->dev, tr, e->tracks.t[tr].depth); /* links of cut frames */
}

/* BEGIN and END, each inlined at its case of dispatch(): no flag to test. */
static inline __attribute__((always_inline)) void span_begin(struct rp_engine *e,
							     struct rp_source *s, uint32_t src,
							     uint8_t kind, uint64_t id,
							     const struct rp_event *ev,
							     uint32_t *hint)
{
	uint32_t tr = rp_tracks_get_at(&e->tracks, hint, src, kind, id, &s->counts);

	if (tr == RP_NONE)
		return;
	if (kind == RP_TRACK_THREAD && __builtin_expect(after_drop(ev), 0))
		resync(e, s, tr, ev);
	else if (kind == RP_TRACK_THREAD && __builtin_expect(below_stack(e, tr, ev, ev->depth), 0))
		realign(e, s, tr, ev, ev->depth);
	if (kind == RP_TRACK_ASYNC)
		async_touch(e, &e->tracks.t[tr], ev->ts);
	rp_track_begin(&e->tracks, tr, ev->name, ev->ts, ev->arg, &s->counts);
}

static inline __attribute__((always_inline)) void span_end(struct rp_engine *e,
							   struct rp_source *s, uint32_t src,
							   uint8_t kind, uint64_t id,
							   const struct rp_event *ev,
							   uint32_t *hint)
{
	uint32_t tr = rp_tracks_find_at(&e->tracks, hint, src, kind, id);
	bool lost = kind == RP_TRACK_THREAD && __builtin_expect(after_drop(ev), 0);

	if (tr == RP_NONE) { /* an END on a track with nothing open */
		s->counts.anomalies[lost ? RP_ANOM_DROP_LOST : RP_ANOM_END_UNMATCHED]++;
		return;
	}
	if (lost && resync(e, s, tr, ev))
		return;
	if (kind == RP_TRACK_THREAD && !lost &&
	    __builtin_expect(below_stack(e, tr, ev, ev->depth + 1u), 0))
		realign(e, s, tr, ev, ev->depth + 1u);
	if (kind == RP_TRACK_ASYNC)
		async_touch(e, &e->tracks.t[tr], ev->ts);
	if (kind == RP_TRACK_THREAD && (ev->flags & RP_SPAN_SELF)) { /* docs/summaries.md */
		e->tracks.end_self = ev->arg;
		e->tracks.end_self_set = true;
	}
	e->tracks.end_error = ev->flags & RP_SPAN_ERROR;
	rp_track_end(&e->tracks, tr, ev->name, ev->ts, ev->arg, &s->counts);
	e->tracks.end_self_set = false;
	e->tracks.end_error = false; /* rp_track_end() may return before it reads it */
	if (kind == RP_TRACK_THREAD) /* links of frames closed abnormally are stale */
		rp_device_track_end(e->dev, tr, e->tracks.t[tr].depth);
}

/* A tree track's spans (a request's tasks): see stacks.h. */
__attribute__((noinline)) static void child_begin(struct rp_engine *e, struct rp_source *s,
						  uint32_t src, const struct rp_event *ev)
{
	uint32_t tr = rp_tracks_get(&e->tracks, src, RP_TRACK_ASYNC, ev->track, &s->counts);

	if (tr == RP_NONE)
		return;
	async_touch(e, &e->tracks.t[tr], ev->ts);
	if (e->tracks.t[tr].depth == 0) /* its first span says what the track is */
		e->tracks.t[tr].task = (ev->flags & RP_CHILD_TASK) != 0;
	rp_track_child_begin(&e->tracks, tr, ev->name, ev->ts, ev->arg, &s->counts);
}

__attribute__((noinline)) static void child_end(struct rp_engine *e, struct rp_source *s,
						uint32_t src, const struct rp_event *ev)
{
	uint32_t tr = rp_tracks_find(&e->tracks, src, RP_TRACK_ASYNC, ev->track);

	if (tr == RP_NONE) {
		s->counts.anomalies[RP_ANOM_END_UNMATCHED]++;
		return;
	}
	async_touch(e, &e->tracks.t[tr], ev->ts);
	e->tracks.end_error = ev->flags & RP_SPAN_ERROR;
	rp_track_child_end(&e->tracks, tr, ev->ts, ev->arg, &s->counts);
	e->tracks.end_error = false;
}

__attribute__((noinline)) static void counter_event(struct rp_engine *e, struct rp_source *s,
						    uint32_t src, uint64_t thread,
						    const struct rp_event *ev)
{
	/* the flight recorder keeps the recent samples (chrome export) */
	rp_recorder_sample(&e->rec, &(struct rp_rec_sample){ .ts = ev->ts,
		.value = (int64_t)ev->arg, .track = thread, .name = ev->name, .src = src });
	if (!rp_analyses_counter(&e->an, ev->name, ev->ts, (int64_t)ev->arg))
		s->counts.anomalies[RP_ANOM_COUNTER_CAP]++;
}

/* A producer's summary of short calls, or its data (docs/summaries.md). */
__attribute__((noinline)) static void summary_event(struct rp_engine *e, struct rp_source *s,
						    uint32_t src, uint64_t thread,
						    const struct rp_event *ev, uint32_t *hint)
{
	uint32_t tr = rp_tracks_get_at(&e->tracks, hint, src, RP_TRACK_THREAD, thread,
				       &s->counts);

	if (tr != RP_NONE && !rp_track_summary(&e->tracks, tr, ev, &s->counts))
		s->counts.anomalies[RP_ANOM_BAD_EVENT]++; /* no memory for it */
}

/* Every path ends in a call in tail position, so the hot path needs no frame. */
static inline void dispatch(struct rp_engine *e, struct rp_source *s, uint32_t src,
			    uint64_t thread, const struct rp_event *ev, uint32_t *hint)
{
	switch (ev->kind) {
	case RP_EV_BEGIN:
		span_begin(e, s, src, RP_TRACK_THREAD, thread, ev, hint);
		break;
	case RP_EV_END:
		span_end(e, s, src, RP_TRACK_THREAD, thread, ev, hint);
		break;
	case RP_EV_ASYNC_BEGIN:
		span_begin(e, s, src, RP_TRACK_ASYNC, ev->track, ev, &e->tracks.last);
		break;
	case RP_EV_ASYNC_END:
		span_end(e, s, src, RP_TRACK_ASYNC, ev->track, ev, &e->tracks.last);
		break;
	case RP_EV_CHILD_BEGIN:
		child_begin(e, s, src, ev);
		break;
	case RP_EV_CHILD_END:
		child_end(e, s, src, ev);
		break;
	case RP_EV_COUNTER:
		counter_event(e, s, src, thread, ev);
		break;
	case RP_EV_LINK:
		device_link(e, s, src, thread, ev);
		break;
	case RP_EV_SUMMARY:
	case RP_EV_SUMMARY_DATA:
		summary_event(e, s, src, thread, ev, hint);
		break;
	case RP_EV_INSTANT:
		if (ev->flags & RP_INSTANT_MARK) /* a request's milestone (marks.h) */
			rp_marks_event(&e->marks, &e->tracks, &e->an, src, ev, &s->counts);
		break; /* else counted */
	default:
		s->counts.anomalies[RP_ANOM_BAD_EVENT]++;
	}
}

/* The event clock passed the finest sub-window's end: rotate, then as usual. */
__attribute__((noinline, cold)) static void rotate_dispatch(struct rp_engine *e,
							    struct rp_source *s, uint32_t src,
							    uint64_t thread,
							    const struct rp_event *ev,
							    uint32_t *hint)
{
	rp_analyses_rotate(&e->an, ev->ts);
	dispatch(e, s, src, thread, ev, hint);
}

/*
 * The per-event path compiled as one function (flatten: the stack machine, the span
 * hooks and the analyses inlined, what is marked noinline or cold left out): no
 * call frames and register saves between its parts. 22 instructions less per event
 * under callgrind, and two threads' randomly interleaved records (bench_engine)
 * run about 6% faster.
 */
__attribute__((flatten)) void rp_engine_event_at(struct rp_engine *e, uint32_t src,
						 uint64_t thread, const struct rp_event *ev,
						 uint32_t *hint)
{
	struct rp_source *s = &e->src[src];

	s->rep.events++;
	if (ev->name >= e->names.n) {
		s->counts.anomalies[RP_ANOM_BAD_EVENT]++;
		return;
	}
	/* t_first <= t_merged <= t_last (t_first 0: unset): an event in order can only
	 * set t_first if it is unset, a late one can only lower it. */
	if (ev->ts >= e->t_merged) {
		e->t_merged = ev->ts;
		if (ev->ts > e->t_last)
			e->t_last = ev->ts;
		if (e->t_first == 0)
			e->t_first = ev->ts;
	} else {
		s->rep.late++;
		if (e->t_first == 0 || ev->ts < e->t_first)
			e->t_first = ev->ts;
	}
	if (ev->ts >= e->an.next) /* one compare per event */
		rotate_dispatch(e, s, src, thread, ev, hint);
	else
		dispatch(e, s, src, thread, ev, hint);
}

/*
 * A run of producer threads' records (rp_engine_run()): the common record, a BEGIN
 * or END of a thread in order (@tm: the newest time processed), before the finest
 * sub-window's end (read each time: a hook may move it), with no drop mark, self
 * time or error, whose depth (if given) matches the stack and, for an END, that
 * closes the top frame, is done here with its track slot @tr found once for the
 * run; @return false, having done nothing, for any other, which takes the general
 * path. Each does what rp_engine_event_at() does for such a record, and nothing
 * else, so the results are the same.
 */
static inline __attribute__((always_inline)) bool run_common(struct rp_engine *e,
							     struct rp_source *s, uint32_t tr,
							     uint8_t kind, uint8_t flags,
							     uint16_t depth, uint32_t name,
							     uint64_t ts, uint64_t arg)
{
	struct rp_track *k = &e->tracks.t[tr];
	uint32_t dp = flags & RP_SPAN_DEPTH ? depth : RP_NONE;

	if (ts >= e->an.next || name >= e->names.n)
		return false;
	if (kind == RP_EV_BEGIN)
		return rp_track_push_thread(&e->tracks, k, name, ts, arg, dp, &s->counts);
	if (!rp_track_pop_thread(&e->tracks, k, name, ts, dp, &s->counts))
		return false;
	rp_device_track_end(e->dev, tr, k->depth);
	return true;
}

/* The flags that take a span record off the common path. */
#define RUN_ODD (RP_SPAN_AFTER_DROP | RP_SPAN_SELF | RP_SPAN_ERROR)

static inline __attribute__((always_inline)) bool run_fast(struct rp_engine *e,
							   struct rp_source *s, uint32_t tr,
							   const struct rp_event *ev, uint64_t tm)
{
	return !(ev->flags & RUN_ODD) && ev->ts >= tm &&
	       run_common(e, s, tr, ev->kind, ev->flags, ev->depth, ev->name, ev->ts, ev->arg);
}

/*
 * Producer threads' records in a row, in order: the common ones through run_fast()
 * with each thread's track found once and the event clock in a local, the rest as
 * rp_engine_event_at(). @which NULL: every record is lane 0's.
 */
static inline __attribute__((always_inline)) void run_lanes(struct rp_engine *e,
							    const struct rp_run_lane *lane,
							    const struct rp_event *ev,
							    const uint8_t *which, uint32_t n)
{
	uint32_t tr[RP_RUN_LANES], i = 0, fast;

	for (uint32_t w = 0; w < RP_RUN_LANES; w++)
		tr[w] = RP_NONE;
	while (i < n) {
		uint64_t tm = e->t_merged;

		for (fast = i; i < n; i++) {
			const struct rp_event *x = &ev[i];
			uint32_t w = which != NULL ? which[i] % RP_RUN_LANES : 0;
			struct rp_source *s = &e->src[lane[w].src];

			if (x->kind != RP_EV_BEGIN && x->kind != RP_EV_END)
				break;
			/* the clock's first event, or no track yet: the general path */
			if (tr[w] == RP_NONE &&
			    (e->t_first == 0 ||
			     (tr[w] = rp_tracks_find_at(&e->tracks, lane[w].hint, lane[w].src,
							RP_TRACK_THREAD, lane[w].thread)) ==
				     RP_NONE))
				break;
			if (!run_fast(e, s, tr[w], x, tm))
				break;
			s->rep.events++; /* what rp_engine_event_at() would count */
			tm = x->ts;
		}
		if (i > fast) {
			e->t_merged = tm;
			if (tm > e->t_last)
				e->t_last = tm;
		}
		if (i < n) {
			uint32_t w = which != NULL ? which[i] % RP_RUN_LANES : 0;

			rp_engine_event_at(e, lane[w].src, lane[w].thread, &ev[i++], lane[w].hint);
			for (w = 0; w < RP_RUN_LANES; w++) /* whatever it did: found again */
				tr[w] = RP_NONE;
		}
	}
}

/*
 * Both compiled as one function each (flatten), so that the stack machine and the
 * analyses' hooks are inlined into the loop and their register saves paid once per
 * run, not per record.
 */
__attribute__((flatten)) void rp_engine_run_lanes(struct rp_engine *e,
						  const struct rp_run_lane *lane,
						  const struct rp_event *ev, const uint8_t *which,
						  uint32_t n)
{
	run_lanes(e, lane, ev, which, n);
}

/* One thread: run_lanes() with one track slot in a register and the records
 * counted once per stretch. */
__attribute__((flatten)) void rp_engine_run(struct rp_engine *e, uint32_t src, uint64_t thread,
					    const struct rp_event *ev, uint32_t n, uint32_t *hint)
{
	struct rp_source *s = &e->src[src];
	uint32_t tr = RP_NONE, i = 0, fast;

	while (i < n) {
		uint64_t tm = e->t_merged;

		/* the clock's first event, or no track yet: the general path makes them */
		if (tr == RP_NONE && e->t_first != 0)
			tr = rp_tracks_find_at(&e->tracks, hint, src, RP_TRACK_THREAD, thread);
		for (fast = i; tr != RP_NONE && i < n; i++) {
			const struct rp_event *x = &ev[i];

			if ((x->kind != RP_EV_BEGIN && x->kind != RP_EV_END) ||
			    !run_fast(e, s, tr, x, tm))
				break;
			tm = x->ts;
		}
		s->rep.events += i - fast; /* what rp_engine_event_at() would count */
		if (i > fast) {
			e->t_merged = tm;
			if (tm > e->t_last)
				e->t_last = tm;
		}
		if (i < n) {
			rp_engine_event_at(e, src, thread, &ev[i++], hint);
			tr = RP_NONE; /* (whatever it did, the slot is looked up again) */
		}
	}
}

/*
 * A record of a ring slice as sources.c's take() and process() leave it, when that is
 * all they would do: false for one the caller must see first (not due, an owner mark,
 * a summary's data in ticks, a name not yet mapped).
 */
static inline bool slice_take(const struct rp_wire_clock *clk, const uint32_t *names,
			      uint32_t n_names, uint64_t lim, struct rp_event *x)
{
	if (x->kind == RP_EV_THREAD || x->kind == RP_EV_SUMMARY_DATA || x->name >= n_names ||
	    names[x->name] == RP_NONE)
		return false;
	x->ts = rp_ticks_to_ns(clk, x->ts);
	if (x->ts > lim)
		return false;
	x->name = names[x->name];
	if (x->kind == RP_EV_END && (x->flags & RP_SPAN_SELF))
		x->arg = rp_ticks_len_ns(clk, x->arg); /* a length in ticks */
	return true;
}

/* A span record's kind and flags as one value (kind | flags << 8), and what the ring
 * loop's common BEGIN and END are: their depth given (a producer since wire 1.1 always
 * gives it; one without takes dispatch(), with the same result), no odd flag. */
#define RING_KF_MASK (0xffu | (RUN_ODD | RP_SPAN_DEPTH) << 8)
#define RING_KF_BEGIN (RP_EV_BEGIN | RP_SPAN_DEPTH << 8)
#define RING_KF_END (RP_EV_END | RP_SPAN_DEPTH << 8)

/*
 * The ring loop's clock: rp_ticks_to_ns() of ticks t0 + d, 0 <= d <= dmax, in 64 bits.
 * With D0 = t0 - ref_ticks (signed, as rp_ticks_to_ns() takes it) and D0 * m = Q * 2^s
 * + r (0 <= r < 2^s), floor((D0 + d) * m / 2^s) = Q + floor((r + d * m) / 2^s) while
 * D0 + d < 2^63; base = ref_ns + Q is t0's time (mod 2^64, as rp_ticks_to_ns()), r the
 * product's low s bits (those of the 64-bit product), and while r + d * m < 2^64 it
 * is t * m + c (mod 2^64) with c = r - t0 * m: t's time is base + ((t * m + c) >> s),
 * one multiply where rp_ticks_to_ns() needs a 128-bit one and a wide shift.
 */
struct ring_clock {
	uint64_t m, c, base;
	unsigned int s;
	uint64_t t0, r, dmax;
};

/* (not cold: called before the loop, it would make the loop cold too) */
__attribute__((noinline)) static void ring_clock_at(struct ring_clock *rc,
						     const struct rp_wire_clock *clk, uint64_t t0)
{
	const uint64_t d0 = t0 - clk->ref_ticks;
	uint64_t dmax = (uint64_t)INT64_MAX - d0; /* D0 + d < 2^63 (D0 < 0: above 2^63) */

	rc->t0 = t0;
	rc->m = clk->mult;
	rc->s = clk->shift & 63u;
	rc->base = rp_ticks_to_ns(clk, t0);
	rc->r = d0 * clk->mult & ((UINT64_C(1) << rc->s) - 1u);
	rc->c = rc->r - t0 * clk->mult;
	if (clk->mult != 0 && (UINT64_MAX - rc->r) / clk->mult < dmax)
		dmax = (UINT64_MAX - rc->r) / clk->mult; /* r + d * m < 2^64 */
	if (UINT64_MAX - 1u - t0 < dmax)
		dmax = UINT64_MAX - 1u - t0; /* t0 + dmax < UINT64_MAX: below the sentinel */
	rc->dmax = dmax;
}

/* The latest ticks in [t0, t0 + dmax] whose time is at most @bound: base + ((r + d * m)
 * >> s) <= bound, so r + d * m < (bound - base + 1) * 2^s (then no time wraps past
 * 2^64 either); t0 if none is (t0 then passes the loop's test only after a record
 * at t0 was found due: none is). */
static uint64_t ring_clock_hi(const struct ring_clock *rc, uint64_t bound)
{
	__extension__ unsigned __int128 x;

	if (bound < rc->base)
		return rc->t0;
	if (rc->m == 0)
		return rc->t0 + rc->dmax;
	x = (((__extension__(unsigned __int128)(bound - rc->base)) + 1u) << rc->s) - 1u - rc->r;
	x /= rc->m;
	return rc->t0 + (x < rc->dmax ? (uint64_t)x : rc->dmax);
}

/* The one-event path out of line, for the records the ring loop leaves (late, at a
 * sub-window's end): rare, so the loop does not carry a copy of it. */
__attribute__((noinline)) static void event_out(struct rp_engine *e, uint32_t src,
						uint64_t thread, const struct rp_event *ev,
						uint32_t *hint)
{
	rp_engine_event_at(e, src, thread, ev, hint);
}

/*
 * rp_engine_run() on records read straight from their ring slots: one loop, the
 * slice's clock, name map and bounds in locals (the stack machine's stores cannot
 * alias them), each record's fields read once from its slot, no run buffer between
 * the ring and the stack machine. Per stretch, not per record: the track's slot (the
 * table never moves, and a thread track is freed only by its close, never by a record)
 * and one bound for "due" and "before the sub-window's end" (only the engine rotates
 * the windows, never a span hook, so e->an.next holds for the stretch), as ticks: a
 * record whose ticks are not below the record before's and not past that bound's
 * (p[-1].ts <= t < t_end) is in order and before the bound (the clock is monotonic),
 * and its time is ring_clock's; any other is converted and tested exactly (the
 * stretch's first, a late one, one whose ticks are below the last one's but whose
 * time is not), against the time of the record before it. Within the stretch, a record due, in order and before
 * that end is what rp_engine_event_at() makes of it but for the counters it shares
 * (the source's events, the clock), which the stretch stores once at its end: nothing
 * in dispatch() reads them. The common thread BEGIN or END takes the stack machine's
 * thread path, any other dispatch(), without leaving the loop; the loop stops before a
 * record the sources must see (not due, an owner mark, a summary's data, a name not
 * mapped yet) and before one that is late or at the sub-window's end, which takes the
 * one-event path.
 */
__attribute__((flatten)) uint32_t rp_engine_run_ring(struct rp_engine *e, uint32_t src,
						     uint64_t thread, struct rp_ring_slice *sl,
						     uint32_t *hint)
{
	struct rp_source *s = &e->src[src];
	const struct rp_event *slots = sl->slots;
	const struct rp_wire_clock clk = *sl->clock;
	const uint32_t *names = sl->names;
	const uint32_t mask = sl->mask, h = sl->h, n = sl->n, n_names = sl->n_names;
	const uint64_t lim = sl->lim;
	uint32_t tr = RP_NONE, i = 0, fast;
	uint64_t last = sl->last_ts, tail = sl->tail_ts;
	struct ring_clock rc;

	if (n == 0)
		return 0;
	ring_clock_at(&rc, &clk, slots[h & mask].ts);
	for (;;) {
		uint64_t tm = e->t_merged, next = e->an.next;
		struct rp_event x;
		bool wrap = false;

		/* the clock's first event, or no track yet: the general path makes them */
		if (tr == RP_NONE && e->t_first != 0)
			tr = rp_tracks_find_at(&e->tracks, hint, src, RP_TRACK_THREAD, thread);
		fast = i;
		if (tr != RP_NONE && next != 0 && tm <= (next - 1 < lim ? next - 1 : lim)) {
			struct rp_track *k = &e->tracks.t[tr];
			const uint64_t bound = next - 1 < lim ? next - 1 : lim;
			/* up to the slice's end or the ring's, whichever is first (a
			 * slice wraps round the ring once at most: the next stretch
			 * takes the rest) */
			const uint32_t at = (h + i) & mask;
			const struct rp_event *const p0 = &slots[at], *p = p0,
						    *const end = p0 + (n - i < mask + 1 - at ?
									n - i : mask + 1 - at);
			/* t_end 0: the stretch's first record is tested exactly */
			uint64_t t_hi = ring_clock_hi(&rc, bound), t_end = 0;

			/* (a count down: its test is one decrement, as the count
			 * and the pointer are kept in memory in this loop) */
			for (size_t left = (size_t)(end - p0); left != 0; left--, p++) {
				const uint64_t t = p->ts;
				const uint32_t id = p->name,
					       kf = ((uint32_t)p->kind | (uint32_t)p->flags << 8) &
						    RING_KF_MASK;
				uint32_t name;
				uint64_t ts;

				/* A mapped name is an engine id (rp_engine_name()): no
				 * test against the name table as rp_engine_event_at()'s. */
				if (id >= n_names)
					break;
				name = names[id];
				if (name == RP_NONE)
					break;
				if (__builtin_expect(t < t_end && t >= p[-1].ts, 1)) {
					ts = rc.base + ((t * rc.m + rc.c) >> rc.s);
				} else {
					/* the time of the record before, in order */
					uint64_t t1 = p > p0 ? rp_ticks_to_ns(&clk, p[-1].ts) : tm;

					ts = rp_ticks_to_ns(&clk, t);
					/* t1 <= ts <= bound (t1 <= bound), in one compare */
					if (ts - t1 > bound - t1)
						break;
					/* every record taken in [t0, t0 + dmax]: the next
					 * one's ticks, not below this one's, then convert */
					if (t - rc.t0 > rc.dmax) {
						ring_clock_at(&rc, &clk, t);
						t_hi = ring_clock_hi(&rc, bound);
					}
					t_end = t_hi + 1u;
				}
				/* the common record (the stack machine's thread path
				 * says whether it is one): a BEGIN or END with its depth
				 * and no odd flag, kind and flags in one compare each */
				if (kf == RING_KF_BEGIN) {
					if (rp_track_push_thread(&e->tracks, k, name, ts, p->arg,
								 p->depth, &s->counts)) {
						continue;
					}
				} else if (kf == RING_KF_END) {
					if (rp_track_pop_thread(&e->tracks, k, name, ts, p->depth,
								&s->counts)) {
						rp_device_track_end(e->dev, tr, k->depth);
						continue;
					}
				}
				/* any other: as slice_take() and rp_engine_event_at() */
				x = *p;
				if (x.kind == RP_EV_THREAD || x.kind == RP_EV_SUMMARY_DATA)
					break;
				x.ts = ts;
				x.name = name;
				if (x.kind == RP_EV_END && (x.flags & RP_SPAN_SELF))
					x.arg = rp_ticks_len_ns(&clk, x.arg);
				dispatch(e, s, src, thread, &x, hint);
			}
			i += (uint32_t)(p - p0);
			wrap = p == end && i < n; /* the rest from the ring's start */
			if (p > p0) /* the time of the last record processed */
				tm = rp_ticks_to_ns(&clk, p[-1].ts);
		}
		if (i > fast) {
			s->rep.events += i - fast; /* what rp_engine_event_at() would count */
			e->t_merged = tm;
			if (tm > e->t_last)
				e->t_last = tm;
			last = tm > last ? tm : last;
			tail = tm;
		}
		if (i == n)
			break;
		if (wrap)
			continue;
		x = slots[(h + i) & mask];
		if (!slice_take(&clk, names, n_names, lim, &x))
			break; /* the caller's */
		last = x.ts > last ? x.ts : last;
		event_out(e, src, thread, &x, hint);
		tail = x.ts;
		i++;
	}
	sl->last_ts = last;
	sl->tail_ts = tail;
	return i;
}

void rp_engine_event(struct rp_engine *e, uint32_t src, uint64_t thread,
		     const struct rp_event *ev)
{
	rp_engine_event_at(e, src, thread, ev, &e->tracks.last);
}

void rp_engine_close_thread(struct rp_engine *e, uint32_t src, uint64_t thread, uint64_t t,
			    int why)
{
	uint32_t tr = rp_tracks_find(&e->tracks, src, RP_TRACK_THREAD, thread);

	rp_analyses_clock(&e->an, t);
	e->an.t_hi = t > e->an.t_hi ? t : e->an.t_hi;
	if (tr != RP_NONE)
		rp_track_close(&e->tracks, tr, t, why, &e->src[src].counts);
}

void rp_engine_source_dropped(struct rp_engine *e, uint32_t src, uint64_t t)
{
	if (t > e->src[src].drop_t)
		e->src[src].drop_t = t;
	e->drops_seen = true;
}

uint64_t rp_engine_async_expire_ns(const struct rp_engine *e)
{
	uint64_t x = e->cfg.async_expire_ns;

	if (x != 0)
		return x;
	x = e->async_gap_ns > UINT64_MAX / 4 ? UINT64_MAX - 1 : 4 * e->async_gap_ns;
	return x > RP_EXPIRE_AUTO_MIN_NS ? x : RP_EXPIRE_AUTO_MIN_NS;
}

/* An async track open across a drop of its source: its END may be lost. */
static bool suspect(const struct rp_engine *e, const struct rp_track *k)
{
	uint64_t d = e->src[k->src].drop_t;

	return k->kind == RP_TRACK_ASYNC && d != 0 && k->born < d;
}

/* Suspect track @tr closed as lost at @now, counted in e->expiry. */
static void expire_track(struct rp_engine *e, uint32_t tr, uint64_t now)
{
	struct rp_track *k = &e->tracks.t[tr];
	uint64_t stale = now > k->last ? now - k->last : 0;

	e->expiry.spans += rp_track_expire(&e->tracks, tr, now, &e->src[k->src].counts);
	e->expiry.requests++;
	if (stale > e->expiry.stale_max_ns)
		e->expiry.stale_max_ns = stale;
}

void rp_engine_expire(struct rp_engine *e, uint64_t now)
{
	uint64_t x = rp_engine_async_expire_ns(e), step, peak = 0;

	if (!e->drops_seen || x == RP_EXPIRE_NEVER || now < e->expire_next)
		return;
	step = x / 8 > 1000000 ? x / 8 : 1000000;
	e->expire_next = now > UINT64_MAX - step ? UINT64_MAX : now + step;
	rp_analyses_clock(&e->an, now); /* the windows first, as a close does */
	e->an.t_hi = now > e->an.t_hi ? now : e->an.t_hi;
	for (uint32_t i = 0; i < e->tracks.n; i++) {
		struct rp_track *k = &e->tracks.t[i];

		if (!suspect(e, k))
			continue;
		for (uint32_t j = 0; j < k->depth; j++) /* the bound: see report.h */
			peak += !k->f[j].lost;
		if (k->last <= now && now - k->last >= x)
			expire_track(e, i, now);
	}
	if (peak > e->expiry.peak_spans)
		e->expiry.peak_spans = peak;
}

/* The expiry as reported: what was expired, and the suspects open now. */
static void expiry_report(const struct rp_engine *e, struct rp_report *r)
{
	uint64_t x = rp_engine_async_expire_ns(e);

	r->expiry = e->expiry;
	r->expiry.expire_ns = x == RP_EXPIRE_NEVER ? 0 : x;
	for (uint32_t i = 0; e->drops_seen && i < e->tracks.n; i++) {
		const struct rp_track *k = &e->tracks.t[i];

		if (!suspect(e, k))
			continue;
		r->expiry.suspect_requests++;
		for (uint32_t j = 0; j < k->depth; j++)
			r->expiry.suspect_spans += !k->f[j].lost;
	}
}

void rp_engine_close_source(struct rp_engine *e, uint32_t src, uint64_t t, int why)
{
	rp_analyses_clock(&e->an, t);
	e->an.t_hi = t > e->an.t_hi ? t : e->an.t_hi;
	/* Its suspect requests may have lost their END: lost, not cut at its end (a
	 * made-up duration), unless the expiry is off. */
	for (uint32_t i = 0; e->src[src].drop_t && i < e->tracks.n; i++)
		if (e->tracks.t[i].src == src && suspect(e, &e->tracks.t[i]) &&
		    rp_engine_async_expire_ns(e) != RP_EXPIRE_NEVER)
			expire_track(e, i, t);
	rp_tracks_close_src(&e->tracks, src, t, why, &e->src[src].counts);
}

void rp_engine_offcpu(struct rp_engine *e, uint32_t src, uint64_t thread, uint64_t ns,
		      uint32_t *hint)
{
	uint32_t tr = rp_tracks_find_at(&e->tracks, hint, src, RP_TRACK_THREAD, thread);

	e->offcpu.intervals++;
	e->offcpu.total_ns += ns;
	if (tr == RP_NONE || !rp_track_offcpu(&e->tracks, tr, ns))
		e->src[src].rep.offcpu_idle_ns += ns;
}

/* Which names the report lists: called, or the name of a CCT node. */
static uint32_t *name_map(const struct rp_engine *e, uint32_t *n_out)
{
	uint32_t *map = malloc((size_t)e->names.n * sizeof(*map)), n = 0;

	if (map == NULL)
		return NULL;
	for (uint32_t i = 0; i < e->names.n; i++)
		map[i] = e->stats.fn[i].calls || e->stats.fn[i].drop_lost ? 0 : RP_NONE;
	for (uint32_t i = 1; i < e->stats.n_nodes; i++)
		map[e->stats.nodes[i].name] = 0;
	for (uint32_t i = 0; i < e->names.n; i++)
		if (map[i] != RP_NONE)
			map[i] = n++;
	*n_out = n;
	return map;
}

/*
 * A function some of whose calls came in producers' summaries with no histogram (a
 * producer before them, docs/summaries.md): its sketch lacks them, so its percentiles
 * would describe the others, not its calls: none are shown (0, as past the sketch cap).
 */
static void no_summarized_quantiles(const struct rp_engine *e, const uint32_t *map,
				    struct rp_report *r)
{
	for (uint32_t i = 0; i < e->names.n; i++) {
		struct rp_report_fn *o;

		if (map[i] == RP_NONE || e->stats.fn[i].unsketched == 0)
			continue;
		o = &r->fns[map[i]];
		o->p50_ns = o->p90_ns = o->p95_ns = o->p99_ns = 0;
		rp_report_sketch_free(&o->dur);
		memset(&o->dur, 0, sizeof(o->dur));
	}
}

static int copy_fns(const struct rp_engine *e, const uint32_t *map, struct rp_report *r)
{
	for (uint32_t i = 0; i < e->names.n; i++) {
		const struct rp_name_entry *ne = &e->names.e[i];
		const struct rp_fn_stats *f = &e->stats.fn[i];
		struct rp_report_fn *o;

		if (map[i] == RP_NONE)
			continue;
		o = &r->fns[map[i]];
		*o = (struct rp_report_fn){
			.name = strdup(ne->name), .category = strdup(ne->category),
			.file = strdup(ne->file), .line = ne->line, .calls = f->calls,
			.primitive_calls = f->primitive_calls, .self_ns = f->self_ns,
			.cum_ns = f->cum_ns, .total_ns = f->total_ns, .min_ns = rp_fn_min_ns(f),
			.max_ns = f->max_ns, .drop_lost = f->drop_lost,
			.offcpu_ns = f->offcpu_ns, .offcpu_cum_ns = f->offcpu_cum_ns,
			.errors = f->errors, .started = f->started, .milestone = f->milestone,
		};
		if (!o->name || !o->category || !o->file)
			return -ENOMEM;
	}
	return 0;
}

static void copy_graph(const struct rp_engine *e, const uint32_t *map, struct rp_report *r)
{
	for (uint32_t i = 0; i < e->stats.n_edges; i++) {
		const struct rp_edge_stats *s = &e->stats.edges[i];
		r->edges[i] = (struct rp_report_edge){
			.caller = map[s->caller], .callee = map[s->callee], .calls = s->calls,
			.primitive_calls = s->primitive_calls, .self_ns = s->self_ns,
			.cum_ns = s->cum_ns,
		};
	}
	for (uint32_t i = 0; i < e->stats.n_nodes; i++) {
		const struct rp_cct_node *s = &e->stats.nodes[i];
		r->nodes[i] = (struct rp_report_node){
			.parent = s->parent, .fn = i ? map[s->name] : RP_NONE, .calls = s->calls,
			.self_ns = s->self_ns, .total_ns = s->total_ns, .offcpu_ns = s->offcpu_ns,
		};
	}
}

/* One source row of the report, and its part of the totals. */
static int copy_source(const struct rp_source *s, const char *name, struct rp_report *r,
		       struct rp_report_source *o)
{
	*o = s->rep;
	o->truncated += s->counts.truncated;
	memcpy(o->anomalies, s->counts.anomalies, sizeof(o->anomalies));
	o->name = strdup(name);
	if (o->name == NULL)
		return -ENOMEM;
	r->events += o->events;
	r->dropped += o->dropped;
	r->late += o->late;
	r->truncated += o->truncated;
	for (int k = 0; k < RP_ANOM_KIND_COUNT; k++)
		r->anomalies[k] += o->anomalies[k];
	return 0;
}

/* Live sources write on this host's CLOCK_MONOTONIC (shared memory: they share the
 * engine's host and boot), so their identity and anchor are the engine's; a trace
 * file's are not known (""). */
static int source_identity(const struct rp_engine *e, const struct rp_host_id *h,
			   struct rp_report_source *o)
{
	bool live = !(o->flags & RP_SRC_FILE) && strcmp(e->clock, "monotonic") == 0;

	o->host = strdup(live ? h->host : "");
	o->boot_id = strdup(live ? h->boot_id : "");
	o->anchor_realtime_ns = live ? h->realtime_ns : 0;
	o->anchor_monotonic_ns = live ? h->monotonic_ns : 0;
	o->clock_shift_ns = 0;
	return o->host && o->boot_id ? 0 : -ENOMEM;
}

static int copy_sources(const struct rp_engine *e, struct rp_report *r)
{
	struct rp_host_id h;
	char name[64];
	int err = 0;

	rp_host_id_read(&h);
	for (uint32_t i = 0; i < e->n_src && !err; i++)
		if (e->src[i].rep.name != NULL) {
			struct rp_report_source *o = &r->sources[r->n_sources++];

			err = copy_source(&e->src[i], e->src[i].rep.name, r, o);
			if (!err)
				err = source_identity(e, &h, o);
		}
	if (e->n_folded > 0 && !err) {
		struct rp_report_source *o = &r->sources[r->n_sources++];

		snprintf(name, sizeof(name), "[%llu finished sources]",
			 (unsigned long long)e->n_folded);
		err = copy_source(&e->folded, name, r, o);
		if (!err)
			err = source_identity(e, &h, o);
	}
	return err;
}

static void fill_header(const struct rp_engine *e, struct rp_report *r)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	r->version_major = RP_REPORT_VERSION_MAJOR;
	r->version_minor = RP_REPORT_VERSION_MINOR;
	r->created_realtime_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	r->t_first = e->t_first;
	r->t_last = e->t_last;
	r->caps = (struct rp_report_caps){
		.max_names = e->cfg.max_names, .max_tracks = e->cfg.max_tracks,
		.max_depth = e->cfg.max_depth, .max_cct_nodes = e->cfg.max_cct_nodes,
		.max_sources = e->cfg.max_sources, .max_sketch_names = e->cfg.max_sketch_names,
		.max_window_names = e->cfg.max_window_names, .max_counters = e->cfg.max_counters,
		.topk = e->cfg.topk, .memory_bound = rp_engine_memory_bound(&e->cfg),
		.subwindows = e->cfg.subwindows, .max_window_level = e->cfg.max_window_level,
	};
}

/* export: step statistics and the flight recorder. */
static int export_report(const struct rp_engine *e, const uint32_t *map, struct rp_report *r)
{
	uint32_t *src_map = malloc((e->n_src ? e->n_src : 1) * sizeof(*src_map)), n = 0;
	int err;

	if (src_map == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_src; i++) /* the rows copy_sources() lists */
		src_map[i] = e->src[i].rep.name != NULL ? n++ : RP_NONE;
	err = rp_steps_report(&e->steps, r);
	if (err == 0)
		err = rp_recorder_report(&e->rec, &e->names, map, src_map, e->n_src, &r->recorder);
	free(src_map);
	return err;
}

/* One exact all-time list: the top k of @v (by name id) as report rows. */
static int top_list(const struct rp_engine *e, const uint32_t *map, const uint64_t *v,
		    struct rp_report_top **out, uint32_t *n)
{
	uint32_t k = e->cfg.topk, got;
	struct rp_topk_entry *t = calloc(k, sizeof(*t));

	*out = calloc(k, sizeof(**out));
	if (t == NULL || *out == NULL) {
		free(t);
		return -ENOMEM;
	}
	got = rp_topk_select(v, e->names.n, k, t);
	for (uint32_t i = 0; i < got; i++)
		if (map[t[i].key] != RP_NONE && t[i].count > 0)
			(*out)[(*n)++] = (struct rp_report_top){ .fn = map[t[i].key],
								 .value = t[i].count };
	free(t);
	return 0;
}

/* All-time bottleneck lists: exact, from the function statistics (bound 0). */
static int all_time_top(const struct rp_engine *e, const uint32_t *map, struct rp_report *r)
{
	struct rp_report_bottlenecks *b = &r->bottlenecks;
	uint64_t *v = malloc(((size_t)e->names.n + 1) * sizeof(*v));
	int err = -ENOMEM;

	if (v == NULL)
		return err;
	for (uint32_t i = 0; i < e->names.n; i++)
		v[i] = e->stats.fn[i].cum_ns;
	if ((err = top_list(e, map, v, &b->by_cum, &b->n_by_cum)))
		goto out;
	for (uint32_t i = 0; i < e->names.n; i++)
		v[i] = (int64_t)e->stats.fn[i].self_ns < 0 ? 0 : e->stats.fn[i].self_ns;
	if ((err = top_list(e, map, v, &b->by_self, &b->n_by_self)))
		goto out;
	for (uint32_t i = 0; i < e->names.n; i++)
		v[i] = e->stats.fn[i].calls;
	err = top_list(e, map, v, &b->by_count, &b->n_by_count);
out:
	free(v);
	return err;
}

int rp_engine_report(const struct rp_engine *e, struct rp_report *r)
{
	return rp_engine_report_at(e, 0, r);
}

int rp_engine_report_at(const struct rp_engine *e, uint64_t now_ns, struct rp_report *r)
{
	uint64_t t_end = e->t_last > now_ns ? e->t_last : now_ns;
	uint32_t *map, n_fns = 0;
	int err = -ENOMEM;

	memset(r, 0, sizeof(*r));
	fill_header(e, r);
	map = name_map(e, &n_fns);
	r->clock = strdup(e->clock);
	r->writer = rp_report_writer();
	r->fns = calloc(n_fns ? n_fns : 1, sizeof(*r->fns));
	r->edges = calloc(e->stats.n_edges ? e->stats.n_edges : 1, sizeof(*r->edges));
	r->nodes = calloc(e->stats.n_nodes, sizeof(*r->nodes));
	r->sources = calloc(e->n_src + 1, sizeof(*r->sources)); /* + the folded row */
	if (!map || !r->clock || !r->fns || !r->edges || !r->nodes || !r->sources)
		goto out;
	r->n_fns = n_fns;
	if ((err = copy_fns(e, map, r)) != 0 || (err = copy_sources(e, r)) != 0 ||
	    (err = rp_analyses_report(&e->an, map, t_end, r)) != 0 ||
	    (err = all_time_top(e, map, r)) != 0 ||
	    (err = rp_device_report(e->dev, &e->names, &r->device)) != 0)
		goto out;
	if ((err = export_report(e, map, r)) != 0)
		goto out;
	rp_charges_report(&e->charges, map, e->names.n, r);
	no_summarized_quantiles(e, map, r);
	copy_graph(e, map, r);
	expiry_report(e, r);
	r->offcpu = e->offcpu;
	r->n_edges = e->stats.n_edges;
	r->n_nodes = e->stats.n_nodes;
out:
	free(map);
	return err;
}
