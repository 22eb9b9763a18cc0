// SPDX-License-Identifier: MIT
/*
 * Step statistics; the rules are in steps.h. A span costs one lookup of its name's
 * class (decided once per name id: string compares happen on a name's first
 * completed span only) and, for steps, a few adds and a sketch insertion.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "steps.h"
#include "spread.h"

#define CLS_UNDECIDED 0
#define CLS_NOT_STEP  RP_STEPS_NOT_STEP
#define CLS_PHASE0    2

int rp_steps_init(struct rp_steps *s, const struct rp_names *names, uint32_t max_names,
		  const char *category, const char *prefix)
{
	memset(s, 0, sizeof(*s));
	s->names = names;
	s->max_names = max_names;
	s->other = -1;
	s->category = strdup(category ? category : "step");
	s->prefix = strdup(prefix ? prefix : "");
	s->cls = rp_spread_calloc(max_names ? max_names : 1, sizeof(*s->cls), RP_SPREAD_STEPS);
	if (!s->category || !s->prefix || !s->cls) {
		rp_steps_fini(s);
		return -ENOMEM;
	}
	return 0;
}

void rp_steps_fini(struct rp_steps *s)
{
	for (uint32_t i = 0; i < s->n_phase; i++) {
		free(s->phase[i].name);
		rp_sketch_fini(&s->phase[i].dur);
	}
	free(s->category);
	free(s->prefix);
	rp_spread_free(s->cls);
	memset(s, 0, sizeof(*s));
}

void rp_steps_phase_of(const char *name, const char *category, char *buf, size_t len)
{
	size_t n = strcspn(name, ":/");
	const char *src = name;

	if (name[n] == '\0' || n == 0) { /* no separator, or nothing before it */
		src = category ? category : "";
		n = strlen(src);
	}
	if (n == 0) { /* nor a category (torch's record_function spans): the name */
		src = name;
		n = strlen(src);
	}
	if (len == 0)
		return;
	if (n >= len)
		n = len - 1;
	memcpy(buf, src, n);
	buf[n] = '\0';
}

static bool is_step(const struct rp_steps *s, const struct rp_name_entry *ne)
{
	if (s->category[0] && strcmp(ne->category, s->category) == 0)
		return true;
	/* torch.profiler's schedule marks each step so, in every torch trace */
	if (s->category[0] && strncmp(ne->name, "ProfilerStep#", 13) == 0)
		return true;
	return s->prefix[0] && strncmp(ne->name, s->prefix, strlen(s->prefix)) == 0;
}

/* The index of phase @name, made if new (or "[other]" past the cap); -1: no memory. */
static int phase_index(struct rp_steps *s, const char *name)
{
	uint32_t i;

	for (i = 0; i < s->n_phase; i++)
		if ((int)i != s->other && strcmp(s->phase[i].name, name) == 0)
			return (int)i;
	if (s->n_phase >= RP_STEPS_MAX_PHASES) {
		if (s->other >= 0)
			return s->other;
		name = RP_STEPS_OTHER;
	}
	s->phase[i] = (struct rp_step_phase){ .name = strdup(name) };
	if (s->phase[i].name == NULL || rp_sketch_init(&s->phase[i].dur, RP_SKETCH_ALPHA) != 0) {
		free(s->phase[i].name);
		return -1;
	}
	if (s->n_phase >= RP_STEPS_MAX_PHASES)
		s->other = (int)i;
	s->n_phase++;
	return (int)i;
}

/* Decides the class of name id @name (once). */
static uint16_t classify(struct rp_steps *s, uint32_t name)
{
	const struct rp_name_entry *ne = &s->names->e[name];
	char buf[256];
	int p;

	if (!is_step(s, ne))
		return s->cls[name] = CLS_NOT_STEP;
	rp_steps_phase_of(ne->name, ne->category, buf, sizeof(buf));
	p = phase_index(s, buf);
	if (p < 0)
		return CLS_NOT_STEP; /* out of memory: undecided, tried again next time */
	return s->cls[name] = (uint16_t)(CLS_PHASE0 + p);
}

uint64_t rp_steps_span_slow(struct rp_steps *s, uint32_t name, uint64_t dur_ns)
{
	uint16_t c;
	struct rp_step_phase *ph;

	if (name >= s->max_names || name >= s->names->n)
		return 0;
	c = s->cls[name];
	if (c == CLS_UNDECIDED)
		c = classify(s, name);
	if (c == CLS_NOT_STEP)
		return 0;
	ph = &s->phase[c - CLS_PHASE0];
	if ((int)(c - CLS_PHASE0) == s->other)
		s->folded++;
	if (ph->count == 0 || dur_ns < ph->min_ns)
		ph->min_ns = dur_ns;
	if (dur_ns > ph->max_ns)
		ph->max_ns = dur_ns;
	ph->count++;
	ph->total_ns += dur_ns;
	rp_sketch_add(&ph->dur, (double)dur_ns);
	return ++s->n_steps;
}

static uint64_t round_ns(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

int rp_steps_report(const struct rp_steps *s, struct rp_report *r)
{
	r->steps_folded = s->folded;
	r->steps = calloc(s->n_phase ? s->n_phase : 1, sizeof(*r->steps));
	if (r->steps == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n_phase; i++) {
		const struct rp_step_phase *ph = &s->phase[i];
		struct rp_report_step_phase *o = &r->steps[r->n_steps++];

		*o = (struct rp_report_step_phase){
			.name = strdup(ph->name),
			.count = ph->count,
			.total_ns = ph->total_ns,
			.min_ns = ph->min_ns,
			.max_ns = ph->max_ns,
		};
		if (o->name == NULL || rp_report_sketch_from(&o->dur, &ph->dur) != 0)
			return -ENOMEM;
		if (ph->count == 0)
			continue;
		o->p50_ns = round_ns(rp_sketch_quantile(&ph->dur, 0.50));
		o->p95_ns = round_ns(rp_sketch_quantile(&ph->dur, 0.95));
		o->p99_ns = round_ns(rp_sketch_quantile(&ph->dur, 0.99));
	}
	return 0;
}
