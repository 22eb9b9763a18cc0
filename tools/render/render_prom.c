// SPDX-License-Identifier: MIT
/*
 * A report as the Prometheus text exposition format (version 0.0.4): what
 * `ringprof run --prometheus` serves at /metrics and `ringprof report|analyze
 * --format prom` prints. Every metric is named ringprof_*:
 *
 *   ringprof_events_total, _dropped_total, _late_total, _truncated_total   counters
 *   ringprof_anomalies_total{kind}                                        counter
 *   ringprof_sources, ringprof_time_range_seconds                         gauges
 *   ringprof_span_duration_seconds_bucket{name,category,le} + _sum, _count histogram
 *   ringprof_span_duration_instance_seconds{name,category,quantile} + _sum, _count summary
 *   ringprof_span_calls_total, _self_seconds_total, _cum_seconds_total    counters
 *   ringprof_span_drop_lost_total{name,category} (spans drops cut, 1.3)    counter
 *   ringprof_span_errors_total{name,category} (RP_SPAN_ERROR ends, 1.4)     counter
 *   ringprof_span_started_total{name,category} (arrivals, 1.4 reports)     counter
 *   ringprof_span_charged_seconds_total, _charged_total{name,category}    counters (1.6:
 *     batched work charged to a request name, and its shares; names charged only)
 *   ringprof_concurrency_percentile{scope,percentile}, _max, _mean, _now  gauges
 *   ringprof_requests_in_flight, _percentile{percentile}, _max, _mean   gauges (1.4;
 *     request spans only, when the report has them)
 *   ringprof_value_last{name,category} (rp_counter() series)              gauge
 *   ringprof_cap{cap} (counts), ringprof_memory_bound_bytes               gauges
 *   ringprof_cap_hits_total{cap}                                          counter
 *   ringprof_build_info{version,report}, ringprof_series_omitted          gauges
 *
 * The per-name families (duration histogram and summary, span counters) list only the
 * names rp_render_prom_select() keeps (--metrics-names, --metrics-top); the series the
 * others would add are counted in ringprof_series_omitted. OpenMetrics and protobuf (with
 * native histograms) are made from this text: render_prom_pb.c.
 *
 * The duration histogram is what aggregates across hosts: classic buckets derived from the
 * name's all-time sketch (every call since the engine started), so the counts only grow and
 * sum by (le) over instances is the fleet's histogram. The layout is fixed (the same le
 * strings on every host): le = 2^(k/8) s for k = -160 .. 56, 0.954 us to 128 s, 217 bounds
 * and +Inf (the boundaries of native histogram schema 3). A sketch bucket (2% wide) goes
 * whole to the classic bucket its value falls in, so a bound is blurred by 1% at most.
 * histogram_quantile() interpolates linearly within a bucket of ratio 2^(1/8): its error is
 * at most 9.05% (every value at one end of the bucket), 0.1% for a density ~ 1/x across
 * the bucket (p = 0.5: 2^(1/16) vs 1 + (2^(1/8) - 1) / 2), and second order for any smooth
 * density. A name without a sketch (past max_sketch_names) has the +Inf bucket only.
 * Monotonic as long as the sketch never collapses, which a duration in ns cannot with the
 * default cap ([1, 2^64] ns fits).
 *
 * The duration summary ringprof_span_duration_instance_seconds is per instance only
 * (quantiles do not add up across hosts). It follows the client libraries' summaries:
 * _sum and _count are cumulative (every completed call since the engine started, so they
 * never fall and rate() works), while the quantiles cover one rolling window of the report when
 * @window names one (as a client's max_age does), else all time. A live report's
 * windows end at the wall clock (rp_engine_report_at()), so with no traffic the
 * window empties and its quantiles become NaN, as a client's do. A name with no
 * quantiles (no sketch: rp_report_fn_has_quantiles()) has no quantile series. Every
 * name with a completed call is listed, in or out of the window, so a series never
 * disappears between scrapes.
 *
 * promtool check metrics is clean: no gauge carries the summary-only "quantile"
 * label (concurrency percentiles use "percentile"), no name says its type, and one
 * metric holds one unit (the memory bound, in bytes, is not one of the count caps). Label values
 * are escaped as the format says (\\, \", \n) and ill-formed UTF-8 becomes U+FFFD. Two names with
 * the same name and category (different source locations) would be one series: both then get a
 * location label. Seconds are printed from integer nanoseconds ("1.234567890"), so output is exact.
 */
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_priv.h"
#include "sketch.h"
#include "version.h"

