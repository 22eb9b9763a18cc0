/* SPDX-License-Identifier: MIT */
/*
 * Output formats of a report (engine/core/report.h): the same report, from a live
 * engine, a snapshot file or an analyzed trace, renders the same way.
 */
#ifndef RP_TOOLS_RENDER_H
#define RP_TOOLS_RENDER_H

#include <stdio.h>

#include "report.h"

/**
 * rp_render_text() - a readable top table (by cumulative time, then self time) with
 * the counters that say what was lost (events, dropped, late, truncated, anomalies),
 * then one line per concurrency distribution when the report has them ("concurrency
 * overall  p50 N  p90 N  p95 N  p99 N  max N  mean X.XXX", then roots and each
 * category, names padded). Table columns: calls, self ms, self%, cum ms, cum/call us,
 * min us, max us, p50 us, p99 us ("-" without a sketch), name [category] file:line.
 * Then the report 1.2 blocks, each only when the report has its data (a 1.1 snapshot
 * renders as before):
 * - "bottlenecks (all time)": by cum time, by self time (ms), by count, each "N of M,
 *   bound B" then rows "value  ±error  name [category]" (±error only when > 0);
 * - "slowest spans (all time)": duration, self, subtree (ms), start (ms from t_first),
 *   midpoint concurrency ("?" when not known), name [category];
 * - per window "window NAME (LENGTH ms in N sub-windows), T_FROM .. T_TO ns (RANGE
 *   ms)", its names by cum time (calls, rate/s, cum ms, self ms, p50/p90/p99 us) and
 *   its overall and roots concurrency lines;
 * - "categories" by total time (calls, self ms, total ms, p50/p90/p95/p99 us; "(none)"
 *   for the spans without a category);
 * - "counters" (samples, last, min, max, mean, p50, p99, name [category]).
 * Every name goes last on its row and is never cut; a list entry whose fn index is
 * out of range shows "?". New blocks fit 100 columns but for very long figures.
 * @limit: rows of every table (functions, each list, each window, categories,
 * counters), 0 = all.
 * Return: 0, -ENOMEM, or -EIO when writing to @out failed.
 */
int rp_render_text(const struct rp_report *r, FILE *out, unsigned limit);

/**
 * rp_render_json() - one JSON object: "events", "dropped", "late", "truncated",
 * "anomalies" {kind: n}, "time_range_ns" [first, last], "clock", "caps" {...},
 * "concurrency" {"overall": D, "roots": D, "by_category": {category: D}} with D =
 * {"p50", "p90", "p95", "p99", "max", "mean" (3 decimals), "observed_ns"}, or {} when
 * the report has no distributions (n_conc == 0), "sources" [...], "functions"
 * [{"name", "category", "file", "line", "calls", "primitive_calls", "self_ns",
 * "cum_ns", "min_ns", "max_ns", "mean_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns",
 * "midpoint_concurrency_mean" (a number, 0 when no midpoint was known)}], "edges"
 * [{"caller", "callee", "calls", "primitive_calls", "self_ns", "cum_ns"}] (names),
 * and since report 1.2 "categories" {category: {...}}, "counters" [...], "windows"
 * [{..., "functions", "concurrency", "bottlenecks": B}] and "bottlenecks": B (all
 * time), every one present ([] / {} when empty). Sketch buckets are not written.
 * Integers are exact uint64s. See render_json.c for the layout.
 * Return: 0; -EINVAL (nothing written) if an edge names a function outside r->fns;
 * -ENOMEM; -EIO.
 */
int rp_render_json(const struct rp_report *r, FILE *out);

/**
 * rp_render_pstats() - the marshal layout Python's pstats.Stats loads (snakeviz,
 * gprof2dot): {(file or "~", line or 0, name, or "name [category]" without a file):
 * (primitive_calls, calls,
 * self_s, cum_s, {caller_key: (calls, primitive_calls, self_s, cum_s)})}.
 */
int rp_render_pstats(const struct rp_report *r, FILE *out);

/**
 * rp_render_folded() - collapsed stacks for flamegraph.pl and speedscope: one line per
 * CCT node with self time > 0, "a;b;c <self_ns>", the function names on the path from
 * the root's child down to the node (the root node has no name and is not written),
 * in depth-first tree order (children in CCT order). ';', '\n' and '\r' in a name are written as '_'; a node whose fn is
 * out of range as "?". The values sum to the CCT's self time, which the engine keeps
 * equal to the sum of self_ns over functions.
 * Return: 0; -EINVAL (nothing written) if a node's parent is not an earlier node or
 * RP_NONE; -ENOMEM; -EIO.
 */
