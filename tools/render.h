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
 * the counters that say what was lost (events, dropped, late, truncated, anomalies).
 * @limit: rows of the function table, 0 = all.
 */
int rp_render_text(const struct rp_report *r, FILE *out, unsigned limit);

/**
 * rp_render_json() - one JSON object: "events", "dropped", "late", "truncated",
 * "anomalies" {kind: n}, "sources" [...], "functions" [{"name", "category", "file",
 * "line", "calls", "primitive_calls", "self_ns", "cum_ns", "min_ns", "max_ns",
 * "mean_ns"}], "edges" [{"caller", "callee", "calls", "primitive_calls", "self_ns",
 * "cum_ns"}] (names), "time_range_ns" [first, last], "caps" {...}.
 */
int rp_render_json(const struct rp_report *r, FILE *out);

/**
 * rp_render_pstats() - the marshal layout Python's pstats.Stats loads (snakeviz,
 * gprof2dot): {(file or "span", line or 0, name): (primitive_calls, calls,
 * self_s, cum_s, {caller_key: (calls, primitive_calls, self_s, cum_s)})}.
 */
int rp_render_pstats(const struct rp_report *r, FILE *out);

#endif
