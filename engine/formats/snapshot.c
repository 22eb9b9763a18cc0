// SPDX-License-Identifier: MIT
/*
 * Snapshots: a struct rp_report as MessagePack, through msgpack-c. The schema is
 * docs/snapshot.md; the tables below are that schema in code, and both directions
 * walk them, so a key cannot be written under one name and read under another.
 *
 * Encoding goes through msgpack-c's packer, whose write callback gathers the small
 * writes into ENC_BUF-sized chunks for the caller's sink: a sink (memory, file,
 * io_uring) sees few, large writes. Keys come out in table order, so the same
 * report always gives the same bytes.
 *
 * Decoding trusts nothing. msgpack-c allocates an array or map of the size its
 * header claims before it reads one element, so five bytes could ask for 100 GB;
 * scan() therefore walks the raw bytes first and checks that every value is
 * complete, that nesting stays within msgpack-c's own limit and that no container
 * claims more elements than there are bytes left (each element takes one at
 * least). After that msgpack_unpack_next() builds the object tree in one zone of
 * O(input) size (strings point into the input), and the tables copy it into the
 * report, checking each value's type and range, then every index. Keys the tables
 * do not know are skipped at every level: that is how later minor versions add
 * fields; keys an older minor version did not have read as 0, "" or empty (a 1.0
 * file has no 1.1 function fields and no "concurrency"). Errors name the path of the
 * offending value ("functions[3].calls").
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>

#include "sketch.h"
#include "snapshot.h"

#define STR_MAX	   4096u      /* bytes kept of a string; longer ones are cut (docs) */
#define DEPTH_MAX  32u	      /* open containers; msgpack-c's MSGPACK_EMBED_STACK_SIZE */
#define FILE_MAX   (1u << 30) /* rp_snapshot_read_file refuses larger files */
#define ENC_BUF	   16384u     /* bytes gathered before each call of the sink */
#define MEMBUF_MIN 4096u      /* first allocation of a rp_membuf */
#define KEY_SHOWN  32u	      /* bytes of an input key quoted in an error */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- the schema ----------------------------------------------------------------- */

enum ftype {
	F_U64,	  /* unsigned integer */
	F_U32,	  /* unsigned integer < 2^32 */
	F_I32,	  /* signed integer in int32_t */
	F_I64,	  /* signed integer in int64_t 1.2 */
	F_F64,	  /* finite double, written as float64 (integers also read) 1.2 */
	F_SUM,	  /* as F_F64, but +-inf allowed: a sum that overflowed 1.2 */
	F_STR,	  /* string, cut at STR_MAX */
	F_REF,	  /* index, or nil (-1 also read) for RP_NONE; .ref says into what */
	F_ANOM,	  /* map anomaly name -> count, over uint64_t[RP_ANOM_KIND_COUNT] */
	F_REC,	  /* nested map, described by .sub, at .off */
	F_ARR,	  /* array of .sub records: pointer at .off, uint32_t count at .aux */
	F_U64S,	  /* array of u64: pointer at .off, uint32_t count at .aux 1.2 */
	F_SKETCH, /* a struct rp_report_sketch: nil when alpha == 0, else a map 1.2 */
	F_VER,	  /* [major, minor]; checked before everything else */
	F_U8,	  /* unsigned integer < 256 1.2 */
	F_STRS,	  /* array of str: char ** at .off, uint32_t count at .aux 1.2 */
};

/* What an F_REF indexes, checked once the whole report is read. */
enum ref {
	REF_NONE,
	REF_FN,
	REF_FN_OR_NIL,
	REF_SRC_OR_NIL,
	REF_SRC,	  /* a source; nil is an error 1.2 */
	REF_RTRACK,	  /* recorder.tracks 1.2 */
	REF_RNAME,	  /* recorder.names 1.2 */
	REF_PHASE_OR_NIL, /* one of device.phases_total phases (the list may be cut) 1.2 */
};

struct table;
struct where;

struct field {
	const char *key;
	uint8_t keylen;
	uint8_t type;  /* enum ftype */
	uint8_t ref;   /* enum ref, for F_REF */
	bool required; /* missing: -EINVAL (else 0, "" or empty) */
	size_t off;    /* of the value in the record */
	size_t aux;    /* of the uint32_t count, for F_ARR and F_U64S */
	const struct table *sub;
};

struct table {
	const struct field *f;
	uint32_t n;  /* at most 32: decode_record keeps a bit per field */
	size_t size; /* of one record, for F_ARR */
	/* Checks a decoded record as a whole (NULL: nothing to check). */
	int (*check)(void *base, const struct where *w, char *why);
};

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

static int check_sketch(void *base, const struct where *w, char *why);

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
					   .check = check_sketch };

#define SRC(m, t, req) FIELD(struct rp_report_source, m, t, req)
static const struct field source_fields[] = {
	SRC(name, F_STR, true),	       SRC(pid, F_I32, false),		 SRC(flags, F_U32, false),
	SRC(events, F_U64, false),     SRC(dropped, F_U64, false),	 SRC(late, F_U64, false),
	SRC(truncated, F_U64, false),  SRC(names_dropped, F_U64, false), SRC(resyncs, F_U64, false),
	SRC(anomalies, F_ANOM, false),
	SRC(ring_hwm, F_U64, false),   SRC(ring_capacity, F_U64, false), SRC(buffer_hwm, F_U64, false),
	SRC(forced, F_U64, false),
	SRC(nospace_dropped, F_U64, false), SRC(rings_nospace, F_U64, false), /* 1.3 */
	SRC(reentrant, F_U64, false),
	SRC(offcpu_idle_ns, F_U64, false), /* 1.3 */
	SRC(names_used, F_U64, false), SRC(name_capacity, F_U64, false),
	SRC(name_bytes_used, F_U64, false), SRC(name_bytes, F_U64, false),
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
	NODE(parent, F_REF, true),   NODE(fn, F_REF, true),	   NODE(calls, F_U64, false),
	NODE(self_ns, F_U64, false), NODE(total_ns, F_U64, false),
	NODE(offcpu_ns, F_U64, false), /* 1.3 */
};

/* 1.1 */
#define CONC(m, t, req) FIELD(struct rp_report_conc, m, t, req)
static const struct field conc_fields[] = {
	CONC(name, F_STR, true), CONC(observed_ns, F_U64, false), CONC(mean_milli, F_U64, false),
	CONC(p50, F_U32, false), CONC(p90, F_U32, false),	  CONC(p95, F_U32, false),
	CONC(p99, F_U32, false), CONC(max, F_U32, false),
	CONC(over_cap_ns, F_U64, false), CONC(now, F_U32, false), /* 1.2 */
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
};
static const struct table wfn_table = TABLE(wfn_fields, struct rp_report_wfn);
static const struct table conc_table = TABLE(conc_fields, struct rp_report_conc);

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

