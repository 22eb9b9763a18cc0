// SPDX-License-Identifier: MIT
/*
 * Snapshots, the schema: the key tables that are docs/snapshot.md in code. A minor
 * version adds rows here (and to report.h and the doc); nothing else changes for a
 * key to be written and read. The encoder and decoder beside this file walk these
 * tables; the decoder's whole-record checks are named by the tables that need them.
 */
#include <stddef.h>

#include "snapshot_schema.h"

/* clang-format off */
#define KEYED(k, t, req, o, s) \
	{ .key = k, .keylen = sizeof(k) - 1, .type = t, .required = req, .off = o, .sub = s }
#define FIELD(st, m, t, req)	KEYED(#m, t, req, offsetof(st, m), NULL)
#define REF(st, m, r, req) \
	{ .key = #m, .keylen = sizeof(#m) - 1, .type = F_REF, .ref = r, .required = req, \
	  .off = offsetof(st, m) }
#define ARRAY(k, st, m, cnt, t, s) \
	{ .key = k, .keylen = sizeof(k) - 1, .type = t, .off = offsetof(st, m), \
	  .aux = offsetof(st, cnt), .sub = s }
#define TABLE(fields, st)	{ .f = fields, .n = ARRAY_SIZE(fields), .size = sizeof(st) }
/* clang-format on */

/* 1.2: a DDSketch as data (report.h); checked by rebuilding it. */
#define SK(m, t) FIELD(struct rp_report_sketch, m, t, false)
static const struct field sketch_fields[] = {
	SK(alpha, F_F64),
	SK(count, F_U64),
	SK(zero, F_U64),
	SK(dropped, F_U64),
	SK(collapsed_neg, F_U64),
	SK(collapsed_pos, F_U64),
	SK(min, F_F64),
	SK(max, F_F64),
	SK(sum, F_SUM),
	SK(neg_lo, F_I32),
	ARRAY("neg", struct rp_report_sketch, neg, n_neg, F_U64S, NULL),
	SK(pos_lo, F_I32),
	ARRAY("pos", struct rp_report_sketch, pos, n_pos, F_U64S, NULL),
};
static const struct table sketch_table = { .f = sketch_fields,
					   .n = ARRAY_SIZE(sketch_fields),
					   .size = sizeof(struct rp_report_sketch),
					   .check = rp_snap_check_sketch };

#define SRC(m, t, req) FIELD(struct rp_report_source, m, t, req)
static const struct field source_fields[] = {
	SRC(name, F_STR, true),
	SRC(pid, F_I32, false),
	SRC(flags, F_U32, false),
	SRC(events, F_U64, false),
	SRC(dropped, F_U64, false),
	SRC(late, F_U64, false),
	SRC(truncated, F_U64, false),
	SRC(names_dropped, F_U64, false),
	SRC(resyncs, F_U64, false),
	SRC(anomalies, F_ANOM, false),
	SRC(ring_hwm, F_U64, false),
	SRC(ring_capacity, F_U64, false),
	SRC(buffer_hwm, F_U64, false),
	SRC(forced, F_U64, false),
	SRC(nospace_dropped, F_U64, false),
	SRC(rings_nospace, F_U64, false), /* 1.3 */
	SRC(reentrant, F_U64, false),
	SRC(offcpu_idle_ns, F_U64, false), /* 1.3 */
	SRC(names_used, F_U64, false),
	SRC(name_capacity, F_U64, false),
	SRC(name_bytes_used, F_U64, false),
	SRC(name_bytes, F_U64, false),
	SRC(host, F_STR, false), /* 1.4 */
	SRC(boot_id, F_STR, false),
	SRC(anchor_realtime_ns, F_U64, false),
	SRC(anchor_monotonic_ns, F_U64, false),
	SRC(clock_shift_ns, F_I64, false),
	SRC(summary_ns, F_U64, false), /* 1.4 */
	SRC(summary_raised, F_U64, false), /* 1.4 */
};