int rp_render_folded(const struct rp_report *r, FILE *out);

/**
 * rp_render_pprof() - the gzipped profile.proto of pprof (go tool pprof, Pyroscope,
 * Parca): sample types "calls" (count) and "wall" (nanoseconds, the default), one
 * sample per CCT node with calls or self time, its stack the node's path (leaf first),
 * so that pprof's flat is the report's self_ns and its cum the report's cum_ns; one
 * Function and Location per function ("name [category]", file, line); labels
 * "category", and "source"/"pid" when the report has one source. See render_pprof.c.
 * Return: 0; -EINVAL (nothing written) if a node's parent is not an earlier node or
 * RP_NONE; -ENOMEM; -EIO.
 */
int rp_render_pprof(const struct rp_report *r, FILE *out);

/**
 * rp_render_prom() - the Prometheus text exposition (format 0.0.4) of @r: totals,
 * anomalies by kind, a per-name duration summary (quantiles 0.5/0.9/0.95/0.99, _sum,
 * _count), per-name calls/self/cum counters, concurrency gauges, counters' last
 * values and the caps; every metric named ringprof_* (see render_prom.c).
 * @window: the rolling window (r->windows[].name, e.g. "1m") the duration summary
 *	covers; NULL, or a name the report lacks (a comment line says so): all time.
 * @return 0, -ENOMEM or -EIO (a write failed).
 */
int rp_render_prom(const struct rp_report *r, FILE *out, const char *window);

/* Which names get per-name series (ringprof run --metrics-names / --metrics-top). */
struct rp_prom_select {
	const void *names; /* a compiled regex_t (POSIX ERE) a name must match; NULL: all */
	uint32_t top;	   /* then only the top N by cumulative time; 0: all */
};

/* rp_render_prom() with only @sel's names in the per-name families (histogram, summary,
 * span counters); ringprof_series_omitted counts the series the others would add. */
int rp_render_prom_select(const struct rp_report *r, FILE *out, const char *window,
			  const struct rp_prom_select *sel);

/*
 * rp_render_prom_openmetrics() - the OpenMetrics 1.0 text of @text, a Prometheus text
 * exposition rp_render_prom() wrote (more lines may follow it): counter families named
 * without _total in HELP and TYPE, other comments dropped, "# EOF" last.
 * rp_render_prom_protobuf() - the same families as delimited io.prometheus.client.
 * MetricFamily messages, the duration histogram with native histogram fields from
 * @r's sketches (@r: the report @text was made from). See render_prom_pb.c.
 * Return: 0; -EINVAL (@text is not such an exposition); -ENOMEM; -EIO.
 */
int rp_render_prom_openmetrics(const char *text, size_t len, FILE *out);
int rp_render_prom_protobuf(const struct rp_report *r, const char *text, size_t len, FILE *out);

/* ---- the agent toolkit's nested-call analysis (engine/formats/aiq.h), tools/render/render_aiq.c ---- */
struct rp_aiq;

/**
 * rp_render_aiq_json() - the toolkit's result as JSON (its layout, floats as Python's
 * repr): "concurrency" {"timeline_segments", "p50", "p90", "p95", "p99"},
 * "node_metrics" {uuid: {"uuid", "operation_type", "operation_name", "start_time",
 * "end_time", "duration", "self_time", "subtree_time", "concurrency_midpoint",
 * "bottleneck_score"}}, "top_bottlenecks" [...], and "ringprof" {the aiq counters}.
 */
int rp_render_aiq_json(const struct rp_aiq *a, FILE *out);

/**
 * rp_render_aiq_text_indent() - what the text report's tree would cost: bytes of
 * indentation (two a level, a line a call: it grows with the square of the depth)
 * and the deepest level. @return 0 or -ENOMEM.
 */
int rp_render_aiq_text_indent(const struct rp_aiq *a, uint64_t *indent, uint32_t *depth);

/** rp_render_aiq_text() - the toolkit's textual report, line for line. */
int rp_render_aiq_text(const struct rp_aiq *a, FILE *out);

/**
 * rp_render_repr_double() - @v as the aiq renderer writes floats (Python's repr() digits,
 * in fixed-point notation) at @buf (48 bytes), NUL-terminated only when the fallback
 * printed it. @return its length.
 */
size_t rp_render_repr_double(char *buf, double v);

#endif