static int check_step(void *base, const struct where *w, char *why);
static int check_rtrack(void *base, const struct where *w, char *why);
static int check_recorder(void *base, const struct where *w, char *why);
static int check_interval(void *base, const struct where *w, char *why);
static int check_device(void *base, const struct where *w, char *why);

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
					 .check = check_step };

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
					   .check = check_rtrack };

static const struct field rspan_fields[] = {
	REF(struct rp_report_rspan, fn, REF_FN, true),
	REF(struct rp_report_rspan, track, REF_RTRACK, true),
	FIELD(struct rp_report_rspan, depth, F_U32, false),
	FIELD(struct rp_report_rspan, step, F_U64, false),
	FIELD(struct rp_report_rspan, start_ns, F_U64, false),
	FIELD(struct rp_report_rspan, dur_ns, F_U64, false),
};
static const struct table rspan_table = TABLE(rspan_fields, struct rp_report_rspan);

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
					     .check = check_recorder };

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
						 .check = check_interval };

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
					   .check = check_device };

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
	EXP(expire_ns),	       EXP(requests),	      EXP(spans),
	EXP(stale_max_ns),     EXP(suspect_requests), EXP(suspect_spans),
	EXP(peak_spans),
};

/* 1.3 */
#define OFF(m, t) FIELD(struct rp_report_offcpu, m, t, false)
static const struct field offcpu_fields[] = {
	OFF(state, F_U32),    OFF(threads, F_U32),   OFF(watched, F_U64),
	OFF(refused, F_U64),  OFF(lost, F_U64),	     OFF(unpaired, F_U64),
	OFF(overflow, F_U64), OFF(overflow_ns, F_U64),
	OFF(late, F_U64),     OFF(intervals, F_U64), OFF(total_ns, F_U64),
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
	KEYED("caps", F_REC, false, offsetof(struct rp_report, caps), &caps_table),
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
};
static const struct table top_table = TABLE(top_fields, struct rp_report);

/* Bytes of s[0..n) to keep: at most STR_MAX, not splitting a UTF-8 sequence (a cut
 * backs off over at most three continuation bytes, so it ends on a boundary). */
static size_t cut_len(const char *s, size_t n)
{
	size_t k = STR_MAX;

	if (n <= STR_MAX)
		return n;
	while (k > STR_MAX - 3 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	return k;
}

/* --- encoding ------------------------------------------------------------------- */

struct enc {
	rp_sink_fn sink;
	void *ctx;
	int err;  /* the sink's first error; nothing is written after it */
	size_t n; /* bytes in buf */
	msgpack_packer pk;
	char buf[ENC_BUF];
};

static void enc_flush(struct enc *e)
{
	if (e->err == 0 && e->n > 0)
		e->err = e->sink(e->ctx, e->buf, e->n);
	e->n = 0;
}

/* msgpack-c's write callback. */
static int enc_write(void *data, const char *p, size_t len)
{
	struct enc *e = data;

	if (len > sizeof(e->buf) - e->n) {
		enc_flush(e);
		if (e->err == 0 && len > sizeof(e->buf))
			e->err = e->sink(e->ctx, p, len);
		if (e->err || len > sizeof(e->buf))
			return e->err;
	}
	if (len > 0 && e->err == 0) {
		memcpy(e->buf + e->n, p, len);
		e->n += len;
	}
	return e->err;
}

static void pack_key(struct enc *e, const char *k, size_t len)
{
	msgpack_pack_str_with_body(&e->pk, k, len);
}

/* A NULL string (a report built carelessly) is written as "". */
static void pack_str(struct enc *e, const char *s)
{
	size_t n = s ? cut_len(s, strnlen(s, STR_MAX + 1)) : 0;

	msgpack_pack_str_with_body(&e->pk, s ? s : "", n);
}

/* Every kind, in enum order, zeros too: a reader sees the whole list. */
static void pack_anomalies(struct enc *e, const uint64_t *a)
{
	msgpack_pack_map(&e->pk, RP_ANOM_KIND_COUNT);
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++) {
		pack_key(e, rp_anomaly_names[k], strlen(rp_anomaly_names[k]));
		msgpack_pack_uint64(&e->pk, a[k]);
	}
}

static void pack_record(struct enc *e, const struct table *t, const void *base);

/* An F_ARR or F_U64S: the array at @p, its count at @base + f->aux. */
static void pack_array(struct enc *e, const struct field *f, const void *base, const char *p)
{
	uint32_t n = *(const uint32_t *)((const char *)base + f->aux);
	const char *a = *(const char *const *)p;

	assert(a != NULL || n == 0);
	msgpack_pack_array(&e->pk, n);
	for (uint32_t i = 0; i < n && e->err == 0; i++) {
		if (f->type == F_U64S)
			msgpack_pack_uint64(&e->pk, ((const uint64_t *)a)[i]);
		else if (f->type == F_STRS)
			pack_str(e, ((char *const *)a)[i]);
		else
			pack_record(e, f->sub, a + (size_t)i * f->sub->size);
	}
}

static void pack_field(struct enc *e, const struct field *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	uint32_t ref;

	switch (f->type) {
	case F_U64: msgpack_pack_uint64(&e->pk, *(const uint64_t *)p); break;
	case F_U32: msgpack_pack_uint32(&e->pk, *(const uint32_t *)p); break;
	case F_I32: msgpack_pack_int32(&e->pk, *(const int32_t *)p); break;
	case F_U8: msgpack_pack_uint8(&e->pk, *(const uint8_t *)p); break;
	case F_I64: msgpack_pack_int64(&e->pk, *(const int64_t *)p); break;
	case F_F64:
	case F_SUM: msgpack_pack_double(&e->pk, *(const double *)p); break;
	case F_STR: pack_str(e, *(char *const *)p); break;
	case F_REF:
		ref = *(const uint32_t *)p;
		if (ref == RP_NONE)
			msgpack_pack_nil(&e->pk);
		else
			msgpack_pack_uint32(&e->pk, ref);
		break;
	case F_ANOM: pack_anomalies(e, (const uint64_t *)p); break;
	case F_REC: pack_record(e, f->sub, p); break;
	case F_ARR:
	case F_U64S:
	case F_STRS: pack_array(e, f, base, p); break;
	case F_SKETCH:
		if (((const struct rp_report_sketch *)p)->alpha == 0)
			msgpack_pack_nil(&e->pk); /* no sketch */
		else
			pack_record(e, f->sub, p);
		break;
	case F_VER:
		msgpack_pack_array(&e->pk, 2);
		msgpack_pack_uint32(&e->pk, RP_REPORT_VERSION_MAJOR);
		msgpack_pack_uint32(&e->pk, RP_REPORT_VERSION_MINOR);
		break;
	}
}

static void pack_record(struct enc *e, const struct table *t, const void *base)
{
	msgpack_pack_map(&e->pk, t->n);
	for (uint32_t i = 0; i < t->n; i++) {
		pack_key(e, t->f[i].key, t->f[i].keylen);
		pack_field(e, &t->f[i], base);
	}
}

