// SPDX-License-Identifier: MIT
/*
 * test_prom: the Prometheus text exposition of hand-built reports (render_prom.c).
 * A small report is compared with the exact expected text; a tricky one (names
 * that need escaping, ill-formed UTF-8, two names differing only by location, a
 * window, counters, concurrency) is checked line by line and through a small
 * parser of the exposition format written here: every sample line must parse, name
 * a family declared by a TYPE line before it, be unique, and carry the value the
 * report holds.
 */
#include "support.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "render.h"
#include "sketch.h"

/* Render @r to a malloc'ed string. */
static char *prom(const struct rp_report *r, const char *window)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	assert_non_null(m);
	assert_int_equal(rp_render_prom(r, m, window), 0);
	fclose(m);
	return buf;
}

/* --- a parser of sample lines --- */

struct sample {
	char name[128];
	char labels[1024]; /* k=v pairs, unescaped, joined with '|' */
	double value;
};

static const char *parse_label_value(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	if (*p++ != '"')
		return NULL;
	while (*p && *p != '"') {
		char c = *p++;

		if (c == '\\') {
			c = *p++;
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return NULL; /* no other escape is valid */
		} else if (c == '\n') {
			return NULL;
		}
		if (n + 1 < cap)
			out[n++] = c;
	}
	out[n] = '\0';
	return *p == '"' ? p + 1 : NULL;
}

/* @return true if @line is a valid sample line; fills @s. */
static bool parse_sample(const char *line, struct sample *s)
{
	const char *p = line;
	size_t n = 0;

	memset(s, 0, sizeof(*s));
	if (!(isalpha((unsigned char)*p) || *p == '_' || *p == ':'))
		return false;
	while (isalnum((unsigned char)*p) || *p == '_' || *p == ':')
		s->name[n++] = *p++;
	if (*p == '{') {
		p++;
		while (*p != '}') {
			char key[64], val[512];
			size_t k = 0;

			while (isalnum((unsigned char)*p) || *p == '_')
				key[k++] = *p++;
			key[k] = '\0';
			if (k == 0 || *p++ != '=' ||
			    (p = parse_label_value(p, val, sizeof(val))) == NULL)
				return false;
			snprintf(s->labels + strlen(s->labels),
				 sizeof(s->labels) - strlen(s->labels), "%s%s=%s",
				 s->labels[0] ? "|" : "", key, val);
			if (*p == ',')
				p++;
			else if (*p != '}')
				return false;
		}
		p++;
	}
	if (*p++ != ' ')
		return false;
	if (strcmp(p, "NaN") == 0) {
		s->value = NAN;
		return true;
	}
	char *end;

	errno = 0;
	s->value = strtod(p, &end);
	return end != p && *end == '\0' && errno == 0;
}

/* Every line is a comment or a sample of a declared family; no series twice. */
static unsigned check_exposition(char *text, struct sample **out)
{
	static struct sample samples[4096];
	char families[64][128];
	unsigned nf = 0, ns = 0;

	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char fam[128];

		if (strncmp(line, "# TYPE ", 7) == 0) {
			assert_int_equal(sscanf(line + 7, "%127s", families[nf]), 1);
			nf++;
			continue;
		}
		if (line[0] == '#')
			continue;
		assert_true(ns < 4096);
		if (!parse_sample(line, &samples[ns]))
			fail_msg("not a sample line: \"%s\"", line);
		snprintf(fam, sizeof(fam), "%s", samples[ns].name);
		/* A summary's or histogram's _sum, _count (and _bucket) belong to its family. */
		for (unsigned i = 0; i < nf; i++) {
			size_t l = strlen(families[i]);

			if (strncmp(fam, families[i], l) == 0 &&
			    (fam[l] == '\0' || strcmp(fam + l, "_sum") == 0 ||
			     strcmp(fam + l, "_bucket") == 0 ||
			     strcmp(fam + l, "_count") == 0))
				goto declared;
		}
		fail_msg("sample of an undeclared family: \"%s\"", line);
	declared:
		for (unsigned i = 0; i < ns; i++)
			if (strcmp(samples[i].name, samples[ns].name) == 0 &&
			    strcmp(samples[i].labels, samples[ns].labels) == 0)
				fail_msg("series twice: \"%s\"", line);
		ns++;
	}
	*out = samples;
	return ns;
}