#ifndef RP_BUILD_VERSION /* set by tools/CMakeLists.txt from the project version */
#define RP_BUILD_VERSION "unknown"
#endif

static const char *const quantiles[4] = { "0.5", "0.9", "0.95", "0.99" };
static const char *const percentiles[4] = { "50", "90", "95", "99" };

static void put_label(FILE *out, const char *s)
{
	bool valid;
	size_t n;

	for (; s != NULL && *s; s += n) {
		n = rp_render_utf8_next(s, &valid);
		if (!valid)
			fputs("\xef\xbf\xbd", out);
		else if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '"')
			fputs("\\\"", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fwrite(s, 1, n, out);
	}
}

static void put_seconds(FILE *out, uint64_t ns)
{
	fprintf(out, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

static void head(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* {name="..",category=".."[,location=".."] without the closing brace. */
static void fn_labels(FILE *out, const struct rp_report_fn *f, bool located)
{
	fputs("{name=\"", out);
	put_label(out, f->name);
	fputs("\",category=\"", out);
	put_label(out, f->category);
	if (located) {
		fputs("\",location=\"", out);
		put_label(out, f->file);
		fprintf(out, ":%" PRIu32, f->line);
	}
	fputc('"', out);
}

static int cmp_key(const void *a, const void *b)
{
	const struct rp_report_fn *x = *(const struct rp_report_fn *const *)a;
	const struct rp_report_fn *y = *(const struct rp_report_fn *const *)b;
	int c = strcmp(x->name ? x->name : "", y->name ? y->name : "");

	return c ? c : strcmp(x->category ? x->category : "", y->category ? y->category : "");
}

/* located[i]: fns[i] shares its name and category with another fn. NULL: no memory. */
static bool *find_dups(const struct rp_report *r)
{
	const struct rp_report_fn **v = malloc((r->n_fns + 1) * sizeof(*v));
	bool *located = calloc(r->n_fns + 1, sizeof(*located));
	uint32_t i;

	if (v == NULL || located == NULL) {
		free(v);
		free(located);
		return NULL;
	}
	for (i = 0; i < r->n_fns; i++)
		v[i] = &r->fns[i];
	qsort(v, r->n_fns, sizeof(*v), cmp_key);
	for (i = 1; i < r->n_fns; i++)
		if (cmp_key(&v[i - 1], &v[i]) == 0)
			located[v[i - 1] - r->fns] = located[v[i] - r->fns] = true;
	free(v);
	return located;
}

static void totals(const struct rp_report *r, FILE *out)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} t[] = {
		{ "ringprof_events_total", "Records received from producers.",
		  offsetof(struct rp_report, events) },
		{ "ringprof_dropped_total", "Records producers could not write (full ring).",
		  offsetof(struct rp_report, dropped) },
		{ "ringprof_late_total", "Records older than the merge watermark.",
		  offsetof(struct rp_report, late) },
		{ "ringprof_truncated_total", "Spans closed for their producer or a mismatch.",
		  offsetof(struct rp_report, truncated) },
	};
	unsigned i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		head(out, t[i].name, "counter", t[i].help);
		fprintf(out, "%s %" PRIu64 "\n", t[i].name,
			*(const uint64_t *)((const char *)r + t[i].off));
	}
	head(out, "ringprof_anomalies_total", "counter", "Irregular events, by kind.");
	for (i = 0; i < RP_ANOM_KIND_COUNT; i++)
		fprintf(out, "ringprof_anomalies_total{kind=\"%s\"} %" PRIu64 "\n",
			rp_anomaly_names[i], r->anomalies[i]);
	head(out, "ringprof_sources", "gauge", "Producers or files in the report.");
	fprintf(out, "ringprof_sources %" PRIu32 "\n", r->n_sources);
	head(out, "ringprof_time_range_seconds", "gauge", "Last minus first event time.");
	put_seconds((fputs("ringprof_time_range_seconds ", out), out),
		    r->t_last > r->t_first ? r->t_last - r->t_first : 0);
	fputc('\n', out);
}

static const struct rp_report_window *find_window(const struct rp_report *r, const char *name)
{
	uint32_t i;

	for (i = 0; name != NULL && i < r->n_windows; i++)
		if (r->windows[i].name != NULL && strcmp(r->windows[i].name, name) == 0)
			return &r->windows[i];
	return NULL;
}

/* One summary: 4 quantile lines, _sum, _count. @q NULL, or all 0 with a sum: NaN. */
static void summary_line(FILE *out, const char *suffix, const struct rp_report_fn *f,
			 bool located)
{
	fputs("ringprof_span_duration_instance_seconds", out);
	fputs(suffix, out);
	fn_labels(out, f, located);
}

/* @q NULL: a window with no call of it (NaN, as a client's); @absent: the name has no
 * quantiles at all (no sketch), so no quantile series. */
static void summary(FILE *out, const struct rp_report_fn *f, bool located, const uint64_t *q,
		    bool absent, uint64_t sum_ns, uint64_t count)
{
	bool none = q == NULL;
	unsigned i;

	for (i = 0; i < 4 && !absent; i++) {
		summary_line(out, "", f, located);
		fprintf(out, ",quantile=\"%s\"} ", quantiles[i]);
		if (none)
			fputs("NaN", out);
		else
			put_seconds(out, q[i]);
		fputc('\n', out);
	}
	summary_line(out, "_sum", f, located);
	fputs("} ", out);
	put_seconds(out, sum_ns);
	fputc('\n', out);
	summary_line(out, "_count", f, located);
	fprintf(out, "} %" PRIu64 "\n", count);
}

/* The classic layout: le = 2^(k/8) s, k = RP_PROM_K_MIN .. RP_PROM_K_MAX (see the top). */
#define RP_PROM_K_MIN	 (-160)
#define RP_PROM_K_MAX	 56
#define RP_PROM_N_BOUNDS (RP_PROM_K_MAX - RP_PROM_K_MIN + 1)

/* bound[i]: le of bucket i in ns, 2^((i + K_MIN) / 8) s: a power of two times 2^(r/8). */
static void prom_bounds(double *bound)
{
	static const double eighth[8] = { 1.0,
					  1.0905077326652576592,
					  1.1892071150027210667,
					  1.2968395546510096659,
					  1.4142135623730950488,
					  1.5422108254079408237,
					  1.6817928305074290861,
					  1.8340080864093424635 };
	double p2 = 1e9 / 1048576.0; /* 2^-20 s in ns: k = -160 */

	for (int i = 0; i < RP_PROM_N_BOUNDS; i++) {
		if (i > 0 && i % 8 == 0)
			p2 *= 2;
		bound[i] = p2 * eighth[i % 8];
	}
}

/* The first classic bucket whose le (ns) is >= @v; RP_PROM_N_BOUNDS: +Inf. */
static int prom_bucket_of(const double *bound, double v)
{
	int lo = 0, hi = RP_PROM_N_BOUNDS;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (bound[mid] >= v)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Fills @n[0 .. N_BOUNDS] (last: +Inf) from @f's sketch; false when it has none. */
static bool prom_counts(const struct rp_report_fn *f, const double *bound, uint64_t *n)
{
	const struct rp_report_sketch *k = &f->dur;
	struct rp_sketch tmp;

	memset(n, 0, (RP_PROM_N_BOUNDS + 1) * sizeof(*n));
	if (k->alpha == 0 || k->count == 0 || rp_sketch_init(&tmp, k->alpha) != 0)
		return false;
	/* Durations are >= 0: the zero bucket is under every le; no negative store. */
	n[0] += k->zero;
	for (uint32_t i = 0; i < k->n_pos; i++)
		if (k->pos[i]) {
			double v = rp_sketch_bucket_value(&tmp, k->pos_lo + (int32_t)i);

			n[prom_bucket_of(bound, v)] += k->pos[i];
		}
	rp_sketch_fini(&tmp);
	return true;
}

static void put_le(FILE *out, double le_ns)
{
	fprintf(out, "%.6g", le_ns * 1e-9);
}

/* ringprof_span_duration_seconds: all-time classic buckets, _sum, _count. */
static void histograms(const struct rp_report *r, FILE *out, const struct rp_report_fn **order,
		       const bool *located, const bool *keep)
{
	double bound[RP_PROM_N_BOUNDS];
	uint64_t n[RP_PROM_N_BOUNDS + 1];

	prom_bounds(bound);
	head(out, "ringprof_span_duration_seconds", "histogram",
	     "Span durations since the engine started (aggregatable: sum by (le) across "
	     "instances).");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = order[i];
		bool loc = located[f - r->fns];
		uint64_t cum = 0;

		if (f->calls == 0 || !keep[f - r->fns])
			continue;
		if (prom_counts(f, bound, n)) {
			for (int b = 0; b < RP_PROM_N_BOUNDS; b++) {
				cum += n[b];
				fputs("ringprof_span_duration_seconds_bucket", out);
				fn_labels(out, f, loc);
				fputs(",le=\"", out);
				put_le(out, bound[b]);
				/* Calls the sketch missed (dropped) count in +Inf only. */
				fprintf(out, "\"} %" PRIu64 "\n", cum < f->calls ? cum : f->calls);
			}
		}
		fputs("ringprof_span_duration_seconds_bucket", out);
		fn_labels(out, f, loc);
		fprintf(out, ",le=\"+Inf\"} %" PRIu64 "\n", f->calls);
		fputs("ringprof_span_duration_seconds_sum", out);
		fn_labels(out, f, loc);
		fputs("} ", out);
		put_seconds(out, f->total_ns);
		fputs("\nringprof_span_duration_seconds_count", out);
		fn_labels(out, f, loc);
		fprintf(out, "} %" PRIu64 "\n", f->calls);
	}
}

/* row[i]: @w's row of fns[i], or NULL when that name had no call in the window. */
static const struct rp_report_wfn **window_rows(const struct rp_report *r,
						const struct rp_report_window *w)
{
	const struct rp_report_wfn **row = calloc(r->n_fns + 1, sizeof(*row));

	for (uint32_t i = 0; row != NULL && i < w->n_fns; i++)
		if (w->fns[i].fn < r->n_fns && w->fns[i].calls > 0)
			row[w->fns[i].fn] = &w->fns[i];
	return row;
}

/* A name's summary has no quantile series: all time (no window asked), and no sketch
 * (rp_report_fn_has_quantiles()); a window's quantiles are written, NaN when empty. The
 * summary and the count of omitted series (fn_series) both ask this. */
static bool quantiles_absent(const struct rp_report_fn *f, bool windowed)
{
	return !windowed && !rp_report_fn_has_quantiles(f);
}

static int durations(const struct rp_report *r, FILE *out, const struct rp_report_window *w,
		     const struct rp_report_fn **order, const bool *located, const bool *keep)
{
	const struct rp_report_wfn **row = w ? window_rows(r, w) : NULL;

	if (w != NULL && row == NULL)
		return -ENOMEM;
	head(out, "ringprof_span_duration_instance_seconds", "summary",
	     w ? "Span durations of this instance only (quantiles do not aggregate): quantiles "
		 "over the rolling window ringprof_window_seconds, "
		 "_sum and _count since the engine started."
	       : "Span durations of this instance only (quantiles do not aggregate), since the "
		 "engine started.");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = order[i];
		const struct rp_report_wfn *x = row ? row[f - r->fns] : NULL;
		uint64_t q[4] = { f->p50_ns, f->p90_ns, f->p95_ns, f->p99_ns };

		if (f->calls == 0 || !keep[f - r->fns])
			continue;
		if (x != NULL) {
			q[0] = x->p50_ns;
			q[1] = x->p90_ns;
			q[2] = x->p95_ns;
			q[3] = x->p99_ns;
		}
		summary(out, f, located[f - r->fns], w && x == NULL ? NULL : q,
			quantiles_absent(f, w != NULL), f->total_ns, f->calls);
	}
	free(row);
	return 0;
}

