/* SPDX-License-Identifier: MIT */
/*
 * Step statistics (what SageMaker Debugger users look at): the durations of the
 * spans that mark a training or serving step, grouped by phase.
 *
 * Which spans are steps: those whose category equals the step category (default
 * "step"; "" turns the rule off), torch.profiler's "ProfilerStep#N" spans (unless
 * that rule is off: every torch trace taken with a schedule has them), and those
 * whose name starts with the step name prefix (default none). Decided once per name
 * id, on its first completed span.
 *
 * Phase of a step: the part of its name before the first ':' or '/' when the
 * name has one and that part is not empty ("train/step" -> "train", "decode:42" ->
 * "decode"); else its category ("ProfilerStep#3" [user_annotation] ->
 * "user_annotation"); else, with no category either (torch's record_function
 * spans), its name ("train_step"). So
 * train/eval or prefill/decode steps come apart by name, and a trace that marks
 * phases by category does too.
 *
 * Per phase: count, sum, min and max exactly, and a DDSketch (engine/analyses/sketch.c,
 * alpha 1%) for p50, p95 and p99 within 1% of the exact order statistic. At most
 * RP_STEPS_MAX_PHASES phases; steps of later phases go to "[other]" and are counted
 * (folded). Memory: 2 bytes per name id, and per phase a sketch (<= 36 KB).
 *
 * Every step also gets an ordinal (0, 1, 2, ... in completion order), which the
 * flight recorder keeps so exports can select steps A..B.
 */
#ifndef RP_ENGINE_STEPS_H
#define RP_ENGINE_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "report.h"
#include "sketch.h"

#define RP_STEPS_MAX_PHASES 64
#define RP_STEPS_OTHER	    "[other]"
#define RP_STEPS_NOT_STEP   1 /* cls[] of a name that is not a step */

struct rp_step_phase {
	char *name;
	uint64_t count, total_ns, min_ns, max_ns;
	struct rp_sketch dur;
};

struct rp_steps {
	const struct rp_names *names;
	char *category; /* owned; "" = no category rule */
	char *prefix;	/* owned; "" = no name rule */
	uint16_t *cls;	/* per name id: 0 undecided, 1 not a step,
			   2 + phase index; a name's for good once decided */
	uint32_t max_names;
	struct rp_step_phase phase[RP_STEPS_MAX_PHASES + 1]; /* + "[other]" */
	uint32_t n_phase;
	int other;	  /* index of "[other]", or -1 */
	uint64_t n_steps; /* steps so far: the next ordinal */
	uint64_t folded;
};

/**
 * rp_steps_init() - step statistics over @names (ids < @max_names).
 * @category: the step category (NULL: "step"; "": none).
 * @prefix: the step name prefix (NULL or "": none).
 * @return 0 or -ENOMEM.
 */
int rp_steps_init(struct rp_steps *s, const struct rp_names *names, uint32_t max_names,
		  const char *category, const char *prefix);
void rp_steps_fini(struct rp_steps *s);

/**
 * rp_steps_span() - a completed span of @name lasting @dur_ns.
 * @return its step ordinal + 1, or 0 if it is not a step.
 */
uint64_t rp_steps_span_slow(struct rp_steps *s, uint32_t name, uint64_t dur_ns);

/* A completed span of @name: its step ordinal + 1, or 0 if it is not a step. A name
 * known not to be a step (cls 1) is answered inline. */
static inline uint64_t rp_steps_span(struct rp_steps *s, uint32_t name, uint64_t dur_ns)
{
	if (name < s->max_names && s->cls[name] == RP_STEPS_NOT_STEP)
		return 0;
	return rp_steps_span_slow(s, name, dur_ns);
}

/**
 * rp_steps_phase_of() - the phase of a step named @name of @category, written to
 * @buf (@len bytes, cut to fit). Exposed for tests and documentation.
 */
void rp_steps_phase_of(const char *name, const char *category, char *buf, size_t len);

/** rp_steps_report() - the phases, in order of first step. @return 0 or -ENOMEM. */
int rp_steps_report(const struct rp_steps *s, struct rp_report *r);

#endif