static double value_of(struct sample *v, unsigned n, const char *name, const char *labels)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0 && strcmp(v[i].labels, labels) == 0)
			return v[i].value;
	fail_msg("no sample %s{%s}", name, labels);
	return 0;
}

/* --- the small report, exactly --- */

static struct rp_report_fn small_fns[] = {
	{ .name = "decode",
	  .category = "LLM",
	  .file = "a.c",
	  .line = 3,
	  .calls = 4,
	  .primitive_calls = 4,
	  .self_ns = 1500000000,
	  .cum_ns = 2000000001,
	  .total_ns = 2000000001,
	  .min_ns = 1,
	  .max_ns = 900000000,
	  .p50_ns = 500000000,
	  .p90_ns = 800000000,
	  .p95_ns = 850000000,
	  .p99_ns = 900000000,
	  .drop_lost = 3,
	  .errors = 1 },
};

/* In two parts: C11 promises 4095 characters to a string literal. */
static const char small_expected_1[] =
	"# HELP ringprof_events_total Records received from producers.\n"
	"# TYPE ringprof_events_total counter\n"
	"ringprof_events_total 10\n"
	"# HELP ringprof_dropped_total Records producers could not write (full ring).\n"
	"# TYPE ringprof_dropped_total counter\n"
	"ringprof_dropped_total 2\n"
	"# HELP ringprof_late_total Records older than the merge watermark.\n"
	"# TYPE ringprof_late_total counter\n"
	"ringprof_late_total 1\n"
	"# HELP ringprof_truncated_total Spans closed for their producer or a mismatch.\n"
	"# TYPE ringprof_truncated_total counter\n"
	"ringprof_truncated_total 0\n"
	"# HELP ringprof_anomalies_total Irregular events, by kind.\n"
	"# TYPE ringprof_anomalies_total counter\n"
	"ringprof_anomalies_total{kind=\"end_mismatch\"} 0\n"
	"ringprof_anomalies_total{kind=\"end_unmatched\"} 0\n"
	"ringprof_anomalies_total{kind=\"depth_cap\"} 7\n"
	"ringprof_anomalies_total{kind=\"track_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"name_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"cct_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"clamped\"} 0\n"
	"ringprof_anomalies_total{kind=\"bad_event\"} 0\n"
	"ringprof_anomalies_total{kind=\"open_at_end\"} 0\n"
	"ringprof_anomalies_total{kind=\"window_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"counter_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"drop_lost\"} 0\n"
	"ringprof_anomalies_total{kind=\"window_level_cap\"} 0\n"
	"ringprof_anomalies_total{kind=\"restart_gap\"} 0\n"
	"ringprof_anomalies_total{kind=\"sketch_evicted\"} 0\n"
	"ringprof_anomalies_total{kind=\"window_evicted\"} 0\n"
	"ringprof_anomalies_total{kind=\"mark_unmatched\"} 0\n"
	"ringprof_anomalies_total{kind=\"mark_repeat\"} 0\n"
	"ringprof_anomalies_total{kind=\"charge_orphan\"} 0\n"
	"ringprof_anomalies_total{kind=\"charge_late\"} 0\n"
	"ringprof_anomalies_total{kind=\"charge_cap\"} 0\n"
	"# HELP ringprof_sources Producers or files in the report.\n"
	"# TYPE ringprof_sources gauge\n"
	"ringprof_sources 0\n"
	"# HELP ringprof_time_range_seconds Last minus first event time.\n"
	"# TYPE ringprof_time_range_seconds gauge\n"
	"ringprof_time_range_seconds 3.000000005\n"
	"# HELP ringprof_series_omitted Per-name series left out by --metrics-names / "
	"--metrics-top (0: none).\n"
	"# TYPE ringprof_series_omitted gauge\n"
	"ringprof_series_omitted 0\n"
	"# HELP ringprof_window_seconds Length of the window the duration summary covers "
	"(0: all time).\n"
	"# TYPE ringprof_window_seconds gauge\n"
	"ringprof_window_seconds 0.000000000\n";