static void span_counters(const struct rp_report *r, FILE *out, const struct rp_report_fn **order,
			  const bool *located, const bool *keep)
{
	static const char *const names[5] = { "ringprof_span_calls_total",
					      "ringprof_span_self_seconds_total",
					      "ringprof_span_cum_seconds_total",
					      "ringprof_span_drop_lost_total",
					      "ringprof_span_errors_total" };
	static const char *const helps[5] = {
		"Completed calls per name.", "Self time per name (cProfile tottime).",
		"Cumulative time per name (cProfile cumtime).",
		"Spans per name a producer's drop cut: in none of the figures above.",
		"Completed calls per name that ended in error (part of the calls)."
	};
	unsigned k;
	uint32_t i;

	for (k = 0; k < 5; k++) {
		head(out, names[k], "counter", helps[k]);
		for (i = 0; i < r->n_fns; i++) {
			const struct rp_report_fn *f = order[i];

			if (!keep[f - r->fns])
				continue;
			fputs(names[k], out);
			fn_labels(out, f, located[f - r->fns]);
			fputs("} ", out);
			if (k == 0 || k >= 3)
				fprintf(out, "%" PRIu64,
					k == 0 ? f->calls : k == 3 ? f->drop_lost : f->errors);
			else
				put_seconds(out, k == 1 && (int64_t)f->self_ns < 0
							 ? 0 /* torch nesting: a counter is >= 0 */
							 : k == 1 ? f->self_ns : f->cum_ns);
			fputc('\n', out);
		}
	}
}

