// SPDX-License-Identifier: MIT
/*
 * Merging reports (engine/formats/merge.c). Each input is built here from raw samples the
 * test keeps, so every merged figure has an independent answer: counts and times are
 * the sums over the raw samples of the inputs, quantiles the exact order statistics
 * of their union (within the sketch's 1%), the merged sketch the sketch of the
 * union bucket for bucket, bottleneck lists within their stated bounds of the true
 * weights of the union's streams. `ringprof merge` on snapshot files must give the
 * bytes of the in-memory merge.
 */
#include "support.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "merge.h"
#include "sketch.h"
#include "snapshot.h"
#include "topk.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAXV	      4000u /* raw samples per function per input, at most */
#define NIN	      3u    /* inputs */
#define NNAMES	      5u
#define MAXS	      300u /* step durations per phase per input, at most */
#define NPHASES	      2u

static uint64_t rng;

static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/* A duration in ns over six decades. */
static uint64_t rnd_dur(void)
{
	return 1 + rnd() % 1000 * (1ull << (rnd() % 20));
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	assert_non_null(p);
	return p;
}

/* The names (name, category, file, line). "g" twice: another file is another row. */
static const struct {
	const char *name, *cat, *file;
	uint32_t line;
} names[NNAMES] = {
	{ "f", "LLM", "model.c", 10 },	{ "g", "LLM", "model.c", 20 },
	{ "g", "LLM", "other.c", 20 },	{ "h", "", "", 0 },
	{ "k", "GPU", "kernel.cu", 7 },
};

/* Raw samples of input i, name j (0 samples: the name is not in that input). */
struct raw {
	uint64_t v[NIN][NNAMES][MAXV];
	uint32_t n[NIN][NNAMES];
	int64_t cv[NIN][MAXV]; /* counter "queue" samples */
	uint32_t cn[NIN];
	uint64_t sv[NIN][NPHASES][MAXS]; /* step durations of "fwd", "bwd" */
	uint32_t sn[NIN][NPHASES];
};

static const char *const phases[NPHASES] = { "fwd", "bwd" };

static void sketch_of(struct rp_report_sketch *k, const uint64_t *v, uint32_t n)
{
	struct rp_sketch s;

	assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
	for (uint32_t i = 0; i < n; i++)
		rp_sketch_add(&s, (double)v[i]);
	assert_int_equal(rp_report_sketch_from(k, &s), 0);
	rp_sketch_fini(&s);
}

static uint64_t q_ns(const struct rp_report_sketch *k, double q)
{
	struct rp_sketch s;
	double v;

	assert_int_equal(rp_sketch_init(&s, k->alpha), 0);
	assert_int_equal(rp_report_sketch_to(k, &s), 0);
	v = rp_sketch_quantile(&s, q);
	rp_sketch_fini(&s);
	return v > 0 ? (uint64_t)(v + 0.5) : 0;
}

static const double qs[4] = { 0.5, 0.9, 0.95, 0.99 };

/* A function row from raw samples: every figure a function of them. */
static void fn_from(struct rp_report_fn *f, uint32_t j, const uint64_t *v, uint32_t n)
{
	uint64_t sum = 0, min = UINT64_MAX, max = 0;

	for (uint32_t i = 0; i < n; i++) {
		sum += v[i];
		min = v[i] < min ? v[i] : min;
		max = v[i] > max ? v[i] : max;
	}
	f->name = strdup(names[j].name);
	f->category = strdup(names[j].cat);
	f->file = strdup(names[j].file);
	f->line = names[j].line;
	f->calls = n;
	f->primitive_calls = n - n / 4;
	f->total_ns = sum;
	f->cum_ns = sum - sum / 8;
	f->self_ns = sum / 2;
	f->min_ns = min;
	f->max_ns = max;
	f->midpoint_sum = 3ull * n;
	f->midpoint_count = n;
	f->drop_lost = n / 3;
	f->offcpu_ns = sum / 5;
	f->offcpu_cum_ns = sum / 4;
	sketch_of(&f->dur, v, n);
	f->p50_ns = q_ns(&f->dur, 0.5);
	f->p90_ns = q_ns(&f->dur, 0.9);
	f->p95_ns = q_ns(&f->dur, 0.95);
	f->p99_ns = q_ns(&f->dur, 0.99);
}

static void fill_raw(struct raw *w, uint64_t seed)
{
	rng = seed;
	for (uint32_t i = 0; i < NIN; i++) {
		for (uint32_t j = 0; j < NNAMES; j++) {
			/* input 1 lacks "h", input 2 lacks "f" */
			w->n[i][j] = (i == 1 && j == 3) || (i == 2 && j == 0)
					     ? 0
					     : 500 + (uint32_t)(rnd() % (MAXV - 500));
			for (uint32_t k = 0; k < w->n[i][j]; k++)
				w->v[i][j][k] = rnd_dur() * (j + 1);
		}
		for (uint32_t p = 0; p < NPHASES; p++) { /* input 1 has no "bwd" */
			w->sn[i][p] = i == 1 && p == 1 ? 0 : 50 + (uint32_t)(rnd() % (MAXS - 50));
			for (uint32_t k = 0; k < w->sn[i][p]; k++)
				w->sv[i][p][k] = rnd_dur();
		}
		w->cn[i] = 100 + (uint32_t)(rnd() % 900);
		for (uint32_t k = 0; k < w->cn[i]; k++)
			w->cv[i][k] = (int64_t)(rnd() % 5000) - 1000;
	}
}

static void add_parts(struct rp_report *r, const struct raw *w, uint32_t i);

/* Input @i: its functions in its own order (reversed for odd inputs, so indices
 * differ between inputs), a CCT and edges by name, a counter, a category. */