static const char small_expected_2[] =
	"# HELP ringprof_span_duration_seconds Span durations since the engine started "
	"(aggregatable: sum by (le) across instances).\n"
	"# TYPE ringprof_span_duration_seconds histogram\n"
	"ringprof_span_duration_seconds_bucket{name=\"decode\",category=\"LLM\",le=\"+Inf\"} 4\n"
	"ringprof_span_duration_seconds_sum{name=\"decode\",category=\"LLM\"} 2.000000001\n"
	"ringprof_span_duration_seconds_count{name=\"decode\",category=\"LLM\"} 4\n"
	"# HELP ringprof_span_duration_instance_seconds Span durations of this instance only "
	"(quantiles do not aggregate), since the engine started.\n"
	"# TYPE ringprof_span_duration_instance_seconds summary\n"
	"ringprof_span_duration_instance_seconds{name=\"decode\",category=\"LLM\","
	"quantile=\"0.5\"} "
	"0.500000000\n"
	"ringprof_span_duration_instance_seconds{name=\"decode\",category=\"LLM\","
	"quantile=\"0.9\"} "
	"0.800000000\n"
	"ringprof_span_duration_instance_seconds{name=\"decode\",category=\"LLM\","
	"quantile=\"0.95\"} "
	"0.850000000\n"
	"ringprof_span_duration_instance_seconds{name=\"decode\",category=\"LLM\","
	"quantile=\"0.99\"} "
	"0.900000000\n"
	"ringprof_span_duration_instance_seconds_sum{name=\"decode\",category=\"LLM\"} "
	"2.000000001\n"
	"ringprof_span_duration_instance_seconds_count{name=\"decode\",category=\"LLM\"} 4\n"
	"# HELP ringprof_span_calls_total Completed calls per name.\n"
	"# TYPE ringprof_span_calls_total counter\n"
	"ringprof_span_calls_total{name=\"decode\",category=\"LLM\"} 4\n"
	"# HELP ringprof_span_self_seconds_total Self time per name (cProfile tottime).\n"
	"# TYPE ringprof_span_self_seconds_total counter\n"
	"ringprof_span_self_seconds_total{name=\"decode\",category=\"LLM\"} 1.500000000\n"
	"# HELP ringprof_span_cum_seconds_total Cumulative time per name (cProfile cumtime).\n"
	"# TYPE ringprof_span_cum_seconds_total counter\n"
	"ringprof_span_cum_seconds_total{name=\"decode\",category=\"LLM\"} 2.000000001\n"
	"# HELP ringprof_span_drop_lost_total Spans per name a producer's drop cut: in none of "
	"the figures above.\n"
	"# TYPE ringprof_span_drop_lost_total counter\n"
	"ringprof_span_drop_lost_total{name=\"decode\",category=\"LLM\"} 3\n"
	"# HELP ringprof_span_errors_total Completed calls per name that ended in error (part of "
	"the calls).\n"
	"# TYPE ringprof_span_errors_total counter\n"
	"ringprof_span_errors_total{name=\"decode\",category=\"LLM\"} 1\n"
	"# HELP ringprof_cap The engine's configured caps (0: not set).\n"
	"# TYPE ringprof_cap gauge\n"
	"ringprof_cap{cap=\"max_names\"} 100\n"
	"ringprof_cap{cap=\"max_tracks\"} 0\n"
	"ringprof_cap{cap=\"max_depth\"} 0\n"
	"ringprof_cap{cap=\"max_cct_nodes\"} 0\n"
	"ringprof_cap{cap=\"max_sources\"} 0\n"
	"ringprof_cap{cap=\"max_sketch_names\"} 0\n"
	"ringprof_cap{cap=\"max_window_names\"} 0\n"
	"ringprof_cap{cap=\"max_counters\"} 0\n"
	"ringprof_cap{cap=\"topk\"} 0\n"
	"# HELP ringprof_cap_hits_total Times a cap refused or folded something, by cap (also "
	"under anomalies).\n"
	"# TYPE ringprof_cap_hits_total counter\n"
	"ringprof_cap_hits_total{cap=\"max_names\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_tracks\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_depth\"} 7\n"
	"ringprof_cap_hits_total{cap=\"max_cct_nodes\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_window_names\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_counters\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_window_level\"} 0\n"
	"ringprof_cap_hits_total{cap=\"max_sketch_names\"} 0\n"
	"# HELP ringprof_memory_bound_bytes Worst-case bytes of the engine's tables at its caps "
	"(0: not known).\n"
	"# TYPE ringprof_memory_bound_bytes gauge\n"
	"ringprof_memory_bound_bytes 0\n";