#define FN(m, t, req) FIELD(struct rp_report_fn, m, t, req)
/* From p50_ns on: 1.1; dur: 1.2. */
static const struct field fn_fields[] = {
	FN(name, F_STR, true),
	FN(category, F_STR, false),
	FN(file, F_STR, false),
	FN(line, F_U32, false),
	FN(calls, F_U64, false),
	FN(primitive_calls, F_U64, false),
	FN(self_ns, F_U64, false),
	FN(cum_ns, F_U64, false),
	FN(total_ns, F_U64, false),
	FN(min_ns, F_U64, false),
	FN(max_ns, F_U64, false),
	FN(p50_ns, F_U64, false),
	FN(p90_ns, F_U64, false),
	FN(p95_ns, F_U64, false),
	FN(p99_ns, F_U64, false),
	FN(midpoint_sum, F_U64, false),
	FN(midpoint_count, F_U64, false),
	KEYED("dur", F_SKETCH, false, offsetof(struct rp_report_fn, dur), &sketch_table),
	FN(drop_lost, F_U64, false), /* 1.3 */
	FN(offcpu_ns, F_U64, false), /* 1.3 */
	FN(offcpu_cum_ns, F_U64, false),
	FN(errors, F_U64, false), /* 1.4 */
	FN(started, F_U64, false),
	FN(milestone, F_U8, false), /* 1.5 */
	FN(charged_ns, F_U64, false), /* 1.6 */
	FN(charged, F_U64, false),
};

static const struct field edge_fields[] = {
	REF(struct rp_report_edge, caller, REF_FN, true),
	REF(struct rp_report_edge, callee, REF_FN, true),
	FIELD(struct rp_report_edge, calls, F_U64, false),
	FIELD(struct rp_report_edge, primitive_calls, F_U64, false),
	FIELD(struct rp_report_edge, self_ns, F_U64, false),
	FIELD(struct rp_report_edge, cum_ns, F_U64, false),
};

/* parent and fn: check_cct(), which knows the root's exceptions. */
#define NODE(m, t, req) FIELD(struct rp_report_node, m, t, req)
static const struct field node_fields[] = {
	NODE(parent, F_REF, true),    NODE(fn, F_REF, true),
	NODE(calls, F_U64, false),    NODE(self_ns, F_U64, false),
	NODE(total_ns, F_U64, false), NODE(offcpu_ns, F_U64, false), /* 1.3 */
};

/* 1.1 */
#define CONC(m, t, req) FIELD(struct rp_report_conc, m, t, req)
static const struct field conc_fields[] = {
	CONC(name, F_STR, true), CONC(observed_ns, F_U64, false), CONC(mean_milli, F_U64, false),
	CONC(p50, F_U32, false), CONC(p90, F_U32, false),	  CONC(p95, F_U32, false),
	CONC(p99, F_U32, false), CONC(max, F_U32, false),	  CONC(over_cap_ns, F_U64, false),
	CONC(now, F_U32, false), /* 1.2 */
};

/* The top-level "requests" row (1.4): the same keys, its name optional, so that a file
 * without it (older, merged) decodes with the name "": absent. */
static const struct field requests_fields[] = {
	CONC(name, F_STR, false), CONC(observed_ns, F_U64, false), CONC(mean_milli, F_U64, false),
	CONC(p50, F_U32, false),  CONC(p90, F_U32, false),	  CONC(p95, F_U32, false),
	CONC(p99, F_U32, false),  CONC(max, F_U32, false),	  CONC(over_cap_ns, F_U64, false),
	CONC(now, F_U32, false),
};

/* 1.2 */
#define CAT(m, t, req) FIELD(struct rp_report_cat, m, t, req)
static const struct field cat_fields[] = {
	CAT(name, F_STR, true),
	CAT(calls, F_U64, false),
	CAT(self_ns, F_U64, false),
	CAT(total_ns, F_U64, false),
	CAT(p50_ns, F_U64, false),
	CAT(p90_ns, F_U64, false),
	CAT(p95_ns, F_U64, false),
	CAT(p99_ns, F_U64, false),
	KEYED("dur", F_SKETCH, false, offsetof(struct rp_report_cat, dur), &sketch_table),
};