/* ringprof_span_started_total: arrivals beside completions. Only a 1.4 report counts
 * them, and a name whose count is below its calls (a merge with an older snapshot) is
 * left out rather than shown short. */
static bool started_known(const struct rp_report *r, const struct rp_report_fn *f)
{
	return r->version_minor >= 4 && f->started >= f->calls;
}

static void started(const struct rp_report *r, FILE *out, const struct rp_report_fn **order,
		    const bool *located, const bool *keep)
{
	bool any = false;

	for (uint32_t i = 0; i < r->n_fns && !any; i++)
		any = keep[i] && started_known(r, &r->fns[i]);
	if (!any)
		return;
	head(out, "ringprof_span_started_total", "counter",
	     "Spans begun per name (arrivals): completed calls, open ones and lost ones.");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		const struct rp_report_fn *f = order[i];

		if (!keep[f - r->fns] || !started_known(r, f))
			continue;
		fputs("ringprof_span_started_total", out);
		fn_labels(out, f, located[f - r->fns]);
		fprintf(out, "} %" PRIu64 "\n", f->started);
	}
}

/* Batched work charged to requests (1.6, engine/core/charge.h): per request name, the
 * time and the shares; names never charged have no series (absent, not 0). An
 * attribution view: the charged spans' time is in their own series too. */