static void test_prom_small_exact(void **state)
{
	struct rp_report r = { .events = 10,
			       .dropped = 2,
			       .late = 1,
			       .t_first = 5,
			       .t_last = 3000000010ull,
			       .fns = small_fns,
			       .n_fns = 1 };
	static const char build[] =
		"# HELP ringprof_build_info The engine's version, as a label (always 1).\n"
		"# TYPE ringprof_build_info gauge\n"
		"ringprof_build_info{version=\"";
	char *text, *expected, *rest, want[80];

	(void)state;
	r.anomalies[RP_ANOM_DEPTH_CAP] = 7;
	r.caps.max_names = 100;
	text = prom(&r, NULL);
	/* First the build's version (the project's, not this test's to know), then the rest. */
	assert_memory_equal(text, build, sizeof(build) - 1);
	snprintf(want, sizeof(want), "\",report=\"%u.%u\"} 1\n", RP_REPORT_VERSION_MAJOR,
		 RP_REPORT_VERSION_MINOR);
	rest = strstr(text, want);
	assert_non_null(rest);
	rest += strlen(want);
	assert_true(asprintf(&expected, "%s%s", small_expected_1, small_expected_2) > 0);
	assert_string_equal(rest, expected);
	free(expected);
	free(text);
}

/* --- the tricky report --- */

static struct rp_report_fn tricky_fns[] = {
	{ .name = "say \"hi\"\\now\nx",
	  .category = "T\"",
	  .file = "f.c",
	  .line = 1,
	  .calls = 2,
	  .self_ns = 300,
	  .cum_ns = 400,
	  .total_ns = 400,
	  .max_ns = 250,
	  .p50_ns = 150,
	  .p90_ns = 250,
	  .p95_ns = 250,
	  .p99_ns = 250 },
	{ .name = "dup",
	  .category = "C",
	  .file = "a.c",
	  .line = 10,
	  .calls = 1,
	  .self_ns = 5,
	  .cum_ns = 5,
	  .total_ns = 5,
	  .max_ns = 5,
	  .p50_ns = 5,
	  .p90_ns = 5,
	  .p95_ns = 5,
	  .p99_ns = 5 },
	{ .name = "dup",
	  .category = "C",
	  .file = "b.c",
	  .line = 20,
	  .calls = 3,
	  .self_ns = 9,
	  .cum_ns = 9,
	  .total_ns = 9,
	  .max_ns = 4 },					/* no sketch: no quantiles */
	{ .name = "bad\xff utf8", .category = "", .calls = 0 }, /* only in the CCT */
};

static struct rp_report_conc tricky_conc[] = {
	{ .name = "overall",
	  .observed_ns = 100,
	  .mean_milli = 2500,
	  .p50 = 2,
	  .p90 = 3,
	  .p95 = 3,
	  .p99 = 4,
	  .max = 5 },
	{ .name = "roots",
	  .observed_ns = 100,
	  .mean_milli = 1001,
	  .p50 = 1,
	  .p90 = 1,
	  .p95 = 2,
	  .p99 = 2,
	  .max = 2 },
	{ .name = "LLM \"x\"", .observed_ns = 100, .mean_milli = 7, .max = 1 },
};

static struct rp_report_counter tricky_counters[] = {
	{ .name = "queue_len", .category = "Q", .samples = 3, .last = -17 },
};

static struct rp_report_wfn tricky_wfns[] = {
	{ .fn = 0,
	  .calls = 1,
	  .self_ns = 100,
	  .cum_ns = 200,
	  .p50_ns = 200,
	  .p90_ns = 200,
	  .p95_ns = 200,
	  .p99_ns = 200 },
	{ .fn = 2, .calls = 0 },  /* nothing in the window: no sample */
	{ .fn = 99, .calls = 5 }, /* out of range: ignored */
};

