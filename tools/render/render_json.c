// SPDX-License-Identifier: MIT
/*
 * The JSON report: one object, for scripts and dashboards. Written by hand rather
 * than with yajl_gen because every integer is a uint64 and must come out exact
 * (yajl_gen_integer takes a long long), and because names come from other processes
 * and trace files: they may hold any byte, and the output must still be valid JSON.
 * So strings are escaped here: '"' and '\' with a backslash, control characters
 * (and DEL) as \u00XX, and every ill-formed UTF-8 sequence replaced by U+FFFD, one
 * per maximal ill-formed subpart (Unicode 15, 3.9 "U+FFFD substitution of maximal
 * subparts", which is also what Python's bytes.decode(errors="replace") does).
 *
 * Layout (one key per line at the top, one array element per line):
 *   {"events", "dropped", "late", "truncated", "anomalies" {kind: n, every kind},
 *    "async_expiry" {"expire_ns", "requests", "spans", "stale_max_ns",
 *                    "suspect_requests", "suspect_spans", "peak_spans",
 *                    "overstated_max", "overstated_ns"},
 *    "offcpu" {"state", "threads", "watched", "refused", "lost", "unpaired", "overflow",
 *              "overflow_ns", "late", "intervals", "total_ns"},
 *    "time_range_ns" [t_first, t_last], "clock", "writer", "unmerged_records",
 *    "caps" {"max_names", "max_tracks", "max_depth", "max_cct_nodes", "max_sources",
 *            "max_sketch_names", "max_window_names", "max_counters", "topk",
 *            "memory_bound", "subwindows", "max_window_level"},
 *    "concurrency" {"overall" DIST, "roots" DIST, ["requests" DIST,]
 *                   "by_category" {category: DIST}},
 *    "sources" [{"name", "pid", "flags" [words], "events", "dropped", "late",
 *                "truncated", "names_dropped", "nospace_dropped", "rings_nospace", "reentrant",
 *                "resyncs", "anomalies" {...}, "offcpu_idle_ns", "host", "boot_id",
 *                "anchor_realtime_ns", "anchor_monotonic_ns", "clock_shift_ns",
 *                "summary_ns", "summary_raised"}],
 *    "functions" [{"name", "category", "file", "line", "calls", "drop_lost", "errors", "started",
 *                  "milestone", "charged_ns", "charged", "primitive_calls", "self_ns", "cum_ns", "offcpu_ns",
 *                  "offcpu_cum_ns", "min_ns", "max_ns",
 *                  "mean_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns",
 *                  "midpoint_concurrency_mean"}],
 *    "edges" [{"caller", "callee", "calls", "primitive_calls", "self_ns", "cum_ns"}],
 *    "categories" {category: {"calls", "errors", "self_ns", "total_ns", "p50_ns", "p90_ns",
 *                             "p95_ns", "p99_ns"}},
 *    "counters" [{"name", "category", "samples", "last", "min", "max", "mean", "p50",
 *                 "p90", "p95", "p99"}],
 *    "windows" [{"name", "length_ns", "subwindows", "t_from", "t_to",
 *                "functions" [{"name", "category", "calls", "rate_per_s", "self_ns",
 *                              "cum_ns", "p50_ns", "p90_ns", "p95_ns", "p99_ns"}],
 *                "concurrency" {"overall" DIST, "roots" DIST},
 *                "bottlenecks" B}],
 *    "bottlenecks" B}
 * B is {"by_cum" [{"name", "category", "value_ns", "error_ns"}], "by_self" [same],
 *       "by_count" [{"name", "category", "count", "error"}],
 *       "bound" {"cum_ns", "self_ns", "count"},
 *       "slowest_spans" [{"name", "category", "source", "track", "span_id", "start_ns",
 *                         "duration_ns", "self_ns", "subtree_ns", "charged_ns",
 *                         "midpoint_concurrency"}]}
 * with the lists in report order: an entry's true weight lies in [value - error,
 * value], and a name not listed weighs at most the bound. "source" is the source's
 * name; "midpoint_concurrency" is an integer, or null when it was not known.
 * DIST is {"p50", "p90", "p95", "p99", "max", "mean", "observed_ns", "now"}: integers but for
 * "mean", mean_milli / 1000 written exactly with three decimals ("1.500").
 * "concurrency" is built from r->conc: conc[0] is "overall", conc[1] "roots" (left
 * out if missing), conc[2...] are "by_category" under their names, in report order;
 * "requests" (requests in flight: request spans only, r->requests) is there only when
 * the report has it (rp_report_has_requests());
 * it is {} when the report has none (n_conc == 0, a 1.0 snapshot). A window's is
 * built the same way from its conc[0] and conc[1] only ({} when it has none).
 * Functions come in the text report's order: cum_ns descending, self_ns descending,
 * then name, category, file, line ascending (byte order). A window's functions come
 * in its text order too: cum_ns, self_ns, calls descending, then name.
 * drop_lost: the name's spans a drop cut (in none of its figures). errors: its calls
 * whose END said RP_SPAN_ERROR (part of calls); a category's, its names' summed. started:
 * its spans begun (calls, open ones, lost ones; 0 in reports before 1.4). milestone: true for
 * a request milestone (engine/core/marks.h: each call one request's time from its start to
 * the mark, in min/max/mean/p*; no self or cum time), false for spans. charged_ns, charged
 * (1.6): batched spans' time charged to this request name and its shares (charge.h; 0:
 * none); a slowest entry's charged_ns: what was charged to that request (0 for others). async_expiry: the
 * async requests closed after drops (report.h) and the bound on concurrency they
 * leave: at most overstated_max open spans too many, each for at most overstated_ns
 * (null: unbounded, no expiry; both 0: none).
 * offcpu: how off-CPU time was measured (report.h), "state" one of "unknown", "on",
 * "refused"; a function's offcpu_ns is the part of self_ns its thread spent
 * descheduled, offcpu_cum_ns that of cum_ns; a source's offcpu_idle_ns, its threads'
 * with no span open.
 * Edges come in the report's order and name their ends. mean_ns is total_ns / calls
 * rounded down, 0 for no calls.
 * A function's p*_ns quantiles are null when it has none (no sketch: past the sketch
 * cap, evicted, or merged from inputs of which one had none; rp_report_fn_has_quantiles()),
 * never 0. midpoint_concurrency_mean is
 * midpoint_sum / midpoint_count as a double with 6 significant digits ("%.6g": "0",
 * "2.5", "1.84467e+19", all valid JSON numbers), 0 when midpoint_count is 0.
 * rate_per_s is calls / ((t_to - max(t_from, t_first)) / 1e9), the part of the window
 * the events cover (rp_render_covered_ns()), exact with three decimals rounded
 * half up ("1.667"), 0 when t_to <= t_from. Categories and counters come in report
 * order. Counter "last", "min" and "max" are int64s; "mean" and the quantiles are
 * doubles written with the fewest digits (15 to 17) that read back exactly, null for
 * NaN or an infinity. Sketch buckets (fns[].dur, ...) are not written: they are for
 * snapshots.
 * Untrusted indices: an edge naming no function refuses the report (-EINVAL, as
 * before 1.2); every 1.2 list entry naming no function is written with name and
 * category "?", a span naming no source with source "?".
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "render_export.h"
#include "render_priv.h"


/*
 * @sep "@key": at @b (96 bytes; @sep and @key are literals of this file), @return
 * its length, or 0 if they do not fit. One fwrite of it, and integers written
 * here rather than by fprintf (~1,000 instructions a call, the report's largest
 * cost on Chrome traces).
 */