static void build_input(struct rp_report *r, const struct raw *w, uint32_t i)
{
	uint32_t map[NNAMES], n = 0;

	memset(r, 0, sizeof(*r));
	r->version_major = 1;
	r->version_minor = RP_REPORT_VERSION_MINOR;
	r->clock = strdup("monotonic");
	r->created_realtime_ns = 1000 + i;
	r->t_first = 100 - 10 * i;
	r->t_last = 200 + (i == 1 ? 500 : i);
	r->caps = (struct rp_report_caps){ .max_names = 100 + i, .topk = 3 };
	r->events = 1000 * (i + 1);
	r->dropped = i;
	r->late = 2 * i;
	r->truncated = 3 * i;
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		r->anomalies[k] = k + i;
	r->n_sources = 1 + i % 2;
	r->sources = xcalloc(r->n_sources, sizeof(*r->sources));
	for (uint32_t s = 0; s < r->n_sources; s++) {
		char name[32];

		snprintf(name, sizeof(name), "in%" PRIu32 ".src%" PRIu32, i, s);
		r->sources[s].name = strdup(name);
		r->sources[s].events = 10 * i + s;
		r->sources[s].pid = (int32_t)(100 * i + s);
	}
	r->fns = xcalloc(NNAMES, sizeof(*r->fns));
	for (uint32_t jj = 0; jj < NNAMES; jj++) {
		uint32_t j = i % 2 ? NNAMES - 1 - jj : jj;

		map[j] = RP_NONE;
		if (w->n[i][j] == 0)
			continue;
		map[j] = n;
		fn_from(&r->fns[n++], j, w->v[i][j], w->n[i][j]);
	}
	r->n_fns = n;
	/* Edges and CCT: g(model.c) called from f, k called from g(model.c) where
	 * present, f at the root. */
	r->edges = xcalloc(2, sizeof(*r->edges));
	r->nodes = xcalloc(4, sizeof(*r->nodes));
	r->nodes[0] = (struct rp_report_node){ .parent = RP_NONE, .fn = RP_NONE, .calls = 1 };
	r->n_nodes = 1;
	if (map[0] != RP_NONE) {
		r->edges[r->n_edges++] = (struct rp_report_edge){ map[0], map[1], 5 + i, 4, 3, 2 };
		r->nodes[r->n_nodes++] = (struct rp_report_node){ 0, map[0], 7 + i, 70, 700 };
		r->nodes[r->n_nodes++] = (struct rp_report_node){ 1, map[1], 8 + i, 80, 800 };
	} else {
		r->nodes[r->n_nodes++] = (struct rp_report_node){ 0, map[1], 9 + i, 90, 900 };
	}
	r->edges[r->n_edges++] = (struct rp_report_edge){ map[1], map[4], 11 + i, 10, 9, 8 };
	r->nodes[r->n_nodes] = (struct rp_report_node){ r->n_nodes - 1, map[4], 12, 120, 1200 };
	r->n_nodes++;
	r->n_conc = 1;
	r->conc = xcalloc(1, sizeof(*r->conc));
	r->conc[0] = (struct rp_report_conc){ .name = strdup("overall"), .max = 3 + i };
	/* One counter, one category. */
	r->n_counters = 1;
	r->counters = xcalloc(1, sizeof(*r->counters));
	{
		struct rp_report_counter *c = &r->counters[0];
		struct rp_sketch s;
		long double sum = 0;

		c->name = strdup("queue");
		c->category = strdup("Q");
		c->samples = w->cn[i];
		c->min = INT64_MAX;
		c->max = INT64_MIN;
		assert_int_equal(rp_sketch_init(&s, RP_SKETCH_ALPHA), 0);
		for (uint32_t k = 0; k < w->cn[i]; k++) {
			rp_sketch_add(&s, (double)w->cv[i][k]);
			sum += w->cv[i][k];
			c->min = w->cv[i][k] < c->min ? w->cv[i][k] : c->min;
			c->max = w->cv[i][k] > c->max ? w->cv[i][k] : c->max;
		}
		c->last = w->cv[i][w->cn[i] - 1];
		c->mean = (double)(sum / w->cn[i]);
		assert_int_equal(rp_report_sketch_from(&c->values, &s), 0);
		rp_sketch_fini(&s);
	}
	r->n_cats = 1;
	r->cats = xcalloc(1, sizeof(*r->cats));
	r->cats[0].name = strdup("LLM");
	r->cats[0].calls = w->n[i][0] + w->n[i][1] + w->n[i][2];
	r->cats[0].total_ns = 17 + i;
	{
		uint64_t *all = xcalloc(3 * MAXV, sizeof(*all));
		uint32_t m = 0;

		for (uint32_t j = 0; j < 3; j++)
			for (uint32_t k = 0; k < w->n[i][j]; k++)
				all[m++] = w->v[i][j][k];
		sketch_of(&r->cats[0].dur, all, m);
		free(all);
	}
	add_parts(r, w, i);
}

/* The flight recorder of input i: spans (end times interleaved across inputs), caps
 * 10 / 5 spans and 6 / 3 samples (the first input's are the merge's). */
static const uint32_t rec_spans[NIN] = { 6, 4, 5 }, rec_samples[NIN] = { 4, 3, 2 };
static const char *const rec_names[NIN][2] = { { "mem", "q" }, { "q", "z" }, { "z", NULL } };

static uint64_t rec_end(uint32_t i, uint32_t k)
{
	return 100 * (k * NIN + (NIN - 1 - i)) + 50 + 10 * i;
}

static void add_recorder(struct rp_report_recorder *c, const struct rp_report *r, uint32_t i)
{
	c->max_spans = i == 0 ? 10 : 5;
	c->max_samples = i == 0 ? 6 : 3;
	c->n_tracks = 2;
	c->tracks = xcalloc(2, sizeof(*c->tracks));
	for (uint32_t t = 0; t < 2; t++) {
		char pid[16], tid[16];

		snprintf(pid, sizeof(pid), "p%" PRIu32, i);
		snprintf(tid, sizeof(tid), "t%" PRIu32 ".%" PRIu32, i, t);
		c->tracks[t] = (struct rp_report_rtrack){ .source = t % r->n_sources,
							  .kind = (uint8_t)(1 + t),
							  .id = 100 * i + t,
							  .pid = strdup(t ? "" : pid),
							  .tid = strdup(t ? "" : tid) };
	}
	c->n_spans = rec_spans[i];
	c->spans = xcalloc(c->n_spans, sizeof(*c->spans));
	for (uint32_t k = 0; k < c->n_spans; k++) {
		uint64_t dur = 50 + 10 * k;

		c->spans[k] = (struct rp_report_rspan){ .fn = k % r->n_fns,
							.track = k % 2,
							.depth = k % 3,
							.step = k,
							.start_ns = rec_end(i, k) - dur,
							.dur_ns = dur };
	}
	c->n_names = i == 2 ? 1 : 2;
	c->names = xcalloc(2, sizeof(*c->names));
	for (uint32_t k = 0; k < c->n_names; k++)
		c->names[k] = strdup(rec_names[i][k]);
	c->n_samples = rec_samples[i];
	c->samples = xcalloc(c->n_samples, sizeof(*c->samples));
	for (uint32_t k = 0; k < c->n_samples; k++)
		c->samples[k] = (struct rp_report_rsample){ .name = k % c->n_names,
							    .track = k % 2,
							    .ts_ns = 10 * (k * NIN + i) + 5,
							    .value = (int64_t)k - 10 * (int64_t)i };
	c->wrapped = 3 * i;
	c->unlisted = i;
	c->spans_seen = c->n_spans + c->wrapped + c->unlisted;
	c->samples_wrapped = i;
	c->samples_seen = c->n_samples + i + 1;
	c->labels_dropped = i;
}

/* Device data in inputs 0 and 2; input 1 has none but a cap hit. */
static const double dev_scores[NIN][4] = { { 2.0, 0.5, -1.0 }, { 0 }, { 1.5, 0.5, -0.2, -3 } };