static struct rp_report_window tricky_windows[] = {
	{ .name = "1m",
	  .length_ns = 60000000000ull,
	  .subwindows = 6,
	  .fns = tricky_wfns,
	  .n_fns = 3 },
};

static struct rp_report tricky(void)
{
	return (struct rp_report){ .events = 123,
				   .fns = tricky_fns,
				   .n_fns = 4,
				   .conc = tricky_conc,
				   .n_conc = 3,
				   .counters = tricky_counters,
				   .n_counters = 1,
				   .windows = tricky_windows,
				   .n_windows = 1 };
}

/* Requests in flight: four gauge families when the report has the figure (parsed and
 * declared, one series each), none when it does not. */
static void test_prom_requests_in_flight(void **state)
{
	struct rp_report r = tricky();
	char *text = prom(&r, NULL), *copy;
	struct sample *v;
	unsigned n;

	(void)state;
	assert_null(strstr(text, "ringprof_requests_in_flight"));
	free(text);
	r.requests = (struct rp_report_conc){ .name = "requests", .observed_ns = 9000,
					      .mean_milli = 2250, .p50 = 2, .p90 = 3, .p95 = 4,
					      .p99 = 5, .max = 6, .now = 1 };
	text = prom(&r, NULL);
	copy = strdup(text);
	n = check_exposition(copy, &v);
	assert_true(value_of(v, n, "ringprof_requests_in_flight", "") == 1);
	assert_true(value_of(v, n, "ringprof_requests_in_flight_percentile", "percentile=50") == 2);
	assert_true(value_of(v, n, "ringprof_requests_in_flight_percentile", "percentile=99") == 5);
	assert_true(value_of(v, n, "ringprof_requests_in_flight_max", "") == 6);
	assert_true(value_of(v, n, "ringprof_requests_in_flight_mean", "") == 2.25);
	free(text);
	free(copy);
}

static void test_prom_escaping_and_parse(void **state)
{
	struct rp_report r = tricky();
	char *text = prom(&r, NULL), *copy = strdup(text);
	struct sample *v;
	unsigned n;

	(void)state;
	/* Escapes exactly as the format says; the raw newline never reaches a line. */
	assert_non_null(strstr(text, "ringprof_span_calls_total{name=\"say \\\"hi\\\"\\\\now\\nx\","
				     "category=\"T\\\"\"} 2\n"));
	assert_non_null(strstr(text, "ringprof_span_calls_total{name=\"bad\xef\xbf\xbd utf8\","
				     "category=\"\"} 0\n"));
	/* Two names that differ only by location get a location label each. */
	assert_non_null(strstr(text, "ringprof_span_calls_total{name=\"dup\",category=\"C\","
				     "location=\"a.c:10\"} 1\n"));
	assert_non_null(strstr(text, "ringprof_span_calls_total{name=\"dup\",category=\"C\","
				     "location=\"b.c:20\"} 3\n"));
	/* No sketch: no quantile series (absent, never 0), but _sum and _count. */
	assert_null(
		strstr(text, "ringprof_span_duration_instance_seconds{name=\"dup\",category=\"C\","
			     "location=\"b.c:20\",quantile="));
	assert_non_null(
		strstr(text, "ringprof_span_duration_instance_seconds_count{name=\"dup\","
			     "category=\"C\",location=\"b.c:20\"} 3\n"));
	assert_non_null(strstr(
		text, "ringprof_concurrency_percentile{scope=\"overall\",percentile=\"95\"} 3\n"));
	assert_non_null(strstr(text, "ringprof_concurrency_mean{scope=\"roots\"} 1.001\n"));
	assert_non_null(strstr(text, "ringprof_concurrency_max{scope=\"LLM \\\"x\\\"\"} 1\n"));
	assert_non_null(
		strstr(text, "ringprof_value_last{name=\"queue_len\",category=\"Q\"} -17\n"));
	/* A name with no completed call has no summary. */
	assert_null(strstr(text, "ringprof_span_duration_instance_seconds_count{name=\"bad"));

	n = check_exposition(copy, &v);
	/* Values against the report. */
	assert_true(value_of(v, n, "ringprof_events_total", "") == 123);
	assert_true(value_of(v, n, "ringprof_span_duration_instance_seconds_count",
			     "name=say \"hi\"\\now\nx|category=T\"") == 2);
	assert_true(fabs(value_of(v, n, "ringprof_span_duration_instance_seconds_sum",
				  "name=say \"hi\"\\now\nx|category=T\"") -
			 400e-9) < 1e-15);
	assert_true(fabs(value_of(v, n, "ringprof_span_duration_instance_seconds",
				  "name=say \"hi\"\\now\nx|category=T\"|quantile=0.5") -
			 150e-9) < 1e-15);
	assert_true(value_of(v, n, "ringprof_span_self_seconds_total",
			     "name=dup|category=C|location=b.c:20") == 9e-9);
	for (unsigned i = 0; i < n; i++) /* no sketch: no quantile series at all */
		assert_false(strcmp(v[i].name, "ringprof_span_duration_instance_seconds") == 0 &&
			     strstr(v[i].labels, "location=b.c:20") != NULL);
	assert_true(value_of(v, n, "ringprof_concurrency_percentile",
			     "scope=roots|percentile=99") == 2);
	/* 4 quantiles + sum + count for the 2 called names with a sketch, sum + count for
	 * the third, and +Inf, sum, count (no sketch: no finite bucket); 4 counters x 4
	 * names;
	 * 4 totals, 11 anomalies, 2 gauges, window; conc 3 x (4 + 2); 1 counter; 9 caps and
	 * the memory bound. */
	/* 1.4: + build_info, series_omitted, errors x 4 names, now x 3 scopes, 8 cap hits;
	 * one name without quantiles. */
	assert_int_equal(n, 2 * 6 + 2 + 3 * 3 + 5 * 4 + 4 + RP_ANOM_KIND_COUNT + 2 + 1 + 3 * 7 + 1 +
				    9 + 1 + 2 + 8);
	assert_true(value_of(v, n, "ringprof_span_drop_lost_total",
			     "name=dup|category=C|location=b.c:20") == 0);
	free(text);
	free(copy);
}