static size_t key_text(char *b, const char *sep, const char *key)
{
	size_t ns = strlen(sep), nk = strlen(key);

	if (ns + nk > 64)
		return 0;
	memcpy(b, sep, ns);
	b[ns] = '"';
	memcpy(b + ns + 1, key, nk);
	b[ns + 1 + nk] = '"', b[ns + 2 + nk] = ':';
	return ns + nk + 3;
}

static void put_key(FILE *out, const char *sep, const char *key)
{
	char b[96];
	size_t n = key_text(b, sep, key);

	if (n == 0)
		fprintf(out, "%s\"%s\":", sep, key);
	else
		fwrite_unlocked(b, 1, n, out);
}

static void put_u64(FILE *out, const char *sep, const char *key, uint64_t v)
{
	char b[96], d[20];
	size_t n = key_text(b, sep, key);
	int k = sizeof(d);

	if (n == 0) {
		fprintf(out, "%s\"%s\":%" PRIu64, sep, key, v);
		return;
	}
	do { /* %PRIu64 */
		d[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	memcpy(b + n, d + k, sizeof(d) - (size_t)k);
	fwrite_unlocked(b, 1, n + sizeof(d) - (size_t)k, out);
}

/*
 * A list element built in memory and written with one fwrite: the functions, edges
 * and windows' functions grow with the trace, ~20 numbers each, and a stdio call
 * costs more than the digits. Whatever goes to @out directly (a string with bytes
 * to escape, a number through printf) is written after the row is flushed, so the
 * bytes come in order.
 */
struct row {
	FILE *out;
	size_t n;
	char b[1024];
};

static void row_flush(struct row *r)
{
	if (r->n > 0)
		fwrite_unlocked(r->b, 1, r->n, r->out);
	r->n = 0;
}

static void row_put(struct row *r, const char *s, size_t n)
{
	if (n > sizeof(r->b) - r->n) {
		row_flush(r);
		if (n > sizeof(r->b)) {
			fwrite_unlocked(s, 1, n, r->out);
			return;
		}
	}
	memcpy(r->b + r->n, s, n);
	r->n += n;
}

/* A string literal of this file (its length known at compile time). */
#define row_lit(r, lit) row_put((r), "" lit, sizeof(lit) - 1)

/* %PRIu64, two digits at a time. */
static void row_u64(struct row *r, uint64_t v)
{
	static const char d2[] = "00010203040506070809101112131415161718192021222324"
				 "25262728293031323334353637383940414243444546474849"
				 "50515253545556575859606162636465666768697071727374"
				 "75767778798081828384858687888990919293949596979899";
	char d[20], *p = d + sizeof(d);

	while (v >= 100) {
		p -= 2;
		memcpy(p, d2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, d2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	row_put(r, p, (size_t)(d + sizeof(d) - p));
}

/* @lit (the separator and "key":) and @v. */
#define row_key_u64(r, lit, v) (row_lit((r), lit), row_u64((r), (v)))

/* rp_render_json_str(): printable ASCII but '"' and '\\' copied, anything else by it. */
static void row_str(struct row *r, const char *s)
{
	size_t n = 0;

	if (s == NULL) /* as rp_render_json_str(): "" */
		s = "";
	while ((unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f && s[n] != '"' &&
	       s[n] != '\\')
		n++;
	if (s[n] == '\0') {
		row_lit(r, "\"");
		row_put(r, s, n);
		row_lit(r, "\"");
	} else {
		row_flush(r);
		rp_render_json_str(r->out, s);
	}
}

/* elem(), into @r. */
static void row_elem(struct row *r, uint32_t i, int ind)
{
	static const char pad[] = "\n                ";

	row_put(r, i ? "," : "[", 1);
	if ((size_t)ind + 2 < sizeof(pad) - 1) {
		row_put(r, pad, (size_t)ind + 3);
	} else {
		row_flush(r);
		fprintf(r->out, "\n%*s", ind + 2, "");
	}
}

static void put_anomalies(FILE *out, const char *sep, const uint64_t a[RP_ANOM_KIND_COUNT])
{
	put_key(out, sep, "anomalies");
	for (unsigned k = 0; k < RP_ANOM_KIND_COUNT; k++)
		put_u64(out, k ? "," : "{", rp_anomaly_names[k], a[k]);
	fputc('}', out);
}

static void put_caps(FILE *out, const struct rp_report_caps *c)
{
	put_key(out, ",\n  ", "caps");
	fprintf(out,
		"{\"max_names\":%" PRIu32 ",\"max_tracks\":%" PRIu32 ",\"max_depth\":%" PRIu32
		",\"max_cct_nodes\":%" PRIu32 ",\"max_sources\":%" PRIu32
		",\"max_sketch_names\":%" PRIu32 ",\"max_window_names\":%" PRIu32
		",\"max_counters\":%" PRIu32 ",\"topk\":%" PRIu32 ",\"memory_bound\":%" PRIu64
		",\"subwindows\":%" PRIu32 ",\"max_window_level\":%" PRIu32 "}",
		c->max_names, c->max_tracks, c->max_depth, c->max_cct_nodes, c->max_sources,
		c->max_sketch_names, c->max_window_names, c->max_counters, c->topk,
		c->memory_bound, c->subwindows, c->max_window_level);
}

/* One word per known RP_SRC_* bit; unknown bits as one "0x..." word. */
static void put_flags(FILE *out, uint32_t flags)
{
	static const char *const words[] = { "exited", "dead", "file", "refused" };
	const uint32_t known = RP_SRC_EXITED | RP_SRC_DEAD | RP_SRC_FILE | RP_SRC_REFUSED;
	const char *sep = "[";

	for (unsigned i = 0; i < 4; i++) {
		if (flags & (1u << i)) {
			fprintf(out, "%s\"%s\"", sep, words[i]);
			sep = ",";
		}
	}
	if (flags & ~known)
		fprintf(out, "%s\"0x%" PRIx32 "\"", sep, flags & ~known);
	fputs(flags ? "]" : "[]", out);
}

/* 1.4: host, boot id, clock anchor and merge shift; null where not known. */
static void put_source_host(FILE *out, const struct rp_report_source *s)
{
	const char *str[2] = { s->host, s->boot_id }, *key[2] = { "host", "boot_id" };

	for (int i = 0; i < 2; i++) {
		put_key(out, ",", key[i]);
		if (str[i] != NULL && str[i][0] != '\0')
			rp_render_json_str(out, str[i]);
		else
			fputs("null", out);
	}
	if (s->anchor_realtime_ns != 0) {
		put_u64(out, ",", "anchor_realtime_ns", s->anchor_realtime_ns);
		put_u64(out, ",", "anchor_monotonic_ns", s->anchor_monotonic_ns);
	} else {
		fputs(",\"anchor_realtime_ns\":null,\"anchor_monotonic_ns\":null", out);
	}
	fprintf(out, ",\"clock_shift_ns\":%" PRId64, s->clock_shift_ns);
}

static void put_source(FILE *out, const struct rp_report_source *s)
{
	put_key(out, "{", "name");
	rp_render_json_str(out, s->name);
	fprintf(out, ",\"pid\":%" PRId32 ",\"flags\":", s->pid);
	put_flags(out, s->flags);
	put_u64(out, ",", "events", s->events);
	put_u64(out, ",", "dropped", s->dropped);
	put_u64(out, ",", "late", s->late);
	put_u64(out, ",", "truncated", s->truncated);
	put_u64(out, ",", "names_dropped", s->names_dropped);
	put_u64(out, ",", "nospace_dropped", s->nospace_dropped);
	put_u64(out, ",", "rings_nospace", s->rings_nospace);
	put_u64(out, ",", "reentrant", s->reentrant);
	put_u64(out, ",", "resyncs", s->resyncs);
	put_anomalies(out, ",", s->anomalies);
	put_u64(out, ",", "offcpu_idle_ns", s->offcpu_idle_ns);
	put_source_host(out, s);
	put_u64(out, ",", "summary_ns", s->summary_ns);
	put_u64(out, ",", "summary_raised", s->summary_raised);
	fputc('}', out);
}

/* ,"p50_ns":..,"p90_ns":..,"p95_ns":..,"p99_ns":.. */
static void put_quantiles_ns(FILE *out, uint64_t p50, uint64_t p90, uint64_t p95, uint64_t p99)
{
	put_u64(out, ",", "p50_ns", p50);
	put_u64(out, ",", "p90_ns", p90);
	put_u64(out, ",", "p95_ns", p95);
	put_u64(out, ",", "p99_ns", p99);
}

static void put_fn(struct row *w, const struct rp_report_fn *f)
{
	row_lit(w, "{\"name\":");
	row_str(w, f->name);
	row_lit(w, ",\"category\":");
	row_str(w, f->category);
	row_lit(w, ",\"file\":");
	row_str(w, f->file);
	row_key_u64(w, ",\"line\":", f->line);
	row_key_u64(w, ",\"calls\":", f->calls);
	row_key_u64(w, ",\"drop_lost\":", f->drop_lost);
	row_key_u64(w, ",\"errors\":", f->errors);
	row_key_u64(w, ",\"started\":", f->started);
	if (f->milestone)
		row_lit(w, ",\"milestone\":true");
	else
		row_lit(w, ",\"milestone\":false");
	row_key_u64(w, ",\"charged_ns\":", f->charged_ns);
	row_key_u64(w, ",\"charged\":", f->charged);
	row_key_u64(w, ",\"primitive_calls\":", f->primitive_calls);
	if ((int64_t)f->self_ns < 0) { /* torch nesting only (report.h) */
		row_lit(w, ",\"self_ns\":-");
		row_u64(w, 0 - f->self_ns); /* %PRId64 of it, INT64_MIN included */
	} else {
		row_key_u64(w, ",\"self_ns\":", f->self_ns);
	}
	row_key_u64(w, ",\"cum_ns\":", f->cum_ns);
	row_key_u64(w, ",\"offcpu_ns\":", f->offcpu_ns);
	row_key_u64(w, ",\"offcpu_cum_ns\":", f->offcpu_cum_ns);
	row_key_u64(w, ",\"min_ns\":", f->min_ns);
	row_key_u64(w, ",\"max_ns\":", f->max_ns);
	row_key_u64(w, ",\"mean_ns\":", f->calls ? f->total_ns / f->calls : 0);
	if (rp_report_fn_has_quantiles(f)) {
		row_key_u64(w, ",\"p50_ns\":", f->p50_ns);
		row_key_u64(w, ",\"p90_ns\":", f->p90_ns);
		row_key_u64(w, ",\"p95_ns\":", f->p95_ns);
		row_key_u64(w, ",\"p99_ns\":", f->p99_ns);
	} else {
		row_lit(w, ",\"p50_ns\":null,\"p90_ns\":null,\"p95_ns\":null,\"p99_ns\":null");
	}
	row_lit(w, ",\"midpoint_concurrency_mean\":");
	if (f->midpoint_count == 0) {
		row_lit(w, "0}");
	} else { /* finite and >= 0: %g writes a valid JSON number */
		char g[48];
		int n = snprintf(g, sizeof(g), "%.6g}",
				 (double)f->midpoint_sum / (double)f->midpoint_count);

		row_put(w, g, n > 0 ? (size_t)n : 0);
	}
}

/* DIST (see the layout above), under @key. */
static void put_conc(FILE *out, const char *sep, const char *key,
		     const struct rp_report_conc *c)
{
	fputs(sep, out);
	rp_render_json_str(out, key);
	fprintf(out,
		":{\"p50\":%" PRIu32 ",\"p90\":%" PRIu32 ",\"p95\":%" PRIu32 ",\"p99\":%" PRIu32
		",\"max\":%" PRIu32 ",\"mean\":%" PRIu64 ".%03" PRIu64 ",\"observed_ns\":%" PRIu64
		",\"now\":%" PRIu32 "}",
		c->p50, c->p90, c->p95, c->p99, c->max, c->mean_milli / 1000,
		c->mean_milli % 1000, c->observed_ns, c->now);
}

static void put_concurrency(FILE *out, const struct rp_report *r)
{
	put_key(out, ",\n  ", "concurrency");
	if (r->n_conc == 0) {
		fputs("{}", out);
		return;
	}
	put_conc(out, "{\n    ", "overall", &r->conc[0]);
	if (r->n_conc > 1)
		put_conc(out, ",\n    ", "roots", &r->conc[1]);
	if (rp_report_has_requests(r))
		put_conc(out, ",\n    ", "requests", &r->requests);
	fputs(",\n    \"by_category\":", out);
	for (uint32_t i = 2; i < r->n_conc; i++)
		put_conc(out, i > 2 ? ",\n      " : "{\n      ", r->conc[i].name, &r->conc[i]);
	fputs(r->n_conc > 2 ? "\n    }\n  }" : "{}\n  }", out);
}

static void put_edge(struct row *w, const struct rp_report *r, const struct rp_report_edge *e)
{
	row_lit(w, "{\"caller\":");
	row_str(w, r->fns[e->caller].name);
	row_lit(w, ",\"callee\":");
	row_str(w, r->fns[e->callee].name);
	row_key_u64(w, ",\"calls\":", e->calls);
	row_key_u64(w, ",\"primitive_calls\":", e->primitive_calls);
	row_key_u64(w, ",\"self_ns\":", e->self_ns);
	row_key_u64(w, ",\"cum_ns\":", e->cum_ns);
	row_lit(w, "}");
}

/* Async requests expired after drops, and the bound on concurrency they leave. */
static void put_expiry(FILE *out, const struct rp_report_expiry *x)
{
	uint64_t spans, ns;

	rp_report_expiry_bound(x, &spans, &ns);
	put_key(out, ",\n  ", "async_expiry");
	put_u64(out, "{", "expire_ns", x->expire_ns);
	put_u64(out, ",", "requests", x->requests);
	put_u64(out, ",", "spans", x->spans);
	put_u64(out, ",", "stale_max_ns", x->stale_max_ns);
	put_u64(out, ",", "suspect_requests", x->suspect_requests);
	put_u64(out, ",", "suspect_spans", x->suspect_spans);
	put_u64(out, ",", "peak_spans", x->peak_spans);
	put_u64(out, ",", "overstated_max", spans);
	put_key(out, ",", "overstated_ns");
	if (ns == UINT64_MAX)
		fputs("null", out);
	else
		fprintf(out, "%" PRIu64, ns);
	fputc('}', out);
}

static void put_offcpu(FILE *out, const struct rp_report_offcpu *o)
{
	static const char *const states[] = { "unknown", "on", "refused" };

	put_key(out, ",\n  ", "offcpu");
	put_key(out, "{", "state");
	rp_render_json_str(out, o->state < 3 ? states[o->state] : "unknown");
	put_u64(out, ",", "threads", o->threads);
	put_u64(out, ",", "watched", o->watched);
	put_u64(out, ",", "refused", o->refused);
	put_u64(out, ",", "lost", o->lost);
	put_u64(out, ",", "unpaired", o->unpaired);
	put_u64(out, ",", "overflow", o->overflow);
	put_u64(out, ",", "overflow_ns", o->overflow_ns);
	put_u64(out, ",", "late", o->late);
	put_u64(out, ",", "intervals", o->intervals);
	put_u64(out, ",", "total_ns", o->total_ns);
	fputc('}', out);
}

static void put_totals(FILE *out, const struct rp_report *r)
{
	put_u64(out, "{\n  ", "events", r->events);
	put_u64(out, ",\n  ", "dropped", r->dropped);
	put_u64(out, ",\n  ", "late", r->late);
	put_u64(out, ",\n  ", "truncated", r->truncated);
	put_anomalies(out, ",\n  ", r->anomalies);
	put_expiry(out, &r->expiry);
	put_offcpu(out, &r->offcpu);
	put_key(out, ",\n  ", "time_range_ns");
	fprintf(out, "[%" PRIu64 ",%" PRIu64 "]", r->t_first, r->t_last);
	put_key(out, ",\n  ", "clock");
	rp_render_json_str(out, r->clock);
	put_key(out, ",\n  ", "writer"); /* null: a snapshot older than 1.4 */
	if (r->writer != NULL && r->writer[0] != '\0')
		rp_render_json_str(out, r->writer);
	else
		fputs("null", out);
	/* 1.5: records published but not yet merged when a live snapshot was taken */
	put_u64(out, ",\n  ", "unmerged_records", r->unmerged_records);
	put_caps(out, &r->caps);
	put_concurrency(out, r);
}

/* Before element @i of a list whose closing bracket sits at indent @ind. */
static void elem(FILE *out, uint32_t i, int ind)
{
	fprintf(out, "%s\n%*s", i ? "," : "[", ind + 2, "");
}

/* After the @n elements of that list: "[]" when there were none. */
static void end_list(FILE *out, uint32_t n, int ind)
{
	if (n)
		fprintf(out, "\n%*s]", ind, "");
	else
		fputs("[]", out);
}

/* @lead ("{" or ","), a new line at indent @ind and "key": */
static void nl_key(FILE *out, const char *lead, int ind, const char *key)
{
	fprintf(out, "%s\n%*s\"%s\":", lead, ind, "", key);
}

static void put_lists(FILE *out, const struct rp_report *r,
		      const struct rp_report_fn *const *order)
{
	struct row w = { .out = out };

	nl_key(out, ",", 2, "sources");
	for (uint32_t i = 0; i < r->n_sources; i++) {
		elem(out, i, 2);
		put_source(out, &r->sources[i]);
	}
	end_list(out, r->n_sources, 2);
	nl_key(out, ",", 2, "functions");
	for (uint32_t i = 0; i < r->n_fns; i++) {
		row_elem(&w, i, 2);
		put_fn(&w, order[i]);
	}
	row_flush(&w);
	end_list(out, r->n_fns, 2);
	nl_key(out, ",", 2, "edges");
	for (uint32_t i = 0; i < r->n_edges; i++) {
		row_elem(&w, i, 2);
		put_edge(&w, r, &r->edges[i]);
	}
	row_flush(&w);
	end_list(out, r->n_edges, 2);
}

/*
 * A double as the shortest of %.15g, %.16g and %.17g that reads back as the same
 * value; null for NaN and infinities, which JSON cannot hold.
 */
static void put_real(FILE *out, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		fputs("null", out);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fputs(buf, out);
}

static void put_real_key(FILE *out, const char *key, double v)
{
	put_key(out, ",", key);
	put_real(out, v);
}

/* "name" and "category" of fns[@fn], "?" for both when @fn is out of range. */
static void put_fn_ref(FILE *out, const char *sep, const struct rp_report *r, uint32_t fn)
{
	const struct rp_report_fn *f = rp_render_fn_at(r, fn);

	put_key(out, sep, "name");
	rp_render_json_str(out, f ? f->name : "?");
	put_key(out, ",", "category");
	rp_render_json_str(out, f ? f->category : "?");
}

/* One bottleneck list, its keys at indent @ind. */
static void put_tops(FILE *out, const struct rp_report *r, const char *lead, int ind,
		     const char *key, const struct rp_report_top *t, uint32_t n, bool count)
{
	nl_key(out, lead, ind, key);
	for (uint32_t i = 0; i < n; i++) {
		elem(out, i, ind);
		put_fn_ref(out, "{", r, t[i].fn);
		put_u64(out, ",", count ? "count" : "value_ns", t[i].value);
		put_u64(out, ",", count ? "error" : "error_ns", t[i].error);
		fputc('}', out);
	}
	end_list(out, n, ind);
}

static void put_span(FILE *out, const struct rp_report *r, const struct rp_report_span *s)
{
	put_fn_ref(out, "{", r, s->fn);
	put_key(out, ",", "source");
	rp_render_json_str(out, s->source < r->n_sources ? r->sources[s->source].name : "?");
	put_u64(out, ",", "track", s->track);
	put_u64(out, ",", "span_id", s->span_id);
	put_u64(out, ",", "start_ns", s->start_ns);
	put_u64(out, ",", "duration_ns", s->dur_ns);
	put_u64(out, ",", "self_ns", s->self_ns);
	put_u64(out, ",", "subtree_ns", s->subtree_ns);
	put_u64(out, ",", "charged_ns", s->charged_ns);
	put_key(out, ",", "midpoint_concurrency");
	if (s->concurrency_known)
		fprintf(out, "%" PRIu32 "}", s->concurrency);
	else
		fputs("null}", out);
}

/* B (see the layout above), its keys at indent @ind, its closing brace at @ind - 2. */
static void put_bottlenecks(FILE *out, const struct rp_report *r,
			    const struct rp_report_bottlenecks *b, int ind)
{
	put_tops(out, r, "{", ind, "by_cum", b->by_cum, b->n_by_cum, false);
	put_tops(out, r, ",", ind, "by_self", b->by_self, b->n_by_self, false);
	put_tops(out, r, ",", ind, "by_count", b->by_count, b->n_by_count, true);
	nl_key(out, ",", ind, "bound");
	fprintf(out, "{\"cum_ns\":%" PRIu64 ",\"self_ns\":%" PRIu64 ",\"count\":%" PRIu64 "}",
		b->bound_cum, b->bound_self, b->bound_count);
	nl_key(out, ",", ind, "slowest_spans");
	for (uint32_t i = 0; i < b->n_slowest; i++) {
		elem(out, i, ind);
		put_span(out, r, &b->slowest[i]);
	}
	end_list(out, b->n_slowest, ind);
	fprintf(out, "\n%*s}", ind - 2, "");
}

static void put_wfn(struct row *w, const struct rp_report *r, const struct rp_report_wfn *f,
		    uint64_t range_ns)
{
	const struct rp_report_fn *fn = rp_render_fn_at(r, f->fn);
	char rate[48];

	row_lit(w, "{\"name\":"); /* put_fn_ref() */
	row_str(w, fn ? fn->name : "?");
	row_lit(w, ",\"category\":");
	row_str(w, fn ? fn->category : "?");
	row_key_u64(w, ",\"calls\":", f->calls);
	row_lit(w, ",\"rate_per_s\":");
	rp_render_rate(rate, f->calls, range_ns);
	row_put(w, rate, strlen(rate));
	row_key_u64(w, ",\"self_ns\":", f->self_ns);
	row_key_u64(w, ",\"cum_ns\":", f->cum_ns);
	row_key_u64(w, ",\"p50_ns\":", f->p50_ns);
	row_key_u64(w, ",\"p90_ns\":", f->p90_ns);
	row_key_u64(w, ",\"p95_ns\":", f->p95_ns);
	row_key_u64(w, ",\"p99_ns\":", f->p99_ns);
	row_lit(w, "}");
}

/* A window at indent 4; its functions in display order (rp_render_wfn_order()). */
static int put_window(FILE *out, const struct rp_report *r, const struct rp_report_window *w)
{
	uint64_t range = rp_render_covered_ns(r, w); /* rates: over what events cover */
	uint32_t *order = rp_render_wfn_order(r, w);
	struct row row = { .out = out };

	if (order == NULL)
		return -ENOMEM;
	put_key(out, "{", "name");
	rp_render_json_str(out, w->name);
	put_u64(out, ",", "length_ns", w->length_ns);
	put_u64(out, ",", "subwindows", w->subwindows);
	put_u64(out, ",", "t_from", w->t_from);
	put_u64(out, ",", "t_to", w->t_to);
	nl_key(out, ",", 6, "functions");
	for (uint32_t i = 0; i < w->n_fns; i++) {
		row_elem(&row, i, 6);
		put_wfn(&row, r, &w->fns[order[i]], range);
	}
	row_flush(&row);
	end_list(out, w->n_fns, 6);
	free(order);
	nl_key(out, ",", 6, "concurrency");
	if (w->n_conc > 0)
		put_conc(out, "{", "overall", &w->conc[0]);
	if (w->n_conc > 1)
		put_conc(out, ",", "roots", &w->conc[1]);
	fputs(w->n_conc ? "}" : "{}", out);
	nl_key(out, ",", 6, "bottlenecks");
	put_bottlenecks(out, r, &w->top, 8);
	fputs("\n    }", out);
	return 0;
}

/* The errors of @c's spans: its functions' (a name has one category), summed. */
static uint64_t cat_errors(const struct rp_report *r, const struct rp_report_cat *c)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < r->n_fns; i++)
		if (strcmp(r->fns[i].category ? r->fns[i].category : "", c->name ? c->name : "") ==
		    0)
			n += r->fns[i].errors;
	return n;
}

static void put_cat(FILE *out, const struct rp_report *r, const struct rp_report_cat *c)
{
	rp_render_json_str(out, c->name);
	put_u64(out, ":{", "calls", c->calls);
	put_u64(out, ",", "errors", cat_errors(r, c));
	put_u64(out, ",", "self_ns", c->self_ns);
	put_u64(out, ",", "total_ns", c->total_ns);
	put_quantiles_ns(out, c->p50_ns, c->p90_ns, c->p95_ns, c->p99_ns);
	fputc('}', out);
}

static void put_counter(FILE *out, const struct rp_report_counter *c)
{
	put_key(out, "{", "name");
	rp_render_json_str(out, c->name);
	put_key(out, ",", "category");
	rp_render_json_str(out, c->category);
	put_u64(out, ",", "samples", c->samples);
	fprintf(out, ",\"last\":%" PRId64 ",\"min\":%" PRId64 ",\"max\":%" PRId64, c->last,
		c->min, c->max);
	put_real_key(out, "mean", c->mean);
	put_real_key(out, "p50", c->p50);
	put_real_key(out, "p90", c->p90);
	put_real_key(out, "p95", c->p95);
	put_real_key(out, "p99", c->p99);
	fputc('}', out);
}

/* Report 1.2: categories, counters, windows and the all-time bottlenecks. */
static int put_analyses(FILE *out, const struct rp_report *r)
{
	int err;

	nl_key(out, ",", 2, "categories");
	for (uint32_t i = 0; i < r->n_cats; i++) {
		fputs(i ? ",\n    " : "{\n    ", out);
		put_cat(out, r, &r->cats[i]);
	}
	fputs(r->n_cats ? "\n  }" : "{}", out);
	nl_key(out, ",", 2, "counters");
	for (uint32_t i = 0; i < r->n_counters; i++) {
		elem(out, i, 2);
		put_counter(out, &r->counters[i]);
	}
	end_list(out, r->n_counters, 2);
	nl_key(out, ",", 2, "windows");
	for (uint32_t i = 0; i < r->n_windows; i++) {
		elem(out, i, 2);
		if ((err = put_window(out, r, &r->windows[i])) != 0)
			return err;
	}
	end_list(out, r->n_windows, 2);
	nl_key(out, ",", 2, "bottlenecks");
	put_bottlenecks(out, r, &r->bottlenecks, 4);
	fputs("\n}\n", out);
	return 0;
}

/*
 * rp_render_json() - see render.h and the layout above.
 * Return: 0; -EINVAL (nothing written) if an edge names a function outside r->fns;
 * -ENOMEM; -EIO when writing to @out failed.
 */
int rp_render_json(const struct rp_report *r, FILE *out)
{
	const struct rp_report_fn **order;
	int err;

	assert(r != NULL && out != NULL);
	for (uint32_t i = 0; i < r->n_edges; i++)
		if (r->edges[i].caller >= r->n_fns || r->edges[i].callee >= r->n_fns)
			return -EINVAL;
	order = rp_render_fn_order(r);
	if (order == NULL)
		return -ENOMEM;
	put_totals(out, r);
	rp_render_steps_json(r, out); /* export: "steps", "recorder" */
	rp_render_device_json(r, out);
	put_lists(out, r, order);
	free(order);
	err = put_analyses(out, r);
	if (err)
		return err;
	return fflush(out) || ferror(out) ? -EIO : 0;
}