int rp_snapshot_encode(const struct rp_report *r, rp_sink_fn sink, void *ctx)
{
	struct enc *e;
	int err;

	assert(r != NULL && sink != NULL);
	/* ~16 KiB: off the stack, which may be a small thread's. */
	e = malloc(sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->sink = sink;
	e->ctx = ctx;
	e->err = 0;
	e->n = 0;
	msgpack_packer_init(&e->pk, e, enc_write);
	pack_record(e, &top_table, r);
	enc_flush(e);
	err = e->err;
	free(e);
	return err;
}

/* --- errors: where a value sits ------------------------------------------------- */

/* A chain from a value up to the root, for messages; nothing is built unless a
 * message is. A link prints as ".key", "[index]" or, zeroed, nothing. */
struct where {
	const struct where *up;
	const char *key; /* not NUL-terminated; may come from the input */
	uint32_t keylen;
	uint32_t index;
	bool has_index;
};

static const struct where root_where;

static void put(char *why, size_t *pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *why, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= RP_WHY_MAX - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(why + *pos, RP_WHY_MAX - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n < RP_WHY_MAX - 1 - *pos ? (size_t)n : RP_WHY_MAX - 1 - *pos;
}

/* Input keys are quoted safely: printable ASCII, at most KEY_SHOWN bytes. */
static void put_key(char *why, size_t *pos, const char *k, uint32_t len)
{
	put(why, pos, "%s", *pos ? "." : "");
	for (uint32_t i = 0; i < len && i < KEY_SHOWN; i++)
		put(why, pos, "%c", k[i] >= 0x20 && k[i] < 0x7f ? k[i] : '?');
	if (len > KEY_SHOWN)
		put(why, pos, "...");
}

static void put_where(char *why, size_t *pos, const struct where *w)
{
	if (w == NULL)
		return;
	put_where(why, pos, w->up);
	if (w->key != NULL)
		put_key(why, pos, w->key, w->keylen);
	else if (w->has_index)
		put(why, pos, "[%" PRIu32 "]", w->index);
}

/* Sets @why to "<path>: <message>" and returns @err. */
static int fail(char *why, const struct where *w, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, const struct where *w, int err, const char *fmt, ...)
{
	size_t pos = 0;
	va_list ap;

	why[0] = '\0';
	put_where(why, &pos, w);
	put(why, &pos, "%s: ", pos ? "" : "snapshot");
	va_start(ap, fmt);
	vsnprintf(why + pos, RP_WHY_MAX - pos, fmt, ap);
	va_end(ap);
	return err;
}

static struct where at_key(const struct where *up, const char *key)
{
	return (struct where){ .up = up, .key = key, .keylen = (uint32_t)strlen(key) };
}

static struct where at_index(const struct where *up, uint32_t i)
{
	return (struct where){ .up = up, .index = i, .has_index = true };
}

/* --- decoding, pass 1: the raw bytes -------------------------------------------- */

enum { ITEM_SCALAR, ITEM_STR, ITEM_ARRAY, ITEM_MAP };

struct item {
	uint8_t kind;
	size_t head;	/* bytes of the header */
	uint64_t skip;	/* bytes after it (scalars, strings, bin, ext) */
	uint32_t count; /* entries of an array or map */
};

/* Type bytes 0xc4..0xdf: a big-endian length of len_bytes follows, then, for
 * everything but containers, that length plus `fixed` bytes (ext's type byte,
 * the fixed-size numbers). 0xc1 is never used. */
static const struct {
	uint8_t kind, len_bytes, fixed;
} heads[0xe0 - 0xc4] = {
	[0x00] = { ITEM_SCALAR, 1, 0 },	 [0x01] = { ITEM_SCALAR, 2, 0 }, /* bin 8, 16 */
	[0x02] = { ITEM_SCALAR, 4, 0 },					 /* bin 32 */
	[0x03] = { ITEM_SCALAR, 1, 1 },	 [0x04] = { ITEM_SCALAR, 2, 1 }, /* ext 8, 16 */
	[0x05] = { ITEM_SCALAR, 4, 1 },					 /* ext 32 */
	[0x06] = { ITEM_SCALAR, 0, 4 },	 [0x07] = { ITEM_SCALAR, 0, 8 }, /* float 32, 64 */
	[0x08] = { ITEM_SCALAR, 0, 1 },	 [0x09] = { ITEM_SCALAR, 0, 2 }, /* uint 8, 16 */
	[0x0a] = { ITEM_SCALAR, 0, 4 },	 [0x0b] = { ITEM_SCALAR, 0, 8 }, /* uint 32, 64 */
	[0x0c] = { ITEM_SCALAR, 0, 1 },	 [0x0d] = { ITEM_SCALAR, 0, 2 }, /* int 8, 16 */
	[0x0e] = { ITEM_SCALAR, 0, 4 },	 [0x0f] = { ITEM_SCALAR, 0, 8 }, /* int 32, 64 */
	[0x10] = { ITEM_SCALAR, 0, 2 },	 [0x11] = { ITEM_SCALAR, 0, 3 }, /* fixext 1, 2 */
	[0x12] = { ITEM_SCALAR, 0, 5 },	 [0x13] = { ITEM_SCALAR, 0, 9 }, /* fixext 4, 8 */
	[0x14] = { ITEM_SCALAR, 0, 17 },				 /* fixext 16 */
	[0x15] = { ITEM_STR, 1, 0 },	 [0x16] = { ITEM_STR, 2, 0 },	 /* str 8, 16 */
	[0x17] = { ITEM_STR, 4, 0 },					 /* str 32 */
	[0x18] = { ITEM_ARRAY, 2, 0 },	 [0x19] = { ITEM_ARRAY, 4, 0 },	 /* array 16, 32 */
	[0x1a] = { ITEM_MAP, 2, 0 },	 [0x1b] = { ITEM_MAP, 4, 0 },	 /* map 16, 32 */
};

/* Reads the header at @p (@left > 0 bytes): 0, 1 if it is cut short, -1 if @p[0]
 * is 0xc1. */
static int item_head(const unsigned char *p, size_t left, struct item *it)
{
	unsigned b = p[0];
	uint32_t v = 0;

	*it = (struct item){ .kind = ITEM_SCALAR, .head = 1 };
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 0;
	if (b <= 0x9f) {
		it->kind = b <= 0x8f ? ITEM_MAP : ITEM_ARRAY;
		it->count = b & 0x0f;
		return 0;
	}
	if (b <= 0xbf) {
		it->kind = ITEM_STR;
		it->skip = b & 0x1f;
		return 0;
	}
	if (b == 0xc1)
		return -1;
	it->kind = heads[b - 0xc4].kind;
	it->head = 1u + heads[b - 0xc4].len_bytes;
	if (it->head > left)
		return 1;
	for (size_t i = 1; i < it->head; i++)
		v = v << 8 | p[i];
	if (it->kind == ITEM_ARRAY || it->kind == ITEM_MAP)
		it->count = v;
	else
		it->skip = (uint64_t)v + heads[b - 0xc4].fixed;
	return 0;
}

/* An open container while scanning, and where its next element is. */
struct level {
	uint64_t n, i; /* elements (a map has two per entry), elements done */
	bool map;
	const char *key; /* the last map key read, if it was a string */
	uint32_t keylen;
	struct where w;
};

static void level_where(struct level *l)
{
	const struct where *up = l->w.up;

	if (!l->map)
		l->w = at_index(up, (uint32_t)l->i);
	else if (l->i % 2 == 0)
		l->w = (struct where){ .up = up }; /* a key: the map's own path */
	else
		l->w = (struct where){ .up = up,
				       .key = l->key ? l->key : "?",
				       .keylen = l->key ? l->keylen : 1 };
}

/* One value is done: move on, closing the containers it completes. */
static void level_done(struct level *st, uint32_t *d)
{
	st[*d].i++;
	while (*d > 0 && st[*d].i == st[*d].n) {
		(*d)--;
		st[*d].i++;
	}
}

static int scan_container(struct level *st, uint32_t *d, const struct item *it, size_t need,
			  size_t left, char *why)
{
	uint64_t n = it->kind == ITEM_MAP ? 2ull * it->count : it->count;
	const char *what = it->kind == ITEM_MAP ? "a map" : "an array";
	struct level *l;

	if (*d == DEPTH_MAX)
		return fail(why, &st[*d].w, -EINVAL, "nested deeper than %u containers", DEPTH_MAX);
	if (n > left || need > left - n)
		return fail(why, &st[*d].w, -EINVAL,
			    "%s of %" PRIu32 " entries cannot fit in the %zu bytes left", what,
			    it->count, left);
	if (n == 0)
		return 1;
	l = &st[++*d];
	*l = (struct level){ .n = n, .map = it->kind == ITEM_MAP };
	l->w.up = &st[*d - 1].w;
	return 0;
}

/*
 * Pass 1: @len bytes must hold exactly one complete MessagePack value, nested at
 * most DEPTH_MAX deep, in which no container claims more elements than bytes are
 * left; so msgpack-c, run next, allocates O(@len) and cannot fail for lack of
 * input. `need` counts the values announced but not yet started.
 */
static int scan(const unsigned char *p, size_t len, char *why)
{
	struct level st[DEPTH_MAX + 1] = { { .n = 1 } }; /* st[0]: the input, one value */
	uint32_t d = 0;
	size_t off = 0, need = 1;
	struct item it;
	int rc;

	while (need > 0) {
		struct level *l = &st[d];

		if (d > 0) /* st[0], the input itself, has no path */
			level_where(l);
		if (l->map && l->i % 2 == 0)
			l->key = NULL;
		if (off == len)
			return fail(why, &l->w, -EINVAL, "truncated: the input ends at byte %zu",
				    len);
		rc = item_head(p + off, len - off, &it);
		if (rc < 0)
			return fail(why, &l->w, -EINVAL,
				    "byte 0x%02x at offset %zu is not MessagePack", p[off], off);
		if (rc > 0 || it.skip > len - off - it.head)
			return fail(why, &l->w, -EINVAL, "truncated: the input ends at byte %zu",
				    len);
		need--;
		off += it.head;
		if (it.kind == ITEM_ARRAY || it.kind == ITEM_MAP) {
			rc = scan_container(st, &d, &it, need, len - off, why);
			if (rc < 0)
				return rc;
			need += it.kind == ITEM_MAP ? 2ull * it.count : it.count;
			if (rc == 0)
				continue;
		} else if (l->map && l->i % 2 == 0 && it.kind == ITEM_STR) {
			l->key = (const char *)p + off;
			l->keylen = (uint32_t)it.skip;
		}
		off += it.skip;
		level_done(st, &d);
	}
	if (off != len)
		return fail(why, &root_where, -EINVAL, "%zu bytes after the end of the snapshot",
			    len - off);
	return 0;
}

/* --- decoding, pass 2: the object tree into the report -------------------------- */

static const char *type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return "an unsigned integer";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "a negative integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "a float";
	case MSGPACK_OBJECT_STR: return "a string";
	case MSGPACK_OBJECT_ARRAY: return "an array";
	case MSGPACK_OBJECT_MAP: return "a map";
	case MSGPACK_OBJECT_BIN: return "binary";
	default: return "an ext value";
	}
}