/* 1.2 */
#define CTR(m, t, req) FIELD(struct rp_report_counter, m, t, req)
static const struct field counter_fields[] = {
	CTR(name, F_STR, true),
	CTR(category, F_STR, false),
	CTR(samples, F_U64, false),
	CTR(last, F_I64, false),
	CTR(min, F_I64, false),
	CTR(max, F_I64, false),
	CTR(mean, F_F64, false),
	CTR(p50, F_F64, false),
	CTR(p90, F_F64, false),
	CTR(p95, F_F64, false),
	CTR(p99, F_F64, false),
	KEYED("values", F_SKETCH, false, offsetof(struct rp_report_counter, values), &sketch_table),
};

/* 1.2 */
static const struct field top_entry_fields[] = {
	REF(struct rp_report_top, fn, REF_FN, true),
	FIELD(struct rp_report_top, value, F_U64, false),
	FIELD(struct rp_report_top, error, F_U64, false),
};
static const struct table top_entry_table = TABLE(top_entry_fields, struct rp_report_top);

/* 1.2 */
#define SPAN(m, t) FIELD(struct rp_report_span, m, t, false)
static const struct field span_fields[] = {
	REF(struct rp_report_span, fn, REF_FN, true),
	REF(struct rp_report_span, source, REF_SRC_OR_NIL, false),
	SPAN(track, F_U64),
	SPAN(span_id, F_U64),
	SPAN(start_ns, F_U64),
	SPAN(dur_ns, F_U64),
	SPAN(self_ns, F_U64),
	SPAN(subtree_ns, F_U64),
	SPAN(concurrency, F_U32),
	SPAN(concurrency_known, F_U32),
	SPAN(charged_ns, F_U64), /* 1.6 */
};
static const struct table span_table = TABLE(span_fields, struct rp_report_span);

/* 1.2 */
#define BN(k, m, cnt, t) ARRAY(k, struct rp_report_bottlenecks, m, cnt, F_ARR, t)
static const struct field bottleneck_fields[] = {
	BN("by_cum", by_cum, n_by_cum, &top_entry_table),
	BN("by_self", by_self, n_by_self, &top_entry_table),
	BN("by_count", by_count, n_by_count, &top_entry_table),
	FIELD(struct rp_report_bottlenecks, bound_cum, F_U64, false),
	FIELD(struct rp_report_bottlenecks, bound_self, F_U64, false),
	FIELD(struct rp_report_bottlenecks, bound_count, F_U64, false),
	BN("slowest", slowest, n_slowest, &span_table),
};
static const struct table bottleneck_table = TABLE(bottleneck_fields, struct rp_report_bottlenecks);

/* 1.2 */
#define WFN(m) FIELD(struct rp_report_wfn, m, F_U64, false)
static const struct field wfn_fields[] = {
	REF(struct rp_report_wfn, fn, REF_FN, true),
	WFN(calls),
	WFN(self_ns),
	WFN(cum_ns),
	WFN(p50_ns),
	WFN(p90_ns),
	WFN(p95_ns),
	WFN(p99_ns),
	KEYED("dur", F_SKETCH, false, offsetof(struct rp_report_wfn, dur), &sketch_table), /* 1.4 */
};
static const struct table wfn_table = TABLE(wfn_fields, struct rp_report_wfn);
static const struct table conc_table = TABLE(conc_fields, struct rp_report_conc);
static const struct table requests_table = TABLE(requests_fields, struct rp_report_conc);

/* 1.2 */
#define WIN(m, t, req) FIELD(struct rp_report_window, m, t, req)
static const struct field window_fields[] = {
	WIN(name, F_STR, true),
	WIN(length_ns, F_U64, false),
	WIN(subwindows, F_U32, false),
	WIN(t_from, F_U64, false),
	WIN(t_to, F_U64, false),
	ARRAY("fns", struct rp_report_window, fns, n_fns, F_ARR, &wfn_table),
	ARRAY("conc", struct rp_report_window, conc, n_conc, F_ARR, &conc_table),
	KEYED("top", F_REC, false, offsetof(struct rp_report_window, top), &bottleneck_table),
};