static void charged(const struct rp_report *r, FILE *out, const struct rp_report_fn **order,
		    const bool *located, const bool *keep)
{
	bool any = false;

	for (uint32_t i = 0; i < r->n_fns && !any; i++)
		any = keep[i] && r->fns[i].charged > 0;
	if (!any)
		return;
	for (int k = 0; k < 2; k++) {
		const char *m = k ? "ringprof_span_charged_total" :
				    "ringprof_span_charged_seconds_total";

		head(out, m, "counter",
		     k ? "Shares of batched spans charged to this request name (one per span "
			 "and request)." :
			 "Batched spans' time charged to this request name (split between the "
			 "requests each served; also in the spans' own series).");
		for (uint32_t i = 0; i < r->n_fns; i++) {
			const struct rp_report_fn *f = order[i];

			if (!keep[f - r->fns] || f->charged == 0)
				continue;
			fputs(m, out);
			fn_labels(out, f, located[f - r->fns]);
			if (k) {
				fprintf(out, "} %" PRIu64 "\n", f->charged);
			} else {
				fputs("} ", out);
				put_seconds(out, f->charged_ns);
				fputc('\n', out);
			}
		}
	}
}

static void conc_scope(FILE *out, const char *metric, const struct rp_report_conc *c)
{
	fprintf(out, "%s{scope=\"", metric);
	put_label(out, c->name);
	fputc('"', out);
}