static bool key_is(const msgpack_object *k, const char *s, size_t len)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
	       memcmp(k->via.str.ptr, s, len) == 0;
}

static int get_u64(const msgpack_object *o, const struct where *w, char *why, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "expected an unsigned integer, got %s", type_name(o));
	*v = o->via.u64;
	return 0;
}

static int get_u32(const msgpack_object *o, const struct where *w, char *why, uint32_t *v)
{
	uint64_t u = 0;
	int err = get_u64(o, w, why, &u);

	if (err)
		return err;
	if (u > UINT32_MAX)
		return fail(why, w, -EINVAL, "%" PRIu64 " is out of range (max %" PRIu32 ")", u,
			    UINT32_MAX);
	*v = (uint32_t)u;
	return 0;
}

static int get_u8(const msgpack_object *o, const struct where *w, char *why, uint8_t *v)
{
	uint32_t u = 0;
	int err = get_u32(o, w, why, &u);

	if (err)
		return err;
	if (u > UINT8_MAX)
		return fail(why, w, -EINVAL, "%" PRIu32 " is out of range (max %u)", u, UINT8_MAX);
	*v = (uint8_t)u;
	return 0;
}

static int get_i32(const msgpack_object *o, const struct where *w, char *why, int32_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX)
		*v = (int32_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN)
		*v = (int32_t)o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
		 o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return fail(why, w, -EINVAL, "out of the range of a 32-bit signed integer");
	else
		return fail(why, w, -EINVAL, "expected an integer, got %s", type_name(o));
	return 0;
}

/* An index, or nil / -1 for RP_NONE; RP_NONE itself is not a valid index. */
static int get_ref(const msgpack_object *o, const struct where *w, char *why, uint32_t *v)
{
	if (o->type == MSGPACK_OBJECT_NIL ||
	    (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == -1)) {
		*v = RP_NONE;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "expected an index or nil, got %s", type_name(o));
	if (o->via.u64 >= RP_NONE)
		return fail(why, w, -EINVAL, "index %" PRIu64 " is out of range", o->via.u64);
	*v = (uint32_t)o->via.u64;
	return 0;
}