static void test_prom_window(void **state)
{
	struct rp_report r = tricky();
	char *text = prom(&r, "1m"), *copy = strdup(text);
	struct sample *v;
	unsigned n, summaries = 0;

	(void)state;
	n = check_exposition(copy, &v);
	assert_true(value_of(v, n, "ringprof_window_seconds", "") == 60);
	/* Every called name keeps its series; _count and _sum are cumulative (all time,
	 * so rate() works), the quantiles are the window's: fn 0's, and NaN for the names
	 * with no call in the window. */
	for (unsigned i = 0; i < n; i++)
		if (strcmp(v[i].name, "ringprof_span_duration_instance_seconds_count") == 0)
			summaries++;
	assert_int_equal(summaries, 3);
	assert_true(value_of(v, n, "ringprof_span_duration_instance_seconds_count",
			     "name=say \"hi\"\\now\nx|category=T\"") == 2);
	assert_true(fabs(value_of(v, n, "ringprof_span_duration_instance_seconds_sum",
				  "name=say \"hi\"\\now\nx|category=T\"") -
			 400e-9) < 1e-15);
	assert_true(fabs(value_of(v, n, "ringprof_span_duration_instance_seconds",
				  "name=say \"hi\"\\now\nx|category=T\"|quantile=0.99") -
			 200e-9) < 1e-15);
	assert_true(isnan(value_of(v, n, "ringprof_span_duration_instance_seconds",
				   "name=dup|category=C|location=a.c:10|quantile=0.5")));
	assert_true(value_of(v, n, "ringprof_span_duration_instance_seconds_count",
			     "name=dup|category=C|location=b.c:20") == 3);
	/* The counters stay all-time. */
	assert_true(value_of(v, n, "ringprof_span_calls_total",
			     "name=dup|category=C|location=b.c:20") == 3);
	free(text);
	free(copy);
	/* A window the report lacks: all time, and a comment says so. */
	text = prom(&r, "5m");
	assert_true(strncmp(text, "# ringprof: no window \"5m\" in this report", 41) == 0);
	assert_non_null(strstr(text, "ringprof_window_seconds 0.000000000\n"));
	assert_non_null(strstr(text,
			       "ringprof_span_duration_instance_seconds_count{name=\"dup\","
			       "category=\"C\","
			       "location=\"b.c:20\"} 3\n"));
	free(text);
}