/* 1.2: step statistics per phase. */
#define STEP(m, t, req) FIELD(struct rp_report_step_phase, m, t, req)
static const struct field step_fields[] = {
	STEP(name, F_STR, true),
	STEP(count, F_U64, false),
	STEP(total_ns, F_U64, false),
	STEP(min_ns, F_U64, false),
	STEP(max_ns, F_U64, false),
	STEP(p50_ns, F_U64, false),
	STEP(p95_ns, F_U64, false),
	STEP(p99_ns, F_U64, false),
	KEYED("dur", F_SKETCH, false, offsetof(struct rp_report_step_phase, dur), &sketch_table),
};
static const struct table step_table = { .f = step_fields,
					 .n = ARRAY_SIZE(step_fields),
					 .size = sizeof(struct rp_report_step_phase),
					 .check = rp_snap_check_step };

/* 1.2: the flight recorder. */
static const struct field rtrack_fields[] = {
	REF(struct rp_report_rtrack, source, REF_SRC, true),
	FIELD(struct rp_report_rtrack, kind, F_U8, true),
	FIELD(struct rp_report_rtrack, id, F_U64, false),
	FIELD(struct rp_report_rtrack, pid, F_STR, false),
	FIELD(struct rp_report_rtrack, tid, F_STR, false),
};
static const struct table rtrack_table = { .f = rtrack_fields,
					   .n = ARRAY_SIZE(rtrack_fields),
					   .size = sizeof(struct rp_report_rtrack),
					   .check = rp_snap_check_rtrack };

static const struct field rspan_fields[] = {
	REF(struct rp_report_rspan, fn, REF_FN, true),
	REF(struct rp_report_rspan, track, REF_RTRACK, true),
	FIELD(struct rp_report_rspan, depth, F_U32, false),
	FIELD(struct rp_report_rspan, step, F_U64, false),
	FIELD(struct rp_report_rspan, start_ns, F_U64, false),
	FIELD(struct rp_report_rspan, dur_ns, F_U64, false),
};
static const struct table rspan_table = TABLE(rspan_fields, struct rp_report_rspan);
const struct table *const rp_snap_rspan_table = &rspan_table;

static const struct field rsample_fields[] = {
	REF(struct rp_report_rsample, name, REF_RNAME, true),
	REF(struct rp_report_rsample, track, REF_RTRACK, true),
	FIELD(struct rp_report_rsample, ts_ns, F_U64, false),
	FIELD(struct rp_report_rsample, value, F_I64, false),
};
static const struct table rsample_table = TABLE(rsample_fields, struct rp_report_rsample);

#define RECF(m, t)	      FIELD(struct rp_report_recorder, m, t, false)
#define RECA(k, m, cnt, t, s) ARRAY(k, struct rp_report_recorder, m, cnt, t, s)
static const struct field recorder_fields[] = {
	RECF(max_spans, F_U32),
	RECF(max_samples, F_U32),
	RECF(spans_seen, F_U64),
	RECF(samples_seen, F_U64),
	RECF(wrapped, F_U64),
	RECF(samples_wrapped, F_U64),
	RECF(unlisted, F_U64),
	RECF(labels_dropped, F_U64),
	RECA("tracks", tracks, n_tracks, F_ARR, &rtrack_table),
	RECA("spans", spans, n_spans, F_ARR, &rspan_table),
	RECA("names", names, n_names, F_STRS, NULL),
	RECA("samples", samples, n_samples, F_ARR, &rsample_table),
};
static const struct table recorder_table = { .f = recorder_fields,
					     .n = ARRAY_SIZE(recorder_fields),
					     .size = sizeof(struct rp_report_recorder),
					     .check = rp_snap_check_recorder };

/* 1.2: device idle time. */
static const struct field dev_point_fields[] = {
	FIELD(struct rp_report_dev_point, t_ns, F_U64, false),
	FIELD(struct rp_report_dev_point, depth, F_U32, false),
};
static const struct table dev_point_table = TABLE(dev_point_fields, struct rp_report_dev_point);