static int get_str(const msgpack_object *o, const struct where *w, char *why, char **v)
{
	size_t n;
	char *s;

	if (o->type != MSGPACK_OBJECT_STR)
		return fail(why, w, -EINVAL, "expected a string, got %s", type_name(o));
	n = cut_len(o->via.str.ptr, o->via.str.size);
	if (n > 0 && memchr(o->via.str.ptr, '\0', n) != NULL)
		return fail(why, w, -EINVAL, "string contains a NUL byte");
	s = malloc(n + 1);
	if (s == NULL)
		return fail(why, w, -ENOMEM, "out of memory for a string of %zu bytes", n);
	if (n > 0)
		memcpy(s, o->via.str.ptr, n);
	s[n] = '\0';
	*v = s;
	return 0;
}

/* Known kinds by name; names this reader does not know are skipped. */
static int get_anomalies(const msgpack_object *o, const struct where *w, char *why, uint64_t *a)
{
	uint32_t seen = 0;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, w, -EINVAL, "expected a map, got %s", type_name(o));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];

		for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++) {
			const char *name = rp_anomaly_names[k];
			struct where in;
			int err;

			if (!key_is(&kv->key, name, strlen(name)))
				continue;
			in = at_key(w, name);
			if (seen & (1u << k))
				return fail(why, &in, -EINVAL, "duplicate key");
			seen |= 1u << k;
			err = get_u64(&kv->val, &in, why, &a[k]);
			if (err)
				return err;
			break;
		}
	}
	return 0;
}

static int get_i64(const msgpack_object *o, const struct where *w, char *why, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*v = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*v = o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return fail(why, w, -EINVAL, "out of the range of a 64-bit signed integer");
	else
		return fail(why, w, -EINVAL, "expected an integer, got %s", type_name(o));
	return 0;
}

/* A float of either width, or an integer (writers in other languages may write 0
 * for 0.0); NaN and infinities are refused: every double of the schema is finite. */
static int get_f64(const msgpack_object *o, const struct where *w, char *why, double *v,
		   bool inf_ok)
{
	switch (o->type) {
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: *v = o->via.f64; break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *v = (double)o->via.u64; break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *v = (double)o->via.i64; break;
	default: return fail(why, w, -EINVAL, "expected a float, got %s", type_name(o));
	}
	if (isnan(*v) || (!inf_ok && isinf(*v)))
		return fail(why, w, -EINVAL, "%g is not a finite number", *v);
	return 0;
}

static int decode_record(const msgpack_object *o, const struct table *t, void *base,
			 const struct where *w, char *why);

/* An F_ARR or F_U64S into @p (the pointer) and @base + f->aux (the count). */
static int decode_array(const msgpack_object *o, const struct field *f, void *base, char *p,
			const struct where *w, char *why)
{
	size_t size = f->type == F_U64S	  ? sizeof(uint64_t)
		      : f->type == F_STRS ? sizeof(char *)
					  : f->sub->size;
	uint32_t n;
	char *a;

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return fail(why, w, -EINVAL, "expected an array, got %s", type_name(o));
	n = o->via.array.size;
	if (n == 0)
		return 0;
	/* n <= the input's length (scan), so this is O(input). */
	a = calloc(n, size);
	if (a == NULL)
		return fail(why, w, -ENOMEM, "out of memory for %" PRIu32 " elements", n);
	/* Attached first: the report frees it (and what its records hold) from now on. */
	*(char **)p = a;
	*(uint32_t *)((char *)base + f->aux) = n;
	for (uint32_t i = 0; i < n; i++) {
		struct where item = at_index(w, i);
		const msgpack_object *e = &o->via.array.ptr[i];
		int err = f->type == F_U64S ? get_u64(e, &item, why, (uint64_t *)a + i)
			  : f->type == F_STRS
				  ? get_str(e, &item, why, (char **)a + i)
				  : decode_record(e, f->sub, a + (size_t)i * size, &item, why);

		if (err)
			return err;
	}
	return 0;
}

static int decode_field(const struct field *f, const msgpack_object *o, void *base,
			const struct where *w, char *why)
{
	char *p = (char *)base + f->off;

	switch (f->type) {
	case F_U64: return get_u64(o, w, why, (uint64_t *)p);
	case F_U32: return get_u32(o, w, why, (uint32_t *)p);
	case F_I32: return get_i32(o, w, why, (int32_t *)p);
	case F_I64: return get_i64(o, w, why, (int64_t *)p);
	case F_F64: return get_f64(o, w, why, (double *)p, false);
	case F_SUM: return get_f64(o, w, why, (double *)p, true);
	case F_STR: return get_str(o, w, why, (char **)p);
	case F_REF: return get_ref(o, w, why, (uint32_t *)p);
	case F_ANOM: return get_anomalies(o, w, why, (uint64_t *)p);
	case F_REC: return decode_record(o, f->sub, p, w, why);
	case F_U8: return get_u8(o, w, why, (uint8_t *)p);
	case F_ARR:
	case F_U64S:
	case F_STRS: return decode_array(o, f, base, p, w, why);
	case F_SKETCH:
		if (o->type == MSGPACK_OBJECT_NIL)
			return 0; /* no sketch: alpha 0, all zero */
		return decode_record(o, f->sub, p, w, why);
	default: return 0; /* F_VER: read first, by check_version */
	}
}

/* The field @k names, trying @hint (the one after the last) first: writers that
 * follow the table order cost one comparison per key. -1 for a key not known. */
static int find_field(const struct table *t, const msgpack_object *k, uint32_t hint)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return -1;
	if (hint < t->n && key_is(k, t->f[hint].key, t->f[hint].keylen))
		return (int)hint;
	for (uint32_t i = 0; i < t->n; i++)
		if (key_is(k, t->f[i].key, t->f[i].keylen))
			return (int)i;
	return -1;
}

/* Fields the map did not have: required ones are an error; strings become "" and
 * nested records get their own defaults, so a decoded report has no NULL string. */
static int finish_record(const struct table *t, void *base, uint32_t seen, const struct where *w,
			 char *why)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct field *f = &t->f[i];
		char **s = (char **)((char *)base + f->off);
		int err;

		if (seen & (1u << i))
			continue;
		if (f->required)
			return fail(why, w, -EINVAL, "missing key \"%s\"", f->key);
		if (f->type == F_STR && (*s = strdup("")) == NULL)
			return fail(why, w, -ENOMEM, "out of memory");
		if (f->type == F_REC) {
			err = finish_record(f->sub, (char *)base + f->off, 0, w, why);
			if (err)
				return err;
		}
	}
	return 0;
}

static int decode_record(const msgpack_object *o, const struct table *t, void *base,
			 const struct where *w, char *why)
{
	uint32_t seen = 0, hint = 0;
	int err;

	assert(t->n <= 32);
	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, w, -EINVAL, "expected a map, got %s", type_name(o));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		int k = find_field(t, &kv->key, hint);
		struct where in;

		if (k < 0)
			continue; /* not ours: a later minor version's */
		in = at_key(w, t->f[k].key);
		if (seen & (1u << k))
			return fail(why, &in, -EINVAL, "duplicate key");
		seen |= 1u << k;
		hint = (uint32_t)k + 1;
		err = decode_field(&t->f[k], &kv->val, base, &in, why);
		if (err)
			return err;
	}
	err = finish_record(t, base, seen, w, why);
	if (!err && t->check != NULL)
		err = t->check(base, w, why);
	return err;
}