static void add_device(struct rp_report_device *d, uint32_t i)
{
	if (i == 1) {
		d->spans_dropped = 5;
		return;
	}
	*d = (struct rp_report_device){
		.launches = 10 + i,
		.kernels = 20 + i,
		.other_device = 1,
		.linked = 9 + i,
		.unmatched_launches = 1,
		.unmatched_kernels = 2,
		.spans = 100 + i,
		.busy_ns = 1000 * (i + 1),
		.idle_ns = 500 + i,
		.max_queue_depth = 3 + i,
		.n_points_total = 5,
		.n_idle_total = 2,
		.n_phases_total = 3,
		.candidates = 10 + i,
		.spans_dropped = i,
		.events_dropped = 2 * i,
		.links_dropped = 3 * i,
		.links_orphan = 4 * i,
	};
	d->n_points = 3;
	d->points = xcalloc(3, sizeof(*d->points));
	for (uint32_t k = 0; k < 3; k++)
		d->points[k] = (struct rp_report_dev_point){ 10 * k + i, k };
	d->n_idle = d->n_phases = 2;
	d->idle = xcalloc(2, sizeof(*d->idle));
	d->phases = xcalloc(2, sizeof(*d->phases));
	for (uint32_t k = 0; k < 2; k++) {
		d->idle[k] = (struct rp_report_dev_interval){ 100 * k, 100 * k + 40 + i };
		d->phases[k] = (struct rp_report_dev_interval){ 100 * k, 100 * k + 90 };
	}
	d->n_ranked = i == 0 ? 3 : 4;
	d->ranked = xcalloc(d->n_ranked, sizeof(*d->ranked));
	for (uint32_t k = 0; k < d->n_ranked; k++) {
		struct rp_report_dev_span *x = &d->ranked[k];
		char name[32];

		snprintf(name, sizeof(name), "r%" PRIu32 ".%" PRIu32, i, k);
		x->name = strdup(name);
		x->source = strdup("a.py(3): f");
		x->source_file = strdup("a.py");
		x->source_line = 3;
		x->queue_depth = k;
		x->phase = k % 3;
		x->start_ns = 10 * k;
		x->dur_ns = 5;
		x->self_ns = (int64_t)k - 2;
		x->idle_ns = k;
		x->idle_fraction = 0.1 * k;
		x->score = dev_scores[i][k];
	}
}

/* Steps (phases in reversed order for odd inputs), recorder, device of input i. */
static void add_parts(struct rp_report *r, const struct raw *w, uint32_t i)
{
	r->steps = xcalloc(NPHASES, sizeof(*r->steps));
	r->steps_folded = 7 + i;
	for (uint32_t pp = 0; pp < NPHASES; pp++) {
		uint32_t p = i % 2 ? NPHASES - 1 - pp : pp, n = w->sn[i][p];
		struct rp_report_step_phase *o;
		uint64_t min = UINT64_MAX, max = 0, sum = 0;

		if (n == 0)
			continue;
		o = &r->steps[r->n_steps++];
		for (uint32_t k = 0; k < n; k++) {
			sum += w->sv[i][p][k];
			min = w->sv[i][p][k] < min ? w->sv[i][p][k] : min;
			max = w->sv[i][p][k] > max ? w->sv[i][p][k] : max;
		}
		o->name = strdup(phases[p]);
		o->count = n;
		o->total_ns = sum;
		o->min_ns = min;
		o->max_ns = max;
		sketch_of(&o->dur, w->sv[i][p], n);
		o->p50_ns = q_ns(&o->dur, 0.5);
		o->p95_ns = q_ns(&o->dur, 0.95);
		o->p99_ns = q_ns(&o->dur, 0.99);
	}
	add_recorder(&r->recorder, r, i);
	add_device(&r->device, i);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The exact lower-rank q-quantile of @v (sorted, n > 0). */
static double exact_q(const uint64_t *v, uint32_t n, double q)
{
	return (double)v[rp_sketch_rank(n, q) - 1];
}

static uint32_t find_fn(const struct rp_report *r, uint32_t j)
{
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].name, names[j].name) == 0 &&
		    strcmp(r->fns[i].file, names[j].file) == 0)
			return i;
	fail_msg("%s (%s) not in the merged report", names[j].name, names[j].file);
	return RP_NONE;
}

static void merge_all(struct rp_report *out, struct rp_report *in, uint32_t n)
{
	char why[RP_WHY_MAX];

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < n; i++)
		if (rp_report_merge(out, &in[i], why, sizeof(why)) != 0)
			fail_msg("merge %" PRIu32 ": %s", i, why);
}

static struct raw raw; /* big: static */

/* Every function figure is the sum over the inputs' raw samples; min and max those of
 * the union; quantiles within 1% of the union's exact ones; the sketch that of the
 * union, bucket for bucket. */
static void test_merge_functions_exact(void **state)
{
	struct rp_report in[NIN], m;
	uint64_t *u = xcalloc(NIN * NNAMES * MAXV, sizeof(*u));

	(void)state;
	fill_raw(&raw, 1);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&m, in, NIN);
	assert_int_equal(m.n_fns, NNAMES);
	for (uint32_t j = 0; j < NNAMES; j++) {
		const struct rp_report_fn *f = &m.fns[find_fn(&m, j)];
		uint64_t calls = 0, prim = 0, total = 0, cum = 0, self = 0, lost = 0, off = 0, off_cum = 0;
		uint32_t n = 0;
		struct rp_report_sketch want;

		for (uint32_t i = 0; i < NIN; i++) {
			uint64_t s = 0;

			for (uint32_t k = 0; k < raw.n[i][j]; k++) {
				s += raw.v[i][j][k];
				u[n++] = raw.v[i][j][k];
			}
			calls += raw.n[i][j];
			lost += raw.n[i][j] / 3;
			off += s / 5;
			off_cum += s / 4;
			prim += raw.n[i][j] - raw.n[i][j] / 4;
			total += s;
			cum += s - s / 8;
			self += s / 2;
		}
		qsort(u, n, sizeof(*u), cmp_u64);
		assert_int_equal(f->calls, calls);
		assert_int_equal(f->primitive_calls, prim);
		assert_int_equal(f->total_ns, total);
		assert_int_equal(f->cum_ns, cum);
		assert_int_equal(f->self_ns, self);
		assert_int_equal(f->min_ns, u[0]);
		assert_int_equal(f->max_ns, u[n - 1]);
		assert_int_equal(f->midpoint_sum, 3 * calls);
		assert_int_equal(f->midpoint_count, calls);
		assert_int_equal(f->drop_lost, lost);
		assert_int_equal(f->offcpu_ns, off);
		assert_int_equal(f->offcpu_cum_ns, off_cum);
		assert_string_equal(f->category, names[j].cat);
		assert_int_equal(f->line, names[j].line);
		for (int q = 0; q < 4; q++) {
			double x = exact_q(u, n, qs[q]), got = (double)(&f->p50_ns)[q];

			if (fabs(got - x) > 0.01 * x + 0.5)
				fail_msg("%s p%g: %g, exact %g", names[j].name, qs[q] * 100, got,
					 x);
		}
		/* Bucket for bucket the sketch of the union. */
		sketch_of(&want, u, n);
		assert_int_equal(f->dur.count, n);
		assert_int_equal(f->dur.pos_lo, want.pos_lo);
		assert_int_equal(f->dur.n_pos, want.n_pos);
		assert_memory_equal(f->dur.pos, want.pos, want.n_pos * sizeof(*want.pos));
		assert_true(f->dur.min == want.min && f->dur.max == want.max);
		assert_true(f->dur.sum == (double)total);
		rp_report_sketch_free(&want);
	}
	free(u);
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

/* Async expiry: counts add; the expiry and the longest stale time are the largest, so
 * the bound holds for every input. Off-CPU's counts add too. */
