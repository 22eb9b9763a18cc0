/* SPDX-License-Identifier: MIT */
/*
 * Output formats of a report (engine/report.h): the same report, from a live
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
 * @limit: rows of the function table, 0 = all.
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
 * [{"caller", "callee", "calls", "primitive_calls", "self_ns", "cum_ns"}] (names).
 * Integers are exact uint64s. See render_json.c for the layout.
 */
int rp_render_json(const struct rp_report *r, FILE *out);

/**
 * rp_render_pstats() - the marshal layout Python's pstats.Stats loads (snakeviz,
 * gprof2dot): {(file or "span", line or 0, name): (primitive_calls, calls,
 * self_s, cum_s, {caller_key: (calls, primitive_calls, self_s, cum_s)})}.
 */
int rp_render_pstats(const struct rp_report *r, FILE *out);

/* ---- the agent toolkit's nested-call analysis (engine/aiq.h), tools/render_aiq.c ---- */
struct rp_aiq;

/**
 * rp_render_aiq_json() - the toolkit's result as JSON (its layout, floats as Python's
 * repr): "concurrency" {"timeline_segments", "p50", "p90", "p95", "p99"},
 * "node_metrics" {uuid: {"uuid", "operation_type", "operation_name", "start_time",
 * "end_time", "duration", "self_time", "subtree_time", "concurrency_midpoint",
 * "bottleneck_score"}}, "top_bottlenecks" [...], and "ringprof" {the aiq counters}.
 */
int rp_render_aiq_json(const struct rp_aiq *a, FILE *out);

/** rp_render_aiq_text() - the toolkit's textual report, line for line. */
int rp_render_aiq_text(const struct rp_aiq *a, FILE *out);

#endif