static const struct field dev_interval_fields[] = {
	FIELD(struct rp_report_dev_interval, start_ns, F_U64, false),
	FIELD(struct rp_report_dev_interval, end_ns, F_U64, false),
};
static const struct table dev_interval_table = { .f = dev_interval_fields,
						 .n = ARRAY_SIZE(dev_interval_fields),
						 .size = sizeof(struct rp_report_dev_interval),
						 .check = rp_snap_check_interval };

#define DSPAN(m, t, req) FIELD(struct rp_report_dev_span, m, t, req)
static const struct field dev_span_fields[] = {
	DSPAN(name, F_STR, true),
	DSPAN(source, F_STR, false),
	DSPAN(source_file, F_STR, false),
	DSPAN(source_line, F_U32, false),
	DSPAN(queue_depth, F_U32, false),
	REF(struct rp_report_dev_span, phase, REF_PHASE_OR_NIL, false),
	DSPAN(start_ns, F_U64, false),
	DSPAN(dur_ns, F_U64, false),
	DSPAN(self_ns, F_I64, false),
	DSPAN(idle_ns, F_U64, false),
	DSPAN(idle_fraction, F_F64, false),
	DSPAN(score, F_F64, false),
};
static const struct table dev_span_table = TABLE(dev_span_fields, struct rp_report_dev_span);

#define DEV(m)		   FIELD(struct rp_report_device, m, F_U64, false)
#define DEVA(k, m, cnt, s) ARRAY(k, struct rp_report_device, m, cnt, F_ARR, s)
static const struct field device_fields[] = {
	DEV(launches),
	DEV(kernels),
	DEV(other_device),
	DEV(linked),
	DEV(unmatched_launches),
	DEV(unmatched_kernels),
	DEV(spans),
	DEV(busy_ns),
	DEV(idle_ns),
	FIELD(struct rp_report_device, max_queue_depth, F_U32, false),
	KEYED("points_total", F_U64, false, offsetof(struct rp_report_device, n_points_total),
	      NULL),
	DEVA("points", points, n_points, &dev_point_table),
	KEYED("idle_total", F_U64, false, offsetof(struct rp_report_device, n_idle_total), NULL),
	DEVA("idle", idle, n_idle, &dev_interval_table),
	KEYED("phases_total", F_U64, false, offsetof(struct rp_report_device, n_phases_total),
	      NULL),
	DEVA("phases", phases, n_phases, &dev_interval_table),
	DEV(candidates),
	DEVA("ranked", ranked, n_ranked, &dev_span_table),
	DEV(spans_dropped),
	DEV(events_dropped),
	DEV(links_dropped),
	DEV(links_orphan),
};
static const struct table device_table = { .f = device_fields,
					   .n = ARRAY_SIZE(device_fields),
					   .size = sizeof(struct rp_report_device),
					   .check = rp_snap_check_device };

/* From max_sketch_names on: 1.2. */
#define CAP(m) FIELD(struct rp_report_caps, m, F_U32, false)
static const struct field caps_fields[] = {
	CAP(max_names),
	CAP(max_tracks),
	CAP(max_depth),
	CAP(max_cct_nodes),
	CAP(max_sources),
	CAP(max_sketch_names),
	CAP(max_window_names),
	CAP(max_counters),
	CAP(topk),
	FIELD(struct rp_report_caps, memory_bound, F_U64, false),
	CAP(subwindows),
	CAP(max_window_level),
};

/* 1.3 */
#define EXP(m) FIELD(struct rp_report_expiry, m, F_U64, false)
static const struct field expiry_fields[] = {
	EXP(expire_ns),	       EXP(requests),	   EXP(spans),	    EXP(stale_max_ns),
	EXP(suspect_requests), EXP(suspect_spans), EXP(peak_spans),
};