static void test_merge_expiry(void **state)
{
	struct rp_report in[NIN], m;

	(void)state;
	fill_raw(&raw, 5);
	for (uint32_t i = 0; i < NIN; i++) {
		build_input(&in[i], &raw, i);
		in[i].expiry = (struct rp_report_expiry){
			.expire_ns = 1000 + 10 * (i % 2), .requests = i + 1, .spans = 2 * i + 1,
			.stale_max_ns = 500 * (NIN - i), .suspect_requests = i,
			.suspect_spans = 3 * i, .peak_spans = 5 + i,
		};
	}
	in[NIN - 1].offcpu = (struct rp_report_offcpu){ .state = RP_OFFCPU_REFUSED };
	for (uint32_t i = 0; i + 1 < NIN; i++)
		in[i].offcpu = (struct rp_report_offcpu){ .state = i ? RP_OFFCPU_ON : 0,
			.threads = 1, .watched = 2, .refused = 3, .lost = 4, .unpaired = 5,
			.overflow = 6, .overflow_ns = 7, .late = 8, .intervals = 9, .total_ns = 10 };
	merge_all(&m, in, NIN);
	/* off-CPU: counts add; measured if any input measured it */
	assert_int_equal(m.offcpu.state, NIN > 2 ? RP_OFFCPU_ON : RP_OFFCPU_REFUSED);
	assert_int_equal(m.offcpu.threads + m.offcpu.watched + m.offcpu.refused + m.offcpu.lost +
				 m.offcpu.unpaired + m.offcpu.overflow + m.offcpu.overflow_ns +
				 m.offcpu.late + m.offcpu.intervals + m.offcpu.total_ns,
			 55 * (NIN - 1));
	assert_int_equal(m.expiry.expire_ns, NIN > 1 ? 1010 : 1000);
	assert_int_equal(m.expiry.stale_max_ns, 500 * NIN);
	assert_int_equal(m.expiry.requests, NIN * (NIN + 1) / 2);
	assert_int_equal(m.expiry.spans, NIN * NIN);
	assert_int_equal(m.expiry.peak_spans, 5 * NIN + NIN * (NIN - 1) / 2);
	assert_int_equal(m.expiry.suspect_requests, NIN * (NIN - 1) / 2);
	assert_int_equal(m.expiry.suspect_spans, 3 * NIN * (NIN - 1) / 2);
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

/* The node of @m at the path of names @path (indices into names[]), or RP_NONE. */
static uint32_t node_at(const struct rp_report *m, const uint32_t *path, uint32_t len)
{
	uint32_t at = 0;

	for (uint32_t d = 0; d < len; d++) {
		uint32_t next = RP_NONE, fn = find_fn(m, path[d]);

		for (uint32_t i = 1; i < m->n_nodes; i++)
			if (m->nodes[i].parent == at && m->nodes[i].fn == fn) {
				assert_int_equal(next, RP_NONE); /* one node per path */
				next = i;
			}
		if (next == RP_NONE)
			return RP_NONE;
		at = next;
	}
	return at;
}

/* Edges by (caller, callee) names and CCT nodes by path add; header, totals,
 * sources as documented; concurrency gone once two inputs merged. */
static void test_merge_structure(void **state)
{
	static const uint32_t p_f[] = { 0 }, p_fg[] = { 0, 1 }, p_fgk[] = { 0, 1, 4 },
			      p_g[] = { 1 }, p_gk[] = { 1, 4 };
	struct rp_report in[NIN], m, one;
	uint32_t f, g, k;

	(void)state;
	fill_raw(&raw, 2);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&one, in, 1);
	assert_int_equal(one.n_conc, 1); /* a single input keeps its rows */
	merge_all(&m, in, NIN);
	f = find_fn(&m, 0), g = find_fn(&m, 1), k = find_fn(&m, 4);
	assert_int_equal(m.n_edges, 2);
	for (uint32_t e = 0; e < m.n_edges; e++) {
		const struct rp_report_edge *x = &m.edges[e];

		if (x->caller == f && x->callee == g)
			assert_true(x->calls == 5 + 6 && x->primitive_calls == 8 && x->cum_ns == 4);
		else if (x->caller == g && x->callee == k)
			assert_true(x->calls == 11 + 12 + 13 && x->self_ns == 27);
		else
			fail_msg("unexpected edge %" PRIu32 " -> %" PRIu32, x->caller, x->callee);
	}
	assert_int_equal(m.n_nodes, 6);
	assert_int_equal(m.nodes[0].calls, 3);
	assert_int_equal(m.nodes[node_at(&m, p_f, 1)].calls, 7 + 8);
	assert_int_equal(m.nodes[node_at(&m, p_fg, 2)].total_ns, 1600);
	assert_int_equal(m.nodes[node_at(&m, p_fgk, 3)].calls, 24);
	assert_int_equal(m.nodes[node_at(&m, p_g, 1)].calls, 11);
	assert_int_equal(m.nodes[node_at(&m, p_gk, 2)].self_ns, 120);
	for (uint32_t i = 1; i < m.n_nodes; i++)
		assert_true(m.nodes[i].parent < i);
	/* Header and totals. */
	assert_string_equal(m.clock, "monotonic");
	assert_int_equal(m.t_first, 80);
	assert_int_equal(m.t_last, 700);
	assert_int_equal(m.created_realtime_ns, 1002);
	assert_int_equal(m.caps.max_names, 100); /* the first input's */
	assert_int_equal(m.events, 6000);
	assert_int_equal(m.truncated, 9);
	for (unsigned a = 0; a < RP_ANOM_KIND_COUNT; a++)
		assert_int_equal(m.anomalies[a], 3 * a + 3);
	assert_int_equal(m.n_sources, 4);
	assert_string_equal(m.sources[1].name, "in1.src0");
	assert_string_equal(m.sources[3].name, "in2.src0");
	assert_int_equal(m.sources[2].pid, 101);
	assert_int_equal(m.n_conc, 0);
	assert_null(m.conc);
	assert_int_equal(m.version_minor, RP_REPORT_VERSION_MINOR);
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
	rp_report_free(&one);
}

/* Counters: samples add, min/max of the union, last of the input with the latest
 * t_last, the mean and quantiles of the union; categories like functions. */
static void test_merge_counters_categories(void **state)
{
	struct rp_report in[NIN], m;
	uint64_t *u = xcalloc(NIN * NNAMES * MAXV, sizeof(*u));
	int64_t *cu = xcalloc(NIN * MAXV, sizeof(*cu));
	const struct rp_report_counter *c;
	uint32_t n = 0, cn = 0;
	long double sum = 0;

	(void)state;
	fill_raw(&raw, 3);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&m, in, NIN);
	assert_int_equal(m.n_counters, 1);
	c = &m.counters[0];
	for (uint32_t i = 0; i < NIN; i++)
		for (uint32_t k = 0; k < raw.cn[i]; k++) {
			cu[cn++] = raw.cv[i][k];
			sum += raw.cv[i][k];
		}
	assert_int_equal(c->samples, cn);
	assert_string_equal(c->category, "Q");
	assert_int_equal(c->last, raw.cv[1][raw.cn[1] - 1]); /* input 1 ends last */
	for (uint32_t k = 0; k < cn; k++) {
		assert_true(c->min <= cu[k] && cu[k] <= c->max);
		u[k] = (uint64_t)(cu[k] + 1000); /* sortable, order kept */
	}
	qsort(u, cn, sizeof(*u), cmp_u64);
	assert_int_equal(c->min, (int64_t)u[0] - 1000);
	assert_int_equal(c->max, (int64_t)u[cn - 1] - 1000);
	assert_true(fabs(c->mean - (double)(sum / cn)) < 1e-9 * fabs((double)(sum / cn)) + 1e-9);
	for (int q = 0; q < 4; q++) {
		double x = (double)((int64_t)u[rp_sketch_rank(cn, qs[q]) - 1] - 1000);
		double got = (&c->p50)[q];

		if (fabs(got - x) > 0.01 * fabs(x) + 1e-9)
			fail_msg("counter p%g: %g, exact %g", qs[q] * 100, got, x);
	}
	assert_int_equal(c->values.count, cn);
	/* The category: durations of f, g and g of every input. */
	assert_int_equal(m.n_cats, 1);
	for (uint32_t i = 0; i < NIN; i++)
		for (uint32_t j = 0; j < 3; j++)
			for (uint32_t k = 0; k < raw.n[i][j]; k++)
				u[n++] = raw.v[i][j][k];
	qsort(u, n, sizeof(*u), cmp_u64);
	assert_int_equal(m.cats[0].calls, n);
	assert_int_equal(m.cats[0].total_ns, 17 + 18 + 19);
	for (int q = 0; q < 4; q++) {
		double x = exact_q(u, n, qs[q]), got = (double)(&m.cats[0].p50_ns)[q];

		if (fabs(got - x) > 0.01 * x + 0.5)
			fail_msg("category p%g: %g, exact %g", qs[q] * 100, got, x);
	}
	free(u);
	free(cu);
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