/* Before anything else: another major version may mean anything by the rest. */
static int check_version(const msgpack_object *o, struct rp_report *r, char *why)
{
	const msgpack_object *v = NULL;
	struct where w = at_key(&root_where, "version");
	int err;

	for (uint32_t i = 0; i < o->via.map.size && v == NULL; i++)
		if (key_is(&o->via.map.ptr[i].key, "version", 7))
			v = &o->via.map.ptr[i].val;
	if (v == NULL)
		return fail(why, &root_where, -EINVAL, "no \"version\" key");
	if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size < 2)
		return fail(why, &w, -EINVAL, "expected [major, minor], got %s", type_name(v));
	err = get_u32(&v->via.array.ptr[0], &w, why, &r->version_major);
	if (!err)
		err = get_u32(&v->via.array.ptr[1], &w, why, &r->version_minor);
	if (err)
		return err;
	if (r->version_major != RP_REPORT_VERSION_MAJOR) {
		snprintf(why, RP_WHY_MAX,
			 "snapshot schema version %" PRIu32 ".%" PRIu32 "; this reader reads %u.x",
			 r->version_major, r->version_minor, RP_REPORT_VERSION_MAJOR);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

/* An index into @n things (@what: "function", "source"), or nil where @nil_ok. */
static int check_index(uint32_t v, uint32_t n, const char *what, bool nil_ok, const struct where *w,
		       char *why)
{
	if (v == RP_NONE && !nil_ok)
		return fail(why, w, -EINVAL, "nil where a %s index is needed", what);
	if (v != RP_NONE && v >= n)
		return fail(why, w, -EINVAL, "%" PRIu32 " is not a %s index (%" PRIu32 " %ss)", v,
			    what, n, what);
	return 0;
}

/* A function index: < n_fns, or nil where @nil_ok. */
static int check_fn(uint32_t v, const struct rp_report *r, bool nil_ok, const struct where *w,
		    char *why)
{
	return check_index(v, r->n_fns, "function", nil_ok, w, why);
}

/* Every F_REF with a target (edges, windows, bottlenecks) in the record at @base and
 * below it, once the whole report is read: the sections may come in any order. */
static int check_refs(const struct table *t, const void *base, const struct rp_report *r,
		      const struct where *w, char *why)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const struct field *f = &t->f[i];
		const char *p = (const char *)base + f->off;
		struct where in = at_key(w, f->key);
		int err = 0;

		if (f->type == F_REF && f->ref == REF_SRC_OR_NIL)
			err = check_index(*(const uint32_t *)p, r->n_sources, "source", true, &in,
					  why);
		else if (f->type == F_REF && f->ref == REF_SRC)
			err = check_index(*(const uint32_t *)p, r->n_sources, "source", false, &in,
					  why);
		else if (f->type == F_REF && f->ref == REF_RTRACK)
			err = check_index(*(const uint32_t *)p, r->recorder.n_tracks, "track",
					  false, &in, why);
		else if (f->type == F_REF && f->ref == REF_RNAME)
			err = check_index(*(const uint32_t *)p, r->recorder.n_names, "name", false,
					  &in, why);
		else if (f->type == F_REF && f->ref == REF_PHASE_OR_NIL)
			err = check_index(*(const uint32_t *)p,
					  r->device.n_phases_total < RP_NONE
						  ? (uint32_t)r->device.n_phases_total
						  : RP_NONE,
					  "phase", true, &in, why);
		else if (f->type == F_REF && f->ref != REF_NONE)
			err = check_fn(*(const uint32_t *)p, r, f->ref == REF_FN_OR_NIL, &in, why);
		else if (f->type == F_REC)
			err = check_refs(f->sub, p, r, &in, why);
		else if (f->type == F_ARR) {
			uint32_t n = *(const uint32_t *)((const char *)base + f->aux);
			const char *a = *(const char *const *)p;

			for (uint32_t j = 0; j < n && !err; j++) {
				struct where item = at_index(&in, j);

				err = check_refs(f->sub, a + (size_t)j * f->sub->size, r, &item,
						 why);
			}
		}
		if (err)
			return err;
	}
	return 0;
}

/* Sum of a run, or false if it overflows. */
static bool run_sum(const uint64_t *run, uint32_t n, uint64_t *sum)
{
	for (uint32_t i = 0; i < n; i++)
		if (__builtin_add_overflow(*sum, run[i], sum))
			return false;
	return true;
}

/* A run of @n buckets from @lo within the sketch's index range. */
static int check_run(const struct rp_sketch *s, int32_t lo, uint32_t n, const char *key,
		     const struct where *w, char *why)
{
	struct where in = at_key(w, key);
	int64_t hi = (int64_t)lo + n - 1;

	if (n > 0 && (lo < s->index_min || hi > s->index_max))
		return fail(why, &in, -EINVAL,
			    "buckets %" PRId32 "..%" PRId64 " are outside the index range %" PRId32
			    "..%" PRId32 " of alpha %g",
			    lo, hi, s->index_min, s->index_max, s->alpha);
	return 0;
}

/* A sketch is valid when it rebuilds: alpha in the sketch's range, the runs within
 * its index range, count = zero + the buckets, and what rp_sketch_set_summary()
 * checks (min <= max, the collapsed counts). alpha 0 is "no sketch": all zero. */
static int check_sketch(void *base, const struct where *w, char *why)
{
	const struct rp_report_sketch *k = base;
	struct where alpha = at_key(w, "alpha"), count = at_key(w, "count");
	uint64_t sum = k->zero;
	struct rp_sketch s;
	int err;

	if (k->alpha == 0) {
		if (k->count || k->zero || k->dropped || k->collapsed_neg || k->collapsed_pos ||
		    k->n_pos || k->n_neg || k->min != 0 || k->max != 0 || k->sum != 0 ||
		    k->pos_lo || k->neg_lo)
			return fail(why, &alpha, -EINVAL,
				    "0 (no sketch), but the sketch holds data");
		return 0;
	}
	if (!(k->alpha >= RP_SKETCH_ALPHA_MIN && k->alpha <= RP_SKETCH_ALPHA_MAX))
		return fail(why, &alpha, -EINVAL, "%g is not in [%g, %g]", k->alpha,
			    RP_SKETCH_ALPHA_MIN, RP_SKETCH_ALPHA_MAX);
	if (rp_sketch_init(&s, k->alpha) != 0)
		return fail(why, &alpha, -EINVAL, "%g: no sketch of this accuracy", k->alpha);
	err = check_run(&s, k->neg_lo, k->n_neg, "neg", w, why);
	if (!err)
		err = check_run(&s, k->pos_lo, k->n_pos, "pos", w, why);
	if (!err && (!run_sum(k->neg, k->n_neg, &sum) || !run_sum(k->pos, k->n_pos, &sum)))
		err = fail(why, &count, -EINVAL, "the buckets hold more than 2^64 - 1 values");
	if (!err && sum != k->count)
		err = fail(why, &count, -EINVAL,
			   "%" PRIu64 ", but zero and the buckets hold %" PRIu64, k->count, sum);
	if (!err && (err = rp_report_sketch_to(k, &s)) != 0)
		err = err == -ENOMEM ? fail(why, w, err, "out of memory rebuilding the sketch")
				     : fail(why, w, -EINVAL,
					    "min, max, sum or the collapsed counts do not fit "
					    "the buckets");
	rp_sketch_fini(&s);
	return err;
}

