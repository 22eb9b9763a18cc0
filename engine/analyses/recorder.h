/* SPDX-License-Identifier: MIT */
/*
 * The flight recorder: the last N completed spans and the last M counter samples,
 * kept so that a report (live or from a trace) can be exported as a timeline
 * (Chrome trace, Gantt chart) without keeping the whole event history.
 *
 * Two rings of fixed records, allocated once at open: recording a span or a sample
 * is a store into the next slot (no allocation, no lock), overwriting the oldest
 * one when the ring is full; every overwrite is counted (wrapped), so a report says
 * exactly how much of the history is gone. Spans are kept in completion order
 * (a child before its parent); the exporters sort them.
 *
 * Track labels: how an exporter should name a track. A trace file's (pid, tid)
 * strings become the importer's track numbers; the importer gives them back here
 * (rp_recorder_label) so the export shows the trace's own pids and tids. Bounded by
 * max_labels; past it a track is exported under a generated number (labels_dropped).
 *
 * Track numbers in reports: a track keeps its number from one report to the next
 * (rp_rec_numbering), so the spans still in the ring read the same in the next
 * snapshot and its encoder can reuse their bytes (snapshot.h, rp_snap_cache). A report
 * therefore also lists tracks none of its spans or samples use any more, until they
 * are more than half of the list (and at least RP_REC_TRACKS_SLACK): then the unused
 * ones go and the rest are numbered again, in the same order.
 *
 * Memory: 48 bytes per span slot, 32 per sample slot, 16 per label slot plus the
 * label strings (each at most RP_CHROME_STR_MAX bytes), and the numbering: at most
 * 2 * (spans + samples) + RP_REC_TRACKS_SLACK tracks of 32 bytes.
 */
#ifndef RP_ENGINE_RECORDER_H
#define RP_ENGINE_RECORDER_H

#include <stdint.h>

#include "names.h"
#include "report.h"

struct rp_rec_span {
	uint64_t start, dur;
	uint64_t track; /* thread track id, or the async track id */
	uint64_t step;	/* step ordinal + 1 (steps.h); 0 if not a step */
	uint32_t name, src;
	union {
		struct {
			uint16_t depth; /* 0 = a root of its track (capped at 65535) */
			uint8_t kind;	/* enum rp_track_kind */
			uint8_t pad[5];
		};
		uint64_t depth_kind; /* the three at once: rp_rec_depth_kind() */
	};
};

/* depth (capped) and kind as depth_kind holds them, the pad zero: one store. */
static inline uint64_t rp_rec_depth_kind(uint32_t depth, uint8_t kind)
{
	uint64_t d = depth > UINT16_MAX ? UINT16_MAX : depth;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return d << 48 | (uint64_t)kind << 40;
#else
	return d | (uint64_t)kind << 16;
#endif
}

struct rp_rec_sample {
	uint64_t ts;
	int64_t value;
	uint64_t track; /* the thread track it came from */
	uint32_t name, src;
};

struct rp_rec_label {
	uint64_t track;
	uint32_t src; /* UINT32_MAX: empty slot */
	uint32_t pad;
	char *pid, *tid;
};

#define RP_REC_TRACKS_SLACK 1024u

/* A report's track numbers, kept between reports (recorder.c). */
struct rp_rec_numbering;

struct rp_recorder {
	/* Changed by rp_recorder_report(), which takes the recorder const: it is
	 * what was reported, not what was recorded. */
	struct rp_rec_numbering *numbering;
	struct rp_rec_span *spans;
	struct rp_rec_span *span_next; /* the next slot, spans + n_spans % max_spans; spans
					  when none is kept (max_spans 0) */
	struct rp_rec_span *span_end;  /* spans + max_spans; spans + 1 when none is kept:
					  one scratch slot, written and never read */
	uint32_t max_spans;
	uint32_t span_lap;  /* spans in a lap of the ring: max_spans, or 1 (the scratch
			       slot) when none is kept */
	uint64_t n_laps;    /* spans recorded before the ring's current lap (all of them
			       when none is kept): rp_recorder_n_spans() */
	struct rp_rec_sample *samples;
	uint32_t max_samples;
	uint32_t sample_head;	     /* the next slot = n_samples % max_samples */
	uint64_t n_samples;
	struct rp_rec_label *labels; /* open addressing on (src, track) */
	uint32_t labels_mask, n_labels, max_labels;
	uint64_t labels_dropped;
};