/* A row with calls in two inputs but a sketch in one has no quantiles after the
 * merge; a row with no calls on one side keeps the other side's. */
static void test_merge_missing_sketch_unknown(void **state)
{
	struct rp_report in[2], m;

	(void)state;
	fill_raw(&raw, 4);
	build_input(&in[0], &raw, 0);
	build_input(&in[1], &raw, 1);
	rp_report_sketch_free(&in[1].fns[0].dur); /* k in input 1 (reversed order) */
	assert_string_equal(in[1].fns[0].name, "k");
	merge_all(&m, in, 2);
	{
		const struct rp_report_fn *k = &m.fns[find_fn(&m, 4)], *h = &m.fns[find_fn(&m, 3)];

		assert_true(k->dur.alpha == 0 && k->p50_ns == 0 && k->p99_ns == 0);
		assert_int_equal(k->calls, raw.n[0][4] + raw.n[1][4]);
		/* h only in input 0: its figures as they were */
		assert_int_equal(h->p90_ns, in[0].fns[3].p90_ns);
		assert_int_equal(h->dur.count, raw.n[0][3]);
	}
	rp_report_free(&in[0]);
	rp_report_free(&in[1]);
	rp_report_free(&m);
}

static void test_merge_clock_mismatch_refused(void **state)
{
	struct rp_report in[2], m = { 0 };
	char why[RP_WHY_MAX];

	(void)state;
	fill_raw(&raw, 5);
	build_input(&in[0], &raw, 0);
	build_input(&in[1], &raw, 1);
	free(in[1].clock);
	in[1].clock = strdup("trace");
	assert_int_equal(rp_report_merge(&m, &in[0], why, sizeof(why)), 0);
	assert_int_equal(rp_report_merge(&m, &in[1], why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "clocks differ: \"monotonic\" and \"trace\""));
	rp_report_free(&m);
	/* Sketches of different accuracy do not merge either. */
	free(in[1].clock);
	in[1].clock = strdup("monotonic");
	in[1].fns[1].dur.alpha = 0.02;
	memset(&m, 0, sizeof(m));
	assert_int_equal(rp_report_merge(&m, &in[0], why, sizeof(why)), 0);
	assert_int_equal(rp_report_merge(&m, &in[1], why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "sketches of alpha 0.01 and 0.02 do not merge"));
	rp_report_free(&m);
	rp_report_free(&in[0]);
	rp_report_free(&in[1]);
}

/* --- bottleneck lists ------------------------------------------------------------ */

#define KEYS 40u
#define TOPK 6u

/* A window "10s" whose lists are a real Space-Saving summary (m = TOPK, all of it
 * listed) of a weighted stream over fns; true[] gets the stream's weights. */
static void window_from_stream(struct rp_report *r, uint64_t seed, uint64_t *truth)
{
	struct rp_spacesaving ss;
	struct rp_topk_entry out[TOPK];
	struct rp_report_window *w;
	uint32_t n;

	rng = seed;
	r->n_windows = 1;
	r->windows = xcalloc(1, sizeof(*r->windows));
	w = &r->windows[0];
	w->name = strdup("10s");
	w->length_ns = 10000000000ull;
	w->subwindows = 10;
	w->t_from = seed;
	w->t_to = 100 * seed;
	assert_int_equal(rp_spacesaving_init(&ss, TOPK), 0);
	for (uint32_t i = 0; i < 3000; i++) {
		uint32_t key = (uint32_t)(rnd() % KEYS);
		uint64_t weight;

		key = key < 8 ? key : (uint32_t)(rnd() % KEYS); /* skewed */
		weight = 1 + rnd() % (key < 4 ? 1000 : 100);
		rp_spacesaving_offer(&ss, key, weight);
		truth[key] += weight;
	}
	n = rp_spacesaving_top(&ss, out, TOPK);
	w->top.by_cum = xcalloc(n, sizeof(*w->top.by_cum));
	for (uint32_t i = 0; i < n; i++) /* key k is fns[k] of this input */
		w->top.by_cum[i] = (struct rp_report_top){ out[i].key, out[i].count, out[i].error };
	w->top.n_by_cum = n;
	w->top.bound_cum = rp_spacesaving_floor(&ss);
	rp_spacesaving_fini(&ss);
}

/* Functions "n0".."n39", in reverse order for @rev. */
static void named_fns(struct rp_report *r, bool rev)
{
	memset(r, 0, sizeof(*r));
	r->version_major = 1;
	r->clock = strdup("trace");
	r->caps.topk = TOPK;
	r->n_fns = KEYS;
	r->fns = xcalloc(KEYS, sizeof(*r->fns));
	for (uint32_t i = 0; i < KEYS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%" PRIu32, rev ? KEYS - 1 - i : i);
		r->fns[i] = (struct rp_report_fn){ .name = strdup(name),
						   .category = strdup(""),
						   .file = strdup(""),
						   .cum_ns = 1000 + (rev ? KEYS - 1 - i : i),
						   .calls = i };
	}
}

static uint32_t name_no(const struct rp_report *r, uint32_t fn)
{
	return (uint32_t)strtoul(r->fns[fn].name + 1, NULL, 10);
}

/* Merged lists keep Space-Saving's guarantees for the union: every listed value -
 * error <= true weight <= value, every error <= bound, every unlisted name <= bound;
 * and the all-time lists are the exact top k of the merged functions. */