/* --- the histogram, against the raw values --- */

/*
 * Values placed between bounds (2^((k + 0.5) / 8) s, 4.4% from each, beyond the sketch's
 * 1%), zeros, and values past the last bound (only in +Inf): a bucket's cumulative
 * count must equal the number of raw values <= its printed le, counted by brute force.
 */
static void test_prom_histogram_buckets(void **state)
{
	static const double half_step = 1.0442737824274138; /* 2^(1/16) */
	struct rp_report_fn fn = { .name = "x", .category = "C", .file = "" };
	struct rp_report r = { .fns = &fn, .n_fns = 1 };
	double vals[3000];
	unsigned nv = 0, nb = 0, seed = 7;
	struct rp_sketch k;
	double prev_le = 0, prev = 0;
	struct sample *v;
	char *text, *copy;
	unsigned n;

	(void)state;
	assert_int_equal(rp_sketch_init(&k, RP_SKETCH_ALPHA), 0);
	for (; nv < 2990; nv++) {
		int j;

		seed = seed * 1103515245u + 12345u;
		j = (int)((seed >> 8) % 240) - 170; /* k in [-170, 69]: past both ends */
		vals[nv] = 1e9 * half_step;
		for (int i = 0; i < (j < 0 ? -j : j); i++)
			vals[nv] = j < 0 ? vals[nv] / 1.0905077326652576592
					 : vals[nv] * 1.0905077326652576592;
		vals[nv] = (double)(uint64_t)vals[nv]; /* ns, as the engine records */
	}
	for (; nv < 3000; nv++)
		vals[nv] = 0;
	for (unsigned i = 0; i < nv; i++) {
		rp_sketch_add(&k, vals[i]);
		fn.total_ns += (uint64_t)vals[i];
	}
	fn.calls = nv;
	assert_int_equal(rp_report_sketch_from(&fn.dur, &k), 0);
	text = prom(&r, NULL);
	copy = strdup(text);
	n = check_exposition(copy, &v);
	for (unsigned i = 0; i < n; i++) {
		double le, raw = 0;

		if (strcmp(v[i].name, "ringprof_span_duration_seconds_bucket") != 0)
			continue;
		nb++;
		assert_true(strncmp(v[i].labels, "name=x|category=C|le=", 21) == 0);
		le = strcmp(v[i].labels + 21, "+Inf") == 0 ? INFINITY
							   : strtod(v[i].labels + 21, NULL);
		assert_true(le > prev_le); /* in order */
		for (unsigned j = 0; j < nv; j++)
			raw += vals[j] * 1e-9 <= le;
		if (v[i].value != raw)
			fail_msg("le=%s: %g, brute force %g", v[i].labels + 21, v[i].value, raw);
		assert_true(v[i].value >= prev); /* cumulative */
		prev_le = le;
		prev = v[i].value;
	}
	/* 2^(k/8) s for k = -160 .. 56 and +Inf. */
	assert_int_equal(nb, 217 + 1);
	assert_true(prev == nv);
	assert_true(value_of(v, n, "ringprof_span_duration_seconds_count", "name=x|category=C") ==
		    nv);
	assert_true(strstr(text, "le=\"9.53674e-07\"") != NULL); /* 2^-20 s */
	assert_true(strstr(text, "le=\"128\"") != NULL);
	free(text);
	free(copy);
	rp_report_sketch_free(&fn.dur);
	rp_sketch_fini(&k);
}

static void test_prom_empty_report(void **state)
{
	struct rp_report r = { 0 };
	char *text = prom(&r, NULL), *copy = strdup(text);
	struct sample *v;
	unsigned n;

	(void)state;
	n = check_exposition(copy, &v);
	assert_int_equal(n, 4 + RP_ANOM_KIND_COUNT + 2 + 1 + 10 + 2 + 8);
	assert_null(strstr(text, "ringprof_concurrency"));
	free(text);
	free(copy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prom_small_exact),
		cmocka_unit_test(test_prom_escaping_and_parse),
		cmocka_unit_test(test_prom_requests_in_flight),
		cmocka_unit_test(test_prom_window),
		cmocka_unit_test(test_prom_histogram_buckets),
		cmocka_unit_test(test_prom_empty_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
