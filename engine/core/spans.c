// SPDX-License-Identifier: MIT
/*
 * A span's way out of the stack machine (spans.h): every span opened enters the
 * concurrency sweeps; every span closed reaches the analyses and, when its own END
 * closed it, the device analysis (with its self time: its children are clamped to
 * it); then the step statistics and the flight recorder, which is filled in place.
 * Before them, once something was charged (charge.h), a charged span's duration goes
 * to its requests, and a request takes the sum it was charged to the slowest list.
 * A span a drop cut leaves the sweeps and goes nowhere else.
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

void rp_spans_close(struct rp_span_sinks *s, const struct rp_track *k,
		    const struct rp_span_info *sp, bool normal)
{
	uint64_t step, dur = sp->end - sp->start;
	struct rp_rec_span *r;
	struct rp_span_info charged;

	if (__builtin_expect(rp_charges_wanted(s->charges, sp), 0)) {
		charged = *sp; /* a charged span's shares; a request's sum of them */
		rp_charges_close_slow(s->charges, k, sp, &charged.charged_ns);
		sp = &charged;
	}
	rp_analyses_close(s->an, sp);
	if (normal)
		rp_device_span(s->dev, s->names, k, (uint32_t)(k - s->tracks), sp);
	step = rp_steps_span(s->steps, sp->name, dur);
	r = rp_recorder_span_slot(s->rec);
	if (r != NULL) /* filled in place: no copy */
		*r = (struct rp_rec_span){
			.start = sp->start,
			.dur = dur,
			.track = k->id,
			.step = step,
			.name = sp->name,
			.src = k->src,
			.kind = k->kind,
			.depth = sp->depth > UINT16_MAX ? UINT16_MAX : (uint16_t)sp->depth,
		};
}

void rp_spans_summary(struct rp_span_sinks *s, const struct rp_sum_call *c, const uint64_t *len,
		      const uint64_t *calls, uint32_t n)
{
	rp_analyses_summary(s->an, c, len, calls, n);
}