static void test_merge_topk_within_bound(void **state)
{
	for (uint64_t seed = 1; seed <= 20; seed++) {
		uint64_t truth[KEYS] = { 0 }, t0[KEYS] = { 0 }, t1[KEYS] = { 0 };
		struct rp_report in[2], m;
		const struct rp_report_bottlenecks *b;
		bool listed[KEYS] = { false };

		(void)state;
		named_fns(&in[0], false);
		named_fns(&in[1], true);
		window_from_stream(&in[0], seed, t0);
		window_from_stream(&in[1], seed + 1000, t1);
		/* input 1's key k is its fns[k], name n(39 - k) */
		for (uint32_t k = 0; k < KEYS; k++)
			truth[k] += t0[k] + t1[KEYS - 1 - k];
		merge_all(&m, in, 2);
		assert_int_equal(m.n_windows, 1);
		assert_true(m.windows[0].t_from == seed &&
			    m.windows[0].t_to == 100 * (seed + 1000));
		b = &m.windows[0].top;
		assert_true(b->n_by_cum <= TOPK);
		assert_true(b->bound_cum <= in[0].windows[0].top.bound_cum +
						    in[1].windows[0].top.bound_cum ||
			    b->n_by_cum == TOPK);
		for (uint32_t i = 0; i < b->n_by_cum; i++) {
			uint32_t nm = name_no(&m, b->by_cum[i].fn);
			uint64_t v = b->by_cum[i].value, e = b->by_cum[i].error;

			listed[nm] = true;
			if (!(v - e <= truth[nm] && truth[nm] <= v && e <= b->bound_cum))
				fail_msg("seed %" PRIu64 " n%" PRIu32 ": true %" PRIu64
					 " not in [%" PRIu64 " - %" PRIu64 ", %" PRIu64 "]",
					 seed, nm, truth[nm], v, e, v);
			if (i > 0)
				assert_true(b->by_cum[i - 1].value >= v);
		}
		for (uint32_t k = 0; k < KEYS; k++)
			if (!listed[k] && truth[k] > b->bound_cum)
				fail_msg("seed %" PRIu64 ": n%" PRIu32 " weighs %" PRIu64
					 ", unlisted, bound %" PRIu64,
					 seed, k, truth[k], b->bound_cum);
		/* All time, exact: cum_ns of n_k is 2 (1000 + k) in the merge. */
		assert_int_equal(m.bottlenecks.n_by_cum, TOPK);
		for (uint32_t i = 0; i < TOPK; i++) {
			assert_int_equal(name_no(&m, m.bottlenecks.by_cum[i].fn), KEYS - 1 - i);
			assert_int_equal(m.bottlenecks.by_cum[i].value, 2 * (1000 + KEYS - 1 - i));
			assert_int_equal(m.bottlenecks.by_cum[i].error, 0);
		}
		assert_int_equal(m.bottlenecks.bound_cum, 2 * (1000 + KEYS - 1 - TOPK));
		rp_report_free(&in[0]);
		rp_report_free(&in[1]);
		rp_report_free(&m);
	}
}

/* The k slowest spans of the union, sources renumbered. */
static void test_merge_slowest(void **state)
{
	struct rp_report in[2], m;
	uint64_t durs[2][5] = { { 50, 10, 70, 30, 30 }, { 60, 30, 5, 80, 20 } };

	(void)state;
	for (int i = 0; i < 2; i++) {
		named_fns(&in[i], i == 1);
		in[i].n_sources = 2;
		in[i].sources = xcalloc(2, sizeof(*in[i].sources));
		in[i].sources[0].name = strdup("a");
		in[i].sources[1].name = strdup("b");
		in[i].bottlenecks.n_slowest = 5;
		in[i].bottlenecks.slowest = xcalloc(5, sizeof(*in[i].bottlenecks.slowest));
		for (uint32_t k = 0; k < 5; k++)
			in[i].bottlenecks.slowest[k] =
				(struct rp_report_span){ .fn = k,
							 .source = k % 2,
							 .dur_ns = durs[i][k],
							 .start_ns = 10 * i + k };
	}
	merge_all(&m, in, 2);
	assert_int_equal(m.bottlenecks.n_slowest, TOPK);
	{
		static const uint64_t want[TOPK] = { 80, 70, 60, 50, 30, 30 };
		static const uint64_t start[TOPK] = { 13, 2, 10, 0, 3, 4 };

		for (uint32_t k = 0; k < TOPK; k++) {
			const struct rp_report_span *s = &m.bottlenecks.slowest[k];

			assert_int_equal(s->dur_ns, want[k]);
			assert_int_equal(s->start_ns, start[k]);
			/* input 1's spans: sources 2, 3; its fns[k] is n(39 - k) */
			if (s->start_ns >= 10) {
				assert_int_equal(s->source, 2 + (s->start_ns - 10) % 2);
				assert_int_equal(name_no(&m, s->fn), KEYS - 1 - (s->start_ns - 10));
			} else {
				assert_int_equal(name_no(&m, s->fn), s->start_ns);
			}
		}
	}
	rp_report_free(&in[0]);
	rp_report_free(&in[1]);
	rp_report_free(&m);
}

/* --- the CLI --------------------------------------------------------------------- */

