// SPDX-License-Identifier: MIT
/*
 * Streaming analyses over the spans of the stack machine; see analyses.h. Every
 * open and close goes to the overall sweep, to its category's sweep, and for roots
 * to the roots sweep; a close adds the duration to the name's sketch and asks the
 * overall sweep for the level at the call's midpoint (after the close is fed, as
 * sweep.h requires).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"

int rp_analyses_init(struct rp_analyses *a, const struct rp_names *names, uint32_t max_names,
		     uint32_t max_sketch_names)
{
	memset(a, 0, sizeof(*a));
	a->names = names;
	a->max_names = max_names;
	a->max_sketch = max_sketch_names;
	a->cat_of = calloc(max_names, sizeof(*a->cat_of));
	a->sketch = calloc(max_names, sizeof(*a->sketch));
	a->mid_sum = calloc(max_names, sizeof(*a->mid_sum));
	a->mid_count = calloc(max_names, sizeof(*a->mid_count));
	if (!a->cat_of || !a->sketch || !a->mid_sum || !a->mid_count ||
	    rp_sweep_init(&a->overall, RP_ANALYSES_MAX_LEVEL, RP_ANALYSES_HISTORY) ||
	    rp_sweep_init(&a->roots, RP_ANALYSES_MAX_LEVEL, 1)) {
		rp_analyses_fini(a);
		return -ENOMEM;
	}
	return 0;
}

void rp_analyses_fini(struct rp_analyses *a)
{
	for (uint32_t i = 0; a->sketch != NULL && i < a->max_names; i++)
		rp_sketch_destroy(a->sketch[i]);
	for (uint32_t i = 0; i < a->n_cat; i++)
		rp_sweep_fini(&a->cat[i]);
	rp_sweep_fini(&a->overall);
	rp_sweep_fini(&a->roots);
	free(a->cat_of);
	free(a->sketch);
	free(a->mid_sum);
	free(a->mid_count);
	memset(a, 0, sizeof(*a));
}

/* The category sweep of a name; NULL if none could be made. */
static struct rp_sweep *cat_sweep(struct rp_analyses *a, uint32_t name)
{
	const char *cat;
	uint32_t i;

	if (a->cat_of[name] != 0)
		return &a->cat[a->cat_of[name] - 1];
	cat = a->names->e[name].category;
	for (i = 0; i < a->n_cat; i++)
		if (strcmp(a->cat_name[i], cat) == 0)
			break;
	if (i == a->n_cat) {
		if (a->n_cat == RP_ANALYSES_MAX_CATEGORIES) /* the last one is "[other]" */
			i = RP_ANALYSES_MAX_CATEGORIES - 1;
		else if (rp_sweep_init(&a->cat[i], RP_ANALYSES_MAX_LEVEL, 1) != 0)
			return NULL;
		else
			a->cat_name[a->n_cat++] =
				i == RP_ANALYSES_MAX_CATEGORIES - 1 ? "[other]" : cat;
	}
	a->cat_of[name] = (uint8_t)(i + 1);
	return &a->cat[i];
}

void rp_analyses_open(struct rp_analyses *a, uint32_t name, uint32_t depth, uint64_t t)
{
	struct rp_sweep *c = cat_sweep(a, name);

	rp_sweep_open(&a->overall, t);
	if (c != NULL)
		rp_sweep_open(c, t);
	if (depth == 0)
		rp_sweep_open(&a->roots, t);
}

static void add_duration(struct rp_analyses *a, uint32_t name, uint64_t dur)
{
	if (a->sketch[name] == NULL && a->n_sketch < a->max_sketch) {
		a->sketch[name] = rp_sketch_create(0.01);
		a->n_sketch += a->sketch[name] != NULL;
	}
	if (a->sketch[name] != NULL)
		rp_sketch_add(a->sketch[name], (double)dur);
}

void rp_analyses_close(struct rp_analyses *a, uint32_t name, uint32_t depth, uint64_t start,
		       uint64_t end)
{
	struct rp_sweep *c = cat_sweep(a, name);
	uint64_t t = end > start ? end : start;
	uint32_t level;

	rp_sweep_close(&a->overall, t);
	if (c != NULL)
		rp_sweep_close(c, t);
	if (depth == 0)
		rp_sweep_close(&a->roots, t);
	add_duration(a, name, t - start);
	if (rp_sweep_level_at(&a->overall, rp_sweep_midpoint(start, t), &level) >= 0) {
		a->mid_sum[name] += level;
		a->mid_count[name]++;
	}
}

static uint64_t round_ns(double v)
{
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

static int conc_row(struct rp_report_conc *o, const char *name, const struct rp_sweep *s)
{
	o->name = strdup(name);
	if (o->name == NULL)
		return -ENOMEM;
	o->observed_ns = rp_sweep_observed_ns(s);
	o->mean_milli = round_ns(rp_sweep_mean(s) * 1000.0);
	o->p50 = rp_sweep_percentile(s, 5000);
	o->p90 = rp_sweep_percentile(s, 9000);
	o->p95 = rp_sweep_percentile(s, 9500);
	o->p99 = rp_sweep_percentile(s, 9900);
	o->max = rp_sweep_max(s);
	return 0;
}

int rp_analyses_report(const struct rp_analyses *a, const uint32_t *map, struct rp_report *r)
{
	int err;

	for (uint32_t i = 0; i < a->names->n; i++) {
		struct rp_report_fn *f;
		const struct rp_sketch *k = a->sketch[i];

		if (map[i] == RP_NONE)
			continue;
		f = &r->fns[map[i]];
		f->midpoint_sum = a->mid_sum[i];
		f->midpoint_count = a->mid_count[i];
		if (k == NULL || rp_sketch_count(k) == 0)
			continue;
		f->p50_ns = round_ns(rp_sketch_quantile(k, 0.50));
		f->p90_ns = round_ns(rp_sketch_quantile(k, 0.90));
		f->p95_ns = round_ns(rp_sketch_quantile(k, 0.95));
		f->p99_ns = round_ns(rp_sketch_quantile(k, 0.99));
	}
	r->conc = calloc(2 + a->n_cat, sizeof(*r->conc));
	if (r->conc == NULL)
		return -ENOMEM;
	if ((err = conc_row(&r->conc[r->n_conc++], "overall", &a->overall)) ||
	    (err = conc_row(&r->conc[r->n_conc++], "roots", &a->roots)))
		return err;
	for (uint32_t i = 0; i < a->n_cat; i++)
		if ((err = conc_row(&r->conc[r->n_conc++],
				    a->cat_name[i][0] ? a->cat_name[i] : "(none)", &a->cat[i])))
			return err;
	return 0;
}