/**
 * rp_recorder_init() - rings of @max_spans spans and @max_samples samples (0 = none
 * recorded), and room for @max_labels track labels. @return 0 or -ENOMEM.
 */
#define RP_REC_LABEL_MAX 63 /* bytes of a pid or tid label kept */

/* Worst-case bytes rp_recorder_init() and the labels allocate (not its report). */
size_t rp_recorder_memory_bound(uint32_t max_spans, uint32_t max_samples, uint32_t max_labels);

int rp_recorder_init(struct rp_recorder *r, uint32_t max_spans, uint32_t max_samples,
		     uint32_t max_labels);
void rp_recorder_fini(struct rp_recorder *r);

/* Spans ever recorded: the laps' and the current lap's (no count kept per span). */
static inline uint64_t rp_recorder_n_spans(const struct rp_recorder *r)
{
	return r->n_laps + (r->span_next != NULL ? (uint64_t)(r->span_next - r->spans) : 0);
}

/* The slot the next span goes to, counted as recorded: the caller fills it in
 * place (every field, pad included). Never NULL: when no span is kept it is the
 * scratch slot, whose every span ends a lap of one (counted in n_laps, as a kept
 * ring's laps are) and which no report reads (it keeps min(n, max_spans) = 0). */
static inline struct rp_rec_span *rp_recorder_span_slot(struct rp_recorder *r)
{
	struct rp_rec_span *s = r->span_next; /* no index, no division on the hot path */

	if (__builtin_expect(s + 1 != r->span_end, 1)) {
		r->span_next = s + 1;
	} else {
		r->span_next = r->spans;
		r->n_laps += r->span_lap;
	}
	return s;
}

/* A completed span (hot path: one store). */
static inline void rp_recorder_span(struct rp_recorder *r, const struct rp_rec_span *s)
{
	*rp_recorder_span_slot(r) = *s;
}

/* A counter sample (hot path: one store). */
static inline void rp_recorder_sample(struct rp_recorder *r, const struct rp_rec_sample *s)
{
	if (r->max_samples == 0) {
		r->n_samples++;
		return;
	}
	r->samples[r->sample_head] = *s;
	if (++r->sample_head == r->max_samples)
		r->sample_head = 0;
	r->n_samples++;
}

/** rp_recorder_wrapped() - spans overwritten (or not kept at all) so far. */
static inline uint64_t rp_recorder_wrapped(const struct rp_recorder *r)
{
	uint64_t n = rp_recorder_n_spans(r);

	return n > r->max_spans ? n - r->max_spans : 0;
}

/**
 * rp_recorder_label() - name the thread track (@src, @track) as (@pid, @tid) in
 * exports (copied; a second call for the same track replaces the first).
 * @return 0, -ENOSPC at the label cap (counted in labels_dropped) or -ENOMEM.
 */
int rp_recorder_label(struct rp_recorder *r, uint32_t src, uint64_t track, const char *pid,
		      const char *tid);

/**
 * rp_recorder_report() - the recorder's contents as report data: spans and samples
 * oldest first, the tracks they use with their labels (see struct
 * rp_report_recorder), counter names. @map: engine name id -> index into r->fns, or
 * RP_NONE (spans of unlisted names are left out and counted in unlisted).
 * @src_map: engine source row -> index into r->sources (RP_NONE: unlisted, then the
 * span is left out likewise). @return 0 or -ENOMEM.
 */
int rp_recorder_report(const struct rp_recorder *rec, const struct rp_names *names,
		       const uint32_t *map, const uint32_t *src_map, uint32_t n_src,
		       struct rp_report_recorder *out);

#endif
