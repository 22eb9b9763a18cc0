// SPDX-License-Identifier: MIT
/*
 * The report's own helpers: anomaly names and freeing. See report.h.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "sketch.h"
#include "version.h"

const char *const rp_anomaly_names[RP_ANOM_KIND_COUNT] = {
	[RP_ANOM_END_MISMATCH] = "end_mismatch",
	[RP_ANOM_END_UNMATCHED] = "end_unmatched",
	[RP_ANOM_DEPTH_CAP] = "depth_cap",
	[RP_ANOM_TRACK_CAP] = "track_cap",
	[RP_ANOM_NAME_CAP] = "name_cap",
	[RP_ANOM_CCT_CAP] = "cct_cap",
	[RP_ANOM_CLAMPED] = "clamped",
	[RP_ANOM_BAD_EVENT] = "bad_event",
	[RP_ANOM_OPEN_AT_END] = "open_at_end",
	[RP_ANOM_WINDOW_CAP] = "window_cap",
	[RP_ANOM_COUNTER_CAP] = "counter_cap",
	[RP_ANOM_DROP_LOST] = "drop_lost",
	[RP_ANOM_LEVEL_CAP] = "window_level_cap",
	[RP_ANOM_RESTART_GAP] = "restart_gap",
	[RP_ANOM_SKETCH_EVICTED] = "sketch_evicted",
	[RP_ANOM_WINDOW_EVICTED] = "window_evicted",
	[RP_ANOM_MARK_UNMATCHED] = "mark_unmatched",
	[RP_ANOM_MARK_REPEAT] = "mark_repeat",
	[RP_ANOM_CHARGE_ORPHAN] = "charge_orphan",
	[RP_ANOM_CHARGE_LATE] = "charge_late",
	[RP_ANOM_CHARGE_CAP] = "charge_cap",
};

void rp_report_sketch_free(struct rp_report_sketch *k)
{
	free(k->pos);
	free(k->neg);
	memset(k, 0, sizeof(*k));
}

/* One store's dense run: the first pass sizes it, the second fills it. */
struct dense {
	struct rp_report_sketch *k;
	int filling;
};

static int dense_bucket(void *ctx, int sign, int32_t index, uint64_t count)
{
	struct rp_report_sketch *k = ((struct dense *)ctx)->k;
	int32_t *lo = sign > 0 ? &k->pos_lo : &k->neg_lo;
	uint32_t *n = sign > 0 ? &k->n_pos : &k->n_neg;
	uint64_t *run = sign > 0 ? k->pos : k->neg;

	if (sign == 0)
		return 0;
	if (!((struct dense *)ctx)->filling) { /* buckets come by increasing index */
		if (*n == 0)
			*lo = index;
		*n = (uint32_t)(index - *lo) + 1;
		return 0;
	}
	run[index - *lo] = count;
	return 0;
}

int rp_report_sketch_from(struct rp_report_sketch *out, const struct rp_sketch *s)
{
	struct rp_sketch_summary sum;
	struct dense d = { .k = out };

	memset(out, 0, sizeof(*out));
	rp_sketch_get_summary(s, &sum);
	out->alpha = s->alpha;
	out->count = sum.count;
	out->zero = s->zero;
	out->dropped = sum.dropped;
	out->collapsed_neg = sum.collapsed_neg;
	out->collapsed_pos = sum.collapsed_pos;
	out->min = sum.count ? sum.min : 0;
	out->max = sum.count ? sum.max : 0;
	out->sum = sum.count ? sum.sum : 0;
	rp_sketch_foreach_bucket(s, dense_bucket, &d);
	out->pos = out->n_pos ? calloc(out->n_pos, sizeof(*out->pos)) : NULL;
	out->neg = out->n_neg ? calloc(out->n_neg, sizeof(*out->neg)) : NULL;
	if ((out->n_pos && !out->pos) || (out->n_neg && !out->neg)) {
		rp_report_sketch_free(out);
		return -ENOMEM;
	}
	d.filling = 1;
	rp_sketch_foreach_bucket(s, dense_bucket, &d);
	return 0;
}