/* 1.3 */
#define OFF(m, t) FIELD(struct rp_report_offcpu, m, t, false)
static const struct field offcpu_fields[] = {
	OFF(state, F_U32), OFF(threads, F_U32),	  OFF(watched, F_U64),	OFF(refused, F_U64),
	OFF(lost, F_U64),  OFF(unpaired, F_U64),  OFF(overflow, F_U64), OFF(overflow_ns, F_U64),
	OFF(late, F_U64),  OFF(intervals, F_U64), OFF(total_ns, F_U64),
};

static const struct table source_table = TABLE(source_fields, struct rp_report_source);
static const struct table fn_table = TABLE(fn_fields, struct rp_report_fn);
static const struct table edge_table = TABLE(edge_fields, struct rp_report_edge);
static const struct table node_table = TABLE(node_fields, struct rp_report_node);
static const struct table cat_table = TABLE(cat_fields, struct rp_report_cat);
static const struct table counter_table = TABLE(counter_fields, struct rp_report_counter);
static const struct table window_table = TABLE(window_fields, struct rp_report_window);
static const struct table caps_table = TABLE(caps_fields, struct rp_report_caps);
static const struct table expiry_table = TABLE(expiry_fields, struct rp_report_expiry);
static const struct table offcpu_table = TABLE(offcpu_fields, struct rp_report_offcpu);

#define REP(m, t) FIELD(struct rp_report, m, t, false)
static const struct field header_fields[] = {
	REP(created_realtime_ns, F_U64),
	REP(t_first, F_U64),
	REP(t_last, F_U64),
	REP(clock, F_STR),
	REP(writer, F_STR), /* 1.4 */
	KEYED("caps", F_REC, false, offsetof(struct rp_report, caps), &caps_table),
	REP(unmerged_records, F_U64), /* 1.5 */
};

static const struct field totals_fields[] = {
	REP(events, F_U64),    REP(dropped, F_U64),    REP(late, F_U64),
	REP(truncated, F_U64), REP(anomalies, F_ANOM),
};

static const struct table header_table = TABLE(header_fields, struct rp_report);
static const struct table totals_table = TABLE(totals_fields, struct rp_report);

/* "header" and "totals" are views of the report itself (offset 0). */
#define SEC(k, m, cnt, t) ARRAY(k, struct rp_report, m, cnt, F_ARR, t)
static const struct field top_fields[] = {
	KEYED("version", F_VER, true, 0, NULL),
	KEYED("header", F_REC, false, 0, &header_table),
	KEYED("totals", F_REC, false, 0, &totals_table),
	SEC("sources", sources, n_sources, &source_table),
	SEC("functions", fns, n_fns, &fn_table),
	SEC("edges", edges, n_edges, &edge_table),
	SEC("cct", nodes, n_nodes, &node_table),
	SEC("concurrency", conc, n_conc, &conc_table), /* 1.1 */
	SEC("categories", cats, n_cats, &cat_table),   /* 1.2 */
	SEC("counters", counters, n_counters, &counter_table),
	SEC("windows", windows, n_windows, &window_table),
	KEYED("bottlenecks", F_REC, false, offsetof(struct rp_report, bottlenecks),
	      &bottleneck_table),
	SEC("steps", steps, n_steps, &step_table),
	REP(steps_folded, F_U64),
	KEYED("recorder", F_REC, false, offsetof(struct rp_report, recorder), &recorder_table),
	KEYED("device", F_REC, false, offsetof(struct rp_report, device), &device_table),
	KEYED("async_expiry", F_REC, false, offsetof(struct rp_report, expiry), &expiry_table),
	KEYED("offcpu", F_REC, false, offsetof(struct rp_report, offcpu), &offcpu_table),
	KEYED("requests", F_REC, false, offsetof(struct rp_report, requests), &requests_table),
	/* 1.4 */
};
const struct table rp_snap_top_table = TABLE(top_fields, struct rp_report);

/* Bytes of s[0..n) to keep: at most STR_MAX, not splitting a UTF-8 sequence (a cut
 * backs off over at most three continuation bytes, so it ends on a boundary). */
size_t rp_snap_cut_len(const char *s, size_t n)
{
	size_t k = STR_MAX;

	if (n <= STR_MAX)
		return n;
	while (k > STR_MAX - 3 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	return k;
}