static void concurrency(const struct rp_report *r, FILE *out)
{
	uint32_t i;

	if (r->n_conc == 0)
		return;
	head(out, "ringprof_concurrency_percentile", "gauge",
	     "Open spans, time-weighted percentile (overall, roots = spans at depth 0, "
	     "categories).");
	for (i = 0; i < r->n_conc; i++) {
		const struct rp_report_conc *c = &r->conc[i];
		uint32_t v[4] = { c->p50, c->p90, c->p95, c->p99 };

		for (unsigned k = 0; k < 4; k++) {
			conc_scope(out, "ringprof_concurrency_percentile", c);
			fprintf(out, ",percentile=\"%s\"} %" PRIu32 "\n", percentiles[k], v[k]);
		}
	}
	/* Only all-time rows know "now"; a window's would read 0 (report.h). */
	head(out, "ringprof_concurrency_now", "gauge",
	     "Spans open now (overall, roots = requests in flight, per category).");
	for (i = 0; i < r->n_conc; i++) {
		conc_scope(out, "ringprof_concurrency_now", &r->conc[i]);
		fprintf(out, "} %" PRIu32 "\n", r->conc[i].now);
	}
	head(out, "ringprof_concurrency_max", "gauge", "Most spans open at once.");
	for (i = 0; i < r->n_conc; i++) {
		conc_scope(out, "ringprof_concurrency_max", &r->conc[i]);
		fprintf(out, "} %" PRIu32 "\n", r->conc[i].max);
	}
	head(out, "ringprof_concurrency_mean", "gauge", "Time-weighted mean of open spans.");
	for (i = 0; i < r->n_conc; i++) {
		conc_scope(out, "ringprof_concurrency_mean", &r->conc[i]);
		fprintf(out, "} %" PRIu64 ".%03" PRIu64 "\n", r->conc[i].mean_milli / 1000,
			r->conc[i].mean_milli % 1000);
	}
}

/* ringprof_cap_hits_total{cap}: each cap's count of what it refused or folded, by the
 * name of the cap (ringprof_cap's), from the anomaly counters that count those hits. */