static int run(const char *cmd, char *err, size_t n)
{
	FILE *f = popen(cmd, "r");
	size_t got;
	int st;

	assert_non_null(f);
	got = fread(err, 1, n - 1, f);
	err[got] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_ok(const char *path, const struct rp_report *r)
{
	char why[RP_WHY_MAX];

	if (rp_snapshot_write_file(path, r, why) != 0)
		fail_msg("%s", why);
}

/* `ringprof merge` of snapshot files writes the bytes of the in-memory merge of the
 * same files; unreadable inputs and mixed clocks fail naming the file. */
static void test_merge_cli_matches_memory(void **state)
{
	const char *bin = getenv("RP_BIN_DIR");
	char dir[] = "/tmp/rp_merge_XXXXXX", p[NIN][4200], out[4200], cmd[20000], msg[2048];
	char why[RP_WHY_MAX];
	struct rp_report in[NIN], back[NIN], m, cli;
	struct rp_membuf a = { 0 }, b = { 0 };

	(void)state;
	if (bin == NULL)
		skip();
	assert_non_null(mkdtemp(dir));
	fill_raw(&raw, 7);
	for (uint32_t i = 0; i < NIN; i++) {
		build_input(&in[i], &raw, i);
		snprintf(p[i], sizeof(p[i]), "%s/in%" PRIu32 ".msgpack", dir, i);
		write_ok(p[i], &in[i]);
		assert_int_equal(rp_snapshot_read_file(p[i], &back[i], why), 0);
	}
	snprintf(out, sizeof(out), "%s/merged.msgpack", dir);
	snprintf(cmd, sizeof(cmd), "%s/ringprof merge %s %s %s -o %s 2>&1", bin, p[0], p[1], p[2],
		 out);
	assert_int_equal(run(cmd, msg, sizeof(msg)), 0);
	merge_all(&m, back, NIN);
	assert_int_equal(rp_snapshot_read_file(out, &cli, why), 0);
	assert_int_equal(rp_snapshot_encode(&m, rp_membuf_sink, &a), 0);
	assert_int_equal(rp_snapshot_encode(&cli, rp_membuf_sink, &b), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_int_equal(cli.n_sources, 4);
	/* A missing input: exit 1, the file named, no output written. */
	unlink(out);
	snprintf(cmd, sizeof(cmd), "%s/ringprof merge %s %s/nope.msgpack -o %s 2>&1", bin, p[0],
		 dir, out);
	assert_int_equal(run(cmd, msg, sizeof(msg)), 1);
	assert_non_null(strstr(msg, "nope.msgpack"));
	assert_int_equal(access(out, F_OK), -1);
	/* A malformed input names the file and the value. */
	{
		FILE *f;

		snprintf(p[2], sizeof(p[2]), "%s/bad.msgpack", dir);
		f = fopen(p[2], "w");
		assert_non_null(f);
		fputs("\x81\xa7version\x92\x01", f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "%s/ringprof merge %s %s -o %s 2>&1", bin, p[0], p[2], out);
	assert_int_equal(run(cmd, msg, sizeof(msg)), 1);
	assert_non_null(strstr(msg, "bad.msgpack: "));
	assert_non_null(strstr(msg, "bad.msgpack: version: an array of 2 entries cannot fit"));
	/* A trace and a live snapshot: refused. */
	free(in[1].clock);
	in[1].clock = strdup("trace");
	write_ok(p[1], &in[1]);
	snprintf(cmd, sizeof(cmd), "%s/ringprof merge %s %s -o %s 2>&1", bin, p[0], p[1], out);
	assert_int_equal(run(cmd, msg, sizeof(msg)), 1);
	assert_non_null(strstr(msg, "in1.msgpack: clocks differ"));
	assert_int_equal(access(out, F_OK), -1);
	snprintf(cmd, sizeof(cmd), "%s/ringprof merge %s 2>&1", bin, p[0]);
	assert_int_equal(run(cmd, msg, sizeof(msg)), 2);
	for (uint32_t i = 0; i < NIN; i++) {
		unlink(p[i]);
		rp_report_free(&in[i]);
		rp_report_free(&back[i]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	rp_membuf_free(&a);
	rp_membuf_free(&b);
	rp_report_free(&m);
	rp_report_free(&cli);
}

/* Steps merge by phase name: counts and totals the sums over the raw durations, min
 * and max of the union, the sketch that of the union bucket for bucket, quantiles
 * from it (within 1% of the exact ones); a phase absent from one input is fine. */
static void test_merge_steps(void **state)
{
	struct rp_report in[NIN], m;
	uint64_t *u = xcalloc(NIN * MAXS, sizeof(*u));

	(void)state;
	fill_raw(&raw, 11);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&m, in, NIN);
	assert_int_equal(m.n_steps, NPHASES);
	assert_int_equal(m.steps_folded, 7 + 8 + 9);
	for (uint32_t p = 0; p < NPHASES; p++) {
		const struct rp_report_step_phase *o = &m.steps[p];
		struct rp_report_sketch want;
		uint64_t total = 0;
		uint32_t n = 0;

		assert_string_equal(o->name, phases[p]); /* the first input's order */
		for (uint32_t i = 0; i < NIN; i++)
			for (uint32_t k = 0; k < raw.sn[i][p]; k++) {
				total += raw.sv[i][p][k];
				u[n++] = raw.sv[i][p][k];
			}
		qsort(u, n, sizeof(*u), cmp_u64);
		assert_int_equal(o->count, n);
		assert_int_equal(o->total_ns, total);
		assert_int_equal(o->min_ns, u[0]);
		assert_int_equal(o->max_ns, u[n - 1]);
		sketch_of(&want, u, n);
		assert_int_equal(o->dur.count, n);
		assert_int_equal(o->dur.pos_lo, want.pos_lo);
		assert_int_equal(o->dur.n_pos, want.n_pos);
		assert_memory_equal(o->dur.pos, want.pos, want.n_pos * sizeof(*want.pos));
		assert_true(o->dur.min == want.min && o->dur.max == want.max);
		assert_int_equal(o->p50_ns, q_ns(&want, 0.50));
		assert_int_equal(o->p95_ns, q_ns(&want, 0.95));
		assert_int_equal(o->p99_ns, q_ns(&want, 0.99));
		for (int q = 0; q < 3; q++) {
			static const double sq[3] = { 0.5, 0.95, 0.99 };
			const uint64_t got[3] = { o->p50_ns, o->p95_ns, o->p99_ns };
			double x = exact_q(u, n, sq[q]);

			if (fabs((double)got[q] - x) > 0.01 * x + 0.5)
				fail_msg("%s p%g: %" PRIu64 ", exact %g", o->name, sq[q] * 100,
					 got[q], x);
		}
		rp_report_sketch_free(&want);
	}
	free(u);
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

/* A span of the union, for the expected recorder. */
struct want_span {
	uint64_t end;
	uint32_t i, k; /* input, position */
};

/* The recorder: tracks of every input with their sources renumbered, spans with
 * their functions and tracks renumbered, the newest 10 (the first input's cap) by
 * end time, the cut ones counted as wrapped; samples likewise (cap 6), counter names
 * matched by name. One input alone comes back as it was. */
static void test_merge_recorder(void **state)
{
	struct rp_report in[NIN], m, one;
	const struct rp_report_recorder *c = &m.recorder;
	struct want_span all[16], tmp;
	uint32_t n = 0, ns = 0, src_off[NIN], trk_off[NIN];
	uint64_t wrapped = 0, seen = 0, swrapped = 0, sseen = 0, unlisted = 0;

	(void)state;
	fill_raw(&raw, 12);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&one, in, 1);
	assert_int_equal(one.recorder.n_spans, 6);
	assert_int_equal(one.recorder.wrapped, 0);
	for (uint32_t k = 0; k < 6; k++)
		assert_int_equal(one.recorder.spans[k].start_ns, in[0].recorder.spans[k].start_ns);
	rp_report_free(&one);

	merge_all(&m, in, NIN);
	for (uint32_t i = 0, so = 0, to = 0; i < NIN; i++) {
		const struct rp_report_recorder *x = &in[i].recorder;

		src_off[i] = so, trk_off[i] = to;
		so += in[i].n_sources, to += x->n_tracks;
		for (uint32_t k = 0; k < x->n_spans; k++)
			all[n++] = (struct want_span){ x->spans[k].start_ns + x->spans[k].dur_ns, i,
						       k };
		ns += x->n_samples;
		wrapped += x->wrapped, seen += x->spans_seen, unlisted += x->unlisted;
		swrapped += x->samples_wrapped, sseen += x->samples_seen;
	}
	/* Insertion sort by end time, ties in input order: the brute-force answer. */
	for (uint32_t a = 1; a < n; a++)
		for (uint32_t b = a; b > 0 && all[b - 1].end > all[b].end; b--)
			tmp = all[b], all[b] = all[b - 1], all[b - 1] = tmp;
	assert_int_equal(n, 15);
	assert_int_equal(c->max_spans, 10);
	assert_int_equal(c->max_samples, 6);
	assert_int_equal(c->n_spans, 10);
	assert_int_equal(c->wrapped, wrapped + 5);
	assert_int_equal(c->spans_seen, seen);
	assert_int_equal(c->unlisted, unlisted);
	assert_int_equal(c->labels_dropped, 0 + 1 + 2);
	assert_int_equal(c->n_tracks, 2 * NIN);
	for (uint32_t t = 0; t < c->n_tracks; t++) {
		uint32_t i = t / 2;
		const struct rp_report_rtrack *x = &in[i].recorder.tracks[t % 2],
					      *y = &c->tracks[t];

		assert_int_equal(y->source, src_off[i] + x->source);
		assert_string_equal(m.sources[y->source].name, in[i].sources[x->source].name);
		assert_int_equal(y->kind, x->kind);
		assert_int_equal(y->id, x->id);
		assert_string_equal(y->pid, x->pid);
		assert_string_equal(y->tid, x->tid);
	}
	for (uint32_t j = 0; j < 10; j++) {
		const struct want_span *w = &all[n - 10 + j];
		const struct rp_report_rspan *x = &in[w->i].recorder.spans[w->k], *y = &c->spans[j];

		assert_int_equal(y->start_ns + y->dur_ns, w->end);
		assert_int_equal(y->dur_ns, x->dur_ns);
		assert_int_equal(y->depth, x->depth);
		assert_int_equal(y->step, x->step);
		assert_int_equal(y->track, trk_off[w->i] + x->track);
		assert_string_equal(m.fns[y->fn].name, in[w->i].fns[x->fn].name);
		assert_string_equal(m.fns[y->fn].file, in[w->i].fns[x->fn].file);
	}
	/* Samples: 9 in all, the newest 6 by time; names "mem", "q", "z" once each. */
	assert_int_equal(ns, 9);
	assert_int_equal(c->n_names, 3);
	assert_string_equal(c->names[0], "mem");
	assert_string_equal(c->names[1], "q");
	assert_string_equal(c->names[2], "z");
	assert_int_equal(c->n_samples, 6);
	assert_int_equal(c->samples_wrapped, swrapped + 3);
	assert_int_equal(c->samples_seen, sseen);
	{
		uint32_t j = 0;

		/* ts = 10 (k NIN + i) + 5: time order is k-major, then input. */
		for (uint32_t k = 0; k < 4; k++)
			for (uint32_t i = 0; i < NIN; i++) {
				const struct rp_report_recorder *x = &in[i].recorder;
				const struct rp_report_rsample *y;

				if (k >= x->n_samples)
					continue;
				if (j++ < 3)
					continue; /* the 3 oldest: cut */
				y = &c->samples[j - 4];
				assert_int_equal(y->ts_ns, x->samples[k].ts_ns);
				assert_int_equal(y->value, x->samples[k].value);
				assert_int_equal(y->track, trk_off[i] + x->samples[k].track);
				assert_string_equal(c->names[y->name],
						    x->names[x->samples[k].name]);
			}
		assert_int_equal(j, 9);
	}
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

/* Device: counts add; an input without device data leaves the lists alone; two with
 * it: points, idle intervals and phases dropped, phases nil, ranked the best of the
 * union by score, as long as the longest list. */
static void test_merge_device(void **state)
{
	struct rp_report in[NIN], m;
	const struct rp_report_device *d = &m.device;
	const struct rp_report_dev_span *best[8];
	uint32_t nb = 0;

	(void)state;
	fill_raw(&raw, 13);
	for (uint32_t i = 0; i < NIN; i++)
		build_input(&in[i], &raw, i);
	merge_all(&m, in, 2); /* 0 with device data, 1 without */
	assert_int_equal(d->n_points, 3);
	assert_int_equal(d->n_idle, 2);
	assert_int_equal(d->n_phases, 2);
	assert_int_equal(d->n_ranked, 3);
	assert_int_equal(d->spans_dropped, 0 + 5);
	assert_int_equal(d->ranked[2].phase, 2);
	assert_int_equal(d->idle[1].end_ns, in[0].device.idle[1].end_ns);
	assert_string_equal(d->ranked[1].name, "r0.1");
	rp_report_free(&m);

	merge_all(&m, in, NIN);
	{
		const struct rp_report_device *a = &in[0].device, *b = &in[1].device,
					      *e = &in[2].device;

		assert_int_equal(d->launches, a->launches + b->launches + e->launches);
		assert_int_equal(d->kernels, a->kernels + e->kernels);
		assert_int_equal(d->other_device, 2);
		assert_int_equal(d->linked, a->linked + e->linked);
		assert_int_equal(d->unmatched_launches, 2);
		assert_int_equal(d->unmatched_kernels, 4);
		assert_int_equal(d->spans, a->spans + e->spans);
		assert_int_equal(d->busy_ns, 1000 + 3000);
		assert_int_equal(d->idle_ns, 500 + 502);
		assert_int_equal(d->max_queue_depth, 5);
		assert_int_equal(d->n_points_total, 10);
		assert_int_equal(d->n_idle_total, 4);
		assert_int_equal(d->n_phases_total, 6);
		assert_int_equal(d->candidates, 10 + 12);
		assert_int_equal(d->spans_dropped, 0 + 5 + 2);
		assert_int_equal(d->events_dropped, 4);
		assert_int_equal(d->links_dropped, 6);
		assert_int_equal(d->links_orphan, 8);
		assert_int_equal(d->n_points + d->n_idle + d->n_phases, 0);
		/* The 4 best of the union by score, picked by brute force; ties (0.5): the
		 * earlier start, then the name. */
		for (uint32_t i = 0; i < NIN; i++)
			for (uint32_t k = 0; k < in[i].device.n_ranked; k++)
				best[nb++] = &in[i].device.ranked[k];
		assert_int_equal(nb, 7);
		assert_int_equal(d->n_ranked, 4);
		for (uint32_t j = 0; j < 4; j++) {
			uint32_t pick = j;

			for (uint32_t k = j + 1; k < nb; k++)
				if (best[k]->score > best[pick]->score ||
				    (best[k]->score == best[pick]->score &&
				     (best[k]->start_ns < best[pick]->start_ns ||
				      (best[k]->start_ns == best[pick]->start_ns &&
				       strcmp(best[k]->name, best[pick]->name) < 0))))
					pick = k;
			const struct rp_report_dev_span *t = best[pick];

			best[pick] = best[j];
			best[j] = t;
			assert_string_equal(d->ranked[j].name, t->name);
			assert_true(d->ranked[j].score == t->score);
			assert_int_equal(d->ranked[j].self_ns, t->self_ns);
			assert_int_equal(d->ranked[j].phase, RP_NONE);
		}
		assert_string_equal(d->ranked[0].name, "r0.0");
		assert_string_equal(d->ranked[1].name, "r2.0");
		assert_string_equal(d->ranked[2].name, "r0.1");
		assert_string_equal(d->ranked[3].name, "r2.1");
	}
	{ /* and the merged report is a valid snapshot */
		struct rp_membuf b = { 0 };
		struct rp_report back;
		char why[RP_WHY_MAX];

		assert_int_equal(rp_snapshot_encode(&m, rp_membuf_sink, &b), 0);
		if (rp_snapshot_decode(b.data, b.len, &back, why) != 0)
			fail_msg("%s", why);
		assert_int_equal(back.device.n_ranked, 4);
		assert_int_equal(back.recorder.n_spans, 10);
		rp_report_free(&back);
		rp_membuf_free(&b);
	}
	for (uint32_t i = 0; i < NIN; i++)
		rp_report_free(&in[i]);
	rp_report_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_functions_exact),
		cmocka_unit_test(test_merge_structure),
		cmocka_unit_test(test_merge_counters_categories),
		cmocka_unit_test(test_merge_missing_sketch_unknown),
		cmocka_unit_test(test_merge_clock_mismatch_refused),
		cmocka_unit_test(test_merge_topk_within_bound),
		cmocka_unit_test(test_merge_slowest),
		cmocka_unit_test(test_merge_cli_matches_memory),
		cmocka_unit_test(test_merge_steps),
		cmocka_unit_test(test_merge_recorder),
		cmocka_unit_test(test_merge_device),
		cmocka_unit_test(test_merge_expiry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
