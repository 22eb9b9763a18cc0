// SPDX-License-Identifier: MIT
/*
 * A span's way out of the stack machine (spans.h): every span opened enters the
 * concurrency sweeps; every span closed reaches the analyses and, when its own END
 * closed it, the device analysis (with its self time: its children are clamped to
 * it); then the step statistics and the flight recorder, which is filled in place.
 * Before them, once something was charged (charge.h), a charged span's duration goes
 * to its requests, and a request takes the sum it was charged to the slowest list.
 * A span a drop cut leaves the sweeps and goes nowhere else.
 *
 * The common close (no charge kept, no device work seen, a name known to be neither
 * a step nor device work) tests one flag per name for the device analysis and the
 * step statistics together: RP_DEVICE_CLS_QUIET in the device analysis' class table,
 * set here once both have classified the name while it is not armed, and cleared
 * from every name when it arms (so that one bit is the armed test too). Every path that passes the span's description on
 * out of line (charges, the device analysis, the analyses' cold paths) passes a copy
 * made there, so the description the stack machine builds need not live in memory.
 */
#include "analyses.h"
#include "charge.h"
#include "device.h"
#include "recorder.h"
#include "spans.h"
#include "stacks.h"
#include "steps.h"

void rp_spans_open(struct rp_span_sinks *s, uint32_t name, uint32_t depth, uint64_t t,
		   bool request)
{
	rp_analyses_open(s->an, name, depth, t, request);
}

void rp_spans_lost(struct rp_span_sinks *s, uint32_t name, uint32_t depth, uint64_t t,
		   bool request)
{
	rp_analyses_abandon(s->an, name, depth, t, request);
}

/* The device analysis and the step statistics the long way (a name not yet known to
 * be quiet, device work seen or kept): the span's step ordinal + 1, or 0; a name both
 * have classified as neither device work nor a step is marked quiet. */
__attribute__((noinline, cold)) static uint64_t hooks_slow(struct rp_span_sinks *s,
							   const struct rp_track *k,
							   const struct rp_span_info *sp,
							   bool normal)
{
	struct rp_device_head *h = (struct rp_device_head *)(void *)s->dev;
	struct rp_steps *st = s->steps;
	uint32_t name = sp->name;
	uint64_t step;

	if (normal)
		rp_device_span(s->dev, s->names, k, (uint32_t)(k - s->tracks), sp);
	step = rp_steps_span(st, name, sp->end - sp->start);
	if (step == 0 && name < st->max_names && st->cls[name] == RP_STEPS_NOT_STEP &&
	    !h->armed && name < h->n_cls && !(h->cls[name] & RP_DEVICE_CLS_DEVCAT))
		h->cls[name] |= RP_DEVICE_CLS_QUIET; /* both classes are a name's for good;
							arming clears it */
	return step;
}

/* The device analysis and the step statistics: @return the span's step ordinal + 1,
 * or 0. A quiet name while no device work was seen goes to neither (as
 * rp_device_span() leaves it out) and is no step. */
static inline uint64_t hooks(struct rp_span_sinks *s, const struct rp_track *k,
			     const struct rp_span_info *sp, bool normal)
{
	const struct rp_device_head *h = (const struct rp_device_head *)(const void *)s->dev;
	uint32_t name = sp->name;

	/* quiet: not armed, neither device work nor a step (RP_DEVICE_CLS_QUIET) */
	if (__builtin_expect(name < h->n_cls && (h->cls[name] & RP_DEVICE_CLS_QUIET), 1))
		return 0;
	{
		struct rp_span_info c = *sp; /* a copy: sp itself never leaves the close */

		return hooks_slow(s, k, &c, normal);
	}
}

/* Everything after the charges: @sp is the span, charged_ns included. */
static inline void close_span(struct rp_span_sinks *s, const struct rp_track *k,
			      const struct rp_span_info *sp, bool normal)
{
	uint64_t step, dur = sp->end - sp->start;
	struct rp_rec_span *r;

	step = hooks(s, k, sp, normal);
	r = rp_recorder_span_slot(s->rec); /* filled in place, every byte: no copy */
	r->start = sp->start;
	r->dur = dur;
	r->track = k->id;
	r->step = step;
	r->name = sp->name;
	r->src = k->src;
	r->depth_kind = rp_rec_depth_kind(sp->depth, k->kind);
	rp_analyses_close(s->an, sp);
}

/* A close while charges are kept: a charged span's shares, a request's sum of them. */
__attribute__((noinline, cold)) static void close_charged(struct rp_span_sinks *s,
							  const struct rp_track *k,
							  struct rp_span_info *sp, bool normal)
{
	rp_charges_close_slow(s->charges, k, sp, &sp->charged_ns);
	close_span(s, k, sp, normal);
}

void rp_spans_close(struct rp_span_sinks *s, const struct rp_track *k,
		    const struct rp_span_info *sp, bool normal)
{
	if (__builtin_expect(rp_charges_wanted(s->charges, sp), 0)) {
		struct rp_span_info charged = *sp;

		close_charged(s, k, &charged, normal);
		return;
	}
	close_span(s, k, sp, normal);
}

void rp_spans_summary(struct rp_span_sinks *s, const struct rp_sum_call *c, const uint64_t *len,
		      const uint64_t *calls, uint32_t n)
{
	rp_analyses_summary(s->an, c, len, calls, n);
}