/* @n kept of @total: a list cut at a cap never holds more than there were. */
static int check_kept(uint64_t n, uint64_t total, const char *key, const char *total_key,
		      const struct where *w, char *why)
{
	struct where in = at_key(w, key);

	if (n > total)
		return fail(why, &in, -EINVAL, "%" PRIu64 " entries, but %s is %" PRIu64, n,
			    total_key, total);
	return 0;
}

static int check_step(void *base, const struct where *w, char *why)
{
	const struct rp_report_step_phase *p = base;
	struct where in = at_key(w, "min_ns");

	if (p->min_ns > p->max_ns)
		return fail(why, &in, -EINVAL, "%" PRIu64 " is above max_ns %" PRIu64, p->min_ns,
			    p->max_ns);
	return 0;
}

static int check_rtrack(void *base, const struct where *w, char *why)
{
	const struct rp_report_rtrack *t = base;
	struct where in = at_key(w, "kind");

	if (t->kind != 1 && t->kind != 2)
		return fail(why, &in, -EINVAL, "%u is not a track kind (1 thread, 2 async)",
			    t->kind);
	return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* The rings hold at most their caps, and every span seen was kept, listed or not,
 * or overwritten (wrapped): kept + unlisted + wrapped <= seen (= after one engine).
 * The sum saturates at 2^64 - 1, as the counts do when merged. */
static int check_recorder(void *base, const struct where *w, char *why)
{
	const struct rp_report_recorder *c = base;
	uint64_t a = sat_add(sat_add(c->n_spans, c->unlisted), c->wrapped);
	uint64_t b = sat_add(c->n_samples, c->samples_wrapped);
	struct where seen = at_key(w, "spans_seen"), sseen = at_key(w, "samples_seen");
	int err;

	err = check_kept(c->n_spans, c->max_spans, "spans", "max_spans", w, why);
	if (!err)
		err = check_kept(c->n_samples, c->max_samples, "samples", "max_samples", w, why);
	if (err)
		return err;
	if (a > c->spans_seen)
		return fail(why, &seen, -EINVAL,
			    "%" PRIu64 ", but %" PRIu32 " spans listed, %" PRIu64
			    " unlisted and %" PRIu64 " wrapped",
			    c->spans_seen, c->n_spans, c->unlisted, c->wrapped);
	if (b > c->samples_seen)
		return fail(why, &sseen, -EINVAL,
			    "%" PRIu64 ", but %" PRIu32 " samples listed and %" PRIu64 " wrapped",
			    c->samples_seen, c->n_samples, c->samples_wrapped);
	return 0;
}

static int check_interval(void *base, const struct where *w, char *why)
{
	const struct rp_report_dev_interval *v = base;
	struct where in = at_key(w, "end_ns");

	if (v->end_ns < v->start_ns)
		return fail(why, &in, -EINVAL, "%" PRIu64 " is before start_ns %" PRIu64, v->end_ns,
			    v->start_ns);
	return 0;
}

static int check_device(void *base, const struct where *w, char *why)
{
	const struct rp_report_device *d = base;
	int err;

	err = check_kept(d->n_points, d->n_points_total, "points", "points_total", w, why);
	if (!err)
		err = check_kept(d->n_idle, d->n_idle_total, "idle", "idle_total", w, why);
	if (!err)
		err = check_kept(d->n_phases, d->n_phases_total, "phases", "phases_total", w, why);
	if (!err)
		err = check_kept(d->n_ranked, d->candidates, "ranked", "candidates", w, why);
	return err;
}

/* Node 0 is the root (nil parent; nil function, or any valid one); every other
 * node's parent comes before it, so walks from the root meet parents first and
 * no chain of parents can loop. */
static int check_cct(const struct rp_report *r, char *why)
{
	struct where sec = at_key(&root_where, "cct");

	for (uint32_t i = 0; i < r->n_nodes; i++) {
		const struct rp_report_node *n = &r->nodes[i];
		struct where item = at_index(&sec, i);
		struct where parent = at_key(&item, "parent"), fn = at_key(&item, "fn");

		if (i == 0 && n->parent != RP_NONE)
			return fail(why, &parent, -EINVAL,
				    "the root (node 0) must have a nil parent");
		if (i > 0 && n->parent == RP_NONE)
			return fail(why, &parent, -EINVAL, "nil, but only node 0 is a root");
		if (i > 0 && n->parent >= i)
			return fail(why, &parent, -EINVAL,
				    "%" PRIu32 " does not come before node %" PRIu32
				    " (parents come first)",
				    n->parent, i);
		if (check_fn(n->fn, r, i == 0, &fn, why) != 0)
			return -EINVAL;
	}
	return 0;
}

static int decode_root(const msgpack_object *o, struct rp_report *r, char *why)
{
	int err;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(why, &root_where, -EINVAL, "expected a map at the top, got %s",
			    type_name(o));
	err = check_version(o, r, why);
	if (!err)
		err = decode_record(o, &top_table, r, &root_where, why);
	if (!err)
		err = check_refs(&top_table, r, r, &root_where, why);
	if (!err)
		err = check_cct(r, why);
	return err;
}

int rp_snapshot_decode(const void *buf, size_t len, struct rp_report *out, char why[RP_WHY_MAX])
{
	msgpack_unpacked u;
	msgpack_unpack_return rc;
	size_t off = 0;
	int err;

	assert(out != NULL && why != NULL && (buf != NULL || len == 0));
	memset(out, 0, sizeof(*out));
	why[0] = '\0';
	if (len == 0)
		return fail(why, &root_where, -EINVAL, "empty input");
	err = scan(buf, len, why);
	if (err)
		return err;
	msgpack_unpacked_init(&u);
	rc = msgpack_unpack_next(&u, buf, len, &off);
	if (rc == MSGPACK_UNPACK_SUCCESS && off == len)
		err = decode_root(&u.data, out, why);
	else if (rc == MSGPACK_UNPACK_NOMEM_ERROR)
		err = fail(why, &root_where, -ENOMEM, "out of memory unpacking %zu bytes", len);
	else /* scan() accepted it: msgpack-c and scan() disagree */
		err = fail(why, &root_where, -EINVAL, "msgpack-c refused the input (%d)", (int)rc);
	msgpack_unpacked_destroy(&u);
	return err;
}

/* --- memory sink ---------------------------------------------------------------- */

int rp_membuf_sink(void *ctx, const void *buf, size_t len)
{
	struct rp_membuf *m = ctx;

	if (len == 0)
		return 0;
	if (len > m->cap - m->len) {
		size_t cap = m->cap ? m->cap : MEMBUF_MIN;
		char *p;

		while (len > cap - m->len) {
			if (cap > SIZE_MAX / 2)
				return -ENOMEM;
			cap *= 2;
		}
		p = realloc(m->data, cap);
		if (p == NULL)
			return -ENOMEM;
		m->data = p;
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

void rp_membuf_free(struct rp_membuf *m)
{
	if (m == NULL)
		return;
	free(m->data);
	*m = (struct rp_membuf){ 0 };
}

/* --- files ---------------------------------------------------------------------- */

/* "<what> <path>: <strerror>"; a long path is cut with the rest (one line). */
static int sys_fail(char *why, int err, const char *what, const char *path)
{
	size_t pos = 0;

	put(why, &pos, "%s %s: %s", what, path, strerror(-err));
	return err;
}

/* A sink writing to the file descriptor *ctx. */
static int fd_sink(void *ctx, const void *buf, size_t len)
{
	const int *fd = ctx;
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(*fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The name has our pid, so an existing file was left by a dead process that had
 * it: replace it. O_EXCL keeps a planted symlink from redirecting the write. */
static int open_temp(const char *tmp)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);

	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	return fd < 0 ? -errno : fd;
}

/* Writes @r to the new file @tmp and makes it durable; removes it on failure. */
static int write_temp(const char *tmp, const struct rp_report *r, char *why)
{
	const char *what;
	int fd = open_temp(tmp), err;

	if (fd < 0)
		return sys_fail(why, fd, "cannot create", tmp);
	err = rp_snapshot_encode(r, fd_sink, &fd);
	if (err) {
		what = "cannot write";
		goto err_close;
	}
	if (fsync(fd) != 0) {
		err = -errno;
		what = "cannot fsync";
		goto err_close;
	}
	if (close(fd) != 0) {
		err = -errno;
		what = "cannot close";
		goto err_unlink;
	}
	return 0;
err_close:
	close(fd);
err_unlink:
	unlink(tmp);
	return sys_fail(why, err, what, tmp);
}

/* Makes the rename of @path durable. EINVAL: a file system that cannot sync a
 * directory, where there is nothing more to do. */
static int sync_dir(const char *path, char *why)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX] = ".";
	int fd, err = 0;

	if (slash == path)
		strcpy(dir, "/");
	else if (slash != NULL)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sys_fail(why, -errno, "cannot open directory", dir);
	if (fsync(fd) != 0 && errno != EINVAL)
		err = sys_fail(why, -errno, "cannot fsync directory", dir);
	close(fd);
	return err;
}

int rp_snapshot_write_file(const char *path, const struct rp_report *r, char why[RP_WHY_MAX])
{
	char tmp[PATH_MAX];
	int n, err;

	assert(path != NULL && r != NULL && why != NULL);
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return sys_fail(why, -ENAMETOOLONG, "cannot write", path);
	err = write_temp(tmp, r, why);
	if (err)
		return err;
	if (rename(tmp, path) != 0) {
		err = sys_fail(why, -errno, "cannot rename to", path);
		unlink(tmp);
		return err;
	}
	return sync_dir(path, why);
}

/* Reads all of @fd (a file, or a pipe) into *@buf: at most FILE_MAX bytes. */
/*
 * A snapshot starts with a MessagePack map whose first key is a string. Anything
 * else is refused after the first read, with what it looks like, before the rest is
 * read (`ringprof report /dev/zero` used to hold 1 GiB before failing).
 * @return NULL if @p may be a snapshot, else why not.
 */
static const char *not_a_snapshot(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	if (i < n && (p[i] == '{' || p[i] == '['))
		return "it is JSON (a trace? use `ringprof analyze`), not a MessagePack snapshot";
	if (n == 0)
		return NULL; /* empty: the decoder says so */
	if ((p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf) {
		i = (p[0] & 0xf0) == 0x80 ? 1 : p[0] == 0xde ? 3 : 5;
		if (n <= i || (p[i] & 0xe0) == 0xa0 || p[i] == 0xd9 || p[i] == 0xda ||
		    p[i] == 0xdb || p[0] == 0x80)
			return NULL;
	}
	return "it does not start like a snapshot (a MessagePack map with string keys)";
}

static int read_all(int fd, char **buf, size_t *len, const char **bad)
{
	struct stat st;
	size_t cap, n = 0;
	char *p, *q;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (st.st_size > (off_t)FILE_MAX)
		return -EFBIG;
	/* +1: a file read whole still needs one more read() to see its end. */
	cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : MEMBUF_MIN;
	p = malloc(cap);
	while (p != NULL) {
		ssize_t got;

		if (n == cap) {
			if (cap > FILE_MAX)
				break;
			cap = cap > FILE_MAX / 2 ? (size_t)FILE_MAX + 1 : 2 * cap;
			q = realloc(p, cap);
			if (q == NULL)
				break;
			p = q;
		}
		got = read(fd, p + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			*buf = p;
			*len = n;
			return got == 0 ? 0 : -errno;
		}
		if (n == 0 && (*bad = not_a_snapshot((unsigned char *)p, (size_t)got)) != NULL) {
			free(p);
			return -EINVAL;
		}
		n += (size_t)got;
	}
	free(p);
	return n > FILE_MAX ? -EFBIG : -ENOMEM;
}

int rp_snapshot_read_file(const char *path, struct rp_report *out, char why[RP_WHY_MAX])
{
	const char *bad = NULL;
	char *buf = NULL;
	size_t len = 0, pos = 0;
	struct stat st;
	int fd, err;

	assert(path != NULL && out != NULL && why != NULL);
	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sys_fail(why, -errno, "cannot open", path);
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return sys_fail(why, -EISDIR, "cannot read", path);
	}
	err = read_all(fd, &buf, &len, &bad);
	close(fd);
	if (bad != NULL) {
		put(why, &pos, "%s: not a snapshot: %s", path, bad);
		return -EINVAL;
	}
	if (err == -EFBIG)
		put(why, &pos, "%s: larger than %u MiB: not a snapshot this reader takes", path,
		    FILE_MAX >> 20);
	else if (err)
		sys_fail(why, err, "cannot read", path);
	else if ((err = rp_snapshot_decode(buf, len, out, why)) != 0) {
		char what[RP_WHY_MAX];

		memcpy(what, why, RP_WHY_MAX);
		put(why, &pos, "%s: %s", path, what); /* which file, then what is wrong */
	}
	free(buf);
	return err;
}
