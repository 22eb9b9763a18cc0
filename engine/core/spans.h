/* SPDX-License-Identifier: MIT */
/*
 * Where a span goes once the stack machine has opened, closed or lost it: the
 * analyses (statistics of the call's time, concurrency, windows, top-k), the device
 * analysis, the step statistics and the flight recorder. The stack machine
 * (stacks.c) calls these through the struct rp_span_sinks its tracks carry; the
 * engine (engine.c) fills it once its parts exist. So stacks.c depends on this
 * module and the modules it feeds, never on the engine that owns them all.
 * Direct calls, not pointers, so that link-time optimization inlines them into the
 * stack machine (one call per span).
 */
#ifndef RP_ENGINE_SPANS_H
#define RP_ENGINE_SPANS_H

#include <stdbool.h>
#include <stdint.h>

struct rp_analyses;
struct rp_charges;
struct rp_device;
struct rp_names;
struct rp_recorder;
struct rp_steps;
struct rp_track;
struct rp_span_info;
struct rp_sum_call;

struct rp_span_sinks {
	struct rp_analyses *an;
	struct rp_device *dev; /* NULL: no device analysis */
	const struct rp_names *names;
	struct rp_steps *steps;
	struct rp_recorder *rec;
	const struct rp_track *tracks; /* the track table: a track's slot is its index */
	struct rp_charges *charges; /* batched work charged to requests; never NULL (the
				       close tests it unguarded): empty until a charge */
};

/* A span was pushed at depth @depth at time @t; @request: rp_is_request() of it
 * (stacks.h), as in rp_spans_lost(). */
void rp_spans_open(struct rp_span_sinks *s, uint32_t name, uint32_t depth, uint64_t t,
		   bool request);

/*
 * A span was popped. @k is its track, whose frames up to sp->depth are still in place
 * (k->f[sp->depth] is the span just popped); @normal: the span is the top frame its
 * END named (a thread span, or an async span of that name and a non-zero span id), not
 * one closed as truncated nor at a track's end.
 */
void rp_spans_close(struct rp_span_sinks *s, const struct rp_track *k,
		    const struct rp_span_info *sp, bool normal);

/* A frame rp_spans_open() saw became lost at time @t (rp_track_resync); it never
 * reaches rp_spans_close(). */
void rp_spans_lost(struct rp_span_sinks *s, uint32_t name, uint32_t depth, uint64_t t,
		   bool request);

/* A producer's summary whose histogram holds all its calls (docs/summaries.md): @n
 * buckets, @len[i] ns long with @calls[i] calls. */
void rp_spans_summary(struct rp_span_sinks *s, const struct rp_sum_call *c, const uint64_t *len,
		      const uint64_t *calls, uint32_t n);

#endif