static void cap_hits(const struct rp_report *r, FILE *out)
{
	static const struct {
		const char *cap;
		int kind;
	} h[] = {
		{ "max_names", RP_ANOM_NAME_CAP },	  { "max_tracks", RP_ANOM_TRACK_CAP },
		{ "max_depth", RP_ANOM_DEPTH_CAP },	  { "max_cct_nodes", RP_ANOM_CCT_CAP },
		{ "max_window_names", RP_ANOM_WINDOW_CAP }, { "max_counters", RP_ANOM_COUNTER_CAP },
		{ "max_window_level", RP_ANOM_LEVEL_CAP },
		{ "max_sketch_names", RP_ANOM_SKETCH_EVICTED },
	};

	head(out, "ringprof_cap_hits_total", "counter",
	     "Times a cap refused or folded something, by cap (also under anomalies).");
	for (unsigned i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		fprintf(out, "ringprof_cap_hits_total{cap=\"%s\"} %" PRIu64 "\n", h[i].cap,
			r->anomalies[h[i].kind]);
}

/* Requests in flight (request spans only), when the report has the figure. */
static void requests_in_flight(const struct rp_report *r, FILE *out)
{
	const struct rp_report_conc *c = &r->requests;
	uint32_t v[4] = { c->p50, c->p90, c->p95, c->p99 };

	if (!rp_report_has_requests(r))
		return;
	head(out, "ringprof_requests_in_flight", "gauge", "Requests open now.");
	fprintf(out, "ringprof_requests_in_flight %" PRIu32 "\n", c->now);
	head(out, "ringprof_requests_in_flight_percentile", "gauge",
	     "Requests open at once, time-weighted percentile.");
	for (unsigned k = 0; k < 4; k++)
		fprintf(out, "ringprof_requests_in_flight_percentile{percentile=\"%s\"} %" PRIu32
			     "\n", percentiles[k], v[k]);
	head(out, "ringprof_requests_in_flight_max", "gauge", "Most requests open at once.");
	fprintf(out, "ringprof_requests_in_flight_max %" PRIu32 "\n", c->max);
	head(out, "ringprof_requests_in_flight_mean", "gauge",
	     "Time-weighted mean of requests open.");
	fprintf(out, "ringprof_requests_in_flight_mean %" PRIu64 ".%03" PRIu64 "\n",
		c->mean_milli / 1000, c->mean_milli % 1000);
}

static void counters_caps(const struct rp_report *r, FILE *out)
{
	const struct rp_report_caps *c = &r->caps;
	const struct {
		const char *name;
		uint64_t v;
	} caps[] = {
		{ "max_names", c->max_names },
		{ "max_tracks", c->max_tracks },
		{ "max_depth", c->max_depth },
		{ "max_cct_nodes", c->max_cct_nodes },
		{ "max_sources", c->max_sources },
		{ "max_sketch_names", c->max_sketch_names },
		{ "max_window_names", c->max_window_names },
		{ "max_counters", c->max_counters },
		{ "topk", c->topk },
	};
	uint32_t i;

	if (r->n_counters > 0) {
		head(out, "ringprof_value_last", "gauge",
		     "Newest value of each rp_counter() series.");
		for (i = 0; i < r->n_counters; i++) {
			fputs("ringprof_value_last{name=\"", out);
			put_label(out, r->counters[i].name);
			fputs("\",category=\"", out);
			put_label(out, r->counters[i].category);
			fprintf(out, "\"} %" PRId64 "\n", r->counters[i].last);
		}
	}
	head(out, "ringprof_cap", "gauge", "The engine's configured caps (0: not set).");
	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		fprintf(out, "ringprof_cap{cap=\"%s\"} %" PRIu64 "\n", caps[i].name, caps[i].v);
	cap_hits(r, out);
	head(out, "ringprof_memory_bound_bytes", "gauge",
	     "Worst-case bytes of the engine's tables at its caps (0: not known).");
	fprintf(out, "ringprof_memory_bound_bytes %" PRIu64 "\n", c->memory_bound);
}

/* The series a name adds to the per-name families (histogram, summary, counters). */
static uint64_t fn_series(const struct rp_report *r, const struct rp_report_fn *f, bool windowed)
{
	uint64_t n = 5 + started_known(r, f); /* calls, self, cum, drop_lost, errors, started */

	n += f->charged > 0 ? 2 : 0; /* charged seconds and shares (1.6) */

	/* buckets (+Inf only without a sketch), _sum, _count; the summary's _sum, _count
	 * and its 4 quantiles, but all time for a name with none (summary()) */
	if (f->calls > 0)
		n += (f->dur.alpha > 0 && f->dur.count > 0 ? RP_PROM_N_BOUNDS + 1 : 1) + 2 + 2 +
		     (quantiles_absent(f, windowed) ? 0 : 4);
	return n;
}

static int cmp_cum(const void *a, const void *b)
{
	const struct rp_report_fn *x = *(const struct rp_report_fn *const *)a;
	const struct rp_report_fn *y = *(const struct rp_report_fn *const *)b;

	return x->cum_ns != y->cum_ns ? (x->cum_ns < y->cum_ns ? 1 : -1) : cmp_key(a, b);
}

/* keep[i]: fns[i] has its per-name series (@sel); *@omitted: the series of the rest. */
static bool *select_fns(const struct rp_report *r, const struct rp_prom_select *sel,
			bool windowed, uint64_t *omitted)
{
	const struct rp_report_fn **v = malloc((r->n_fns + 1) * sizeof(*v));
	bool *keep = calloc(r->n_fns + 1, sizeof(*keep));
	uint32_t n = 0;

	*omitted = 0;
	if (v == NULL || keep == NULL) {
		free(v);
		free(keep);
		return NULL;
	}
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (sel == NULL || sel->names == NULL ||
		    regexec(sel->names, r->fns[i].name ? r->fns[i].name : "", 0, NULL, 0) == 0)
			v[n++] = &r->fns[i];
	/* The top N by cumulative time, ties by name and category (stable across scrapes). */
	if (sel != NULL && sel->top > 0 && n > sel->top) {
		qsort(v, n, sizeof(*v), cmp_cum);
		n = sel->top;
	}
	for (uint32_t i = 0; i < n; i++)
		keep[v[i] - r->fns] = true;
	for (uint32_t i = 0; i < r->n_fns; i++)
		if (!keep[i])
			*omitted += fn_series(r, &r->fns[i], windowed);
	free(v);
	return keep;
}

int rp_render_prom(const struct rp_report *r, FILE *out, const char *window)
{
	return rp_render_prom_select(r, out, window, NULL);
}

int rp_render_prom_select(const struct rp_report *r, FILE *out, const char *window,
			  const struct rp_prom_select *sel)
{
	const struct rp_report_window *w = find_window(r, window);
	const struct rp_report_fn **order = rp_render_fn_order(r);
	bool *located = find_dups(r);
	uint64_t omitted = 0;
	bool *keep = select_fns(r, sel, w != NULL, &omitted);

	if (order == NULL || located == NULL || keep == NULL) {
		free(order);
		free(located);
		free(keep);
		return -ENOMEM;
	}
	if (window != NULL && w == NULL) {
		fputs("# ringprof: no window \"", out);
		put_label(out, window);
		fputs("\" in this report: all-time durations\n", out);
	}
	head(out, "ringprof_build_info", "gauge", "The engine's version, as a label (always 1).");
	fprintf(out, "ringprof_build_info{version=\"%s\",report=\"%u.%u\"} 1\n", rp_version(),
		RP_REPORT_VERSION_MAJOR, RP_REPORT_VERSION_MINOR);
	totals(r, out);
	head(out, "ringprof_series_omitted", "gauge",
	     "Per-name series left out by --metrics-names / --metrics-top (0: none).");
	fprintf(out, "ringprof_series_omitted %" PRIu64 "\n", omitted);
	head(out, "ringprof_window_seconds", "gauge",
	     "Length of the window the duration summary covers (0: all time).");
	fputs("ringprof_window_seconds ", out);
	put_seconds(out, w ? w->length_ns : 0);
	fputc('\n', out);
	histograms(r, out, order, located, keep);
	if (durations(r, out, w, order, located, keep) != 0) {
		free(order);
		free(located);
		free(keep);
		return -ENOMEM;
	}
	span_counters(r, out, order, located, keep);
	started(r, out, order, located, keep);
	charged(r, out, order, located, keep);
	concurrency(r, out);
	requests_in_flight(r, out);
	counters_caps(r, out);
	free(order);
	free(located);
	free(keep);
	return ferror(out) ? -EIO : 0;
}