static int add_run(struct rp_sketch *s, int sign, int32_t lo, uint32_t n, const uint64_t *run)
{
	int err;

	if (n > 0 && (int64_t)lo + n - 1 > INT32_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (run[i] && (err = rp_sketch_add_bucket_count(s, sign, lo + (int32_t)i, run[i])))
			return err;
	return 0;
}

int rp_report_sketch_to(const struct rp_report_sketch *in, struct rp_sketch *out)
{
	struct rp_sketch_summary sum = {
		.count = in->count, .collapsed_neg = in->collapsed_neg,
		.collapsed_pos = in->collapsed_pos, .dropped = in->dropped,
		.min = in->count ? in->min : NAN, .max = in->count ? in->max : NAN,
		.sum = in->sum,
	};
	int err;

	if (in->alpha != out->alpha)
		return -EINVAL;
	rp_sketch_reset(out);
	if ((err = add_run(out, -1, in->neg_lo, in->n_neg, in->neg)) ||
	    (in->zero && (err = rp_sketch_add_bucket_count(out, 0, 0, in->zero))) ||
	    (err = add_run(out, 1, in->pos_lo, in->n_pos, in->pos)) ||
	    (err = rp_sketch_set_summary(out, &sum))) {
		rp_sketch_reset(out);
		return err;
	}
	return 0;
}

void rp_report_bottlenecks_free(struct rp_report_bottlenecks *b)
{
	free(b->by_cum);
	free(b->by_self);
	free(b->by_count);
	free(b->slowest);
	memset(b, 0, sizeof(*b));
}

/* The flight recorder's part of a report (export: recorder.c). */
void rp_report_recorder_free(struct rp_report_recorder *rec)
{
	for (uint32_t i = 0; rec->tracks != NULL && i < rec->n_tracks; i++) {
		free(rec->tracks[i].pid);
		free(rec->tracks[i].tid);
	}
	for (uint32_t i = 0; rec->names != NULL && i < rec->n_names; i++)
		free(rec->names[i]);
	free(rec->tracks);
	free(rec->spans);
	free(rec->names);
	free(rec->samples);
	memset(rec, 0, sizeof(*rec));
}

void rp_report_device_free(struct rp_report_device *d)
{
	for (uint32_t i = 0; i < d->n_ranked; i++) {
		free(d->ranked[i].name);
		free(d->ranked[i].source);
		free(d->ranked[i].source_file);
	}
	free(d->ranked);
	free(d->points);
	free(d->idle);
	free(d->phases);
	memset(d, 0, sizeof(*d));
}

void rp_report_free(struct rp_report *r)
{
	if (r == NULL)
		return;
	for (uint32_t i = 0; i < r->n_sources; i++)
		free(r->sources[i].name), free(r->sources[i].host), free(r->sources[i].boot_id);
	for (uint32_t i = 0; i < r->n_fns; i++) {
		free(r->fns[i].name);
		free(r->fns[i].category);
		free(r->fns[i].file);
		rp_report_sketch_free(&r->fns[i].dur);
	}
	for (uint32_t i = 0; i < r->n_conc; i++)
		free(r->conc[i].name);
	free(r->conc);
	free(r->requests.name);
	for (uint32_t i = 0; i < r->n_cats; i++) {
		free(r->cats[i].name);
		rp_report_sketch_free(&r->cats[i].dur);
	}
	free(r->cats);
	for (uint32_t i = 0; i < r->n_counters; i++) {
		free(r->counters[i].name);
		free(r->counters[i].category);
		rp_report_sketch_free(&r->counters[i].values);
	}
	free(r->counters);
	for (uint32_t i = 0; i < r->n_windows; i++) {
		struct rp_report_window *w = &r->windows[i];

		free(w->name);
		for (uint32_t j = 0; w->fns != NULL && j < w->n_fns; j++)
			rp_report_sketch_free(&w->fns[j].dur);
		free(w->fns);
		for (uint32_t j = 0; j < w->n_conc; j++)
			free(w->conc[j].name);
		free(w->conc);
		rp_report_bottlenecks_free(&w->top);
	}
	free(r->windows);
	rp_report_bottlenecks_free(&r->bottlenecks);
	for (uint32_t i = 0; r->steps != NULL && i < r->n_steps; i++) { /* export */
		free(r->steps[i].name);
		rp_report_sketch_free(&r->steps[i].dur);
	}
	free(r->steps);
	rp_report_recorder_free(&r->recorder);
	rp_report_device_free(&r->device);
	free(r->sources);
	free(r->fns);
	free(r->edges);
	free(r->nodes);
	free(r->clock);
	free(r->writer);
	memset(r, 0, sizeof(*r));
}

char *rp_report_writer(void)
{
	const char *v = rp_version();
	size_t n = strlen(v);
	char *w = malloc(sizeof("ringprof ") + n);

	if (w != NULL) {
		memcpy(w, "ringprof ", sizeof("ringprof ") - 1);
		memcpy(w + sizeof("ringprof ") - 1, v, n + 1);
	}
	return w;
}
